//! Content blocks: the parts of a message.

use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields of a known block that this crate does not model (a text block's `citations`,
/// whatever the API adds next), kept as they arrived so that the block round-trips.
pub type ExtraFields = Map<String, Value>;

/// `cache_control` marker for prompt caching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheControl {
    /// The cache kind: `"ephemeral"`, the only one the API offers.
    #[serde(rename = "type")]
    pub kind: String,
}

impl CacheControl {
    /// The only kind the API offers today: `{"type":"ephemeral"}`.
    #[must_use]
    pub fn ephemeral() -> Self {
        Self {
            kind: "ephemeral".to_owned(),
        }
    }
}

/// Where an image's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    /// The bytes inline, base64-encoded.
    Base64 {
        /// The image's MIME type (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
        media_type: String,
        /// The image file, base64-encoded.
        data: String,
    },
    /// An image the API fetches itself.
    Url {
        /// Where the API fetches the image from.
        url: String,
    },
}

/// One part of a `tool_result` whose content is a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolResultPart {
    /// A text part.
    Text {
        /// The text.
        text: String,
    },
    /// An image part (Read of a picture).
    Image {
        /// Where the image's bytes come from.
        source: ImageSource,
    },
}

/// What a tool result's content becomes when compaction clears it (gyre-compact's
/// microcompact); the prompt-cache breakpoints look for it (gyre-api).
pub const CLEARED_TOOL_RESULT: &str = "[Old tool result content cleared]";

/// The content of a `tool_result`: the API accepts a plain string or a list of parts.
///
/// The text is shared (`Arc<str>`): tool results are most of a session's history, which
/// is copied for every request; cloning one is a reference count, and comparing two
/// clones is a pointer comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    /// The whole result as one string.
    Text(Arc<str>),
    /// A list of text and image parts.
    Parts(Vec<ToolResultPart>),
}

impl PartialEq for ToolResultContent {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            // Clones of one result share their text: equal without reading it.
            (Self::Text(a), Self::Text(b)) => Arc::ptr_eq(a, b) || a == b,
            (Self::Parts(a), Self::Parts(b)) => a == b,
            (Self::Text(_), Self::Parts(_)) | (Self::Parts(_), Self::Text(_)) => false,
        }
    }
}

impl ToolResultContent {
    /// All text of the result, parts joined by newlines; images are skipped.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Text(t) => t.to_string(),
            Self::Parts(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    ToolResultPart::Text { text } => Some(text.as_str()),
                    ToolResultPart::Image { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// Length in bytes of the text parts.
    #[must_use]
    pub fn text_len(&self) -> usize {
        match self {
            Self::Text(t) => t.len(),
            Self::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ToolResultPart::Text { text } => text.len(),
                    ToolResultPart::Image { .. } => 0,
                })
                .sum(),
        }
    }
}

impl Default for ToolResultContent {
    fn default() -> Self {
        Self::Text(Arc::from(""))
    }
}

impl From<String> for ToolResultContent {
    fn from(s: String) -> Self {
        Self::Text(s.into())
    }
}

impl From<&str> for ToolResultContent {
    fn from(s: &str) -> Self {
        Self::Text(s.into())
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A content block of a message.
///
/// Unknown block types (server tools and their results, documents, compaction, whatever
/// the API adds next) are kept verbatim in [`ContentBlock::Unknown`], and fields of the
/// modelled assistant blocks this crate does not read (`citations`, …) in their `extra`,
/// so that a history round-trips unchanged.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// Text the model wrote, or the user's text.
    Text {
        /// The text itself.
        text: String,
        /// A prompt-cache breakpoint set on this block, if any.
        cache_control: Option<CacheControl>,
        /// Fields gyre does not read (`citations`, …), kept for the round trip.
        extra: ExtraFields,
    },
    /// A tool call the model made.
    ToolUse {
        /// The call's id (`toolu_…`), which its `tool_result` names.
        id: String,
        /// The name of the tool called.
        name: String,
        /// The call's arguments: a JSON object, or the invalid-JSON marker when the streamed input did not parse.
        input: Value,
        /// A prompt-cache breakpoint set on this block, if any.
        cache_control: Option<CacheControl>,
        /// Fields gyre does not read, kept for the round trip.
        extra: ExtraFields,
    },
    /// The answer to a tool call, sent in a user message.
    ToolResult {
        /// The id of the `tool_use` this answers.
        tool_use_id: String,
        /// What the tool returned.
        content: ToolResultContent,
        /// Whether the call failed (omitted from the JSON when false).
        is_error: bool,
        /// A prompt-cache breakpoint set on this block, if any.
        cache_control: Option<CacheControl>,
    },
    /// Extended thinking the model did before answering.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The signature the API checks when the block is sent back.
        signature: String,
        /// Fields gyre does not read, kept for the round trip.
        extra: ExtraFields,
    },
    /// Thinking the API returns encrypted; sent back unchanged.
    RedactedThinking {
        /// The encrypted thinking.
        data: String,
        /// Fields gyre does not read, kept for the round trip.
        extra: ExtraFields,
    },
    /// An image in a message.
    Image {
        /// Where the image's bytes come from.
        source: ImageSource,
        /// A prompt-cache breakpoint set on this block, if any.
        cache_control: Option<CacheControl>,
    },
    /// A block type this crate does not know, kept as the JSON it arrived as.
    Unknown(Value),
}

impl ContentBlock {
    /// A text block without cache marker or extra fields.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            cache_control: None,
            extra: ExtraFields::new(),
        }
    }

    /// A tool call block, as the model sends it.
    #[must_use]
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            cache_control: None,
            extra: ExtraFields::new(),
        }
    }

    /// A `tool_result` answering the call `tool_use_id`.
    #[must_use]
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<ToolResultContent>,
        is_error: bool,
    ) -> Self {
        Self::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
            cache_control: None,
        }
    }

    /// A thinking block with its signature.
    #[must_use]
    pub fn thinking(thinking: impl Into<String>, signature: impl Into<String>) -> Self {
        Self::Thinking {
            thinking: thinking.into(),
            signature: signature.into(),
            extra: ExtraFields::new(),
        }
    }

    /// A `redacted_thinking` block.
    #[must_use]
    pub fn redacted_thinking(data: impl Into<String>) -> Self {
        Self::RedactedThinking {
            data: data.into(),
            extra: ExtraFields::new(),
        }
    }

    /// The block's `type` as the API names it.
    #[must_use]
    pub fn kind(&self) -> &str {
        match self {
            Self::Text { .. } => "text",
            Self::ToolUse { .. } => "tool_use",
            Self::ToolResult { .. } => "tool_result",
            Self::Thinking { .. } => "thinking",
            Self::RedactedThinking { .. } => "redacted_thinking",
            Self::Image { .. } => "image",
            Self::Unknown(v) => v.get("type").and_then(Value::as_str).unwrap_or("unknown"),
        }
    }

    /// The block's `cache_control`, if it carries one.
    #[must_use]
    pub fn cache_control(&self) -> Option<&CacheControl> {
        match self {
            Self::Text { cache_control, .. }
            | Self::ToolUse { cache_control, .. }
            | Self::ToolResult { cache_control, .. }
            | Self::Image { cache_control, .. } => cache_control.as_ref(),
            Self::Thinking { .. } | Self::RedactedThinking { .. } | Self::Unknown(_) => None,
        }
    }

    /// Sets or clears the block's `cache_control`; blocks that cannot carry one
    /// (thinking, redacted thinking, unknown) are left unchanged and `false` is returned.
    pub fn set_cache_control(&mut self, value: Option<CacheControl>) -> bool {
        match self {
            Self::Text { cache_control, .. }
            | Self::ToolUse { cache_control, .. }
            | Self::ToolResult { cache_control, .. }
            | Self::Image { cache_control, .. } => {
                *cache_control = value;
                true
            }
            Self::Thinking { .. } | Self::RedactedThinking { .. } | Self::Unknown(_) => false,
        }
    }

    /// `(id, name, input)` when this is a `tool_use` block.
    #[must_use]
    pub fn as_tool_use(&self) -> Option<(&str, &str, &Value)> {
        match self {
            Self::ToolUse {
                id, name, input, ..
            } => Some((id, name, input)),
            _ => None,
        }
    }

    /// The id answered when this is a `tool_result` block.
    #[must_use]
    pub fn tool_result_id(&self) -> Option<&str> {
        match self {
            Self::ToolResult { tool_use_id, .. } => Some(tool_use_id),
            _ => None,
        }
    }
}

/// The wire shape of the known blocks; `ContentBlock` maps to and from it.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<CacheControl>,
        #[serde(flatten)]
        extra: ExtraFields,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default = "empty_object")]
        input: Value,
        #[serde(default)]
        cache_control: Option<CacheControl>,
        #[serde(flatten)]
        extra: ExtraFields,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: ToolResultContent,
        #[serde(default, skip_serializing_if = "is_false")]
        is_error: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
        #[serde(flatten)]
        extra: ExtraFields,
    },
    RedactedThinking {
        data: String,
        #[serde(flatten)]
        extra: ExtraFields,
    },
    Image {
        source: ImageSource,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

const KNOWN_TYPES: [&str; 6] = [
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "image",
];

/// [`Wire`] borrowed, for serialising without copying the block. The round-trip tests
/// keep the two in step.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireRef<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a CacheControl>,
        #[serde(flatten)]
        extra: &'a ExtraFields,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a CacheControl>,
        #[serde(flatten)]
        extra: &'a ExtraFields,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a ToolResultContent,
        #[serde(skip_serializing_if = "is_false")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
        #[serde(flatten)]
        extra: &'a ExtraFields,
    },
    RedactedThinking {
        data: &'a str,
        #[serde(flatten)]
        extra: &'a ExtraFields,
    },
    Image {
        source: &'a ImageSource,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<&'a CacheControl>,
    },
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let wire = match self {
            Self::Text {
                text,
                cache_control,
                extra,
            } => WireRef::Text {
                text,
                cache_control: cache_control.as_ref(),
                extra,
            },
            Self::ToolUse {
                id,
                name,
                input,
                cache_control,
                extra,
            } => WireRef::ToolUse {
                id,
                name,
                input,
                cache_control: cache_control.as_ref(),
                extra,
            },
            Self::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => WireRef::ToolResult {
                tool_use_id,
                content,
                is_error: *is_error,
                cache_control: cache_control.as_ref(),
            },
            Self::Thinking {
                thinking,
                signature,
                extra,
            } => WireRef::Thinking {
                thinking,
                signature,
                extra,
            },
            Self::RedactedThinking { data, extra } => WireRef::RedactedThinking { data, extra },
            Self::Image {
                source,
                cache_control,
            } => WireRef::Image {
                source,
                cache_control: cache_control.as_ref(),
            },
            Self::Unknown(v) => return v.serialize(serializer),
        };
        wire.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| D::Error::custom("content block without a string `type`"))?;
        if !KNOWN_TYPES.contains(&kind) {
            return Ok(Self::Unknown(value));
        }
        let wire = Wire::deserialize(value).map_err(D::Error::custom)?;
        Ok(match wire {
            Wire::Text {
                text,
                cache_control,
                extra,
            } => Self::Text {
                text,
                cache_control,
                extra,
            },
            Wire::ToolUse {
                id,
                name,
                input,
                cache_control,
                extra,
            } => Self::ToolUse {
                id,
                name,
                input,
                cache_control,
                extra,
            },
            Wire::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => Self::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            },
            Wire::Thinking {
                thinking,
                signature,
                extra,
            } => Self::Thinking {
                thinking,
                signature,
                extra,
            },
            Wire::RedactedThinking { data, extra } => Self::RedactedThinking { data, extra },
            Wire::Image {
                source,
                cache_control,
            } => Self::Image {
                source,
                cache_control,
            },
        })
    }
}
