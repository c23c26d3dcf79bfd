//! Where a secret gyre obtains itself must never show up: the environment of Bash, of a
//! hook and of an MCP server. A session set up with [`ChildEnvs`] runs all three, each
//! writing down (or sending back) the environment it was given.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use gyre_e2e::Sandbox;
use gyre_testkit::{TestServer, Turn};
use serde_json::{Value, json};

pub struct ChildEnvs {
    hook: PathBuf,
    mcp: PathBuf,
    /// The `--mcp-config` of a server that writes its environment down, then serves.
    pub mcp_config: String,
}

impl ChildEnvs {
    /// Writes `settings` with a `PreToolUse` hook on Bash to the user's settings file.
    pub fn install(sandbox: &Sandbox, mut settings: Value) -> Self {
        let hook = sandbox.home().join("hook-env");
        let mcp = sandbox.home().join("mcp-env");
        settings["hooks"] = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": format!("env > '{}'", hook.display())}
        ]}]});
        std::fs::write(sandbox.home().join("settings.json"), settings.to_string()).unwrap();
        let mcp_config = json!({"mcpServers": {"envdump": {"command": "sh", "args": ["-c",
            format!("env > '{}'; exec '{}'", mcp.display(),
                    gyre_e2e::test_mcp_binary().unwrap().display())]}}})
        .to_string();
        Self {
            hook,
            mcp,
            mcp_config,
        }
    }

    /// The turn that runs `env` in Bash (the session needs `--allowedTools Bash`).
    pub fn bash_turn() -> Turn {
        Turn::tool_use("Bash", json!({"command": "env"}))
    }

    /// Checks that Bash (whose output request `bash_answer` of `server` carries), the hook
    /// and the MCP server each saw an environment, and none of `secrets` in it.
    pub fn assert_none_saw(&self, server: &TestServer, bash_answer: usize, secrets: &[&str]) {
        let bash = server.requests()[bash_answer].body.to_string();
        assert!(bash.contains("GYRE_HOME"), "no env output: {bash}");
        for (what, text) in [
            ("Bash", bash),
            ("a hook", std::fs::read_to_string(&self.hook).unwrap()),
            ("an MCP server", std::fs::read_to_string(&self.mcp).unwrap()),
        ] {
            assert!(text.contains("HOME="), "{what} saw no environment: {text}");
            for secret in secrets {
                assert!(!text.contains(secret), "{secret:?} reached {what}");
            }
        }
    }
}
