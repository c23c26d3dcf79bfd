//! The rules a user saved by answering "always" to a permission question in a folder.
//!
//! The answer is the user's own decision about that folder, so it is kept in the user's
//! config (`$GYRE_HOME/folder-rules.json`), keyed by the folder's canonical path, and
//! applies whether or not the folder is trusted: trusting the whole folder for one answer
//! would also switch on the repository's hooks, servers and env, and a file inside the
//! project is one the repository could ship. Only the exact folder's rules apply (a
//! subfolder is another session's folder), and each rule is as narrow as its question
//! (`gyre_tools::always_rule`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file under `GYRE_HOME`.
pub const FILE: &str = "folder-rules.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct FolderRules {
    /// Allow rules by folder (canonical path).
    #[serde(default)]
    allow: BTreeMap<PathBuf, Vec<String>>,
}

/// The file could not be read, parsed or written.
#[derive(Debug, thiserror::Error)]
pub enum FolderRulesError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not gyre's saved permission rules ({message}); fix or remove the file")]
    Invalid { path: PathBuf, message: String },
}

fn canonical(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

fn read(path: &Path) -> Result<FolderRules, FolderRulesError> {
    match gyre_tools::read_config_file(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| FolderRulesError::Invalid {
            path: path.to_path_buf(),
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FolderRules::default()),
        Err(source) => Err(FolderRulesError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The allow rules saved for `dir`.
///
/// # Errors
/// The file exists but cannot be read or is not this format.
pub fn allow_rules(gyre_home: &Path, dir: &Path) -> Result<Vec<String>, FolderRulesError> {
    let mut saved = read(&gyre_home.join(FILE))?;
    Ok(saved.allow.remove(&canonical(dir)).unwrap_or_default())
}

/// Saves `rule` as allowed in `dir` (once), keeping every other folder's rules; the file
/// is written whole and renamed into place. Returns the file's path.
///
/// # Errors
/// The file cannot be read, parsed (it is then left as it was) or written.
pub fn save_allow_rule(
    gyre_home: &Path,
    dir: &Path,
    rule: &str,
) -> Result<PathBuf, FolderRulesError> {
    let path = gyre_home.join(FILE);
    let io = |source| FolderRulesError::Io {
        path: path.clone(),
        source,
    };
    let mut saved = read(&path)?;
    let rules = saved.allow.entry(canonical(dir)).or_default();
    if !rules.iter().any(|r| r == rule) {
        rules.push(rule.to_owned());
    }
    std::fs::create_dir_all(gyre_home).map_err(io)?;
    let mut text = serde_json::to_string_pretty(&saved).map_err(|e| FolderRulesError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    text.push('\n');
    let tmp = gyre_home.join(format!(".{FILE}.tmp"));
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_rule_applies_to_its_folder_only_and_is_saved_once() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let project = work.path().join("project");
        let sub = project.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        save_allow_rule(home.path(), &project, "Bash(make)").unwrap();
        let path = save_allow_rule(home.path(), &project, "Bash(make)").unwrap();
        save_allow_rule(home.path(), work.path(), "Bash(ls)").unwrap();
        assert_eq!(path, home.path().join(FILE));
        assert_eq!(allow_rules(home.path(), &project).unwrap(), ["Bash(make)"]);
        assert_eq!(allow_rules(home.path(), work.path()).unwrap(), ["Bash(ls)"]);
        assert!(allow_rules(home.path(), &sub).unwrap().is_empty());
        // The key is the canonical folder, however the session named it.
        let roundabout = sub.join("..");
        assert_eq!(
            allow_rules(home.path(), &roundabout).unwrap(),
            ["Bash(make)"]
        );
    }

    #[test]
    fn a_file_that_is_not_this_format_is_an_error_and_left_alone() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(FILE), "{oops").unwrap();
        let err = save_allow_rule(home.path(), home.path(), "Read").unwrap_err();
        assert!(err.to_string().contains("fix or remove the file"), "{err}");
        assert!(allow_rules(home.path(), home.path()).is_err());
        assert_eq!(
            std::fs::read_to_string(home.path().join(FILE)).unwrap(),
            "{oops"
        );
    }
}
