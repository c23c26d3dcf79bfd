//! Hooks that can stop or redirect the loop.

use std::path::Path;
use std::sync::Arc;

use gyre_compact::Trigger;
use gyre_protocol::Message;
use gyre_tools::{BoxFuture, ToolCallOutcome};

/// What a stop hook decided when the model finished without calling tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopHookOutcome {
    /// Let the turn end.
    Allow,
    /// Do not end: these errors go to the model and the loop goes on (`stop_hook_blocking`).
    Block(Vec<String>),
    /// End the query now, whatever else would happen (`stop_hook_prevented`).
    Prevent(String),
}

/// Runs when the model ends a turn without tool calls.
pub trait StopHook: Send + Sync {
    /// `stop_hook_active` is true when this turn was itself caused by a blocking hook,
    /// so a hook can avoid blocking forever.
    fn on_stop<'a>(
        &'a self,
        messages: &'a [Message],
        stop_hook_active: bool,
    ) -> BoxFuture<'a, StopHookOutcome>;
}

/// What a tool hook decided after one call (Claude Code's PostToolUse hooks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AfterToolOutcome {
    /// Text a PreToolUse hook gave for the model about this call (`additionalContext`),
    /// shown after the call's result like PostToolUse context.
    pub pre_tool_context: Vec<String>,
    /// Text for the model, shown after the call's result (`additionalContext`).
    pub additional_context: Vec<String>,
    /// The hook objected to what the call did (`decision: "block"`; the call already
    /// ran): the reason goes to the model after the result.
    pub block_reason: Option<String>,
    /// Stop the query after this round of tools (`hook_stopped`).
    pub stop: Option<String>,
}

/// Runs after each tool call. What it adds goes to the model with the round's results,
/// after them, as `<system-reminder>` text.
pub trait ToolHook: Send + Sync {
    /// Looks at a finished call: context for the model, an objection, or a stop.
    fn after_tool<'a>(&'a self, outcome: &'a ToolCallOutcome) -> BoxFuture<'a, AfterToolOutcome>;
}

/// What PreCompact hooks gave for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreCompactOutcome {
    /// Instructions added to the summary request, after the user's own.
    pub instructions: Vec<String>,
}

/// Runs right before a compaction asks for its summary (Claude Code's PreCompact
/// hooks): for automatic and reactive compactions (`Trigger::Auto`,
/// `Trigger::Reactive`) and `/compact` (`Trigger::Manual`).
pub trait CompactHook: Send + Sync {
    /// `custom_instructions`: what the user gave `/compact`, if anything.
    fn before_compact<'a>(
        &'a self,
        trigger: Trigger,
        custom_instructions: Option<&'a str>,
    ) -> BoxFuture<'a, PreCompactOutcome>;

    /// The summary came back (Claude Code's PostCompact hooks); nothing it does
    /// changes the compaction.
    fn after_compact<'a>(&'a self, trigger: Trigger, summary: &'a str) -> BoxFuture<'a, ()> {
        let _ = (trigger, summary);
        Box::pin(async {})
    }
}

/// Runs when a sub-agent (the Agent tool) starts and when it would finish (Claude
/// Code's SubagentStart and SubagentStop hooks).
pub trait SubagentHook: Send + Sync {
    /// The sub-agent `agent_id` of type `agent_type` starts: text for it, added to its
    /// prompt.
    fn on_start<'a>(&'a self, agent_id: &'a str, agent_type: &'a str)
    -> BoxFuture<'a, Vec<String>>;

    /// The sub-agent would finish, as [`StopHook::on_stop`]; `transcript` is its
    /// sidechain transcript, when it has a file.
    fn on_stop<'a>(
        &'a self,
        agent_id: &'a str,
        agent_type: &'a str,
        transcript: Option<&'a Path>,
        messages: &'a [Message],
        stop_hook_active: bool,
    ) -> BoxFuture<'a, StopHookOutcome>;
}

/// A [`SubagentHook`]'s stop as the [`StopHook`] of one sub-agent's query.
pub(crate) struct SubagentStop {
    pub hook: Arc<dyn SubagentHook>,
    pub agent_id: String,
    pub agent_type: String,
    pub transcript: Option<std::path::PathBuf>,
}

impl StopHook for SubagentStop {
    fn on_stop<'a>(
        &'a self,
        messages: &'a [Message],
        stop_hook_active: bool,
    ) -> BoxFuture<'a, StopHookOutcome> {
        self.hook.on_stop(
            &self.agent_id,
            &self.agent_type,
            self.transcript.as_deref(),
            messages,
            stop_hook_active,
        )
    }
}
