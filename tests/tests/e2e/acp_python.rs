//! Runs `tests/acp/acp_cases.py`: an editor written with the Python
//! `agent-client-protocol` package from PyPI drives `gyre acp` against gyre-testkit.
//!
//! The package is installed into a venv under the target dir on first use (`python3 -m
//! venv`, then pip from PyPI) and reused after that. When that cannot be done the test
//! fails: it never passes without running the client.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The client release the cases were written against.
const ACP_REQUIREMENT: &str = "agent-client-protocol==0.12.1";

#[test]
fn an_editor_written_with_the_python_acp_package_drives_gyre_acp() {
    let python = gyre_e2e::pip_venv("acp-python-venv", ACP_REQUIREMENT);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/acp/acp_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    gyre_e2e::run_client_cases(cmd);
}

/// Zed's adapter, which drives Claude Code through the TypeScript Agent SDK.
const ZED_ADAPTER: &str = "@zed-industries/claude-agent-acp@0.23.1";

/// Zed's Node adapter, started with gyre as its Claude Code (`CLAUDE_CODE_EXECUTABLE`),
/// driven by the same Python editor through the cases that do not depend on what only
/// `gyre acp` does (its mode names, editor buffers and terminals, loading gyre's own
/// transcripts).
#[test]
fn zeds_acp_adapter_runs_gyre_as_its_claude_code() {
    let python = gyre_e2e::pip_venv("acp-python-venv", ACP_REQUIREMENT);
    let adapter = gyre_e2e::npm_package("zed-claude-agent-acp", ZED_ADAPTER)
        .join("node_modules/@zed-industries/claude-agent-acp/dist/index.js");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/acp/acp_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg("--adapter").arg(adapter);
    for case in [
        "allow_once_runs_the_call_and_streams_the_plan",
        "allow_always_then_reject",
        "cancel_mid_turn",
        "two_sessions_at_once",
        "malformed_lines_get_errors",
    ] {
        cmd.args(["--only", case]);
    }
    gyre_e2e::run_client_cases(cmd);
}
