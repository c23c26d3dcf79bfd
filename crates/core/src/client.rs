//! What the session asks of the program driving it: an Agent SDK runs its hook callbacks
//! (`hook_callback`) and its own MCP servers (`mcp_message`). The front-end that speaks
//! the SDK's wire implements [`ClientRequests`]; the session sees only this trait and
//! builds no wire message. (Permission questions are events, not requests:
//! [`crate::approvals`].)

use std::sync::Arc;

use gyre_tools::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A request the client could not answer: the wire closed, the client answered with an
/// error, or the request was cancelled. The text says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(pub String);

/// The requests a session sends its client, each waiting for the answer; `cancel`
/// withdraws one.
pub trait ClientRequests: Send + Sync {
    /// Runs the SDK's hook callback `callback_id` on `input` (the hook's JSON input, as
    /// settings commands get it); the answer is the hook's JSON output.
    fn hook_callback<'a>(
        &'a self,
        callback_id: &'a str,
        input: &'a Value,
        tool_use_id: Option<&'a str>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ClientError>>;

    /// Hands a JSON-RPC `message` to the SDK's own MCP server `server`; the answer is
    /// the server's JSON-RPC reply.
    fn mcp_message<'a>(
        &'a self,
        server: &'a str,
        message: Value,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ClientError>>;
}

/// A shared handle to the client.
pub type ClientChannel = Arc<dyn ClientRequests>;
