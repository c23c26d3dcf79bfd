//! The stream-json lines of headless mode, with Claude Code's field names (SPEC §9).

use gyre_api::RetryStatus;
use gyre_loop::{CompactionOutcome, TurnResult};
use gyre_protocol::{Message, Role, StreamEvent};
use gyre_tools::PermissionDenial;
use serde_json::{Value, json};

/// Facts of the session that several lines repeat.
#[derive(Debug, Clone)]
pub struct SessionFacts {
    pub session_id: String,
    pub cwd: String,
    pub model: String,
    pub tools: Vec<String>,
    pub permission_mode: String,
}

#[must_use]
pub fn init(facts: &SessionFacts, uuid: &str) -> Value {
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": facts.cwd,
        "session_id": facts.session_id,
        "tools": facts.tools,
        "mcp_servers": [],
        "model": facts.model,
        "permissionMode": facts.permission_mode,
        "slash_commands": ["compact", "clear", "cost", "model", "help"],
        "apiKeySource": "ANTHROPIC_API_KEY",
        "output_style": "default",
        "gyre_version": env!("CARGO_PKG_VERSION"),
        "uuid": uuid,
    })
}

/// An `assistant` or `user` line. Assistant messages carry the model that wrote them.
#[must_use]
pub fn message(message: &Message, model: &str, session_id: &str, uuid: &str) -> Value {
    let body = match message.role {
        Role::Assistant => json!({
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": message.content,
        }),
        Role::User => json!({
            "role": "user",
            "content": message.content,
        }),
    };
    json!({
        "type": match message.role { Role::Assistant => "assistant", Role::User => "user" },
        "message": body,
        "parent_tool_use_id": null,
        "session_id": session_id,
        "uuid": uuid,
    })
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
pub fn result(result: &TurnResult, session_id: &str, uuid: &str) -> Value {
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
        "uuid": uuid,
    });
    if !result.errors.is_empty() {
        v["errors"] = json!(result.errors);
    }
    v
}
