//! `MessageAssembler`: raw stream events in, complete content blocks and the final
//! assistant message out. Pure: no I/O, no clock.

use gyre_protocol::{
    AssistantResponse, ContentBlock, ContentDelta, MessageStart, StopReason, StreamEvent, Usage,
};
use serde_json::{Map, Value};

use crate::ApiError;

/// Key of the tool input that replaces a `tool_use` input which is not a valid JSON
/// object. Its value is the raw text the model streamed; [`INVALID_JSON_ERROR_KEY`]
/// holds the parse error. The block still completes, so the loop can answer that tool
/// call with an input error instead of crashing: see [`invalid_tool_input`].
pub const INVALID_JSON_KEY: &str = "__gyre_invalid_json";
/// Key of the parse error next to [`INVALID_JSON_KEY`].
pub const INVALID_JSON_ERROR_KEY: &str = "__gyre_parse_error";

/// A tool input the model streamed that did not parse as a JSON object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidToolInput<'a> {
    /// The text the model sent.
    pub raw: &'a str,
    /// Why it did not parse.
    pub error: &'a str,
}

/// `Some` when a `tool_use` input is the marker the assembler leaves for invalid JSON.
#[must_use]
pub fn invalid_tool_input(input: &Value) -> Option<InvalidToolInput<'_>> {
    let raw = input.get(INVALID_JSON_KEY)?.as_str()?;
    let error = input
        .get(INVALID_JSON_ERROR_KEY)
        .and_then(Value::as_str)
        .unwrap_or("invalid JSON");
    Some(InvalidToolInput { raw, error })
}

/// What one event completed.
#[derive(Debug, Clone, PartialEq)]
pub enum Assembled {
    /// A content block, at its `content_block_stop`.
    Block {
        /// The block's position in the message's content.
        index: usize,
        /// The complete block.
        block: ContentBlock,
    },
    /// The whole message, at `message_stop`.
    Message(AssistantResponse),
}

#[derive(Debug)]
struct OpenBlock {
    block: ContentBlock,
    /// `input_json_delta` text, parsed into the block's `input` at its stop.
    json: String,
    /// Bytes of input received past [`MAX_TOOL_INPUT_BYTES`]: once over, the text is
    /// no longer kept and the call ends as an input error.
    oversized: usize,
}

/// The most `input_json_delta` text one block may stream: a larger input is dropped as
/// it arrives, so a runaway model cannot make the assembler hold gigabytes.
pub const MAX_TOOL_INPUT_BYTES: usize = 16 << 20;

/// Turns a stream's events into completed blocks and the final [`AssistantResponse`].
///
/// Nothing the API sends is dropped. How each delta is merged into its block:
///
/// | delta | block | merge |
/// |---|---|---|
/// | `text_delta` | `text`, or a block gyre does not model | `text` appended |
/// | `thinking_delta` | `thinking`, or a block gyre does not model | `thinking` appended |
/// | `signature_delta` | `thinking`, or a block gyre does not model | `signature` set (it arrives whole) |
/// | `input_json_delta` | `tool_use`, `server_tool_use`, `mcp_tool_use`, any block | concatenated, parsed into `input` once, at `content_block_stop` |
/// | `citations_delta` | `text`, or a block gyre does not model | `citation` pushed onto `citations` |
/// | `compaction_delta` | `compaction` | `content` appended, `encrypted_content` replaced |
/// | any other delta | any block | per field but `type`: a string is appended to a string (or absent / `null`) field, any other value replaces the field, `null` is ignored |
///
/// A typed delta on a modelled block of another type (`thinking_delta` on a text block)
/// is an error.
/// Blocks this crate does not model (`web_search_tool_result`, `compaction`, …) are kept
/// as the JSON of their `content_block_start` with their deltas merged in. A tool_use
/// input that is not a JSON object becomes the [`INVALID_JSON_KEY`] marker; streamed
/// input of any other block that is not JSON is an error. Usage is `message_start`'s
/// merged field by field with `message_delta`'s cumulative totals (the later value wins).
/// A repeated `message_start` for the same message is ignored; an in-stream `error`
/// event, a `message_start` for another message or an out-of-order event is an error.
#[derive(Debug, Default)]
pub struct MessageAssembler {
    start: Option<MessageStart>,
    open: Vec<Option<OpenBlock>>,
    done: Vec<Option<ContentBlock>>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    stop_sequence: Option<String>,
    events: u64,
    finished: bool,
}

fn invalid(message: String) -> ApiError {
    ApiError::InvalidResponse { message }
}

impl MessageAssembler {
    /// An assembler waiting for the first `message_start`.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// How many events were pushed.
    #[must_use]
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Whether `message_stop` was seen.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Feeds one event; returns the block or message it completed, if any.
    pub fn push(&mut self, event: &StreamEvent) -> Result<Option<Assembled>, ApiError> {
        self.events += 1;
        if self.finished {
            return Ok(None);
        }
        match event {
            StreamEvent::MessageStart { message } => {
                if let Some(start) = &self.start {
                    // Streams (and proxies) sometimes repeat it; only another id is a
                    // broken stream.
                    if start.id == message.id {
                        return Ok(None);
                    }
                    // A broken stream: retried like a cut one.
                    return Err(ApiError::StreamRestarted {
                        first: start.id.clone(),
                        second: message.id.clone(),
                        events: self.events,
                    });
                }
                self.usage = message.usage;
                self.stop_reason.clone_from(&message.stop_reason);
                self.stop_sequence.clone_from(&message.stop_sequence);
                let mut start = MessageStart::clone(message);
                for (index, block) in std::mem::take(&mut start.content).into_iter().enumerate() {
                    put(&mut self.done, index, block);
                }
                self.start = Some(start);
                Ok(None)
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                self.require_started("content_block_start")?;
                if self.open.get(*index).is_some_and(Option::is_some) {
                    return Err(invalid(format!("content block {index} started twice")));
                }
                put(
                    &mut self.open,
                    *index,
                    OpenBlock {
                        block: content_block.clone(),
                        json: String::new(),
                        oversized: 0,
                    },
                );
                Ok(None)
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                let open = self
                    .open
                    .get_mut(*index)
                    .and_then(Option::as_mut)
                    .ok_or_else(|| {
                        invalid(format!(
                            "content_block_delta for block {index}, which is not open"
                        ))
                    })?;
                apply_delta(open, delta, *index)?;
                Ok(None)
            }
            StreamEvent::ContentBlockStop { index } => {
                let open = self
                    .open
                    .get_mut(*index)
                    .and_then(Option::take)
                    .ok_or_else(|| {
                        invalid(format!(
                            "content_block_stop for block {index}, which is not open"
                        ))
                    })?;
                let block = finish_block(open, *index)?;
                put(&mut self.done, *index, block.clone());
                Ok(Some(Assembled::Block {
                    index: *index,
                    block,
                }))
            }
            StreamEvent::MessageDelta { delta, usage, .. } => {
                self.require_started("message_delta")?;
                if delta.stop_reason.is_some() {
                    self.stop_reason.clone_from(&delta.stop_reason);
                }
                if delta.stop_sequence.is_some() {
                    self.stop_sequence.clone_from(&delta.stop_sequence);
                }
                self.usage.merge_delta(usage);
                Ok(None)
            }
            StreamEvent::MessageStop => {
                let start = self
                    .start
                    .take()
                    .ok_or_else(|| invalid("message_stop before message_start".into()))?;
                if let Some(index) = self.open.iter().position(Option::is_some) {
                    return Err(invalid(format!(
                        "message_stop while content block {index} is still open"
                    )));
                }
                self.finished = true;
                Ok(Some(Assembled::Message(AssistantResponse {
                    id: start.id,
                    model: start.model,
                    role: start.role,
                    content: std::mem::take(&mut self.done)
                        .into_iter()
                        .flatten()
                        .collect(),
                    stop_reason: self.stop_reason.take(),
                    stop_sequence: self.stop_sequence.take(),
                    usage: self.usage,
                    request_id: start.request_id,
                })))
            }
            StreamEvent::Error { error } => Err(ApiError::from_stream_error(error)),
            StreamEvent::Ping | StreamEvent::Unknown => Ok(None),
        }
    }

    fn require_started(&self, what: &str) -> Result<(), ApiError> {
        if self.start.is_some() {
            Ok(())
        } else {
            Err(invalid(format!("{what} before message_start")))
        }
    }
}

fn put<T>(slots: &mut Vec<Option<T>>, index: usize, value: T) {
    if slots.len() <= index {
        slots.resize_with(index + 1, || None);
    }
    slots[index] = Some(value);
}

fn apply_delta(open: &mut OpenBlock, delta: &ContentDelta, index: usize) -> Result<(), ApiError> {
    match (&mut open.block, delta) {
        (ContentBlock::Text { text, .. }, ContentDelta::TextDelta { text: more }) => {
            text.push_str(more);
        }
        (ContentBlock::Text { extra, .. }, ContentDelta::CitationsDelta { citation }) => {
            push_citation(extra, citation, index)?;
        }
        (
            ContentBlock::Thinking { thinking, .. },
            ContentDelta::ThinkingDelta { thinking: more },
        ) => {
            thinking.push_str(more);
        }
        // The signature arrives whole, just before the block stops; it is set, as the
        // SDKs do, not appended.
        (
            ContentBlock::Thinking { signature, .. },
            ContentDelta::SignatureDelta { signature: whole },
        ) => {
            signature.clone_from(whole);
        }
        // Any block may stream its `input`; it is parsed at the block's stop.
        (
            ContentBlock::ToolUse { .. } | ContentBlock::Unknown(_),
            ContentDelta::InputJsonDelta { partial_json },
        ) => {
            if open.oversized == 0 && open.json.len() + partial_json.len() <= MAX_TOOL_INPUT_BYTES {
                open.json.push_str(partial_json);
            } else {
                if open.oversized == 0 {
                    // Keep the beginning, for the model to see which call it was.
                    open.oversized = open.json.len();
                    let mut keep = 200.min(open.json.len());
                    while !open.json.is_char_boundary(keep) {
                        keep -= 1;
                    }
                    open.json.truncate(keep);
                    open.json.shrink_to_fit();
                }
                open.oversized += partial_json.len();
            }
        }
        (ContentBlock::Unknown(value), delta) => {
            let Value::Object(fields) = value else {
                return Err(invalid(format!(
                    "content block {index} is not a JSON object"
                )));
            };
            merge_into(fields, delta, index)?;
        }
        // A delta a typed block has no field for (a future one): merged into its JSON form.
        (block, ContentDelta::Other(_)) => {
            let mut json = serde_json::to_value(&*block).map_err(|e| invalid(e.to_string()))?;
            if let Value::Object(fields) = &mut json {
                merge_into(fields, delta, index)?;
            }
            *block = serde_json::from_value(json).map_err(|e| {
                invalid(format!(
                    "{} delta for content block {index} left it unreadable: {e}",
                    delta.kind()
                ))
            })?;
        }
        (
            block @ (ContentBlock::Text { .. }
            | ContentBlock::ToolUse { .. }
            | ContentBlock::ToolResult { .. }
            | ContentBlock::Thinking { .. }
            | ContentBlock::RedactedThinking { .. }
            | ContentBlock::Image { .. }),
            delta,
        ) => {
            return Err(invalid(format!(
                "{} delta for content block {index}, which is a {} block",
                delta.kind(),
                block.kind()
            )));
        }
    }
    Ok(())
}

/// Fields a delta replaces instead of extending: opaque values that are not text.
const REPLACED_FIELDS: [(&str, &str); 1] = [("compaction_delta", "encrypted_content")];

/// Merges a delta into the JSON fields of a block, by the rules of [`MessageAssembler`].
fn merge_into(
    fields: &mut Map<String, Value>,
    delta: &ContentDelta,
    index: usize,
) -> Result<(), ApiError> {
    match delta {
        ContentDelta::TextDelta { text } => append(fields, "text", text),
        ContentDelta::ThinkingDelta { thinking } => append(fields, "thinking", thinking),
        ContentDelta::SignatureDelta { signature } => {
            fields.insert("signature".to_owned(), Value::String(signature.clone()));
        }
        ContentDelta::CitationsDelta { citation } => return push_citation(fields, citation, index),
        // Buffered by the caller and parsed at the block's stop.
        ContentDelta::InputJsonDelta { .. } => {}
        ContentDelta::Other(Value::Object(delta_fields)) => {
            let kind = delta.kind();
            for (key, value) in delta_fields.iter().filter(|(k, _)| *k != "type") {
                match value {
                    Value::Null => {}
                    Value::String(more) if !REPLACED_FIELDS.contains(&(kind, key.as_str())) => {
                        append(fields, key, more);
                    }
                    other => {
                        fields.insert(key.clone(), other.clone());
                    }
                }
            }
        }
        ContentDelta::Other(other) => {
            return Err(invalid(format!(
                "delta for content block {index} is not a JSON object: {other}"
            )));
        }
    }
    Ok(())
}

/// Appends to a string field; an absent or `null` field starts empty, a field of another
/// kind is replaced.
fn append(fields: &mut Map<String, Value>, key: &str, more: &str) {
    match fields.get_mut(key) {
        Some(Value::String(s)) => s.push_str(more),
        _ => {
            fields.insert(key.to_owned(), Value::String(more.to_owned()));
        }
    }
}

fn push_citation(
    fields: &mut Map<String, Value>,
    citation: &Value,
    index: usize,
) -> Result<(), ApiError> {
    let citations = fields
        .entry("citations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if citations.is_null() {
        *citations = Value::Array(Vec::new());
    }
    match citations {
        Value::Array(list) => {
            list.push(citation.clone());
            Ok(())
        }
        other => Err(invalid(format!(
            "citations_delta for content block {index}, whose citations are {}",
            json_kind(other)
        ))),
    }
}

fn finish_block(open: OpenBlock, index: usize) -> Result<ContentBlock, ApiError> {
    let OpenBlock {
        mut block,
        json,
        oversized,
    } = open;
    if oversized > 0 {
        let error = format!(
            "the input was larger than the 16 MiB one tool call may have ({oversized} bytes or more), so it was dropped; split the work into smaller calls"
        );
        return match &mut block {
            ContentBlock::ToolUse { input, .. } => {
                *input = input_error_marker(json, error);
                Ok(block)
            }
            _ => Err(invalid(format!("content block {index}: {error}"))),
        };
    }
    if json.trim().is_empty() {
        // No input streamed (or only `""`): the start's input stands.
        return Ok(block);
    }
    match &mut block {
        ContentBlock::ToolUse { input, .. } => *input = parse_tool_input(&json),
        ContentBlock::Unknown(Value::Object(fields)) => {
            let input = serde_json::from_str::<Value>(&json).map_err(|e| {
                invalid(format!(
                    "the input streamed for content block {index} is not JSON ({e}): {json}"
                ))
            })?;
            fields.insert("input".to_owned(), input);
        }
        // Only the two arms above accept input_json_delta.
        ContentBlock::Unknown(_)
        | ContentBlock::Text { .. }
        | ContentBlock::ToolResult { .. }
        | ContentBlock::Thinking { .. }
        | ContentBlock::RedactedThinking { .. }
        | ContentBlock::Image { .. } => {}
    }
    Ok(block)
}

/// Parses a tool_use input at block stop; anything but a JSON object becomes the
/// [`INVALID_JSON_KEY`] marker.
fn parse_tool_input(json: &str) -> Value {
    let error = match serde_json::from_str::<Value>(json) {
        Ok(v @ Value::Object(_)) => return v,
        Ok(other) => format!(
            "tool input must be a JSON object, got {}",
            json_kind(&other)
        ),
        Err(e) => e.to_string(),
    };
    input_error_marker(json.to_owned(), error)
}

/// The [`INVALID_JSON_KEY`] marker for a tool input that cannot be used.
fn input_error_marker(raw: String, error: String) -> Value {
    let mut marker = Map::new();
    marker.insert(INVALID_JSON_KEY.to_owned(), Value::String(raw));
    marker.insert(INVALID_JSON_ERROR_KEY.to_owned(), Value::String(error));
    Value::Object(marker)
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_protocol::MessageDeltaBody;
    use serde_json::json;

    fn ev(v: Value) -> StreamEvent {
        serde_json::from_value(v).unwrap()
    }

    fn start() -> StreamEvent {
        ev(
            json!({"type":"message_start","message":{"id":"msg_1","model":"m","role":"assistant",
            "content":[],"usage":{"input_tokens":10,"cache_read_input_tokens":4,"output_tokens":1}}}),
        )
    }

    fn run(events: &[StreamEvent]) -> (Vec<Assembled>, Result<(), ApiError>) {
        let mut a = MessageAssembler::new();
        let mut out = Vec::new();
        for e in events {
            match a.push(e) {
                Ok(Some(x)) => out.push(x),
                Ok(None) => {}
                Err(err) => return (out, Err(err)),
            }
        }
        (out, Ok(()))
    }

    fn final_message(out: &[Assembled]) -> &AssistantResponse {
        match out.last() {
            Some(Assembled::Message(m)) => m,
            other => panic!("no message: {other:?}"),
        }
    }

    #[test]
    fn text_thinking_and_tool_use_assemble() {
        let events = vec![
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me "}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"think"}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}),
            ),
            ev(json!({"type":"content_block_stop","index":0})),
            ev(
                json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            ),
            StreamEvent::Ping,
            ev(
                json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hello"}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":", world"}}),
            ),
            ev(json!({"type":"content_block_stop","index":1})),
            ev(
                json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu_1","name":"Read","input":{}}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_"}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"path\": \"/a\"}"}}),
            ),
            ev(json!({"type":"content_block_stop","index":2})),
            ev(
                json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}),
            ),
            StreamEvent::MessageStop,
        ];
        let (out, res) = run(&events);
        res.unwrap();
        assert_eq!(out.len(), 4);
        assert_eq!(
            out[0],
            Assembled::Block {
                index: 0,
                block: ContentBlock::thinking("let me think", "sig")
            }
        );
        assert_eq!(
            out[1],
            Assembled::Block {
                index: 1,
                block: ContentBlock::text("Hello, world")
            }
        );
        assert_eq!(
            out[2],
            Assembled::Block {
                index: 2,
                block: ContentBlock::tool_use("tu_1", "Read", json!({"file_path":"/a"}))
            }
        );
        let m = final_message(&out);
        assert_eq!(m.id, "msg_1");
        assert_eq!(m.content.len(), 3);
        assert_eq!(m.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(
            m.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 42,
                cache_creation_input_tokens: 0,
                cache_read_input_tokens: 4,
                ..Usage::default()
            }
        );
    }

    #[test]
    fn a_signature_delta_sets_the_signature_as_the_sdks_do() {
        let events = vec![
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":"from-start"}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB=="}}),
            ),
            ev(json!({"type":"content_block_stop","index":0})),
        ];
        let (out, res) = run(&events);
        res.unwrap();
        assert_eq!(
            out[0],
            Assembled::Block {
                index: 0,
                block: ContentBlock::thinking("", "EqQB==")
            }
        );
    }

    #[test]
    fn streamed_input_of_a_server_tool_is_parsed_and_bad_json_is_an_error() {
        let block = |partial: &str| {
            vec![
                start(),
                ev(
                    json!({"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}),
                ),
                ev(
                    json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":partial}}),
                ),
                ev(json!({"type":"content_block_stop","index":0})),
            ]
        };
        let (out, res) = run(&block("{\"query\": \"rust\"}"));
        res.unwrap();
        let Assembled::Block { block: b, .. } = &out[0] else {
            panic!()
        };
        assert_eq!(
            serde_json::to_value(b).unwrap(),
            json!({"type":"server_tool_use","id":"s","name":"web_search","input":{"query":"rust"}})
        );
        let (_, res) = run(&block("{\"query\": "));
        let err = res.unwrap_err();
        assert!(matches!(err, ApiError::InvalidResponse { .. }), "{err:?}");
        assert!(err.to_string().contains("not JSON"), "{err}");
    }

    #[test]
    fn a_known_delta_on_the_wrong_typed_block_is_still_an_error() {
        let events = vec![
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"x"}}),
            ),
        ];
        let (_, res) = run(&events);
        let err = res.unwrap_err().to_string();
        assert!(
            err.contains("thinking_delta") && err.contains("text block"),
            "{err}"
        );
    }

    #[test]
    fn tool_use_without_deltas_keeps_start_input() {
        let events = vec![
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"Glob","input":{}}}),
            ),
            ev(json!({"type":"content_block_stop","index":0})),
            StreamEvent::MessageStop,
        ];
        let (out, res) = run(&events);
        res.unwrap();
        assert_eq!(
            out[0],
            Assembled::Block {
                index: 0,
                block: ContentBlock::tool_use("t", "Glob", json!({}))
            }
        );
    }

    /// The input of a `tool_use` block streamed as `parts`.
    fn streamed_tool_input<'a>(parts: impl IntoIterator<Item = &'a str>) -> Value {
        let mut events = vec![
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"Bash","input":{}}}),
            ),
        ];
        events.extend(parts.into_iter().map(|part| {
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":part}}),
            )
        }));
        events.push(ev(json!({"type":"content_block_stop","index":0})));
        events.push(StreamEvent::MessageStop);
        let (out, res) = run(&events);
        res.unwrap();
        let Assembled::Block { block, .. } = &out[0] else {
            panic!()
        };
        block.as_tool_use().unwrap().2.clone()
    }

    #[test]
    fn invalid_tool_json_completes_with_an_input_error_marker() {
        let input = streamed_tool_input(["{\"command\": \"ls"]);
        let bad = invalid_tool_input(&input).unwrap();
        assert_eq!(bad.raw, "{\"command\": \"ls");
        assert!(bad.error.contains("EOF"), "{}", bad.error);
        assert!(invalid_tool_input(&json!({"command": "ls"})).is_none());
    }

    /// Issue #29 class 16: a tool input past the bound is not kept; the call completes
    /// with an input error that says why.
    #[test]
    fn an_oversized_tool_input_is_dropped_and_becomes_an_input_error() {
        let chunk = "x".repeat(1 << 20);
        let parts = std::iter::once("{\"content\": \"")
            .chain(std::iter::repeat_n(chunk.as_str(), 17))
            .chain(["\"}"]);
        let input = streamed_tool_input(parts);
        let bad = invalid_tool_input(&input).unwrap();
        assert!(bad.error.contains("16 MiB"), "{}", bad.error);
        assert!(bad.raw.len() < 4096, "{} bytes kept", bad.raw.len());
        // Just under the bound, the input is the input.
        let fits = "x".repeat(MAX_TOOL_INPUT_BYTES - 20);
        let input = streamed_tool_input(["{\"content\": \"", fits.as_str(), "\"}"]);
        assert_eq!(input["content"].as_str().map(str::len), Some(fits.len()));
    }

    #[test]
    fn non_object_tool_input_is_an_input_error() {
        assert!(
            invalid_tool_input(&parse_tool_input("[1,2]"))
                .unwrap()
                .error
                .contains("array")
        );
    }

    #[test]
    fn in_stream_error_event_is_an_error() {
        let events = vec![
            start(),
            ev(json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})),
        ];
        let (_, res) = run(&events);
        assert!(res.unwrap_err().is_overloaded());
    }

    #[test]
    fn out_of_order_events_are_errors() {
        let (_, res) = run(&[ev(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}),
        )]);
        assert!(matches!(res, Err(ApiError::InvalidResponse { .. })));
        let (_, res) = run(&[StreamEvent::MessageStop]);
        assert!(matches!(res, Err(ApiError::InvalidResponse { .. })));
        let (_, res) = run(&[
            start(),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            StreamEvent::MessageStop,
        ]);
        assert!(matches!(res, Err(ApiError::InvalidResponse { .. })));
    }

    #[test]
    fn stop_sequence_and_unknown_events_pass() {
        let events = vec![
            start(),
            StreamEvent::Unknown,
            StreamEvent::MessageDelta {
                delta: MessageDeltaBody {
                    stop_reason: Some(StopReason::StopSequence),
                    stop_sequence: Some("END".into()),
                    ..MessageDeltaBody::default()
                },
                usage: Box::default(),
                extra: serde_json::Map::new(),
            },
            StreamEvent::MessageStop,
        ];
        let (out, res) = run(&events);
        res.unwrap();
        let m = final_message(&out);
        assert_eq!(m.stop_sequence.as_deref(), Some("END"));
        assert_eq!(m.usage.input_tokens, 10);
    }
}
