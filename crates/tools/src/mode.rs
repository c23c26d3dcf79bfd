//! The permission modes, and the session's mode, shared and changeable mid-session
//! (ExitPlanMode leaves plan mode; a UI or the SDK may switch it too).

use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};

/// How much is allowed without a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PermissionMode {
    /// Read-only tools inside the working directories; the rest needs a rule.
    #[default]
    Default,
    /// Also Edit and Write inside the working directories.
    AcceptEdits,
    /// Only read-only tools.
    Plan,
    /// Everything but what a deny (or ask) rule names.
    BypassPermissions,
}

impl PermissionMode {
    /// The name used by `--permission-mode` and settings files.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A shared, mutable permission mode: clones see the same mode.
#[derive(Debug, Clone, Default)]
pub struct ModeHandle(Arc<RwLock<PermissionMode>>);

impl ModeHandle {
    /// A handle starting in `mode`.
    #[must_use]
    pub fn new(mode: PermissionMode) -> Self {
        Self(Arc::new(RwLock::new(mode)))
    }

    /// The mode now.
    #[must_use]
    pub fn get(&self) -> PermissionMode {
        *self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Switches the mode for every holder.
    pub fn set(&self, mode: PermissionMode) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = mode;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_sees_the_switch() {
        let mode = ModeHandle::new(PermissionMode::Plan);
        let other = mode.clone();
        other.set(PermissionMode::Default);
        assert_eq!(mode.get(), PermissionMode::Default);
    }
}
