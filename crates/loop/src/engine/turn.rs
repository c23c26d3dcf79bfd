//! Driving one user turn: the prompt joins the conversation, the query runs on the
//! conversation lent to it (messages, model, history, usage anchor), each loop event
//! updates the rest of the session (transcript, usage, denials), and the turn ends with
//! its result.

use std::sync::Arc;
use std::time::Instant;

use futures::{Stream, StreamExt};
use gyre_protocol::{ContentBlock, Message, Role, Usage};
use gyre_tools::PermissionDenial;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::QueryEngine;
use super::denials::Denials;
use super::record::Recorder;
use super::usage::UsageMeter;
use crate::conversation::Conversation;
use crate::deps::QueryDeps;
use crate::event::{LoopEvent, SubagentEvent, SubagentProgress};
use crate::query::{QueryParams, query};
use crate::state::{Terminal, TerminalReason};
use crate::transcript::ResponseInfo;

/// What a turn yields: loop events, with each message given its uuid.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// A message joined the conversation (and the transcript).
    Message {
        /// The message's id in the transcript.
        uuid: String,
        /// The message.
        message: Message,
        /// Whether gyre wrote it to the model on the user's behalf.
        is_meta: bool,
    },
    /// Any other loop event (retries, fallback, compaction, denials, raw stream events…).
    Loop(LoopEvent),
    /// A message of a sub-agent's conversation (written to its sidechain transcript),
    /// tagged with the Agent call that runs it.
    Subagent {
        /// The Agent call that runs the sub-agent.
        parent_tool_use_id: String,
        /// The message's id in the sidechain transcript.
        uuid: String,
        /// The message.
        message: Message,
    },
    /// What a sub-agent is doing (its Agent call, tool calls, tokens), for a UI.
    SubagentProgress(SubagentProgress),
    /// The end of the turn.
    Result(TurnResult),
}

/// The outcome of one `submit_message`, with the session's running totals.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    /// `success`, `error_max_turns`, `error_during_execution` or `error_max_budget_usd`.
    pub subtype: &'static str,
    /// Whether the turn failed (every subtype but `success`).
    pub is_error: bool,
    /// The final assistant text (or the error text).
    pub result: String,
    /// Model turns the query took.
    pub num_turns: u32,
    /// Wall time of the turn, in milliseconds.
    pub duration_ms: u64,
    /// Time spent waiting on the API, in milliseconds.
    pub duration_api_ms: u64,
    /// What the session has cost so far, in US dollars.
    pub total_cost_usd: f64,
    /// Tokens used by the session so far.
    pub usage: Usage,
    /// Calls the permission policy refused this session.
    pub permission_denials: Vec<PermissionDenial>,
    /// How the query ended.
    pub terminal: Terminal,
    /// Error texts of the turn, for the result line.
    pub errors: Vec<String>,
}

/// What one turn has seen so far.
#[derive(Debug)]
struct TurnTally {
    started: Instant,
    cancel: CancellationToken,
    api_ms: u64,
    request_started: Option<Instant>,
    /// The last non-empty assistant text: the turn's result on success.
    last_text: String,
    budget_exceeded: bool,
    terminal: Option<Terminal>,
    /// The history a [`LoopEvent::HistoryReplaced`] just carried, for the boundary line
    /// of the [`LoopEvent::Compacted`] that follows it; kept for that one event only.
    replaced: Option<Vec<Message>>,
}

/// What a turn keeps up to date while the query holds the conversation: the transcript,
/// usage and cost, and the denials.
struct Ledger<'a> {
    deps: &'a dyn QueryDeps,
    recorder: &'a mut Recorder,
    usage: &'a UsageMeter,
    denials: &'a mut Denials,
    max_budget_usd: Option<f64>,
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl QueryEngine {
    /// Runs one user turn. The user message is on disk before the first API call; the
    /// stream ends with [`EngineEvent::Result`].
    pub fn submit_message(
        &mut self,
        content: Vec<ContentBlock>,
    ) -> impl Stream<Item = EngineEvent> + '_ {
        self.submit_message_as(content, None)
    }

    /// [`QueryEngine::submit_message`], the prompt's transcript line taking `uuid` when
    /// one is given (the id an SDK gave the message, and the checkpoint's).
    pub fn submit_message_as(
        &mut self,
        content: Vec<ContentBlock>,
        uuid: Option<String>,
    ) -> impl Stream<Item = EngineEvent> + '_ {
        if let Some(uuid) = uuid {
            self.recorder.name_next(uuid);
        }
        async_stream::stream! {
            let mut tally = TurnTally {
                started: Instant::now(),
                cancel: self.interrupt.fresh(),
                api_ms: 0,
                request_started: None,
                last_text: String::new(),
                budget_exceeded: false,
                terminal: None,
                replaced: None,
            };
            let prompt = Message::user(content);
            yield self.join(prompt, false);
            let mut subagents = self.subagents.take();
            {
                let (params, mut ledger) = self.lend(&tally.cancel);
                let events = query(params);
                futures::pin_mut!(events);
                loop {
                    let event = match subagents.as_mut() {
                        // Sub-agent events first: what a sub-agent said comes before its result.
                        Some(rx) => tokio::select! {
                            biased;
                            Some(sub) = rx.recv() => Err(sub),
                            event = events.next() => Ok(event),
                        },
                        None => Ok(events.next().await),
                    };
                    match event {
                        Ok(Some(event)) => {
                            if let Some(out) = ledger.on_loop_event(event, &mut tally) {
                                yield out;
                            }
                        }
                        Ok(None) => break,
                        Err(sub) => {
                            if let Some(out) = ledger.on_subagent_event(sub, &mut tally) {
                                yield out;
                            }
                        }
                    }
                }
            }
            self.subagents = subagents;
            yield EngineEvent::Result(self.turn_result(tally));
        }
    }

    /// The query's parameters, with the conversation lent to it, and the ledger of the
    /// rest of the session that the turn updates meanwhile.
    fn lend(&mut self, cancel: &CancellationToken) -> (QueryParams<&mut Conversation>, Ledger<'_>) {
        let mut tool_context = self.tool_context.clone();
        tool_context.cancel = cancel.clone();
        let ledger = Ledger {
            deps: self.deps.as_ref(),
            recorder: &mut self.recorder,
            usage: &self.usage,
            denials: &mut self.denials,
            max_budget_usd: self.config.max_budget_usd,
        };
        let params = QueryParams {
            conversation: &mut self.conversation,
            system: self.config.system.clone(),
            max_turns: self.config.max_turns,
            max_output_tokens: self.config.max_output_tokens,
            token_budget: self.config.token_budget,
            deps: Arc::clone(&self.deps),
            tools: Arc::clone(&self.tools),
            tool_context,
            can_use_tool: Arc::clone(&self.can_use_tool),
            compactor: Arc::clone(&self.compactor),
            stop_hooks: self.stop_hooks.clone(),
            tool_hooks: self.tool_hooks.clone(),
            cancel: cancel.clone(),
        };
        (params, ledger)
    }

    /// A message joins the transcript, then the conversation.
    fn join(&mut self, message: Message, is_meta: bool) -> EngineEvent {
        let uuid = self.recorder.message(
            self.deps.as_ref(),
            &message,
            is_meta,
            self.conversation.model(),
        );
        self.conversation.push(message.clone());
        EngineEvent::Message {
            uuid,
            message,
            is_meta,
        }
    }
}

impl Ledger<'_> {
    /// A message the query added to the conversation joins the transcript.
    fn record(&mut self, message: Message, is_meta: bool) -> EngineEvent {
        let uuid = self
            .recorder
            .message(self.deps, &message, is_meta, &self.usage.model());
        EngineEvent::Message {
            uuid,
            message,
            is_meta,
        }
    }

    /// What a loop event does to the session, and what the turn yields for it.
    fn on_loop_event(&mut self, event: LoopEvent, tally: &mut TurnTally) -> Option<EngineEvent> {
        let replaced = tally.replaced.take();
        match event {
            LoopEvent::Message { message, is_meta } => {
                if message.role == Role::Assistant {
                    let text = message.text();
                    if !text.is_empty() {
                        tally.last_text = text;
                    }
                }
                return Some(self.record(message, is_meta));
            }
            LoopEvent::RequestStart { .. } => tally.request_started = Some(Instant::now()),
            LoopEvent::Usage {
                ref id,
                ref request_id,
                ref model,
                ref stop_reason,
                usage,
            } => {
                if let Some(t) = tally.request_started.take() {
                    tally.api_ms += millis(t);
                }
                self.add_usage(model, &usage, tally);
                self.recorder.response(ResponseInfo {
                    id: id.clone(),
                    request_id: request_id.clone(),
                    model: model.clone(),
                    stop_reason: stop_reason.clone(),
                    usage,
                });
            }
            LoopEvent::HistoryReplaced(history) => {
                tally.replaced = Some(history);
                return None;
            }
            LoopEvent::Compacted(ref outcome) => {
                if let Some(history) = replaced {
                    self.recorder.boundary(self.deps, outcome, &history);
                }
            }
            LoopEvent::PermissionDenied { ref denial, .. } => {
                self.denials.record(denial.clone());
            }
            LoopEvent::Terminal(t) => {
                tally.terminal = Some(t);
                return None;
            }
            // The conversation switched its model itself.
            LoopEvent::Fallback { ref fallback, .. } => {
                self.usage.set_model(fallback);
            }
            LoopEvent::Stream(_)
            | LoopEvent::ToolStarted { .. }
            | LoopEvent::Retry(_)
            | LoopEvent::Tombstone
            | LoopEvent::Transition(_) => {}
        }
        Some(EngineEvent::Loop(event))
    }

    /// A sub-agent's usage adds to the session's; its messages are passed on.
    fn on_subagent_event(
        &mut self,
        event: SubagentEvent,
        tally: &mut TurnTally,
    ) -> Option<EngineEvent> {
        match event {
            SubagentEvent::Message {
                parent_tool_use_id,
                uuid,
                message,
            } => Some(EngineEvent::Subagent {
                parent_tool_use_id,
                uuid,
                message,
            }),
            SubagentEvent::Usage { model, usage } => {
                self.add_usage(&model, &usage, tally);
                None
            }
            SubagentEvent::Progress(progress) => Some(EngineEvent::SubagentProgress(progress)),
        }
    }

    /// Adds a response's usage; going over `--max-budget-usd` cancels the turn.
    fn add_usage(&mut self, model: &str, usage: &Usage, tally: &mut TurnTally) {
        self.usage.add(model, usage);
        if self.usage.over_budget(self.max_budget_usd) && !tally.budget_exceeded {
            tally.budget_exceeded = true;
            tally.cancel.cancel();
        }
    }
}

impl QueryEngine {
    fn turn_result(&self, tally: TurnTally) -> TurnResult {
        let terminal = tally.terminal.unwrap_or(Terminal {
            reason: TerminalReason::ModelError,
            turn_count: 0,
            transitions: Vec::new(),
            error: Some("the query ended without a result".to_owned()),
        });
        let budget = tally
            .budget_exceeded
            .then(|| self.config.max_budget_usd.unwrap_or_default());
        let (subtype, is_error, errors) = classify(&terminal, budget);
        let result = if is_error && subtype != "error_max_turns" {
            errors.first().cloned().unwrap_or_default()
        } else {
            tally.last_text
        };
        TurnResult {
            subtype,
            is_error,
            result,
            num_turns: terminal.turn_count,
            duration_ms: millis(tally.started),
            duration_api_ms: tally.api_ms,
            total_cost_usd: self.usage.cost_usd(),
            usage: self.usage.usage(),
            permission_denials: self.denials.all().to_vec(),
            terminal,
            errors,
        }
    }
}

/// The result's subtype, whether it is an error, and its errors. `budget_exceeded` is
/// the budget the turn went over, if it did: that wins over how the loop ended.
fn classify(
    terminal: &Terminal,
    budget_exceeded: Option<f64>,
) -> (&'static str, bool, Vec<String>) {
    if let Some(max) = budget_exceeded {
        return (
            "error_max_budget_usd",
            true,
            vec![format!("Reached maximum budget (${max:.2})")],
        );
    }
    let errors = || terminal.error.clone().into_iter().collect();
    if terminal.reason == TerminalReason::MaxTurns {
        ("error_max_turns", true, errors())
    } else if terminal.reason.is_error() {
        ("error_during_execution", true, errors())
    } else {
        ("success", false, Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::compaction::NoCompaction;
    use crate::engine::EngineConfig;
    use crate::testing::{AllowAll, FakeModel, Reply, registry, response, text, tool};
    use crate::transcript::MemoryTranscript;

    fn engine(
        replies: impl IntoIterator<Item = Reply>,
        max_budget_usd: Option<f64>,
    ) -> QueryEngine {
        let config = EngineConfig {
            session_id: "s1".into(),
            cwd: std::env::temp_dir(),
            model: "fake-model".into(),
            fallback_model: None,
            system: Vec::new(),
            max_turns: None,
            max_budget_usd,
            max_output_tokens: None,
            token_budget: None,
        };
        QueryEngine::new(
            config,
            FakeModel::new(replies),
            registry(),
            gyre_tools::ToolContext::new(std::env::temp_dir()),
            Arc::new(AllowAll),
            Box::new(NoCompaction),
            Box::new(MemoryTranscript::default()),
        )
    }

    async fn submit(engine: &mut QueryEngine) -> Vec<EngineEvent> {
        engine
            .submit_message(vec![ContentBlock::text("go")])
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_turn_keeps_every_message_and_ends_with_the_last_text() {
        let mut engine = engine([tool("t1", "Echo", json!({})), text("done")], None);
        let events = submit(&mut engine).await;
        let Some(EngineEvent::Result(result)) = events.last() else {
            panic!("no result: {events:?}")
        };
        assert_eq!((result.subtype, result.is_error), ("success", false));
        assert_eq!(result.result, "done");
        assert_eq!(result.num_turns, 2);
        // prompt, tool call, tool result, answer
        assert_eq!(engine.messages().len(), 4);
        assert_eq!(engine.total_usage().output_tokens, 100);
        assert_eq!(
            engine.conversation.anchor().map(|a| a.message_index),
            Some(3)
        );
    }

    #[tokio::test]
    async fn a_fallback_holds_for_the_next_turns_with_the_history_it_stripped() {
        let mut engine = engine(
            [
                response(
                    vec![
                        ContentBlock::thinking("hmm", "sig"),
                        ContentBlock::text("one"),
                    ],
                    gyre_protocol::StopReason::EndTurn,
                ),
                Reply::Error(gyre_api::ApiError::FallbackTriggered {
                    original: "fake-model".into(),
                    fallback: "small-model".into(),
                }),
                text("two"),
            ],
            None,
        );
        engine.conversation =
            Conversation::new(Vec::new(), "fake-model", Some("small-model".into()));
        submit(&mut engine).await;
        submit(&mut engine).await;
        assert_eq!(engine.model(), "small-model");
        assert_eq!(engine.messages().len(), 4);
        // The thinking signed by the first model is gone from the history the next
        // turns send, not only from the request that fell back.
        assert_eq!(engine.messages()[1].content, [ContentBlock::text("one")]);
    }

    #[tokio::test]
    async fn crossing_the_budget_cancels_the_turn_and_says_so() {
        let mut engine = engine([tool("t1", "Slow", json!({})), text("never")], Some(0.0));
        let events = submit(&mut engine).await;
        let Some(EngineEvent::Result(result)) = events.last() else {
            panic!("no result: {events:?}")
        };
        assert_eq!(result.subtype, "error_max_budget_usd");
        assert_eq!(result.errors, ["Reached maximum budget ($0.00)"]);
        assert_eq!(result.terminal.reason, TerminalReason::AbortedTools);
    }

    fn ended(reason: TerminalReason, error: Option<&str>) -> Terminal {
        Terminal {
            reason,
            turn_count: 1,
            transitions: Vec::new(),
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn a_completed_loop_is_a_success_without_errors() {
        let (subtype, is_error, errors) = classify(&ended(TerminalReason::Completed, None), None);
        assert_eq!((subtype, is_error), ("success", false));
        assert!(errors.is_empty());
    }

    #[test]
    fn max_turns_and_failures_carry_the_loop_s_error() {
        let max = classify(
            &ended(
                TerminalReason::MaxTurns,
                Some("Reached maximum number of turns (2)"),
            ),
            None,
        );
        assert_eq!(
            max,
            (
                "error_max_turns",
                true,
                vec!["Reached maximum number of turns (2)".to_owned()]
            )
        );
        let failed = classify(
            &ended(TerminalReason::PromptTooLong, Some("too long")),
            None,
        );
        assert_eq!(
            failed,
            ("error_during_execution", true, vec!["too long".to_owned()])
        );
    }

    #[test]
    fn an_exceeded_budget_wins_over_how_the_loop_ended() {
        let (subtype, is_error, errors) = classify(
            &ended(TerminalReason::AbortedTools, Some("Interrupted by user")),
            Some(0.5),
        );
        assert_eq!((subtype, is_error), ("error_max_budget_usd", true));
        assert_eq!(errors, ["Reached maximum budget ($0.50)"]);
    }
}
