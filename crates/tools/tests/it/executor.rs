//! The streaming executor on tokio's paused clock, with fake tools that sleep.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use gyre_tools::{
    AllowAll, BoxFuture, ExecutorOptions, PermissionDecision, Permissions, ProgressFn,
    StreamingToolExecutor, Tool, ToolCall, ToolCallOutcome, ToolContext, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};
use tokio::time::Instant;

/// Sleeps `ms`, then answers "<name> started at <t> ms", or fails when `fail` is set.
struct Sleeper {
    name: &'static str,
    safe: bool,
    base: Instant,
    finished: Arc<AtomicUsize>,
}

impl Tool for Sleeper {
    fn name(&self) -> Cow<'static, str> {
        self.name.into()
    }
    fn description(&self) -> Cow<'static, str> {
        "sleeps".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn validate_input(&self, _: &Value, _: &ToolContext) -> Result<(), gyre_tools::ToolInputError> {
        Ok(())
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        self.safe
    }
    fn is_read_only(&self, _: &Value) -> bool {
        self.safe
    }
    fn check_permissions(&self, _: &Value, _: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        1000
    }
    fn call<'a>(
        &'a self,
        input: Value,
        _: &'a ToolContext,
        _: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let started = self.base.elapsed().as_millis();
            let ms = input["ms"].as_u64().unwrap_or(200);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            self.finished.fetch_add(1, Ordering::SeqCst);
            if input["fail"].as_bool().unwrap_or(false) {
                ToolOutput::error("Exit code 1")
            } else {
                ToolOutput::ok(format!("{} started at {started} ms", self.name))
            }
        })
    }
}

struct Fixture {
    executor: StreamingToolExecutor,
    ctx: ToolContext,
    base: Instant,
    finished: Arc<AtomicUsize>,
}

fn fixture(max_concurrency: usize) -> Fixture {
    let base = Instant::now();
    let finished = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    for (name, safe) in [("Safe", true), ("Unsafe", false), ("Bash", true)] {
        registry.register(Arc::new(Sleeper {
            name,
            safe,
            base,
            finished: finished.clone(),
        }));
    }
    let ctx = ToolContext::new("/");
    let executor = StreamingToolExecutor::with_options(
        Arc::new(registry),
        ctx.clone(),
        Arc::new(AllowAll),
        ExecutorOptions {
            max_concurrency,
            ..ExecutorOptions::default()
        },
    );
    Fixture {
        executor,
        ctx,
        base,
        finished,
    }
}

fn call(id: usize, name: &str, input: Value) -> ToolCall {
    ToolCall::new(format!("toolu_{id}"), name, input)
}

fn ids(outcomes: &[ToolCallOutcome]) -> Vec<&str> {
    outcomes.iter().map(|o| o.tool_use_id.as_str()).collect()
}

#[tokio::test(start_paused = true)]
async fn five_safe_tools_added_100ms_apart_finish_by_600ms_in_call_order() {
    let f = fixture(10);
    let mut early = Vec::new();
    for i in 0..5 {
        f.executor.add_tool(call(i, "Safe", json!({"ms": 200})));
        tokio::time::sleep(Duration::from_millis(100)).await;
        early.extend(f.executor.get_completed_results());
    }
    // At t = 500 the first three are done and were harvested while "streaming".
    assert_eq!(ids(&early), ["toolu_0", "toolu_1", "toolu_2"]);
    let rest: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(ids(&rest), ["toolu_3", "toolu_4"]);
    assert!(
        f.base.elapsed() <= Duration::from_millis(600),
        "{:?}",
        f.base.elapsed()
    );
    for (i, o) in early.iter().chain(&rest).enumerate() {
        assert_eq!(o.output.content, format!("Safe started at {} ms", i * 100));
    }
}

#[tokio::test(start_paused = true)]
async fn results_are_yielded_in_call_order_even_when_finished_out_of_order() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 300})));
    f.executor.add_tool(call(1, "Safe", json!({"ms": 100})));
    tokio::time::sleep(Duration::from_millis(150)).await;
    // The second is done but the first is not: nothing may be yielded yet.
    assert!(f.executor.get_completed_results().is_empty());
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(ids(&all), ["toolu_0", "toolu_1"]);
}

#[tokio::test(start_paused = true)]
async fn an_unsafe_tool_waits_for_running_ones_and_later_safe_tools_wait_behind_it() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 200})));
    f.executor.add_tool(call(1, "Unsafe", json!({"ms": 200})));
    f.executor.add_tool(call(2, "Safe", json!({"ms": 200})));
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    let texts: Vec<&str> = all.iter().map(|o| o.output.content.as_str()).collect();
    assert_eq!(
        texts,
        [
            "Safe started at 0 ms",
            "Unsafe started at 200 ms",
            "Safe started at 400 ms"
        ]
    );
    assert_eq!(f.base.elapsed(), Duration::from_millis(600));
}

#[tokio::test(start_paused = true)]
async fn at_most_max_concurrency_tools_run_at_once() {
    let f = fixture(2);
    for i in 0..5 {
        f.executor.add_tool(call(i, "Safe", json!({"ms": 200})));
    }
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(all.len(), 5);
    assert_eq!(f.base.elapsed(), Duration::from_millis(600));
}

#[tokio::test(start_paused = true)]
async fn a_failing_bash_call_cancels_its_running_siblings() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 200})));
    f.executor
        .add_tool(call(1, "Bash", json!({"ms": 50, "fail": true})));
    f.executor.add_tool(call(2, "Safe", json!({"ms": 200})));
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(ids(&all), ["toolu_0", "toolu_1", "toolu_2"]);
    assert_eq!(all[1].output, ToolOutput::error("Exit code 1"));
    for i in [0, 2] {
        assert_eq!(
            all[i].output,
            ToolOutput::error("cancelled: a sibling tool call failed")
        );
    }
    assert_eq!(f.base.elapsed(), Duration::from_millis(50));
    // Calls added after the failure are cancelled too.
    f.executor.add_tool(call(3, "Safe", json!({"ms": 10})));
    let late = f.executor.get_completed_results();
    assert_eq!(
        late[0].output.content,
        "cancelled: a sibling tool call failed"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        f.finished.load(Ordering::SeqCst),
        1,
        "cancelled siblings kept running"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failing_safe_tool_that_is_not_bash_cancels_nothing() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 200})));
    f.executor
        .add_tool(call(1, "Safe", json!({"ms": 50, "fail": true})));
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert!(!all[0].output.is_error);
}

#[tokio::test(start_paused = true)]
async fn abort_mid_batch_gives_every_unfinished_call_an_interrupted_result() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 50})));
    f.executor.add_tool(call(1, "Safe", json!({"ms": 500})));
    f.executor.add_tool(call(2, "Unsafe", json!({"ms": 500})));
    f.executor.add_tool(call(3, "Safe", json!({"ms": 500})));
    let cancel = f.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(ids(&all), ["toolu_0", "toolu_1", "toolu_2", "toolu_3"]);
    assert!(!all[0].output.is_error);
    for o in &all[1..] {
        assert_eq!(o.output, ToolOutput::error("Interrupted by user"));
        assert_eq!(
            o.to_block(),
            gyre_protocol::ContentBlock::tool_result(
                o.tool_use_id.clone(),
                "Interrupted by user",
                true
            )
        );
    }
    assert_eq!(f.base.elapsed(), Duration::from_millis(100));
    f.executor.add_tool(call(4, "Safe", json!({})));
    assert_eq!(
        f.executor.get_completed_results()[0].output.content,
        "Interrupted by user"
    );
}

#[tokio::test(start_paused = true)]
async fn discard_abandons_everything_and_yields_nothing_more() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 10})));
    f.executor.add_tool(call(1, "Safe", json!({"ms": 200})));
    tokio::time::sleep(Duration::from_millis(50)).await;
    f.executor.discard();
    assert!(f.executor.get_completed_results().is_empty());
    let rest: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert!(rest.is_empty());
    f.executor.add_tool(call(2, "Safe", json!({"ms": 10})));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(f.executor.get_completed_results().is_empty());
    assert_eq!(
        f.finished.load(Ordering::SeqCst),
        1,
        "a discarded call kept running"
    );
}

#[tokio::test(start_paused = true)]
async fn denied_calls_record_a_permission_denial() {
    let registry = Arc::new(ToolRegistry::with_default_tools());
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let executor = StreamingToolExecutor::new(registry, ctx, Arc::new(Permissions::default()));
    executor.add_tool(ToolCall::new(
        "toolu_b",
        "Bash",
        json!({"command": "git diff HEAD"}),
    ));
    let all: Vec<_> = executor.get_remaining_results().collect().await;
    let outcome = &all[0];
    assert!(outcome.output.is_error);
    assert!(
        outcome
            .output
            .content
            .contains("--allowedTools \"Bash(git diff:*)\""),
        "{}",
        outcome.output.content
    );
    let denial = outcome.denial.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(denial).unwrap(),
        json!({"tool_name": "Bash", "tool_use_id": "toolu_b", "tool_input": {"command": "git diff HEAD"}})
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_tools_get_an_error_result_in_order() {
    let f = fixture(10);
    f.executor.add_tool(call(0, "Safe", json!({"ms": 100})));
    f.executor.add_tool(call(1, "Nope", json!({})));
    let all: Vec<_> = f.executor.get_remaining_results().collect().await;
    assert_eq!(ids(&all), ["toolu_0", "toolu_1"]);
    assert!(
        all[1]
            .output
            .content
            .contains("No such tool available: Nope")
    );
}
