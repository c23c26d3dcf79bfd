//! The stream-json lines of headless mode, with Claude Code's field names.

use std::collections::BTreeMap;

use gyre_api::RetryStatus;
use gyre_core::hooks::HookReport;
use gyre_loop::{CompactionOutcome, TurnResult};
use gyre_protocol::{Blocks, Message, Role, StopReason, StreamEvent, Usage};
use gyre_tools::PermissionDenial;
use serde::Serialize;
use serde_json::Value;

pub use gyre_core::facts::{ContextFacts, ModelUsage, SessionFacts};

/// What the result line adds to the turn's [`TurnResult`].
#[derive(Debug, Clone, Default)]
pub struct ResultExtras {
    /// The stop reason of the last response.
    pub stop_reason: Option<StopReason>,
    pub model_usage: BTreeMap<String, ModelUsage>,
    pub structured_output: Option<Value>,
}

/// One stdout line of stream-json (and `--output-format json`'s one object), by
/// `type`: the shapes the Agent SDKs read.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    System(SystemLine),
    Assistant(MessageLine),
    User(MessageLine),
    StreamEvent {
        event: StreamEvent,
        parent_tool_use_id: Option<String>,
        session_id: String,
        uuid: String,
    },
    Result(ResultLine),
}

impl Line {
    /// This message line as a sub-agent's, under the Agent call `parent_tool_use_id`.
    #[must_use]
    pub fn under(mut self, parent_tool_use_id: String) -> Self {
        if let Self::Assistant(line) | Self::User(line) = &mut self {
            line.parent_tool_use_id = Some(parent_tool_use_id);
        }
        self
    }
}

/// A `system` line, by `subtype`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum SystemLine {
    Init(Box<InitLine>),
    ApiRetry {
        attempt: u32,
        max_retries: u32,
        retry_delay_ms: u64,
        error_status: Option<u16>,
        error: String,
        message: String,
        session_id: String,
        uuid: String,
    },
    ModelFallback {
        original_model: String,
        fallback_model: String,
        message: String,
        session_id: String,
        uuid: String,
    },
    CompactBoundary {
        compact_metadata: CompactMetadata,
        session_id: String,
        uuid: String,
    },
    /// The session's state: `running` (a turn is under way), `requires_action` (it
    /// waits for the SDK's answer to a permission question) or `idle` (the turn's result
    /// is out).
    SessionStateChanged {
        state: SessionState,
        session_id: String,
        uuid: String,
    },
    HookStarted {
        hook_id: String,
        hook_name: String,
        hook_event: &'static str,
        session_id: String,
        uuid: String,
    },
    HookResponse {
        hook_id: String,
        hook_name: String,
        hook_event: &'static str,
        output: String,
        stdout: &'static str,
        stderr: &'static str,
        outcome: &'static str,
        session_id: String,
        uuid: String,
    },
    PermissionDenied {
        tool_name: String,
        tool_use_id: String,
        tool_input: Value,
        message: String,
        session_id: String,
        uuid: String,
    },
}

/// The `init` line: what the session is.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub struct InitLine {
    cwd: String,
    session_id: String,
    tools: Vec<String>,
    mcp_servers: Vec<InitServer>,
    model: String,
    #[serde(rename = "permissionMode")]
    permission_mode: String,
    slash_commands: Vec<String>,
    #[serde(rename = "apiKeySource")]
    api_key_source: &'static str,
    output_style: &'static str,
    /// The Agent SDKs read this field; gyre reports its own version.
    claude_code_version: &'static str,
    gyre_version: &'static str,
    uuid: String,
}

/// One of the init line's `mcp_servers`.
#[derive(Debug, Clone, Serialize)]
struct InitServer {
    name: String,
    status: &'static str,
}

/// `compact_boundary`'s metadata.
#[derive(Debug, Clone, Serialize)]
pub struct CompactMetadata {
    trigger: gyre_compact::Trigger,
    pre_tokens: u64,
}

/// An `assistant` or `user` line.
#[derive(Debug, Clone, Serialize)]
pub struct MessageLine {
    message: MessageBody,
    /// The Agent call whose sub-agent wrote the message; `None` for the session's own.
    pub parent_tool_use_id: Option<String>,
    session_id: String,
    uuid: String,
    /// The tool's own result, on a user line carrying tool results.
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_result: Option<Value>,
    /// An SDK's own message echoed back (`--replay-user-messages`).
    #[serde(rename = "isReplay", skip_serializing_if = "std::ops::Not::not")]
    is_replay: bool,
}

/// The message of an `assistant` line is the API's message object; a `user` line's is
/// its role and content.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum MessageBody {
    Assistant {
        id: String,
        #[serde(rename = "type")]
        kind: &'static str,
        role: Role,
        model: String,
        content: Blocks,
        stop_reason: Option<StopReason>,
        stop_sequence: Option<String>,
        usage: Usage,
    },
    User {
        role: Role,
        content: Blocks,
    },
}

/// The `result` line: how the turn ended.
#[derive(Debug, Clone, Serialize)]
pub struct ResultLine {
    subtype: &'static str,
    is_error: bool,
    duration_ms: u64,
    duration_api_ms: u64,
    num_turns: u32,
    result: String,
    session_id: String,
    total_cost_usd: f64,
    usage: Usage,
    permission_denials: Vec<PermissionDenial>,
    #[serde(skip_serializing_if = "Option::is_none")]
    terminal_reason: Option<&'static str>,
    stop_reason: Option<StopReason>,
    #[serde(rename = "modelUsage")]
    model_usage: BTreeMap<String, ModelUsage>,
    uuid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_output: Option<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<String>,
}

/// gyre's own commands the `init` line names; the session's custom commands and skills
/// follow them.
const INIT_COMMANDS: [&str; 5] = ["compact", "clear", "cost", "model", "help"];

/// The `init` line; `custom` are the names of the session's custom commands and skills.
#[must_use]
pub fn init(facts: &SessionFacts, uuid: &str, custom: Vec<String>) -> Line {
    Line::System(SystemLine::Init(Box::new(InitLine {
        cwd: facts.cwd.clone(),
        session_id: facts.session_id.clone(),
        tools: facts.tools.clone(),
        mcp_servers: facts
            .mcp_servers
            .iter()
            .map(|s| InitServer {
                name: s.name.clone(),
                status: s.state.as_str(),
            })
            .collect(),
        model: facts.model(),
        permission_mode: facts.permission_mode.clone(),
        slash_commands: INIT_COMMANDS
            .iter()
            .map(|&c| c.to_owned())
            .chain(custom)
            .collect(),
        api_key_source: "ANTHROPIC_API_KEY",
        output_style: "default",
        claude_code_version: env!("CARGO_PKG_VERSION"),
        gyre_version: env!("CARGO_PKG_VERSION"),
        uuid: uuid.to_owned(),
    })))
}

/// What the API said about the response an assistant message came from.
#[derive(Debug, Clone, Default)]
pub struct ResponseMeta {
    pub id: String,
    pub model: String,
    pub stop_reason: Option<StopReason>,
    pub usage: Usage,
}

/// An `assistant` or `user` line. Assistant messages carry the response's id, model,
/// stop reason and usage, as the API's message object does.
#[must_use]
pub fn message(message: &Message, meta: &ResponseMeta, session_id: &str, uuid: &str) -> Line {
    let content = message.content.clone();
    let (body, wrap): (MessageBody, fn(MessageLine) -> Line) = match message.role {
        Role::Assistant => (
            MessageBody::Assistant {
                id: meta.id.clone(),
                kind: "message",
                role: Role::Assistant,
                model: meta.model.clone(),
                content,
                stop_reason: meta.stop_reason.clone(),
                stop_sequence: None,
                usage: meta.usage,
            },
            Line::Assistant,
        ),
        Role::User => (
            MessageBody::User {
                role: Role::User,
                content,
            },
            Line::User,
        ),
    };
    wrap(MessageLine {
        message: body,
        parent_tool_use_id: None,
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
        tool_use_result: tool_use_result(message),
        is_replay: false,
    })
}

/// The `user` line echoing a message the SDK sent, under the SDK's own `uuid`
/// (`--replay-user-messages`): it says the message's turn has started.
#[must_use]
pub fn user_replay(content: &[gyre_protocol::ContentBlock], session_id: &str, uuid: &str) -> Line {
    Line::User(MessageLine {
        message: MessageBody::User {
            role: Role::User,
            content: Blocks::from(content.to_vec()),
        },
        parent_tool_use_id: None,
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
        tool_use_result: None,
        is_replay: true,
    })
}

/// The tool's own result for a user line carrying tool results: the text of the
/// result (or of each, when several tools answered).
fn tool_use_result(message: &Message) -> Option<Value> {
    let texts: Vec<Value> = message
        .content
        .iter()
        .filter_map(|b| match b {
            gyre_protocol::ContentBlock::ToolResult { content, .. } => {
                Some(Value::String(content.text()))
            }
            _ => None,
        })
        .collect();
    match texts.len() {
        0 => None,
        1 => texts.into_iter().next(),
        _ => Some(Value::Array(texts)),
    }
}

#[must_use]
pub fn api_retry(status: &RetryStatus, session_id: &str, uuid: &str) -> Line {
    Line::System(SystemLine::ApiRetry {
        attempt: status.attempt,
        max_retries: status.max_retries,
        retry_delay_ms: status.delay_ms,
        error_status: status.status,
        error: status.error.clone(),
        message: status.message.clone(),
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    })
}

#[must_use]
pub fn model_fallback(original: &str, fallback: &str, session_id: &str, uuid: &str) -> Line {
    Line::System(SystemLine::ModelFallback {
        original_model: original.to_owned(),
        fallback_model: fallback.to_owned(),
        message: format!("Switched to {fallback} due to high demand for {original}"),
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    })
}

#[must_use]
pub fn compact_boundary(outcome: &CompactionOutcome, session_id: &str, uuid: &str) -> Line {
    Line::System(SystemLine::CompactBoundary {
        compact_metadata: CompactMetadata {
            trigger: outcome.trigger,
            pre_tokens: outcome.pre_tokens,
        },
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    })
}

#[must_use]
pub fn permission_denied(
    denial: &PermissionDenial,
    message: &str,
    session_id: &str,
    uuid: &str,
) -> Line {
    Line::System(SystemLine::PermissionDenied {
        tool_name: denial.tool_name.clone(),
        tool_use_id: denial.tool_use_id.clone(),
        tool_input: denial.tool_input.clone(),
        message: message.to_owned(),
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    })
}

/// What `session_state_changed` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Idle,
    Running,
    RequiresAction,
}

#[must_use]
pub fn session_state(state: SessionState, session_id: &str, uuid: &str) -> Line {
    Line::System(SystemLine::SessionStateChanged {
        state,
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    })
}

/// `--include-hook-events`: a hook's start or end.
#[must_use]
pub fn hook(report: HookReport, session_id: &str, uuid: &str) -> Line {
    let (session_id, uuid) = (session_id.to_owned(), uuid.to_owned());
    Line::System(match report {
        HookReport::Started {
            hook_id,
            hook_name,
            hook_event,
        } => SystemLine::HookStarted {
            hook_id,
            hook_name,
            hook_event,
            session_id,
            uuid,
        },
        HookReport::Response {
            hook_id,
            hook_name,
            hook_event,
            output,
            outcome,
        } => SystemLine::HookResponse {
            hook_id,
            hook_name,
            hook_event,
            output,
            stdout: "",
            stderr: "",
            outcome,
            session_id,
            uuid,
        },
    })
}

#[must_use]
pub fn stream_event(event: &StreamEvent, session_id: &str, uuid: &str) -> Line {
    Line::StreamEvent {
        event: event.clone(),
        parent_tool_use_id: None,
        session_id: session_id.to_owned(),
        uuid: uuid.to_owned(),
    }
}

/// The last line (and the whole output of `--output-format json`).
#[must_use]
pub fn result(result: &TurnResult, extras: &ResultExtras, session_id: &str, uuid: &str) -> Line {
    Line::Result(ResultLine {
        subtype: result.subtype,
        is_error: result.is_error,
        duration_ms: result.duration_ms,
        duration_api_ms: result.duration_api_ms,
        num_turns: result.num_turns,
        result: result.result.clone(),
        session_id: session_id.to_owned(),
        total_cost_usd: result.total_cost_usd,
        usage: result.usage,
        permission_denials: result.permission_denials.clone(),
        terminal_reason: Some(result.terminal.reason.name()),
        stop_reason: extras.stop_reason.clone(),
        model_usage: extras.model_usage.clone(),
        uuid: uuid.to_owned(),
        structured_output: extras.structured_output.clone(),
        errors: result.errors.clone(),
    })
}

/// A result line that ran no turn: a stdin message that never became one (an orphan
/// tool_result, a prompt a UserPromptSubmit hook blocked: `errors` says why), or
/// `/compact`'s answer, so a driver waiting for a result gets one.
#[must_use]
pub fn without_turn(
    text: &str,
    errors: Vec<String>,
    usage: &Usage,
    total_cost_usd: f64,
    session_id: &str,
    uuid: &str,
) -> Line {
    let is_error = !errors.is_empty();
    Line::Result(ResultLine {
        subtype: if is_error {
            "error_during_execution"
        } else {
            "success"
        },
        is_error,
        duration_ms: 0,
        duration_api_ms: 0,
        num_turns: 0,
        result: text.to_owned(),
        session_id: session_id.to_owned(),
        total_cost_usd,
        usage: *usage,
        permission_denials: Vec::new(),
        terminal_reason: None,
        stop_reason: None,
        model_usage: BTreeMap::new(),
        uuid: uuid.to_owned(),
        structured_output: None,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use gyre_loop::{Terminal, TerminalReason, Transition};
    use gyre_protocol::{ContentBlock, ContentDelta};
    use serde_json::json;

    use super::*;

    const SESSION: &str = "2b1f6c52-8d3e-4a7b-9f10-5c2e8a4d6b01";
    const UUID: &str = "00000000-0000-4000-8000-000000000001";

    fn facts() -> SessionFacts {
        SessionFacts {
            session_id: SESSION.into(),
            cwd: "/home/ada/project".into(),
            meter: gyre_loop::UsageMeter::new("claude-sonnet-4-5"),
            tools: vec!["Bash".into(), "Read".into()],
            permission_mode: "default".into(),
            mcp_servers: Vec::new(),
            structured: None,
            last_usage: Usage::default(),
            context: crate::stream_json::ContextFacts::of(&gyre_compact::CompactConfig::default()),
            backend: gyre_core::backend::BackendFacts::fixture("test"),
        }
    }

    fn turn_result(subtype: &'static str, is_error: bool, reason: TerminalReason) -> TurnResult {
        TurnResult {
            subtype,
            is_error,
            result: if is_error {
                String::new()
            } else {
                "Done.".into()
            },
            num_turns: 2,
            duration_ms: 1234,
            duration_api_ms: 1000,
            total_cost_usd: 0.0123,
            usage: Usage {
                input_tokens: 300,
                output_tokens: 40,
                cache_creation_input_tokens: 10,
                cache_read_input_tokens: 200,
                ..Usage::default()
            },
            permission_denials: vec![PermissionDenial {
                tool_name: "Bash".into(),
                tool_use_id: "toolu_1".into(),
                tool_input: json!({"command": "rm -rf build"}),
            }],
            terminal: Terminal {
                reason,
                turn_count: 2,
                transitions: vec![Transition::NextTurn],
                error: None,
            },
            errors: if is_error {
                vec!["Reached maximum number of turns (2)".into()]
            } else {
                Vec::new()
            },
        }
    }

    #[test]
    fn init_line() {
        let mut line =
            serde_json::to_value(init(&facts(), UUID, vec!["review".to_owned()])).unwrap();
        line["gyre_version"] = json!("[version]");
        line["claude_code_version"] = json!("[version]");
        insta::assert_json_snapshot!(line);
    }

    #[test]
    fn assistant_line() {
        let m = Message::assistant(vec![
            ContentBlock::text("Reading it."),
            ContentBlock::tool_use("toolu_1", "Read", json!({"file_path": "/a.txt"})),
        ]);
        let meta = ResponseMeta {
            id: "msg_01".into(),
            model: "claude-sonnet-4-5".into(),
            stop_reason: Some(StopReason::ToolUse),
            usage: Usage {
                input_tokens: 120,
                output_tokens: 30,
                ..Usage::default()
            },
        };
        insta::assert_json_snapshot!(message(&m, &meta, SESSION, UUID));
    }

    #[test]
    fn user_line() {
        let m = Message::user(vec![ContentBlock::tool_result(
            "toolu_1",
            "1\tfirst line",
            false,
        )]);
        insta::assert_json_snapshot!(message(&m, &ResponseMeta::default(), SESSION, UUID));
    }

    #[test]
    fn api_retry_line() {
        let status = RetryStatus {
            attempt: 2,
            max_retries: 10,
            delay_ms: 1100,
            status: Some(529),
            error: "overloaded".into(),
            message: "The API is overloaded (529): Overloaded.".into(),
        };
        insta::assert_json_snapshot!(api_retry(&status, SESSION, UUID));
    }

    #[test]
    fn model_fallback_line() {
        insta::assert_json_snapshot!(model_fallback("big-model", "small-model", SESSION, UUID));
    }

    #[test]
    fn compact_boundary_line() {
        let outcome = CompactionOutcome {
            trigger: gyre_loop::Trigger::Auto,
            pre_tokens: 190_000,
            post_tokens: 9_000,
        };
        insta::assert_json_snapshot!(compact_boundary(&outcome, SESSION, UUID));
    }

    #[test]
    fn permission_denied_line() {
        let denial = PermissionDenial {
            tool_name: "Bash".into(),
            tool_use_id: "toolu_1".into(),
            tool_input: json!({"command": "rm -rf build"}),
        };
        insta::assert_json_snapshot!(permission_denied(
            &denial,
            "Permission to use Bash was denied.",
            SESSION,
            UUID
        ));
    }

    #[test]
    fn stream_event_line() {
        let event = StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::TextDelta { text: "Hel".into() },
        };
        insta::assert_json_snapshot!(stream_event(&event, SESSION, UUID));
    }

    #[test]
    fn result_line_success() {
        insta::assert_json_snapshot!(result(
            &turn_result("success", false, TerminalReason::Completed),
            &ResultExtras::default(),
            SESSION,
            UUID
        ));
    }

    #[test]
    fn result_line_max_turns() {
        insta::assert_json_snapshot!(result(
            &turn_result("error_max_turns", true, TerminalReason::MaxTurns),
            &ResultExtras::default(),
            SESSION,
            UUID
        ));
    }
}
