//! SSE parse + message assembly throughput on a 10 MB stream (MB/s).
//!
//! The stream is what a long answer looks like on the wire: a text block of many small
//! `text_delta`s and a tool_use block of `input_json_delta`s, fed in 16 KiB chunks as a
//! network would deliver it.

use std::convert::Infallible;
use std::hint::black_box;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use gyre_api::{Assembled, MessageAssembler, chunk_text, encode_sse, sse_events};
use gyre_protocol::StreamEvent;
use serde_json::json;

const TARGET_BYTES: usize = 10 * 1024 * 1024;
const CHUNK: usize = 16 * 1024;

fn ev(v: serde_json::Value) -> StreamEvent {
    serde_json::from_value(v).unwrap_or(StreamEvent::Unknown)
}

fn ten_megabytes() -> String {
    let mut out = String::with_capacity(TARGET_BYTES + 4096);
    let push = |e: StreamEvent, out: &mut String| out.push_str(&encode_sse(&e));
    push(
        ev(
            json!({"type":"message_start","message":{"id":"msg_bench","model":"claude-bench","usage":{"input_tokens":1000}}}),
        ),
        &mut out,
    );
    push(
        ev(
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        &mut out,
    );
    let piece = "The quick brown fox jumps over the lazy dog, \"quoted\" é ";
    while out.len() < TARGET_BYTES * 3 / 4 {
        push(
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":piece}}),
            ),
            &mut out,
        );
    }
    push(ev(json!({"type":"content_block_stop","index":0})), &mut out);
    push(
        ev(
            json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Write","input":{}}}),
        ),
        &mut out,
    );
    push(
        ev(
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/tmp/x\", \"content\": \""}}),
        ),
        &mut out,
    );
    while out.len() < TARGET_BYTES {
        push(
            ev(
                json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"line of file content\\n"}}),
            ),
            &mut out,
        );
    }
    push(
        ev(
            json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"}"}}),
        ),
        &mut out,
    );
    push(ev(json!({"type":"content_block_stop","index":1})), &mut out);
    push(
        ev(
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":99999}}),
        ),
        &mut out,
    );
    push(StreamEvent::MessageStop, &mut out);
    out
}

async fn parse_and_assemble(chunks: Vec<Bytes>) -> usize {
    let mut events = std::pin::pin!(sse_events(futures::stream::iter(
        chunks.into_iter().map(Ok::<_, Infallible>)
    )));
    let mut assembler = MessageAssembler::new();
    while let Some(Ok(event)) = events.next().await {
        if let Ok(Some(Assembled::Message(m))) = assembler.push(&event) {
            return m.content.len();
        }
    }
    0
}

async fn parse_only(chunks: Vec<Bytes>) -> usize {
    sse_events(futures::stream::iter(
        chunks.into_iter().map(Ok::<_, Infallible>),
    ))
    .fold(0usize, |n, _| async move { n + 1 })
    .await
}

fn bench(c: &mut Criterion) {
    let text = ten_megabytes();
    let chunks = chunk_text(&text, CHUNK);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    assert_eq!(
        rt.block_on(parse_and_assemble(chunks.clone())),
        2,
        "the bench stream must assemble"
    );

    let mut group = c.benchmark_group("sse");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("parse_and_assemble_10MB", |b| {
        b.iter(|| rt.block_on(parse_and_assemble(black_box(chunks.clone()))));
    });
    group.bench_function("parse_only_10MB", |b| {
        b.iter(|| rt.block_on(parse_only(black_box(chunks.clone()))));
    });
    // The JSON decoding share of the work: every event's data line, parsed alone.
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    group.bench_function("json_only_10MB", |b| {
        b.iter(|| {
            data.iter()
                .filter(|d| serde_json::from_str::<StreamEvent>(black_box(d)).is_ok())
                .count()
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
