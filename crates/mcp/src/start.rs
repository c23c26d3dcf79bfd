//! Starting a connection: the MCP handshake every transport ends with, and why a start
//! fails.

use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::RunningService;
use rmcp::transport::IntoTransport;
use rmcp::{RoleClient, ServiceExt};

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The stdio server's program could not be started.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The program, as configured.
        command: String,
        /// The error of the spawn.
        source: std::io::Error,
    },
    /// A configured HTTP header is not a valid header.
    #[error("header {name:?}: {message}")]
    Header {
        /// The header's name.
        name: String,
        /// Why it cannot be sent.
        message: String,
    },
    /// The MCP initialize exchange failed.
    #[error("the MCP handshake failed: {message}{stderr}")]
    Handshake {
        /// The client's error.
        message: String,
        /// The tail of the server's stderr, if it wrote any.
        stderr: String,
    },
    /// Listing the server's tools failed.
    #[error("listing its tools failed: {0}")]
    ListTools(String),
    /// The server did not answer within the startup timeout.
    #[error("no answer within {}s (raise MCP_TIMEOUT, in milliseconds){stderr}", timeout.as_secs_f64())]
    Timeout {
        /// How long it was given (`MCP_TIMEOUT`).
        timeout: Duration,
        /// The tail of the server's stderr, if it wrote any.
        stderr: String,
    },
    /// An `sse` server's event stream could not be opened, or sent no `endpoint`.
    #[error("the SSE connection failed: {0}")]
    Sse(String),
    /// The proxy or CA settings cannot make an HTTP client.
    #[error("{0}")]
    Network(#[from] gyre_api::NetworkError),
    /// The HTTP client could not be built.
    #[error("the HTTP client could not be built: {0}")]
    Client(String),
    /// An `sdk` server in a session without the SDK control protocol.
    #[error(
        "needs the SDK control protocol (mcp_message control requests), which this session does not carry"
    )]
    NeedsSdkControl,
}

/// The MCP handshake over `transport`, within `timeout`.
pub(crate) async fn handshake<T, E, A>(
    transport: T,
    timeout: Duration,
) -> Result<RunningService<RoleClient, ClientConfig>, StartError>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    match tokio::time::timeout(timeout, client_config().serve(transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(StartError::Handshake {
            message: handshake_message(&e),
            stderr: String::new(),
        }),
        Err(_) => Err(StartError::Timeout {
            timeout,
            stderr: String::new(),
        }),
    }
}

/// The client's error and, when an HTTP transport's request failed, that failure's whole
/// cause (the client's own text stops at "error sending request"): a certificate no
/// trusted CA issued says which variable adds one.
fn handshake_message(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    // The transport's error is a field of the client's, not its source.
    let mut source: Option<&(dyn std::error::Error + 'static)> = match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => Some(error),
        _ => None,
    };
    while let Some(cause) = source {
        // rmcp keeps the client's error as a field, not a source.
        let http = cause.downcast_ref::<reqwest::Error>().or_else(|| {
            match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(http)) => Some(http),
                _ => None,
            }
        });
        if let Some(http) = http {
            return format!("{e}: {}", gyre_api::describe_transport_error(http));
        }
        source = cause.source();
    }
    e.to_string()
}

impl StartError {
    /// The same error with the server's last stderr line.
    pub(crate) fn with_stderr(self, note: String) -> Self {
        match self {
            Self::Handshake { message, .. } => Self::Handshake {
                message,
                stderr: note,
            },
            Self::Timeout { timeout, .. } => Self::Timeout {
                timeout,
                stderr: note,
            },
            other @ (Self::Spawn { .. }
            | Self::Header { .. }
            | Self::ListTools(_)
            | Self::Sse(_)
            | Self::Network(_)
            | Self::Client(_)
            | Self::NeedsSdkControl) => other,
        }
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("gyre", env!("CARGO_PKG_VERSION")),
    )
}
