//! The session's permission mode, shared and changeable mid-session (ExitPlanMode
//! leaves plan mode; a UI or the SDK may switch it too).

use std::sync::{Arc, PoisonError, RwLock};

use crate::PermissionMode;

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
