//! Turning a scripted response into what goes on the wire: SSE events, a whole message
//! JSON, or an API error body. Pure functions, no I/O.

use bytes::Bytes;
use gyre_protocol::{CacheCreation, ErrorDetail, ServerToolUsage};
use serde::Serialize;
use serde_json::Value;

use crate::script::{Block, ResponseTurn};

/// The `type` of the event inserted by `unknown_event_after`.
pub(crate) const UNKNOWN_EVENT: &str = "testkit_unknown_event";

/// Values that come from the request rather than the script.
#[derive(Debug)]
pub(crate) struct RenderContext<'a> {
    /// The request's size in tokens (bytes / 4): the input tokens reported when the turn
    /// scripts no input side of its usage.
    pub(crate) request_tokens: u64,
    /// The request's model, the default for the response's.
    pub(crate) request_model: Option<&'a str>,
    /// The capture index of the request: unique per server, so ids made from it are too.
    pub(crate) request_number: usize,
    /// The script's default delta size.
    pub(crate) chunk_chars: usize,
}

impl RenderContext<'_> {
    fn message_id(&self, turn: &ResponseTurn) -> String {
        turn.id
            .clone()
            .unwrap_or_else(|| format!("msg_testkit_{}", self.request_number))
    }

    fn model<'t>(&'t self, turn: &'t ResponseTurn) -> &'t str {
        turn.model
            .as_deref()
            .or(self.request_model)
            .unwrap_or("claude-testkit")
    }

    fn tool_id(&self, block_index: usize) -> String {
        format!("toolu_testkit_{}_{block_index}", self.request_number)
    }
}

// Wire shapes, declared rather than built with `json!` so that fields come out in the
// API's order (`type` first) and the testkit does not borrow gyre-protocol's serializers:
// a bug there must show up as a failing test, not be mirrored here.

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent<'a> {
    MessageStart {
        message: WireMessage<'a>,
    },
    Ping,
    ContentBlockStart {
        index: usize,
        content_block: WireBlock<'a>,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: WireStop<'a>,
        usage: WireUsage,
    },
    MessageStop,
    Error {
        error: &'a ErrorDetail,
    },
}

impl WireEvent<'_> {
    fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::Ping => "ping",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Error { .. } => "error",
        }
    }
}

#[derive(Serialize)]
struct WireMessage<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<WireBlock<'a>>,
    stop_reason: Option<&'a str>,
    stop_sequence: Option<&'a str>,
    usage: WireUsage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: String,
        name: &'a str,
        input: Value,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum WireDelta<'a> {
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "signature_delta")]
    Signature { signature: &'a str },
}

#[derive(Serialize)]
struct WireStop<'a> {
    stop_reason: Option<&'a str>,
    stop_sequence: Option<&'a str>,
}

#[derive(Serialize)]
struct WireUsage {
    input_tokens: u64,
    cache_creation_input_tokens: u64,
    cache_read_input_tokens: u64,
    output_tokens: u64,
    /// Writes by cache lifetime, as the API breaks them down (when scripted).
    #[serde(skip_serializing_if = "CacheCreation::is_zero")]
    cache_creation: CacheCreation,
    /// Server tools the request ran (web searches), when scripted.
    #[serde(skip_serializing_if = "ServerToolUsage::is_zero")]
    server_tool_use: ServerToolUsage,
}

impl WireUsage {
    /// A turn whose usage has no input side (all three input counts 0) reports the
    /// request's own size, so a long scripted session grows its context as a real one.
    fn new(turn: &ResponseTurn, ctx: &RenderContext<'_>, output_tokens: u64) -> Self {
        let u = &turn.usage;
        let scripted = u.input_tokens > 0
            || u.cache_read_input_tokens > 0
            || u.cache_creation_input_tokens > 0;
        Self {
            input_tokens: if scripted {
                u.input_tokens
            } else {
                ctx.request_tokens
            },
            cache_creation_input_tokens: turn.usage.cache_creation_input_tokens,
            cache_read_input_tokens: turn.usage.cache_read_input_tokens,
            output_tokens,
            cache_creation: turn.usage.cache_creation,
            server_tool_use: turn.usage.server_tool_use,
        }
    }
}

/// One SSE event, framed: `event: <type>\ndata: <json>\n\n`.
fn frame(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn event(event: &WireEvent<'_>) -> Bytes {
    // These shapes hold only strings, numbers and JSON values: serializing cannot fail.
    frame(
        event.name(),
        &serde_json::to_string(event).unwrap_or_default(),
    )
}

/// Splits `s` into pieces of at most `n` characters (never inside a UTF-8 sequence).
fn chunks(s: &str, n: usize) -> impl Iterator<Item = &str> {
    let mut rest = s;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i);
        let (head, tail) = rest.split_at(end);
        rest = tail;
        Some(head)
    })
}

/// The input JSON text of a tool_use block, as streamed.
fn tool_input_text(input: Option<&Value>, raw: Option<&str>) -> String {
    match (raw, input) {
        (Some(raw), _) => raw.to_owned(),
        (None, Some(input)) => input.to_string(),
        (None, None) => "{}".to_owned(),
    }
}

fn message<'a>(
    turn: &'a ResponseTurn,
    ctx: &'a RenderContext<'_>,
    content: Vec<WireBlock<'a>>,
    done: bool,
) -> WireMessage<'a> {
    WireMessage {
        id: ctx.message_id(turn),
        kind: "message",
        role: "assistant",
        model: ctx.model(turn),
        content,
        stop_reason: done.then(|| turn.effective_stop_reason()),
        stop_sequence: if done {
            turn.stop_sequence.as_deref()
        } else {
            None
        },
        // message_start reports 1 output token, as the API does.
        usage: WireUsage::new(turn, ctx, if done { turn.usage.output_tokens } else { 1 }),
    }
}

/// Every SSE event of a response turn, in order, with `unknown_event_after` and
/// `error_event` applied (cuts and stalls are applied while sending).
pub(crate) fn stream_events(turn: &ResponseTurn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let mut events = match &turn.raw_events {
        Some(raw) => raw.iter().map(raw_event).collect(),
        None => content_events(turn, ctx),
    };
    if let Some(at) = turn.unknown_event_after {
        let data = format!(
            r#"{{"type":"{UNKNOWN_EVENT}","note":"gyre-testkit: an event type clients must ignore"}}"#
        );
        events.insert(at.min(events.len()), frame(UNKNOWN_EVENT, &data));
    }
    if let Some(error_event) = &turn.error_event {
        events.truncate(error_event.after_events);
        events.push(event(&WireEvent::Error {
            error: &error_event.error,
        }));
    }
    events
}

/// A scripted event as it is: `event:` named by its `type` (checked by the script).
fn raw_event(value: &Value) -> Bytes {
    let name = value
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    frame(name, &value.to_string())
}

/// The events of a turn's `content`.
fn content_events(turn: &ResponseTurn, ctx: &RenderContext<'_>) -> Vec<Bytes> {
    let chunk = turn.chunk_chars.unwrap_or(ctx.chunk_chars).max(1);
    let mut events = Vec::with_capacity(4 + turn.content.len() * 4);
    events.push(event(&WireEvent::MessageStart {
        message: message(turn, ctx, Vec::new(), false),
    }));
    // The API sends a ping right after message_start.
    events.push(event(&WireEvent::Ping));

    for (index, block) in turn.content.iter().enumerate() {
        let start = |content_block| {
            event(&WireEvent::ContentBlockStart {
                index,
                content_block,
            })
        };
        let delta = |delta| event(&WireEvent::ContentBlockDelta { index, delta });
        match block {
            Block::Text { text } => {
                events.push(start(WireBlock::Text { text: "" }));
                events.extend(chunks(text, chunk).map(|text| delta(WireDelta::Text { text })));
            }
            Block::ToolUse {
                id,
                name,
                input,
                raw_input_json,
            } => {
                let id = id.clone().unwrap_or_else(|| ctx.tool_id(index));
                events.push(start(WireBlock::ToolUse {
                    id,
                    name,
                    input: Value::Object(serde_json::Map::new()),
                }));
                // The API opens every tool input with an empty partial_json.
                events.push(delta(WireDelta::InputJson { partial_json: "" }));
                let text = tool_input_text(input.as_ref(), raw_input_json.as_deref());
                events.extend(
                    chunks(&text, chunk)
                        .map(|partial_json| delta(WireDelta::InputJson { partial_json })),
                );
            }
            Block::Thinking {
                thinking,
                signature,
            } => {
                events.push(start(WireBlock::Thinking {
                    thinking: "",
                    signature: "",
                }));
                events.extend(
                    chunks(thinking, chunk).map(|thinking| delta(WireDelta::Thinking { thinking })),
                );
                if !signature.is_empty() {
                    events.push(delta(WireDelta::Signature { signature }));
                }
            }
            Block::RedactedThinking { data } => {
                events.push(start(WireBlock::RedactedThinking { data }));
            }
        }
        events.push(event(&WireEvent::ContentBlockStop { index }));
    }

    events.push(event(&WireEvent::MessageDelta {
        delta: WireStop {
            stop_reason: Some(turn.effective_stop_reason()),
            stop_sequence: turn.stop_sequence.as_deref(),
        },
        usage: WireUsage::new(turn, ctx, turn.usage.output_tokens),
    }));
    events.push(event(&WireEvent::MessageStop));
    events
}

/// The whole message of a response turn, as sent for `"stream": false`. A `raw_input_json`
/// that is not JSON is sent as a JSON string in `input`.
pub(crate) fn message_json(turn: &ResponseTurn, ctx: &RenderContext<'_>) -> String {
    let content = turn
        .content
        .iter()
        .enumerate()
        .map(|(index, block)| match block {
            Block::Text { text } => WireBlock::Text { text },
            Block::ToolUse {
                id,
                name,
                input,
                raw_input_json,
            } => {
                let text = tool_input_text(input.as_ref(), raw_input_json.as_deref());
                WireBlock::ToolUse {
                    id: id.clone().unwrap_or_else(|| ctx.tool_id(index)),
                    name,
                    input: serde_json::from_str(&text).unwrap_or(Value::String(text)),
                }
            }
            Block::Thinking {
                thinking,
                signature,
            } => WireBlock::Thinking {
                thinking,
                signature,
            },
            Block::RedactedThinking { data } => WireBlock::RedactedThinking { data },
        })
        .collect();
    serde_json::to_string(&message(turn, ctx, content, true)).unwrap_or_default()
}

/// The API's error type and a default message for an HTTP status.
pub(crate) fn error_kind(status: u16) -> (&'static str, &'static str) {
    match status {
        400 => ("invalid_request_error", "Invalid request"),
        401 => ("authentication_error", "invalid x-api-key"),
        403 => (
            "permission_error",
            "Your API key does not have permission to use the specified resource",
        ),
        404 => ("not_found_error", "Not found"),
        408 | 504 => ("timeout_error", "Request timed out"),
        413 => (
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes",
        ),
        429 => ("rate_limit_error", "Rate limited"),
        529 => ("overloaded_error", "Overloaded"),
        500..=599 => ("api_error", "Internal server error"),
        _ => ("invalid_request_error", "Invalid request"),
    }
}

/// `{"type":"error","error":{"type":…,"message":…}}`.
pub(crate) fn error_body(kind: &str, message: &str) -> String {
    #[derive(Serialize)]
    struct WireError {
        #[serde(rename = "type")]
        kind: &'static str,
        error: ErrorDetail,
    }
    let body = WireError {
        kind: "error",
        error: ErrorDetail {
            kind: kind.to_owned(),
            message: message.to_owned(),
        },
    };
    serde_json::to_string(&body).unwrap_or_default()
}

/// The API's error body for an HTTP status.
pub(crate) fn default_error_body(status: u16) -> String {
    let (kind, message) = error_kind(status);
    error_body(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::Turn;
    use serde_json::json;

    fn ctx() -> RenderContext<'static> {
        RenderContext {
            request_tokens: 250,
            request_model: Some("m"),
            request_number: 7,
            chunk_chars: 3,
        }
    }

    #[test]
    fn usage_without_an_input_side_reports_the_request_size() {
        let unscripted = message_json(&response(Turn::text("a")), &ctx());
        let v: serde_json::Value = serde_json::from_str(&unscripted).unwrap();
        assert_eq!(v["usage"]["input_tokens"], 250);
        let scripted = message_json(&response(Turn::text("a").with_tokens(12, 3)), &ctx());
        let v: serde_json::Value = serde_json::from_str(&scripted).unwrap();
        assert_eq!(v["usage"]["input_tokens"], 12);
        assert_eq!(v["usage"]["output_tokens"], 3);
    }

    #[test]
    fn event_data_starts_with_its_type() {
        let events = stream_events(
            &response(Turn::text("a").and_tool_use("X", json!({}))),
            &ctx(),
        );
        for e in &events {
            let text = std::str::from_utf8(e).unwrap();
            let (name, data) = text.split_once('\n').unwrap();
            let name = name.trim_start_matches("event: ");
            assert!(
                data.starts_with(&format!(r#"data: {{"type":"{name}""#)),
                "{text}"
            );
        }
    }

    fn names(events: &[Bytes]) -> Vec<String> {
        events
            .iter()
            .map(|e| {
                let text = std::str::from_utf8(e).unwrap();
                text.lines()
                    .next()
                    .unwrap()
                    .trim_start_matches("event: ")
                    .to_owned()
            })
            .collect()
    }

    fn response(turn: Turn) -> ResponseTurn {
        match turn {
            Turn::Response(r) => r,
            Turn::HttpError(_) => panic!("not a response"),
        }
    }

    #[test]
    fn chunks_split_on_characters() {
        assert_eq!(chunks("héllo!", 2).collect::<Vec<_>>(), ["hé", "ll", "o!"]);
        assert_eq!(chunks("", 2).count(), 0);
    }

    #[test]
    fn text_turn_event_order() {
        let events = stream_events(&response(Turn::text("abcdefg")), &ctx());
        assert_eq!(
            names(&events),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
    }

    #[test]
    fn error_event_replaces_the_rest() {
        let events = stream_events(
            &response(Turn::text("a").error_event(2, "api_error", "x")),
            &ctx(),
        );
        assert_eq!(names(&events), ["message_start", "ping", "error"]);
    }

    #[test]
    fn unknown_event_is_inserted() {
        let events = stream_events(&response(Turn::text("a").unknown_event_after(1)), &ctx());
        assert_eq!(names(&events)[1], UNKNOWN_EVENT);
    }

    #[test]
    fn default_error_bodies_follow_the_status() {
        assert_eq!(
            default_error_body(529),
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
        );
        let kind = |status| {
            serde_json::from_str::<Value>(&default_error_body(status)).unwrap()["error"]["type"]
                .clone()
        };
        assert_eq!(kind(401), "authentication_error");
        assert_eq!(kind(503), "api_error");
        assert_eq!(kind(413), "request_too_large");
    }

    #[test]
    fn non_stream_message_keeps_malformed_input_as_string() {
        let msg = message_json(
            &response(Turn::response([Block::raw_tool_use("X", "{bad")])),
            &ctx(),
        );
        assert!(
            msg.starts_with(r#"{"id":"msg_testkit_7","type":"message","#),
            "{msg}"
        );
        let msg: Value = serde_json::from_str(&msg).unwrap();
        assert_eq!(msg["content"][0]["input"], "{bad");
        assert_eq!(msg["content"][0]["id"], "toolu_testkit_7_0");
        assert_eq!(msg["stop_reason"], "tool_use");
        assert_eq!(msg["model"], "m");
    }
}
