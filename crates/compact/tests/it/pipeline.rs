//! Behaviour of the whole pipeline through the public API.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::executor::block_on;
use futures::future::BoxFuture;
use gyre_compact::{
    BytesPerTokenCounter, CLEARED_PLACEHOLDER, COLLAPSE_PREFIX, COMPACT_SUMMARY_PREFIX,
    CompactConfig, CompactError, PERSISTED_OUTPUT_TAG, Pipeline, PrepareContext, RecentFile, Stage,
    SummarizeError, Summarizer, SummaryRequest, TokenCounter, Trigger, UsageAnchor, check_pairing,
    is_compact_boundary, parse_compact_boundary,
};
use gyre_protocol::{CacheControl, ContentBlock, Message, Usage};
use serde_json::json;

#[derive(Default)]
struct Fake {
    calls: AtomicUsize,
    fail: bool,
}

impl Summarizer for Fake {
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let n = request.messages.len();
        Box::pin(async move {
            if self.fail {
                Err(SummarizeError::new("overloaded"))
            } else {
                Ok(format!(
                    "<analysis>notes</analysis><summary>summary of {n} messages</summary>"
                ))
            }
        })
    }
}

#[derive(Default)]
struct Probe(AtomicUsize);
impl TokenCounter for Probe {
    fn count_text(&self, text: &str) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst);
        (text.len() as u64).div_ceil(4)
    }
}

/// `window` tokens of context, 1000 reserved for output.
fn config(window: u64) -> CompactConfig {
    let mut c = CompactConfig::new("test-model", 1_000);
    c.context_window = Some(window);
    c
}

fn pipeline(window: u64, summarizer: Arc<Fake>) -> Pipeline {
    Pipeline::new(config(window), summarizer, Arc::new(BytesPerTokenCounter))
}

/// A chat of `n` exchanges whose answers are `answer_bytes` long (bytes/4 tokens).
fn chat(n: usize, answer_bytes: usize) -> Vec<Message> {
    let mut h = vec![Message::user_text("the first request")];
    for i in 0..n {
        h.push(Message::assistant(vec![
            ContentBlock::thinking("think", "sig"),
            ContentBlock::text("a".repeat(answer_bytes)),
        ]));
        h.push(Message::user_text(format!("follow-up {i}")));
    }
    h
}

/// `n` Read rounds with results of `result_bytes`.
fn tool_rounds(n: usize, result_bytes: usize) -> Vec<Message> {
    let mut h = vec![Message::user_text("the first request")];
    for i in 0..n {
        let id = format!("toolu_{i}");
        h.push(Message::assistant(vec![ContentBlock::tool_use(
            &id,
            "Read",
            json!({ "file_path": format!("/src/{i}.rs") }),
        )]));
        h.push(Message::user(vec![ContentBlock::tool_result(
            &id,
            format!("line one of {i}\n{}", "r".repeat(result_bytes)),
            false,
        )]));
    }
    h
}

fn tokens(h: &[Message]) -> u64 {
    h.iter()
        .map(|m| BytesPerTokenCounter.count_message(m))
        .sum()
}

#[test]
fn a_history_in_budget_is_sent_unchanged_and_twice_the_same() {
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let h = tool_rounds(10, 1_000);
    let first = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(first.messages, h);
    assert_eq!(first.history, None);
    assert_eq!(first.boundary, None);
    assert!(first.stages.iter().all(|s| !s.changed));
    assert_eq!(
        first.stages.iter().map(|s| s.stage).collect::<Vec<_>>(),
        [
            Stage::ToolResultBudget,
            Stage::Snip,
            Stage::Microcompact,
            Stage::ContextCollapse,
            Stage::Autocompact
        ]
    );
    let second = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(second, first);
    assert!(!first.tokens.above_warning);
    assert!(first.tokens.percent_left > 90);
}

#[test]
fn recycled_messages_are_brought_up_to_date_whatever_they_hold() {
    // The loop hands back each sent request's messages; whatever they hold (a cache
    // marker, a stripped boundary, another history altogether), the next prepare
    // sends exactly the history.
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let mut h = tool_rounds(5, 500);
    let mut sent = block_on(p.prepare(&h, &PrepareContext::default()))
        .unwrap()
        .messages;
    for turn in 0..4 {
        // As the API layer marks it for caching.
        if let Some(block) = sent.last_mut().and_then(|m| m.content.last_mut()) {
            block.set_cache_control(Some(CacheControl::ephemeral()));
        }
        p.recycle(sent);
        h.extend(tool_rounds(1, 300 + turn).into_iter().skip(1));
        sent = block_on(p.prepare(&h, &PrepareContext::default()))
            .unwrap()
            .messages;
        assert_eq!(sent, h, "turn {turn}");
    }
    // After a compaction the boundary is never sent, so the recycled messages lack it.
    let mut compacted = vec![
        gyre_compact::boundary_message(Trigger::Manual, 1_000),
        Message::user_text("summary"),
    ];
    compacted.extend(tool_rounds(2, 100).into_iter().skip(1));
    p.recycle(h.clone());
    let first = block_on(p.prepare(&compacted, &PrepareContext::default())).unwrap();
    assert_eq!(first.messages, compacted[1..]);
    p.recycle(first.messages);
    compacted.push(Message::assistant(vec![ContentBlock::text("done")]));
    let next = block_on(p.prepare(&compacted, &PrepareContext::default())).unwrap();
    assert_eq!(next.messages, compacted[1..]);
    // A shorter or unrelated recycled vector is fine too.
    p.recycle(chat(40, 10));
    let again = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(again.messages, h);
}

#[test]
fn a_short_session_never_runs_the_tokenizer() {
    let probe = Arc::new(Probe::default());
    let mut p = Pipeline::new(
        CompactConfig::new("claude-sonnet-4-5", 32_000),
        Arc::new(Fake::default()),
        probe.clone(),
    );
    let h = chat(5, 2_000);
    let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(out.messages, h);
    assert!(!out.tokens.exact);
    assert_eq!(probe.0.load(Ordering::SeqCst), 0);
}

#[test]
fn the_count_is_anchored_on_the_last_usage() {
    let p = pipeline(200_000, Arc::new(Fake::default()));
    let h = chat(3, 400);
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 20,
        cache_read_input_tokens: 150_000,
        cache_creation_input_tokens: 30,
        ..Usage::default()
    };
    let ctx = PrepareContext {
        usage_anchor: Some(UsageAnchor {
            message_index: 5,
            usage,
        }),
        ..PrepareContext::default()
    };
    // Far below every threshold: a rough estimate, no tokenizing.
    let state = p.token_state(&h, &ctx);
    assert!(!state.exact);
    assert!(state.tokens >= 150_060 && state.tokens < 150_060 + tokens(&h[6..]) * 2);
    // warning = 200000 − 1000 − 13000 − 20000 = 166000
    assert!(!state.above_warning);
    // Near the warning level: exact, and only the messages after the anchor counted.
    let ctx = PrepareContext {
        usage_anchor: Some(UsageAnchor {
            message_index: 5,
            usage: Usage {
                cache_read_input_tokens: 170_000,
                ..usage
            },
        }),
        ..PrepareContext::default()
    };
    let state = p.token_state(&h, &ctx);
    assert!(state.exact);
    assert_eq!(state.tokens, 170_060 + tokens(&h[6..]));
    assert!(state.above_warning && !state.above_autocompact);
}

#[test]
fn autocompact_replaces_history_with_boundary_summary_files_and_tail() {
    let fake = Arc::new(Fake::default());
    let mut p = pipeline(40_000, fake.clone()); // threshold 26000
    let h = chat(30, 4_000); // ~30000 tokens
    let ctx = PrepareContext {
        recent_files: vec![RecentFile {
            path: "/src/parser.rs".into(),
            content: "fn parse() {}".into(),
        }],
        ..PrepareContext::default()
    };
    let out = block_on(p.prepare(&h, &ctx)).unwrap();
    let boundary = out.boundary.clone().expect("compacted");
    assert_eq!(boundary.trigger, Trigger::Auto);
    assert_eq!(boundary.pre_tokens, tokens(&h));
    assert!(boundary.summary.starts_with("summary of"));
    let history = out.history.clone().expect("history replaced");
    assert!(is_compact_boundary(&history[0]));
    assert_eq!(
        parse_compact_boundary(&history[0]),
        Some((Trigger::Auto, boundary.pre_tokens))
    );
    assert_eq!(
        history[1].text(),
        format!("{COMPACT_SUMMARY_PREFIX}{}", boundary.summary)
    );
    assert!(history[2].text().contains("/src/parser.rs"));
    // The tail is the end of the original history, whole.
    let tail = &history[3..];
    assert!(!tail.is_empty());
    assert_eq!(tail, &h[h.len() - tail.len()..]);
    // What is sent: everything but the marker.
    assert_eq!(out.messages, history[1..]);
    assert_eq!(out.tokens.tokens, boundary.post_tokens);
    assert_eq!(boundary.post_tokens, tokens(&out.messages));
    assert!(!out.tokens.above_autocompact);
    check_pairing(&out.messages).unwrap();
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);

    // The loop swaps its history; the next turn works after the boundary only.
    let mut next = history;
    next.push(Message::assistant(vec![ContentBlock::text("ok")]));
    next.push(Message::user_text("continue"));
    let again = block_on(p.prepare(&next, &PrepareContext::default())).unwrap();
    assert_eq!(again.messages, next[1..]);
    assert_eq!(again.history, None);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn circuit_breaker_opens_after_three_failures_and_stays_open() {
    let fake = Arc::new(Fake {
        fail: true,
        ..Fake::default()
    });
    let mut p = pipeline(40_000, fake.clone());
    let h = chat(30, 4_000);
    for i in 1..=3 {
        let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
        assert_eq!(out.boundary, None);
        assert_eq!(out.messages, h, "a failure sends the history as it is");
        let report = out.stages.last().unwrap();
        assert_eq!(report.detail, "failed: summarizer failed: overloaded");
        assert_eq!(p.autocompact_failures(), i);
    }
    assert!(p.breaker_open());
    for _ in 0..3 {
        let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
        assert_eq!(
            out.stages.last().unwrap().detail,
            "circuit breaker open after 3 consecutive failures"
        );
    }
    assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    // /compact is not stopped by the breaker.
    let manual = block_on(p.compact_now(&h, &PrepareContext::default(), Trigger::Manual));
    assert!(matches!(manual, Err(CompactError::Summarizer(_))));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 4);
}

#[test]
fn reactive_compaction_runs_once_per_turn() {
    let fake = Arc::new(Fake::default());
    let mut p = pipeline(200_000, fake.clone());
    let h = chat(30, 4_000);
    let ctx = PrepareContext::default();
    let first = block_on(p.compact_now(&h, &ctx, Trigger::Reactive)).unwrap();
    assert_eq!(first.boundary.unwrap().trigger, Trigger::Reactive);
    let second = block_on(p.compact_now(&h, &ctx, Trigger::Reactive));
    assert_eq!(second, Err(CompactError::ReactiveAlreadyAttempted));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    p.reset_turn();
    assert!(block_on(p.compact_now(&h, &ctx, Trigger::Reactive)).is_ok());
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn manual_compaction_of_a_lone_request_is_nothing_to_compact() {
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let h = vec![Message::user_text("hi")];
    let r = block_on(p.compact_now(&h, &PrepareContext::default(), Trigger::Manual));
    assert_eq!(r, Err(CompactError::NothingToCompact));
}

#[test]
fn oversized_results_are_persisted_in_the_session_dir_and_history_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let h = tool_rounds(2, 60_000);
    let ctx = PrepareContext {
        session_dir: Some(dir.path().to_owned()),
        ..PrepareContext::default()
    };
    let out = block_on(p.prepare(&h, &ctx)).unwrap();
    let history = out.history.clone().expect("history replaced");
    assert_eq!(out.messages, history);
    for i in 0..2 {
        let path = dir.path().join(format!("tool-results/toolu_{i}.txt"));
        assert!(path.exists());
        let ContentBlock::ToolResult { content, .. } = &history[2 + 2 * i].content[0] else {
            panic!("not a result")
        };
        assert!(content.text().starts_with(PERSISTED_OUTPUT_TAG));
    }
    assert!(out.stages[0].tokens_freed > 25_000);
    // Idempotent on the new history.
    let again = block_on(p.prepare(&history, &ctx)).unwrap();
    assert_eq!(again.history, None);
    assert_eq!(again.messages, history);
}

#[test]
fn microcompact_runs_after_an_hour_idle() {
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let h = tool_rounds(8, 1_000);
    let ctx = PrepareContext {
        idle: Some(Duration::from_secs(3_600)),
        ..PrepareContext::default()
    };
    let out = block_on(p.prepare(&h, &ctx)).unwrap();
    let history = out.history.expect("cleared results are stored");
    let cleared = history
        .iter()
        .flat_map(|m| &m.content)
        .filter(|b| matches!(b, ContentBlock::ToolResult { content, .. } if content.text() == CLEARED_PLACEHOLDER))
        .count();
    assert_eq!(cleared, 3);
}

#[test]
fn collapse_projects_digests_while_the_history_is_kept() {
    let mut p = pipeline(40_000, Arc::new(Fake::default()));
    p.config_mut().microcompact.enabled = false;
    p.config_mut().autocompact.enabled = false;
    // effective 39000, stage at 35100, blocking 36000: ~35500 tokens.
    let h = tool_rounds(30, 4_600);
    let t = tokens(&h);
    assert!((35_100..36_000).contains(&t), "{t}");
    let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(out.messages, h, "staged only");
    assert!(p.collapse().staged() > 0);
    assert!(p.recover_from_overflow());
    assert!(!p.recover_from_overflow(), "nothing left to drain");
    let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert_eq!(out.history, None, "the stored history keeps every message");
    assert!(out.messages.len() < h.len());
    assert!(
        out.messages
            .iter()
            .any(|m| m.text().starts_with(COLLAPSE_PREFIX))
    );
    assert_eq!(out.messages[0], h[0]);
    assert_eq!(out.messages.last(), h.last());
    assert!(out.tokens.tokens < t);
    check_pairing(&out.messages).unwrap();
}

#[test]
fn snip_when_enabled_frees_tokens_before_autocompact_decides() {
    let fake = Arc::new(Fake::default());
    let mut p = pipeline(40_000, fake.clone());
    p.config_mut().snip.enabled = true;
    let h = chat(30, 4_000);
    let out = block_on(p.prepare(&h, &PrepareContext::default())).unwrap();
    assert!(out.stages[1].changed);
    assert_eq!(out.boundary, None, "snip brought it under the threshold");
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
    let history = out.history.unwrap();
    assert_eq!(history[0], h[0]);
    assert!(history[1].text().ends_with("earlier messages snipped]"));
    assert_eq!(out.tokens.tokens, tokens(&history));
}

#[test]
fn prepare_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let mut p = pipeline(200_000, Arc::new(Fake::default()));
    let h = chat(1, 10);
    let ctx = PrepareContext::default();
    let fut = p.prepare(&h, &ctx);
    assert_send(&fut);
    drop(fut);
    let fut = p.compact_now(&h, &ctx, Trigger::Manual);
    assert_send(&fut);
}
