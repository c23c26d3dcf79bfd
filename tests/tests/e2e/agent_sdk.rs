//! Runs `tests/sdk/agent_sdk_cases.py`: programs written for Claude Code's Agent SDK
//! (the real `claude-agent-sdk` from PyPI) with gyre as `cli_path`, against gyre-testkit.
//!
//! The SDK is installed into a venv under the target dir on first use (`python3 -m
//! venv`, then pip from PyPI) and reused after that. When that cannot be done the test
//! fails: it never passes without running the SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// The SDK release the cases were written against.
const SDK_REQUIREMENT: &str = "claude-agent-sdk==0.2.189";

use gyre_e2e::target_dir;

/// The venv's python with the SDK importable, installing it when missing.
fn sdk_python() -> PathBuf {
    let venv = target_dir().join("agent-sdk-venv");
    let python = venv.join("bin").join("python");
    let marker = venv.join(format!("{SDK_REQUIREMENT}.installed"));
    if marker.is_file() {
        return python;
    }
    if !python.is_file() {
        let status = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect(
                "python3 is needed to create the Agent SDK venv (apt-get install python3-venv)",
            );
        assert!(
            status.success(),
            "python3 -m venv {} failed",
            venv.display()
        );
    }
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(SDK_REQUIREMENT)
        .output()
        .expect("running pip in the Agent SDK venv");
    assert!(
        out.status.success(),
        "could not install {SDK_REQUIREMENT} from PyPI into {}: {}",
        venv.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&marker, "").unwrap();
    python
}

#[test]
fn programs_written_for_the_claude_agent_sdk_run_unchanged_with_gyre_as_cli_path() {
    let python = sdk_python();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/agent_sdk_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    gyre_e2e::run_client_cases(cmd);
}
