//! MCP client for gyre: the tools of Model Context Protocol servers, offered to the model
//! like built-in tools.
//!
//! - [`McpConfig`]: which servers, in Claude Code's `{"mcpServers": {…}}` format, from
//!   `--mcp-config` (a file or inline JSON) and `.mcp.json`.
//! - [`McpServers::start`]: starts every server at once (stdio child processes,
//!   streamable HTTP, legacy HTTP+SSE), each within a timeout; a failing one is reported in
//!   [`McpServers::status`], never fatal.
//! - [`McpTool`]: one server tool as a [`gyre_tools::Tool`] named
//!   `mcp__<server>__<tool>`; results (text, images, resources, structured content,
//!   `isError`) become tool outputs, and it is on offer only while its server is
//!   connected ([`McpServers::reconnect`], [`McpServers::set_enabled`]); a call honours abort and a timeout, and a server
//!   that died answers with an error naming it.
//! - [`sdk_channel`]: the seam for `{"type": "sdk"}` servers, whose JSON-RPC the CLI
//!   carries in `mcp_message` control requests ([`McpServers::start_with_sdk`]).
//! - [`McpResourceTool`]: `ListMcpResourcesTool` and `ReadMcpResourceTool`, the
//!   servers' resources for the model, when some server offers them.
//!
//! Built on `rmcp`, the official Rust SDK.
//!
//! **Architecture invariant:** depends on gyre-protocol and gyre-tools only; it knows
//! nothing of the loop, the model or the CLI. Child processes live in their own process
//! group, ended when the last handle to their server is dropped.
//!
//! ```no_run
//! use gyre_mcp::{McpConfig, McpServers, StartOptions};
//! use gyre_tools::ToolRegistry;
//!
//! # async fn demo() -> Result<(), gyre_mcp::ConfigError> {
//! let config = McpConfig::parse(
//!     "inline",
//!     r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
//! )?;
//! let servers = McpServers::start(&config, &StartOptions::from_env(".".as_ref())).await;
//! for status in servers.status() {
//!     println!("{}: {}", status.name, status.state.as_str());
//! }
//! let mut registry = ToolRegistry::with_default_tools();
//! for tool in servers.tools() {
//!     registry.register(tool);
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod config;
mod resources;
mod result;
mod sdk;
mod server;
mod servers;
mod slot;
mod sse;
mod start;
mod tool;

pub use config::{ConfigError, McpConfig, ServerConfig, ServerConfigError};
pub use resources::{McpResourceTool, ResourceAction};
pub use result::{NO_CONTENT, to_output};
pub use sdk::{SdkBridge, SdkChannel, SdkSendError, sdk_channel};
pub use server::Server;
pub use servers::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, McpServers, ReconnectError, ServerStatus,
    StartOptions,
};
pub use slot::{ServerSlot, ServerState};
pub use sse::SseSendError;
pub use start::StartError;
pub use tool::{McpTool, tool_name};

/// The model types of `rmcp` that appear in this crate's API (resources, tool infos).
pub use rmcp::model;
