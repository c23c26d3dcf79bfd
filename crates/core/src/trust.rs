//! Folder trust: what a project's own files may turn on.
//!
//! `.gyre/settings.json`, `.gyre/settings.local.json` and `.mcp.json` come with the
//! folder — a repository the user just cloned can ship them. Until the user trusts the
//! folder, gyre does not use what in them would run code or skip a question: allow
//! rules, `defaultMode: acceptEdits`, hooks, `.mcp.json` servers (with the approvals
//! that start them), the sub-agents of `.claude/agents/` and `.gyre/agents/`, and the
//! skills and custom commands of `.claude/` and `.gyre/` ([`crate::commands`]). Deny and ask rules, the sandbox and harmless settings
//! apply either way. Trust is kept in the user's own config (`$GYRE_HOME/trusted-folders.json`),
//! never in the project, and covers the folder and everything beneath it.
//!
//! `gyre trust [DIR]` records it; the interactive session asks once at start; a
//! headless run prints one line naming what was ignored and how to trust.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file under `GYRE_HOME` listing the trusted folders.
pub const FILE: &str = "trusted-folders.json";

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustedFolders {
    #[serde(default)]
    folders: Vec<PathBuf>,
}

/// Why trust could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not a list of trusted folders ({message}); fix or remove the file")]
    Invalid { path: PathBuf, message: String },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> TrustError + '_ {
    move |source| TrustError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn canonical(dir: &Path) -> PathBuf {
    dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf())
}

fn read(gyre_home: &Path) -> Result<TrustedFolders, TrustError> {
    let path = gyre_home.join(FILE);
    match gyre_tools::read_config_file(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| TrustError::Invalid {
            path,
            message: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustedFolders::default()),
        Err(e) => Err(io_error(&path)(e)),
    }
}

/// Whether the user trusted `dir` or a folder above it. An unreadable list trusts
/// nothing.
#[must_use]
pub fn is_trusted(gyre_home: &Path, dir: &Path) -> bool {
    let dir = canonical(dir);
    read(gyre_home).is_ok_and(|list| list.folders.iter().any(|f| dir.starts_with(f)))
}

/// Records `dir` as trusted; returns it as stored (canonical).
///
/// # Errors
/// The list cannot be read or written.
pub fn trust(gyre_home: &Path, dir: &Path) -> Result<PathBuf, TrustError> {
    let dir = canonical(dir);
    let mut list = read(gyre_home)?;
    if !list.folders.contains(&dir) {
        list.folders.push(dir.clone());
    }
    std::fs::create_dir_all(gyre_home).map_err(io_error(gyre_home))?;
    let path = gyre_home.join(FILE);
    let text = serde_json::to_string_pretty(&list).map_err(|e| TrustError::Invalid {
        path: path.clone(),
        message: e.to_string(),
    })?;
    // Written whole, then renamed: a crash leaves the old list, never half of one.
    let temp = gyre_home.join(format!("{FILE}.{}.tmp", std::process::id()));
    std::fs::write(&temp, format!("{text}\n")).map_err(io_error(&temp))?;
    std::fs::rename(&temp, &path).map_err(io_error(&path))?;
    Ok(dir)
}

/// The servers the project's `.mcp.json` defines (empty when there is none).
#[must_use]
pub fn project_mcp_servers(cwd: &Path) -> Vec<String> {
    let Ok(text) = gyre_tools::read_config_file(&cwd.join(".mcp.json")) else {
        return Vec::new();
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| {
            v.get("mcpServers")
                .and_then(serde_json::Value::as_object)
                .map(|servers| servers.keys().cloned().collect())
        })
        .unwrap_or_default()
}

/// What an untrusted project asked for and did not get: the settings items
/// (`Settings::untrusted`), the `.mcp.json` servers and the sub-agents of
/// `.claude/agents/` and `.gyre/agents/`.
#[must_use]
pub fn ignored_items(
    settings_items: &[String],
    mcp_servers: &[String],
    agents: &[String],
) -> Vec<String> {
    let quoted = |names: &[String]| -> String {
        names
            .iter()
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut items = settings_items.to_vec();
    if !mcp_servers.is_empty() {
        items.push(format!("MCP servers {} in .mcp.json", quoted(mcp_servers)));
    }
    if !agents.is_empty() {
        items.push(format!(
            "sub-agents {} in .claude/agents, .gyre/agents",
            quoted(agents)
        ));
    }
    items
}

/// The one stderr line of a headless run in an untrusted folder.
#[must_use]
pub fn ignored_line(items: &[String]) -> String {
    format!(
        "gyre: this folder is not trusted, so its project files were not used for: {}. If you trust it, run `gyre trust` here (the interactive gyre asks at start).",
        items.join("; ")
    )
}

/// Asks on the terminal, before the interactive session starts, whether to trust `cwd`
/// for `items`; records the trust on "y". Answers come from `input`, the question goes
/// to `output` (stdin and stderr in the binary).
///
/// # Errors
/// The answer cannot be read or the trust recorded.
pub fn ask(
    gyre_home: &Path,
    cwd: &Path,
    items: &[String],
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> Result<bool, TrustError> {
    let stdio = |e| TrustError::Io {
        path: PathBuf::from("<terminal>"),
        source: e,
    };
    let mut question = format!(
        "gyre: {} is not trusted yet. Its project files ask for:\n",
        canonical(cwd).display()
    );
    for item in items {
        question.push_str(&format!("  - {item}\n"));
    }
    question.push_str(
        "These files come with the folder: a repository you cloned can contain them.\nTrust this folder? [y/N] ",
    );
    output.write_all(question.as_bytes()).map_err(stdio)?;
    output.flush().map_err(stdio)?;
    let mut answer = String::new();
    input.read_line(&mut answer).map_err(stdio)?;
    let yes = matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes");
    if yes {
        let dir = trust(gyre_home, cwd)?;
        writeln!(output, "gyre: trusted {}", dir.display()).map_err(stdio)?;
    } else {
        writeln!(
            output,
            "gyre: not trusted; those settings are ignored this session (run `gyre trust` to use them)"
        )
        .map_err(stdio)?;
    }
    Ok(yes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_covers_the_folder_and_beneath_and_is_kept_in_the_users_config() {
        let home = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("project");
        std::fs::create_dir_all(project.join("sub")).unwrap();
        std::fs::create_dir_all(root.path().join("other")).unwrap();
        assert!(!is_trusted(home.path(), &project));
        let stored = trust(home.path(), &project).unwrap();
        assert_eq!(stored, project.canonicalize().unwrap());
        assert!(is_trusted(home.path(), &project));
        assert!(is_trusted(home.path(), &project.join("sub")));
        assert!(!is_trusted(home.path(), &root.path().join("other")));
        // Twice is once.
        trust(home.path(), &project).unwrap();
        let list = read(home.path()).unwrap();
        assert_eq!(list.folders.len(), 1);
    }

    #[test]
    fn an_unreadable_list_trusts_nothing() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(FILE), "[not json").unwrap();
        assert!(!is_trusted(home.path(), Path::new("/")));
        assert!(matches!(
            trust(home.path(), Path::new("/tmp")),
            Err(TrustError::Invalid { .. })
        ));
    }

    #[test]
    fn the_question_lists_what_is_asked_for_and_only_yes_trusts() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        let items = vec!["permissions.allow [\"Bash\"] in .gyre/settings.json".to_owned()];
        let mut out = Vec::new();
        let no = ask(
            home.path(),
            project.path(),
            &items,
            &mut "\n".as_bytes(),
            &mut out,
        )
        .unwrap();
        assert!(!no);
        assert!(!is_trusted(home.path(), project.path()));
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("  - permissions.allow [\"Bash\"]"), "{text}");
        assert!(text.contains("Trust this folder? [y/N]"), "{text}");
        let yes = ask(
            home.path(),
            project.path(),
            &items,
            &mut "Y\n".as_bytes(),
            &mut Vec::new(),
        )
        .unwrap();
        assert!(yes);
        assert!(is_trusted(home.path(), project.path()));
    }

    #[test]
    fn the_headless_line_names_what_was_ignored_and_how_to_trust() {
        let items = ignored_items(
            &["hooks (SessionStart) in .gyre/settings.json".to_owned()],
            &["proj".to_owned()],
            &["reviewer".to_owned()],
        );
        let line = ignored_line(&items);
        assert!(!line.contains('\n'));
        assert!(
            line.contains(
                "hooks (SessionStart) in .gyre/settings.json; MCP servers \"proj\" in .mcp.json; sub-agents \"reviewer\" in .claude/agents, .gyre/agents"
            ),
            "{line}"
        );
        assert!(line.contains("gyre trust"), "{line}");
    }
}
