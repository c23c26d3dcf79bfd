//! Protected paths: files whose change would let a session raise its own permissions or
//! run code later without asking — gyre's settings, git's hooks and config, MCP server
//! lists, shell start-up files. Edit and Write on them always ask, in every mode but
//! `bypassPermissions`, and no allow rule or "accept edits" lifts that.

use std::ffi::OsStr;
use std::path::{Component, Path};

/// Directories whose whole content is protected: settings and hooks of gyre and Claude
/// Code (`.claude/settings.local.json` would be read by the other agent), and git's
/// `hooks/`, `config` and `info/` (a hook or `core.fsmonitor` runs code on the next
/// `git status`).
const PROTECTED_DIRS: &[&str] = &[".git", ".gyre", ".claude"];

/// File names protected wherever they are: shell and tool start-up files that run code
/// at the next shell or git command, and the MCP server list (it names programs to run).
const PROTECTED_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".inputrc",
    ".envrc",
    ".gitconfig",
    ".gitmodules",
    ".mcp.json",
];

/// Why `path` is protected, or `None` when it is not. `path` is the resolved path the
/// tool will open; a symlink to a protected file is protected too because resolution
/// follows it.
#[must_use]
pub fn protected_reason(path: &Path) -> Option<String> {
    for component in path.components() {
        if let Component::Normal(name) = component
            && let Some(dir) = PROTECTED_DIRS.iter().find(|d| OsStr::new(d) == name)
        {
            return Some(format!(
                "{} is inside {dir}/, which holds configuration that could raise permissions or run code",
                path.display()
            ));
        }
    }
    let name = path.file_name()?;
    PROTECTED_FILES
        .iter()
        .find(|f| OsStr::new(f) == name)
        .map(|f| {
            format!(
                "{} is a protected file ({f} can run code or change settings the next time it is read)",
                path.display()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_git_and_rc_files_are_protected() {
        for p in [
            "/p/.gyre/settings.local.json",
            "/p/.gyre/settings.json",
            "/home/u/.gyre/settings.json",
            "/p/.claude/settings.json",
            "/p/.git/hooks/pre-commit",
            "/p/.git/config",
            "/p/sub/.git/hooks/post-checkout",
            "/home/u/.bashrc",
            "/home/u/.zshrc",
            "/home/u/.profile",
            "/p/.mcp.json",
        ] {
            assert!(protected_reason(Path::new(p)).is_some(), "{p}");
        }
    }

    #[test]
    fn ordinary_files_are_not_protected() {
        for p in [
            "/p/src/main.rs",
            "/p/.github/workflows/ci.yml",
            "/p/.gitignore",
            "/p/gyre/settings.json",
            "/p/notes.bashrc.md",
        ] {
            assert!(protected_reason(Path::new(p)).is_none(), "{p}");
        }
    }
}
