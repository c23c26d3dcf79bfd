//! The tool pairing invariant, and the units (rounds) that stages cut along.

use std::collections::HashSet;
use std::ops::Range;

use gyre_protocol::{ContentBlock, Message, Role};

/// A violation of the pairing rule the Messages API enforces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    /// An assistant `tool_use` without its `tool_result` in the next message.
    #[error("tool_use {id} in message {index} has no tool_result in the next message")]
    MissingResult {
        /// The `tool_use` id concerned.
        id: String,
        /// The position of the message in the history.
        index: usize,
    },
    /// A `tool_result` that answers no `tool_use` of the message before.
    #[error(
        "tool_result for {id} in message {index} answers no tool_use of the previous assistant message"
    )]
    OrphanResult {
        /// The `tool_use` id concerned.
        id: String,
        /// The position of the message in the history.
        index: usize,
    },
    /// Two `tool_use` blocks with one id.
    #[error("tool_use id {id} appears again in message {index}")]
    DuplicateToolUse {
        /// The `tool_use` id concerned.
        id: String,
        /// The position of the message in the history.
        index: usize,
    },
    /// One `tool_use` answered twice.
    #[error("tool_use {id} is answered twice in message {index}")]
    DuplicateResult {
        /// The `tool_use` id concerned.
        id: String,
        /// The position of the message in the history.
        index: usize,
    },
}

/// Checks that every `tool_use` of an assistant message is answered by a `tool_result`
/// in the very next (user) message, and that every `tool_result` answers a `tool_use`
/// of the assistant message right before it, once.
///
/// # Errors
/// The first violation found, in message order.
pub fn check_pairing(messages: &[Message]) -> Result<(), PairingError> {
    let mut seen_uses: HashSet<&str> = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let expected: Vec<&str> = match index.checked_sub(1).map(|i| &messages[i]) {
            Some(prev) if prev.role == Role::Assistant => {
                prev.tool_uses().map(|(id, _, _)| id).collect()
            }
            _ => Vec::new(),
        };
        match message.role {
            Role::Assistant => {
                if let Some(id) = expected.first() {
                    return Err(PairingError::MissingResult {
                        id: (*id).to_owned(),
                        index: index - 1,
                    });
                }
                if let Some(id) = message.tool_result_ids().next() {
                    return Err(PairingError::OrphanResult {
                        id: id.to_owned(),
                        index,
                    });
                }
                for (id, _, _) in message.tool_uses() {
                    if !seen_uses.insert(id) {
                        return Err(PairingError::DuplicateToolUse {
                            id: id.to_owned(),
                            index,
                        });
                    }
                }
            }
            Role::User => {
                let mut answered: HashSet<&str> = HashSet::new();
                for id in message.tool_result_ids() {
                    if !expected.contains(&id) {
                        return Err(PairingError::OrphanResult {
                            id: id.to_owned(),
                            index,
                        });
                    }
                    if !answered.insert(id) {
                        return Err(PairingError::DuplicateResult {
                            id: id.to_owned(),
                            index,
                        });
                    }
                }
                if let Some(id) = expected.iter().find(|id| !answered.contains(*id)) {
                    return Err(PairingError::MissingResult {
                        id: (*id).to_owned(),
                        index: index - 1,
                    });
                }
            }
        }
    }
    if let Some(last) = messages.last()
        && last.role == Role::Assistant
        && let Some((id, _, _)) = last.tool_uses().next()
    {
        return Err(PairingError::MissingResult {
            id: id.to_owned(),
            index: messages.len() - 1,
        });
    }
    Ok(())
}

pub(crate) fn has_tool_result(message: &Message) -> bool {
    message
        .content
        .iter()
        .any(|b| matches!(b, ContentBlock::ToolResult { .. }))
}

/// Splits `messages[from..]` into units no stage may cut inside: an assistant message
/// with the user message carrying its tool results, or a single other message.
pub(crate) fn units(messages: &[Message], from: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut i = from;
    while i < messages.len() {
        let end = if messages[i].role == Role::Assistant
            && messages
                .get(i + 1)
                .is_some_and(|m| m.role == Role::User && has_tool_result(m))
        {
            i + 2
        } else {
            i + 1
        };
        out.push(i..end);
        i = end;
    }
    out
}

/// Length of the leading run of user messages that carry no tool results: the first
/// request (or, after a compaction, the boundary, the summary and restored files).
/// Stages never remove or rewrite it.
pub(crate) fn protected_prefix_len(messages: &[Message]) -> usize {
    messages
        .iter()
        .take_while(|m| m.role == Role::User && !has_tool_result(m))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_round(id: &str) -> [Message; 2] {
        [
            Message::assistant(vec![ContentBlock::tool_use(id, "Read", json!({}))]),
            Message::user(vec![ContentBlock::tool_result(id, "ok", false)]),
        ]
    }

    #[test]
    fn well_paired_history_passes() {
        let mut h = vec![Message::user_text("go")];
        h.extend(tool_round("a"));
        h.extend(tool_round("b"));
        h.push(Message::assistant(vec![ContentBlock::text("done")]));
        assert_eq!(check_pairing(&h), Ok(()));
    }

    #[test]
    fn missing_result_is_reported() {
        let mut h = vec![Message::user_text("go")];
        h.push(tool_round("a")[0].clone());
        h.push(Message::user_text("no result"));
        assert_eq!(
            check_pairing(&h),
            Err(PairingError::MissingResult {
                id: "a".into(),
                index: 1
            })
        );
        h.truncate(2);
        assert!(matches!(
            check_pairing(&h),
            Err(PairingError::MissingResult { .. })
        ));
    }

    #[test]
    fn orphan_result_is_reported() {
        let mut h = vec![Message::user_text("go")];
        h.push(tool_round("a")[1].clone());
        assert_eq!(
            check_pairing(&h),
            Err(PairingError::OrphanResult {
                id: "a".into(),
                index: 1
            })
        );
    }

    #[test]
    fn duplicates_are_reported() {
        let mut h = vec![Message::user_text("go")];
        h.extend(tool_round("a"));
        h.extend(tool_round("a"));
        assert!(matches!(
            check_pairing(&h),
            Err(PairingError::DuplicateToolUse { .. })
        ));
    }

    #[test]
    fn units_keep_pairs_together() {
        let mut h = vec![Message::user_text("go")];
        h.extend(tool_round("a"));
        h.push(Message::user_text("more"));
        h.extend(tool_round("b"));
        assert_eq!(units(&h, 1), vec![1..3, 3..4, 4..6]);
        assert_eq!(protected_prefix_len(&h), 1);
    }
}
