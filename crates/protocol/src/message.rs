//! Messages, roles, stop reasons and the assembled assistant response.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::{ContentBlock, Usage};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user: prompts and tool results.
    User,
    /// The model: text, thinking and tool calls.
    Assistant,
}

/// One message of a conversation. The API accepts `content` as a plain string; it is
/// read as one text block and always written as a list of blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks; a plain-string content is read as one text block.
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
    /// A message from `role` with `content`.
    #[must_use]
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self { role, content }
    }

    /// A user message.
    #[must_use]
    pub fn user(content: Vec<ContentBlock>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
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
    /// The model finished its answer.
    EndTurn,
    /// The model stopped to have its tool calls run.
    ToolUse,
    /// The answer hit the request's `max_tokens`.
    MaxTokens,
    /// The model wrote one of the request's stop sequences.
    StopSequence,
    /// A server tool turn paused; send the history back to let it go on.
    PauseTurn,
    /// The model declined to answer.
    Refusal,
    /// The answer filled the model's context window.
    ModelContextWindowExceeded,
    /// A stop reason this crate does not know, kept as sent.
    #[serde(untagged)]
    Other(String),
}

/// A complete assistant response, as returned without streaming or assembled from a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantResponse {
    /// The message id (`msg_…`).
    pub id: String,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// Always the assistant.
    #[serde(default = "assistant_role")]
    pub role: Role,
    /// The answer's blocks.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Why the answer ended.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended it, if one did.
    #[serde(default)]
    pub stop_sequence: Option<String>,
    /// The tokens the request used.
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
