//! Runs `tests/sdk/ts_sdk_cases.mjs`: programs written for Claude Code's TypeScript Agent
//! SDK (the real `@anthropic-ai/claude-agent-sdk` from npm) with gyre as
//! `pathToClaudeCodeExecutable`, against gyre-testkit.
//!
//! The SDK is installed with npm under the target dir on first use (without its optional
//! platform packages, which carry the reference CLI) and reused after that. When that
//! cannot be done the test fails: it never passes without running the SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The SDK release the cases were written against.
const SDK: &str = "@anthropic-ai/claude-agent-sdk@0.3.333";

#[test]
fn programs_written_for_the_typescript_agent_sdk_run_unchanged_with_gyre_as_their_executable() {
    let sdk = gyre_e2e::npm_package("ts-agent-sdk", SDK);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/ts_sdk_cases.mjs");
    let mut cmd = Command::new("node");
    cmd.arg(script).arg("--sdk").arg(&sdk);
    gyre_e2e::run_client_cases(cmd);
}
