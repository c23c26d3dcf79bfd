//! gyre's Agent Client Protocol front-end: `gyre acp` speaks ACP (JSON-RPC over stdio)
//! so Zed, JetBrains and other ACP editors run gyre directly (docs/acp.md).
//!
//! The `agent-client-protocol` crate holds the wire; [`agent`] answers its requests
//! over gyre-core sessions, one task per session ([`worker`]); [`updates`],
//! [`permission`] and [`prompt`] translate between gyre's events, questions and
//! messages and ACP's. Nothing here knows how a turn runs: this crate only translates.

mod agent;
mod editor;
mod lines;
mod permission;
mod prompt;
mod updates;
mod worker;

use std::rc::Rc;

use agent_client_protocol as acp;
use gyre_core::{Environment, SessionOptions};

/// The connection, set once it exists (it is built from the agent, which needs it to
/// send its notifications and requests).
type Connection = Rc<std::cell::OnceCell<acp::AgentSideConnection>>;

/// Why `gyre acp` stopped.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    /// stdin or stdout failed, or the connection broke.
    #[error("the ACP connection failed: {0}")]
    Connection(String),
}

/// Serves ACP on stdin and stdout until the client closes stdin. Each session starts
/// from `base` (what `gyre acp` was given) in the folder the client names, with that
/// folder's settings; `env` is the process's environment, read once.
///
/// # Errors
/// The connection failed (not a failed request: those are answered with errors).
pub async fn run(base: SessionOptions, env: Environment) -> Result<(), AcpError> {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async move {
            let stdio = lines::stdio();
            let conn: Connection = Rc::new(std::cell::OnceCell::new());
            let gyre = agent::GyreAgent::new(Rc::clone(&conn), base, env);
            let (connection, serve) =
                acp::AgentSideConnection::new(gyre, stdio.outgoing, stdio.incoming, |task| {
                    tokio::task::spawn_local(task);
                });
            // Set once, before anything is read from stdin.
            let _ = conn.set(connection);
            let read = tokio::task::spawn_local(stdio.read);
            let write = tokio::task::spawn_local(stdio.write);
            let served = serve.await;
            read.abort();
            // `serve` owned the connection's output; with it done, what it wrote drains.
            let _ = write.await;
            served.map_err(|e| AcpError::Connection(e.to_string()))
        })
        .await
}
