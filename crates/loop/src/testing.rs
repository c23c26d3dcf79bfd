//! Fakes for the loop's seams: a scripted model, tools, a compactor, hooks.
#![allow(
    dead_code,
    missing_docs,
    missing_debug_implementations,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::missing_panics_doc
)]

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    CompactionOutcome, ContextCompactor, Conversation, LoopEvent, ModelStream, NoCompaction,
    PreparedContext, QueryDeps, QueryParams, UsageAnchor,
};
use futures::StreamExt;
use gyre_api::{ApiError, ModelEvent, RetryStatus};
use gyre_protocol::{
    AssistantResponse, ContentBlock, Message, MessagesRequest, Role, StopReason, Usage,
};
pub use gyre_tools::AllowAll;
use gyre_tools::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One scripted model behaviour.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete response.
    Response(AssistantResponse),
    /// An error before any event.
    Error(ApiError),
    /// A retry notice, then the next reply in the same call.
    RetryThen(Box<Reply>),
    /// Streams the blocks, then waits until cancelled (abort while streaming).
    HangAfter(Vec<ContentBlock>),
    /// Only the final message, no block events (a client that does not stream).
    Plain(AssistantResponse),
    /// Streams these blocks, then the stream is cut and retried with the next reply.
    CutThen(Vec<ContentBlock>, Box<Reply>),
    /// Exactly these events (none: a stream that ends without a message).
    Events(Vec<Result<ModelEvent, ApiError>>),
}

pub fn response(content: Vec<ContentBlock>, stop: StopReason) -> Reply {
    Reply::Response(AssistantResponse {
        id: "msg_fake".into(),
        model: "fake-model".into(),
        role: Role::Assistant,
        content,
        stop_reason: Some(stop),
        stop_sequence: None,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 50,
            ..Usage::default()
        },
        request_id: Some("req_fake".into()),
    })
}

pub fn text(t: &str) -> Reply {
    response(vec![ContentBlock::text(t)], StopReason::EndTurn)
}

pub fn tool(id: &str, name: &str, input: Value) -> Reply {
    response(
        vec![ContentBlock::tool_use(id, name, input)],
        StopReason::ToolUse,
    )
}

pub fn max_tokens(t: &str) -> Reply {
    response(vec![ContentBlock::text(t)], StopReason::MaxTokens)
}

pub fn prompt_too_long() -> Reply {
    Reply::Error(prompt_too_long_error())
}

pub fn prompt_too_long_error() -> ApiError {
    ApiError::PromptTooLong {
        message: "prompt is too long: 210000 tokens > 200000 maximum".into(),
        hints: Default::default(),
    }
}

/// A model that replays replies in order and records every request.
#[derive(Default)]
pub struct FakeModel {
    replies: Mutex<VecDeque<Reply>>,
    pub requests: Mutex<Vec<(MessagesRequest, Option<String>)>>,
}

impl FakeModel {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Arc<Self> {
        Arc::new(Self {
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<MessagesRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }
}

fn events_for(reply: Reply, cancel: CancellationToken) -> ModelStream {
    match reply {
        Reply::Response(resp) => {
            let mut items: Vec<Result<ModelEvent, ApiError>> = resp
                .content
                .iter()
                .enumerate()
                .map(|(index, block)| {
                    Ok(ModelEvent::BlockComplete {
                        index,
                        block: block.clone(),
                    })
                })
                .collect();
            items.push(Ok(ModelEvent::Message(resp)));
            futures::stream::iter(items).boxed()
        }
        Reply::Error(e) => futures::stream::iter([Err(e)]).boxed(),
        Reply::Events(events) => futures::stream::iter(events).boxed(),
        Reply::Plain(resp) => futures::stream::iter([Ok(ModelEvent::Message(resp))]).boxed(),
        Reply::CutThen(blocks, next) => {
            let mut items: Vec<Result<ModelEvent, ApiError>> = blocks
                .into_iter()
                .enumerate()
                .map(|(index, block)| Ok(ModelEvent::BlockComplete { index, block }))
                .collect();
            items.push(Ok(ModelEvent::Retry(RetryStatus {
                attempt: 1,
                max_retries: 10,
                delay_ms: 500,
                status: None,
                error: "stream_cut".into(),
                message: "The response stream ended early".into(),
            })));
            futures::stream::iter(items)
                .chain(events_for(*next, cancel))
                .boxed()
        }
        Reply::RetryThen(next) => {
            let status = RetryStatus {
                attempt: 1,
                max_retries: 10,
                delay_ms: 500,
                status: Some(529),
                error: "overloaded".into(),
                message: "Overloaded".into(),
            };
            futures::stream::iter([Ok(ModelEvent::Retry(status))])
                .chain(events_for(*next, cancel))
                .boxed()
        }
        Reply::HangAfter(blocks) => {
            let items: Vec<Result<ModelEvent, ApiError>> = blocks
                .into_iter()
                .enumerate()
                .map(|(index, block)| Ok(ModelEvent::BlockComplete { index, block }))
                .collect();
            futures::stream::iter(items)
                .chain(futures::stream::once(async move {
                    cancel.cancelled().await;
                    Err(ApiError::Aborted)
                }))
                .boxed()
        }
    }
}

impl QueryDeps for FakeModel {
    fn call_model(
        &self,
        request: &mut Arc<MessagesRequest>,
        fallback_model: Option<String>,
        cancel: CancellationToken,
    ) -> ModelStream {
        self.requests
            .lock()
            .unwrap()
            .push((MessagesRequest::clone(request), fallback_model));
        let reply = self.replies.lock().unwrap().pop_front().unwrap_or_else(|| {
            Reply::Error(ApiError::InvalidResponse {
                message: "fake model: no more replies".into(),
            })
        });
        events_for(reply, cancel)
    }
}

/// A tool that echoes its input after an optional delay; `fail: true` makes it fail.
pub struct EchoTool {
    pub name: &'static str,
    pub safe: bool,
    pub delay: Duration,
}

impl Tool for EchoTool {
    fn name(&self) -> Cow<'static, str> {
        self.name.into()
    }
    fn description(&self) -> Cow<'static, str> {
        "Echoes its input.".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        self.safe
    }
    fn is_read_only(&self, _input: &Value) -> bool {
        self.safe
    }
    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        50_000
    }
    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(self.delay) => {}
                () = ctx.cancel.cancelled() => return ToolOutput::error("Interrupted by user"),
            }
            if input.get("fail").and_then(Value::as_bool) == Some(true) {
                ToolOutput::error("echo failed")
            } else {
                ToolOutput::ok(format!("echo: {input}"))
            }
        })
    }
}

pub fn registry() -> Arc<ToolRegistry> {
    Arc::new(
        ToolRegistry::new()
            .with(Arc::new(EchoTool {
                name: "Echo",
                safe: true,
                delay: Duration::from_millis(1),
            }))
            .with(Arc::new(EchoTool {
                name: "Slow",
                safe: false,
                delay: Duration::from_secs(30),
            })),
    )
}

/// A compactor whose answers are scripted.
#[derive(Default)]
pub struct FakeCompactor {
    pub drain_available: bool,
    pub can_compact: bool,
    pub blocking: bool,
    pub compactions: Arc<Mutex<u32>>,
    /// When set, what `prepare` answers instead of the history as it is.
    pub prepared: Option<Result<PreparedContext, crate::CompactionError>>,
}

impl ContextCompactor for FakeCompactor {
    fn prepare<'a>(
        &'a mut self,
        messages: &'a [Message],
        _anchor: Option<UsageAnchor>,
    ) -> BoxFuture<'a, Result<PreparedContext, crate::CompactionError>> {
        Box::pin(async move {
            if let Some(prepared) = &self.prepared {
                return prepared.clone();
            }
            Ok(PreparedContext {
                messages: messages.to_vec(),
                at_blocking_limit: self.blocking,
                ..PreparedContext::default()
            })
        })
    }

    fn compact_now<'a>(
        &'a mut self,
        messages: &'a [Message],
        trigger: crate::Trigger,
    ) -> BoxFuture<'a, crate::CompactNowResult> {
        Box::pin(async move {
            if !self.can_compact {
                return Ok(None);
            }
            *self.compactions.lock().unwrap() += 1;
            let summary = Message::user_text("Summary of the conversation so far.");
            let last = messages.last().cloned().into_iter();
            Ok(Some((
                std::iter::once(summary).chain(last).collect(),
                CompactionOutcome {
                    trigger,
                    pre_tokens: 190_000,
                    post_tokens: 2_000,
                },
            )))
        })
    }

    fn recover_from_overflow(&mut self) -> bool {
        std::mem::take(&mut self.drain_available)
    }
}

pub fn params(model: Arc<FakeModel>) -> QueryParams {
    params_with(model, Box::new(NoCompaction))
}

pub fn params_with(model: Arc<FakeModel>, compactor: Box<dyn ContextCompactor>) -> QueryParams {
    let cwd = std::env::temp_dir();
    QueryParams {
        conversation: Conversation::new(
            vec![Message::user_text("do the task")],
            "fake-model",
            None,
        ),
        system: Vec::new(),
        max_turns: None,
        max_output_tokens: None,
        token_budget: None,
        deps: model,
        tools: registry(),
        tool_context: ToolContext::new(cwd),
        can_use_tool: Arc::new(AllowAll),
        compactor: Arc::new(tokio::sync::Mutex::new(compactor)),
        stop_hooks: Vec::new(),
        tool_hooks: Vec::new(),
        cancel: CancellationToken::new(),
    }
}

/// Runs a query to its end and returns every event.
pub async fn collect(params: QueryParams) -> Vec<LoopEvent> {
    crate::query(params).collect().await
}

pub fn terminal(events: &[LoopEvent]) -> crate::Terminal {
    match events.last() {
        Some(LoopEvent::Terminal(t)) => t.clone(),
        other => panic!("last event is not a terminal: {other:?}"),
    }
}

/// Every request pairs each tool_use with exactly one tool_result, and has no orphans
/// (gyre-compact's invariant checker, the same one its stages are tested with).
pub fn assert_paired(requests: &[MessagesRequest]) {
    for (n, request) in requests.iter().enumerate() {
        if let Err(e) = gyre_compact::check_pairing(&request.messages) {
            panic!("request {n}: {e}");
        }
    }
}
