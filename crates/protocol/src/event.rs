//! Server-sent events of a streaming Messages API response, and error bodies.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::{ContentBlock, ExtraFields, Role, StopReason, Usage, UsageDelta};

/// The `message` of a `message_start` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageStart {
    /// The message id (`msg_…`).
    pub id: String,
    /// The model that answers (after any server-side alias resolution).
    #[serde(default)]
    pub model: String,
    /// Always the assistant.
    #[serde(default = "assistant")]
    pub role: Role,
    /// Content already present at the start; usually empty.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Usually `None` here: the stop reason arrives in `message_delta`.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended the message, if one did.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// The usage so far (input tokens, cache counts); `message_delta` updates it.
    #[serde(default)]
    pub usage: Usage,
    /// Fields gyre does not read (`type`, `container`, `stop_details`, whatever the API
    /// adds next), kept so that the event is shown and recorded as it was sent.
    #[serde(flatten)]
    pub extra: ExtraFields,
    /// The API's id of the request (its `request-id` header), set by the client that
    /// received the response; never part of the event on the wire.
    #[serde(skip)]
    pub request_id: Option<String>,
}

fn assistant() -> Role {
    Role::Assistant
}

/// The `delta` of a `content_block_delta` event.
///
/// The four deltas of the blocks gyre reads are typed, and `citations_delta`; every other
/// delta (`compaction_delta`, whatever the API adds next) is kept whole as
/// [`ContentDelta::Other`], so that an assembler can merge it into its block instead of
/// dropping it.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentDelta {
    /// More text of a text block.
    TextDelta {
        /// The text to append.
        text: String,
    },
    /// More of a tool call's input, as raw JSON text.
    InputJsonDelta {
        /// The JSON fragment to append; it parses only once the block stops.
        partial_json: String,
    },
    /// More text of a thinking block.
    ThinkingDelta {
        /// The thinking text to append.
        thinking: String,
    },
    /// The signature of a thinking block, sent before it stops.
    SignatureDelta {
        /// The signature to set.
        signature: String,
    },
    /// One citation to append to a text block's `citations`.
    CitationsDelta {
        /// The citation object, as the API sent it.
        citation: Value,
    },
    /// A delta of another type, kept as the JSON object it arrived as (`type` included).
    Other(Value),
}

/// The wire shape of the typed deltas; [`ContentDelta`] maps to and from it.
// The variants are named as the API names the types.
#[allow(clippy::enum_variant_names)]
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    SignatureDelta {
        #[serde(default)]
        signature: String,
    },
    CitationsDelta {
        citation: Value,
    },
}

/// [`WireDelta`] borrowed, for serialising without copying.
#[allow(clippy::enum_variant_names)]
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDeltaRef<'a> {
    TextDelta { text: &'a str },
    InputJsonDelta { partial_json: &'a str },
    ThinkingDelta { thinking: &'a str },
    SignatureDelta { signature: &'a str },
    CitationsDelta { citation: &'a Value },
}

const TYPED_DELTAS: [&str; 5] = [
    "text_delta",
    "input_json_delta",
    "thinking_delta",
    "signature_delta",
    "citations_delta",
];

impl ContentDelta {
    /// The delta's `type` as the API names it.
    #[must_use]
    pub fn kind(&self) -> &str {
        match self {
            Self::TextDelta { .. } => "text_delta",
            Self::InputJsonDelta { .. } => "input_json_delta",
            Self::ThinkingDelta { .. } => "thinking_delta",
            Self::SignatureDelta { .. } => "signature_delta",
            Self::CitationsDelta { .. } => "citations_delta",
            Self::Other(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }
}

impl Serialize for ContentDelta {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            Self::TextDelta { text } => WireDeltaRef::TextDelta { text },
            Self::InputJsonDelta { partial_json } => WireDeltaRef::InputJsonDelta { partial_json },
            Self::ThinkingDelta { thinking } => WireDeltaRef::ThinkingDelta { thinking },
            Self::SignatureDelta { signature } => WireDeltaRef::SignatureDelta { signature },
            Self::CitationsDelta { citation } => WireDeltaRef::CitationsDelta { citation },
            Self::Other(v) => return v.serialize(serializer),
        };
        wire.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ContentDelta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| D::Error::custom("content block delta without a string `type`"))?;
        if !TYPED_DELTAS.contains(&kind) {
            return Ok(Self::Other(value));
        }
        Ok(
            match WireDelta::deserialize(value).map_err(D::Error::custom)? {
                WireDelta::TextDelta { text } => Self::TextDelta { text },
                WireDelta::InputJsonDelta { partial_json } => Self::InputJsonDelta { partial_json },
                WireDelta::ThinkingDelta { thinking } => Self::ThinkingDelta { thinking },
                WireDelta::SignatureDelta { signature } => Self::SignatureDelta { signature },
                WireDelta::CitationsDelta { citation } => Self::CitationsDelta { citation },
            },
        )
    }
}

/// The `delta` of a `message_delta` event.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MessageDeltaBody {
    /// Why the message ended (sent once, near the end of the stream).
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended the message, if one did.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// Fields gyre does not read (a refusal's `stop_details`, the code-execution
    /// `container`, whatever the API adds next), kept as they were sent.
    #[serde(flatten)]
    pub extra: ExtraFields,
}

/// The `error` object of an error body or an in-stream `error` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// `invalid_request_error`, `authentication_error`, `overloaded_error`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The human-readable explanation.
    #[serde(default)]
    pub message: String,
}

/// The JSON body of an HTTP error response: `{"type":"error","error":{…}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// What went wrong.
    pub error: ErrorDetail,
    /// The request id the API gave the failed request, for support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// One server-sent event of a streaming response, named by its `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// The first event: the message being answered, without its content.
    MessageStart {
        /// The message's id, model, role and initial usage (boxed: the other events are
        /// small, and every event of a stream is moved through the loop).
        message: Box<MessageStart>,
    },
    /// A content block begins at `index`.
    ContentBlockStart {
        /// The block's position in the message's content.
        index: usize,
        /// The block as it starts (empty text, a tool call without input, …).
        content_block: ContentBlock,
    },
    /// More of the block at `index`.
    ContentBlockDelta {
        /// The position of the block the delta extends.
        index: usize,
        /// What to add to the block.
        delta: ContentDelta,
    },
    /// The block at `index` is complete.
    ContentBlockStop {
        /// The position of the completed block.
        index: usize,
    },
    /// Message-level changes near the end: stop reason and final usage.
    MessageDelta {
        /// The stop reason and stop sequence.
        #[serde(default)]
        delta: MessageDeltaBody,
        /// The usage counters that changed; present ones replace the running values
        /// (boxed, like `message_start`'s message, to keep every event small).
        #[serde(default)]
        usage: Box<UsageDelta>,
        /// Event fields gyre does not read (`context_management`, …), kept as sent.
        #[serde(flatten)]
        extra: ExtraFields,
    },
    /// The message is complete.
    MessageStop,
    /// A keep-alive with no content.
    Ping,
    /// An error inside a 200 stream (`overloaded_error`, …).
    Error {
        /// What went wrong.
        error: ErrorDetail,
    },
    /// An event type this crate does not know; tolerated and ignored.
    #[serde(other)]
    Unknown,
}

impl StreamEvent {
    /// The event's `type` as it appears on the wire (`unknown` for unknown events).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
            Self::Ping => "ping",
            Self::Error { .. } => "error",
            Self::Unknown => "unknown",
        }
    }
}
