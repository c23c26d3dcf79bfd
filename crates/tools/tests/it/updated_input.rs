//! A permission that changes the call's input (an Agent SDK's or a hook's
//! `updatedInput`): the tool runs with the new input, which passes the same checks.
#![allow(clippy::unwrap_used)]

use gyre_tools::{
    BoxFuture, CanUseTool, InputDecision, PermissionDecision, Tool, ToolCall, ToolContext,
    ToolRegistry, run_tool_call,
};
use serde_json::{Value, json};

/// Allows every call, running it with `input` instead.
struct Rewrites {
    input: Value,
}

impl CanUseTool for Rewrites {
    fn can_use_tool<'a>(
        &'a self,
        _: &'a dyn Tool,
        _: &'a ToolCall,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async { PermissionDecision::Allow })
    }

    fn can_use_tool_with_input<'a>(
        &'a self,
        _: &'a dyn Tool,
        _: &'a ToolCall,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, InputDecision> {
        Box::pin(async {
            InputDecision {
                decision: PermissionDecision::Allow,
                updated_input: Some(self.input.clone()),
            }
        })
    }
}

async fn glob_with(updated: Value) -> gyre_tools::ToolOutput {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a").unwrap();
    std::fs::write(dir.path().join("b.md"), "b").unwrap();
    let ctx = ToolContext::new(dir.path());
    let call = ToolCall::new("toolu_1", "Glob", json!({"pattern": "*.txt"}));
    let outcome = run_tool_call(
        &ToolRegistry::with_default_tools(),
        &call,
        &ctx,
        &Rewrites { input: updated },
        &|_| {},
    )
    .await;
    assert_eq!(
        outcome.input, call.input,
        "the outcome keeps the model's input"
    );
    outcome.output
}

#[tokio::test]
async fn the_tool_runs_with_the_updated_input() {
    let output = glob_with(json!({"pattern": "*.md"})).await;
    assert!(!output.is_error, "{}", output.content);
    assert!(output.content.contains("b.md"), "{}", output.content);
    assert!(!output.content.contains("a.txt"), "{}", output.content);
}

#[tokio::test]
async fn an_updated_input_that_breaks_the_schema_is_a_tool_use_error() {
    let output = glob_with(json!({"pattern": 7})).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("InputValidationError"),
        "{}",
        output.content
    );
}
