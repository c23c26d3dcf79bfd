//! The stream-json lines of headless mode, with Claude Code's field names.

use std::collections::BTreeMap;

use gyre_api::RetryStatus;
use gyre_loop::{CompactionOutcome, TurnResult};
use gyre_protocol::{Message, Role, StopReason, StreamEvent, Usage};
use gyre_tools::PermissionDenial;
use serde_json::{Value, json};

pub use gyre_core::facts::{ContextFacts, ModelUsage, SessionFacts};

/// What the result line adds to the turn's [`TurnResult`].
#[derive(Debug, Clone, Default)]
pub struct ResultExtras {
    /// The stop reason of the last response.
    pub stop_reason: Option<StopReason>,
    pub model_usage: BTreeMap<String, ModelUsage>,
    pub structured_output: Option<Value>,
}

#[must_use]
pub fn init(facts: &SessionFacts, uuid: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": facts.cwd,
        "session_id": facts.session_id,
        "tools": facts.tools,
        "mcp_servers": facts.mcp_servers,
        "model": facts.model(),
        "permissionMode": facts.permission_mode,
        "slash_commands": ["compact", "clear", "cost", "model", "help"],
        "apiKeySource": "ANTHROPIC_API_KEY",
        "output_style": "default",
        // The Agent SDKs read this field; gyre reports its own version.
        "claude_code_version": env!("CARGO_PKG_VERSION"),
        "gyre_version": env!("CARGO_PKG_VERSION"),
        "uuid": uuid,
    })
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
pub fn message(message: &Message, meta: &ResponseMeta, session_id: &str, uuid: &str) -> Value {
    let body = match message.role {
        Role::Assistant => json!({
            "id": meta.id,
            "type": "message",
            "role": "assistant",
            "model": meta.model,
            "content": message.content,
            "stop_reason": meta.stop_reason,
            "stop_sequence": null,
            "usage": meta.usage,
        }),
        Role::User => json!({
            "role": "user",
            "content": message.content,
        }),
    };
    let mut line = json!({
        "type": match message.role { Role::Assistant => "assistant", Role::User => "user" },
        "message": body,
        "parent_tool_use_id": null,
        "session_id": session_id,
        "uuid": uuid,
    });
    if let Some(result) = tool_use_result(message) {
        line["tool_use_result"] = result;
    }
    line
}

/// The tool's own result for a user line carrying tool results: the text of the
/// result (or of each, when several tools answered).
fn tool_use_result(message: &Message) -> Option<Value> {
    let texts: Vec<Value> = message
        .content
        .iter()
        .filter_map(|b| match b {
            gyre_protocol::ContentBlock::ToolResult { content, .. } => Some(json!(content.text())),
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
pub fn api_retry(status: &RetryStatus, session_id: &str, uuid: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "api_retry",
        "attempt": status.attempt,
        "max_retries": status.max_retries,
        "retry_delay_ms": status.delay_ms,
        "error_status": status.status,
        "error": status.error,
        "message": status.message,
        "session_id": session_id,
        "uuid": uuid,
    })
}

#[must_use]
pub fn model_fallback(original: &str, fallback: &str, session_id: &str, uuid: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "model_fallback",
        "original_model": original,
        "fallback_model": fallback,
        "message": format!("Switched to {fallback} due to high demand for {original}"),
        "session_id": session_id,
        "uuid": uuid,
    })
}

#[must_use]
pub fn compact_boundary(outcome: &CompactionOutcome, session_id: &str, uuid: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "compact_boundary",
        "compact_metadata": { "trigger": outcome.trigger, "pre_tokens": outcome.pre_tokens },
        "session_id": session_id,
        "uuid": uuid,
    })
}

#[must_use]
pub fn permission_denied(
    denial: &PermissionDenial,
    message: &str,
    session_id: &str,
    uuid: &str,
) -> Value {
    json!({
        "type": "system",
        "subtype": "permission_denied",
        "tool_name": denial.tool_name,
        "tool_use_id": denial.tool_use_id,
        "tool_input": denial.tool_input,
        "message": message,
        "session_id": session_id,
        "uuid": uuid,
    })
}

#[must_use]
pub fn stream_event(event: &StreamEvent, session_id: &str, uuid: &str) -> Value {
    json!({
        "type": "stream_event",
        "event": event,
        "parent_tool_use_id": null,
        "session_id": session_id,
        "uuid": uuid,
    })
}

/// The last line (and the whole output of `--output-format json`).
#[must_use]
pub fn result(result: &TurnResult, extras: &ResultExtras, session_id: &str, uuid: &str) -> Value {
    let mut v = json!({
        "type": "result",
        "subtype": result.subtype,
        "is_error": result.is_error,
        "duration_ms": result.duration_ms,
        "duration_api_ms": result.duration_api_ms,
        "num_turns": result.num_turns,
        "result": result.result,
        "session_id": session_id,
        "total_cost_usd": result.total_cost_usd,
        "usage": result.usage,
        "permission_denials": result.permission_denials,
        "terminal_reason": result.terminal.reason.name(),
        "stop_reason": extras.stop_reason,
        "modelUsage": extras.model_usage,
        "uuid": uuid,
    });
    if let Some(output) = &extras.structured_output {
        v["structured_output"] = output.clone();
    }
    if !result.errors.is_empty() {
        v["errors"] = json!(result.errors);
    }
    v
}

/// The result line of a stdin message that never became a turn (an orphan tool_result,
/// a prompt a UserPromptSubmit hook blocked), so a driver waiting for a result gets one.
#[must_use]
pub fn refused(
    reason: &str,
    usage: &Usage,
    total_cost_usd: f64,
    session_id: &str,
    uuid: &str,
) -> Value {
    json!({
        "type": "result",
        "subtype": "error_during_execution",
        "is_error": true,
        "duration_ms": 0,
        "duration_api_ms": 0,
        "num_turns": 0,
        "result": reason,
        "session_id": session_id,
        "total_cost_usd": total_cost_usd,
        "usage": usage,
        "permission_denials": [],
        "errors": [reason],
        "uuid": uuid,
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
        let mut line = init(&facts(), UUID);
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
