//! Sub-agent definitions: the built-in `general-purpose`, Markdown files with a front
//! matter (`.claude/agents/`, `.gyre/agents/`, `~/.claude/agents/`) and `--agents` JSON.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use serde::Deserialize;

/// The tool's name, and the old name transcripts may still call it by.
pub const AGENT_TOOL_NAME: &str = "Agent";
pub(crate) const AGENT_TOOL_ALIASES: &[&str] = &["Task"];

/// Whether `name` is the Agent tool's, by its name or its old one.
#[must_use]
pub fn is_agent_tool(name: &str) -> bool {
    name == AGENT_TOOL_NAME || AGENT_TOOL_ALIASES.contains(&name)
}

/// What a sub-agent is: its name, when to use it, its system prompt, tools and model.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AgentDefinition {
    /// The `subagent_type` the model names it by.
    #[serde(default)]
    pub name: String,
    /// When to use it (shown to the model in the Agent tool's description).
    pub description: String,
    /// Its system prompt.
    pub prompt: String,
    /// The tools it may use; `None` is every tool of the session but Agent.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// `sonnet`, `opus`, `haiku`, a model id, or `None` / `inherit` for the session's model.
    #[serde(default)]
    pub model: Option<String>,
}

/// A definition that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum AgentDefinitionError {
    /// A definition file that cannot be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The definition file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// `--agents` JSON that does not parse.
    #[error("--agents: {0} (expected {{\"name\": {{\"description\": \"…\", \"prompt\": \"…\"}}}})")]
    Json(String),
}

/// The system prompt of `general-purpose`.
const GENERAL_PURPOSE_PROMPT: &str = "You are an agent for gyre, a coding agent for the terminal. Given the user's message, use the tools available to complete the task. Do what has been asked; nothing more, nothing less. When you complete the task, respond with a concise report of what was done and any key findings: the caller will relay it to the user, so it only needs the essentials. Use absolute file paths in your answer.";

/// The built-in agent every session has.
#[must_use]
pub fn general_purpose() -> AgentDefinition {
    AgentDefinition {
        name: "general-purpose".to_owned(),
        description: "General-purpose agent for researching complex questions, searching for code, and executing multi-step tasks.".to_owned(),
        prompt: GENERAL_PURPOSE_PROMPT.to_owned(),
        tools: None,
        model: None,
    }
}

impl AgentDefinition {
    /// The model to run it with: its own (aliases expanded) or `session_model`.
    #[must_use]
    pub fn model_or(&self, session_model: &str) -> String {
        match self.model.as_deref().map(str::trim) {
            None | Some("" | "inherit") => session_model.to_owned(),
            Some("sonnet") => "claude-sonnet-4-5".to_owned(),
            Some("opus") => "claude-opus-4-1".to_owned(),
            Some("haiku") => "claude-haiku-4-5".to_owned(),
            Some(id) => id.to_owned(),
        }
    }
}

/// Parses one agent file: `---`, `key: value` lines (`name`, `description`, `tools`,
/// `model`), `---`, then the system prompt.
///
/// # Errors
/// A missing front matter, `name` or `description`, naming the file.
pub fn parse_agent_file(path: &Path, text: &str) -> Result<AgentDefinition, AgentDefinitionError> {
    let err = |message: String| AgentDefinitionError::File {
        path: path.to_owned(),
        message,
    };
    let text = text.trim_start_matches('\u{feff}');
    let rest = text
        .strip_prefix("---")
        .ok_or_else(|| err("no front matter: start the file with a `---` line".to_owned()))?;
    let (front, body) = rest
        .split_once("\n---")
        .ok_or_else(|| err("the front matter has no closing `---` line".to_owned()))?;
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    let mut list_key: Option<&str> = None;
    for (i, line) in front.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        // A YAML block list item under the last key (`tools:` then `- Read`).
        if let (Some(key), Some(item)) = (list_key, trimmed.strip_prefix("- ")) {
            let entry = fields.entry(key).or_default();
            if !entry.is_empty() {
                entry.push(',');
            }
            entry.push_str(unquote(item));
            continue;
        }
        let (key, value) = trimmed.split_once(':').ok_or_else(|| {
            err(format!(
                "front matter line {}: expected `key: value`, found {trimmed:?}",
                i + 2
            ))
        })?;
        let key = key.trim();
        let value = unquote(value.trim());
        list_key = value.is_empty().then_some(key);
        fields.insert(key, value.to_owned());
    }
    let field = |key: &str| fields.get(key).filter(|v| !v.is_empty()).cloned();
    let name = field("name").ok_or_else(|| err("the front matter has no `name`".to_owned()))?;
    let description = field("description")
        .ok_or_else(|| err("the front matter has no `description`".to_owned()))?;
    let tools = field("tools").map(|t| split_list(&t));
    Ok(AgentDefinition {
        name,
        description,
        prompt: body.trim_start_matches(['-']).trim().to_owned(),
        tools,
        model: field("model"),
    })
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s)
}

/// `Read, Grep`, `[Read, Grep]` or `Read,Grep` as names.
fn split_list(s: &str) -> Vec<String> {
    s.trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|t| unquote(t).to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Parses `--agents '{"reviewer": {"description": "…", "prompt": "…", "tools": […]}}'`.
///
/// # Errors
/// Text that is not that shape, with serde's message.
pub fn parse_agents_json(json: &str) -> Result<Vec<AgentDefinition>, AgentDefinitionError> {
    let map: BTreeMap<String, AgentDefinition> =
        serde_json::from_str(json).map_err(|e| AgentDefinitionError::Json(e.to_string()))?;
    Ok(map
        .into_iter()
        .map(|(name, def)| AgentDefinition { name, ..def })
        .collect())
}

/// Every `*.md` agent in `dirs` (missing directories are skipped). A later definition of
/// the same name replaces an earlier one, so pass the user's directories first.
/// Files that cannot be read or parsed are returned as errors beside the rest.
#[must_use]
pub fn load_agent_dirs(dirs: &[PathBuf]) -> (Vec<AgentDefinition>, Vec<AgentDefinitionError>) {
    let mut agents = Vec::new();
    let mut errors = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        paths.sort();
        for path in paths {
            let parsed = gyre_tools::read_config_file(&path)
                .map_err(|e| AgentDefinitionError::File {
                    path: path.clone(),
                    message: e.to_string(),
                })
                .and_then(|text| parse_agent_file(&path, &text));
            match parsed {
                Ok(def) => merge(&mut agents, def),
                Err(e) => errors.push(e),
            }
        }
    }
    (agents, errors)
}

/// Adds `def`, replacing a definition of the same name.
pub fn merge(agents: &mut Vec<AgentDefinition>, def: AgentDefinition) {
    agents.retain(|a| a.name != def.name);
    agents.push(def);
}

/// The definitions a session offers, shared: a driver may add some mid-session (the
/// SDK's `agents` from `initialize`); the Agent tool reads them at each call and
/// describes them at each request.
#[derive(Debug, Clone)]
pub struct AgentCatalog(Arc<RwLock<Vec<AgentDefinition>>>);

impl AgentCatalog {
    /// A catalog of `definitions`.
    #[must_use]
    pub fn new(definitions: Vec<AgentDefinition>) -> Self {
        Self(Arc::new(RwLock::new(definitions)))
    }

    /// Adds definitions, replacing those of the same name.
    pub fn add(&self, definitions: impl IntoIterator<Item = AgentDefinition>) {
        let mut catalog = self.0.write().unwrap_or_else(PoisonError::into_inner);
        for def in definitions {
            merge(&mut catalog, def);
        }
    }

    /// The definition called `name`, if there is one.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<AgentDefinition> {
        self.read().iter().find(|d| d.name == name).cloned()
    }

    /// The names of the definitions on offer, in order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.read().iter().map(|d| d.name.clone()).collect()
    }

    /// The definitions on offer now, in order.
    #[must_use]
    pub fn definitions(&self) -> Vec<AgentDefinition> {
        self.read().clone()
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<AgentDefinition>> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_markdown_agent_gives_its_fields_and_its_body_as_the_prompt() {
        let text = "---\nname: reviewer\ndescription: \"Reviews diffs\"\ntools: Read, Grep\nmodel: haiku\n---\n\nYou review code.\n";
        let def = parse_agent_file(Path::new("r.md"), text).unwrap();
        assert_eq!(def.name, "reviewer");
        assert_eq!(def.description, "Reviews diffs");
        assert_eq!(def.tools, Some(vec!["Read".to_owned(), "Grep".to_owned()]));
        assert_eq!(def.prompt, "You review code.");
        assert_eq!(def.model_or("claude-sonnet-4-5"), "claude-haiku-4-5");
    }

    #[test]
    fn a_block_list_of_tools_is_read_as_names() {
        let text = "---\nname: a\ndescription: d\ntools:\n  - Read\n  - Glob\n---\nbody";
        let def = parse_agent_file(Path::new("a.md"), text).unwrap();
        assert_eq!(def.tools, Some(vec!["Read".to_owned(), "Glob".to_owned()]));
        assert_eq!(def.model_or("m"), "m");
    }

    #[test]
    fn a_file_without_front_matter_or_description_is_an_error_naming_it() {
        let e = parse_agent_file(Path::new("x.md"), "just text").unwrap_err();
        assert!(e.to_string().contains("x.md: no front matter"), "{e}");
        let e = parse_agent_file(Path::new("y.md"), "---\nname: y\n---\nbody").unwrap_err();
        assert!(e.to_string().contains("no `description`"), "{e}");
    }

    #[test]
    fn a_catalog_takes_new_definitions_beside_the_ones_it_had() {
        let catalog = AgentCatalog::new(vec![general_purpose()]);
        assert_eq!(catalog.names(), ["general-purpose"]);
        catalog.add(
            parse_agents_json(r#"{"tester": {"description": "runs tests", "prompt": "p"}}"#)
                .unwrap(),
        );
        assert_eq!(catalog.names(), ["general-purpose", "tester"]);
        assert_eq!(catalog.definitions()[1].description, "runs tests");
        assert_eq!(catalog.get("tester").unwrap().prompt, "p");
    }

    #[test]
    fn agents_json_takes_the_name_from_the_key() {
        let defs = parse_agents_json(
            r#"{"tester": {"description": "runs tests", "prompt": "Run them.", "tools": ["Bash"], "model": "inherit"}}"#,
        )
        .unwrap();
        assert_eq!(defs.len(), 1);
        assert_eq!(defs[0].name, "tester");
        assert_eq!(defs[0].tools, Some(vec!["Bash".to_owned()]));
        assert!(parse_agents_json("[1]").is_err());
    }

    #[test]
    fn a_later_directory_replaces_an_agent_of_the_same_name() {
        let dir = tempfile::tempdir().unwrap();
        let (user, project) = (dir.path().join("user"), dir.path().join("project"));
        for (d, desc) in [(&user, "user's"), (&project, "project's")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(
                d.join("r.md"),
                format!("---\nname: r\ndescription: {desc}\n---\np"),
            )
            .unwrap();
        }
        std::fs::write(project.join("bad.md"), "no front matter").unwrap();
        let (agents, errors) = load_agent_dirs(&[user, project, dir.path().join("missing")]);
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].description, "project's");
        assert_eq!(errors.len(), 1);
    }
}
