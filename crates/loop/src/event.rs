//! What the loop yields.

use gyre_api::RetryStatus;
use gyre_protocol::{Message, StreamEvent, Usage};
use gyre_tools::PermissionDenial;
use tokio::sync::mpsc;

use crate::compaction::CompactionOutcome;
use crate::state::{Terminal, Transition};

/// One event of a running query, in the order it happened. The last one is always
/// [`LoopEvent::Terminal`].
#[derive(Debug, Clone)]
pub enum LoopEvent {
    /// A model request is about to be sent (`stream_request_start`).
    RequestStart {
        /// The model asked.
        model: String,
        /// The request's `max_tokens`.
        max_tokens: u32,
    },
    /// A raw stream event, for UIs that render partial messages.
    Stream(StreamEvent),
    /// A tool call's block completed mid-stream and the call was handed to the
    /// executor; its assistant message follows when the response ends.
    ToolStarted {
        /// The call's id.
        id: String,
        /// The tool called.
        name: String,
        /// The call's input.
        input: serde_json::Value,
    },
    /// A complete message that joins the conversation (assistant response, tool
    /// results, recovery or interruption messages). `is_meta` marks messages gyre wrote
    /// to the model on the user's behalf.
    Message {
        /// The message.
        message: Message,
        /// Whether gyre wrote it to the model on the user's behalf.
        is_meta: bool,
    },
    /// A request failed and is retried after a wait.
    Retry(RetryStatus),
    /// What was streamed since the attempt began is void (retry or fallback).
    Tombstone,
    /// The model was switched for the rest of the session.
    Fallback {
        /// The model that was overloaded.
        original: String,
        /// The model used from now on.
        fallback: String,
    },
    /// The stored history was replaced (compaction, persisted tool results); this is
    /// the whole new history.
    HistoryReplaced(Vec<Message>),
    /// The context was compacted; the history (just replaced) starts at the boundary.
    Compacted(CompactionOutcome),
    /// A tool call was denied by the permission policy.
    PermissionDenied {
        /// The refused call.
        denial: PermissionDenial,
        /// The refusal as the model reads it.
        message: String,
    },
    /// The loop continues; why.
    Transition(Transition),
    /// A model response finished; its id, model, stop reason and usage (accounting,
    /// and the `message` fields of stream-json assistant lines).
    Usage {
        /// The response's message id.
        id: String,
        /// The API's id of the request, when it sent one.
        request_id: Option<String>,
        /// The model that answered.
        model: String,
        /// Why the response ended.
        stop_reason: Option<gyre_protocol::StopReason>,
        /// The tokens it used.
        usage: gyre_protocol::Usage,
    },
    /// The end.
    Terminal(Terminal),
}

/// What a running sub-agent is doing, for a UI (never sent to the model). The Agent
/// tool sends one when the sub-agent starts, at each of its tool calls and responses,
/// and when it ends; each carries the whole state, so a UI keeps only the newest.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentProgress {
    /// The Agent call that runs the sub-agent.
    pub parent_tool_use_id: String,
    /// The call's short description ("find the parser").
    pub description: String,
    /// The newest tool call it made: name and input.
    pub last_tool: Option<(String, serde_json::Value)>,
    /// Tool calls it made so far.
    pub tool_uses: u32,
    /// Tokens of its newest request (input, cache and output): its context's size.
    pub tokens: u64,
    /// Running, done or failed.
    pub state: SubagentState,
}

/// Where a sub-agent stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentState {
    /// Still working.
    Running,
    /// It ended with a final answer.
    Done,
    /// It failed, hit its turn limit or was aborted; why.
    Failed(String),
}

/// What work beside the main loop (sub-agents, side requests) reports to the session.
#[derive(Debug, Clone)]
pub enum SubagentEvent {
    /// A message of the sub-agent's own conversation (written to its sidechain).
    Message {
        /// The Agent call that runs the sub-agent.
        parent_tool_use_id: String,
        /// The message's id in the sidechain transcript.
        uuid: String,
        /// The message.
        message: Message,
    },
    /// A sub-agent response's usage: it adds to the session's usage and cost.
    Usage {
        /// The model that answered (its prices apply).
        model: String,
        /// The tokens the response used.
        usage: Usage,
    },
    /// What a sub-agent is doing, for a UI.
    Progress(SubagentProgress),
}

/// The receiving end the engine drains ([`crate::QueryEngine::with_subagent_events`]).
pub type SubagentEvents = mpsc::UnboundedReceiver<SubagentEvent>;
/// The sending end: the Agent tool, and tools that make side requests (WebFetch).
pub type SubagentSender = mpsc::UnboundedSender<SubagentEvent>;

/// A channel for [`SubagentEvent`]s: senders for the tools, the receiver for the engine.
#[must_use]
pub fn subagent_channel() -> (SubagentSender, SubagentEvents) {
    mpsc::unbounded_channel()
}
