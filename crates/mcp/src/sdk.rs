//! Servers living in the Agent SDK program that drives gyre (`{"type": "sdk"}`). Their
//! JSON-RPC travels inside the stream-json control protocol (`mcp_message` control
//! requests), which the CLI speaks; this module is the seam between the two: a pair of
//! channels of JSON-RPC messages as `serde_json::Value`s.

use futures::channel::mpsc::{self, SendError, UnboundedReceiver, UnboundedSender};
use futures::{SinkExt, StreamExt, future};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::ClientConfig;
use rmcp::service::{RunningService, RxJsonRpcMessage, TxJsonRpcMessage};
use serde_json::Value;

use crate::start::{StartError, handshake};

/// The client side of an SDK server's connection, handed to [`crate::McpServers`].
#[derive(Debug)]
pub struct SdkChannel {
    to_server: UnboundedSender<Value>,
    from_server: UnboundedReceiver<Value>,
}

/// The control-protocol side: what the CLI forwards.
#[derive(Debug)]
pub struct SdkBridge {
    /// gyre's JSON-RPC messages for the server: send each as the `message` of an
    /// `mcp_message` control request.
    pub to_server: UnboundedReceiver<Value>,
    /// The server's JSON-RPC messages (the `mcp_response` of each control response)
    /// go here. Dropping it closes the connection.
    pub from_server: UnboundedSender<Value>,
}

/// A connected pair: the channel for the client, the bridge for the control protocol.
#[must_use]
pub fn sdk_channel() -> (SdkChannel, SdkBridge) {
    let (to_server_tx, to_server_rx) = mpsc::unbounded();
    let (from_server_tx, from_server_rx) = mpsc::unbounded();
    (
        SdkChannel {
            to_server: to_server_tx,
            from_server: from_server_rx,
        },
        SdkBridge {
            to_server: to_server_rx,
            from_server: from_server_tx,
        },
    )
}

/// Why a message could not reach an SDK server.
#[derive(Debug, thiserror::Error)]
pub enum SdkSendError {
    /// The SDK side of the channel is gone.
    #[error("the SDK connection is closed")]
    Closed(#[from] SendError),
    /// The message could not be turned into JSON.
    #[error("the message could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

impl SdkChannel {
    /// The MCP handshake over this channel. Messages from the server that are not
    /// JSON-RPC are dropped (logged), as a stdio server's stray lines would be.
    pub(crate) async fn handshake(
        self,
        timeout: Duration,
    ) -> Result<RunningService<RoleClient, ClientConfig>, StartError> {
        let sink = self.to_server.sink_map_err(SdkSendError::from).with(
            |message: TxJsonRpcMessage<RoleClient>| {
                future::ready(serde_json::to_value(message).map_err(SdkSendError::from))
            },
        );
        let stream = self.from_server.filter_map(|value| {
            future::ready(
                match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value) {
                    Ok(message) => Some(message),
                    Err(e) => {
                        tracing::warn!("dropped a message from an SDK MCP server: {e}");
                        None
                    }
                },
            )
        });
        handshake((Box::pin(sink), Box::pin(stream)), timeout).await
    }
}
