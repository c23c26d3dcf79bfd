//! Pipeline cost per turn and token counting throughput.
//!
//! `cargo bench -p gyre-compact --bench pipeline` (about 30 s; sample sizes are small).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::executor::block_on;
use futures::future::BoxFuture;
use gyre_compact::{
    CompactConfig, Pipeline, PrepareContext, SummarizeError, Summarizer, SummaryRequest,
    TiktokenCounter, TokenCounter, UsageAnchor,
};
use gyre_protocol::{ContentBlock, Message, Usage};
use serde_json::json;

struct Fake;
impl Summarizer for Fake {
    fn summarize<'a>(
        &'a self,
        _: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        Box::pin(async { Ok("<summary>summary</summary>".to_owned()) })
    }
}

fn code(lines: usize, seed: usize) -> String {
    (0..lines)
        .map(|i| {
            format!(
                "    let value_{i} = compute(&input[{}..], Mode::Fast)?; // step {seed}\n",
                i * 7 + seed
            )
        })
        .collect()
}

/// A session of `rounds` tool rounds, each result about `result_bytes` long; one round in
/// six is a Read (microcompact clears those), the others WebFetch (kept).
fn session(rounds: usize, result_bytes: usize) -> Vec<Message> {
    let lines = result_bytes / 60;
    let mut h = vec![Message::user_text("Refactor the tokenizer module.")];
    for i in 0..rounds {
        let id = format!("toolu_{i:04}");
        h.push(Message::assistant(vec![
            ContentBlock::text(format!("Reading part {i}.")),
            ContentBlock::tool_use(
                &id,
                if i % 6 == 0 { "Read" } else { "WebFetch" },
                json!({ "file_path": format!("/src/m{i}.rs") }),
            ),
        ]));
        h.push(Message::user(vec![ContentBlock::tool_result(
            &id,
            code(lines, i),
            false,
        )]));
    }
    h
}

fn anchored(h: &[Message], tokens_before: u64) -> PrepareContext {
    PrepareContext {
        usage_anchor: Some(UsageAnchor {
            message_index: h.len() - 2,
            usage: Usage {
                input_tokens: 100,
                cache_read_input_tokens: tokens_before,
                ..Usage::default()
            },
        }),
        ..PrepareContext::default()
    }
}

fn pipeline(model: &str) -> Pipeline {
    Pipeline::new(
        CompactConfig::new(model, 32_000),
        Arc::new(Fake),
        Arc::new(TiktokenCounter),
    )
}

fn bench(c: &mut Criterion) {
    // ~150k tokens: 60 rounds of ~6.5 KB code.
    let big = session(60, 6_500);
    let big_tokens: u64 = big.iter().map(|m| TiktokenCounter.count_message(m)).sum();
    eprintln!("150k history: {} messages, {big_tokens} tokens", big.len());

    let mut g = c.benchmark_group("prepare");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    // Cold: no anchor, empty cache: every message is tokenized once.
    g.bench_function("150k_cold_no_anchor", |b| {
        b.iter(|| {
            let mut p = pipeline("claude-sonnet-4-5");
            block_on(p.prepare(black_box(&big), &PrepareContext::default()))
        });
    });
    // Steady state: the stored history after a first prepare (old Reads cleared), the
    // usage anchoring all but the last round.
    let mut p = pipeline("claude-sonnet-4-5");
    let first = block_on(p.prepare(&big, &PrepareContext::default())).ok();
    let steady = first.and_then(|f| f.history).unwrap_or_else(|| big.clone());
    let steady_tokens: u64 = steady[..steady.len() - 2]
        .iter()
        .map(|m| TiktokenCounter.count_message(m))
        .sum();
    eprintln!("steady history: {steady_tokens} tokens before the last round");
    let ctx = anchored(&steady, steady_tokens);
    g.bench_function("150k_anchored_turn", |b| {
        b.iter(|| block_on(p.prepare(black_box(&steady), &ctx)));
    });
    // A growing session (10 KB results: 1 MB by turn 100) on a 1M-token model, so it
    // stays in budget: the per-turn overhead must not grow with the history.
    for turn in [1usize, 100] {
        let h = session(turn, 10_000);
        let tokens: u64 = h[..h.len() - 2]
            .iter()
            .map(|m| TiktokenCounter.count_message(m))
            .sum();
        let ctx = anchored(&h, tokens);
        let mut p = pipeline("claude-sonnet-4-5[1m]");
        g.bench_with_input(
            BenchmarkId::new("growing_session_turn", turn),
            &h,
            |b, h| {
                b.iter(|| block_on(p.prepare(black_box(h), &ctx)));
            },
        );
    }
    g.finish();

    let mut g = c.benchmark_group("count");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let text = code(1_700, 1); // ~100 KB
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("tiktoken_100kb", |b| {
        b.iter(|| TiktokenCounter.count_text(black_box(&text)));
    });
    g.bench_function("upper_bound_100kb", |b| {
        b.iter(|| TiktokenCounter.text_upper_bound(black_box(&text)));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
