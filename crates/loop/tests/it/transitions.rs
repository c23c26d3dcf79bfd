//! Every transition and every terminal of the loop, driven through fakes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use gyre_api::ApiError;
use gyre_loop::testing::*;
use gyre_loop::{
    Conversation, LoopEvent, MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE, StopHook, StopHookOutcome,
    TerminalReason, ToolHook, Transition,
};
use gyre_protocol::{ContentBlock, Message, StopReason};
use gyre_tools::{BoxFuture, ToolCallOutcome};
use serde_json::json;

#[tokio::test]
async fn a_tool_call_then_text_goes_next_turn_then_completes() {
    let model = FakeModel::new([tool("t1", "Echo", json!({"x": 1})), text("done")]);
    let events = collect(params(Arc::clone(&model))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::NextTurn]);
    assert_eq!(t.turn_count, 2);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_paired(&requests);
    let result = &requests[1].messages[2].content[0];
    assert!(
        matches!(result, ContentBlock::ToolResult { content, is_error: false, .. } if content.text().contains("echo:"))
    );
}

#[tokio::test]
async fn max_turns_ends_with_the_documented_message() {
    let model = FakeModel::new([
        tool("a", "Echo", json!({})),
        tool("b", "Echo", json!({})),
        tool("c", "Echo", json!({})),
    ]);
    let mut p = params(Arc::clone(&model));
    p.max_turns = Some(2);
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::MaxTurns);
    assert_eq!(
        t.error.as_deref(),
        Some("Reached maximum number of turns (2)")
    );
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn max_tokens_escalates_silently_then_recovers_three_times_then_fails() {
    let model = FakeModel::new((0..5).map(|i| max_tokens(&format!("part {i}"))));
    let events = collect(params(Arc::clone(&model))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::ModelError);
    assert_eq!(
        t.transitions,
        [
            Transition::MaxOutputTokensEscalate,
            Transition::MaxOutputTokensRecovery { attempt: 1 },
            Transition::MaxOutputTokensRecovery { attempt: 2 },
            Transition::MaxOutputTokensRecovery { attempt: 3 },
        ]
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(requests[0].max_tokens, 8192);
    assert!(requests[1..].iter().all(|r| r.max_tokens == 64_000));
    // The escalation retried the same request: nothing was added.
    assert_eq!(requests[1].messages, requests[0].messages);
    let last = requests[4].messages.last().unwrap();
    assert_eq!(last.text(), MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE);
    // The first cut response was withheld, never yielded.
    let yielded: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Message { message, .. } => Some(message.text()),
            _ => None,
        })
        .collect();
    assert!(!yielded.contains(&"part 0".to_owned()));
    assert!(yielded.contains(&"part 1".to_owned()));
}

#[tokio::test]
async fn a_fixed_max_output_tokens_skips_escalation() {
    let model = FakeModel::new([max_tokens("cut"), text("resumed")]);
    let mut p = params(Arc::clone(&model));
    p.max_output_tokens = Some(4000);
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(
        t.transitions,
        [Transition::MaxOutputTokensRecovery { attempt: 1 }]
    );
    assert!(model.requests().iter().all(|r| r.max_tokens == 4000));
}

#[tokio::test]
async fn prompt_too_long_drains_collapses_first() {
    let model = FakeModel::new([prompt_too_long(), text("fits now")]);
    let compactor = FakeCompactor {
        drain_available: true,
        ..FakeCompactor::default()
    };
    let t = terminal(&collect(params_with(Arc::clone(&model), Box::new(compactor))).await);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::CollapseDrainRetry]);
}

#[tokio::test]
async fn prompt_too_long_then_reactive_compact_once() {
    let model = FakeModel::new([prompt_too_long(), text("fits now")]);
    let compactor = FakeCompactor {
        can_compact: true,
        ..FakeCompactor::default()
    };
    let count = Arc::clone(&compactor.compactions);
    let events = collect(params_with(Arc::clone(&model), Box::new(compactor))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::ReactiveCompactRetry]);
    assert_eq!(*count.lock().unwrap(), 1);
    assert!(events.iter().any(
        |e| matches!(e, LoopEvent::Compacted(o) if o.trigger == gyre_loop::Trigger::Reactive)
    ));
    let second = &model.requests()[1];
    assert_eq!(
        second.messages[0].text(),
        "Summary of the conversation so far."
    );
}

#[tokio::test]
async fn prompt_too_long_after_every_recovery_ends_the_turn() {
    let model = FakeModel::new([prompt_too_long(), prompt_too_long(), prompt_too_long()]);
    let compactor = FakeCompactor {
        drain_available: true,
        can_compact: true,
        ..FakeCompactor::default()
    };
    let events = collect(params_with(Arc::clone(&model), Box::new(compactor))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::PromptTooLong);
    assert_eq!(
        t.transitions,
        [
            Transition::CollapseDrainRetry,
            Transition::ReactiveCompactRetry
        ]
    );
    assert!(t.error.unwrap().contains("Prompt is too long"));
    // Withheld: no error text was yielded as a message.
    assert!(!events.iter().any(
        |e| matches!(e, LoopEvent::Message { message, .. } if message.text().contains("too long"))
    ));
}

#[tokio::test]
async fn blocking_limit_ends_before_any_request() {
    let model = FakeModel::new([text("never")]);
    let compactor = FakeCompactor {
        blocking: true,
        ..FakeCompactor::default()
    };
    let t = terminal(&collect(params_with(Arc::clone(&model), Box::new(compactor))).await);
    assert_eq!(t.reason, TerminalReason::BlockingLimit);
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn an_unrecoverable_api_error_is_model_error() {
    let model = FakeModel::new([Reply::Error(ApiError::Authentication {
        message: "invalid x-api-key".into(),
        service: Default::default(),
        hints: Default::default(),
    })]);
    let t = terminal(&collect(params(model)).await);
    assert_eq!(t.reason, TerminalReason::ModelError);
    assert!(t.error.unwrap().contains("ANTHROPIC_API_KEY"));
}

#[tokio::test]
async fn an_image_the_api_rejects_is_image_error() {
    let model = FakeModel::new([Reply::Error(ApiError::InvalidRequest {
        message: "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum".into(),
        hints: Default::default(),
    })]);
    let t = terminal(&collect(params(model)).await);
    assert_eq!(t.reason, TerminalReason::ImageError);
}

struct BlockOnce(Mutex<bool>);

impl StopHook for BlockOnce {
    fn on_stop<'a>(&'a self, _m: &'a [Message], active: bool) -> BoxFuture<'a, StopHookOutcome> {
        Box::pin(async move {
            let mut blocked = self.0.lock().unwrap();
            if *blocked || active {
                StopHookOutcome::Allow
            } else {
                *blocked = true;
                StopHookOutcome::Block(vec!["tests are failing: run cargo test".into()])
            }
        })
    }
}

struct Prevent;

impl StopHook for Prevent {
    fn on_stop<'a>(&'a self, _m: &'a [Message], _a: bool) -> BoxFuture<'a, StopHookOutcome> {
        Box::pin(async { StopHookOutcome::Prevent("policy says stop".into()) })
    }
}

#[tokio::test]
async fn a_blocking_stop_hook_sends_its_errors_and_continues() {
    let model = FakeModel::new([text("done?"), text("now done")]);
    let mut p = params(Arc::clone(&model));
    p.stop_hooks = vec![Arc::new(BlockOnce(Mutex::new(false)))];
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::StopHookBlocking]);
    let last = model.requests()[1].messages.last().unwrap().text();
    assert!(last.contains("tests are failing"), "{last}");
}

#[tokio::test]
async fn a_preventing_stop_hook_ends_the_query() {
    let model = FakeModel::new([text("done")]);
    let mut p = params(model);
    p.stop_hooks = vec![Arc::new(Prevent)];
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::StopHookPrevented);
    assert_eq!(t.error.as_deref(), Some("policy says stop"));
}

struct StopAfterTool;

impl ToolHook for StopAfterTool {
    fn after_tool<'a>(
        &'a self,
        _o: &'a ToolCallOutcome,
    ) -> BoxFuture<'a, gyre_loop::AfterToolOutcome> {
        Box::pin(async {
            gyre_loop::AfterToolOutcome {
                stop: Some("hook stopped the turn".into()),
                ..Default::default()
            }
        })
    }
}

#[tokio::test]
async fn a_tool_hook_can_stop_the_turn_after_tools() {
    let model = FakeModel::new([tool("t", "Echo", json!({})), text("never sent")]);
    let mut p = params(Arc::clone(&model));
    p.tool_hooks = vec![Arc::new(StopAfterTool)];
    let events = collect(p).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::HookStopped);
    assert_eq!(model.requests().len(), 1);
    // The tool result was still recorded, so the history stays paired.
    assert!(events.iter().any(
        |e| matches!(e, LoopEvent::Message { message, .. } if message.is_tool_result_message())
    ));
}

#[tokio::test]
async fn a_token_budget_nudges_until_returns_diminish() {
    let model = FakeModel::new([text("a"), text("b"), text("c"), text("d")]);
    let mut p = params(Arc::clone(&model));
    p.token_budget = Some(100_000);
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(
        t.transitions,
        [
            Transition::TokenBudgetContinuation,
            Transition::TokenBudgetContinuation
        ]
    );
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn abort_while_streaming_answers_every_tool_call_and_says_interrupted() {
    let model = FakeModel::new([Reply::HangAfter(vec![
        ContentBlock::text("Let me run it"),
        ContentBlock::tool_use("t1", "Slow", json!({})),
    ])]);
    let p = params(Arc::clone(&model));
    let cancel = p.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let events = collect(p).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::AbortedStreaming);
    let messages: Vec<&Message> = events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    let last = messages.last().unwrap();
    assert!(
        matches!(&last.content[0], ContentBlock::ToolResult { tool_use_id, is_error: true, content, .. } if tool_use_id == "t1" && content.text() == "Interrupted by user")
    );
    assert_eq!(last.text(), gyre_loop::INTERRUPT_MESSAGE);
}

#[tokio::test]
async fn abort_while_tools_run_gives_synthetic_results() {
    let model = FakeModel::new([tool("t1", "Slow", json!({}))]);
    let p = params(Arc::clone(&model));
    let cancel = p.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let events = collect(p).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::AbortedTools);
    let last = events
        .iter()
        .rev()
        .find_map(|e| match e {
            LoopEvent::Message { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(matches!(
        &last.content[0],
        ContentBlock::ToolResult { is_error: true, .. }
    ));
    assert_eq!(last.text(), gyre_loop::INTERRUPT_MESSAGE_FOR_TOOL_USE);
}

#[tokio::test]
async fn fallback_switches_the_model_strips_thinking_and_retries() {
    let model = FakeModel::new([
        Reply::Error(ApiError::FallbackTriggered {
            original: "fake-model".into(),
            fallback: "small-model".into(),
        }),
        text("from the fallback"),
    ]);
    let mut p = params(Arc::clone(&model));
    p.conversation = Conversation::new(
        vec![
            Message::user_text("first"),
            Message::assistant(vec![
                ContentBlock::thinking("hmm", "sig"),
                ContentBlock::text("answer"),
            ]),
            Message::user_text("second"),
        ],
        "fake-model",
        Some("small-model".into()),
    );
    let events = collect(p).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    assert!(
        events.iter().any(
            |e| matches!(e, LoopEvent::Fallback { fallback, .. } if fallback == "small-model")
        )
    );
    let requests = model.requests.lock().unwrap().clone();
    assert_eq!(requests[0].0.model, "fake-model");
    assert_eq!(requests[0].1.as_deref(), Some("small-model"));
    assert_eq!(requests[1].0.model, "small-model");
    assert_eq!(requests[1].1, None);
    assert!(
        requests[1].0.messages[1]
            .content
            .iter()
            .all(|b| !matches!(b, ContentBlock::Thinking { .. }))
    );
}

#[tokio::test]
async fn a_retry_mid_stream_voids_the_partial_attempt() {
    let model = FakeModel::new([Reply::RetryThen(Box::new(text("second try")))]);
    let events = collect(params(model)).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LoopEvent::Retry(s) if s.status == Some(529)))
    );
}

#[tokio::test]
async fn the_same_call_three_turns_running_gets_a_loop_warning() {
    let model = FakeModel::new([
        tool("a", "Echo", json!({"q": 1})),
        tool("b", "Echo", json!({"q": 1})),
        tool("c", "Echo", json!({"q": 1})),
        text("ok"),
    ]);
    let events = collect(params(Arc::clone(&model))).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    let requests = model.requests();
    let second = requests[2].messages.last().unwrap().content[0].clone();
    let third = requests[3].messages.last().unwrap().content[0].clone();
    let text_of = |b: &ContentBlock| match b {
        ContentBlock::ToolResult { content, .. } => content.text(),
        _ => String::new(),
    };
    assert!(!text_of(&second).contains("looping"));
    assert!(text_of(&third).contains("looping"), "{}", text_of(&third));
}

#[tokio::test]
async fn refusal_and_other_stop_reasons_complete_without_tools() {
    let model = FakeModel::new([response(
        vec![ContentBlock::text("no")],
        StopReason::Refusal,
    )]);
    assert_eq!(
        terminal(&collect(params(model)).await).reason,
        TerminalReason::Completed
    );
}

#[tokio::test]
async fn a_file_changed_on_disk_after_a_read_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.ts");
    std::fs::write(&file, "port = 80\n").unwrap();
    let model = FakeModel::new([
        tool("r", "Read", json!({"file_path": file})),
        tool("e1", "Echo", json!({})),
        tool("e2", "Echo", json!({})),
        text("done"),
    ]);
    let mut p = params(Arc::clone(&model));
    p.tools = Arc::new(
        gyre_tools::ToolRegistry::with_default_tools().with(Arc::new(EchoTool {
            name: "Echo",
            safe: true,
            delay: std::time::Duration::from_millis(1),
        })),
    );
    p.tool_context = gyre_tools::ToolContext::new(dir.path());
    let ctx_cache = Arc::clone(&p.tool_context.file_state);
    let file_for_edit = file.clone();
    // Change the file (with a later mtime) once the Read has recorded it.
    tokio::spawn(async move {
        while ctx_cache.get(&file_for_edit).is_none() {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::write(&file_for_edit, "port = 8080\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&file_for_edit)
            .unwrap()
            .set_modified(later)
            .unwrap();
    });
    let events = collect(p).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    let reminders: usize = model
        .requests()
        .last()
        .unwrap()
        .messages
        .iter()
        .map(|m| m.text().matches("was modified on disk").count())
        .sum();
    assert_eq!(reminders, 1);
}

/// A three-iteration session, "change the port in config.ts to 8080": Read, Edit, final
/// text, every event yielded in order.
#[tokio::test]
async fn the_three_iteration_example_of_the_seed_yields_every_event_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.ts");
    std::fs::write(&file, "export const port = 3000;\n").unwrap();
    let model = FakeModel::new([
        response(
            vec![
                ContentBlock::thinking("I need to read config.ts first", "sig"),
                ContentBlock::text("Let me look at config.ts"),
                ContentBlock::tool_use("toolu_read", "Read", json!({"file_path": file})),
            ],
            StopReason::ToolUse,
        ),
        response(
            vec![
                ContentBlock::text("The port is defined on line 1."),
                ContentBlock::tool_use(
                    "toolu_edit",
                    "Edit",
                    json!({"file_path": file, "old_string": "3000", "new_string": "8080"}),
                ),
            ],
            StopReason::ToolUse,
        ),
        text("Changed the port to 8080 on line 1 of config.ts."),
    ]);
    let mut p = params(Arc::clone(&model));
    p.tools = Arc::new(gyre_tools::ToolRegistry::with_default_tools());
    p.tool_context = gyre_tools::ToolContext::new(dir.path());
    p.conversation = Conversation::new(
        vec![Message::user_text("Change the port in config.ts to 8080")],
        "fake-model",
        None,
    );
    let events = collect(p).await;
    let trace: Vec<String> = events
        .iter()
        .map(|e| match e {
            LoopEvent::RequestStart { .. } => "stream_request_start".to_owned(),
            LoopEvent::Usage { .. } => "usage".to_owned(),
            LoopEvent::Message { message, .. } => {
                let kinds: Vec<&str> = message.content.iter().map(ContentBlock::kind).collect();
                format!("{:?}:{}", message.role, kinds.join("+"))
            }
            LoopEvent::Transition(t) => format!("transition:{}", t.name()),
            LoopEvent::ToolStarted { name, .. } => format!("tool_started:{name}"),
            LoopEvent::Terminal(t) => format!("terminal:{}", t.reason.name()),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        trace,
        [
            "stream_request_start",
            "tool_started:Read",
            "usage",
            "Assistant:thinking+text+tool_use",
            "User:tool_result",
            "transition:next_turn",
            "stream_request_start",
            "usage",
            // Edit is not concurrency-safe: announced once the message is complete.
            "tool_started:Edit",
            "Assistant:text+tool_use",
            "User:tool_result",
            "transition:next_turn",
            "stream_request_start",
            "usage",
            "Assistant:text",
            "terminal:completed",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "export const port = 8080;\n"
    );
    let read_result = &model.requests()[1].messages[2].content[0];
    assert!(
        matches!(read_result, ContentBlock::ToolResult { content, is_error: false, .. } if content.text().contains("1\texport const port = 3000;"))
    );
    assert_paired(&model.requests());
}

#[tokio::test]
async fn invalid_tool_json_is_answered_with_an_input_error_and_the_loop_goes_on() {
    let bad = json!({
        gyre_api::INVALID_JSON_KEY: "{\"x\": ",
        gyre_api::INVALID_JSON_ERROR_KEY: "EOF while parsing",
    });
    let model = FakeModel::new([tool("bad", "Echo", bad), text("sorry")]);
    let events = collect(params(Arc::clone(&model))).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    let answer = &model.requests()[1].messages[2].content[0];
    assert!(
        matches!(answer, ContentBlock::ToolResult { is_error: true, content, .. }
        if content.text().contains("InputValidationError") && content.text().contains("not valid JSON"))
    );
}

#[tokio::test]
async fn tools_run_even_when_the_client_streams_no_block_events() {
    let Reply::Response(resp) = tool("p1", "Echo", json!({"plain": true})) else {
        unreachable!()
    };
    let model = FakeModel::new([Reply::Plain(resp), text("done")]);
    let events = collect(params(Arc::clone(&model))).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    let answer = &model.requests()[1].messages[2].content[0];
    assert!(
        matches!(answer, ContentBlock::ToolResult { is_error: false, content, .. } if content.text().contains("plain"))
    );
}

/// Counts its calls; not concurrency-safe, like Bash or Edit.
struct Counting(Arc<std::sync::atomic::AtomicUsize>);

impl gyre_tools::Tool for Counting {
    fn name(&self) -> Cow<'static, str> {
        "Counting".into()
    }
    fn description(&self) -> Cow<'static, str> {
        "Counts.".into()
    }
    fn input_schema(&self) -> serde_json::Value {
        json!({"type": "object"})
    }
    fn validate_input(
        &self,
        _i: &serde_json::Value,
        _c: &gyre_tools::ToolContext,
    ) -> Result<(), gyre_tools::ToolInputError> {
        Ok(())
    }
    fn is_concurrency_safe(&self, _i: &serde_json::Value) -> bool {
        false
    }
    fn is_read_only(&self, _i: &serde_json::Value) -> bool {
        false
    }
    fn check_permissions(
        &self,
        _i: &serde_json::Value,
        _c: &gyre_tools::ToolContext,
    ) -> gyre_tools::PermissionDecision {
        gyre_tools::PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        1000
    }
    fn call<'a>(
        &'a self,
        _input: serde_json::Value,
        _ctx: &'a gyre_tools::ToolContext,
        _progress: &'a gyre_tools::ProgressFn,
    ) -> BoxFuture<'a, gyre_tools::ToolOutput> {
        Box::pin(async move {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            gyre_tools::ToolOutput::ok("counted")
        })
    }
}

#[tokio::test]
async fn an_unsafe_call_in_a_cut_attempt_never_runs() {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let model = FakeModel::new([Reply::CutThen(
        vec![
            ContentBlock::text("changing things"),
            ContentBlock::tool_use("c1", "Counting", json!({})),
        ],
        Box::new(text("done without tools")),
    )]);
    let mut p = params(Arc::clone(&model));
    p.tools =
        Arc::new(gyre_tools::ToolRegistry::new().with(Arc::new(Counting(Arc::clone(&count)))));
    let events = collect(p).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    assert!(events.iter().any(|e| matches!(e, LoopEvent::Tombstone)));
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn unsafe_calls_run_once_the_message_is_complete_in_call_order() {
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let model = FakeModel::new([
        response(
            vec![
                ContentBlock::tool_use("e1", "Echo", json!({"first": true})),
                ContentBlock::tool_use("c1", "Counting", json!({})),
                ContentBlock::tool_use("e2", "Echo", json!({"last": true})),
            ],
            StopReason::ToolUse,
        ),
        text("done"),
    ]);
    let mut p = params(Arc::clone(&model));
    p.tools = Arc::new(
        gyre_tools::ToolRegistry::new()
            .with(Arc::new(Counting(Arc::clone(&count))))
            .with(Arc::new(EchoTool {
                name: "Echo",
                safe: true,
                delay: std::time::Duration::from_millis(1),
            })),
    );
    let events = collect(p).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // While the answer streams, only the safe call before the unsafe one starts; the
    // rest are announced once the message is complete (after its usage arrived).
    let announced: Vec<(&str, bool)> = events
        .iter()
        .scan(false, |complete, e| {
            *complete |= matches!(e, LoopEvent::Usage { .. });
            Some(match e {
                LoopEvent::ToolStarted { id, .. } => Some((id.as_str(), *complete)),
                _ => None,
            })
        })
        .flatten()
        .collect();
    assert_eq!(
        announced,
        [("e1", false), ("c1", true), ("e2", true)],
        "only the safe call before the unsafe one starts early; every call is announced"
    );
    let ids: Vec<String> = model.requests()[1].messages[2]
        .tool_result_ids()
        .map(str::to_owned)
        .collect();
    assert_eq!(ids, ["e1", "c1", "e2"]);
}

#[tokio::test]
async fn pause_turn_sends_the_history_back_as_it_is_and_counts_a_turn() {
    let search = json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "rust async"}});
    let model = FakeModel::new([
        response(
            vec![
                ContentBlock::text("Searching."),
                ContentBlock::Unknown(search.clone()),
            ],
            StopReason::PauseTurn,
        ),
        text("Found it."),
    ]);
    let events = collect(params(Arc::clone(&model))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::PauseTurnContinue]);
    assert_eq!(t.turn_count, 2);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // The second request is the first plus the paused response, untouched (cache
    // markers aside, which move to the end of each request).
    assert_eq!(requests[1].messages.len(), 2);
    assert_eq!(
        requests[1].messages[0].text(),
        requests[0].messages[0].text()
    );
    let paused = &requests[1].messages[1];
    assert_eq!(paused.role, gyre_protocol::Role::Assistant);
    assert_eq!(paused.text(), "Searching.");
    let ContentBlock::Unknown(sent) = &paused.content[1] else {
        panic!(
            "the server tool block was reshaped: {:?}",
            paused.content[1]
        );
    };
    for key in ["type", "id", "name", "input"] {
        assert_eq!(sent[key], search[key], "{key}");
    }
}

#[tokio::test]
async fn pause_turn_counts_against_max_turns() {
    let paused = || {
        response(
            vec![ContentBlock::text("Still searching.")],
            StopReason::PauseTurn,
        )
    };
    let model = FakeModel::new([paused(), paused(), text("done")]);
    let mut p = params(Arc::clone(&model));
    p.max_turns = Some(2);
    let t = terminal(&collect(p).await);
    assert_eq!(t.reason, TerminalReason::MaxTurns);
    assert_eq!(t.transitions, [Transition::PauseTurnContinue]);
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test]
async fn a_refusal_ends_the_turn_cleanly_with_its_text_and_runs_no_tools() {
    let model = FakeModel::new([
        response(
            vec![
                ContentBlock::text("I can't help with that."),
                ContentBlock::tool_use("t1", "Slow", json!({})),
            ],
            StopReason::Refusal,
        ),
        text("never asked"),
    ]);
    let events = collect(params(Arc::clone(&model))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert!(t.transitions.is_empty());
    assert_eq!(model.requests().len(), 1);
    let messages: Vec<&Message> = events
        .iter()
        .filter_map(|e| match e {
            LoopEvent::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 1, "no tool results: {messages:?}");
    assert_eq!(messages[0].text(), "I can't help with that.");
    assert!(
        messages[0]
            .content
            .iter()
            .all(|b| b.as_tool_use().is_none())
    );
}

#[tokio::test]
async fn an_empty_refusal_says_the_model_declined() {
    let model = FakeModel::new([response(Vec::new(), StopReason::Refusal)]);
    let events = collect(params(model)).await;
    assert_eq!(terminal(&events).reason, TerminalReason::Completed);
    assert!(events.iter().any(
        |e| matches!(e, LoopEvent::Message { message, .. } if message.text() == gyre_loop::REFUSAL_MESSAGE)
    ));
}

#[tokio::test]
async fn a_context_window_exceeded_stop_is_withheld_and_compacted_like_prompt_too_long() {
    let model = FakeModel::new([
        response(
            vec![ContentBlock::text("half an ans")],
            StopReason::ModelContextWindowExceeded,
        ),
        text("fits now"),
    ]);
    let compactor = FakeCompactor {
        can_compact: true,
        ..FakeCompactor::default()
    };
    let events = collect(params_with(Arc::clone(&model), Box::new(compactor))).await;
    let t = terminal(&events);
    assert_eq!(t.reason, TerminalReason::Completed);
    assert_eq!(t.transitions, [Transition::ReactiveCompactRetry]);
    assert!(!events.iter().any(
        |e| matches!(e, LoopEvent::Message { message, .. } if message.text() == "half an ans")
    ));
    assert_eq!(
        model.requests()[1].messages[0].text(),
        "Summary of the conversation so far."
    );
}

#[tokio::test]
async fn a_context_window_exceeded_stop_without_recovery_ends_as_prompt_too_long() {
    let model = FakeModel::new([response(
        vec![ContentBlock::text("half")],
        StopReason::ModelContextWindowExceeded,
    )]);
    let t = terminal(&collect(params(Arc::clone(&model))).await);
    assert_eq!(t.reason, TerminalReason::PromptTooLong);
    assert!(
        t.error
            .as_deref()
            .unwrap()
            .contains("model_context_window_exceeded")
    );
    assert_eq!(model.requests().len(), 1);
}
