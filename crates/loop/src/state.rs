//! The loop's state, why it continued, and how it ended.

use serde::Serialize;

/// Why the loop went round again: every way a turn leads to another request. Recorded in
/// [`State::transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Transition {
    /// Tools ran; their results go to the model.
    NextTurn,
    /// Prompt too long: the context was compacted on the spot; same request again.
    ReactiveCompactRetry,
    /// First max_tokens stop: the same request again at the escalated limit, silently.
    MaxOutputTokensEscalate,
    /// Later max_tokens stops: a recovery message asks the model to resume.
    MaxOutputTokensRecovery {
        /// Which recovery this is (1-based).
        attempt: u32,
    },
    /// Prompt too long: staged context collapses were committed; same request again.
    CollapseDrainRetry,
    /// A stop hook blocked the end of the turn and its errors go to the model.
    StopHookBlocking,
    /// The token budget is not spent yet: a nudge asks the model to go on.
    TokenBudgetContinuation,
    /// The server paused a long turn (`pause_turn`): the history goes back as it is so
    /// that the server carries on; counted as a turn.
    PauseTurnContinue,
}

impl Transition {
    /// The snake-case name of this transition (`next_turn`, …), as in Claude Code's
    /// query loop.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::NextTurn => "next_turn",
            Self::ReactiveCompactRetry => "reactive_compact_retry",
            Self::MaxOutputTokensEscalate => "max_output_tokens_escalate",
            Self::MaxOutputTokensRecovery { .. } => "max_output_tokens_recovery",
            Self::CollapseDrainRetry => "collapse_drain_retry",
            Self::StopHookBlocking => "stop_hook_blocking",
            Self::TokenBudgetContinuation => "token_budget_continuation",
            Self::PauseTurnContinue => "pause_turn_continue",
        }
    }
}

/// Why the loop stopped: every way a query ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalReason {
    /// The model ended its turn without tool calls.
    Completed,
    /// Aborted while the response streamed.
    AbortedStreaming,
    /// Aborted while tools ran.
    AbortedTools,
    /// The turn limit was reached.
    MaxTurns,
    /// The model call failed after its retries.
    ModelError,
    /// The API refused an image in the request.
    ImageError,
    /// The prompt was too long even after compaction.
    PromptTooLong,
    /// Past the blocking limit with autocompact off.
    BlockingLimit,
    /// A stop hook ended the query.
    StopHookPrevented,
    /// A tool hook stopped the query after a round of tools.
    HookStopped,
}

impl TerminalReason {
    /// The snake-case name of this reason (`completed`, `max_turns`, …), as in Claude
    /// Code's query loop and in the stream-json result's `terminal_reason`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::AbortedStreaming => "aborted_streaming",
            Self::AbortedTools => "aborted_tools",
            Self::MaxTurns => "max_turns",
            Self::ModelError => "model_error",
            Self::ImageError => "image_error",
            Self::PromptTooLong => "prompt_too_long",
            Self::BlockingLimit => "blocking_limit",
            Self::StopHookPrevented => "stop_hook_prevented",
            Self::HookStopped => "hook_stopped",
        }
    }

    /// Whether a run ending this way failed (the result carries `is_error: true`).
    #[must_use]
    pub fn is_error(&self) -> bool {
        match self {
            Self::Completed | Self::StopHookPrevented | Self::HookStopped => false,
            Self::AbortedStreaming
            | Self::AbortedTools
            | Self::MaxTurns
            | Self::ModelError
            | Self::ImageError
            | Self::PromptTooLong
            | Self::BlockingLimit => true,
        }
    }
}

/// How a query ended: the reason, the turns it took, every transition on the way, and
/// the error text when it failed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Terminal {
    /// Why it ended.
    pub reason: TerminalReason,
    /// Model turns taken.
    pub turn_count: u32,
    /// Every continue on the way, in order.
    pub transitions: Vec<Transition>,
    /// The error text, when it failed.
    pub error: Option<String>,
}

/// Everything one iteration of the loop needs beside the conversation (which holds the
/// history); replaced whole at every continue.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// The model turn this iteration makes (1-based).
    pub turn_count: u32,
    /// Max-output-tokens recoveries so far.
    pub max_output_tokens_recovery_count: u32,
    /// Whether reactive compaction was tried this turn (once only).
    pub has_attempted_reactive_compact: bool,
    /// The escalated `max_tokens`, after a first max-tokens stop.
    pub max_output_tokens_override: Option<u32>,
    /// Whether a stop hook blocked the last end of turn (hooks see it, to avoid loops).
    pub stop_hook_active: bool,
    /// Token-budget continuations so far and the output tokens each one produced.
    pub budget_continuations: Vec<u64>,
    /// Why the previous iteration continued; `None` on the first.
    pub transition: Option<Transition>,
}

impl State {
    /// The state of a query's first iteration.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            turn_count: 1,
            max_output_tokens_recovery_count: 0,
            has_attempted_reactive_compact: false,
            max_output_tokens_override: None,
            stop_hook_active: false,
            budget_continuations: Vec::new(),
            transition: None,
        }
    }
}
