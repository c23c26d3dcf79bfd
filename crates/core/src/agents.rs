//! The Agent tool's definitions: built-in, `~/.claude/agents/`, the project's
//! `.claude/agents/` and `.gyre/agents/` (once the folder is trusted: a cloned
//! repository ships them, and a sub-agent's prompt and tools are the repository's
//! words), then `--agents` (later ones win by name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gyre_loop::{AgentDefinition, AgentSetup, AgentTool, SubagentSender};
use gyre_tools::ToolRegistry;

/// The project's own agent directories.
fn project_dirs(cwd: &Path) -> [PathBuf; 2] {
    [
        cwd.join(".claude").join("agents"),
        cwd.join(".gyre").join("agents"),
    ]
}

/// The names of the sub-agents the project's files define (for the untrusted-folder
/// notice; unreadable files are left to the session to report).
#[must_use]
pub fn project_agent_names(cwd: &Path) -> Vec<String> {
    let (found, _) = gyre_loop::load_agent_dirs(&project_dirs(cwd));
    found.into_iter().map(|def| def.name).collect()
}

/// Every sub-agent definition this session offers: the user's (under `home`), and the
/// project's only when `trusted_project`. Unreadable agent files are reported on stderr and skipped; a bad
/// `--agents` value is an error.
///
/// # Errors
/// `--agents` that is not an object of definitions.
pub fn definitions(
    flag: Option<&str>,
    home: Option<&Path>,
    cwd: &Path,
    trusted_project: bool,
    plugins: &[PathBuf],
) -> Result<Vec<AgentDefinition>, crate::CoreError> {
    // Plugins' agents first: the user's and the project's of the same name replace them.
    let mut dirs: Vec<PathBuf> = plugins.iter().map(|p| p.join("agents")).collect();
    if let Some(home) = home {
        dirs.push(home.join(".claude").join("agents"));
    }
    if trusted_project {
        dirs.extend(project_dirs(cwd));
    }
    let (found, errors) = gyre_loop::load_agent_dirs(&dirs);
    for e in errors {
        eprintln!("warning: agent skipped: {e}");
    }
    let mut all = vec![gyre_loop::general_purpose()];
    for def in found {
        gyre_loop::merge(&mut all, def);
    }
    if let Some(json) = flag {
        let defs = gyre_loop::parse_agents_json(json)
            .map_err(|e| crate::CoreError::Invalid(format!("--agents: {e}")))?;
        for def in defs {
            gyre_loop::merge(&mut all, def);
        }
    }
    Ok(all)
}

/// `registry` with the Agent tool added (unless `--tools` left it out); its sub-agents
/// report to `events`.
#[must_use]
pub fn with_agent_tool(
    registry: ToolRegistry,
    wanted: bool,
    setup: AgentSetup,
    events: SubagentSender,
) -> ToolRegistry {
    if !wanted {
        return registry;
    }
    registry.with(Arc::new(AgentTool::new(setup, events)))
}

/// Where the sub-agent `name` comes from, as `/agents` shows it: `project` or `user`
/// (the later wins, as [`definitions`] merges them), `built-in`, else `--agents` (the
/// flag, or the SDK's `agents`).
#[must_use]
pub fn source_of(name: &str, home: Option<&Path>, cwd: &Path) -> &'static str {
    let defines = |dirs: &[PathBuf]| {
        gyre_loop::load_agent_dirs(dirs)
            .0
            .iter()
            .any(|def| def.name == name)
    };
    if defines(&project_dirs(cwd)) {
        "project"
    } else if home.is_some_and(|h| defines(&[h.join(".claude").join("agents")])) {
        "user"
    } else if name == gyre_loop::general_purpose().name {
        "built-in"
    } else {
        "--agents"
    }
}
