//! Putting a session together from flags, settings and the environment.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use gyre_api::{
    AnthropicClient, ModelClient, RecordingClient, ReplayClient, RetryOptions, RetryPolicy,
};
use gyre_loop::{
    AgentCatalog, AgentSetup, ApiDeps, ContextCompactor, DEFAULT_SUBAGENT_MAX_TURNS, EngineConfig,
    JsonlTranscript, PipelineCompactor, QueryEngine, TranscriptHealth, import_transcript,
    left_out_note, load_transcript, load_transcript_until, project_dir_name,
};
use gyre_mcp::McpServers;
use gyre_protocol::{CacheControl, ContentBlock, SystemBlock};
use gyre_tools::plan::ExitPlanModeTool;
use gyre_tools::{PermissionMode, ToolContext, ToolRegistry};

use futures::{Stream, StreamExt};
use gyre_loop::{EngineEvent, LoopEvent, PromptMark, SharedTranscript, starts_turn, unknown_marks};

use crate::approvals::{ApprovalRequest, Approvals};
use crate::backend::BackendFacts;
use crate::checkpoint::{Checkpoints, RewindError};
use crate::commands::{CommandInfo, CommandRoots, Commands};
use crate::env::Environment;
use crate::error::CoreError;
use crate::expansion::{Author, Expander};
use crate::facts::SessionFacts;
use crate::gate::{Gate, ModeName, Rules, UnknownMode};
use crate::hooks::{HookBase, Hooks};
use crate::ops::{
    Asking, Checkpointing, Control, Event, Op, RewindMode, RewindPoint, Rewound, next_question,
};
use crate::options::{Resume, SessionOptions, split_tool_list};
use crate::settings::Settings;
use crate::structured::{self, StructuredOutput};
use crate::system_prompt::{
    SDK_SYSTEM_PROMPT, default_system_prompt, environment_context, project_memory,
    static_system_prompt,
};
use crate::thinking::{Thinking, ThinkingDeps};

/// The model used when neither a flag, the settings nor ANTHROPIC_MODEL names one.
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";

/// The directory of this project's transcripts under gyre's `home`
/// ([`Environment::gyre_home`]).
#[must_use]
pub fn project_dir(home: &Path, cwd: &Path) -> PathBuf {
    home.join("projects").join(project_dir_name(cwd))
}

/// Where the reference CLI (Claude Code) keeps its sessions: `CLAUDE_CONFIG_DIR`, else
/// `~/.claude`. Its transcripts are laid out as gyre's, under `projects/`.
#[must_use]
pub fn reference_home(env: &Environment) -> Option<PathBuf> {
    env.var("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.home().map(|h| h.join(".claude")))
}

/// The most recently written session of this directory.
#[must_use]
pub fn latest_session(home: &Path, cwd: &Path) -> Option<String> {
    let dir = project_dir(home, cwd);
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max_by_key(|(t, _)| *t)
        .and_then(|(_, p)| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
}

/// The model client: the Anthropic API, or a fixture (`GYRE_REPLAY_FIXTURE=path`
/// serves a recording back, no key needed; `GYRE_RECORD_FIXTURE=path` records the
/// session, secrets redacted). Used by `cargo xtask fixture`.
fn model_client(
    env: &Environment,
    settings: &Settings,
    cwd: &Path,
    betas: &[String],
) -> Result<(Arc<dyn ModelClient>, BackendFacts), CoreError> {
    let failed = |e: &dyn std::fmt::Display| CoreError::Client(e.to_string());
    if let Some(path) = env.var("GYRE_REPLAY_FIXTURE") {
        let replay = ReplayClient::from_file(&path).map_err(|e| failed(&e))?;
        return Ok((Arc::new(replay), BackendFacts::fixture(&path)));
    }
    let mut config = crate::backend::client_config(env, settings.api_key_helper.as_deref(), cwd)
        .map_err(|e| failed(&e))?;
    config.betas = crate::options::split_tool_list(betas);
    let facts = BackendFacts::of(&config);
    let secret = config.backend.static_secret().map(str::to_owned);
    let client: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(config).map_err(|e| failed(&e))?);
    match env.var("GYRE_RECORD_FIXTURE") {
        Some(path) => {
            let mut recorder = RecordingClient::create(client, &path).map_err(|e| failed(&e))?;
            if let Some(secret) = secret {
                recorder = recorder.with_secret(secret);
            }
            Ok((Arc::new(recorder), facts))
        }
        None => Ok((client, facts)),
    }
}

/// A ready session: the engine, what the output lines repeat, and the gate every tool
/// call passes (permissions and hooks, changed by the SDK's control requests).
pub struct Session {
    pub engine: QueryEngine,
    pub facts: SessionFacts,
    /// Whether a transcript line could not be written (reported on stderr at once).
    pub transcript_health: TranscriptHealth,
    /// The MCP servers, for `mcp_status`; their tools are in the engine's registry.
    pub mcp: Arc<McpServers>,
    pub gate: Arc<Gate>,
    /// The sub-agent definitions the Agent tool offers; the SDK's `initialize` adds to them.
    pub agents: AgentCatalog,
    /// Where permission questions go, and the model `SetModel(None)` restores.
    asking: Asking,
    /// The custom commands and skills (`/name args`).
    commands: Arc<Commands>,
    /// The tools' context, in which a prompt's `@` files are read and `!` commands run.
    tool_context: ToolContext,
    /// What the user's own shell commands printed since the last message: sent before
    /// the next one.
    pending: Vec<ContentBlock>,
    /// The file checkpoints, or why the session keeps none.
    checkpoints: Checkpointing,
    /// One per message of the conversation that starts a turn: the prompt it came
    /// from, where known (see [`gyre_loop::LoadedSession::marks`]).
    marks: Vec<Option<PromptMark>>,
    /// The `source` SessionStart hooks run with before the next prompt (`startup`,
    /// `resume`, `clear`, `compact`), once.
    session_start: Option<&'static str>,
    /// The workflow of the plan-mode reminder, when the front-end gave its own (an
    /// Agent SDK's `planModeInstructions`).
    plan_workflow: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("facts", &self.facts)
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

fn parse_session_id(raw: &str) -> Result<String, CoreError> {
    uuid::Uuid::parse_str(raw)
        .map(|u| u.to_string())
        .map_err(|_| {
            CoreError::Invalid(format!(
                "--session-id {raw:?} is not a UUID (e.g. 123e4567-e89b-12d3-a456-426614174000)"
            ))
        })
}

/// Builds the session `options` ask for.
///
/// # Errors
/// Missing API key, unreadable settings, a bad rule or flag value, an unknown session.
pub fn build(
    options: &SessionOptions,
    cwd: &Path,
    settings: &Settings,
    interactive: bool,
    env: &Environment,
    mcp: McpServers,
) -> Result<Session, CoreError> {
    let cli = options;
    let home = env.gyre_home();
    let (client, backend) = model_client(env, settings, cwd, &cli.betas)?;
    let retry = RetryOptions::new(RetryPolicy::from_lookup(|name| env.var(name)));

    let (session_id, resumed) = match (&cli.resume, &cli.session_id) {
        (Resume::Id(id), _) => {
            let id = parse_session_id(id).map_err(|_| {
                CoreError::Invalid(format!(
                    "--resume {id:?} is not a session id; `gyre sessions` lists them"
                ))
            })?;
            (id, true)
        }
        (Resume::Latest, _) => {
            let id = latest_session(&home, cwd).ok_or_else(|| {
                CoreError::Invalid(format!(
                    "no session to continue in {}; start one with `gyre -p \"…\"`",
                    cwd.display()
                ))
            })?;
            (id, true)
        }
        (Resume::New, Some(id)) => (parse_session_id(id)?, false),
        (Resume::New, None) => (uuid::Uuid::new_v4().to_string(), false),
    };
    if cli.resume_drops_turn.is_some() && cli.resume_session_at.is_none() {
        return Err(CoreError::Invalid(
            "--resume-drops-turn needs --resume-session-at (the message to resume at)".to_owned(),
        ));
    }
    if cli.resume_session_at.is_some() && !resumed {
        return Err(CoreError::Invalid(
            "--resume-session-at needs --resume <session id> (or --continue)".to_owned(),
        ));
    }
    let mut transcript_path = JsonlTranscript::path_for(&home, cwd, &session_id);
    let loaded = if resumed {
        // A session of the reference CLI's is imported: gyre goes on in its own copy.
        let imported = match reference_home(env) {
            Some(reference) if !transcript_path.is_file() => {
                let from = JsonlTranscript::path_for(&reference, cwd, &session_id);
                if from.is_file() {
                    import_transcript(&from, &transcript_path).map_err(CoreError::io(
                        "could not import the Claude Code transcript",
                        &from,
                    ))?;
                }
                Some(from)
            }
            _ => None,
        };
        if !transcript_path.is_file() {
            return Err(CoreError::Invalid(format!(
                "no session {session_id} in {}; `gyre sessions` lists this directory's sessions",
                cwd.display()
            )));
        }
        let loaded = match &cli.resume_session_at {
            // `--resume-session-at`: the conversation as it was at that message.
            Some(at) => load_transcript_until(&transcript_path, at)
                .map_err(CoreError::io(
                    "could not read the transcript",
                    &transcript_path,
                ))?
                .ok_or_else(|| {
                    CoreError::Invalid(format!(
                        "--resume-session-at {at}: session {session_id} has no message with that uuid (the `uuid` of a line the session printed)"
                    ))
                })?,
            None => load_transcript(&transcript_path).map_err(CoreError::io(
                "could not read the transcript",
                &transcript_path,
            ))?,
        };
        if let Some(turn) = &cli.resume_drops_turn {
            let whole = load_transcript(&transcript_path).map_err(CoreError::io(
                "could not read the transcript",
                &transcript_path,
            ))?;
            check_dropped_turn(&whole.marks, loaded.marks.len(), turn)?;
        }
        if let Some(from) = imported {
            eprintln!(
                "gyre: imported Claude Code session {session_id} from {} ({} messages){}",
                from.display(),
                loaded.messages.len(),
                left_out_note(&loaded.left_out)
                    .map(|note| format!("; {note}"))
                    .unwrap_or_default()
            );
        }
        Some(loaded)
    } else {
        if cli.session_id.is_some() && transcript_path.exists() {
            return Err(CoreError::Invalid(format!(
                "session {session_id} already exists; resume it with --resume {session_id}"
            )));
        }
        None
    };

    // --fork-session: the history goes on in a new session; the old transcript stays as
    // it was. The copy makes the new one resumable with everything before the fork.
    // The fork's id is `session_id` when one is given (as the reference CLI takes
    // `--session-id` with `--fork-session`; ACP's session/fork names none).
    let session_id = if resumed && cli.fork_session {
        let fork = match &cli.session_id {
            Some(id) => parse_session_id(id)?,
            None => uuid::Uuid::new_v4().to_string(),
        };
        let fork_path = JsonlTranscript::path_for(&home, cwd, &fork);
        if fork_path.exists() {
            return Err(CoreError::Invalid(format!(
                "session {fork} already exists; fork under another id"
            )));
        }
        std::fs::copy(&transcript_path, &fork_path).map_err(CoreError::io(
            "could not fork the transcript into",
            &fork_path,
        ))?;
        // Its checkpoints go along: the fork can rewind to the prompts it copied.
        let backups = crate::checkpoint::backup_dir(&home, &session_id);
        if backups.is_dir() {
            let into = crate::checkpoint::backup_dir(&home, &fork);
            gyre_loop::copy_files(&backups, &into)
                .map_err(CoreError::io("could not fork the checkpoints into", &into))?;
        }
        transcript_path = fork_path;
        fork
    } else {
        session_id
    };

    // `--project-config-root`: the project's configuration comes from there.
    let config_root = cli.project_config_root.as_deref().unwrap_or(cwd);
    let trusted = crate::trust::is_trusted(&home, config_root);
    let plugins = crate::plugins::resolve(&cli.plugins, cwd)?;
    let plugin_dirs: Vec<PathBuf> = plugins.iter().map(|p| p.dir.clone()).collect();
    // A shared catalog: the SDK's `agents` from `initialize` are added to it.
    let agents = AgentCatalog::new(crate::agents::definitions(
        cli.agents.as_deref(),
        env.home().as_deref(),
        config_root,
        trusted,
        &plugin_dirs,
    )?);
    // Custom commands and skills: the user's and the project's as --setting-sources
    // says, the project's only in a trusted folder.
    let sources = cli.setting_sources.as_deref();
    let commands = Arc::new(Commands::new(
        CommandRoots::new(
            env.home().as_deref(),
            &home,
            config_root,
            CommandRoots::source_enabled(sources, "user"),
            CommandRoots::source_enabled(sources, "project") && trusted,
        )
        .with_plugins(plugin_dirs),
    ));
    // `--agent NAME`: the main thread runs as that agent (its prompt, tools and model).
    let main_agent = match &cli.agent {
        Some(name) => Some(agents.get(name).ok_or_else(|| {
            CoreError::Invalid(format!(
                "--agent {name:?}: no such agent; the agents are {}",
                agents.names().join(", ")
            ))
        })?),
        None => None,
    };
    let model = cli
        .model
        .clone()
        .or_else(|| {
            main_agent
                .as_ref()
                .filter(|a| a.model.as_deref().is_some_and(|m| m.trim() != "inherit"))
                .map(|a| a.model_or(""))
        })
        .or_else(|| loaded.as_ref().and_then(|l| l.model.clone()))
        .or_else(|| settings.model.clone())
        .or_else(|| env.var("ANTHROPIC_MODEL"))
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());

    let mut registry = ToolRegistry::with_default_tools();
    let mut only = split_tool_list(&cli.tools);
    if let Some(tools) = main_agent.as_ref().and_then(|a| a.tools.clone())
        && (only.is_empty() || only == ["default"])
    {
        only = tools;
    }
    if !only.is_empty() && only != ["default"] {
        registry = registry.filtered(&only);
    }
    for tool in mcp.tools() {
        registry.register(tool);
    }
    // An SDK's `toolAliases`: a call by one name runs another tool.
    if !cli.initialize.tool_aliases.is_empty() {
        registry.set_aliases(cli.initialize.tool_aliases.clone());
    }
    let structured_slot = structured::Slot::default();
    let structured = match &cli.json_schema {
        Some(schema) => Some(
            StructuredOutput::from_flag(schema, Arc::clone(&structured_slot))
                .map_err(|e| CoreError::Invalid(e.to_string()))?,
        ),
        None => None,
    };
    if let Some(tool) = structured {
        registry.register(Arc::new(tool));
    }

    let mode_name = if cli.dangerously_skip_permissions {
        Some("bypassPermissions".to_owned())
    } else {
        cli.permission_mode
            .clone()
            .or_else(|| settings.permissions.default_mode.clone())
    };
    let mode: ModeName = mode_name
        .as_deref()
        .unwrap_or("default")
        .parse()
        .map_err(|e: UnknownMode| CoreError::Invalid(e.to_string()))?;
    let mut working_dirs = vec![cwd.to_path_buf()];
    for dir in &cli.add_dir {
        let abs = if dir.is_absolute() {
            dir.clone()
        } else {
            cwd.join(dir)
        };
        if !abs.is_dir() {
            return Err(CoreError::Invalid(format!(
                "--add-dir {}: not a directory",
                dir.display()
            )));
        }
        working_dirs.push(abs);
    }
    let mut allow_rules = settings.permissions.allow.clone();
    allow_rules.extend(split_tool_list(&cli.allowed_tools));
    let mut deny_rules = settings.permissions.deny.clone();
    deny_rules.extend(split_tool_list(&cli.disallowed_tools));
    let ask = settings.permissions.ask.clone();
    let mut hooks = Hooks::new(HookBase {
        session_id: session_id.clone(),
        transcript_path: transcript_path.display().to_string(),
        cwd: cwd.display().to_string(),
        child_env: env.child_vars(),
    });
    hooks.add_settings_commands(&settings.hooks_value());
    for plugin in &plugins {
        if let Some(more) = crate::plugins::hooks(plugin)? {
            hooks.add_settings_commands(&more);
        }
    }
    let permission_mode = mode.name.clone();
    let gate = Arc::new(
        Gate::new(
            mode,
            Rules {
                allow: allow_rules.clone(),
                ask,
                deny: deny_rules.clone(),
            },
            hooks,
        )
        .map_err(|e| CoreError::Invalid(e.to_string()))?
        .allowing_bypass(cli.allow_dangerously_skip_permissions),
    );
    if !cli.initialize.code_running_mcp_tools.is_empty() {
        gate.set_code_running_tools(
            cli.initialize
                .code_running_mcp_tools
                .iter()
                .map(|(server, tool)| format!("mcp__{server}__{tool}"))
                .collect(),
        );
    }
    let permissions = gate.permissions();
    // `--tools default` (or no --tools) offers every tool.
    let all_tools = only.is_empty() || only == ["default"];
    let offered = |name: &str| all_tools || only.iter().any(|t| t == name);
    if offered("ExitPlanMode") {
        registry.register(Arc::new(ExitPlanModeTool::new(gate.mode_handle())));
    }
    if offered("WebSearch")
        && let Some(search) = crate::web_search::definition(
            &allow_rules,
            &deny_rules,
            permissions.mode() == PermissionMode::BypassPermissions,
        )
    {
        registry.add_server_tool(search);
    }

    let session_dir = project_dir(&home, cwd).join(&session_id);
    // gyre's home is protected by where it is, whatever its name.
    let mut tool_context = ToolContext::new(cwd.to_path_buf())
        .with_protected_root(&home)
        .with_output_dir(session_dir.join("tool-outputs"))
        .with_child_env(env.child_vars());
    tool_context.max_tool_concurrency = gyre_tools::max_concurrency_from(|name| env.var(name));
    if let Some(editor) = &cli.editor {
        tool_context.editor_files.clone_from(&editor.files);
        tool_context.editor_terminals.clone_from(&editor.terminals);
        tool_context.progress.clone_from(&editor.progress);
    }
    for dir in working_dirs.iter().skip(1) {
        tool_context = tool_context.with_working_dir(dir.clone());
    }
    // Searches skip what the read deny rules name — those in force now, so a rule added
    // mid-session (`addRules`) hides its paths from the next search on.
    tool_context.hidden = Some(live_read_deny_filter(
        Arc::clone(&gate),
        tool_context.clone(),
    ));
    // The sandbox asks the policy in force at each command: deny rules added mid-session
    // (`addRules`, an "always deny") reach the kernel from the next command on.
    let rules_context = tool_context.clone();
    let live_gate = Arc::clone(&gate);
    let by_mode = settings.sandbox_by_mode(
        gate.mode_handle(),
        gyre_tools::sandbox::ReadDeniedSource::live(move || {
            live_gate.permissions().sandbox_read_denied(&rules_context)
        }),
    );
    if interactive {
        // Said at start if at all; later the permission question names the reason.
        by_mode.quiet_from_now();
    }
    tool_context.sandbox_by_mode = Some(by_mode);
    tool_context.sandbox_access = settings.sandbox.access(env);

    // `excludeDynamicSections`: the default prompt without the environment, which the
    // first user message carries instead (only for a new conversation: a resumed one
    // has it already).
    let mut pending = Vec::new();
    let system_text = match (&cli.system_prompt, &cli.system_prompt_file) {
        (Some(s), _) => s.clone(),
        (None, Some(path)) => gyre_tools::read_config_file(path)
            .map_err(CoreError::io("could not read --system-prompt-file", path))?,
        (None, None) => match &main_agent {
            Some(agent) => agent.prompt.clone(),
            None if cli.initialize.exclude_dynamic_sections => {
                if loaded.is_none() {
                    pending.push(ContentBlock::text(environment_context(
                        cwd,
                        SystemTime::now(),
                    )));
                }
                static_system_prompt(&registry.names())
            }
            None => default_system_prompt(cwd, &registry.names(), SystemTime::now()),
        },
    };
    let from_sdk = env
        .var("CLAUDE_CODE_ENTRYPOINT")
        .is_some_and(|e| e.starts_with("sdk"));
    // An empty prompt (the SDKs send `[""]` when their user set none) gives way to the
    // main agent's, else to the SDK's minimal prompt.
    let system_text = match &main_agent {
        _ if !system_text.trim().is_empty() => system_text,
        Some(agent) => agent.prompt.clone(),
        None if from_sdk => SDK_SYSTEM_PROMPT.to_owned(),
        None => system_text,
    };
    // Project memory (AGENTS.md / CLAUDE.md) follows --setting-sources, with a custom
    // system prompt too; without the flag it goes with the default prompt only.
    let memory = match &cli.setting_sources {
        Some(sources) => sources.split(',').any(|s| s.trim() == "project"),
        None => cli.system_prompt.is_none() && cli.system_prompt_file.is_none(),
    };
    let system_text = if memory {
        format!(
            "{system_text}{}",
            project_memory(cwd, env.home().as_deref())
        )
    } else {
        system_text
    };
    let parts: Vec<&str> = [
        Some(system_text.as_str()),
        cli.append_system_prompt.as_deref(),
        cli.json_schema.as_ref().map(|_| structured::INSTRUCTION),
    ]
    .into_iter()
    .flatten()
    .filter(|p| !p.trim().is_empty())
    .collect();
    // `systemPromptSnapshot: true`: the prompt the conversation recorded, when it has
    // one, is sent again as it was; else this one is recorded.
    let snapshot = cli.initialize.system_prompt_snapshot == Some(true);
    let recorded = loaded
        .as_ref()
        .and_then(|l| l.system_prompt.clone())
        .filter(|_| snapshot);
    let parts = match &recorded {
        Some(text) => vec![text.as_str()],
        None => parts,
    };
    // `--system-prompt ""` from anything but an SDK means no system prompt: the API
    // refuses an empty text block.
    let system = if parts.is_empty() {
        Vec::new()
    } else {
        let mut block = SystemBlock::text(parts.join("\n\n"));
        block.cache_control = Some(CacheControl::ephemeral());
        vec![block]
    };

    let to_record = (snapshot && recorded.is_none())
        .then(|| system.first().map(|b| b.text.clone()))
        .flatten();
    let deps = Arc::new(ApiDeps::new(client, retry));
    let can_use_tool = Arc::clone(&gate) as Arc<dyn gyre_tools::CanUseTool>;
    // Sub-agents and side requests report their messages and usage to the engine.
    let (side_events, side_rx) = gyre_loop::subagent_channel();
    // WebFetch's answers and auto mode's verdicts come from the small, fast model.
    let small = env
        .var("ANTHROPIC_SMALL_FAST_MODEL")
        .unwrap_or_else(|| crate::web_fetch::DEFAULT_SMALL_FAST_MODEL.to_owned());
    gate.set_judge(crate::auto_mode::Judge::new(
        Arc::clone(&deps) as _,
        small.clone(),
        side_events.clone(),
    ));
    if offered("WebFetch") {
        let fetch = crate::web_fetch::WebFetchTool::new(
            Arc::clone(&deps) as _,
            small,
            side_events.clone(),
            &crate::backend::network(env),
        )?;
        registry.register(Arc::new(fetch));
    }
    // Memory files of subfolders come with the first Read there, when memory is on.
    if memory && let Some(read) = registry.get("Read").cloned() {
        registry.register(Arc::new(crate::memory::NestedMemoryRead::new(
            read,
            cwd,
            env.home().as_deref(),
        )));
    }
    // An SDK's `skills`: the Skill tool offers only those named.
    let chosen: Option<Vec<_>> = cli.initialize.skills.as_ref().map(|names| {
        commands
            .skills()
            .iter()
            .filter(|skill| crate::skills::selected(&skill.name, names))
            .cloned()
            .collect()
    });
    if offered(crate::skills::SKILL_TOOL)
        && let Some(tool) =
            crate::skills::SkillTool::new(chosen.as_deref().unwrap_or(commands.skills()))
    {
        registry.register(Arc::new(tool));
    }
    // A bare tool name in --disallowedTools takes the tool out of the request; a rule
    // with a specifier (`Bash(rm:*)`) only denies matching calls.
    let removed = split_tool_list(&cli.disallowed_tools);
    let kept: Vec<_> = registry
        .names()
        .into_iter()
        .filter(|n| !removed.iter().any(|r| r == n))
        .collect();
    registry = registry.filtered(&kept);
    let agent_setup = AgentSetup {
        definitions: agents.clone(),
        tools: registry.clone(),
        deps: Arc::clone(&deps) as Arc<dyn gyre_loop::QueryDeps>,
        can_use_tool: Arc::clone(&can_use_tool),
        model: model.clone(),
        max_turns: DEFAULT_SUBAGENT_MAX_TURNS,
        session_id: session_id.clone(),
        sidechain_dir: Some(session_dir.join("subagents")),
        hook: Some(Arc::clone(&gate) as Arc<dyn gyre_loop::SubagentHook>),
        append_system_prompt: cli.initialize.append_subagent_system_prompt.clone(),
    };
    let wants_agents = (offered("Agent") || offered("Task"))
        && !removed.iter().any(|r| r == "Agent" || r == "Task");
    let registry = crate::agents::with_agent_tool(registry, wants_agents, agent_setup, side_events);
    let registry = Arc::new(registry);
    let max_output_tokens: Option<u32> = env
        .var("GYRE_MAX_OUTPUT_TOKENS")
        .and_then(|v| v.parse().ok());
    let compact_config = gyre_compact::CompactConfig::from_vars(
        model.clone(),
        u64::from(max_output_tokens.unwrap_or(gyre_loop::DEFAULT_MAX_OUTPUT_TOKENS)),
        |name| env.var(name),
    );
    let context = crate::facts::ContextFacts::of(&compact_config);
    let compactor: Box<dyn ContextCompactor> = Box::new(
        PipelineCompactor::new(
            compact_config,
            Arc::clone(&deps) as Arc<dyn gyre_loop::QueryDeps>,
            Some(session_dir.clone()),
            Some(Arc::clone(&tool_context.file_state)),
        )
        .with_compact_hook(Arc::clone(&gate) as Arc<dyn gyre_loop::CompactHook>),
    );

    let config = EngineConfig {
        session_id: session_id.clone(),
        cwd: cwd.to_path_buf(),
        model: model.clone(),
        fallback_model: cli.fallback_model.clone(),
        system,
        max_turns: cli.max_turns,
        max_budget_usd: cli.max_budget_usd,
        max_output_tokens,
        token_budget: None,
    };
    let (transcript, transcript_health): (Option<SharedTranscript>, _) =
        if !cli.no_session_persistence {
            let transcript = JsonlTranscript::open(transcript_path.clone())
                .map_err(CoreError::io(
                    "could not create the transcript",
                    &transcript_path,
                ))?
                .on_first_failure(|message| eprintln!("gyre: {message}"));
            let health = transcript.health();
            (Some(SharedTranscript::new(Box::new(transcript))), health)
        } else {
            (None, TranscriptHealth::default())
        };
    // An SDK's session keeps checkpoints when the SDK asks for them, as the reference's.
    let checkpoints = if from_sdk
        && !env
            .var("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING")
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes"))
    {
        Checkpointing::Off(
            "file checkpointing is off in this SDK session: create the client with enable_file_checkpointing=True (enableFileCheckpointing, CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=true)".to_owned(),
        )
    } else {
        let store = Checkpoints::new(
            crate::checkpoint::backup_dir(&home, &session_id),
            transcript.clone(),
            tool_context.editor_files.clone(),
        )
        .resume(
            loaded
                .as_ref()
                .map(|l| l.file_history.clone())
                .unwrap_or_default(),
        );
        let store = Arc::new(store);
        tool_context.file_history = Some(Arc::clone(&store) as _);
        Checkpointing::On(store)
    };
    let transcript: Box<dyn gyre_loop::TranscriptStore> = match transcript {
        Some(shared) => Box::new(shared),
        None => Box::new(Unrecorded),
    };
    // Thinking and effort go on the main loop's requests, not on compaction summaries.
    let thinking = Thinking::from_flags(cli.max_thinking_tokens, cli.thinking.as_deref())
        .map_err(|e| CoreError::Invalid(e.to_string()))?;
    let output = crate::thinking::output_config(cli.effort.as_deref(), cli.task_budget)
        .map_err(|e| CoreError::Invalid(e.to_string()))?;
    let display = crate::thinking::ThinkingDisplay::from_flag(cli.thinking_display.as_deref())
        .map_err(|e| CoreError::Invalid(e.to_string()))?;
    let loop_deps = ThinkingDeps::wrap(deps, thinking, display, output);
    let expansion_context = tool_context.clone();
    let mut engine = QueryEngine::new(
        config,
        loop_deps,
        Arc::clone(&registry),
        tool_context,
        can_use_tool,
        compactor,
        transcript,
    )
    .with_stop_hook(Arc::clone(&gate) as Arc<dyn gyre_loop::StopHook>)
    .with_tool_hook(Arc::clone(&gate) as Arc<dyn gyre_loop::ToolHook>);
    gate.set_interrupt(engine.interrupt_handle());
    if cli.json_schema.is_some() {
        gate.require_structured_output(Arc::clone(&structured_slot));
    }
    engine = engine.with_subagent_events(side_rx);
    if let Some(l) = &loaded {
        engine = engine.with_history(l.messages.clone(), l.last_uuid.clone());
        // The later messages are left behind: a rewind line says so, and the next
        // lines chain onto the message resumed at.
        if let Some(at) = &cli.resume_session_at {
            engine.rewind_conversation(
                l.messages.len(),
                at,
                &format!("the messages after {at} (--resume-session-at)"),
            );
        }
    }
    if let Some(text) = &to_record {
        engine.record_system_prompt(text);
    }
    let facts = SessionFacts {
        session_id,
        cwd: cwd.to_string_lossy().into_owned(),
        meter: engine.meter(),
        tools: registry.names().into_iter().map(Cow::into_owned).collect(),
        permission_mode,
        mcp_servers: mcp.status(),
        structured: cli.json_schema.is_some().then_some(structured_slot),
        last_usage: gyre_protocol::Usage::default(),
        context,
        backend,
    };
    Ok(Session {
        session_start: Some(if loaded.is_some() {
            "resume"
        } else {
            "startup"
        }),
        marks: loaded.map(|l| l.marks).unwrap_or_default(),
        checkpoints,
        asking: Asking::new(engine.model().to_owned()),
        engine,
        facts,
        transcript_health,
        mcp: Arc::new(mcp),
        gate,
        agents,
        commands,
        tool_context: expansion_context,
        pending,
        plan_workflow: cli.initialize.plan_mode_instructions.clone(),
    })
}

/// How a refused `--resume-drops-turn` starts (the SDKs match on it).
pub const RESUME_REJECTED: &str = "Resume rejected by --resume-drops-turn:";

/// `--resume-drops-turn`: the turns after the first `kept` of `marks` may be only the
/// one started by the prompt `turn`.
fn check_dropped_turn(
    marks: &[Option<PromptMark>],
    kept: usize,
    turn: &str,
) -> Result<(), CoreError> {
    let dropped = marks.get(kept..).unwrap_or_default();
    match dropped
        .iter()
        .find(|m| m.as_ref().is_none_or(|m| m.uuid != turn))
    {
        None => Ok(()),
        Some(other) => Err(CoreError::Invalid(format!(
            "{RESUME_REJECTED} the messages after the resume point hold more than the turn of prompt {turn}: {}",
            match other {
                Some(mark) => format!("also the turn of prompt {}", mark.uuid),
                None => "also a message gyre wrote on the user's behalf".to_owned(),
            }
        ))),
    }
}

/// `--no-session-persistence`: the session's lines go nowhere.
struct Unrecorded;

impl gyre_loop::TranscriptStore for Unrecorded {
    fn append(&mut self, _entry: &gyre_loop::TranscriptEntry) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a step of a turn's events brings.
enum Next {
    Question(ApprovalRequest),
    Engine(Option<EngineEvent>),
}

impl Session {
    /// What fills the context window now, by category (`/context`, `get_context_usage`).
    #[must_use]
    pub fn context_breakdown(&self) -> crate::context::ContextBreakdown {
        let model = self.facts.model();
        let memory_files: Vec<(PathBuf, String)> =
            crate::system_prompt::memory_files(Path::new(&self.facts.cwd))
                .into_iter()
                .filter_map(|p| Some((p.clone(), gyre_tools::read_config_file(&p).ok()?)))
                .collect();
        crate::context::ContextBreakdown::of(&crate::context::ContextParts {
            model: &model,
            window: self.facts.context.window(&model),
            autocompact: self.facts.context.autocompact,
            system: self.engine.system(),
            tools: &self.engine.tools().definitions(),
            memory_files: &memory_files,
            messages: self.engine.messages(),
        })
    }

    /// Permission questions become [`Event::Question`]s in a turn's events, answered
    /// with [`Op::Answer`]. Without this an "ask" is a denial that says which rule would
    /// allow the call (headless).
    pub fn ask_questions(&mut self) {
        let (approvals, questions) = Approvals::channel();
        self.gate.ask_through(Arc::clone(&approvals));
        self.asking.approvals = Some(approvals);
        self.asking.questions = Some(questions);
    }

    /// The operations a running turn allows, for whichever task hears them.
    #[must_use]
    pub fn control(&self) -> Control {
        Control::new(
            Arc::clone(&self.gate),
            self.asking.approvals.clone(),
            self.engine.interrupt_handle(),
            self.checkpoints.clone(),
        )
    }

    /// Every command a front-end offers: the `builtins` it runs (names of
    /// [`crate::commands::BUILTIN`]), then the custom commands and skills.
    #[must_use]
    pub fn commands(&self, builtins: &[&str]) -> Vec<CommandInfo> {
        self.commands.list(builtins)
    }

    /// Whether `/name` is a custom command or skill of this session (a prompt for the
    /// model, expanded by [`Op::UserMessage`]).
    #[must_use]
    pub fn has_command(&self, name: &str) -> bool {
        self.commands.find(name).is_some()
    }

    /// Reads files and runs commands for a prompt, under the policy in force now.
    #[must_use]
    pub fn expander(&self) -> Expander {
        Expander::new(self.tool_context.clone(), self.gate.permissions())
    }

    /// The message `content` stands for: `/name args` of a custom command or skill as
    /// its instructions (and the model it asks for), otherwise `content` with the
    /// files its `@` mentions name; after what the user's own shell commands printed
    /// since the last message.
    async fn expand(&mut self, content: Vec<ContentBlock>) -> (Vec<ContentBlock>, Option<String>) {
        let line = match content.as_slice() {
            [ContentBlock::Text { text, .. }] => crate::commands::split_command_line(text)
                .and_then(|(name, args)| {
                    Some((self.commands.find(name)?.clone(), args.to_owned()))
                }),
            _ => None,
        };
        let mentions = content
            .iter()
            .any(|b| matches!(b, ContentBlock::Text { text, .. } if text.contains('@')));
        let mut expanded = std::mem::take(&mut self.pending);
        // A plain message costs nothing more.
        if line.is_none() && !mentions {
            if expanded.is_empty() {
                return (content, None);
            }
            expanded.extend(content);
            return (expanded, None);
        }
        let expander = self.expander();
        if let Some((command, args)) = line {
            expanded.extend(expander.command(&command, &args).await);
            return (expanded, command.model);
        }
        let mut attached = Vec::new();
        for block in &content {
            if let ContentBlock::Text { text, .. } = block
                && text.contains('@')
            {
                attached.extend(expander.mentions(&Author::User, text).await);
            }
        }
        expanded.extend(content);
        expanded.extend(attached);
        (expanded, None)
    }

    /// The prompts of the conversation a rewind can go back to, oldest first.
    #[must_use]
    pub fn rewind_points(&self) -> Vec<RewindPoint> {
        self.marks
            .iter()
            .flatten()
            .filter_map(|mark| {
                Some(RewindPoint {
                    uuid: mark.uuid.clone(),
                    text: mark.text.clone()?,
                    code: match &self.checkpoints {
                        Checkpointing::On(store) => store.has(&mark.uuid),
                        Checkpointing::Off(_) => false,
                    },
                })
            })
            .collect()
    }
}

/// SessionStart hooks (`source`): what they print joins the prompt as context, before it.
async fn session_start_hooks(
    gate: &Gate,
    model: &str,
    source: &str,
    content: Vec<gyre_protocol::ContentBlock>,
) -> Vec<gyre_protocol::ContentBlock> {
    if !gate.has_hook(crate::hooks::HookEvent::SessionStart) {
        return content;
    }
    let fields = serde_json::json!({ "source": source, "model": model });
    let verdict = gate
        .hooks()
        .run(
            crate::hooks::HookEvent::SessionStart,
            Some(source),
            None,
            &gate.mode_name(),
            fields,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await;
    let mut blocks: Vec<_> = verdict
        .context
        .into_iter()
        .map(gyre_protocol::ContentBlock::text)
        .collect();
    blocks.extend(content);
    blocks
}

/// SessionEnd hooks, with `reason`; what they decide changes nothing.
async fn session_end_hooks(gate: &Gate, reason: &str) {
    if !gate.has_hook(crate::hooks::HookEvent::SessionEnd) {
        return;
    }
    gate.hooks()
        .run(
            crate::hooks::HookEvent::SessionEnd,
            None,
            None,
            &gate.mode_name(),
            serde_json::json!({ "reason": reason }),
            &tokio_util::sync::CancellationToken::new(),
        )
        .await;
}

impl Session {
    /// Takes the conversation back to before the prompt `to`.
    fn rewind_conversation(&mut self, to: &str) -> Result<String, RewindError> {
        let gone = || RewindError::ConversationGone;
        let at = self
            .marks
            .iter()
            .position(|m| m.as_ref().is_some_and(|m| m.uuid == to))
            .ok_or_else(gone)?;
        let text = self.marks[at]
            .as_ref()
            .and_then(|m| m.text.clone())
            .ok_or_else(gone)?;
        let starts: Vec<usize> = self
            .engine
            .messages()
            .iter()
            .enumerate()
            .filter(|(_, m)| starts_turn(m))
            .map(|(i, _)| i)
            .collect();
        if starts.len() != self.marks.len() {
            return Err(gone());
        }
        self.engine.rewind_conversation(starts[at], to, &text);
        self.marks.truncate(at);
        Ok(text)
    }

    fn rewind(
        &mut self,
        to: &str,
        mode: RewindMode,
        dry_run: bool,
    ) -> Result<Rewound, RewindError> {
        let known = self.marks.iter().flatten().any(|m| m.uuid == to)
            || matches!(&self.checkpoints, Checkpointing::On(store) if store.has(to));
        if !known {
            return Err(RewindError::UnknownCheckpoint(to.to_owned()));
        }
        let mut rewound = Rewound::default();
        if mode.code() {
            rewound.files = Some(self.checkpoints.rewind_files(to, dry_run)?);
        }
        if mode.conversation() && !dry_run {
            rewound.prompt = Some(self.rewind_conversation(to)?);
        }
        Ok(rewound)
    }

    /// Runs `op` and streams the events it causes; the stream ends when the operation
    /// has (a turn: after its [`EngineEvent::Result`]).
    pub fn submit(&mut self, op: Op) -> impl Stream<Item = Event> + Send + '_ {
        async_stream::stream! {
            let op = match self.control().submit(op) {
                Ok(event) => {
                    if let Some(event) = event {
                        if let Event::ModeChanged(Ok(mode)) = &event {
                            mode.clone_into(&mut self.facts.permission_mode);
                        }
                        yield event;
                    }
                    return;
                }
                Err(op) => op,
            };
            let (op, uuid) = match op {
                Op::UserMessageWithId { content, uuid } => (Op::UserMessage(content), Some(uuid)),
                other => (other, None),
            };
            match op {
                Op::UserMessage(content) => {
                    let typed: String = content
                        .iter()
                        .filter_map(|b| match b {
                            gyre_protocol::ContentBlock::Text { text, .. } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect();
                    let (content, model) = self.expand(content).await;
                    let content = match self.session_start.take() {
                        Some(source) => {
                            let gate = Arc::clone(&self.gate);
                            let model = self.engine.model().to_owned();
                            session_start_hooks(&gate, &model, source, content).await
                        }
                        None => content,
                    };
                    let mut content =
                        match crate::gate::prompt_hooks(&self.gate, &self.facts.session_id, content).await {
                            Ok(content) => content,
                            Err(blocked) => {
                                yield Event::PromptBlocked(blocked.reason);
                                return;
                            }
                        };
                    // In plan mode each prompt carries the plan-mode reminder, after it.
                    if self.gate.permissions().mode() == PermissionMode::Plan {
                        content.push(ContentBlock::text(crate::system_prompt::plan_mode_reminder(
                            self.plan_workflow.as_deref(),
                        )));
                    }
                    // Every prompt is a checkpoint, named by the prompt's uuid.
                    let uuid = uuid.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
                    if let Checkpointing::On(store) = &self.checkpoints {
                        store.begin(&uuid);
                    }
                    // A command's `model` holds for its turn only.
                    let before = model.map(|model| {
                        let before = self.engine.model().to_owned();
                        self.engine.set_model(model);
                        before
                    });
                    let mut compacted = false;
                    let mut typed = Some(typed);
                    {
                    let Session { engine, facts, asking, marks, .. } = self;
                    let events = engine.submit_message_as(content, Some(uuid));
                    futures::pin_mut!(events);
                    loop {
                        let next = tokio::select! {
                            biased;
                            question = next_question(&mut asking.questions) => Next::Question(question),
                            event = events.next() => Next::Engine(event),
                        };
                        match next {
                            Next::Question(question) => yield Event::Question(question),
                            Next::Engine(None) => break,
                            Next::Engine(Some(event)) => {
                                match &event {
                                    // The main conversation's last usage is the context in use.
                                    EngineEvent::Loop(LoopEvent::Usage { usage, .. }) => {
                                        facts.last_usage = *usage;
                                    }
                                    EngineEvent::Message { uuid, message, is_meta } if starts_turn(message) => {
                                        // The prompt is named by what the user typed, not
                                        // by the hooks' context that rode along.
                                        let text = match typed.take() {
                                            Some(prompt) => Some(prompt),
                                            None => (!is_meta).then(|| message.text()),
                                        };
                                        marks.push(Some(PromptMark { uuid: uuid.clone(), text }));
                                    }
                                    EngineEvent::Loop(LoopEvent::Compacted(_)) => compacted = true,
                                    _ => {}
                                }
                                yield Event::Engine(event);
                            }
                        }
                    }
                    }
                    if let Some(before) = before {
                        self.engine.set_model(before);
                    }
                    if compacted {
                        self.marks = unknown_marks(self.engine.messages());
                        self.session_start = Some("compact");
                    }
                }
                Op::Shell(command) => {
                    let ran = self.expander().shell(Author::User, &command).await;
                    // As the reference keeps them: the command and its output, which
                    // the model reads with the next message.
                    self.pending.push(ContentBlock::text(format!(
                        "<bash-input>{command}</bash-input>\n<bash-output>{}</bash-output>",
                        ran.output.trim_end()
                    )));
                    yield Event::ShellRan { command, output: ran };
                }
                Op::SetModel(model) => {
                    let model = model.unwrap_or_else(|| self.asking.default_model.clone());
                    self.engine.set_model(model);
                    yield Event::ModelChanged(self.engine.model().to_owned());
                }
                Op::Compact { instructions } => {
                    let outcome = self.engine.compact_with(instructions.as_deref()).await;
                    if matches!(outcome, Ok(Some(_))) {
                        self.marks = unknown_marks(self.engine.messages());
                        self.session_start = Some("compact");
                    }
                    yield Event::Compacted(outcome);
                }
                Op::Clear => {
                    session_end_hooks(&Arc::clone(&self.gate), "clear").await;
                    self.engine.clear();
                    self.pending.clear();
                    self.marks.clear();
                    self.session_start = Some("clear");
                    yield Event::Cleared;
                }
                Op::End { reason } => {
                    session_end_hooks(&Arc::clone(&self.gate), &reason).await;
                    yield Event::Ended;
                }
                Op::Rewind { to, mode, dry_run } => {
                    yield Event::Rewound(self.rewind(&to, mode, dry_run));
                }
                // Applied above.
                Op::Interrupt
                | Op::SetMode(_)
                | Op::Answer { .. }
                | Op::UserMessageWithId { .. } => {}
            }
        }
    }
}

/// A filter holding what the `Read(…)` deny rules of `gate`'s policy now name, rebuilt
/// only when the policy is (a mode change or `addRules`).
fn live_read_deny_filter(gate: Arc<Gate>, ctx: ToolContext) -> gyre_tools::PathFilter {
    type Cached = Option<(Arc<gyre_tools::Permissions>, Option<gyre_tools::PathFilter>)>;
    let cache: std::sync::Mutex<Cached> = std::sync::Mutex::new(None);
    gyre_tools::PathFilter::new(move |path| {
        let now = gate.permissions();
        let filter = {
            let mut cached = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match cached.as_ref() {
                Some((built_from, filter)) if Arc::ptr_eq(built_from, &now) => filter.clone(),
                _ => {
                    let filter = now.read_deny_filter(&ctx);
                    *cached = Some((now, filter.clone()));
                    filter
                }
            }
        };
        filter.is_some_and(|f| f.matches(path))
    })
}
