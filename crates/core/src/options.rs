//! [`SessionOptions`]: everything a front-end may choose about a session, typed, in one
//! place. The cli fills it from flags; an Agent SDK's `initialize` and an editor's
//! `session/new` fill the same fields.
//!
//! Precedence, lowest first: defaults < the user's settings < the project's settings
//! (trusted folders only) < local settings < environment < flags < initialize-time
//! options. Settings files are merged by [`crate::settings`]; these options carry what
//! the front-end was told, and [`crate::session::build`] layers them over the settings.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

/// The editor gyre runs inside (an ACP editor): its files — the tools read its buffers
/// and write through it — and its terminals, where Bash runs unconfined commands (see
/// gyre-tools' `editor`). Two handles are equal when they hold the same ones.
#[derive(Clone, Default)]
pub struct Editor {
    /// `fs/read_text_file` and `fs/write_text_file`, when the editor offers them.
    pub files: Option<Arc<dyn gyre_tools::editor::EditorFiles>>,
    /// `terminal/*`, when the editor offers them.
    pub terminals: Option<Arc<dyn gyre_tools::editor::EditorTerminals>>,
    /// Where the running calls' progress goes (a command's output as it grows), for an
    /// editor that shows it.
    pub progress: Option<gyre_tools::ProgressSink>,
}

impl PartialEq for Editor {
    fn eq(&self, other: &Self) -> bool {
        fn same<T: ?Sized>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        }
        same(self.files.as_ref(), other.files.as_ref())
            && same(self.terminals.as_ref(), other.terminals.as_ref())
            && same(
                self.progress.as_ref().map(|p| &p.0),
                other.progress.as_ref().map(|p| &p.0),
            )
    }
}

impl std::fmt::Debug for Editor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Editor")
            .field("files", &self.files)
            .field("terminals", &self.terminals)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// Which conversation the session continues.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Resume {
    /// A new conversation, with a fresh id or the one given (`--session-id`).
    #[default]
    New,
    /// The newest session of this folder (`--continue`).
    Latest,
    /// The session with this id (`--resume`).
    Id(String),
}

/// Options an Agent SDK sends in its `initialize` request rather than as flags. They
/// take effect when `initialize` is the first thing the SDK sends (as both SDKs do):
/// [`SessionOptions::with_initialize`] layers them over the flags before the session
/// is built. Prompts replace what the flags gave; servers and denied tools add to it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InitializeOptions {
    /// `systemPrompt`: replaces the system prompt (`""`: none, as `--system-prompt ""`).
    pub system_prompt: Option<String>,
    /// `appendSystemPrompt`: appended to the system prompt.
    pub append_system_prompt: Option<String>,
    /// `mcpServers`: `{name: config}`, as the `mcpServers` of an `--mcp-config` file.
    pub mcp_servers: Option<Value>,
    /// `sdkMcpServers`: the names of the SDK's in-process servers, reached with
    /// `mcp_message` requests.
    pub sdk_mcp_servers: Vec<String>,
    /// `disallowedTools`: more deny rules, as `--disallowedTools`.
    pub disallowed_tools: Vec<String>,
    /// `jsonSchema`: the schema the final answer must satisfy, as `--json-schema`.
    pub json_schema: Option<Value>,
    /// `settings`: settings over the files', as `--settings` (the TypeScript SDK's
    /// `settingsDelivery: 'initialize'`).
    pub settings: Option<crate::settings::Settings>,
    /// `agents`: `{name: {description, prompt, tools, model}}`, over `--agents` (so
    /// `--agent` may name one of them).
    pub agents: Option<serde_json::Map<String, Value>>,
    /// `managedSettings`: policy settings, restrictive-only
    /// ([`crate::settings::Settings::restrict`]).
    pub managed_settings: Option<Value>,
    /// `planModeInstructions`: the workflow of the plan-mode reminder, in place of
    /// gyre's (the read-only preamble and the ExitPlanMode footer stay).
    pub plan_mode_instructions: Option<String>,
    /// `appendSubagentSystemPrompt`: appended to every sub-agent's system prompt.
    pub append_subagent_system_prompt: Option<String>,
    /// `excludeDynamicSections`: with the default prompt, the environment section
    /// (working directory, git, platform, date) goes into the first user message, so
    /// the system prompt is the same for every session.
    pub exclude_dynamic_sections: bool,
    /// `systemPromptSnapshot`: accepted; gyre's prompt is rendered once per process.
    pub system_prompt_snapshot: Option<bool>,
    /// `skills`: only the skills named here (a name, or the part after `plugin:`) are
    /// offered by the Skill tool; `None`: all.
    pub skills: Option<Vec<String>>,
    /// `toolAliases`: `(emitted name, tool it runs)`, one hop.
    pub tool_aliases: Vec<(String, String)>,
    /// `plugins`: `[{type: "local", path, skipMcpDiscovery}]`, more plugin folders.
    pub plugins: Vec<crate::plugins::Plugin>,
    /// `codeRunningMcpTools`: `(server, tool)` of MCP tools that run code the model
    /// writes; in `auto` mode the judge decides every call to one.
    pub code_running_mcp_tools: Vec<(String, String)>,
}

impl InitializeOptions {
    /// Whether any option here changes how the session is built.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// See the module docs. Field names follow the flags they come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    /// The model (`--model`); else the resumed session's, the settings', `ANTHROPIC_MODEL`.
    pub model: Option<String>,
    /// The model to switch to after repeated overloads (`--fallback-model`).
    pub fallback_model: Option<String>,
    /// Agentic turns per prompt (`--max-turns`).
    pub max_turns: Option<u32>,
    /// Cost limit in US dollars (`--max-budget-usd`).
    pub max_budget_usd: Option<f64>,
    /// The permission mode's name (`--permission-mode`); else the settings' default.
    pub permission_mode: Option<String>,
    /// `--dangerously-skip-permissions`: the mode is bypassPermissions.
    pub dangerously_skip_permissions: bool,
    /// `--allow-dangerously-skip-permissions`: the mode may be switched to
    /// bypassPermissions later, without starting in it.
    pub allow_dangerously_skip_permissions: bool,
    /// Allow rules (`--allowedTools`), as given: comma- or space-separated lists.
    pub allowed_tools: Vec<String>,
    /// Deny rules (`--disallowedTools`); a bare tool name also takes the tool away.
    pub disallowed_tools: Vec<String>,
    /// The tools on offer (`--tools`); empty or `default` means all.
    pub tools: Vec<String>,
    /// More working directories (`--add-dir`).
    pub add_dir: Vec<PathBuf>,
    /// Replaces the default system prompt (`--system-prompt`).
    pub system_prompt: Option<String>,
    /// Replaces it with a file's text (`--system-prompt-file`).
    pub system_prompt_file: Option<PathBuf>,
    /// Appended to the system prompt (`--append-system-prompt`).
    pub append_system_prompt: Option<String>,
    /// Which conversation to continue.
    pub resume: Resume,
    /// The new session's id (`--session-id`).
    pub session_id: Option<String>,
    /// Resume the conversation as it was at the message with this uuid, leaving the
    /// later ones behind (`--resume-session-at`).
    pub resume_session_at: Option<String>,
    /// With `resume_session_at`: the prompt uuid of the one turn the cut may leave
    /// behind (`--resume-drops-turn`); the resume is refused when it would drop more.
    pub resume_drops_turn: Option<String>,
    /// Continue a resumed conversation under a new id (`--fork-session`).
    pub fork_session: bool,
    /// Write no transcript (`--no-session-persistence`): the session cannot be resumed.
    pub no_session_persistence: bool,
    /// More sub-agent definitions, a JSON object (`--agents`).
    pub agents: Option<String>,
    /// The settings sources read (`--setting-sources`), comma-separated; `None`: all.
    pub setting_sources: Option<String>,
    /// A JSON Schema the final answer must satisfy (`--json-schema`).
    pub json_schema: Option<String>,
    /// Thinking budget (`--max-thinking-tokens`).
    pub max_thinking_tokens: Option<u32>,
    /// Thinking mode (`--thinking`).
    pub thinking: Option<String>,
    /// How thinking comes back, `summarized` or `omitted` (`--thinking-display`).
    pub thinking_display: Option<String>,
    /// Effort level (`--effort`): the requests' `output_config.effort`.
    pub effort: Option<String>,
    /// Task budget in tokens (`--task-budget`): `output_config.task_budget`.
    pub task_budget: Option<u64>,
    /// Beta features (`--betas`, comma- or space-separated): the `anthropic-beta` header.
    pub betas: Vec<String>,
    /// The agent the main thread runs as (`--agent`): its prompt replaces the default
    /// system prompt, its tools and model apply unless `--tools`/`--model` say otherwise.
    pub agent: Option<String>,
    /// MCP server configs, files or inline JSON (`--mcp-config`).
    pub mcp_config: Vec<String>,
    /// Only the `--mcp-config` servers, not the project's `.mcp.json`.
    pub strict_mcp_config: bool,
    /// Where the project's configuration is read from instead of the working directory
    /// (`--project-config-root`: the checkout a worktree was made from): its settings,
    /// `.mcp.json`, and the `.claude`/`.gyre` commands, skills and agents, trusted as
    /// that folder is. Absolute.
    pub project_config_root: Option<PathBuf>,
    /// Plugin folders (`--plugin-dir`, `--plugin-dir-no-mcp`; see [`crate::plugins`]).
    pub plugins: Vec<crate::plugins::Plugin>,
    /// What the SDK sent in `initialize`: its servers (the rest is layered into the
    /// fields above by [`SessionOptions::with_initialize`]).
    pub initialize: InitializeOptions,
    /// The editor that holds the files, when gyre runs inside one (ACP); `None`: the
    /// tools read and write the disk.
    pub editor: Option<Editor>,
}

impl SessionOptions {
    /// These options with the SDK's `initialize` options over them (they come last in
    /// the precedence): its prompts replace the flags', its denied tools add to them,
    /// its schema replaces `--json-schema`, and its MCP servers are started with the
    /// flags' (see [`crate::mcp_config`]).
    #[must_use]
    pub fn with_initialize(mut self, init: InitializeOptions) -> Self {
        if let Some(prompt) = &init.system_prompt {
            self.system_prompt = Some(prompt.clone());
            self.system_prompt_file = None;
        }
        if let Some(append) = &init.append_system_prompt {
            self.append_system_prompt = Some(append.clone());
        }
        self.disallowed_tools
            .extend(init.disallowed_tools.iter().cloned());
        self.plugins.extend(init.plugins.iter().cloned());
        if let Some(schema) = &init.json_schema {
            self.json_schema = Some(schema.to_string());
        }
        if let Some(agents) = &init.agents {
            let mut merged = self
                .agents
                .as_deref()
                .and_then(|json| serde_json::from_str::<serde_json::Map<String, Value>>(json).ok())
                .unwrap_or_default();
            merged.extend(agents.clone());
            self.agents = Some(Value::Object(merged).to_string());
        }
        self.initialize = init;
        self
    }
}

/// Splits tool lists given as `"Bash Read" Edit` or `Read,Grep` into single rules,
/// keeping spaces and commas inside parentheses: `Bash(git diff:*)` stays whole.
#[must_use]
pub fn split_tool_list(values: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for value in values {
        let mut depth = 0usize;
        let mut current = String::new();
        for c in value.chars() {
            match c {
                '(' => {
                    depth += 1;
                    current.push(c);
                }
                ')' => {
                    depth = depth.saturating_sub(1);
                    current.push(c);
                }
                ',' | ' ' | '\t' | '\n' if depth == 0 => {
                    if !current.is_empty() {
                        out.push(std::mem::take(&mut current));
                    }
                }
                _ => current.push(c),
            }
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_lists_split_on_commas_and_spaces_but_not_inside_parentheses() {
        let got = split_tool_list(&[
            "Bash Read".to_owned(),
            "Edit,Grep".to_owned(),
            "Bash(git diff:*)".to_owned(),
            "Read(src/a b.rs), Glob".to_owned(),
        ]);
        assert_eq!(
            got,
            [
                "Bash",
                "Read",
                "Edit",
                "Grep",
                "Bash(git diff:*)",
                "Read(src/a b.rs)",
                "Glob"
            ]
        );
    }
}
