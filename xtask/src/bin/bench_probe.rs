//! `xtask-bench-probe`: the parts of `cargo xtask bench` that measure gyre's libraries
//! in-process, built in release like the shipped binary. Prints one JSON object.
//!
//! - `search DIR RUNS`: Grep (files_with_matches, content) and Glob `**/*.rs` over DIR,
//!   median wall time of RUNS calls each after one warm-up call.
//! - `stream RUNS`: one streamed turn from gyre-testkit carrying five tool calls to a safe
//!   tool that sleeps 200 ms, run through the `StreamingToolExecutor` as the loop does
//!   (each call added at its `content_block_stop`); median stream time and turn time (all
//!   results in).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ClientConfig, ModelClient, ModelEvent, RetryOptions, RetryPolicy,
    stream_with_retry,
};
use gyre_protocol::{ContentBlock, Message, MessagesRequest};
use gyre_testkit::{Block, Script, TestServer, Turn};
use gyre_tools::{
    AllowAll, BoxFuture, PermissionDecision, ProgressFn, StreamingToolExecutor, Tool, ToolCall,
    ToolContext, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

/// How long each fake tool call takes.
const TOOL_MS: u64 = 200;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start a tokio runtime")?;
    let out = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["search", dir, runs] => runtime.block_on(search(dir, runs.parse()?))?,
        ["stream", runs] => runtime.block_on(stream(runs.parse()?))?,
        _ => bail!("usage: xtask-bench-probe search DIR RUNS | stream RUNS"),
    };
    println!("{out}");
    Ok(())
}

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

async fn search(dir: &str, runs: usize) -> Result<Value> {
    let ctx = ToolContext::new(dir);
    let cases: [(&str, &dyn Tool, Value); 3] = [
        (
            "grep_files",
            &gyre_tools::grep::GrepTool,
            json!({"pattern": "needle_[0-9]+"}),
        ),
        (
            "grep_content",
            &gyre_tools::grep::GrepTool,
            json!({"pattern": "needle_[0-9]+", "output_mode": "content", "head_limit": 0}),
        ),
        (
            "glob",
            &gyre_tools::glob::GlobTool,
            json!({"pattern": "**/*.rs"}),
        ),
    ];
    let mut out = serde_json::Map::new();
    for (name, tool, input) in cases {
        let mut samples = Vec::with_capacity(runs);
        let mut lines = 0;
        for i in 0..=runs {
            let started = Instant::now();
            let result = tool.call(input.clone(), &ctx, &|_| {}).await;
            let took = started.elapsed();
            if result.is_error {
                bail!("{name} failed: {}", result.content);
            }
            lines = result.content.lines().count();
            if i > 0 {
                samples.push(took);
            }
        }
        out.insert(
            name.to_owned(),
            json!({"median_ms": median_ms(samples), "lines": lines}),
        );
    }
    Ok(Value::Object(out))
}

/// A concurrency-safe tool that takes [`TOOL_MS`].
struct SlowSafeTool;

impl Tool for SlowSafeTool {
    fn name(&self) -> &'static str {
        "Sleep"
    }
    fn description(&self) -> &'static str {
        "Waits 200 ms."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn validate_input(&self, _: &Value, _: &ToolContext) -> Result<(), String> {
        Ok(())
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        true
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn check_permissions(&self, _: &Value, _: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        1000
    }
    fn call<'a>(
        &'a self,
        _: Value,
        _: &'a ToolContext,
        _: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(TOOL_MS)).await;
            ToolOutput::ok("slept")
        })
    }
}

/// Five tool calls spread through the answer, each followed by some text, so the last call
/// is complete three quarters of the way through the stream; 20 ms before each of its 49 events
/// makes a stream of about 1 s.
fn streamed_turn() -> Turn {
    let mut blocks = vec![Block::text("Checking five things at once.")];
    for i in 0..5 {
        blocks.push(Block::tool_use("Sleep", json!({"n": i})));
        blocks.push(Block::text(format!("Started check {i}.")));
    }
    blocks.push(Block::text(
        "While those run, here is what each check looks at and why it matters for the answer.",
    ));
    Turn::response(blocks)
        .with_chunk_chars(24)
        .delay_per_event(Duration::from_millis(20))
}

async fn stream(runs: usize) -> Result<Value> {
    let scratch = tempfile::tempdir()?;
    let registry = Arc::new(ToolRegistry::new().with(Arc::new(SlowSafeTool)));
    let mut stream_samples = Vec::new();
    let mut turn_samples = Vec::new();
    let mut events = 0;
    for _ in 0..runs {
        let server = TestServer::start(Script::new([streamed_turn()])).await?;
        let client: Arc<dyn ModelClient> = Arc::new(AnthropicClient::new(
            ClientConfig::new("bench").with_base_url(server.url()),
        )?);
        let executor = StreamingToolExecutor::new(
            Arc::clone(&registry),
            ToolContext::new(scratch.path()),
            Arc::new(AllowAll),
        );
        let request = MessagesRequest::new("claude-bench", 1024, vec![Message::user_text("go")]);
        let started = Instant::now();
        let mut model = stream_with_retry(
            client,
            request,
            RetryOptions::new(RetryPolicy::default()),
            tokio_util::sync::CancellationToken::new(),
        );
        let mut calls = 0;
        events = 0;
        let mut stream_end = None;
        while let Some(event) = model.next().await {
            match event? {
                ModelEvent::Stream(_) => events += 1,
                ModelEvent::BlockComplete {
                    block:
                        ContentBlock::ToolUse {
                            id, name, input, ..
                        },
                    ..
                } => {
                    calls += 1;
                    executor.add_tool(ToolCall::new(id, name, input));
                }
                ModelEvent::Message(_) => stream_end = Some(started.elapsed()),
                ModelEvent::BlockComplete { .. } | ModelEvent::Retry(_) => {}
            }
        }
        let results: Vec<_> = executor.get_remaining_results().collect().await;
        let turn = started.elapsed();
        if calls != 5 || results.len() != 5 || results.iter().any(|r| r.output.is_error) {
            bail!(
                "the streamed turn ran {calls} calls and got {} results",
                results.len()
            );
        }
        stream_samples.push(stream_end.context("the stream never ended")?);
        turn_samples.push(turn);
    }
    Ok(json!({
        "stream_ms": median_ms(stream_samples),
        "turn_ms": median_ms(turn_samples),
        "events": events,
        "tools": 5,
        "tool_ms": TOOL_MS,
    }))
}
