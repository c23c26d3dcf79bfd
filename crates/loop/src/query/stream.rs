//! Phases 3 and 4: the streaming call, with tools starting as their blocks complete and
//! a fallback restarting it on the other model; then the abort check after streaming.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{ApiError, ModelEvent, add_cache_markers, invalid_tool_input};
use gyre_protocol::{AssistantResponse, ContentBlock, Message, MessagesRequest};
use gyre_tools::{StreamingToolExecutor, ToolCall, ToolCallOutcome, ToolRegistry};

use super::{INTERRUPT_MESSAGE, INTERRUPTED_TOOL_RESULT, Phase, QueryRun, Step};
use crate::event::LoopEvent;
use crate::state::TerminalReason;

/// What the streaming phase produced: the response (or the error that ended it), the
/// executor holding the calls started during the stream, and their ids.
#[derive(Debug)]
pub(super) struct Streamed {
    pub attempt: Attempt,
    pub executor: StreamingToolExecutor,
    pub started: Vec<String>,
}

/// How the last attempt ended. An interrupted attempt is a response holding the blocks
/// that completed before the interruption.
#[derive(Debug)]
pub(super) enum Attempt {
    Response(AssistantResponse),
    Failed(ApiError),
}

/// How one call to the model ended, before fallback and interruption are sorted out.
enum Ended {
    Response(AssistantResponse),
    Aborted,
    Failed(ApiError),
}

/// The progress of one attempt: its completed blocks and the calls it started.
#[derive(Debug)]
struct AttemptProgress {
    executor: StreamingToolExecutor,
    blocks: BTreeMap<usize, ContentBlock>,
    started: Vec<String>,
    /// Set at the first call that may not start before the message completes.
    held_back: bool,
}

impl AttemptProgress {
    fn new(executor: StreamingToolExecutor) -> Self {
        Self {
            executor,
            blocks: BTreeMap::new(),
            started: Vec::new(),
            held_back: false,
        }
    }

    /// Keeps a completed block and starts it when it is a call that may run while the
    /// response streams: only concurrency-safe calls do, since a cut stream voids the
    /// attempt and a call that changed something must not run for a message the model
    /// never sees. From the first unsafe call on, the rest wait for the whole message,
    /// so call order is kept. Returns the call started, if any.
    fn block_complete(
        &mut self,
        tools: &ToolRegistry,
        index: usize,
        block: ContentBlock,
    ) -> Option<ToolCall> {
        let safe = block
            .as_tool_use()
            .is_some_and(|(_, name, input)| tools.is_concurrency_safe(name, input));
        self.held_back |= block.as_tool_use().is_some() && !safe;
        let started = match block.as_tool_use() {
            Some((id, name, input)) if !self.held_back && invalid_tool_input(input).is_none() => {
                let call = ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    input: input.clone(),
                };
                self.started.push(call.id.clone());
                self.executor.add_tool(call.clone());
                Some(call)
            }
            Some(_) | None => None,
        };
        self.blocks.insert(index, block);
        started
    }

    /// Voids what the attempt streamed (a retry starts over); `true` when there was
    /// anything to void.
    fn void(&mut self, fresh: StreamingToolExecutor) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let old = std::mem::replace(self, Self::new(fresh));
        old.executor.discard();
        true
    }

    /// The blocks that completed, as a response without a stop reason.
    fn partial(mut self, model: &str) -> Streamed {
        let blocks = std::mem::take(&mut self.blocks);
        let response = AssistantResponse {
            id: String::new(),
            model: model.to_owned(),
            role: gyre_protocol::Role::Assistant,
            content: blocks.into_values().collect(),
            stop_reason: None,
            stop_sequence: None,
            usage: gyre_protocol::Usage::default(),
            request_id: None,
        };
        self.finish(Attempt::Response(response))
    }

    fn finish(self, attempt: Attempt) -> Streamed {
        Streamed {
            attempt,
            executor: self.executor,
            started: self.started,
        }
    }
}

impl QueryRun<'_> {
    pub(super) fn executor(&self) -> StreamingToolExecutor {
        StreamingToolExecutor::new(
            Arc::clone(&self.tools),
            self.tool_context.clone(),
            Arc::clone(&self.can_use_tool),
        )
    }

    /// Phase 3: streams the response; a fallback restarts it on the other model.
    pub(super) async fn stream_response(&mut self, mut request: Arc<MessagesRequest>) -> Streamed {
        let streamed = loop {
            let (ended, progress) = self.stream_attempt(&mut request).await;
            let ended = if self.cancel.is_cancelled() {
                Ended::Aborted
            } else {
                ended
            };
            match ended {
                Ended::Failed(ApiError::FallbackTriggered { original, fallback }) => {
                    self.fall_back(&mut request, progress, original, fallback)
                        .await;
                }
                // Keep what completed before the interruption.
                Ended::Aborted => break progress.partial(self.conversation().model()),
                Ended::Response(response) => break progress.finish(Attempt::Response(response)),
                Ended::Failed(error) => break progress.finish(Attempt::Failed(error)),
            }
        };
        // The attempt is over and the request ours alone again: its messages seed the
        // next prepare, which then copies only what changed instead of the history.
        if let Ok(sent) = Arc::try_unwrap(request) {
            self.compactor.lock().await.recycle(sent.messages);
        }
        streamed
    }

    /// One call to the model, its events emitted as they arrive.
    async fn stream_attempt(
        &mut self,
        request: &mut Arc<MessagesRequest>,
    ) -> (Ended, AttemptProgress) {
        let max_tokens = request.max_tokens;
        tracing::debug!(
            model = %self.conversation().model(),
            max_tokens,
            messages = request.messages.len(),
            turn = self.state.turn_count,
            "model request"
        );
        self.emit(LoopEvent::RequestStart {
            model: self.conversation().model().to_owned(),
            max_tokens,
        })
        .await;
        let mut progress = AttemptProgress::new(self.executor());
        let mut ended: Option<Ended> = None;
        let mut stream = self.deps.call_model(
            request,
            self.conversation().fallback_model().map(str::to_owned),
            self.cancel.clone(),
        );
        while let Some(item) = stream.next().await {
            match item {
                Ok(ModelEvent::Stream(event)) => self.emit(LoopEvent::Stream(event)).await,
                Ok(ModelEvent::BlockComplete { index, block }) => {
                    if let Some(call) = progress.block_complete(&self.tools, index, block) {
                        self.emit(LoopEvent::ToolStarted {
                            id: call.id,
                            name: call.name,
                            input: call.input,
                        })
                        .await;
                    }
                }
                Ok(ModelEvent::Retry(status)) => {
                    tracing::debug!(attempt = status.attempt, delay_ms = status.delay_ms, error = %status.error, "retrying the model request");
                    // Everything since the attempt began is void.
                    if progress.void(self.executor()) {
                        self.emit(LoopEvent::Tombstone).await;
                    }
                    self.emit(LoopEvent::Retry(status)).await;
                }
                Ok(ModelEvent::Message(response)) => ended = Some(Ended::Response(response)),
                Err(ApiError::Aborted) => {
                    ended = Some(Ended::Aborted);
                    break;
                }
                Err(e) => {
                    ended = Some(Ended::Failed(e));
                    break;
                }
            }
        }
        drop(stream);
        let ended = ended.unwrap_or(Ended::Failed(ApiError::StreamCut { events: 0 }));
        (ended, progress)
    }

    /// Abandons the attempt (its tools, its blocks, its thinking signatures) and
    /// switches to the fallback model for the rest of the session.
    async fn fall_back(
        &mut self,
        request: &mut Arc<MessagesRequest>,
        progress: AttemptProgress,
        original: String,
        fallback: String,
    ) {
        progress.executor.discard();
        if !progress.blocks.is_empty() {
            self.emit(LoopEvent::Tombstone).await;
        }
        strip_thinking(self.conversation_mut().messages_mut());
        let retry = Arc::make_mut(request);
        strip_thinking(&mut retry.messages);
        retry.model.clone_from(&fallback);
        add_cache_markers(retry);
        self.emit(LoopEvent::Fallback {
            original,
            fallback: fallback.clone(),
        })
        .await;
        self.conversation_mut().fall_back_to(fallback);
    }

    /// Phase 4: when the user interrupted, what completed joins the history, every call
    /// of it gets a result, and the query ends.
    pub(super) async fn abort_after_streaming(&mut self, streamed: Streamed) -> Phase<Streamed> {
        if !self.cancel.is_cancelled() {
            return ControlFlow::Continue(streamed);
        }
        let Streamed {
            attempt, executor, ..
        } = streamed;
        let mut results: Vec<ContentBlock> = Vec::new();
        match attempt {
            Attempt::Response(partial) if !partial.content.is_empty() => {
                let calls = tool_calls_of(&partial);
                self.push_message(partial.to_message(), false).await;
                let outcomes: Vec<ToolCallOutcome> =
                    executor.get_remaining_results().collect().await;
                results.extend(calls.iter().map(|call| result_for(call, &outcomes)));
            }
            Attempt::Response(_) | Attempt::Failed(_) => executor.discard(),
        }
        results.push(ContentBlock::text(INTERRUPT_MESSAGE));
        self.push_message(Message::user(results), true).await;
        ControlFlow::Break(Step::interrupted(TerminalReason::AbortedStreaming))
    }

    /// The response is in: its usage is reported and counted against the token budget.
    pub(super) async fn account(&mut self, response: &AssistantResponse) {
        let model = if response.model.is_empty() {
            self.conversation().model().to_owned()
        } else {
            response.model.clone()
        };
        self.emit(LoopEvent::Usage {
            id: response.id.clone(),
            request_id: response.request_id.clone(),
            model,
            stop_reason: response.stop_reason.clone(),
            usage: response.usage,
        })
        .await;
        self.budget_output_tokens += response.usage.output_tokens;
    }
}

/// Removes thinking blocks: their signatures are bound to the model that wrote them
/// and another model rejects them (as Claude Code's `stripSignatureBlocks`).
fn strip_thinking(messages: &mut [Message]) {
    let thinking = |b: &ContentBlock| {
        matches!(
            b,
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
        )
    };
    // Only messages with thinking are written to (a write copies shared blocks).
    for m in messages
        .iter_mut()
        .filter(|m| m.content.iter().any(thinking))
    {
        m.content.retain(|b| !thinking(b));
        if m.content.is_empty() {
            m.content.push(ContentBlock::text("(thinking omitted)"));
        }
    }
}

/// The tool calls of a response, in order.
pub(super) fn tool_calls_of(response: &AssistantResponse) -> Vec<ToolCall> {
    response
        .content
        .iter()
        .filter_map(ContentBlock::as_tool_use)
        .map(|(id, name, input)| ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        })
        .collect()
}

/// The result block answering `call`: its outcome, or "Interrupted by user" when the
/// call never finished (abort, discard).
pub(super) fn result_for(call: &ToolCall, outcomes: &[ToolCallOutcome]) -> ContentBlock {
    outcomes
        .iter()
        .find(|o| o.tool_use_id == call.id)
        .map_or_else(
            || ContentBlock::tool_result(call.id.clone(), INTERRUPTED_TOOL_RESULT, true),
            ToolCallOutcome::to_block,
        )
}

#[cfg(test)]
mod tests {
    use gyre_protocol::StopReason;
    use serde_json::json;

    use super::super::emit::run_phase;
    use super::*;
    use crate::conversation::Conversation;
    use crate::testing::{FakeModel, Reply, params, response, text, tool};

    fn progress() -> (AttemptProgress, Arc<ToolRegistry>) {
        let p = params(FakeModel::new([]));
        let run = QueryRun::new(p);
        (AttemptProgress::new(run.executor()), Arc::clone(&run.tools))
    }

    #[tokio::test]
    async fn safe_calls_start_while_streaming_until_the_first_unsafe_one() {
        let (mut progress, tools) = progress();
        let first =
            progress.block_complete(&tools, 0, ContentBlock::tool_use("a", "Echo", json!({})));
        let unsafe_call =
            progress.block_complete(&tools, 1, ContentBlock::tool_use("b", "Slow", json!({})));
        let after =
            progress.block_complete(&tools, 2, ContentBlock::tool_use("c", "Echo", json!({})));
        assert_eq!(first.map(|c| c.id).as_deref(), Some("a"));
        assert!(unsafe_call.is_none());
        assert!(after.is_none(), "a safe call after an unsafe one waits");
        assert_eq!(progress.started, ["a"]);
        assert_eq!(progress.blocks.len(), 3);
        progress.executor.discard();
    }

    #[tokio::test]
    async fn a_call_with_invalid_json_never_starts() {
        let (mut progress, tools) = progress();
        let bad = json!({ gyre_api::INVALID_JSON_KEY: "{\"x\": ", gyre_api::INVALID_JSON_ERROR_KEY: "EOF" });
        assert!(
            progress
                .block_complete(&tools, 0, ContentBlock::tool_use("a", "Echo", bad))
                .is_none()
        );
        assert!(progress.started.is_empty());
    }

    #[tokio::test]
    async fn a_retry_after_blocks_voids_them_and_says_so() {
        let p = params(FakeModel::new([Reply::CutThen(
            vec![ContentBlock::text("half")],
            Box::new(text("whole")),
        )]));
        let mut run = QueryRun::new(p);
        let request = run.request(run.conversation().messages().to_vec());
        let emitter = run.events.clone();
        let (events, streamed) = run_phase(&emitter, run.stream_response(request)).await;
        assert!(matches!(
            events.as_slice(),
            [
                LoopEvent::RequestStart { .. },
                LoopEvent::Tombstone,
                LoopEvent::Retry(_)
            ]
        ));
        let Attempt::Response(r) = streamed.attempt else {
            panic!("no response")
        };
        assert_eq!(r.to_message().text(), "whole");
    }

    #[tokio::test]
    async fn a_fallback_strips_thinking_switches_the_model_and_asks_again() {
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
                p.conversation.messages()[0].clone(),
                Message::assistant(vec![ContentBlock::thinking("hmm", "sig")]),
            ],
            "fake-model",
            Some("small-model".into()),
        );
        let mut run = QueryRun::new(p);
        let request = run.request(run.conversation().messages().to_vec());
        let emitter = run.events.clone();
        let (events, streamed) = run_phase(&emitter, run.stream_response(request)).await;
        assert!(matches!(streamed.attempt, Attempt::Response(_)));
        assert_eq!(run.conversation().model(), "small-model");
        assert_eq!(run.conversation().fallback_model(), None);
        assert_eq!(
            run.conversation().messages()[1].text(),
            "(thinking omitted)"
        );
        assert!(events.iter().any(
            |e| matches!(e, LoopEvent::Fallback { fallback, .. } if fallback == "small-model")
        ));
        let requests = model.requests.lock().unwrap().clone();
        assert_eq!(requests[1].0.model, "small-model");
        assert_eq!(requests[1].1, None);
        assert_eq!(requests[1].0.messages[1].text(), "(thinking omitted)");
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_a_message_is_a_cut_stream() {
        let p = params(FakeModel::new([Reply::Events(Vec::new())]));
        let mut run = QueryRun::new(p);
        let request = run.request(run.conversation().messages().to_vec());
        let emitter = run.events.clone();
        let (_, streamed) = run_phase(&emitter, run.stream_response(request)).await;
        assert!(matches!(
            streamed.attempt,
            Attempt::Failed(ApiError::StreamCut { events: 0 })
        ));
    }

    #[tokio::test]
    async fn an_interrupt_after_streaming_answers_every_call_and_ends_the_query() {
        let p = params(FakeModel::new([tool("t1", "Slow", json!({}))]));
        let mut run = QueryRun::new(p);
        let request = run.request(run.conversation().messages().to_vec());
        let emitter = run.events.clone();
        let (_, streamed) = run_phase(&emitter, run.stream_response(request)).await;
        run.cancel.cancel();
        let (events, flow) = run_phase(&emitter, run.abort_after_streaming(streamed)).await;
        assert!(matches!(
            flow,
            ControlFlow::Break(Step::Terminal {
                reason: TerminalReason::AbortedStreaming,
                ..
            })
        ));
        let last = run.conversation().messages().last().unwrap();
        assert!(matches!(
            &last.content[0],
            ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "t1"
        ));
        assert_eq!(last.content[1], ContentBlock::text(INTERRUPT_MESSAGE));
        assert_eq!(events.len(), 2);
    }

    #[tokio::test]
    async fn without_an_interrupt_the_attempt_goes_on_untouched() {
        let p = params(FakeModel::new([text("hi")]));
        let mut run = QueryRun::new(p);
        let request = run.request(run.conversation().messages().to_vec());
        let emitter = run.events.clone();
        let (_, streamed) = run_phase(&emitter, run.stream_response(request)).await;
        let before = run.conversation().messages().len();
        let (events, flow) = run_phase(&emitter, run.abort_after_streaming(streamed)).await;
        assert!(matches!(flow, ControlFlow::Continue(_)));
        assert!(events.is_empty());
        assert_eq!(run.conversation().messages().len(), before);
    }

    #[tokio::test]
    async fn accounting_reports_the_usage_and_counts_output_tokens() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let Reply::Response(mut response) =
            response(vec![ContentBlock::text("x")], StopReason::EndTurn)
        else {
            panic!("not a response")
        };
        response.model = String::new();
        let emitter = run.events.clone();
        let (events, ()) = run_phase(&emitter, run.account(&response)).await;
        assert!(
            matches!(&events[0], LoopEvent::Usage { model, .. } if model == run.conversation().model())
        );
        assert_eq!(run.budget_output_tokens, response.usage.output_tokens);
    }
}
