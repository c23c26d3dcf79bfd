//! The session's MCP servers: which ones (`--mcp-config`, the project's `.mcp.json`),
//! started before the session is built, and what the init line says about them. An
//! Agent SDK program's own servers (`{"type": "sdk"}`) are reached through the control
//! protocol: each JSON-RPC message is an `mcp_message` control request.

use std::path::Path;

use futures::StreamExt;
use gyre_mcp::{
    McpConfig, McpServers, SdkBridge, SdkChannel, ServerConfig, ServerState, ServerStatus,
    StartOptions,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::CoreError;
use crate::client::ClientChannel;
use crate::env::Environment;
use crate::options::SessionOptions;

/// Which of the project's `.mcp.json` servers the user approved, Claude Code's keys.
/// Read from the user's own files only (`~/.gyre/settings.json`,
/// `.gyre/settings.local.json`): a cloned repository must not be able to start commands
/// by shipping both a `.mcp.json` and a shared settings file approving it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProjectApproval {
    #[serde(default)]
    enable_all_project_mcp_servers: bool,
    #[serde(default)]
    enabled_mcpjson_servers: Vec<String>,
    #[serde(default)]
    disabled_mcpjson_servers: Vec<String>,
}

impl ProjectApproval {
    fn load(gyre_home: &Path, cwd: &Path) -> Self {
        let mut approval = Self::default();
        for path in [
            gyre_home.join("settings.json"),
            cwd.join(".gyre").join("settings.local.json"),
        ] {
            // Unreadable or invalid files are reported when the settings are loaded.
            let Some(file) = gyre_tools::read_config_file(&path)
                .ok()
                .and_then(|text| serde_json::from_str::<Self>(&text).ok())
            else {
                continue;
            };
            approval.enable_all_project_mcp_servers |= file.enable_all_project_mcp_servers;
            approval
                .enabled_mcpjson_servers
                .extend(file.enabled_mcpjson_servers);
            approval
                .disabled_mcpjson_servers
                .extend(file.disabled_mcpjson_servers);
        }
        approval
    }

    fn allows(&self, name: &str) -> bool {
        let named = |list: &[String]| list.iter().any(|n| n == name);
        !named(&self.disabled_mcpjson_servers)
            && (self.enable_all_project_mcp_servers || named(&self.enabled_mcpjson_servers))
    }
}

/// The servers this session uses: the project's approved `.mcp.json` servers (unless
/// `--strict-mcp-config`), then each `--mcp-config` in order, then the SDK's from
/// `initialize` (`mcpServers`, then its in-process `sdkMcpServers`), later ones
/// replacing servers of the same name.
///
/// # Errors
/// An unreadable or invalid config, with the file and what is wrong.
fn collect(cli: &SessionOptions, cwd: &Path, gyre_home: &Path) -> Result<McpConfig, CoreError> {
    let mut config = McpConfig::default();
    let config_root = cli.project_config_root.as_deref().unwrap_or(cwd);
    let project_file = config_root.join(".mcp.json");
    // An untrusted folder's servers are not started (`trust`; main says so).
    if !cli.strict_mcp_config
        && project_file.is_file()
        && crate::trust::is_trusted(gyre_home, config_root)
    {
        let mut project =
            McpConfig::from_file(&project_file).map_err(|e| CoreError::Invalid(e.to_string()))?;
        let approval = ProjectApproval::load(gyre_home, config_root);
        project.retain(|name, _| {
            let approved = approval.allows(name);
            if !approved {
                eprintln!(
                    "gyre: MCP server \"{name}\" in .mcp.json was not started: approve it with \"enabledMcpjsonServers\": [\"{name}\"] (or \"enableAllProjectMcpServers\": true) in ~/.gyre/settings.json or .gyre/settings.local.json"
                );
            }
            approved
        });
        config.merge(project);
    }
    // Plugins' servers (not a `--plugin-dir-no-mcp` one's).
    for plugin in crate::plugins::resolve(&cli.plugins, cwd)? {
        if let Some(text) = crate::plugins::mcp_servers(&plugin)? {
            let origin = plugin.dir.join(".mcp.json").display().to_string();
            let more =
                McpConfig::parse(&origin, &text).map_err(|e| CoreError::Invalid(e.to_string()))?;
            config.merge(more);
        }
    }
    for arg in &cli.mcp_config {
        let more = McpConfig::from_arg(arg)
            .map_err(|e| CoreError::Invalid(format!("--mcp-config: {e}")))?;
        config.merge(more);
    }
    let init = &cli.initialize;
    if let Some(servers) = &init.mcp_servers {
        let text = json!({ "mcpServers": servers }).to_string();
        let more = McpConfig::parse("initialize's mcpServers", &text)
            .map_err(|e| CoreError::Invalid(e.to_string()))?;
        config.merge(more);
    }
    for name in &init.sdk_mcp_servers {
        config.insert(name.clone(), ServerConfig::Sdk);
    }
    Ok(config)
}

/// Starts the session's servers; each one that fails gets a line on stderr and the
/// session goes on without it. Without an Agent SDK on stdin, `{"type": "sdk"}` servers
/// fail.
///
/// # Errors
/// An unreadable or invalid config.
pub async fn start(
    cli: &SessionOptions,
    cwd: &Path,
    gyre_home: &Path,
    env: &Environment,
) -> Result<McpServers, CoreError> {
    start_with_sdk(cli, cwd, gyre_home, env, None).await
}

/// [`start`], with the SDK's `{"type": "sdk"}` servers reached over `sdk`.
///
/// # Errors
/// An unreadable or invalid config.
pub async fn start_with_sdk(
    cli: &SessionOptions,
    cwd: &Path,
    gyre_home: &Path,
    env: &Environment,
    sdk: Option<&ClientChannel>,
) -> Result<McpServers, CoreError> {
    let config = collect(cli, cwd, gyre_home)?;
    if config.is_empty() {
        return Ok(McpServers::none());
    }
    let mut options = StartOptions::from_lookup(cwd, |name| env.var(name));
    options.env = env.child_vars();
    let servers = McpServers::start_with_sdk(&config, &options, |name: &str| {
        Some(sdk_channel(name, sdk?))
    })
    .await;
    for status in servers.status() {
        match &status.state {
            ServerState::Failed { error } => eprintln!(
                "gyre: MCP server \"{}\" ({}) failed: {error}; continuing without it",
                status.name, status.transport
            ),
            ServerState::Connected | ServerState::Disabled => {}
        }
    }
    Ok(servers)
}

/// A channel to the SDK's server `name`, bridged to `mcp_message` control requests.
pub fn sdk_channel(name: &str, control: &ClientChannel) -> SdkChannel {
    let (client, bridge) = gyre_mcp::sdk_channel();
    tokio::spawn(bridge_sdk_server(name.to_owned(), bridge, control.clone()));
    client
}

/// Carries one SDK server's JSON-RPC over the control protocol: each message gyre's
/// client sends goes to the SDK ([`crate::ClientRequests::mcp_message`]), and its reply
/// goes back to the client when the message was a request (a notification's answer is
/// only an acknowledgement). A request the SDK cannot answer
/// (an error response, stdin closed) gets a JSON-RPC error, so the call fails instead of
/// waiting. Messages travel at once, each in its own task: one slow tool does not hold
/// up the others.
async fn bridge_sdk_server(name: String, bridge: SdkBridge, channel: ClientChannel) {
    let SdkBridge {
        mut to_server,
        from_server,
    } = bridge;
    while let Some(message) = to_server.next().await {
        let name = name.clone();
        let channel = channel.clone();
        let from_server = from_server.clone();
        tokio::spawn(async move {
            let request_id = message
                .get("method")
                .and_then(|_| message.get("id"))
                .cloned();
            let answer = channel
                .mcp_message(&name, message, &CancellationToken::new())
                .await;
            let Some(id) = request_id else {
                return;
            };
            let reply = match answer {
                Ok(response) => response,
                Err(e) => rpc_error(
                    &id,
                    &format!("MCP server \"{name}\" in the SDK did not answer: {e}"),
                ),
            };
            // A closed client has gone away with its session: nothing waits for this.
            let _ = from_server.unbounded_send(reply);
        });
    }
}

/// A JSON-RPC internal error (-32603) answering request `id`.
fn rpc_error(id: &Value, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
}

/// What `/mcp` prints: each server, its transport and state, and its tools.
#[must_use]
pub fn status_report(servers: &[ServerStatus]) -> String {
    if servers.is_empty() {
        return "No MCP servers. Add them with --mcp-config or a .mcp.json in the project."
            .to_owned();
    }
    let mut out = String::from("MCP servers");
    for server in servers {
        out.push_str(&format!(
            "\n  {} ({}): {}",
            server.name,
            server.transport,
            server.state.as_str()
        ));
        match &server.state {
            ServerState::Failed { error } => out.push_str(&format!(" — {error}")),
            ServerState::Disabled => {}
            ServerState::Connected => {
                out.push_str(&format!(", {} tools", server.tools.len()));
                for tool in &server.tools {
                    out.push_str(&format!("\n    {tool}"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_lists_servers_states_and_tools() {
        let report = status_report(&[
            ServerStatus {
                name: "test".into(),
                transport: "stdio",
                state: ServerState::Connected,
                tools: vec!["mcp__test__echo".into()],
            },
            ServerStatus {
                name: "web".into(),
                transport: "http",
                state: ServerState::Failed {
                    error: "no answer".into(),
                },
                tools: vec![],
            },
        ]);
        assert_eq!(
            report,
            "MCP servers\n  test (stdio): connected, 1 tools\n    mcp__test__echo\n  web (http): failed — no answer"
        );
        assert!(status_report(&[]).starts_with("No MCP servers"));
    }

    #[test]
    fn project_servers_need_approval_and_disabling_wins() {
        let approval = ProjectApproval {
            enable_all_project_mcp_servers: false,
            enabled_mcpjson_servers: vec!["git".into()],
            disabled_mcpjson_servers: vec![],
        };
        assert!(approval.allows("git"));
        assert!(!approval.allows("other"));
        let approval = ProjectApproval {
            enable_all_project_mcp_servers: true,
            enabled_mcpjson_servers: vec![],
            disabled_mcpjson_servers: vec!["other".into()],
        };
        assert!(approval.allows("git"));
        assert!(!approval.allows("other"));
    }
}
