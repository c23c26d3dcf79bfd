//! Permission rules saved in, or removed from, the settings file the user names
//! (`/permissions add allow "Bash(npm test)" local`): the file's other keys are kept,
//! and it is written whole and renamed into place.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::approvals::RuleBehavior;

/// Where a rule the user adds goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// This session only.
    Session,
    /// `$GYRE_HOME/settings.json`: every folder.
    User,
    /// `.gyre/settings.json`: the project, shared with its repository.
    Project,
    /// `.gyre/settings.local.json`: the project, on this machine only.
    Local,
}

impl Destination {
    /// `session`, `user`, `project` or `local`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "session" => Self::Session,
            "user" => Self::User,
            "project" => Self::Project,
            "local" => Self::Local,
            _ => return None,
        })
    }

    /// The settings file, `None` for the session.
    #[must_use]
    pub fn file(self, gyre_home: &Path, cwd: &Path) -> Option<PathBuf> {
        match self {
            Self::Session => None,
            Self::User => Some(gyre_home.join("settings.json")),
            Self::Project => Some(cwd.join(".gyre").join("settings.json")),
            Self::Local => Some(cwd.join(".gyre").join("settings.local.json")),
        }
    }
}

/// The settings file could not be read, understood or written.
#[derive(Debug, thiserror::Error)]
pub enum RuleFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}; fix the file first, it was left as it was")]
    Invalid { path: PathBuf, message: String },
}

/// The key of `behavior`'s list under `permissions`.
#[must_use]
pub fn key(behavior: RuleBehavior) -> &'static str {
    match behavior {
        RuleBehavior::Allow => "allow",
        RuleBehavior::Ask => "ask",
        RuleBehavior::Deny => "deny",
    }
}

/// Adds `rule` to (`add`) or removes it from `permissions.<behavior>` in `path`; true
/// when the file changed (a rule already there, or not there, leaves it alone).
///
/// # Errors
/// The file cannot be read or written, or is not a settings object.
pub fn edit_rule(
    path: &Path,
    behavior: RuleBehavior,
    rule: &str,
    add: bool,
) -> Result<bool, RuleFileError> {
    let invalid = |message: &str| RuleFileError::Invalid {
        path: path.to_path_buf(),
        message: message.to_owned(),
    };
    let io = |source| RuleFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut settings = match gyre_tools::read_config_file(path) {
        Ok(text) => serde_json::from_str::<Value>(&text).map_err(|e| invalid(&e.to_string()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
        Err(e) => return Err(io(e)),
    };
    let Value::Object(top) = &mut settings else {
        return Err(invalid("not a JSON object"));
    };
    let Value::Object(permissions) = top
        .entry("permissions")
        .or_insert_with(|| Value::Object(Map::new()))
    else {
        return Err(invalid("`permissions` is not an object"));
    };
    let Value::Array(list) = permissions
        .entry(key(behavior))
        .or_insert_with(|| Value::Array(Vec::new()))
    else {
        return Err(invalid(&format!(
            "`permissions.{}` is not a list",
            key(behavior)
        )));
    };
    let present = list.iter().position(|r| r.as_str() == Some(rule));
    match (add, present) {
        (true, None) => list.push(Value::String(rule.to_owned())),
        (false, Some(at)) => {
            list.remove(at);
        }
        _ => return Ok(false),
    }
    let mut text = serde_json::to_string_pretty(&settings).map_err(|e| invalid(&e.to_string()))?;
    text.push('\n');
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let name = path
        .file_name()
        .map_or_else(|| "settings.json".into(), |n| n.to_string_lossy());
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_is_added_once_and_removed_keeping_the_files_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".gyre/settings.local.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"model": "m", "permissions": {"deny": ["Read(.env)"]}}"#,
        )
        .unwrap();
        assert!(edit_rule(&path, RuleBehavior::Allow, "Bash(npm test)", true).unwrap());
        assert!(!edit_rule(&path, RuleBehavior::Allow, "Bash(npm test)", true).unwrap());
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["model"], "m");
        assert_eq!(saved["permissions"]["allow"][0], "Bash(npm test)");
        assert_eq!(saved["permissions"]["deny"][0], "Read(.env)");
        assert!(edit_rule(&path, RuleBehavior::Deny, "Read(.env)", false).unwrap());
        assert!(!edit_rule(&path, RuleBehavior::Deny, "Read(.env)", false).unwrap());
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["permissions"]["deny"], serde_json::json!([]));
    }

    #[test]
    fn a_file_that_is_not_settings_is_left_alone_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "[1, 2]").unwrap();
        let err = edit_rule(&path, RuleBehavior::Allow, "Read", true).unwrap_err();
        assert!(err.to_string().contains("not a JSON object"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[1, 2]");
        let missing = dir.path().join("new/settings.json");
        assert!(edit_rule(&missing, RuleBehavior::Ask, "Bash", true).unwrap());
        assert_eq!(
            Destination::Local.file(Path::new("/h"), Path::new("/p")),
            Some(PathBuf::from("/p/.gyre/settings.local.json"))
        );
        assert_eq!(Destination::parse("session"), Some(Destination::Session));
        assert_eq!(Destination::parse("elsewhere"), None);
    }
}
