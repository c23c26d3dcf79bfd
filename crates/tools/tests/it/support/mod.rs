//! Shared by the behaviour tests: run one call through the public API.
#![allow(dead_code, clippy::unwrap_used)] // shared helpers: not every test file uses each

use std::path::Path;

use gyre_tools::{AllowAll, ToolCall, ToolContext, ToolOutput, ToolRegistry, run_tool_call};
use serde_json::Value;

pub fn ctx(dir: &Path) -> ToolContext {
    ToolContext::new(dir.canonicalize().unwrap()).with_output_dir(dir.join(".outputs"))
}

pub async fn run(ctx: &ToolContext, name: &str, input: Value) -> ToolOutput {
    let registry = ToolRegistry::with_default_tools();
    let call = ToolCall::new("toolu_test", name, input);
    run_tool_call(&registry, &call, ctx, &AllowAll, &|_| {})
        .await
        .output
}

pub fn p(dir: &Path, rel: &str) -> String {
    dir.canonicalize().unwrap().join(rel).display().to_string()
}
