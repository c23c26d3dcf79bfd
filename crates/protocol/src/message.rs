//! Messages, roles, stop reasons and the assembled assistant response.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::{ContentBlock, Usage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

/// One message of a conversation. The API accepts `content` as a plain string; it is
/// read as one text block and always written as a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    #[serde(deserialize_with = "blocks_or_string")]
    pub content: Vec<ContentBlock>,
}

fn blocks_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ContentBlock>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Blocks(Vec<ContentBlock>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Text(t) => vec![ContentBlock::text(t)],
        Either::Blocks(b) => b,
    })
}

impl Message {
    #[must_use]
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self { role, content }
    }

    #[must_use]
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Self::new(Role::User, content)
    }

    #[must_use]
    pub fn assistant(content: Vec<ContentBlock>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A user message holding one text block.
    #[must_use]
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::user(vec![ContentBlock::text(text)])
    }

    /// The text blocks of the message, concatenated.
    #[must_use]
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// `(id, name, input)` of every `tool_use` block, in order.
    pub fn tool_uses(&self) -> impl Iterator<Item = (&str, &str, &Value)> {
        self.content.iter().filter_map(ContentBlock::as_tool_use)
    }

    /// The ids answered by the `tool_result` blocks, in order.
    pub fn tool_result_ids(&self) -> impl Iterator<Item = &str> {
        self.content.iter().filter_map(ContentBlock::tool_result_id)
    }

    /// Whether this user message carries only tool results (a tool round's answer).
    #[must_use]
    pub fn is_tool_result_message(&self) -> bool {
        self.role == Role::User
            && !self.content.is_empty()
            && self
                .content
                .iter()
                .all(|b| matches!(b, ContentBlock::ToolResult { .. }))
    }
}

/// Why the model stopped. Values the API adds later are kept as [`StopReason::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    PauseTurn,
    Refusal,
    ModelContextWindowExceeded,
    #[serde(untagged)]
    Other(String),
}

/// A complete assistant response, as returned without streaming or assembled from a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantResponse {
    pub id: String,
    #[serde(default)]
    pub model: String,
    #[serde(default = "assistant_role")]
    pub role: Role,
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    #[serde(default)]
    pub stop_sequence: Option<String>,
    #[serde(default)]
    pub usage: Usage,
}

fn assistant_role() -> Role {
    Role::Assistant
}

impl AssistantResponse {
    /// The response as a message to append to the conversation.
    #[must_use]
    pub fn to_message(&self) -> Message {
        Message::assistant(self.content.clone())
    }
}
