//! The servers' resources, offered to the model through two tools with Claude Code's
//! names: `ListMcpResourcesTool` and `ReadMcpResourceTool`.

use std::borrow::Cow;
use std::sync::Arc;

use gyre_tools::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};

use crate::result::{Shown, show_resource};
use crate::server::Server;
use crate::slot::ServerSlot;

/// Resource listings and contents are text the model reads, like tool results.
const MAX_RESULT_CHARS: usize = 100_000;

fn find(servers: &[Arc<Server>], name: &str) -> Result<Arc<Server>, ToolOutput> {
    servers
        .iter()
        .find(|s| s.name() == name)
        .cloned()
        .ok_or_else(|| {
            let names: Vec<&str> = servers.iter().map(|s| s.name()).collect();
            ToolOutput::tool_use_error(format_args!(
                "no MCP server named {name:?} offers resources; these do: {}",
                names.join(", ")
            ))
        })
}

/// What a resource tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceAction {
    /// `ListMcpResourcesTool`: the resources of one server or of all of them.
    List,
    /// `ReadMcpResourceTool`: one resource's contents.
    Read,
}

/// One of the two resource tools, over the servers that offer resources.
#[derive(Debug)]
pub struct McpResourceTool {
    action: ResourceAction,
    servers: Vec<Arc<ServerSlot>>,
}

impl McpResourceTool {
    /// The resource tool doing `action` over the servers that offer resources.
    #[must_use]
    pub fn new(action: ResourceAction, servers: Vec<Arc<ServerSlot>>) -> Self {
        Self { action, servers }
    }

    /// The servers connected now that offer resources.
    fn connected(&self) -> Vec<Arc<Server>> {
        self.servers
            .iter()
            .filter_map(|slot| slot.server())
            .filter(|server| server.offers_resources())
            .collect()
    }

    async fn list(&self, input: &Value) -> ToolOutput {
        let connected = self.connected();
        let servers: Vec<Arc<Server>> = match input.get("server").and_then(Value::as_str) {
            Some(name) => match find(&connected, name) {
                Ok(server) => vec![server],
                Err(output) => return output,
            },
            None => connected,
        };
        let mut listed = Vec::new();
        for server in servers {
            match server.list_resources().await {
                Ok(resources) => listed.extend(resources.into_iter().map(|r| {
                    json!({
                        "uri": r.uri,
                        "name": r.name,
                        "mimeType": r.mime_type,
                        "description": r.description,
                        "server": server.name(),
                    })
                })),
                Err(e) => {
                    return ToolOutput::error(format!(
                        "MCP server \"{}\" could not list its resources: {e}",
                        server.name()
                    ));
                }
            }
        }
        if listed.is_empty() {
            return ToolOutput::ok("No resources found.");
        }
        ToolOutput::ok(Value::Array(listed).to_string())
    }

    async fn read(&self, input: &Value) -> ToolOutput {
        let field = |name: &str| input.get(name).and_then(Value::as_str).unwrap_or_default();
        let server = match find(&self.connected(), field("server")) {
            Ok(server) => server,
            Err(output) => return output,
        };
        let uri = field("uri");
        let result = match server.read_resource(uri).await {
            Ok(result) => result,
            Err(e) => {
                return ToolOutput::error(format!(
                    "MCP server \"{}\" could not read {uri}: {e}",
                    server.name()
                ));
            }
        };
        let mut output = ToolOutput::ok("");
        let mut texts = Vec::new();
        for contents in result.contents {
            match show_resource(contents) {
                Shown::Text(text) => texts.push(text),
                Shown::Image(image) => output.images.push(image),
            }
        }
        output.content = texts.join("\n");
        output
    }
}

impl Tool for McpResourceTool {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self.action {
            ResourceAction::List => "ListMcpResourcesTool",
            ResourceAction::Read => "ReadMcpResourceTool",
        })
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self.action {
            ResourceAction::List => {
                "Lists the resources (files, documents, data) that the connected MCP servers offer, with their URIs. Give `server` to list one server's only. Read one with ReadMcpResourceTool."
            }
            ResourceAction::Read => {
                "Reads a resource of an MCP server by its URI (ListMcpResourcesTool lists them)."
            }
        })
    }

    fn input_schema(&self) -> Value {
        match self.action {
            ResourceAction::List => json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "Only this server's resources"}
                },
                "additionalProperties": false
            }),
            ResourceAction::Read => json!({
                "type": "object",
                "properties": {
                    "server": {"type": "string", "description": "The MCP server's name"},
                    "uri": {"type": "string", "description": "The resource's URI"}
                },
                "required": ["server", "uri"],
                "additionalProperties": false
            }),
        }
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    /// Reading what the user's own servers offer needs no question.
    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        MAX_RESULT_CHARS
    }

    /// On offer while some server offering resources is connected.
    fn is_enabled(&self) -> bool {
        !self.connected().is_empty()
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match self.action {
                ResourceAction::List => self.list(&input).await,
                ResourceAction::Read => self.read(&input).await,
            }
        })
    }
}
