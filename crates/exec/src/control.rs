//! The Agent SDK's control protocol on stream-json stdin/stdout (docs/sdk-protocol.md).
//!
//! Every stdin line is one JSON object: a user message, a `control_request` from the
//! SDK, a `control_response` answering one of ours, or a `control_cancel_request`.
//! [`parse_inbound`] sorts them; [`ControlChannel`] sends our own requests
//! (`can_use_tool`, `hook_callback`, `mcp_message`) and waits for their answers; [`LineOut`] is the one
//! stdout every writer shares, so lines never interleave.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use gyre_core::InitializeOptions;
use gyre_protocol::{ContentBlock, Message};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

/// What went wrong with a control message, in the words the SDK is sent (the `error`
/// of a `control_response`, or a line on stderr).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

impl From<WireError> for String {
    fn from(error: WireError) -> Self {
        error.0
    }
}

impl From<String> for WireError {
    fn from(message: String) -> Self {
        Self(message)
    }
}
use tokio_util::sync::CancellationToken;

/// One stdin line, sorted.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// `{"type":"user","message":{…},"uuid":…}`: a turn to run.
    User {
        content: Vec<ContentBlock>,
        uuid: Option<String>,
    },
    /// `{"type":"control_request","request_id":…,"request":{"subtype":…}}`; the request,
    /// or the error that answers it (an unknown subtype, a field of the wrong type).
    Request {
        request_id: String,
        request: Result<ControlRequest, WireError>,
    },
    /// `{"type":"control_response","response":{"subtype":"success"|"error",…}}`.
    Response {
        request_id: String,
        result: Result<Value, WireError>,
    },
    /// `{"type":"control_cancel_request","request_id":…}`.
    Cancel { request_id: String },
    /// A line that is none of these: what was wrong with it.
    Invalid(String),
}

/// A stdin line as the SDK writes it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StdinLine {
    User {
        message: Message,
        #[serde(default)]
        uuid: Option<String>,
    },
    /// The request stays an object here: its `request_id` is needed to answer even a
    /// request that does not parse.
    ControlRequest {
        request_id: String,
        request: Map<String, Value>,
    },
    ControlResponse {
        response: ControlResponse,
    },
    ControlCancelRequest {
        request_id: String,
    },
}

/// A `control_response` whose body does not parse (an unknown subtype, an `error`
/// that is not a string): still the answer to its request, an error one.
#[derive(Debug, Deserialize)]
struct AnyResponse {
    response: RequestId,
}

#[derive(Debug, Deserialize)]
struct RequestId {
    request_id: String,
}

/// The lines gyre writes for the control protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ControlLine {
    /// gyre's answer to one of the SDK's requests.
    #[serde(rename = "control_response")]
    Response { response: ControlResponse },
    /// gyre's own request to the SDK.
    #[serde(rename = "control_request")]
    Request {
        request_id: String,
        request: ClientRequest,
    },
    /// gyre no longer waits for the answer to its request `request_id`.
    #[serde(rename = "control_cancel_request")]
    CancelRequest { request_id: String },
}

/// The answer to a control request, either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ControlResponse {
    Success {
        request_id: String,
        #[serde(default)]
        response: Value,
    },
    Error {
        request_id: String,
        #[serde(default = "sdk_error")]
        error: String,
    },
}

fn sdk_error() -> String {
    "the SDK answered with an error".to_owned()
}

/// A control request the SDK sends, by its `subtype`, with the fields as the SDKs
/// write them. Fields gyre does not act on are kept as they came.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ControlRequest {
    Initialize(Box<Initialize>),
    Interrupt,
    SetPermissionMode {
        mode: String,
    },
    /// `null` or no `model`: back to the session's starting model.
    SetModel {
        model: Option<String>,
    },
    McpStatus,
    GetContextUsage,
    RewindFiles {
        user_message_id: Option<String>,
        /// Only say what would change.
        #[serde(default)]
        dry_run: Option<bool>,
    },
    StopTask {
        task_id: Option<String>,
    },
    McpReconnect {
        #[serde(rename = "serverName")]
        server_name: String,
    },
    McpToggle {
        #[serde(rename = "serverName")]
        server_name: String,
        enabled: bool,
    },
    /// A subtype gyre does not handle. [`ControlRequest::parse`] never returns it: it
    /// answers with the error naming the subtype instead.
    #[serde(other)]
    Unknown,
}

/// `initialize`: the SDK's hooks and agents (applied whenever it comes), the options
/// the session is built with when it comes first ([`Initialize::session_options`]),
/// and the options gyre ignores so far.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initialize {
    /// `{"PreToolUse":[{"matcher":…,"hookCallbackIds":[…],"timeout":…}]}`; `null` when
    /// the SDK has none.
    pub hooks: Option<Value>,
    /// `{name: {description, prompt, tools, model}}`.
    pub agents: Option<Value>,
    pub system_prompt: Option<Value>,
    pub append_system_prompt: Option<Value>,
    pub system_prompt_snapshot: Option<Value>,
    pub exclude_dynamic_sections: Option<Value>,
    pub skills: Option<Value>,
    pub plan_mode_instructions: Option<Value>,
    pub append_subagent_system_prompt: Option<Value>,
    pub tool_aliases: Option<Value>,
    pub code_running_mcp_tools: Option<Value>,
    pub plugins: Option<Value>,
    pub forward_subagent_text: Option<Value>,
    pub mcp_servers: Option<Value>,
    pub sdk_mcp_servers: Option<Value>,
    pub disallowed_tools: Option<Value>,
    pub json_schema: Option<Value>,
    pub prompt_suggestions: Option<Value>,
    /// Settings as an object (or its JSON text), over the settings files.
    pub settings: Option<Value>,
    /// Policy settings, over everything and restrictive-only.
    pub managed_settings: Option<Value>,
}

impl Initialize {
    /// The options that shape the session: `systemPrompt` (a string, or a list of
    /// strings as the TypeScript SDK sends it, joined by blank lines),
    /// `appendSystemPrompt`, `mcpServers`, `sdkMcpServers`, `disallowedTools` and
    /// `jsonSchema`. `null` counts as absent.
    ///
    /// # Errors
    /// A field of the wrong shape, named.
    pub fn session_options(&self) -> Result<InitializeOptions, WireError> {
        let invalid =
            |field: &str, want: &str| WireError(format!("initialize: invalid `{field}`: {want}"));
        let texts =
            |field: &str, value: &Option<Value>| -> Result<Option<Vec<String>>, WireError> {
                match value {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(vec![s.clone()])),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|i| i.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .map(Some)
                        .ok_or_else(|| invalid(field, "expected a string or a list of strings")),
                    Some(_) => Err(invalid(field, "expected a string or a list of strings")),
                }
            };
        let joined = |parts: Vec<String>| {
            parts
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        let present = |value: &Option<Value>| value.clone().filter(|v| !v.is_null());
        let mcp_servers = present(&self.mcp_servers);
        if mcp_servers.as_ref().is_some_and(|v| !v.is_object()) {
            return Err(invalid("mcpServers", "expected an object of named servers"));
        }
        let json_schema = present(&self.json_schema);
        if json_schema.as_ref().is_some_and(|v| !v.is_object()) {
            return Err(invalid("jsonSchema", "expected a JSON Schema object"));
        }
        let settings = match present(&self.settings) {
            None => None,
            Some(Value::String(text)) => Some(text),
            Some(object @ Value::Object(_)) => Some(object.to_string()),
            Some(_) => return Err(invalid("settings", "expected a settings object")),
        }
        .map(|text| gyre_core::settings::Settings::parse(Path::new("initialize settings"), &text))
        .transpose()
        .map_err(|e| invalid("settings", &e.to_string()))?;
        let agents = match present(&self.agents) {
            None => None,
            Some(Value::Object(agents)) => Some(agents),
            Some(_) => return Err(invalid("agents", "expected an object of named agents")),
        };
        let managed_settings = match present(&self.managed_settings) {
            None => None,
            Some(Value::String(text)) => Some(
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| invalid("managedSettings", &e.to_string()))?,
            ),
            Some(object @ Value::Object(_)) => Some(object),
            Some(_) => return Err(invalid("managedSettings", "expected a settings object")),
        };
        if let Some(policy) = &managed_settings {
            gyre_core::settings::Settings::parse(Path::new("managedSettings"), &policy.to_string())
                .map_err(|e| invalid("managedSettings", &e.to_string()))?;
        }
        let text = |field: &str, value: &Option<Value>| match present(value) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(invalid(field, "expected a string")),
        };
        let flag = |field: &str, value: &Option<Value>| match present(value) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(invalid(field, "expected true or false")),
        };
        let tool_aliases = match present(&self.tool_aliases) {
            None => Vec::new(),
            Some(Value::Object(map)) => map
                .into_iter()
                .map(|(from, to)| match to {
                    Value::String(to) => Ok((from, to)),
                    _ => Err(invalid(
                        "toolAliases",
                        "expected an object mapping tool names to tool names",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(invalid(
                    "toolAliases",
                    "expected an object mapping tool names to tool names",
                ));
            }
        };
        // `{server: [tool, …]}`, names without the `mcp__` prefix; as the reference,
        // a malformed part is skipped (and said on stderr), not an error.
        let mut code_running_mcp_tools = Vec::new();
        match present(&self.code_running_mcp_tools) {
            None => {}
            Some(Value::Object(servers)) => {
                let mut skipped = 0;
                for (server, tools) in servers {
                    let names = tools.as_array().map(Vec::as_slice).unwrap_or_default();
                    if server.starts_with("mcp__") || names.is_empty() {
                        skipped += 1;
                        continue;
                    }
                    for tool in names {
                        match tool.as_str() {
                            Some(t) if !t.is_empty() && !t.starts_with("mcp__") => {
                                let pair = (server.clone(), t.to_owned());
                                if !code_running_mcp_tools.contains(&pair) {
                                    code_running_mcp_tools.push(pair);
                                }
                            }
                            _ => skipped += 1,
                        }
                    }
                }
                if skipped > 0 {
                    eprintln!(
                        "gyre: initialize: skipped {skipped} malformed part(s) of codeRunningMcpTools, which maps each MCP server name to a list of tool names, e.g. {{\"workspace\": [\"bash\"]}}"
                    );
                }
            }
            Some(_) => {
                return Err(invalid(
                    "codeRunningMcpTools",
                    "expected an object mapping server names to lists of tool names",
                ));
            }
        }
        let plugins = match present(&self.plugins) {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    let kind = item.get("type").and_then(Value::as_str);
                    let path = item.get("path").and_then(Value::as_str);
                    match (kind, path) {
                        (Some("local"), Some(path)) => Ok(gyre_core::plugins::Plugin {
                            dir: path.into(),
                            mcp: item.get("skipMcpDiscovery").and_then(Value::as_bool)
                                != Some(true),
                        }),
                        _ => Err(invalid(
                            "plugins",
                            "expected a list of {\"type\": \"local\", \"path\": …} (the only kind of plugin)",
                        )),
                    }
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(invalid("plugins", "expected a list of plugins")),
        };
        Ok(InitializeOptions {
            plugins,
            plan_mode_instructions: text("planModeInstructions", &self.plan_mode_instructions)?,
            append_subagent_system_prompt: text(
                "appendSubagentSystemPrompt",
                &self.append_subagent_system_prompt,
            )?,
            exclude_dynamic_sections: flag(
                "excludeDynamicSections",
                &self.exclude_dynamic_sections,
            )?
            .unwrap_or(false),
            system_prompt_snapshot: flag("systemPromptSnapshot", &self.system_prompt_snapshot)?,
            skills: texts("skills", &self.skills)?,
            tool_aliases,
            code_running_mcp_tools,
            managed_settings,
            agents,
            settings,
            system_prompt: texts("systemPrompt", &self.system_prompt)?.map(joined),
            append_system_prompt: texts("appendSystemPrompt", &self.append_system_prompt)?
                .map(joined),
            mcp_servers,
            sdk_mcp_servers: texts("sdkMcpServers", &self.sdk_mcp_servers)?.unwrap_or_default(),
            disallowed_tools: texts("disallowedTools", &self.disallowed_tools)?
                .map(|rules| gyre_core::options::split_tool_list(&rules))
                .unwrap_or_default(),
            json_schema,
        })
    }
}

impl ControlRequest {
    /// The request in a `control_request` line's `request` object.
    ///
    /// # Errors
    /// The error the SDK gets: `unknown control request subtype "…"`, or what is wrong
    /// with the request, naming the field.
    pub fn parse(request: &Map<String, Value>) -> Result<Self, WireError> {
        let subtype = request
            .get("subtype")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let unknown = || WireError(format!("unknown control request subtype {subtype:?}"));
        match Self::from_map(request) {
            Ok(Self::Unknown) => Err(unknown()),
            Ok(known) => Ok(known),
            Err(_) if subtype.is_empty() => Err(unknown()),
            Err(e) => Err(WireError(match Self::culprit(request, &e) {
                Some(field) => format!("{subtype}: invalid `{field}`: {e}"),
                None => format!("{subtype}: {e}"),
            })),
        }
    }

    fn from_map(request: &Map<String, Value>) -> Result<Self, serde_json::Error> {
        Self::deserialize(&Value::Object(request.clone()))
    }

    /// The field a type error is about. serde's message for a field of the wrong type
    /// does not name it (the tagged enum reads the fields from a buffer), but it is the
    /// first one met: without that field the request fails otherwise (or parses), and
    /// without any other it fails the same. A missing field is named already.
    fn culprit<'a>(request: &'a Map<String, Value>, error: &serde_json::Error) -> Option<&'a str> {
        let error = error.to_string();
        if error.starts_with("missing field") {
            return None;
        }
        request
            .keys()
            .filter(|key| *key != "subtype")
            .find(|key| {
                let mut without = request.clone();
                without.remove(*key);
                match Self::from_map(&without) {
                    Ok(_) => true,
                    Err(e) => e.to_string() != error,
                }
            })
            .map(String::as_str)
    }
}

/// A permission update on the wire (`PermissionUpdate` in the SDKs' types): what a
/// suggestion offers and what an answer's `updatedPermissions` carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum WireUpdate {
    AddRules {
        rules: Vec<WireRule>,
        behavior: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        destination: Option<String>,
    },
    RemoveRules {
        rules: Vec<WireRule>,
        behavior: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        destination: Option<String>,
    },
    SetMode {
        mode: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        destination: Option<String>,
    },
    /// `replaceRules`, `addDirectories`, …: not supported; skipped.
    #[serde(other)]
    Other,
}

/// `{"toolName": "Bash", "ruleContent": "npm test"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireRule {
    pub tool_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_content: Option<String>,
}

impl From<&gyre_tools::PermissionRule> for WireRule {
    fn from(rule: &gyre_tools::PermissionRule) -> Self {
        Self {
            tool_name: rule.tool.clone(),
            rule_content: rule.specifier.clone(),
        }
    }
}

/// The requests gyre sends the SDK, by `subtype`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ClientRequest {
    /// A permission question (`--permission-prompt-tool stdio`).
    CanUseTool {
        tool_name: String,
        input: Value,
        permission_suggestions: Vec<WireUpdate>,
        tool_use_id: String,
        decision_reason: String,
    },
    /// One of the SDK's hook callbacks (registered by `initialize`).
    HookCallback {
        callback_id: String,
        input: Value,
        tool_use_id: Option<String>,
    },
    /// A JSON-RPC message to one of the SDK's own MCP servers.
    McpMessage { server_name: String, message: Value },
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Sorts one stdin line.
#[must_use]
pub fn parse_inbound(line: &str) -> Inbound {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Inbound::Invalid(format!(
                "stdin line is not JSON ({e}): {}",
                truncate(line, 80)
            ));
        }
    };
    let kind = v.get("type").and_then(Value::as_str).map(str::to_owned);
    match StdinLine::deserialize(&v) {
        Ok(StdinLine::User { message, uuid }) => Inbound::User {
            content: message.content.into_vec(),
            uuid,
        },
        Ok(StdinLine::ControlRequest {
            request_id,
            request,
        }) => Inbound::Request {
            request_id,
            request: ControlRequest::parse(&request),
        },
        Ok(StdinLine::ControlResponse { response }) => match response {
            ControlResponse::Success {
                request_id,
                response,
            } => Inbound::Response {
                request_id,
                result: Ok(response),
            },
            ControlResponse::Error { request_id, error } => Inbound::Response {
                request_id,
                result: Err(WireError(error)),
            },
        },
        Ok(StdinLine::ControlCancelRequest { request_id }) => Inbound::Cancel { request_id },
        Err(e) => match kind.as_deref() {
            Some("user") => Inbound::Invalid(format!(
                "stdin user line has no valid `message` ({e}); expected {{\"role\":\"user\",\"content\":…}}"
            )),
            Some("control_request") => Inbound::Invalid(
                "control_request needs a string `request_id` and an object `request`".to_owned(),
            ),
            Some("control_response") => match AnyResponse::deserialize(&v) {
                Ok(AnyResponse {
                    response: RequestId { request_id },
                }) => Inbound::Response {
                    request_id,
                    result: Err(WireError(sdk_error())),
                },
                Err(_) => {
                    Inbound::Invalid("control_response needs `response.request_id`".to_owned())
                }
            },
            Some("control_cancel_request") => {
                Inbound::Invalid("control_cancel_request needs a `request_id`".to_owned())
            }
            other => Inbound::Invalid(format!(
                "stdin line has type {}, expected user, control_request, control_response or control_cancel_request",
                other.map_or_else(|| "(none)".to_owned(), |t| format!("{t:?}"))
            )),
        },
    }
}

/// Checks that the tool_result blocks of an input line answer the tool_use blocks
/// still open at the end of `history`; an orphan would be sent to the API and refused.
///
/// # Errors
/// The first orphan's id.
pub fn check_tool_results(history: &[Message], content: &[ContentBlock]) -> Result<(), WireError> {
    let open: Vec<&str> = history
        .last()
        .filter(|m| m.role == gyre_protocol::Role::Assistant)
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut answered: Vec<&str> = Vec::new();
    for block in content {
        let ContentBlock::ToolResult { tool_use_id, .. } = block else {
            continue;
        };
        if !open.contains(&tool_use_id.as_str()) {
            return Err(WireError(format!(
                "stdin user line has a tool_result for {tool_use_id}, which answers no tool_use of the conversation; send tool results only for the assistant's pending tool calls"
            )));
        }
        if answered.contains(&tool_use_id.as_str()) {
            return Err(WireError(format!(
                "stdin user line answers {tool_use_id} twice; send one tool_result per tool call"
            )));
        }
        answered.push(tool_use_id);
    }
    Ok(())
}

/// The stdout every writer shares; each `write` call writes one whole buffer under the
/// lock, so a line written with `write_all` never interleaves with another.
#[derive(Clone)]
pub struct LineOut {
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
}

/// Writes `session_state_changed` lines, for an SDK that reads them (the TypeScript
/// SDK sets `CLAUDE_CODE_SDK_READS_SESSION_STATE`; `CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS`
/// asks for them too), and nothing otherwise.
#[derive(Clone)]
pub struct SessionStates {
    out: LineOut,
    session_id: String,
    on: bool,
}

impl SessionStates {
    #[must_use]
    pub fn new(out: LineOut, session_id: String, on: bool) -> Self {
        Self {
            out,
            session_id,
            on,
        }
    }

    /// Says the session is in `state` now; a failure is said on stderr (the next line
    /// that cannot be written ends the session).
    pub fn send(&self, state: crate::stream_json::SessionState) {
        if !self.on {
            return;
        }
        let uuid = uuid::Uuid::new_v4().to_string();
        let line = crate::stream_json::session_state(state, &self.session_id, &uuid);
        if let Err(e) = self.out.line(&line) {
            eprintln!("gyre: could not write a session_state_changed line: {e}");
        }
    }
}

impl LineOut {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(out)),
        }
    }

    /// Writes one JSON line and flushes it.
    pub fn line(&self, v: &impl Serialize) -> std::io::Result<()> {
        let mut s = serde_json::to_string(v)?;
        s.push('\n');
        let mut out = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(s.as_bytes())?;
        out.flush()
    }
}

impl Write for LineOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush()
    }
}

/// `{"type":"control_response","response":{"subtype":"success",…}}`.
#[must_use]
pub fn success(request_id: &str, response: Value) -> ControlLine {
    ControlLine::Response {
        response: ControlResponse::Success {
            request_id: request_id.to_owned(),
            response,
        },
    }
}

/// `{"type":"control_response","response":{"subtype":"error",…}}`.
#[must_use]
pub fn error(request_id: &str, message: &str) -> ControlLine {
    ControlLine::Response {
        response: ControlResponse::Error {
            request_id: request_id.to_owned(),
            error: message.to_owned(),
        },
    }
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, WireError>>>;

/// Our requests to the SDK (`can_use_tool`, `hook_callback`, `mcp_message`) and their
/// answers.
#[derive(Clone)]
pub struct ControlChannel {
    out: LineOut,
    pending: Arc<Mutex<Option<Pending>>>,
    next: Arc<AtomicU64>,
}

impl ControlChannel {
    pub fn new(out: LineOut) -> Self {
        Self {
            out,
            pending: Arc::new(Mutex::new(Some(HashMap::new()))),
            next: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Sends `request` and waits for its answer; a cancelled wait sends
    /// `control_cancel_request`.
    ///
    /// # Errors
    /// The SDK's error text, a closed stdin, or cancellation.
    pub async fn request(
        &self,
        request: ClientRequest,
        cancel: &CancellationToken,
    ) -> Result<Value, WireError> {
        let id = format!("gyre_req_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(map) = pending.as_mut() else {
                return Err(WireError(
                    "stdin is closed: the SDK can no longer answer".to_owned(),
                ));
            };
            map.insert(id.clone(), tx);
        }
        let line = ControlLine::Request {
            request_id: id.clone(),
            request,
        };
        if let Err(e) = self.out.line(&line) {
            self.forget(&id);
            return Err(WireError(format!("could not write to stdout: {e}")));
        }
        tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err(WireError("stdin closed before the SDK answered".to_owned()))),
            () = cancel.cancelled() => {
                self.forget(&id);
                let _ = self.out.line(&ControlLine::CancelRequest { request_id: id });
                Err(WireError("interrupted".to_owned()))
            }
        }
    }

    fn forget(&self, id: &str) {
        if let Some(map) = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            map.remove(id);
        }
    }

    /// Hands an answer to its waiting request. False when no request has that id.
    pub fn resolve(&self, request_id: &str, result: Result<Value, WireError>) -> bool {
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|map| map.remove(request_id));
        sender.is_some_and(|tx| tx.send(result).is_ok())
    }

    /// stdin is gone: every waiting request fails, later ones fail at once.
    pub fn close(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.take();
    }
}

/// The answer to `mcp_message`: `{"mcp_response": <the server's JSON-RPC reply>}`.
#[derive(Debug, Deserialize)]
struct McpMessageAnswer {
    mcp_response: serde_json::Map<String, Value>,
}

impl gyre_core::ClientRequests for ControlChannel {
    fn hook_callback<'a>(
        &'a self,
        callback_id: &'a str,
        input: &'a Value,
        tool_use_id: Option<&'a str>,
        cancel: &'a CancellationToken,
    ) -> gyre_tools::BoxFuture<'a, Result<Value, gyre_core::ClientError>> {
        let request = ClientRequest::HookCallback {
            callback_id: callback_id.to_owned(),
            input: input.clone(),
            tool_use_id: tool_use_id.map(str::to_owned),
        };
        Box::pin(async move {
            Self::request(self, request, cancel)
                .await
                .map_err(|e| gyre_core::ClientError(e.0))
        })
    }

    fn mcp_message<'a>(
        &'a self,
        server: &'a str,
        message: Value,
        cancel: &'a CancellationToken,
    ) -> gyre_tools::BoxFuture<'a, Result<Value, gyre_core::ClientError>> {
        let request = ClientRequest::McpMessage {
            server_name: server.to_owned(),
            message,
        };
        Box::pin(async move {
            let answer = Self::request(self, request, cancel)
                .await
                .map_err(|e| gyre_core::ClientError(e.0))?;
            let answer = McpMessageAnswer::deserialize(&answer).map_err(|_| {
                gyre_core::ClientError(format!(
                    "the SDK's answer for MCP server \"{server}\" has no mcp_response"
                ))
            })?;
            Ok(Value::Object(answer.mcp_response))
        })
    }
}

impl ControlChannel {
    /// This channel as the session's handle to its client.
    #[must_use]
    pub fn client(&self) -> gyre_core::ClientChannel {
        Arc::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn initialize(fields: &Value) -> Result<InitializeOptions, WireError> {
        let mut request = json!({"subtype": "initialize"});
        request
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        match ControlRequest::parse(request.as_object().unwrap())? {
            ControlRequest::Initialize(init) => init.session_options(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn initialize_options_read_both_sdks_shapes_and_name_a_wrong_field() {
        let typescript = initialize(&json!({
            "systemPrompt": ["You are terse.", "", "Use British spelling."],
            "appendSystemPrompt": "Sign off.",
            "sdkMcpServers": ["calc"],
            "mcpServers": {"fs": {"command": "fs-server"}},
            "disallowedTools": ["Bash(rm:*), WebFetch"],
            "jsonSchema": {"type": "object"},
        }))
        .unwrap();
        assert_eq!(
            typescript.system_prompt.as_deref(),
            Some("You are terse.\n\nUse British spelling.")
        );
        assert_eq!(
            typescript.append_system_prompt.as_deref(),
            Some("Sign off.")
        );
        assert_eq!(typescript.sdk_mcp_servers, ["calc"]);
        assert_eq!(typescript.disallowed_tools, ["Bash(rm:*)", "WebFetch"]);
        assert!(typescript.mcp_servers.is_some() && typescript.json_schema.is_some());
        // No prompt of the program's own: `[""]`, as `--system-prompt ""`.
        let none = initialize(&json!({"systemPrompt": [""], "hooks": null})).unwrap();
        assert_eq!(none.system_prompt.as_deref(), Some(""));
        // Python's `initialize` carries none of these.
        assert!(
            initialize(&json!({"hooks": null, "agents": null}))
                .unwrap()
                .is_empty()
        );
        let wrong = initialize(&json!({"systemPrompt": 42})).unwrap_err().0;
        assert!(wrong.contains("`systemPrompt`"), "{wrong}");
        let wrong = initialize(&json!({"mcpServers": ["fs"]})).unwrap_err().0;
        assert!(wrong.contains("`mcpServers`"), "{wrong}");
    }

    #[test]
    fn the_typescript_sdks_prompt_skill_and_tool_fields_are_read() {
        let init = initialize(&json!({
            "planModeInstructions": "Only list the files.",
            "appendSubagentSystemPrompt": "Report in French.",
            "excludeDynamicSections": true,
            "systemPromptSnapshot": false,
            "skills": ["pdf", "tools:lint"],
            "toolAliases": {"Bash": "mcp__ws__bash"},
            "codeRunningMcpTools": {"ws": ["bash", "mcp__x"], "mcp__bad": ["y"]},
            "plugins": [{"type": "local", "path": "/p", "skipMcpDiscovery": true}],
        }))
        .unwrap();
        assert_eq!(
            init.plan_mode_instructions.as_deref(),
            Some("Only list the files.")
        );
        assert_eq!(
            init.append_subagent_system_prompt.as_deref(),
            Some("Report in French.")
        );
        assert!(init.exclude_dynamic_sections);
        assert_eq!(init.system_prompt_snapshot, Some(false));
        assert_eq!(
            init.skills.as_deref(),
            Some(&["pdf".to_owned(), "tools:lint".to_owned()][..])
        );
        assert_eq!(
            init.tool_aliases,
            [("Bash".to_owned(), "mcp__ws__bash".to_owned())]
        );
        assert_eq!(
            init.code_running_mcp_tools,
            [("ws".to_owned(), "bash".to_owned())]
        );
        assert_eq!(
            init.plugins,
            [gyre_core::plugins::Plugin {
                dir: "/p".into(),
                mcp: false
            }]
        );
        let wrong = initialize(&json!({"plugins": [{"type": "remote", "path": "/p"}]}))
            .unwrap_err()
            .0;
        assert!(wrong.contains("`plugins`"), "{wrong}");
        let wrong = initialize(&json!({"toolAliases": {"Bash": 1}}))
            .unwrap_err()
            .0;
        assert!(wrong.contains("`toolAliases`"), "{wrong}");
        let wrong = initialize(&json!({"excludeDynamicSections": "yes"}))
            .unwrap_err()
            .0;
        assert!(wrong.contains("`excludeDynamicSections`"), "{wrong}");
    }

    /// The rows of docs/sdk-protocol.md's control table: `(subtype, direction)`.
    fn documented() -> Vec<(String, String)> {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/sdk-protocol.md"
        ))
        .unwrap();
        doc.lines()
            .filter_map(|l| {
                let mut cells = l.split('|').map(str::trim).skip(1);
                let subtype = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
                let direction = cells.next()?;
                direction
                    .contains('→')
                    .then(|| (subtype.to_owned(), direction.to_owned()))
            })
            .collect()
    }

    /// The protocol table says what gyre handles: every subtype it lists as sent by the
    /// SDK is one gyre parses, and the requests gyre sends are exactly those it lists.
    #[test]
    fn the_protocol_table_in_the_docs_is_what_gyre_handles() {
        let rows = documented();
        let from_sdk: Vec<&str> = rows
            .iter()
            .filter(|(_, d)| d.starts_with("SDK"))
            .map(|(s, _)| s.as_str())
            .collect();
        assert!(from_sdk.len() >= 10, "{rows:?}");
        for subtype in &from_sdk {
            let request = json!({ "subtype": subtype });
            let parsed = ControlRequest::parse(request.as_object().unwrap());
            assert!(
                !matches!(&parsed, Err(e) if e.0.starts_with("unknown control request subtype")),
                "the docs list `{subtype}`, which gyre does not handle"
            );
        }
        // serde names the variants it expects when one is unknown.
        let err = serde_json::from_value::<ClientRequest>(json!({"subtype": "?"}))
            .unwrap_err()
            .to_string();
        let mut sent: Vec<&str> = err.split('`').skip(3).step_by(2).collect();
        sent.sort_unstable();
        let mut to_sdk: Vec<&str> = rows
            .iter()
            .filter(|(_, d)| d.starts_with("gyre"))
            .map(|(s, _)| s.as_str())
            .collect();
        to_sdk.sort_unstable();
        assert_eq!(sent, to_sdk, "{err}");
    }

    fn request(v: &Value) -> Result<ControlRequest, WireError> {
        let Value::Object(map) = v else { panic!("{v}") };
        ControlRequest::parse(map)
    }

    #[test]
    fn sorts_every_kind_of_line() {
        assert_eq!(
            parse_inbound(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#),
            Inbound::User {
                content: vec![ContentBlock::text("hi")],
                uuid: None
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"user","message":{"role":"user","content":"hi"},"uuid":"u-1"}"#
            ),
            Inbound::User {
                content: vec![ContentBlock::text("hi")],
                uuid: Some("u-1".to_owned())
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#
            ),
            Inbound::Request {
                request_id: "r1".into(),
                request: Ok(ControlRequest::Interrupt)
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"g1","response":{"behavior":"allow"}}}"#
            ),
            Inbound::Response {
                request_id: "g1".into(),
                result: Ok(json!({"behavior": "allow"}))
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"error","request_id":"g2","error":"boom"}}"#
            ),
            Inbound::Response {
                request_id: "g2".into(),
                result: Err(WireError("boom".into()))
            }
        );
        assert_eq!(
            parse_inbound(r#"{"type":"control_cancel_request","request_id":"r1"}"#),
            Inbound::Cancel {
                request_id: "r1".into()
            }
        );
    }

    #[test]
    fn garbage_and_unknown_types_say_what_was_expected() {
        let Inbound::Invalid(e) = parse_inbound("not json") else {
            panic!()
        };
        assert!(e.contains("not JSON"), "{e}");
        let Inbound::Invalid(e) = parse_inbound(r#"{"type":"assistant"}"#) else {
            panic!()
        };
        assert!(e.contains("\"assistant\"") && e.contains("expected"), "{e}");
        let Inbound::Invalid(e) = parse_inbound(r#"{"type":"control_request"}"#) else {
            panic!()
        };
        assert!(e.contains("request_id"), "{e}");
    }

    #[test]
    fn every_subtype_parses_from_what_the_sdks_send() {
        let hooks = json!({"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["hook_0"], "timeout": 5}]});
        let agents = json!({"reviewer": {"description": "Reviews", "prompt": "Review."}});
        let Ok(ControlRequest::Initialize(init)) = request(&json!({
            "subtype": "initialize", "hooks": hooks, "agents": agents,
            "systemPrompt": "be brief", "appendSystemPrompt": "and kind",
            "sdkMcpServers": ["calc"], "jsonSchema": {"type": "object"},
            "excludeDynamicSections": true, "skills": ["pdf"], "forwardSubagentText": true,
        })) else {
            panic!()
        };
        assert_eq!(init.hooks, Some(hooks));
        assert_eq!(init.agents, Some(agents));
        assert_eq!(init.system_prompt, Some(json!("be brief")));
        assert_eq!(init.append_system_prompt, Some(json!("and kind")));
        assert_eq!(init.sdk_mcp_servers, Some(json!(["calc"])));
        assert_eq!(init.json_schema, Some(json!({"type": "object"})));
        assert_eq!(init.skills, Some(json!(["pdf"])));
        // The Python SDK sends `"hooks": null` when it has none.
        assert_eq!(
            request(&json!({"subtype": "initialize", "hooks": null})),
            Ok(ControlRequest::Initialize(Box::default()))
        );
        let cases = [
            (json!({"subtype": "interrupt"}), ControlRequest::Interrupt),
            (
                json!({"subtype": "set_permission_mode", "mode": "acceptEdits"}),
                ControlRequest::SetPermissionMode {
                    mode: "acceptEdits".into(),
                },
            ),
            (
                json!({"subtype": "set_model", "model": "claude-haiku-4-5"}),
                ControlRequest::SetModel {
                    model: Some("claude-haiku-4-5".into()),
                },
            ),
            (
                json!({"subtype": "set_model", "model": null}),
                ControlRequest::SetModel { model: None },
            ),
            (
                json!({"subtype": "set_model"}),
                ControlRequest::SetModel { model: None },
            ),
            (json!({"subtype": "mcp_status"}), ControlRequest::McpStatus),
            (
                json!({"subtype": "get_context_usage"}),
                ControlRequest::GetContextUsage,
            ),
            (
                json!({"subtype": "rewind_files", "user_message_id": "u"}),
                ControlRequest::RewindFiles {
                    user_message_id: Some("u".into()),
                    dry_run: None,
                },
            ),
            (
                json!({"subtype": "stop_task", "task_id": "t1"}),
                ControlRequest::StopTask {
                    task_id: Some("t1".into()),
                },
            ),
            (
                json!({"subtype": "mcp_reconnect", "serverName": "test"}),
                ControlRequest::McpReconnect {
                    server_name: "test".into(),
                },
            ),
            (
                json!({"subtype": "mcp_toggle", "serverName": "test", "enabled": false}),
                ControlRequest::McpToggle {
                    server_name: "test".into(),
                    enabled: false,
                },
            ),
        ];
        for (wire, expected) in cases {
            assert_eq!(request(&wire), Ok(expected.clone()), "{wire}");
            // Fields the SDK may add later do not stop a request.
            let mut more = wire.clone();
            more["somethingNew"] = json!({"x": 1});
            assert_eq!(request(&more), Ok(expected), "{more}");
        }
    }

    #[test]
    fn an_unknown_subtype_is_answered_with_its_name() {
        assert_eq!(
            request(&json!({"subtype": "frobnicate", "x": 1})),
            Err(WireError(
                "unknown control request subtype \"frobnicate\"".to_owned()
            ))
        );
        assert_eq!(
            request(&json!({"nothing": true})),
            Err(WireError("unknown control request subtype \"\"".to_owned()))
        );
        assert_eq!(
            request(&json!({"subtype": 7})),
            Err(WireError("unknown control request subtype \"\"".to_owned()))
        );
        let line =
            r#"{"type":"control_request","request_id":"r2","request":{"subtype":"frobnicate"}}"#;
        assert_eq!(
            parse_inbound(line),
            Inbound::Request {
                request_id: "r2".into(),
                request: Err(WireError(
                    "unknown control request subtype \"frobnicate\"".into()
                ))
            }
        );
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named_in_the_error() {
        let err = request(&json!({"subtype": "set_model", "model": 5, "extra": 1}))
            .unwrap_err()
            .0;
        assert!(err.starts_with("set_model: invalid `model`: "), "{err}");
        assert!(err.contains("integer `5`"), "{err}");
        let err = request(&json!({"subtype": "mcp_toggle", "serverName": "x", "enabled": "yes"}))
            .unwrap_err()
            .0;
        assert!(err.contains("invalid `enabled`"), "{err}");
        let err = request(&json!({"subtype": "mcp_reconnect", "serverName": ["x"]}))
            .unwrap_err()
            .0;
        assert!(err.contains("invalid `serverName`"), "{err}");
        let err = request(&json!({"subtype": "mcp_toggle", "serverName": "x"}))
            .unwrap_err()
            .0;
        assert_eq!(err, "mcp_toggle: missing field `enabled`");
        let err = request(&json!({"subtype": "set_permission_mode"}))
            .unwrap_err()
            .0;
        assert_eq!(err, "set_permission_mode: missing field `mode`");
    }

    #[test]
    fn control_lines_round_trip() {
        let lines = [
            (
                success("r1", json!({"mcpServers": []})),
                json!({"type": "control_response", "response": {"subtype": "success", "request_id": "r1", "response": {"mcpServers": []}}}),
            ),
            (
                error("r2", "unknown control request subtype \"frobnicate\""),
                json!({"type": "control_response", "response": {"subtype": "error", "request_id": "r2", "error": "unknown control request subtype \"frobnicate\""}}),
            ),
            (
                ControlLine::CancelRequest {
                    request_id: "gyre_req_1".into(),
                },
                json!({"type": "control_cancel_request", "request_id": "gyre_req_1"}),
            ),
        ];
        for (line, wire) in lines {
            assert_eq!(serde_json::to_value(&line).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ControlLine>(wire).unwrap(), line);
        }
    }

    #[test]
    fn the_requests_gyre_core_builds_are_sent_unchanged() {
        // As gyre-core's gate, hooks and SDK MCP bridge write them.
        let requests = [
            json!({
                "subtype": "can_use_tool",
                "tool_name": "Bash",
                "input": {"command": "ls"},
                "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "ls"}], "behavior": "allow", "destination": "session"}],
                "tool_use_id": "toolu_1",
                "decision_reason": "Bash needs approval",
            }),
            json!({"subtype": "hook_callback", "callback_id": "hook_0", "input": {"hook_event_name": "PreToolUse"}, "tool_use_id": "toolu_1"}),
            json!({"subtype": "hook_callback", "callback_id": "hook_1", "input": {}, "tool_use_id": null}),
            json!({"subtype": "mcp_message", "server_name": "calc", "message": {"jsonrpc": "2.0", "id": 0, "method": "tools/list"}}),
        ];
        for request in requests {
            let typed = ClientRequest::deserialize(&request).unwrap();
            let line = ControlLine::Request {
                request_id: "gyre_req_1".into(),
                request: typed,
            };
            let wire = serde_json::to_value(&line).unwrap();
            assert_eq!(
                wire,
                json!({"type": "control_request", "request_id": "gyre_req_1", "request": request})
            );
            assert_eq!(serde_json::from_value::<ControlLine>(wire).unwrap(), line);
        }
    }

    #[test]
    fn an_sdk_answer_that_does_not_parse_still_fails_its_request() {
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"cancelled","request_id":"g3"}}"#
            ),
            Inbound::Response {
                request_id: "g3".into(),
                result: Err(WireError("the SDK answered with an error".into()))
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"error","request_id":"g4"}}"#
            ),
            Inbound::Response {
                request_id: "g4".into(),
                result: Err(WireError("the SDK answered with an error".into()))
            }
        );
        assert_eq!(
            parse_inbound(r#"{"type":"control_response","response":{"subtype":"success"}}"#),
            Inbound::Invalid("control_response needs `response.request_id`".into())
        );
        assert_eq!(
            parse_inbound(r#"{"type":"control_request","request_id":"r1","request":"interrupt"}"#),
            Inbound::Invalid(
                "control_request needs a string `request_id` and an object `request`".into()
            )
        );
        assert_eq!(
            parse_inbound(r#"{"type":"control_cancel_request"}"#),
            Inbound::Invalid("control_cancel_request needs a `request_id`".into())
        );
        let Inbound::Invalid(e) = parse_inbound(r#""not an object""#) else {
            panic!()
        };
        assert!(e.starts_with("stdin line has type (none), expected"), "{e}");
        let Inbound::Invalid(e) = parse_inbound(r#"{"type":"user","message":{"role":"user"}}"#)
        else {
            panic!()
        };
        assert!(
            e.starts_with("stdin user line has no valid `message`"),
            "{e}"
        );
    }

    #[test]
    fn orphan_and_duplicate_tool_results_are_refused_and_a_pending_one_accepted() {
        let history = vec![
            Message::user(vec![ContentBlock::text("go")]),
            Message::assistant(vec![ContentBlock::tool_use("toolu_1", "Read", json!({}))]),
        ];
        let answer = vec![ContentBlock::tool_result("toolu_1", "ok", false)];
        assert!(check_tool_results(&history, &answer).is_ok());
        let twice = vec![answer[0].clone(), answer[0].clone()];
        assert!(
            check_tool_results(&history, &twice)
                .unwrap_err()
                .0
                .contains("twice")
        );
        let orphan = vec![ContentBlock::tool_result("toolu_9", "ok", false)];
        let err = check_tool_results(&history, &orphan).unwrap_err().0;
        assert!(err.contains("toolu_9"), "{err}");
        assert!(check_tool_results(&[], &answer).is_err());
    }

    #[tokio::test]
    async fn a_request_gets_the_answer_with_its_id_and_fails_when_stdin_closes() {
        let out = LineOut::new(Box::new(std::io::sink()));
        let channel = ControlChannel::new(out);
        let waiter = {
            let channel = channel.clone();
            tokio::spawn(async move {
                channel
                    .request(
                        ClientRequest::McpMessage {
                            server_name: "calc".into(),
                            message: json!({"jsonrpc": "2.0", "method": "ping", "id": 1}),
                        },
                        &CancellationToken::new(),
                    )
                    .await
            })
        };
        tokio::task::yield_now().await;
        assert!(!channel.resolve("gyre_req_99", Ok(json!({}))));
        assert!(channel.resolve("gyre_req_1", Ok(json!({"behavior": "allow"}))));
        assert_eq!(waiter.await.unwrap(), Ok(json!({"behavior": "allow"})));
        channel.close();
        let late = channel
            .request(
                ClientRequest::HookCallback {
                    callback_id: "hook_0".into(),
                    input: json!({}),
                    tool_use_id: None,
                },
                &CancellationToken::new(),
            )
            .await;
        assert!(late.unwrap_err().0.contains("closed"));
    }
}
