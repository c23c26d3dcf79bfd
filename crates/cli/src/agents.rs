//! The Agent tool's definitions: built-in, `~/.claude/agents/`, the project's
//! `.claude/agents/` and `.gyre/agents/`, then `--agents` (later ones win by name).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use gyre_loop::{AgentDefinition, AgentSetup, AgentTool, SubagentSender};
use gyre_tools::ToolRegistry;

/// Every sub-agent definition this session offers. Unreadable agent files are reported
/// on stderr and skipped; a bad `--agents` value is an error.
///
/// # Errors
/// `--agents` that is not an object of definitions.
pub fn definitions(flag: Option<&str>, cwd: &Path) -> Result<Vec<AgentDefinition>> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".claude").join("agents"));
    }
    dirs.push(cwd.join(".claude").join("agents"));
    dirs.push(cwd.join(".gyre").join("agents"));
    let (found, errors) = gyre_loop::load_agent_dirs(&dirs);
    for e in errors {
        eprintln!("warning: agent skipped: {e}");
    }
    let mut all = vec![gyre_loop::general_purpose()];
    for def in found {
        gyre_loop::merge(&mut all, def);
    }
    if let Some(json) = flag {
        for def in gyre_loop::parse_agents_json(json)? {
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
