//! Stage 3, microcompact: older results of file and shell tools are cleared.

use std::collections::HashSet;

use gyre_protocol::{ContentBlock, Message, ToolResultContent};

use crate::config::MicrocompactConfig;
use crate::stage::{Stage, StageReport, StageResult};
use crate::tokens::{TokenCounter, result_tokens};

/// What a cleared result says instead of its content.
pub const CLEARED_PLACEHOLDER: &str = gyre_protocol::CLEARED_TOOL_RESULT;

/// Replaces the content of results of `config.tools` with [`CLEARED_PLACEHOLDER`],
/// except the `config.keep_recent` most recent ones. `is_error` and the pairing are
/// kept; results already cleared, or smaller than the placeholder, are left alone.
/// When to run (above the warning level, or idle) is the caller's decision, see
/// [`MicrocompactConfig::should_run`].
pub fn microcompact(
    messages: Vec<Message>,
    config: &MicrocompactConfig,
    counter: &dyn TokenCounter,
) -> StageResult {
    clear(messages, config, config.keep_recent, counter, |_, _| true)
}

/// Microcompact below the warning level, for the prompt cache's sake: the same clearing
/// with `config.batch_keep_recent`, done only as a batch that frees at least
/// `config.batch_min_ratio` times the tokens it makes the cache write again (everything
/// after the first result it clears). A cleared block changes the cached prefix from
/// there on, so one clear at a time would rewrite the recent results every turn; a
/// batch pays for its rewrite within a few turns (reads cost a tenth of a write).
/// When to try (from `config.batch_from_tokens`) is the caller's decision, see
/// [`MicrocompactConfig::should_batch`].
pub fn microcompact_batch(
    messages: Vec<Message>,
    config: &MicrocompactConfig,
    counter: &dyn TokenCounter,
) -> StageResult {
    let ratio = config.batch_min_ratio;
    clear(
        messages,
        config,
        config.batch_keep_recent,
        counter,
        |freed, rewritten| freed >= rewritten.saturating_mul(ratio),
    )
}

/// Clears all but the `keep_recent` most recent compactable results when `worth(freed,
/// rewritten)` says so; `rewritten` is what stays after the first cleared result.
fn clear(
    mut messages: Vec<Message>,
    config: &MicrocompactConfig,
    keep_recent: usize,
    counter: &dyn TokenCounter,
    worth: impl Fn(u64, u64) -> bool,
) -> StageResult {
    let compactable: Vec<&str> = messages
        .iter()
        .flat_map(Message::tool_uses)
        .filter(|(_, name, _)| config.tools.iter().any(|t| t == name))
        .map(|(id, _, _)| id)
        .collect();
    if compactable.len() <= keep_recent {
        return StageResult::unchanged(messages, Stage::Microcompact, "few tool results");
    }
    let clear: HashSet<&str> = compactable[..compactable.len() - keep_recent]
        .iter()
        .copied()
        .collect();
    let placeholder = ToolResultContent::Text(CLEARED_PLACEHOLDER.into());
    let placeholder_tokens = counter.count_text(CLEARED_PLACEHOLDER);
    // Found first, written after: writing to a message's blocks copies them when the
    // history shares them (`gyre_protocol::Blocks`), and this runs before every request
    // of a long session, in which most results were cleared turns ago.
    let mut found: Vec<(usize, usize, u64)> = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        for (b, block) in message.content.iter().enumerate() {
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            else {
                continue;
            };
            if !clear.contains(tool_use_id.as_str()) || *content == placeholder {
                continue;
            }
            let before = result_tokens(content, &|t| counter.count_text(t));
            if before > placeholder_tokens {
                found.push((m, b, before - placeholder_tokens));
            }
        }
    }
    drop(clear);
    let freed: u64 = found.iter().map(|(_, _, tokens)| tokens).sum();
    let cleared = found.len();
    if cleared == 0 {
        return StageResult::unchanged(messages, Stage::Microcompact, "nothing left to clear");
    }
    let first = found[0].0;
    let after: u64 = messages[first..]
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    if !worth(freed, after.saturating_sub(freed)) {
        return StageResult::unchanged(
            messages,
            Stage::Microcompact,
            "a clear would rewrite more of the cached prompt than it saves",
        );
    }
    for (m, b, _) in found {
        if let Some(ContentBlock::ToolResult { content, .. }) = messages[m].content.get_mut(b) {
            *content = placeholder.clone();
        }
    }
    StageResult {
        messages,
        report: StageReport::changed(
            Stage::Microcompact,
            freed,
            format!("cleared {cleared} old tool result(s)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::check_pairing;
    use crate::tokens::BytesPerTokenCounter;
    use serde_json::json;
    use std::time::Duration;

    fn history(tools: &[&str]) -> Vec<Message> {
        let mut h = vec![Message::user_text("go")];
        for (i, tool) in tools.iter().enumerate() {
            let id = format!("t{i}");
            h.push(Message::assistant(vec![ContentBlock::tool_use(
                &id,
                *tool,
                json!({}),
            )]));
            h.push(Message::user(vec![ContentBlock::tool_result(
                &id,
                format!("result {i} {}", "x".repeat(200)),
                i == 0,
            )]));
        }
        h
    }

    fn content(m: &Message) -> (String, bool) {
        match &m.content[0] {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => (content.text(), *is_error),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_batch_clears_only_when_it_frees_twice_what_it_rewrites() {
        let config = MicrocompactConfig::default();
        // One result to clear, three kept after it: the rewrite outweighs the saving.
        let few = microcompact_batch(history(&["Read"; 4]), &config, &BytesPerTokenCounter);
        assert!(!few.report.changed);
        assert_eq!(
            few.report.detail,
            "a clear would rewrite more of the cached prompt than it saves"
        );
        // Seventeen large results to clear, three kept: one batch, the three most
        // recent intact.
        let mut h = history(&["Read"; 20]);
        for m in h.iter_mut().skip(2).step_by(2) {
            let (text, _) = content(m);
            if let Some(ContentBlock::ToolResult { content, .. }) = m.content.get_mut(0) {
                *content = ToolResultContent::Text(text.repeat(10).into());
            }
        }
        let many = microcompact_batch(h.clone(), &config, &BytesPerTokenCounter);
        assert_eq!(many.report.detail, "cleared 17 old tool result(s)");
        assert_eq!(content(&many.messages[2 + 2 * 16]).0, CLEARED_PLACEHOLDER);
        assert_eq!(many.messages[2 + 2 * 17..], h[2 + 2 * 17..]);
        check_pairing(&many.messages).unwrap();
        assert!(config.should_batch(40_000) && !config.should_batch(39_999));
    }

    #[test]
    fn clears_all_but_the_five_most_recent() {
        let tools = [
            "Read", "Bash", "Grep", "Glob", "Edit", "Write", "Read", "Bash",
        ];
        let h = history(&tools);
        let r = microcompact(
            h.clone(),
            &MicrocompactConfig::default(),
            &BytesPerTokenCounter,
        );
        assert_eq!(r.report.detail, "cleared 3 old tool result(s)");
        for i in 0..3 {
            let (text, _) = content(&r.messages[2 + 2 * i]);
            assert_eq!(text, "[Old tool result content cleared]");
        }
        assert!(content(&r.messages[2]).1, "is_error is kept");
        for i in 3..8 {
            assert_eq!(r.messages[2 + 2 * i], h[2 + 2 * i]);
        }
        assert!(r.tokens_freed() > 0);
        check_pairing(&r.messages).unwrap();
        let again = microcompact(
            r.messages.clone(),
            &MicrocompactConfig::default(),
            &BytesPerTokenCounter,
        );
        assert!(!again.report.changed);
    }

    #[test]
    fn only_the_messages_it_clears_stop_sharing_their_blocks_with_the_history() {
        let tools = ["Read"; 8];
        let h = history(&tools);
        let r = microcompact(
            h.clone(),
            &MicrocompactConfig::default(),
            &BytesPerTokenCounter,
        );
        let copied: Vec<usize> = (0..h.len())
            .filter(|&i| !r.messages[i].content.shares(&h[i].content))
            .collect();
        // The results of the three oldest calls (messages 2, 4, 6), nothing else.
        assert_eq!(copied, [2, 4, 6]);
    }

    #[test]
    fn other_tools_are_never_cleared() {
        let tools = ["WebFetch", "Read", "Read", "Read", "Read", "Read", "Read"];
        let h = history(&tools);
        let r = microcompact(
            h.clone(),
            &MicrocompactConfig::default(),
            &BytesPerTokenCounter,
        );
        assert_eq!(r.messages[2], h[2], "WebFetch result kept");
        assert_eq!(content(&r.messages[4]).0, CLEARED_PLACEHOLDER);
        assert_eq!(r.report.detail, "cleared 1 old tool result(s)");
    }

    #[test]
    fn runs_above_warning_or_after_an_hour_idle() {
        let c = MicrocompactConfig::default();
        assert!(!c.should_run(10, 100, None));
        assert!(c.should_run(100, 100, None));
        assert!(!c.should_run(10, 100, Some(Duration::from_secs(59 * 60))));
        assert!(c.should_run(10, 100, Some(Duration::from_secs(60 * 60))));
    }
}
