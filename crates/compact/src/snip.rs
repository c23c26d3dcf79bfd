//! Stage 2, snip: the oldest whole rounds after the first request are dropped.

use gyre_protocol::Message;

use crate::config::SnipConfig;
use crate::pairing::{protected_prefix_len, units};
use crate::stage::{Stage, StageReport, StageResult};
use crate::tokens::TokenCounter;

/// The marker left where rounds were dropped.
#[must_use]
pub fn snip_marker(count: usize) -> String {
    format!("[{count} earlier messages snipped]")
}

/// The count of a snip marker message, if `message` is one.
#[must_use]
pub fn parse_snip_marker(message: &Message) -> Option<usize> {
    if message.content.len() != 1 {
        return None;
    }
    message
        .text()
        .strip_prefix('[')?
        .strip_suffix(" earlier messages snipped]")?
        .parse()
        .ok()
}

/// Drops the oldest units (an assistant message with its tool results, or a lone
/// message) after the protected first request until at least `tokens_to_free` tokens
/// are gone, keeping the `keep_recent_rounds` most recent units. One marker
/// "[N earlier messages snipped]" (a user message) stands where they were; a later snip
/// updates it. `config.enabled` is the caller's business: this function always runs.
pub fn snip(
    messages: Vec<Message>,
    config: &SnipConfig,
    tokens_to_free: u64,
    counter: &dyn TokenCounter,
) -> StageResult {
    if tokens_to_free == 0 {
        return StageResult::unchanged(messages, Stage::Snip, "under target");
    }
    let prefix = protected_prefix_len(&messages);
    let (old_marker, keep_prefix) = match prefix
        .checked_sub(1)
        .and_then(|i| parse_snip_marker(&messages[i]).map(|n| (n, i)))
    {
        Some((n, i)) if i > 0 => (Some(n), i),
        _ => (None, prefix),
    };
    let units = units(&messages, prefix);
    let droppable = units.len().saturating_sub(config.keep_recent_rounds.max(1));
    let old_marker_tokens = if old_marker.is_some() {
        counter.count_message(&messages[keep_prefix])
    } else {
        0
    };
    // The marker costs tokens too; its count is at most the history length.
    let marker_cost = counter.count_message(&Message::user_text(snip_marker(
        old_marker.unwrap_or(0) + messages.len(),
    )));
    let need = (tokens_to_free + marker_cost).saturating_sub(old_marker_tokens);
    let mut dropped_tokens = 0u64;
    let mut drop_end = prefix;
    for unit in &units[..droppable] {
        if dropped_tokens >= need {
            break;
        }
        dropped_tokens += messages[unit.clone()]
            .iter()
            .map(|m| counter.count_message(m))
            .sum::<u64>();
        drop_end = unit.end;
    }
    let dropped_messages = drop_end - prefix;
    if dropped_messages == 0 {
        return StageResult::unchanged(messages, Stage::Snip, "nothing old enough to snip");
    }
    let total = old_marker.unwrap_or(0) + dropped_messages;
    let marker = Message::user_text(snip_marker(total));
    let new_marker_tokens = counter.count_message(&marker);
    let freed = (dropped_tokens + old_marker_tokens).saturating_sub(new_marker_tokens);
    if freed == 0 {
        return StageResult::unchanged(messages, Stage::Snip, "snipping would not save tokens");
    }
    let mut out = Vec::with_capacity(messages.len() - dropped_messages + 1);
    let mut rest = messages.into_iter();
    out.extend(rest.by_ref().take(keep_prefix));
    out.push(marker);
    out.extend(rest.skip(prefix - keep_prefix + dropped_messages));
    StageResult {
        messages: out,
        report: StageReport::changed(
            Stage::Snip,
            freed,
            format!("snipped {dropped_messages} message(s)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::check_pairing;
    use crate::tokens::BytesPerTokenCounter;
    use gyre_protocol::ContentBlock;
    use serde_json::json;

    fn history(rounds: usize) -> Vec<Message> {
        let mut h = vec![Message::user_text("first request")];
        for i in 0..rounds {
            let id = format!("t{i}");
            h.push(Message::assistant(vec![
                ContentBlock::text("looking"),
                ContentBlock::tool_use(&id, "Read", json!({"file_path": "/a"})),
            ]));
            h.push(Message::user(vec![ContentBlock::tool_result(
                &id,
                "x".repeat(400),
                false,
            )]));
        }
        h
    }

    #[test]
    fn drops_oldest_rounds_and_leaves_a_marker() {
        let h = history(10);
        let r = snip(
            h.clone(),
            &SnipConfig::default(),
            200,
            &BytesPerTokenCounter,
        );
        // Each round is 127 tokens: two rounds (4 messages) cover 200 and the marker.
        assert_eq!(r.messages[0], h[0]);
        assert_eq!(
            r.messages[1],
            Message::user_text("[4 earlier messages snipped]")
        );
        assert_eq!(r.messages[2..], h[5..]);
        assert!(r.tokens_freed() >= 200);
        check_pairing(&r.messages).unwrap();
    }

    #[test]
    fn a_second_snip_updates_the_marker() {
        let h = history(10);
        let r = snip(h, &SnipConfig::default(), 200, &BytesPerTokenCounter);
        let r = snip(
            r.messages,
            &SnipConfig::default(),
            200,
            &BytesPerTokenCounter,
        );
        assert_eq!(
            r.messages[1],
            Message::user_text("[8 earlier messages snipped]")
        );
        assert_eq!(
            r.messages
                .iter()
                .filter(|m| parse_snip_marker(m).is_some())
                .count(),
            1
        );
        check_pairing(&r.messages).unwrap();
    }

    #[test]
    fn keeps_the_most_recent_rounds() {
        let h = history(5);
        let r = snip(
            h.clone(),
            &SnipConfig::default(),
            1_000_000,
            &BytesPerTokenCounter,
        );
        // 5 units, keep 4: one round dropped.
        assert_eq!(
            r.messages[1],
            Message::user_text("[2 earlier messages snipped]")
        );
        assert_eq!(r.messages[2..], h[3..]);
        let none = snip(
            history(4),
            &SnipConfig::default(),
            1_000,
            &BytesPerTokenCounter,
        );
        assert!(!none.report.changed);
    }
}
