//! Starting a cargo from a process that cargo started (`cargo xtask`, a test).
//!
//! Cargo gives the programs it runs the variables it sets for a crate being built:
//! `CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, `CARGO_CRATE_NAME`, … A child cargo inherits
//! them, and a build script that tracks one (ring's tracks `CARGO_MANIFEST_DIR` and the
//! `CARGO_PKG_*` it reads) then sees a different value than in a cargo started from the
//! shell. Each switch between the two rebuilds that crate and everything above it (the
//! TLS stack, the HTTP client, gyre). A child cargo started through [`command`] sees
//! the environment the user's shell had, so both share one build.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// Whether cargo sets `name` for a crate it builds or runs (so it is not the user's).
///
/// Cargo's own configuration (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`,
/// `CARGO_TERM_*`, …) is the user's and is kept. `CARGO` itself is kept: the child
/// cargo sets it anew for whatever it starts.
#[must_use]
pub fn is_set_by_cargo(name: &str) -> bool {
    name.starts_with("CARGO_PKG_")
        || name.starts_with("CARGO_BIN_EXE_")
        || matches!(
            name,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

/// `cargo` (the path cargo gave us in `CARGO`, or the one on `PATH`) to run in
/// `workspace`, without the variables cargo set for this process ([`is_set_by_cargo`]).
#[must_use]
pub fn command(workspace: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(workspace);
    scrub(&mut command);
    command
}

/// Removes from `command`'s environment every variable cargo set for this process.
pub fn scrub(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_set_by_cargo) {
            command.env_remove(OsStr::new(&key));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_cargo_sets_for_a_crate_are_dropped_and_the_users_are_kept() {
        for set in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_EXE_gyre",
            "CARGO_PRIMARY_PACKAGE",
        ] {
            assert!(is_set_by_cargo(set), "{set}");
        }
        for user in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "CARGO_TERM_COLOR",
            "CARGO_INCREMENTAL",
            "PATH",
        ] {
            assert!(!is_set_by_cargo(user), "{user}");
        }
    }

    #[test]
    fn a_child_cargo_does_not_inherit_this_test_crates_manifest_dir() {
        // `cargo test` set CARGO_MANIFEST_DIR for this process.
        assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
        let command = command(Path::new("."));
        let removed: Vec<_> = command
            .get_envs()
            .filter(|(_, value)| value.is_none())
            .map(|(key, _)| key.to_string_lossy().into_owned())
            .collect();
        assert!(
            removed.iter().any(|k| k == "CARGO_MANIFEST_DIR"),
            "{removed:?}"
        );
        assert!(!removed.iter().any(|k| k == "CARGO_HOME"), "{removed:?}");
    }
}
