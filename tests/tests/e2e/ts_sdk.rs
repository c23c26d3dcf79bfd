//! Runs `tests/sdk/ts_sdk_cases.mjs`: programs written for Claude Code's TypeScript Agent
//! SDK (the real `@anthropic-ai/claude-agent-sdk` from npm) with gyre as
//! `pathToClaudeCodeExecutable`, against gyre-testkit.
//!
//! The SDK is installed with npm under the target dir on first use (without its optional
//! platform packages, which carry the reference CLI) and reused after that. When that
//! cannot be done the test fails: it never passes without running the SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// The SDK release the cases were written against.
const SDK: &str = "@anthropic-ai/claude-agent-sdk@0.3.333";

/// The folder whose `node_modules` holds the SDK, installing it when missing.
fn sdk_dir() -> PathBuf {
    let dir = gyre_e2e::target_dir().join("ts-agent-sdk");
    let marker = dir.join(format!("{}.installed", SDK.replace('/', "_")));
    if !marker.is_file() {
        std::fs::create_dir_all(&dir).unwrap();
        gyre_e2e::install(
            "the TypeScript Agent SDK needs node and npm (apt-get install nodejs npm)",
            Command::new("npm")
                .args([
                    "install",
                    "--omit=optional",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(&dir)
                .arg(SDK),
        );
        std::fs::write(&marker, "").unwrap();
    }
    dir
}

#[test]
fn programs_written_for_the_typescript_agent_sdk_run_unchanged_with_gyre_as_their_executable() {
    let sdk = sdk_dir();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/ts_sdk_cases.mjs");
    let mut cmd = Command::new("node");
    cmd.arg(script).arg("--sdk").arg(&sdk);
    gyre_e2e::run_client_cases(cmd);
}
