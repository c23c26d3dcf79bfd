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
    format!(
        "{IDENTITY}\n\n<env>\n{}\nTools available: {}\n</env>",
        environment_lines(cwd, now),
        tool_names.join(", ")
    )
}

/// The working directory, git state, platform and date, one a line.
fn environment_lines(cwd: &Path, now: SystemTime) -> String {
    let date = gyre_loop::timestamp(now);
    let date = date.get(..10).unwrap_or(&date);
    format!(
        "Working directory: {}\n{}\nPlatform: {} ({})\nToday's date: {date}",
        cwd.display(),
        git_state(cwd),
        std::env::consts::OS,
        std::env::consts::ARCH,
    )
}

/// The default prompt without what differs from one session to the next (an Agent
/// SDK's `excludeDynamicSections`): the same text for every session with these tools,
/// so the API's prompt cache serves it across sessions. [`environment_context`] carries
/// the rest, in the first user message.
#[must_use]
pub fn static_system_prompt<S: Borrow<str>>(tool_names: &[S]) -> String {
    format!(
        "{IDENTITY}\n\nTools available: {}\n\nThe working directory, platform and date come at the start of the conversation.",
        tool_names.join(", ")
    )
}

/// The sections [`static_system_prompt`] leaves out, as a reminder the first user
/// message carries.
#[must_use]
pub fn environment_context(cwd: &Path, now: SystemTime) -> String {
    format!(
        "<system-reminder>\nThe environment of this session:\n<env>\n{}\n</env>\n</system-reminder>",
        environment_lines(cwd, now)
    )
}

/// The workflow of the plan-mode reminder when the front-end gives none.
const PLAN_WORKFLOW: &str = "How to plan:\n1. Understand the request: read the code it touches and find how similar things are done in this project.\n2. Decide on the change: the files to edit, what each edit does, and what could break.\n3. Write the plan: the steps in order, the files by path, and how the result will be checked (tests, builds, commands).";

/// The reminder that goes with each prompt while the session is in plan mode: what
/// plan mode allows, the workflow (`workflow`, an Agent SDK's `planModeInstructions`,
/// replaces gyre's), and how to finish with ExitPlanMode.
#[must_use]
pub fn plan_mode_reminder(workflow: Option<&str>) -> String {
    let workflow = workflow
        .filter(|w| !w.trim().is_empty())
        .unwrap_or(PLAN_WORKFLOW);
    format!(
        "<system-reminder>\nPlan mode is active. Do not change anything yet: no file edits or writes, no commands that modify the system, no configuration changes. Read, search and think only; tools that would change something are refused.\n\n{workflow}\n\nWhen the plan is ready, call ExitPlanMode with it to ask the user for approval. Do not end the turn with a plan in any other way, and do not start the work before the plan is approved.\n</system-reminder>"
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

    #[test]
    fn the_static_prompt_leaves_the_environment_to_the_first_message() {
        let dir = tempfile::tempdir().unwrap();
        let fixed = static_system_prompt(&["Read"]);
        assert!(fixed.contains("Tools available: Read"), "{fixed}");
        assert!(!fixed.contains(&dir.path().display().to_string()));
        assert!(!fixed.contains("1970"));
        let context = environment_context(dir.path(), SystemTime::UNIX_EPOCH);
        assert!(context.contains(&format!("Working directory: {}", dir.path().display())));
        assert!(context.contains("Today's date: 1970-01-01"));
    }

    #[test]
    fn the_plan_reminder_takes_the_front_ends_workflow_between_its_rules() {
        let own = plan_mode_reminder(Some("Only list the files."));
        assert!(own.contains("Plan mode is active"));
        assert!(own.contains("Only list the files."));
        assert!(own.contains("call ExitPlanMode"));
        assert!(!own.contains(PLAN_WORKFLOW));
        assert!(plan_mode_reminder(None).contains(PLAN_WORKFLOW));
    }
}
