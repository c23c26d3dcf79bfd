//! One configured server's place in the session: its connection now, which a reconnect
//! replaces and a disable drops, and what its tools reach the server through.

use std::sync::{Arc, PoisonError, RwLock};

use crate::config::ServerConfig;
use crate::server::Server;

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Started and listed its tools.
    Connected,
    /// Could not be started or reached.
    Failed {
        /// Why it is not usable, for the status line.
        error: String,
    },
    /// Turned off mid-session (`mcp_toggle`): disconnected, its tools not on offer.
    Disabled,
}

impl ServerState {
    /// The status word of the init line and `mcp_status`: `connected`, `failed` or
    /// `disabled`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Failed { .. } => "failed",
            Self::Disabled => "disabled",
        }
    }
}

#[derive(Debug)]
pub(crate) enum Connection {
    Connected(Arc<Server>),
    Failed(String),
    Disabled,
}

/// One configured server and its connection now: replaced by a reconnect, dropped
/// while disabled. Its tools reach the server through it.
#[derive(Debug)]
pub struct ServerSlot {
    name: String,
    config: ServerConfig,
    connection: RwLock<Connection>,
}

impl ServerSlot {
    /// The slot of the server `name` configured as `config`, not connected yet.
    pub(crate) fn new(name: String, config: ServerConfig) -> Self {
        Self {
            name,
            config,
            connection: RwLock::new(Connection::Disabled),
        }
    }

    /// The server's name in the config.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the server is configured.
    pub(crate) fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The live connection, unless the server is disabled or failed to start.
    #[must_use]
    pub fn server(&self) -> Option<Arc<Server>> {
        match &*self
            .connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Connection::Connected(server) => Some(Arc::clone(server)),
            Connection::Failed(_) | Connection::Disabled => None,
        }
    }

    /// Why the server cannot take calls now, when [`ServerSlot::server`] is `None`.
    #[must_use]
    pub fn unavailable(&self) -> String {
        match &*self
            .connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Connection::Disabled => format!("MCP server \"{}\" is disabled", self.name),
            Connection::Failed(error) => {
                format!("MCP server \"{}\" is not connected: {error}", self.name)
            }
            Connection::Connected(_) => format!("MCP server \"{}\" is connected", self.name),
        }
    }

    pub(crate) fn set(&self, connection: Connection) {
        // The old connection is dropped outside the lock: ending a process takes time.
        let old = std::mem::replace(
            &mut *self
                .connection
                .write()
                .unwrap_or_else(PoisonError::into_inner),
            connection,
        );
        drop(old);
    }

    pub(crate) fn state(&self) -> ServerState {
        match &*self
            .connection
            .read()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Connection::Connected(server) => server
                .failure()
                .map_or(ServerState::Connected, |error| ServerState::Failed {
                    error,
                }),
            Connection::Failed(error) => ServerState::Failed {
                error: error.clone(),
            },
            Connection::Disabled => ServerState::Disabled,
        }
    }
}
