//! Settings files, merged with documented precedence (SPEC §9):
//! `~/.gyre/settings.json` < `.gyre/settings.json` < `.gyre/settings.local.json` < flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Permission rules and the default mode from settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionSettings {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub default_mode: Option<String>,
}

/// The merged settings of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub permissions: PermissionSettings,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Hook commands by event, as Claude Code's settings write them (read by `hooks.rs`).
    #[serde(default)]
    pub hooks: BTreeMap<String, Vec<serde_json::Value>>,
}

/// A settings file that could not be used: which file, which line, what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}:{line}:{column}: invalid settings: {message}. Fix the file or move it aside.")]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: could not read settings: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Settings {
    /// The files read for a session in `cwd`, lowest precedence first.
    #[must_use]
    pub fn paths(gyre_home: &Path, cwd: &Path) -> Vec<PathBuf> {
        vec![
            gyre_home.join("settings.json"),
            cwd.join(".gyre").join("settings.json"),
            cwd.join(".gyre").join("settings.local.json"),
        ]
    }

    /// Parses one settings file's text.
    ///
    /// # Errors
    /// Malformed JSON or wrong types, with the line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Self, SettingsError> {
        serde_json::from_str(text).map_err(|e| SettingsError::Invalid {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// Loads and merges every settings file that exists.
    ///
    /// # Errors
    /// The first file that cannot be read or parsed.
    pub fn load(gyre_home: &Path, cwd: &Path) -> Result<Self, SettingsError> {
        let mut merged = Self::default();
        for path in Self::paths(gyre_home, cwd) {
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(SettingsError::Read { path, source }),
            };
            merged.merge(Self::parse(&path, &text)?);
        }
        Ok(merged)
    }

    /// Layers `other` over `self`: scalars replace, rule lists and env accumulate.
    pub fn merge(&mut self, other: Self) {
        if other.model.is_some() {
            self.model = other.model;
        }
        if other.permissions.default_mode.is_some() {
            self.permissions.default_mode = other.permissions.default_mode;
        }
        self.permissions.allow.extend(other.permissions.allow);
        self.permissions.ask.extend(other.permissions.ask);
        self.permissions.deny.extend(other.permissions.deny);
        self.env.extend(other.env);
        for (event, matchers) in other.hooks {
            self.hooks.entry(event).or_default().extend(matchers);
        }
    }

    /// The merged `hooks` as one JSON object.
    #[must_use]
    pub fn hooks_value(&self) -> serde_json::Value {
        serde_json::json!(self.hooks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_files_win_and_rules_accumulate() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cwd.path().join(".gyre")).unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"model":"a","permissions":{"allow":["Read"],"defaultMode":"plan"}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.json"),
            r#"{"model":"b","permissions":{"deny":["Bash"]}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.local.json"),
            r#"{"permissions":{"allow":["Edit"]},"env":{"X":"1"}}"#,
        )
        .unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(s.model.as_deref(), Some("b"));
        assert_eq!(s.permissions.allow, ["Read", "Edit"]);
        assert_eq!(s.permissions.deny, ["Bash"]);
        assert_eq!(s.permissions.default_mode.as_deref(), Some("plan"));
        assert_eq!(s.env.get("X").map(String::as_str), Some("1"));
    }

    #[test]
    fn malformed_settings_name_the_file_and_line() {
        let err = Settings::parse(Path::new("/x/settings.json"), "{\n  \"model\": 1,\n}")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/x/settings.json:2:"), "{err}");
        assert!(err.contains("invalid settings"), "{err}");
    }
}
