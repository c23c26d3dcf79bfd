//! The default system prompt: who gyre is, the environment, and project memory
//! (read by [`crate::memory`]).

use std::borrow::Borrow;
use std::path::Path;
use std::time::SystemTime;

const IDENTITY: &str = "You are gyre, a coding agent running in the user's terminal. You help with software engineering tasks: reading and changing code, running commands, finding and fixing bugs.

Work in small verified steps: read before you edit, prefer Edit over rewriting whole files, run the project's tests or build after changes when you can. Use Grep and Glob to find code instead of guessing paths. Keep answers short and concrete; show the commands and files you touched. Never invent file contents you have not read. If a tool call is denied, do not retry it the same way: explain what you needed and let the user decide.";

fn git_state(cwd: &Path) -> String {
    let is_repo = cwd.ancestors().any(|d| d.join(".git").exists());
    if !is_repo {
        return "Is a git repository: no".to_owned();
    }
    let branch = cwd
        .ancestors()
        .map(|d| d.join(".git").join("HEAD"))
        .find(|p| p.is_file())
        .and_then(|p| gyre_tools::read_config_file(&p).ok())
        .and_then(|head| {
            head.trim()
                .strip_prefix("ref: refs/heads/")
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "(detached)".to_owned());
    format!("Is a git repository: yes (branch {branch})")
}

/// The prompt of a session an Agent SDK program starts without a prompt of its own (the
/// SDKs pass `--system-prompt ""` or `systemPrompt: [""]`, and set
/// `CLAUDE_CODE_ENTRYPOINT=sdk-…`): who is answering, and nothing of the terminal agent.
pub const SDK_SYSTEM_PROMPT: &str =
    "You are an agent built on gyre, run by a program through the Claude Agent SDK.";

/// The default prompt for a session in `cwd` with these tools, without the memory.
#[must_use]
pub fn default_system_prompt<S: Borrow<str>>(
    cwd: &Path,
    tool_names: &[S],
    now: SystemTime,
) -> String {
    let date = gyre_loop::timestamp(now);
    let date = date.get(..10).unwrap_or(&date);
    format!(
        "{IDENTITY}\n\n<env>\nWorking directory: {}\n{}\nPlatform: {} ({})\nToday's date: {date}\nTools available: {}\n</env>",
        cwd.display(),
        git_state(cwd),
        std::env::consts::OS,
        std::env::consts::ARCH,
        tool_names.join(", ")
    )
}

/// `AGENTS.md` / `CLAUDE.md` files from `cwd` up to the root, outermost first (their
/// imports not included).
#[must_use]
pub fn memory_files(cwd: &Path) -> Vec<std::path::PathBuf> {
    crate::memory::ancestor_files(cwd)
}

/// The memory files of `cwd` and its parents, with their imports (`~/` under `home`),
/// as `<project-memory>` sections, each after a blank line (empty when there are none).
#[must_use]
pub fn project_memory(cwd: &Path, home: Option<&Path>) -> String {
    crate::memory::sections(&crate::memory::project_files(cwd, home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_names_cwd_tools_and_includes_memory_from_parents() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "outer rule").unwrap();
        std::fs::write(sub.join("CLAUDE.md"), "inner rule").unwrap();
        let p = default_system_prompt(&sub, &["Read", "Bash"], SystemTime::UNIX_EPOCH)
            + &project_memory(&sub, None);
        assert!(p.contains(&format!("Working directory: {}", sub.display())));
        assert!(p.contains("Tools available: Read, Bash"));
        assert!(p.contains("Today's date: 1970-01-01"));
        let outer = p.find("outer rule").unwrap();
        let inner = p.find("inner rule").unwrap();
        assert!(outer < inner, "outermost memory first");
    }
}
