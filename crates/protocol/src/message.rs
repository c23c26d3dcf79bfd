//! Messages, roles, stop reasons and the assembled assistant response.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
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
    pub content: Blocks,
}

/// The blocks of a [`Message`], shared by its copies.
///
/// A session sends its whole history with every request, and keeps copies of it: the
/// stored history, the last request, the encoder's record of what it encoded. Cloning a
/// message shares its blocks instead of copying them, and two copies compare equal
/// without reading them, so finding what changed since the last request costs a
/// pointer comparison per unchanged message, however long the history. Writing
/// through `&mut` (it derefs to the `Vec`) copies the blocks first when another copy
/// shares them, so a copy never sees another one change.
#[derive(Clone, Default)]
pub struct Blocks(Arc<Vec<ContentBlock>>);

impl Blocks {
    /// The blocks as a `Vec`, copied only when another message shares them.
    #[must_use]
    pub fn into_vec(self) -> Vec<ContentBlock> {
        Arc::try_unwrap(self.0).unwrap_or_else(|shared| (*shared).clone())
    }

    /// Whether `other` is a copy of these blocks (the same allocation, so equal).
    #[must_use]
    pub fn shares(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for Blocks {
    type Target = Vec<ContentBlock>;
    fn deref(&self) -> &Vec<ContentBlock> {
        &self.0
    }
}

impl DerefMut for Blocks {
    fn deref_mut(&mut self) -> &mut Vec<ContentBlock> {
        Arc::make_mut(&mut self.0)
    }
}

impl PartialEq for Blocks {
    fn eq(&self, other: &Self) -> bool {
        self.shares(other) || *self.0 == *other.0
    }
}

impl PartialEq<Vec<ContentBlock>> for Blocks {
    fn eq(&self, other: &Vec<ContentBlock>) -> bool {
        *self.0 == *other
    }
}

impl<const N: usize> PartialEq<[ContentBlock; N]> for Blocks {
    fn eq(&self, other: &[ContentBlock; N]) -> bool {
        self.0.as_slice() == other
    }
}

impl std::fmt::Debug for Blocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Vec<ContentBlock>> for Blocks {
    fn from(blocks: Vec<ContentBlock>) -> Self {
        Self(Arc::new(blocks))
    }
}

impl FromIterator<ContentBlock> for Blocks {
    fn from_iter<I: IntoIterator<Item = ContentBlock>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl IntoIterator for Blocks {
    type Item = ContentBlock;
    type IntoIter = std::vec::IntoIter<ContentBlock>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<'a> IntoIterator for &'a Blocks {
    type Item = &'a ContentBlock;
    type IntoIter = std::slice::Iter<'a, ContentBlock>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<'a> IntoIterator for &'a mut Blocks {
    type Item = &'a mut ContentBlock;
    type IntoIter = std::slice::IterMut<'a, ContentBlock>;
    fn into_iter(self) -> Self::IntoIter {
        Arc::make_mut(&mut self.0).iter_mut()
    }
}

impl Serialize for Blocks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Blocks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<ContentBlock>::deserialize(d).map(Self::from)
    }
}

fn blocks_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Blocks, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Blocks(Vec<ContentBlock>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Text(t) => vec![ContentBlock::text(t)],
        Either::Blocks(b) => b,
    }
    .into())
}

impl Message {
    /// A message from `role` with `content`.
    #[must_use]
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self {
            role,
            content: content.into(),
        }
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
    /// The API's id of the request (its `request-id` header), when it sent one; not
    /// part of the message object.
    #[serde(skip)]
    pub request_id: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_shares_its_blocks_and_a_write_to_one_copy_leaves_the_other_unchanged() {
        let original = Message::user(vec![
            ContentBlock::text("read this"),
            ContentBlock::tool_result("t1", "a long result", false),
        ]);
        let mut copy = original.clone();
        assert!(copy.content.shares(&original.content));
        assert_eq!(copy, original);

        copy.content.push(ContentBlock::text("more"));
        assert!(!copy.content.shares(&original.content));
        assert_eq!(
            original.content.len(),
            2,
            "the original kept its two blocks"
        );
        assert_ne!(copy, original);

        // Equal blocks in different allocations are still equal.
        let rebuilt = Message::user(original.content.to_vec());
        assert!(!rebuilt.content.shares(&original.content));
        assert_eq!(rebuilt, original);
        // Taking the blocks out of the only copy does not copy them.
        assert_eq!(rebuilt.content.into_vec().len(), 2);
    }

    #[test]
    fn blocks_serialise_as_the_list_they_hold() {
        let m = Message::user(vec![ContentBlock::text("hi")]);
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
        );
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
    }
}
