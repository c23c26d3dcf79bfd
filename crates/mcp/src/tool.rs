//! An MCP server's tool as a gyre [`Tool`] named `mcp__<server>__<tool>`.

use std::borrow::Cow;
use std::sync::Arc;

use gyre_tools::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};
use rmcp::model::Tool as McpToolInfo;
use serde_json::Value;

use crate::slot::ServerSlot;

/// The longest description sent to the model; servers sometimes ship whole manuals.
/// Claude Code cuts at the same length.
const MAX_DESCRIPTION_CHARS: usize = 2048;

/// Results longer than this go through the loop's tool-result budget (persisted, a
/// preview sent): the limit Claude Code uses for MCP output.
const MAX_RESULT_CHARS: usize = 100_000;

/// `mcp__<server>__<tool>`, with anything the API does not accept in a tool name
/// replaced by `_`.
#[must_use]
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("mcp__{}__{}", clean(server), clean(tool))
}

/// One tool of one server.
#[derive(Debug)]
pub struct McpTool {
    name: String,
    description: String,
    schema: Value,
    /// The tool's name on the server.
    remote_name: String,
    read_only: bool,
    server: Arc<ServerSlot>,
}

impl McpTool {
    /// Wraps `info`, a tool the server in `server` listed.
    #[must_use]
    pub fn new(server: Arc<ServerSlot>, info: &McpToolInfo) -> Self {
        let name = tool_name(server.name(), &info.name);
        let mut description = info.description.as_deref().unwrap_or_default().to_owned();
        if let Some((cut, _)) = description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
            description.truncate(cut);
            description.push_str("… [truncated]");
        }
        let mut schema = Value::Object((*info.input_schema).clone());
        if schema.get("type").is_none()
            && let Some(object) = schema.as_object_mut()
        {
            object.insert("type".to_owned(), Value::String("object".to_owned()));
        }
        let read_only = info
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        Self {
            name,
            description,
            schema,
            remote_name: info.name.to_string(),
            read_only,
            server,
        }
    }

    /// The server this tool belongs to.
    #[must_use]
    pub fn server(&self) -> &Arc<ServerSlot> {
        &self.server
    }
}

impl Tool for McpTool {
    fn name(&self) -> Cow<'static, str> {
        Cow::Owned(self.name.clone())
    }

    fn description(&self) -> Cow<'static, str> {
        Cow::Owned(self.description.clone())
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn validate_input(
        &self,
        _input: &Value,
        _ctx: &ToolContext,
    ) -> Result<(), gyre_tools::ToolInputError> {
        // The schema is checked by the runner; the rest is the server's business.
        Ok(())
    }

    /// Only what the server marks read-only (`readOnlyHint`) runs alongside other calls.
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        self.read_only
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        self.read_only
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: format!(
                "{} is a tool of the MCP server \"{}\"",
                self.name,
                self.server.name()
            ),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        MAX_RESULT_CHARS
    }

    /// On offer while its server is connected (not disabled) and still lists it.
    fn is_enabled(&self) -> bool {
        self.server.server().is_some_and(|server| {
            server
                .tools()
                .iter()
                .any(|t| t.name.as_ref() == self.remote_name)
        })
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Value::Object(arguments) = input else {
                return ToolOutput::tool_use_error("the input must be a JSON object");
            };
            let Some(server) = self.server.server() else {
                return ToolOutput::error(format!(
                    "{}; {} is unavailable",
                    self.server.unavailable(),
                    self.name
                ));
            };
            server
                .call_tool(&self.remote_name, arguments, &ctx.cancel)
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_cleaned() {
        assert_eq!(tool_name("git", "git_status"), "mcp__git__git_status");
        assert_eq!(
            tool_name("my-server", "get.time now"),
            "mcp__my-server__get_time_now"
        );
    }
}
