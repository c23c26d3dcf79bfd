//! Command-line flags, named as Claude Code names them so scripts and SDKs carry over.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use gyre_core::{InitializeOptions, Resume, SessionOptions};

pub use gyre_exec::{InputFormat, OutputFormat};

const AFTER_HELP: &str = "Examples:
  gyre                                    interactive session in this directory
  gyre -p \"why does the build fail?\"      headless: print the final answer
  gyre -p \"fix the lint\" --allowedTools Edit \"Bash(cargo clippy:*)\"
  gyre -c -p \"and now the tests\"          continue the latest session here

Environment: ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL, ANTHROPIC_MODEL,
GYRE_HOME (default ~/.gyre), GYRE_MAX_RETRIES, GYRE_STREAM_IDLE_TIMEOUT_MS,
GYRE_UNATTENDED_RETRY, GYRE_MAX_OUTPUT_TOKENS, GYRE_MAX_TOOL_CONCURRENCY,
GYRE_AUTOCOMPACT_PCT_OVERRIDE, GYRE_DISABLE_AUTOCOMPACT, NO_COLOR, RUST_LOG.
Settings: ~/.gyre/settings.json < .gyre/settings.json < .gyre/settings.local.json < flags.";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the saved sessions of this directory (id, time, first prompt, turns).
    Sessions,
    /// Trust a folder (default: this one): use its project settings' allow rules and
    /// hooks and its .mcp.json servers, which gyre ignores until then.
    Trust {
        /// The folder to trust; folders beneath it are trusted too.
        dir: Option<PathBuf>,
    },
    /// Serve the Agent Client Protocol on stdin/stdout, for Zed, JetBrains and other
    /// ACP editors (docs/acp.md).
    Acp {
        /// The model of new sessions (else the settings', ANTHROPIC_MODEL, the default).
        #[arg(long)]
        model: Option<String>,
        /// The permission mode sessions start in (else the settings' defaultMode).
        #[arg(long, value_name = "MODE")]
        permission_mode: Option<String>,
        /// Offer bypassPermissions among the editor's modes.
        #[arg(long)]
        allow_dangerously_skip_permissions: bool,
    },
    /// Print a shell completion script.
    Completions {
        /// bash, zsh or fish.
        shell: clap_complete::Shell,
    },
}

/// gyre — a coding agent for the terminal.
///
/// `gyre` starts an interactive session; `gyre -p "prompt"` (or the prompt on stdin)
/// runs one task headless and prints the result. Talks to the Anthropic Messages API:
/// set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for another endpoint).
#[derive(Debug, Parser)]
#[command(
    name = "gyre",
    version,
    args_conflicts_with_subcommands = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// The prompt. Headless with -p; otherwise the first message of the interactive session.
    pub prompt: Option<String>,

    /// Print the response and exit (headless mode). The prompt comes from the argument or stdin.
    #[arg(short = 'p', long = "print")]
    pub print: bool,

    /// Output format of headless mode.
    #[arg(long, value_enum, default_value = "text")]
    pub output_format: OutputFormat,

    /// Input format of headless mode.
    #[arg(long, value_enum, default_value = "text")]
    pub input_format: InputFormat,

    /// With stream-json output: also print `stream_event` lines with the raw deltas.
    #[arg(long)]
    pub include_partial_messages: bool,

    /// Model to use (e.g. claude-sonnet-4-5). Default: settings, then ANTHROPIC_MODEL.
    #[arg(long)]
    pub model: Option<String>,

    /// Model to switch to when the main model is overloaded.
    #[arg(long)]
    pub fallback_model: Option<String>,

    /// Stop after this many agentic turns.
    #[arg(long)]
    pub max_turns: Option<u32>,

    /// Stop once the session has cost this many US dollars.
    #[arg(long)]
    pub max_budget_usd: Option<f64>,

    /// Permission mode: default (also `manual`), acceptEdits, plan, bypassPermissions,
    /// dontAsk (what would ask is denied) or auto (a small model judges what would ask;
    /// unsure means ask).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(gyre_core::gate::MODE_NAMES))]
    pub permission_mode: Option<String>,

    /// Allow every tool call without asking (deny rules still apply).
    #[arg(long)]
    pub dangerously_skip_permissions: bool,

    /// Let the session switch to bypassPermissions later (the Agent SDK's
    /// set_permission_mode) without starting in it.
    #[arg(long)]
    pub allow_dangerously_skip_permissions: bool,

    /// Accepted for the Agent SDKs, which pass it when their options travel in the
    /// initialize request (stream-json input); gyre answers initialize whenever it comes.
    #[arg(long)]
    pub await_initialize: bool,

    /// Write no transcript: the session cannot be resumed (the Agent SDKs'
    /// `persistSession: false`).
    #[arg(long)]
    pub no_session_persistence: bool,

    /// Tools allowed without asking, comma- or space-separated: `Read`, `Bash(git diff:*)`.
    #[arg(long = "allowedTools", alias = "allowed-tools", num_args = 1.., value_name = "TOOLS")]
    pub allowed_tools: Vec<String>,

    /// Tools always denied, comma- or space-separated: `Bash`, `Edit(secrets/**)`.
    #[arg(long = "disallowedTools", alias = "disallowed-tools", num_args = 1.., value_name = "TOOLS")]
    pub disallowed_tools: Vec<String>,

    /// More directories the tools may work in, besides the current one.
    #[arg(long = "add-dir", num_args = 1.., value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// Replace the default system prompt.
    #[arg(long)]
    pub system_prompt: Option<String>,

    /// Read the system prompt from a file.
    #[arg(long)]
    pub system_prompt_file: Option<PathBuf>,

    /// Append to the system prompt.
    #[arg(long)]
    pub append_system_prompt: Option<String>,

    /// Continue the most recent session of this directory.
    #[arg(short = 'c', long = "continue")]
    pub continue_session: bool,

    /// Resume a session by id.
    #[arg(short = 'r', long)]
    pub resume: Option<String>,

    /// Use this session id (a UUID) for a new session.
    #[arg(long)]
    pub session_id: Option<String>,

    /// Print every message (required for --output-format stream-json).
    #[arg(long)]
    pub verbose: bool,

    /// Text mode: no progress lines on stderr (retries, fallback model, compaction,
    /// permission denials).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Write debug logs to this file.
    #[arg(long)]
    pub debug_file: Option<PathBuf>,

    /// Sub-agents as JSON: `{"reviewer": {"description": "…", "prompt": "…", "tools": ["Read"]}}`.
    #[arg(long, value_name = "JSON")]
    pub agents: Option<String>,

    /// Only these tools are available, comma- or space-separated ("" for none).
    #[arg(long, num_args = 1.., value_name = "TOOLS")]
    pub tools: Vec<String>,

    /// Which settings files to read, comma-separated: user, project, local (default all).
    #[arg(long)]
    pub setting_sources: Option<String>,
    /// More settings over the files: a JSON file or inline JSON.
    #[arg(long)]
    pub settings: Option<String>,
    /// Where permission questions go in headless mode: `stdio` asks the driving SDK.
    #[arg(long)]
    pub permission_prompt_tool: Option<String>,
    /// Structured output: the final answer as JSON matching this schema (an object schema).
    #[arg(long)]
    pub json_schema: Option<String>,
    /// With stream-json input: print `system/hook_started` and `hook_response` lines.
    #[arg(long)]
    pub include_hook_events: bool,
    /// Extended thinking with this budget (kept below each request's max_tokens; 0: off).
    #[arg(long)]
    pub max_thinking_tokens: Option<u32>,
    /// Extended thinking: adaptive, enabled or disabled.
    #[arg(long)]
    pub thinking: Option<String>,
    /// With --resume or --continue: continue in a new session, leaving the old one as it was.
    #[arg(long)]
    pub fork_session: bool,

    /// MCP servers: a JSON file or inline JSON, {"mcpServers": {…}} (repeatable).
    #[arg(long, num_args = 1.., value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,
    /// Use only the --mcp-config servers, not the project's .mcp.json.
    #[arg(long)]
    pub strict_mcp_config: bool,

    /// How much effort the model spends: low, medium, high, xhigh or max.
    #[arg(long, value_name = "LEVEL")]
    pub effort: Option<String>,
    /// A token budget the model is told about for the task (advisory).
    #[arg(long, value_name = "TOKENS")]
    pub task_budget: Option<u64>,

    /// Run the main thread as this agent (its prompt, tools and model).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Beta features to ask the API for (the anthropic-beta header).
    #[arg(long, num_args = 1.., value_name = "BETAS")]
    pub betas: Vec<String>,

    // Flags that Claude Code's Agent SDKs pass: accepted so drivers keep working.
    /// With --resume: continue from the message with this uuid (the `uuid` of a line
    /// the session printed), leaving the later messages behind.
    #[arg(long, value_name = "MESSAGE_UUID")]
    pub resume_session_at: Option<String>,
    /// A plugin folder: its commands/, agents/, skills/, hooks/hooks.json and
    /// .mcp.json join the session's (repeatable).
    #[arg(long, value_name = "DIR")]
    pub plugin_dir: Vec<PathBuf>,
    /// How thinking comes back from the API: summarized or omitted.
    #[arg(long, value_name = "DISPLAY")]
    pub thinking_display: Option<String>,
    /// Who answers permission questions: host (the program, over
    /// --permission-prompt-tool) or none (what would be asked is denied at once).
    #[arg(long, value_name = "WHO", value_parser = ["host", "none"])]
    pub permission_prompts: Option<String>,
    /// With stream-json input: send the transcript's new lines to the SDK as
    /// transcript_mirror frames (its sessionStore keeps them).
    #[arg(long)]
    pub session_mirror: bool,
    /// Read the project's settings, .mcp.json, commands, skills and agents from this
    /// folder instead of the working directory (the checkout a worktree was made from).
    #[arg(long, value_name = "DIR")]
    pub project_config_root: Option<PathBuf>,
    /// A plugin folder as --plugin-dir, without its MCP servers (repeatable).
    #[arg(long, value_name = "DIR")]
    pub plugin_dir_no_mcp: Vec<PathBuf>,
    /// With --resume-session-at: the prompt uuid of the turn the cut leaves behind;
    /// the resume is refused when it would leave behind anything else.
    #[arg(long, value_name = "PROMPT_UUID")]
    pub resume_drops_turn: Option<String>,
    /// Policy settings from the program that started gyre (JSON or a file): over all
    /// others, and only ever restricting (deny and ask rules, the sandbox on).
    #[arg(long, value_name = "JSON|FILE")]
    pub managed_settings: Option<String>,
    /// With stream-json input: echo each user message (with its uuid) when its turn
    /// starts, as ACP adapters built on the Agent SDK wait for.
    #[arg(long)]
    pub replay_user_messages: bool,
    /// With stream-json input: the policy settings come in `initialize`
    /// (`managedSettings`) rather than as --managed-settings.
    #[arg(long)]
    pub managed_settings_in_initialize: bool,
    #[arg(long, hide = true, num_args = 1..)]
    pub channels: Vec<String>,
    /// With stream-json input: the initialize fields the SDK sends instead of flags
    /// (accepted; gyre reads every initialize field it knows).
    #[arg(long, value_name = "FIELDS")]
    pub initialize_fields: Option<String>,
}

impl Cli {
    /// One-line warnings for SDK flags gyre accepts but does not act on yet.
    #[must_use]
    pub fn ignored_flag_warnings(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut warn = |on: bool, name: &'static str| {
            if on {
                out.push(name);
            }
        };
        warn(!self.channels.is_empty(), "--channels");
        out
    }
}

impl Cli {
    /// What the flags choose about the session.
    #[must_use]
    pub fn session_options(&self) -> SessionOptions {
        let resume = match (&self.resume, self.continue_session) {
            (Some(id), _) => Resume::Id(id.clone()),
            (None, true) => Resume::Latest,
            (None, false) => Resume::New,
        };
        SessionOptions {
            model: self.model.clone(),
            fallback_model: self.fallback_model.clone(),
            max_turns: self.max_turns,
            max_budget_usd: self.max_budget_usd,
            permission_mode: self.permission_mode.clone(),
            dangerously_skip_permissions: self.dangerously_skip_permissions,
            allow_dangerously_skip_permissions: self.allow_dangerously_skip_permissions,
            allowed_tools: self.allowed_tools.clone(),
            disallowed_tools: self.disallowed_tools.clone(),
            tools: self.tools.clone(),
            add_dir: self.add_dir.clone(),
            system_prompt: self.system_prompt.clone(),
            system_prompt_file: self.system_prompt_file.clone(),
            append_system_prompt: self.append_system_prompt.clone(),
            resume,
            session_id: self.session_id.clone(),
            fork_session: self.fork_session,
            resume_session_at: self.resume_session_at.clone(),
            resume_drops_turn: self.resume_drops_turn.clone(),
            no_session_persistence: self.no_session_persistence,
            agents: self.agents.clone(),
            setting_sources: self.setting_sources.clone(),
            json_schema: self.json_schema.clone(),
            max_thinking_tokens: self.max_thinking_tokens,
            thinking: self.thinking.clone(),
            thinking_display: self.thinking_display.clone(),
            effort: self.effort.clone(),
            task_budget: self.task_budget,
            betas: self.betas.clone(),
            agent: self.agent.clone(),
            mcp_config: self.mcp_config.clone(),
            strict_mcp_config: self.strict_mcp_config,
            project_config_root: self.project_config_root.clone(),
            plugins: self
                .plugin_dir
                .iter()
                .map(|dir| (dir, true))
                .chain(self.plugin_dir_no_mcp.iter().map(|dir| (dir, false)))
                .map(|(dir, mcp)| gyre_core::plugins::Plugin {
                    dir: dir.clone(),
                    mcp,
                })
                .collect(),
            initialize: InitializeOptions::default(),
            editor: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use gyre_core::options::split_tool_list;

    use super::*;

    #[test]
    fn an_unknown_permission_mode_is_a_usage_error_naming_the_modes() {
        let err =
            Cli::try_parse_from(["gyre", "-p", "x", "--permission-mode", "sideways"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::InvalidValue);
        let text = err.to_string();
        assert!(
            text.contains("dontAsk") && text.contains("acceptEdits"),
            "{text}"
        );
        for name in gyre_core::gate::MODE_NAMES {
            let cli = Cli::try_parse_from(["gyre", "--permission-mode", name]).unwrap();
            let mode: gyre_core::gate::ModeName = cli.permission_mode.unwrap().parse().unwrap();
            assert!(!mode.name.is_empty());
        }
    }

    #[test]
    fn allowed_tools_take_several_values() {
        let cli = Cli::try_parse_from(["gyre", "-p", "hi", "--allowedTools", "Bash Read", "Edit"])
            .unwrap();
        assert_eq!(
            split_tool_list(&cli.allowed_tools),
            ["Bash", "Read", "Edit"]
        );
    }

    #[test]
    fn sdk_flags_are_accepted_and_reported() {
        let cli = Cli::try_parse_from([
            "gyre",
            "-p",
            "x",
            "--setting-sources",
            "user",
            "--channels",
            "a",
            "--plugin-dir",
            "p",
        ])
        .unwrap();
        assert_eq!(cli.ignored_flag_warnings(), ["--channels"]);
    }

    #[test]
    fn a_plugin_dir_takes_one_folder_so_the_prompt_after_it_stays_the_prompt() {
        let cli = Cli::try_parse_from([
            "gyre",
            "-p",
            "--plugin-dir",
            "a",
            "hello",
            "--plugin-dir",
            "b",
        ])
        .unwrap();
        assert_eq!(cli.prompt.as_deref(), Some("hello"));
        let plugins = cli.session_options().plugins;
        assert_eq!(plugins.len(), 2);
        assert!(plugins.iter().all(|p| p.mcp));
    }

    #[test]
    fn every_hidden_flag_is_one_gyre_warns_it_ignores() {
        use clap::CommandFactory;
        let command = Cli::command();
        let hidden: Vec<_> = command
            .get_arguments()
            .filter(|a| a.is_hide_set())
            .filter_map(|a| {
                Some((
                    format!("--{}", a.get_long()?),
                    a.get_action().takes_values(),
                ))
            })
            .collect();
        let mut args = vec!["gyre".to_owned(), "-p".to_owned(), "x".to_owned()];
        for (flag, takes_value) in &hidden {
            args.push(flag.clone());
            if *takes_value {
                args.push("1".to_owned());
            }
        }
        let hidden: Vec<String> = hidden.into_iter().map(|(flag, _)| flag).collect();
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(cli.ignored_flag_warnings(), hidden);
    }
}
