//! `query()`: the agent loop as an explicit state machine.
//!
//! A [`QueryRun`] holds the [`Conversation`] (the history, the model and its fallback,
//! the usage anchor: owned, or lent by the engine), what the phases share (the seams,
//! the transitions so far, the repeat-guard history…) and the current [`State`]. One
//! iteration runs the phases in order, each a method in its own module:
//!
//! | phase | module | returns |
//! |---|---|---|
//! | 1. prepare the context (compaction pipeline) | `prepare` | messages to send, or a terminal |
//! | 2. `stream_request_start`: build the request | `prepare` | the request |
//! | 3. the streaming call, tools starting as blocks complete; fallback | `stream` | [`stream::Streamed`] |
//! | 4. abort check after streaming | `stream` | the attempt, or a terminal |
//! | 5. withheld errors (prompt-too-long, max_output_tokens, context window exceeded) | `recover` | a [`Step`] |
//! | 5. refusal; no tool calls: pause_turn, stop hooks, token budget | `stop` | a [`Step`] |
//! | 6. the remaining tools; 7. abort check; 8. attachments | `tools` | tool results, or a terminal |
//! | 9. max turns; 10. the next state | `next` | a [`Step`] |
//!
//! Every iteration ends in a [`Step`]: `Continue` replaces the whole state and records
//! the transition, `Terminal` ends the query. Phases emit their events through an
//! [`emit::Emitter`]; the driver ([`query`]) only runs iterations and yields what they emit,
//! as it is emitted.

mod emit;
mod next;
mod prepare;
mod recover;
mod stop;
mod stream;
mod tools;

use std::borrow::{Borrow, BorrowMut};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use futures::Stream;
use gyre_protocol::{AssistantResponse, Message, SystemBlock, ToolDefinition};
use gyre_tools::{CanUseTool, ToolContext, ToolRegistry};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::compaction::ContextCompactor;
use crate::conversation::Conversation;
use crate::deps::QueryDeps;
use crate::event::LoopEvent;
use crate::hooks::{StopHook, ToolHook};
use crate::state::{State, Terminal, TerminalReason, Transition};
use emit::{Emitter, Progress};

/// Default `max_tokens` of a request.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
/// `max_tokens` after the first `max_tokens` stop (as Claude Code's `ESCALATED_MAX_TOKENS`).
pub const ESCALATED_MAX_OUTPUT_TOKENS: u32 = 64_000;
/// Recovery messages after escalation, at most; then the query ends (as Claude Code's
/// `MAX_OUTPUT_TOKENS_RECOVERY_LIMIT`).
pub const MAX_OUTPUT_TOKENS_RECOVERY_LIMIT: u32 = 3;
/// The meta message that asks the model to resume after a `max_tokens` stop.
pub const MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE: &str = "Output token limit hit. Resume directly — no apology, no recap of what you were doing. Pick up mid-thought if that is where the cut happened. Break remaining work into smaller pieces.";
/// Appended when the user interrupts while the model streams.
pub const INTERRUPT_MESSAGE: &str = "[Request interrupted by user]";
/// Appended when the user interrupts while tools run.
pub const INTERRUPT_MESSAGE_FOR_TOOL_USE: &str = "[Request interrupted by user for tool use]";
/// The result of a tool call the user interrupted.
pub const INTERRUPTED_TOOL_RESULT: &str = gyre_tools::INTERRUPTED_MESSAGE;
pub use stop::REFUSAL_MESSAGE;
/// The terminal error of an interrupted query.
const INTERRUPTED_BY_USER: &str = "Interrupted by user";

/// Everything one query needs.
pub struct QueryParams<C = Conversation> {
    /// The conversation to go on with, its history ending with the new user message: a
    /// [`Conversation`] the query owns, or a `&mut Conversation` lent to it, which then
    /// holds what the query added (messages, a fallback, the usage anchor) when it ends.
    pub conversation: C,
    /// The system prompt.
    pub system: Vec<SystemBlock>,
    /// The most model turns before the query ends with `max_turns`.
    pub max_turns: Option<u32>,
    /// `GYRE_MAX_OUTPUT_TOKENS`: a fixed limit that also disables escalation.
    pub max_output_tokens: Option<u32>,
    /// Opt-in output-token budget for continuation nudges.
    pub token_budget: Option<u64>,
    /// How the model is called.
    pub deps: Arc<dyn QueryDeps>,
    /// The tools on offer.
    pub tools: Arc<ToolRegistry>,
    /// What the tools run with (cwd, file state, abort).
    pub tool_context: ToolContext,
    /// The permission policy every call passes.
    pub can_use_tool: Arc<dyn CanUseTool>,
    /// Keeps the context within the window before each request.
    pub compactor: Arc<Mutex<Box<dyn ContextCompactor>>>,
    /// Hooks run when the model would end the turn.
    pub stop_hooks: Vec<Arc<dyn StopHook>>,
    /// Hooks run after each tool call.
    pub tool_hooks: Vec<Arc<dyn ToolHook>>,
    /// Aborts the query (Ctrl+C): streaming and tools stop, synthetic results pair the calls.
    pub cancel: CancellationToken,
}

impl<C: Borrow<Conversation>> std::fmt::Debug for QueryParams<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let conversation: &Conversation = self.conversation.borrow();
        f.debug_struct("QueryParams")
            .field("model", &conversation.model())
            .field("messages", &conversation.messages().len())
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

/// How an iteration ends.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Go round again with this state (its `transition` is set by the driver).
    Continue {
        state: State,
        transition: Transition,
    },
    /// The query is over.
    Terminal {
        reason: TerminalReason,
        error: Option<String>,
    },
}

impl Step {
    fn terminal(reason: TerminalReason, error: impl Into<Option<String>>) -> Self {
        Self::Terminal {
            reason,
            error: error.into(),
        }
    }

    fn interrupted(reason: TerminalReason) -> Self {
        Self::terminal(reason, INTERRUPTED_BY_USER.to_owned())
    }
}

/// What a phase gives the next one, or the step that ends the iteration early.
pub(crate) type Phase<T> = ControlFlow<Step, T>;

/// Runs the agent loop. The stream's last item is always [`LoopEvent::Terminal`], and
/// no other event follows it.
pub fn query<'c, C>(params: QueryParams<C>) -> impl Stream<Item = LoopEvent> + Send + 'c
where
    C: BorrowMut<Conversation> + Send + Sync + 'c,
{
    async_stream::stream! {
        let run = QueryRun::new(params);
        let events = run.events.clone();
        let mut running = std::pin::pin!(run.run());
        loop {
            match events.next(&mut running).await {
                Progress::Event(event) => yield event,
                Progress::Done(terminal) => {
                    for event in events.drain() {
                        yield event;
                    }
                    yield LoopEvent::Terminal(terminal);
                    break;
                }
            }
        }
    }
}

/// One running query: the conversation, the seams, what the phases share, and the
/// current state.
pub(crate) struct QueryRun<'c> {
    /// Owned, or lent by the caller: see [`QueryRun::conversation`].
    conversation: Box<dyn BorrowMut<Conversation> + Send + Sync + 'c>,
    system: Vec<SystemBlock>,
    max_turns: Option<u32>,
    max_output_tokens: Option<u32>,
    token_budget: Option<u64>,
    deps: Arc<dyn QueryDeps>,
    tools: Arc<ToolRegistry>,
    tool_definitions: Vec<ToolDefinition>,
    tool_context: ToolContext,
    can_use_tool: Arc<dyn CanUseTool>,
    compactor: Arc<Mutex<Box<dyn ContextCompactor>>>,
    stop_hooks: Vec<Arc<dyn StopHook>>,
    tool_hooks: Vec<Arc<dyn ToolHook>>,
    cancel: CancellationToken,
    state: State,
    transitions: Vec<Transition>,
    /// Output tokens of every response of this query (token budget).
    budget_output_tokens: u64,
    /// Tool-call keys per turn, for the repeat guard.
    call_history: Vec<Vec<String>>,
    /// Files already reported as changed, with the mtime reported.
    reminded: HashMap<PathBuf, SystemTime>,
    events: Emitter,
}

impl<'c> QueryRun<'c> {
    pub(crate) fn new<C>(params: QueryParams<C>) -> Self
    where
        C: BorrowMut<Conversation> + Send + Sync + 'c,
    {
        let QueryParams {
            conversation,
            system,
            max_turns,
            max_output_tokens,
            token_budget,
            deps,
            tools,
            tool_context,
            can_use_tool,
            compactor,
            stop_hooks,
            tool_hooks,
            cancel,
        } = params;
        Self {
            conversation: Box::new(conversation),
            system,
            max_turns,
            max_output_tokens,
            token_budget,
            deps,
            tool_definitions: tools.definitions(),
            tools,
            // Tools stop when the query is aborted.
            tool_context: tool_context.with_cancel(cancel.clone()),
            can_use_tool,
            compactor,
            stop_hooks,
            tool_hooks,
            cancel,
            state: State::initial(),
            transitions: Vec::new(),
            budget_output_tokens: 0,
            call_history: Vec::new(),
            reminded: HashMap::new(),
            events: Emitter::default(),
        }
    }

    /// Iterations until a terminal.
    async fn run(mut self) -> Terminal {
        self.compactor.lock().await.reset_turn();
        loop {
            match self.iteration().await {
                Step::Continue { state, transition } => {
                    self.transitions.push(transition);
                    self.emit(LoopEvent::Transition(transition)).await;
                    self.state = State {
                        transition: Some(transition),
                        ..state
                    };
                }
                Step::Terminal { reason, error } => {
                    return Terminal {
                        reason,
                        turn_count: self.state.turn_count,
                        transitions: std::mem::take(&mut self.transitions),
                        error,
                    };
                }
            }
        }
    }

    /// One iteration, phase by phase.
    async fn iteration(&mut self) -> Step {
        match self.phases().await {
            ControlFlow::Continue(step) | ControlFlow::Break(step) => step,
        }
    }

    async fn phases(&mut self) -> Phase<Step> {
        let messages = self.prepare_context().await?;
        let request = self.request(messages);
        let streamed = self.stream_response(request).await;
        let stream::Streamed {
            attempt,
            executor,
            started,
        } = self.abort_after_streaming(streamed).await?;
        let response = self.recover_from_failure(attempt, &executor).await?;
        self.account(&response).await;
        self.recover_from_max_tokens(&response, &executor).await?;
        self.recover_from_context_window_exceeded(&response, &executor)
            .await?;
        self.end_if_refused(&response, &executor).await?;
        let calls = self.accept_response(&response, &executor, &started).await;
        if calls.is_empty() {
            executor.discard();
            return ControlFlow::Break(self.end_without_tools(&response).await);
        }
        let (results, hook_stop) = self.run_remaining_tools(&executor, &calls).await;
        let results = self.abort_after_tools(results).await?;
        self.attach(results, hook_stop).await?;
        ControlFlow::Continue(self.next_state())
    }

    async fn emit(&self, event: LoopEvent) {
        self.events.emit(event).await;
    }

    /// The conversation the query goes on with: the history, the model and its
    /// fallback, the usage anchor.
    fn conversation(&self) -> &Conversation {
        (*self.conversation).borrow()
    }

    fn conversation_mut(&mut self) -> &mut Conversation {
        (*self.conversation).borrow_mut()
    }

    /// Adds `message` to the history and emits it.
    async fn push_message(&mut self, message: Message, is_meta: bool) {
        self.conversation_mut().push(message.clone());
        self.emit(LoopEvent::Message { message, is_meta }).await;
    }

    /// `response` joins the history as `message` (what is kept of it), its usage the
    /// anchor, and the message is emitted.
    async fn push_response(&mut self, message: Message, response: &AssistantResponse) {
        self.conversation_mut()
            .push_response(message.clone(), response.usage);
        self.emit(LoopEvent::Message {
            message,
            is_meta: false,
        })
        .await;
    }

    /// The current state, for building the next one (the run's own is left fresh).
    fn take_state(&mut self) -> State {
        std::mem::replace(&mut self.state, State::initial())
    }

    /// `max_tokens` of the next request.
    fn max_tokens(&self) -> u32 {
        self.state
            .max_output_tokens_override
            .or(self.max_output_tokens)
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::testing::{FakeModel, params, text, tool};

    #[tokio::test]
    async fn the_driver_yields_each_iteration_s_events_then_one_terminal() {
        let p = params(FakeModel::new([
            tool("t1", "Echo", serde_json::json!({})),
            text("done"),
        ]));
        let events: Vec<LoopEvent> = query(p).collect().await;
        let kinds: Vec<&str> = events
            .iter()
            .map(|e| match e {
                LoopEvent::RequestStart { .. } => "request",
                LoopEvent::ToolStarted { .. } => "tool_started",
                LoopEvent::Message { .. } => "message",
                LoopEvent::Usage { .. } => "usage",
                LoopEvent::Transition(_) => "transition",
                LoopEvent::Terminal(_) => "terminal",
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "request",
                "tool_started",
                "usage",
                "message",
                "message",
                "transition",
                "request",
                "usage",
                "message",
                "terminal"
            ]
        );
        let LoopEvent::Terminal(t) = &events[events.len() - 1] else {
            panic!("no terminal")
        };
        assert_eq!(t.turn_count, 2);
        assert_eq!(t.transitions, [Transition::NextTurn]);
    }

    #[test]
    fn max_tokens_prefers_the_override_then_the_fixed_limit_then_the_default() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        assert_eq!(run.max_tokens(), DEFAULT_MAX_OUTPUT_TOKENS);
        run.max_output_tokens = Some(4000);
        assert_eq!(run.max_tokens(), 4000);
        run.state.max_output_tokens_override = Some(ESCALATED_MAX_OUTPUT_TOKENS);
        assert_eq!(run.max_tokens(), ESCALATED_MAX_OUTPUT_TOKENS);
    }
}
