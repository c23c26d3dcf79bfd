//! What the session asks of the program driving it: an Agent SDK answers permission
//! questions (`can_use_tool`), runs its hook callbacks (`hook_callback`) and its own MCP
//! servers (`mcp_message`). The front-end that speaks the SDK's wire implements
//! [`ClientRequests`]; the session sees only this trait.

use std::sync::Arc;

use gyre_tools::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A request the client could not answer: the wire closed, the client answered with an
/// error, or the request was cancelled. The text says which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClientError(pub String);

/// Sends one request (`{"subtype": …, …}`) to the client and waits for its answer.
pub trait ClientRequests: Send + Sync {
    /// The client's answer to `request`, or why there is none; `cancel` withdraws the
    /// request.
    fn request<'a>(
        &'a self,
        request: Value,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Value, ClientError>>;
}

/// A shared handle to the client.
pub type ClientChannel = Arc<dyn ClientRequests>;
