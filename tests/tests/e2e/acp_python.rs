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
