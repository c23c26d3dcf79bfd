//! The servers of a session: started together at session start, each within a timeout;
//! the ones that fail are reported and the session goes on without them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gyre_tools::Tool;

use crate::config::{McpConfig, ServerConfig};
use crate::resources::{McpResourceTool, ResourceAction};
use crate::sdk::SdkChannel;
use crate::server::Server;
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
}

impl StartOptions {
    /// The defaults, with `MCP_TIMEOUT` (start) and `MCP_TOOL_TIMEOUT` (each call) in
    /// milliseconds from the environment, as Claude Code reads them.
    #[must_use]
    pub fn from_env(cwd: &Path) -> Self {
        let millis = |var: &str| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        };
        Self {
            cwd: cwd.to_path_buf(),
            startup_timeout: millis("MCP_TIMEOUT").unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: millis("MCP_TOOL_TIMEOUT").unwrap_or(DEFAULT_CALL_TIMEOUT),
        }
    }
}

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
}

impl ServerState {
    /// The status word of the init line and `mcp_status`: `connected` or `failed`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Failed { .. } => "failed",
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
    /// The gyre names of its tools (`mcp__<server>__<tool>`); empty unless connected.
    pub tools: Vec<String>,
}

#[derive(Debug)]
struct Entry {
    name: String,
    transport: &'static str,
    outcome: Result<(Arc<Server>, Vec<Arc<McpTool>>), String>,
}

/// The session's servers. Dropping the last handle to a server (this set and the tools
/// in the registry) ends its process group.
#[derive(Debug, Default)]
pub struct McpServers {
    entries: Vec<Entry>,
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
                    let outcome = Server::connect(
                        name,
                        server,
                        &options.cwd,
                        options.startup_timeout,
                        options.call_timeout,
                        channel,
                    )
                    .await
                    .map(|server| {
                        let server = Arc::new(server);
                        let tools = server
                            .tools()
                            .iter()
                            .map(|info| Arc::new(McpTool::new(Arc::clone(&server), info)))
                            .collect();
                        (server, tools)
                    })
                    .map_err(|e| e.to_string());
                    Entry {
                        name: name.clone(),
                        transport: server.kind(),
                        outcome,
                    }
                });
        Self {
            entries: futures::future::join_all(starts).await,
        }
    }

    /// The tools of the connected servers, for the registry; with
    /// `ListMcpResourcesTool` and `ReadMcpResourceTool` when some server offers
    /// resources.
    #[must_use]
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        let connected = self.entries.iter().filter_map(|e| e.outcome.as_ref().ok());
        let mut tools: Vec<Arc<dyn Tool>> = connected
            .clone()
            .flat_map(|(_, tools)| tools.iter().map(|t| Arc::clone(t) as Arc<dyn Tool>))
            .collect();
        let with_resources: Vec<Arc<Server>> = connected
            .map(|(server, _)| server)
            .filter(|server| server.offers_resources())
            .cloned()
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
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.entries
            .iter()
            .filter(|e| e.name == name)
            .find_map(|e| e.outcome.as_ref().ok().map(|(server, _)| server))
    }

    /// Every server, its state now (a server that died since it started is `failed`)
    /// and its tools.
    #[must_use]
    pub fn status(&self) -> Vec<ServerStatus> {
        self.entries
            .iter()
            .map(|entry| {
                let (state, tools) = match &entry.outcome {
                    Ok((server, tools)) => (
                        server.failure().map_or(ServerState::Connected, |error| {
                            ServerState::Failed { error }
                        }),
                        tools.iter().map(|t| t.name().to_owned()).collect(),
                    ),
                    Err(error) => (
                        ServerState::Failed {
                            error: error.clone(),
                        },
                        Vec::new(),
                    ),
                };
                ServerStatus {
                    name: entry.name.clone(),
                    transport: entry.transport,
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
