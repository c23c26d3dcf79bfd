//! Checkpoints and rewind through the binary: the Agent SDK's `rewind_files` (the real
//! Python SDK, `tests/sdk/agent_sdk_cases.py`) and `--resume`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The SDK release the cases were written against (as `agent_sdk.rs`).
const SDK_REQUIREMENT: &str = "claude-agent-sdk==0.2.189";

fn sdk_cases(names: &[&str]) {
    let python = gyre_e2e::pip_venv("agent-sdk-venv", SDK_REQUIREMENT);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/agent_sdk_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    for name in names {
        cmd.args(["--only", name]);
    }
    gyre_e2e::run_client_cases(cmd);
}

#[test]
fn rewind_files_from_the_python_sdk_restores_what_the_session_wrote_and_nothing_else() {
    sdk_cases(&["rewind_files"]);
}

#[test]
fn rewind_files_keeps_nothing_without_enable_file_checkpointing() {
    sdk_cases(&["rewind_files_needs_checkpointing"]);
}
