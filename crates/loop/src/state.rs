//! The loop's state, why it continued, and how it ended.

use gyre_protocol::Message;
use serde::Serialize;

/// Why the loop went round again (seed 001, "继续条件"). Recorded in [`State::transition`].
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
    MaxOutputTokensRecovery { attempt: u32 },
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
    /// The seeds' name for this transition (`next_turn`, …).
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

/// Why the loop stopped (seed 001, "终止条件").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalReason {
    Completed,
    AbortedStreaming,
    AbortedTools,
    MaxTurns,
    ModelError,
    ImageError,
    PromptTooLong,
    BlockingLimit,
    StopHookPrevented,
    HookStopped,
}

impl TerminalReason {
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
    pub reason: TerminalReason,
    pub turn_count: u32,
    pub transitions: Vec<Transition>,
    pub error: Option<String>,
}

/// Everything one iteration of the loop needs; replaced whole at every continue.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub messages: Vec<Message>,
    pub turn_count: u32,
    pub max_output_tokens_recovery_count: u32,
    pub has_attempted_reactive_compact: bool,
    pub max_output_tokens_override: Option<u32>,
    pub stop_hook_active: bool,
    /// Token-budget continuations so far and the output tokens each one produced.
    pub budget_continuations: Vec<u64>,
    /// Why the previous iteration continued; `None` on the first.
    pub transition: Option<Transition>,
}

impl State {
    #[must_use]
    pub fn initial(messages: Vec<Message>) -> Self {
        Self {
            messages,
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
