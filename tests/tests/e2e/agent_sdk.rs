//! Runs `tests/sdk/agent_sdk_cases.py`: programs written for Claude Code's Agent SDK
//! (the real `claude-agent-sdk` from PyPI) with gyre as `cli_path`, against gyre-testkit.
//!
//! The SDK is installed into a venv under the target dir on first use (`python3 -m
//! venv`, then pip from PyPI) and reused after that. When that cannot be done the test
//! fails: it never passes without running the SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The SDK release the cases were written against.
const SDK_REQUIREMENT: &str = "claude-agent-sdk==0.2.189";

#[test]
fn programs_written_for_the_claude_agent_sdk_run_unchanged_with_gyre_as_cli_path() {
    let python = gyre_e2e::pip_venv("agent-sdk-venv", SDK_REQUIREMENT);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/agent_sdk_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    gyre_e2e::run_client_cases(cmd);
}
