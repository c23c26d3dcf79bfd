//! The servers of a session: started together at session start, each within a timeout;
//! the ones that fail are reported and the session goes on without them. A server can be
//! reconnected or disabled and enabled again mid-session ([`McpServers::reconnect`],
//! [`McpServers::set_enabled`]); its tools are withdrawn from the registry while it is
//! disabled ([`gyre_tools::Tool::is_enabled`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gyre_tools::Tool;

use crate::config::{McpConfig, ServerConfig};
use crate::resources::{McpResourceTool, ResourceAction};
use crate::sdk::SdkChannel;
use crate::server::Server;
use crate::slot::{Connection, ServerSlot, ServerState};
use crate::start::StartError;
use crate::tool::McpTool;

/// How long a server may take to start and list its tools: Claude Code's default.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one tool call may take before it is cancelled.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Timeouts and the directory servers start in.
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// The directory stdio servers start in.
    pub cwd: PathBuf,
    /// How long a server may take to start and list its tools (`MCP_TIMEOUT`).
    pub startup_timeout: Duration,
    /// How long one tool call may take (`MCP_TOOL_TIMEOUT`).
    pub call_timeout: Duration,
    /// Variables every stdio server gets on top of gyre's environment (a session's
    /// settings `env`); a server's own `env` wins over them.
    pub env: Vec<(String, String)>,
    /// Proxies and extra CAs for `http` and `sse` servers.
    pub network: gyre_api::NetworkOptions,
}

impl StartOptions {
    /// The defaults, with `MCP_TIMEOUT` (start) and `MCP_TOOL_TIMEOUT` (each call) in
    /// milliseconds from the environment, as Claude Code reads them, and the proxies and
    /// CA bundles of [`gyre_api::NetworkOptions::from_lookup`].
    #[must_use]
    pub fn from_env(cwd: &Path) -> Self {
        Self::from_lookup(cwd, |name| std::env::var(name).ok())
    }

    /// [`StartOptions::from_env`] with the variables looked up through `lookup`.
    #[must_use]
    pub fn from_lookup(cwd: &Path, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let millis = |var: &str| {
            lookup(var)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        };
        Self {
            cwd: cwd.to_path_buf(),
            startup_timeout: millis("MCP_TIMEOUT").unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: millis("MCP_TOOL_TIMEOUT").unwrap_or(DEFAULT_CALL_TIMEOUT),
            env: Vec::new(),
            network: gyre_api::NetworkOptions::from_lookup(&lookup),
        }
    }
}

/// One server as `mcp_status` and `/mcp` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// The server's name in the config.
    pub name: String,
    /// `stdio`, `http`, `sse` or `sdk`.
    pub transport: &'static str,
    /// Whether it is usable.
    pub state: ServerState,
    /// The gyre names of its tools on offer (`mcp__<server>__<tool>`); empty unless
    /// connected.
    pub tools: Vec<String>,
}

/// Why a server could not be reconnected or enabled.
#[derive(Debug, thiserror::Error)]
pub enum ReconnectError {
    /// No server of that name is configured.
    #[error("no MCP server named {0:?}")]
    UnknownServer(String),
    /// It was configured but did not start again.
    #[error("MCP server {name:?} did not start: {source}")]
    Start {
        /// The server's name.
        name: String,
        /// Why.
        source: StartError,
    },
}

#[derive(Debug)]
struct Entry {
    slot: Arc<ServerSlot>,
    /// Its tools as first listed; the registry holds them for the whole session.
    tools: Vec<Arc<McpTool>>,
}

/// The session's servers. Dropping the last handle to a server's connection (this set,
/// or a call running on it) ends its process group.
#[derive(Debug, Default)]
pub struct McpServers {
    entries: Vec<Entry>,
    options: Option<StartOptions>,
}

async fn connect(
    name: &str,
    config: &ServerConfig,
    options: &StartOptions,
    sdk: Option<SdkChannel>,
) -> Result<Server, StartError> {
    let with_env;
    let config = match config {
        ServerConfig::Stdio { command, args, env } if !options.env.is_empty() => {
            let mut merged: std::collections::BTreeMap<String, String> =
                options.env.iter().cloned().collect();
            merged.extend(env.clone());
            with_env = ServerConfig::Stdio {
                command: command.clone(),
                args: args.clone(),
                env: merged,
            };
            &with_env
        }
        other => other,
    };
    Server::connect(
        name,
        config,
        &options.cwd,
        options.startup_timeout,
        options.call_timeout,
        &options.network,
        sdk,
    )
    .await
}

impl McpServers {
    /// No servers.
    #[must_use]
    pub fn none() -> Self {
        Self::default()
    }

    /// Starts every server of `config` at once and waits for each to be connected,
    /// failed, or out of time. SDK servers fail: see [`McpServers::start_with_sdk`].
    pub async fn start(config: &McpConfig, options: &StartOptions) -> Self {
        Self::start_with_sdk(config, options, |_| None).await
    }

    /// [`McpServers::start`], with `sdk` giving the channel of each `{"type": "sdk"}`
    /// server by name (the CLI bridges it to `mcp_message` control requests); one it
    /// gives none for fails.
    pub async fn start_with_sdk(
        config: &McpConfig,
        options: &StartOptions,
        mut sdk: impl FnMut(&str) -> Option<SdkChannel>,
    ) -> Self {
        let channels: Vec<Option<SdkChannel>> = config
            .servers()
            .iter()
            .map(|(name, server)| match server {
                ServerConfig::Sdk => sdk(name),
                ServerConfig::Stdio { .. }
                | ServerConfig::Http { .. }
                | ServerConfig::Sse { .. } => None,
            })
            .collect();
        let starts =
            config
                .servers()
                .iter()
                .zip(channels)
                .map(|((name, server), channel)| async move {
                    let outcome = connect(name, server, options, channel).await;
                    let slot = Arc::new(ServerSlot::new(name.clone(), server.clone()));
                    let tools = match outcome {
                        Ok(server) => {
                            let server = Arc::new(server);
                            let tools = server
                                .tools()
                                .iter()
                                .map(|info| Arc::new(McpTool::new(Arc::clone(&slot), info)))
                                .collect();
                            slot.set(Connection::Connected(server));
                            tools
                        }
                        Err(e) => {
                            slot.set(Connection::Failed(e.to_string()));
                            Vec::new()
                        }
                    };
                    Entry { slot, tools }
                });
        Self {
            entries: futures::future::join_all(starts).await,
            options: Some(options.clone()),
        }
    }

    /// The tools of the servers that connected at start, for the registry; with
    /// `ListMcpResourcesTool` and `ReadMcpResourceTool` when some server offers
    /// resources. Each is on offer ([`Tool::is_enabled`]) while its server is
    /// connected and still lists it.
    #[must_use]
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = self
            .entries
            .iter()
            .flat_map(|e| e.tools.iter().map(|t| Arc::clone(t) as Arc<dyn Tool>))
            .collect();
        let with_resources: Vec<Arc<ServerSlot>> = self
            .entries
            .iter()
            .filter(|e| e.slot.server().is_some_and(|s| s.offers_resources()))
            .map(|e| Arc::clone(&e.slot))
            .collect();
        if !with_resources.is_empty() {
            tools.push(Arc::new(McpResourceTool::new(
                ResourceAction::List,
                with_resources.clone(),
            )));
            tools.push(Arc::new(McpResourceTool::new(
                ResourceAction::Read,
                with_resources,
            )));
        }
        tools
    }

    /// A connected server by name.
    #[must_use]
    pub fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.slot(name).and_then(|slot| slot.server())
    }

    fn slot(&self, name: &str) -> Option<&Arc<ServerSlot>> {
        self.entries
            .iter()
            .map(|e| &e.slot)
            .find(|slot| slot.name() == name)
    }

    /// Whether a server of that name is configured.
    #[must_use]
    pub fn contains(&self, name: &str) -> bool {
        self.slot(name).is_some()
    }

    /// The transport of the server called `name` (`stdio`, `http`, `sse`, `sdk`).
    #[must_use]
    pub fn transport(&self, name: &str) -> Option<&'static str> {
        self.slot(name).map(|slot| slot.config().kind())
    }

    /// Ends the server's connection (its process, for a stdio server) and connects
    /// again, enabling it if it was disabled; its tools then reach the new connection.
    /// An `sdk` server needs a fresh `sdk` channel. A server that fails to start stays
    /// failed, with the reason in [`McpServers::status`].
    ///
    /// Tools the server did not list when the session started are not offered: the
    /// registry is built once.
    ///
    /// # Errors
    /// An unknown name, or why the server did not start.
    pub async fn reconnect(
        &self,
        name: &str,
        sdk: Option<SdkChannel>,
    ) -> Result<(), ReconnectError> {
        let slot = self
            .slot(name)
            .ok_or_else(|| ReconnectError::UnknownServer(name.to_owned()))?;
        // The old process ends before the new one starts: a server holding a lock or a
        // port must not meet itself.
        slot.set(Connection::Failed("reconnecting".to_owned()));
        let options = self
            .options
            .clone()
            .unwrap_or_else(|| StartOptions::from_env(Path::new(".")));
        match connect(name, slot.config(), &options, sdk).await {
            Ok(server) => {
                slot.set(Connection::Connected(Arc::new(server)));
                Ok(())
            }
            Err(source) => {
                slot.set(Connection::Failed(source.to_string()));
                Err(ReconnectError::Start {
                    name: name.to_owned(),
                    source,
                })
            }
        }
    }

    /// `false`: disconnects the server and withdraws its tools. `true`: connects it
    /// again if it is not connected ([`McpServers::reconnect`]).
    ///
    /// # Errors
    /// An unknown name, or why the server did not start.
    pub async fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
        sdk: Option<SdkChannel>,
    ) -> Result<(), ReconnectError> {
        let slot = self
            .slot(name)
            .ok_or_else(|| ReconnectError::UnknownServer(name.to_owned()))?;
        if !enabled {
            slot.set(Connection::Disabled);
            return Ok(());
        }
        if slot.state() == ServerState::Connected {
            return Ok(());
        }
        self.reconnect(name, sdk).await
    }

    /// Every server, its state now (a server that died since it started is `failed`)
    /// and its tools on offer.
    #[must_use]
    pub fn status(&self) -> Vec<ServerStatus> {
        self.entries
            .iter()
            .map(|entry| {
                let state = entry.slot.state();
                let tools = match state {
                    ServerState::Connected | ServerState::Failed { .. } => entry
                        .tools
                        .iter()
                        .filter(|t| t.is_enabled())
                        .map(|t| t.name().into_owned())
                        .collect(),
                    ServerState::Disabled => Vec::new(),
                };
                ServerStatus {
                    name: entry.slot.name().to_owned(),
                    transport: entry.slot.config().kind(),
                    state,
                    tools,
                }
            })
            .collect()
    }

    /// Whether no server is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
