//! Hooks that can stop or redirect the loop.

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

/// Runs after each tool call; returning `Some(reason)` stops the query after this
/// round of tools (`hook_stopped`).
pub trait ToolHook: Send + Sync {
    /// Looks at a finished call; `Some(reason)` stops the query after this round.
    fn after_tool<'a>(&'a self, outcome: &'a ToolCallOutcome) -> BoxFuture<'a, Option<String>>;
}
