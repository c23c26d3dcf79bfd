//! The compact boundary and summary messages, recognisable in any history.

use gyre_protocol::Message;

/// Text of a compact boundary marker starts with this; the rest is
/// ` trigger=<auto|manual|reactive> pre_tokens=<n>`. The marker is a user message kept
/// in the stored history (the loop may release everything before it) and never sent.
pub const COMPACT_BOUNDARY_PREFIX: &str = "[gyre:compact-boundary]";

/// The summary user message that follows a boundary starts with this.
pub const COMPACT_SUMMARY_PREFIX: &str = "This conversation continues an earlier one that was compacted to save context. Summary of the earlier part:\n\n";

/// A restored file message (after a compaction) starts with this.
pub const RESTORED_FILE_PREFIX: &str = "[gyre:restored-file] ";

/// What caused a compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The autocompact threshold was crossed.
    Auto,
    /// The user asked (`/compact`).
    Manual,
    /// The API answered prompt-too-long.
    Reactive,
}

impl Trigger {
    /// The name written in markers and events: `auto`, `manual` or `reactive`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Manual => "manual",
            Self::Reactive => "reactive",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(Self::Auto),
            "manual" => Some(Self::Manual),
            "reactive" => Some(Self::Reactive),
            _ => None,
        }
    }
}

/// A compaction that happened: the loop shows it and writes it to the transcript.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompactBoundary {
    /// What started the compaction.
    pub trigger: Trigger,
    /// Tokens of the context before the compaction.
    pub pre_tokens: u64,
    /// Tokens of what is sent after it.
    pub post_tokens: u64,
    /// The summary (analysis stripped).
    pub summary: String,
}

/// The boundary marker message.
#[must_use]
pub fn boundary_message(trigger: Trigger, pre_tokens: u64) -> Message {
    Message::user_text(format!(
        "{COMPACT_BOUNDARY_PREFIX} trigger={} pre_tokens={pre_tokens}",
        trigger.as_str()
    ))
}

/// Whether `message` is a compact boundary marker.
#[must_use]
pub fn is_compact_boundary(message: &Message) -> bool {
    matches!(message.content.first(), Some(gyre_protocol::ContentBlock::Text { text, .. }) if text.starts_with(COMPACT_BOUNDARY_PREFIX))
}

/// `(trigger, pre_tokens)` of a boundary marker.
#[must_use]
pub fn parse_compact_boundary(message: &Message) -> Option<(Trigger, u64)> {
    if !is_compact_boundary(message) {
        return None;
    }
    let text = message.text();
    let rest = text.strip_prefix(COMPACT_BOUNDARY_PREFIX)?.trim();
    let mut trigger = None;
    let mut pre = None;
    for part in rest.split_whitespace() {
        if let Some(v) = part.strip_prefix("trigger=") {
            trigger = Trigger::parse(v);
        } else if let Some(v) = part.strip_prefix("pre_tokens=") {
            pre = v.parse().ok();
        }
    }
    Some((trigger?, pre?))
}

/// Whether `message` is a compaction summary.
#[must_use]
pub fn is_compact_summary(message: &Message) -> bool {
    matches!(message.content.first(), Some(gyre_protocol::ContentBlock::Text { text, .. }) if text.starts_with(COMPACT_SUMMARY_PREFIX))
}

/// Index of the last boundary marker: the messages before it are summarised.
#[must_use]
pub fn last_boundary_index(messages: &[Message]) -> Option<usize> {
    messages.iter().rposition(is_compact_boundary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_round_trips() {
        let m = boundary_message(Trigger::Reactive, 123_456);
        assert_eq!(
            m.text(),
            "[gyre:compact-boundary] trigger=reactive pre_tokens=123456"
        );
        assert!(is_compact_boundary(&m));
        assert_eq!(
            parse_compact_boundary(&m),
            Some((Trigger::Reactive, 123_456))
        );
        assert!(!is_compact_boundary(&Message::user_text("hello")));
        let h = vec![Message::user_text("a"), m, Message::user_text("b")];
        assert_eq!(last_boundary_index(&h), Some(1));
    }
}
