//! `--input-format stream-json`: the session an Agent SDK drives.
//!
//! A thread reads stdin for the whole session, from before the session is built
//! ([`SdkInput`]): answers to gyre's own control requests reach the [`ControlChannel`] at
//! once, so SDK MCP servers (`mcp_message`) can be connected while the session starts.
//! A dispatcher task answers the SDK's control requests at once — also while a turn
//! runs, so `interrupt` and `can_use_tool` answers get through — and queues user
//! messages for the turn loop, which runs them one after the other until stdin ends.

use std::io::BufRead;
use std::sync::{Arc, Mutex, PoisonError};

use gyre_protocol::ContentBlock;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ExecError;
use crate::control::{
    self, ControlChannel, ControlRequest, Inbound, LineOut, SessionStates, WireError,
};
use crate::headless::{self, Output};
use crate::stream_json::{self, ContextFacts, SessionState};
use futures::StreamExt;
use gyre_core::InitializeOptions;
use gyre_core::context::ContextBreakdown;
use gyre_core::gate::Gate;
use gyre_core::session::Session;
use gyre_core::{Control, Event as SessionEvent, Op};

use crate::permission;

/// stdin of an SDK session, read from the start.
pub struct SdkInput {
    /// gyre's requests to the SDK and their answers.
    pub channel: ControlChannel,
    /// Every line but the answers, for the dispatcher.
    lines: mpsc::UnboundedReceiver<Inbound>,
    /// The first line, read before the session is built ([`SdkInput::boot_initialize`]);
    /// dispatched first.
    first: Option<Inbound>,
    /// The id of the `initialize` whose options the session was built with.
    boot_initialize: Option<String>,
}

impl SdkInput {
    /// Starts reading stdin. Answers (`control_response`) are handed to their waiting
    /// requests as they arrive; the rest waits for [`run`]. When stdin ends, requests
    /// still waiting fail.
    #[must_use]
    pub fn start(out: LineOut) -> Self {
        let (inbound_tx, mut inbound_rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let inbound = match line {
                    Ok(l) if l.trim().is_empty() => continue,
                    Ok(l) => control::parse_inbound(&l),
                    Err(e) => Inbound::Invalid(format!("could not read stdin: {e}")),
                };
                if inbound_tx.send(inbound).is_err() {
                    break;
                }
            }
        });
        let channel = ControlChannel::new(out);
        let (lines_tx, lines) = mpsc::unbounded_channel();
        let router = channel.clone();
        tokio::spawn(async move {
            while let Some(inbound) = inbound_rx.recv().await {
                match inbound {
                    Inbound::Response { request_id, result } => {
                        resolve(&router, &request_id, result);
                    }
                    other => {
                        if lines_tx.send(other).is_err() {
                            break;
                        }
                    }
                }
            }
            router.close();
        });
        Self {
            channel,
            lines,
            first: None,
            boot_initialize: None,
        }
    }

    /// Waits for the SDK's first line. When it is `initialize`, returns the options it
    /// carries for the session (both SDKs send it first, and wait for its answer, which
    /// goes out once the session is built with them). Anything else waits for the
    /// dispatcher. A malformed option is said on stderr and the session is built from
    /// the flags alone; the `initialize` answer names the field.
    pub async fn boot_initialize(&mut self) -> Option<InitializeOptions> {
        let first = self.lines.recv().await?;
        let options = match &first {
            Inbound::Request {
                request_id,
                request: Ok(ControlRequest::Initialize(init)),
            } => match init.session_options() {
                Ok(options) => {
                    self.boot_initialize = Some(request_id.clone());
                    Some(options)
                }
                Err(e) => {
                    eprintln!("gyre: {e}; the session starts with the flags' options");
                    None
                }
            },
            _ => None,
        };
        self.first = Some(first);
        options
    }
}

fn resolve(channel: &ControlChannel, request_id: &str, result: Result<Value, WireError>) {
    if !channel.resolve(request_id, result) {
        eprintln!("gyre: control_response for unknown request {request_id:?}; ignored");
    }
}

/// A user message waiting to run, with the `interrupt` count when it arrived.
struct Turn {
    content: Vec<ContentBlock>,
    /// The `uuid` the SDK gave the message, echoed by `--replay-user-messages`.
    uuid: Option<String>,
    interrupts: u64,
}

/// What the dispatcher shares with the turn loop.
#[derive(Default)]
struct Shared {
    /// `set_model`: the model for the next turn (`None` inside: back to the default).
    next_model: Option<Option<String>>,
    /// Counts `interrupt` requests: one that came after a message was sent but before
    /// its turn got under way still interrupts that turn.
    interrupts: u64,
    /// Tokens of the last request's context, for `get_context_usage`.
    context_tokens: u64,
    /// What filled the window after the last turn, for `get_context_usage`.
    breakdown: Option<ContextBreakdown>,
}

struct Dispatcher {
    out: LineOut,
    channel: ControlChannel,
    gate: Arc<Gate>,
    /// Interrupts and mode changes reach the session while a turn runs.
    control: Control,
    shared: Arc<Mutex<Shared>>,
    turns: mpsc::UnboundedSender<Turn>,
    default_model: String,
    /// The session's model, usage and cost, as the engine keeps them.
    meter: gyre_loop::UsageMeter,
    context: ContextFacts,
    mcp: Arc<gyre_mcp::McpServers>,
    agents: gyre_loop::AgentCatalog,
    /// Bash's background shells, which `stop_task` stops.
    shells: Option<Arc<gyre_tools::background::ShellTable>>,
    /// The id of the `initialize` the session was built with.
    boot_initialize: Option<String>,
    /// The slash commands a user message may be: `/compact`, the custom commands and
    /// the skills.
    commands: Vec<SlashCommand>,
}

impl Dispatcher {
    fn handle(&self, inbound: Inbound) {
        match inbound {
            Inbound::User { content, uuid } => {
                let interrupts = self
                    .shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .interrupts;
                let _ = self.turns.send(Turn {
                    content,
                    uuid,
                    interrupts,
                });
            }
            Inbound::Request {
                request_id,
                request:
                    Ok(
                        request @ (ControlRequest::McpReconnect { .. }
                        | ControlRequest::McpToggle { .. }),
                    ),
            } => {
                // Starting a server takes a while: answered when it is done, while other
                // requests go on.
                let (out, mcp, channel) = (
                    self.out.clone(),
                    Arc::clone(&self.mcp),
                    self.channel.clone(),
                );
                tokio::spawn(async move {
                    let reply = match mcp_control(&mcp, &channel, &request).await {
                        Ok(()) => control::success(&request_id, empty()),
                        Err(e) => control::error(&request_id, &e),
                    };
                    if let Err(e) = out.line(&reply) {
                        eprintln!("gyre: could not write a control response: {e}");
                    }
                });
            }
            Inbound::Request {
                request_id,
                request,
            } => {
                let reply = match request
                    .map_err(String::from)
                    .and_then(|request| self.answer(&request_id, request))
                {
                    Ok(body) => control::success(&request_id, body),
                    Err(e) => control::error(&request_id, &e),
                };
                if let Err(e) = self.out.line(&reply) {
                    eprintln!("gyre: could not write a control response: {e}");
                }
            }
            Inbound::Response { request_id, result } => {
                resolve(&self.channel, &request_id, result);
            }
            // gyre's answers to the SDK's requests are immediate: nothing to cancel.
            Inbound::Cancel { .. } => {}
            Inbound::Invalid(message) => eprintln!("gyre: {message}; line ignored"),
        }
    }

    /// The model of the next turn: one `set_model` chose, else the session's now.
    fn model_now(&self) -> String {
        let next = self
            .shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_model
            .clone();
        match next {
            Some(Some(model)) => model,
            Some(None) => self.default_model.clone(),
            None => self.meter.model(),
        }
    }

    fn answer(&self, request_id: &str, request: ControlRequest) -> Result<Value, String> {
        match request {
            ControlRequest::Initialize(init) => {
                let options = init.session_options()?;
                let applied = self.boot_initialize.as_deref() == Some(request_id);
                if !applied && !options.is_empty() {
                    eprintln!(
                        "gyre: initialize came after the session started: its systemPrompt, appendSystemPrompt, mcpServers, sdkMcpServers, disallowedTools and jsonSchema were not applied; send initialize first"
                    );
                }
                if let Some(hooks) = init.hooks.as_ref().filter(|h| h.is_object()) {
                    self.gate.add_sdk_hooks(hooks, self.channel.client());
                }
                // The SDK's `agents={…}`: sub-agents the Agent tool offers from now on.
                if let Some(agents) = init.agents.as_ref().filter(|a| a.is_object()) {
                    let definitions = gyre_loop::parse_agents_json(&agents.to_string())
                        .map_err(|e| format!("initialize: invalid `agents`: {e}"))?;
                    self.agents.add(definitions);
                }
                let model = self.model_now();
                let code_running = if applied {
                    options.code_running_mcp_tools.as_slice()
                } else {
                    &[]
                };
                body(
                    &InitializeResponse::new(
                        self.commands.clone(),
                        AgentInfo::all(&self.agents),
                        &model,
                        applied,
                    )
                    .with_code_running(code_running),
                )
            }
            ControlRequest::Interrupt => {
                self.shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .interrupts += 1;
                let _ = self.control.submit(Op::Interrupt);
                Ok(empty())
            }
            ControlRequest::SetPermissionMode { mode } => {
                self.control.set_mode(&mode).map_err(|e| e.to_string())?;
                Ok(empty())
            }
            ControlRequest::SetModel { model } => {
                self.shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .next_model = Some(model);
                Ok(empty())
            }
            ControlRequest::McpStatus => body(&McpStatusResponse {
                mcp_servers: self.mcp.status().iter().map(SdkServerStatus::of).collect(),
            }),
            ControlRequest::GetContextUsage => {
                let model = self.model_now();
                let (tokens, breakdown) = {
                    let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                    (shared.context_tokens, shared.breakdown.clone())
                };
                let window = self.context.window(&model);
                let mut usage = ContextUsage::new(tokens, window, model, self.context.autocompact);
                if let Some(breakdown) = &breakdown {
                    usage.fill(breakdown);
                }
                body(&usage)
            }
            // Answered as the reference does: a success that says whether it could.
            ControlRequest::RewindFiles {
                user_message_id,
                dry_run,
            } => {
                let op = Op::Rewind {
                    to: user_message_id.unwrap_or_default(),
                    mode: gyre_core::ops::RewindMode::Code,
                    dry_run: dry_run.unwrap_or(false),
                };
                let Ok(Some(SessionEvent::Rewound(rewound))) = self.control.submit(op) else {
                    return Err("rewind_files was not applied".to_owned());
                };
                body(&RewindFilesResponse::of(rewound))
            }
            // gyre's tasks are Bash's background shells: the id is the shell's.
            ControlRequest::StopTask { task_id } => {
                let id = task_id.as_deref().unwrap_or("");
                let Some(shells) = &self.shells else {
                    return Err(format!(
                        "no task {id:?}: this session has no background shells"
                    ));
                };
                shells.kill(id).map_err(|e| e.to_string())?;
                Ok(empty())
            }
            // Answered by `handle` as they take a while; `parse` never yields `Unknown`.
            ControlRequest::McpReconnect { .. }
            | ControlRequest::McpToggle { .. }
            | ControlRequest::Unknown => Err("unexpected control request".to_owned()),
        }
    }
}

/// An empty answer body, `{}`.
fn empty() -> Value {
    Value::Object(serde_json::Map::new())
}

/// An answer body as JSON.
fn body(response: &impl Serialize) -> Result<Value, String> {
    serde_json::to_value(response).map_err(|e| format!("could not encode the answer: {e}"))
}

/// The answer to `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct InitializeResponse {
    /// The slash commands a user message may be (`/compact`).
    commands: Vec<SlashCommand>,
    /// The sub-agents the Agent tool offers now.
    agents: Vec<AgentInfo>,
    output_style: String,
    available_output_styles: Vec<String>,
    models: Vec<ModelInfo>,
    account: Map<String, Value>,
    pid: u32,
    /// Whether `mcpServers` and `sdkMcpServers` were started with the session (the
    /// TypeScript SDK ends a session that sent servers and gets no `true`).
    mcp_servers_applied: bool,
    /// Whether `disallowedTools` were applied (likewise).
    disallowed_tools_applied: bool,
    /// Whether `settings` were applied (likewise).
    settings_applied: bool,
    /// The `codeRunningMcpTools` the session was built with, `{server: [tool]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    code_running_mcp_tools_applied: Option<Map<String, Value>>,
}

/// The models `set_model` offers: the session's, then the current families.
const MODELS: [(&str, &str); 3] = [
    ("claude-sonnet-4-5", "Sonnet 4.5: the everyday model"),
    ("claude-opus-4-5", "Opus 4.5: for the hardest tasks"),
    ("claude-haiku-4-5", "Haiku 4.5: the fastest"),
];

impl InitializeResponse {
    /// `model`: the session's; `applied`: whether the session was built with this
    /// request's options.
    fn new(
        commands: Vec<SlashCommand>,
        agents: Vec<AgentInfo>,
        model: &str,
        applied: bool,
    ) -> Self {
        let mut models = vec![ModelInfo {
            value: model.to_owned(),
            display_name: format!("Default ({model})"),
            description: "The model this session started with".to_owned(),
        }];
        models.extend(
            MODELS
                .iter()
                .filter(|(id, _)| *id != model)
                .map(|(id, description)| ModelInfo {
                    value: (*id).to_owned(),
                    display_name: (*id).to_owned(),
                    description: (*description).to_owned(),
                }),
        );
        Self {
            commands,
            agents,
            output_style: "default".to_owned(),
            available_output_styles: vec!["default".to_owned()],
            models,
            account: Map::new(),
            pid: std::process::id(),
            mcp_servers_applied: applied,
            disallowed_tools_applied: applied,
            settings_applied: applied,
            code_running_mcp_tools_applied: None,
        }
    }

    /// With the `codeRunningMcpTools` applied (none: the field is left out).
    fn with_code_running(mut self, tools: &[(String, String)]) -> Self {
        if tools.is_empty() {
            return self;
        }
        let mut by_server = Map::new();
        for (server, tool) in tools {
            if let Value::Array(names) = by_server
                .entry(server.clone())
                .or_insert_with(|| Value::Array(Vec::new()))
            {
                names.push(Value::String(tool.clone()));
            }
        }
        self.code_running_mcp_tools_applied = Some(by_server);
        self
    }
}

/// One of `initialize`'s `commands`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlashCommand {
    name: String,
    description: String,
    argument_hint: String,
}

/// One of `initialize`'s `agents`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AgentInfo {
    name: String,
    description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

impl AgentInfo {
    /// Every sub-agent `catalog` offers.
    fn all(catalog: &gyre_loop::AgentCatalog) -> Vec<Self> {
        catalog
            .names()
            .into_iter()
            .filter_map(|name| catalog.get(&name))
            .map(|d| Self {
                name: d.name,
                description: d.description,
                model: d.model,
            })
            .collect()
    }
}

/// One of `initialize`'s `models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelInfo {
    value: String,
    display_name: String,
    description: String,
}

/// The answer to `mcp_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpStatusResponse {
    mcp_servers: Vec<SdkServerStatus>,
}

/// One server as `mcp_status` lists it: name, status, transport, tools, and the error
/// of a failed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct SdkServerStatus {
    name: String,
    status: String,
    config: ServerTransport,
    tools: Vec<ToolName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ServerTransport {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ToolName {
    name: String,
}

impl SdkServerStatus {
    fn of(status: &gyre_mcp::ServerStatus) -> Self {
        Self {
            name: status.name.clone(),
            status: status.state.as_str().to_owned(),
            config: ServerTransport {
                kind: status.transport.to_owned(),
            },
            tools: status
                .tools
                .iter()
                .map(|t| ToolName { name: t.clone() })
                .collect(),
            error: match &status.state {
                gyre_mcp::ServerState::Failed { error } => Some(error.clone()),
                _ => None,
            },
        }
    }
}

/// The answer to `rewind_files` (the SDKs' `RewindFilesResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RewindFilesResponse {
    can_rewind: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    files_changed: Vec<String>,
    insertions: usize,
    deletions: usize,
}

impl RewindFilesResponse {
    fn of(rewound: Result<gyre_core::ops::Rewound, gyre_core::checkpoint::RewindError>) -> Self {
        match rewound {
            Ok(rewound) => {
                let files = rewound.files.unwrap_or_default();
                Self {
                    can_rewind: true,
                    error: None,
                    files_changed: files
                        .files_changed
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect(),
                    insertions: files.insertions,
                    deletions: files.deletions,
                }
            }
            Err(e) => Self {
                can_rewind: false,
                error: Some(e.to_string()),
                files_changed: Vec::new(),
                insertions: 0,
                deletions: 0,
            },
        }
    }
}

/// The answer to `get_context_usage`: the last request's context size, and what fills
/// the window by category as the session estimates it after the last turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContextUsage {
    categories: Vec<UsageCategory>,
    total_tokens: u64,
    max_tokens: u64,
    raw_max_tokens: u64,
    percentage: f64,
    model: String,
    is_auto_compact_enabled: bool,
    memory_files: Vec<UsageMemoryFile>,
    mcp_tools: Vec<UsageMcpTool>,
    agents: Vec<Value>,
    grid_rows: Vec<Value>,
}

/// `{"name": "Messages", "tokens": 1200, "color": "purple"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UsageCategory {
    name: String,
    tokens: u64,
    color: String,
}

/// `{"path": "/p/CLAUDE.md", "type": "Project", "tokens": 120}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct UsageMemoryFile {
    path: String,
    #[serde(rename = "type")]
    kind: String,
    tokens: u64,
}

/// `{"name": "mcp__docs__search", "serverName": "docs", "tokens": 80}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMcpTool {
    name: String,
    server_name: String,
    tokens: u64,
}

impl ContextUsage {
    /// The categories, memory files and MCP tools of `breakdown`; when no request has
    /// been sent yet, its estimate is the total too.
    fn fill(&mut self, breakdown: &ContextBreakdown) {
        self.categories = breakdown
            .categories
            .iter()
            .map(|c| UsageCategory {
                name: c.name.to_owned(),
                tokens: c.tokens,
                color: gyre_core::context::color(c.name).to_owned(),
            })
            .collect();
        self.memory_files = breakdown
            .memory_files
            .iter()
            .map(|m| UsageMemoryFile {
                path: m.path.display().to_string(),
                kind: "Project".to_owned(),
                tokens: m.tokens,
            })
            .collect();
        self.mcp_tools = breakdown
            .mcp_tools
            .iter()
            .map(|t| UsageMcpTool {
                name: t.name.clone(),
                server_name: t.server.clone(),
                tokens: t.tokens,
            })
            .collect();
        if self.total_tokens == 0 {
            self.total_tokens = breakdown.used();
            self.percentage = breakdown.percent();
        }
    }

    fn new(total_tokens: u64, window: u64, model: String, autocompact: bool) -> Self {
        #[allow(clippy::cast_precision_loss)]
        let percentage = total_tokens as f64 * 100.0 / window as f64;
        Self {
            categories: Vec::new(),
            total_tokens,
            max_tokens: window,
            raw_max_tokens: window,
            percentage,
            model,
            is_auto_compact_enabled: autocompact,
            memory_files: Vec::new(),
            mcp_tools: Vec::new(),
            agents: Vec::new(),
            grid_rows: Vec::new(),
        }
    }
}

/// `mcp_reconnect` (`serverName`) and `mcp_toggle` (`serverName`, `enabled`): restarts
/// the server, or disconnects it and withdraws its tools from the next request, or
/// starts it again.
async fn mcp_control(
    mcp: &gyre_mcp::McpServers,
    channel: &ControlChannel,
    request: &ControlRequest,
) -> Result<(), String> {
    let (name, enabled) = match request {
        ControlRequest::McpReconnect { server_name } => (server_name, None),
        ControlRequest::McpToggle {
            server_name,
            enabled,
        } => (server_name, Some(*enabled)),
        _ => return Err("not an MCP control request".to_owned()),
    };
    let sdk = (mcp.transport(name) == Some("sdk"))
        .then(|| gyre_core::mcp_config::sdk_channel(name, &channel.client()));
    let done = match enabled {
        Some(enabled) => mcp.set_enabled(name, enabled, sdk).await,
        None => mcp.reconnect(name, sdk).await,
    };
    done.map_err(|e| e.to_string())
}

/// What the SDK asked for with flags and its environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct SdkOptions {
    /// `--permission-prompt-tool stdio`: permission questions as `can_use_tool`.
    pub ask_over_stdio: bool,
    /// `--include-partial-messages`.
    pub partial: bool,
    /// `--include-hook-events`.
    pub hook_events: bool,
    /// `--replay-user-messages`.
    pub replay_user_messages: bool,
    /// `session_state_changed` lines (see [`SessionStates`]).
    pub session_states: bool,
}

/// Runs the session until stdin ends (or Ctrl+C). Returns whether the last turn was an
/// error.
pub async fn run(
    session: &mut Session,
    input: SdkInput,
    out: LineOut,
    options: &SdkOptions,
    mut mirror: Option<crate::mirror::Mirror>,
    ctrl_c: &CancellationToken,
) -> Result<bool, ExecError> {
    let SdkOptions {
        ask_over_stdio,
        partial,
        hook_events,
        replay_user_messages,
        session_states,
    } = *options;
    let states = SessionStates::new(
        out.clone(),
        session.facts.session_id.clone(),
        session_states,
    );
    if hook_events {
        let out = out.clone();
        let session_id = session.facts.session_id.clone();
        session.gate.report_hooks_to(Arc::new(move |report| {
            let line = stream_json::hook(report, &session_id, &uuid::Uuid::new_v4().to_string());
            if let Err(e) = out.line(&line) {
                eprintln!("gyre: could not write a hook event: {e}");
            }
        }));
    }
    let SdkInput {
        channel,
        lines: mut inbound_rx,
        first,
        boot_initialize,
    } = input;
    let shared = Arc::new(Mutex::new(Shared {
        breakdown: Some(session.context_breakdown()),
        ..Shared::default()
    }));
    let default_model = session.engine.model().to_owned();
    if ask_over_stdio {
        session.ask_questions();
    }
    let control = session.control();
    let (turns_tx, mut turns_rx) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher {
        out: out.clone(),
        channel: channel.clone(),
        gate: Arc::clone(&session.gate),
        control: control.clone(),
        shared: Arc::clone(&shared),
        turns: turns_tx,
        default_model: default_model.clone(),
        meter: session.engine.meter(),
        context: session.facts.context,
        mcp: Arc::clone(&session.mcp),
        agents: session.agents.clone(),
        shells: session.engine.tools().background_shells().cloned(),
        boot_initialize,
        commands: session
            .commands(&["compact"])
            .into_iter()
            .map(|c| SlashCommand {
                name: c.name,
                description: c.description,
                argument_hint: c.argument_hint,
            })
            .collect(),
    };
    let output_line = out.clone();
    let mut output = Output::new(out, crate::OutputFormat::StreamJson, partial);
    // The init line comes first, then the answers: also to the `initialize` the session
    // was built with.
    headless::print_init(&mut output, session)?;
    tokio::spawn(async move {
        if let Some(inbound) = first {
            dispatcher.handle(inbound);
        }
        while let Some(inbound) = inbound_rx.recv().await {
            dispatcher.handle(inbound);
        }
    });
    let mut last_error = false;
    let mirror_to = output_line.clone();
    let mut mirror_now = move || -> Result<(), ExecError> {
        if let Some(mirror) = &mut mirror {
            mirror
                .flush(&mirror_to)
                .map_err(ExecError::io("could not write a transcript_mirror frame"))?;
        }
        Ok(())
    };
    loop {
        mirror_now()?;
        // Ctrl+C between turns ends the session too, not only during one.
        let Turn {
            content,
            uuid,
            interrupts: seen,
        } = tokio::select! {
            next = turns_rx.recv() => match next {
                Some(turn) => turn,
                None => break,
            },
            () = ctrl_c.cancelled() => break,
        };
        // The prompt's id, the SDK's own when it sent one: the checkpoint
        // `rewind_files` names.
        let uuid = uuid.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        if replay_user_messages {
            output_line.line(&stream_json::user_replay(
                &content,
                &session.facts.session_id,
                &uuid,
            ))?;
        }
        if let Err(e) = control::check_tool_results(session.engine.messages(), &content) {
            refuse(&output_line, session, &e.0)?;
            last_error = true;
            continue;
        }
        let next_model = shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_model
            .take();
        if let Some(model) = next_model {
            session
                .submit(Op::SetModel(model))
                .for_each(|_| async {})
                .await;
        }
        if let Some(instructions) = compact_command(&content) {
            last_error = compact(&output_line, session, instructions.as_deref()).await?;
            continue;
        }
        let interrupt = control.clone();
        let started = || {
            // An interrupt sent after this message but before its turn was under way.
            if shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .interrupts
                != seen
            {
                let _ = interrupt.submit(Op::Interrupt);
            }
        };
        let ask = |request| permission::ask_over(&channel, &control, &states, request);
        states.send(SessionState::Running);
        let turn =
            headless::run_turn(session, content, Some(uuid), &mut output, started, ask).await;
        let result = match turn {
            Ok(result) => result,
            Err(ExecError::PromptBlocked(reason)) => {
                let text = format!("the prompt was blocked by a UserPromptSubmit hook: {reason}");
                refuse(&output_line, session, &text)?;
                states.send(SessionState::Idle);
                last_error = true;
                continue;
            }
            Err(e) => return Err(e),
        };
        // After the result line: the turn is over.
        states.send(SessionState::Idle);
        last_error = result.is_error;
        // A session that cannot be recorded stops: its failure was reported on stderr
        // when it happened.
        if session.transcript_health.failure().is_some() {
            last_error = true;
            break;
        }
        let used = session.facts.last_usage;
        let breakdown = session.context_breakdown();
        {
            let mut shared = shared.lock().unwrap_or_else(PoisonError::into_inner);
            shared.context_tokens =
                used.input_tokens + used.cache_read_input_tokens + used.cache_creation_input_tokens;
            shared.breakdown = Some(breakdown);
        }
        if ctrl_c.is_cancelled() {
            break;
        }
    }
    mirror_now()?;
    Ok(last_error)
}

/// `/compact [instructions]`: a user message that is only that command.
fn compact_command(content: &[ContentBlock]) -> Option<Option<String>> {
    let [ContentBlock::Text { text, .. }] = content else {
        return None;
    };
    let rest = text.trim().strip_prefix("/compact")?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let rest = rest.trim();
    Some((!rest.is_empty()).then(|| rest.to_owned()))
}

/// Runs `/compact`: a `compact_boundary` line and a result line, as Claude Code answers
/// the command from an SDK. Returns whether it failed.
async fn compact(
    out: &LineOut,
    session: &mut Session,
    instructions: Option<&str>,
) -> Result<bool, ExecError> {
    // Op::Compact always ends with its Compacted event.
    let mut compacted = Ok(None);
    {
        let events = session.submit(Op::Compact {
            instructions: instructions.map(str::to_owned),
        });
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            if let SessionEvent::Compacted(result) = event {
                compacted = result;
            }
        }
    }
    let text = match compacted {
        Ok(Some(outcome)) => {
            out.line(&stream_json::compact_boundary(
                &outcome,
                &session.facts.session_id,
                &uuid::Uuid::new_v4().to_string(),
            ))?;
            "Compacted."
        }
        Ok(None) => "Nothing to compact yet.",
        Err(e) => {
            refuse(out, session, &format!("/compact failed: {e}"))?;
            return Ok(true);
        }
    };
    out.line(&without_turn(session, text, Vec::new()))?;
    Ok(false)
}

/// A stdin message that will not run: said on stderr, and answered with an error result
/// line so the driver is not left waiting.
fn refuse(out: &LineOut, session: &Session, reason: &str) -> Result<(), ExecError> {
    eprintln!("gyre: {reason}");
    out.line(&without_turn(session, reason, vec![reason.to_owned()]))?;
    Ok(())
}

/// A result line for a stdin message that ran no turn.
fn without_turn(session: &Session, text: &str, errors: Vec<String>) -> stream_json::Line {
    let meter = &session.facts.meter;
    stream_json::without_turn(
        text,
        errors,
        &meter.usage(),
        meter.cost_usd(),
        &session.facts.session_id,
        &uuid::Uuid::new_v4().to_string(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Serialises to `wire` (the field names gyre answered with before these types)
    /// and reads back to itself.
    fn round_trip<T>(answer: &T, wire: &Value)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + std::fmt::Debug,
    {
        assert_eq!(&body(answer).unwrap(), wire);
        assert_eq!(&serde_json::from_value::<T>(wire.clone()).unwrap(), answer);
    }

    #[test]
    fn the_answers_keep_their_wire_names_and_round_trip() {
        let reviewer = AgentInfo {
            name: "reviewer".into(),
            description: "Reviews diffs".into(),
            model: None,
        };
        let compact = SlashCommand {
            name: "compact".into(),
            description: "Summarise the conversation so far to free context".into(),
            argument_hint: "<what to keep>".into(),
        };
        let init =
            InitializeResponse::new(vec![compact], vec![reviewer], "claude-sonnet-4-5", true);
        round_trip(
            &init,
            &json!({
                "commands": [{"name": "compact", "description": "Summarise the conversation so far to free context", "argumentHint": "<what to keep>"}],
                "agents": [{"name": "reviewer", "description": "Reviews diffs"}],
                "output_style": "default",
                "available_output_styles": ["default"],
                "models": [
                    {"value": "claude-sonnet-4-5", "displayName": "Default (claude-sonnet-4-5)", "description": "The model this session started with"},
                    {"value": "claude-opus-4-5", "displayName": "claude-opus-4-5", "description": "Opus 4.5: for the hardest tasks"},
                    {"value": "claude-haiku-4-5", "displayName": "claude-haiku-4-5", "description": "Haiku 4.5: the fastest"},
                ],
                "account": {},
                "pid": std::process::id(),
                "mcp_servers_applied": true,
                "disallowed_tools_applied": true,
                "settings_applied": true,
            }),
        );
        round_trip(
            &McpStatusResponse {
                mcp_servers: vec![SdkServerStatus::of(&gyre_mcp::ServerStatus {
                    name: "calc".into(),
                    transport: "sdk",
                    state: gyre_mcp::ServerState::Connected,
                    tools: vec!["add".into()],
                })],
            },
            &json!({"mcpServers": [{"name": "calc", "status": "connected", "config": {"type": "sdk"}, "tools": [{"name": "add"}]}]}),
        );
        let failed = SdkServerStatus::of(&gyre_mcp::ServerStatus {
            name: "x".into(),
            transport: "stdio",
            state: gyre_mcp::ServerState::Failed {
                error: "exited".into(),
            },
            tools: Vec::new(),
        });
        round_trip(
            &failed,
            &json!({"name": "x", "status": "failed", "config": {"type": "stdio"}, "tools": [], "error": "exited"}),
        );
        round_trip(
            &ContextUsage::new(50_000, 200_000, "claude-sonnet-4-5".into(), true),
            &json!({
                "categories": [],
                "totalTokens": 50_000,
                "maxTokens": 200_000,
                "rawMaxTokens": 200_000,
                "percentage": 25.0,
                "model": "claude-sonnet-4-5",
                "isAutoCompactEnabled": true,
                "memoryFiles": [],
                "mcpTools": [],
                "agents": [],
                "gridRows": [],
            }),
        );
        assert_eq!(empty(), json!({}));
    }

    #[test]
    fn only_a_message_that_is_the_compact_command_compacts() {
        let text = |t: &str| vec![ContentBlock::text(t)];
        assert_eq!(compact_command(&text("/compact")), Some(None));
        assert_eq!(
            compact_command(&text(" /compact  keep the plan ")),
            Some(Some("keep the plan".into()))
        );
        assert_eq!(compact_command(&text("/compactify")), None);
        assert_eq!(compact_command(&text("please /compact")), None);
        let two = vec![ContentBlock::text("/compact"), ContentBlock::text("more")];
        assert_eq!(compact_command(&two), None);
    }
}
