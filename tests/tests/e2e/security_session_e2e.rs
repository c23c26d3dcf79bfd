//! What changes mid-session reaches the sandbox (issue #19), through the real binary
//! driven the way an SDK program drives it: a `Read(…)` deny rule an SDK adds with
//! `can_use_tool`'s `updatedPermissions` holds in the kernel (and in searches) from the
//! next call on,
//! and a session that switches into plan mode on a kernel without Landlock says so once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::Sandbox;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// Runs gyre in stream-json mode as an SDK program does (see [`gyre_e2e::converse`]),
/// with `extra` arguments and `env`.
fn converse(
    sandbox: &Sandbox,
    server: &TestServer,
    extra: &[&str],
    env: &[(&str, &str)],
    first: &[Value],
    answer: impl FnMut(&Value) -> Option<Vec<Value>>,
) -> (Vec<Value>, String) {
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.args(extra);
    for (key, value) in env {
        cmd.env(key, value);
    }
    gyre_e2e::converse(cmd, first, answer)
}

fn user(text: &str) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": text}})
}

fn is_result(line: &Value) -> bool {
    line["type"] == "result"
}

/// The tool results in call order: (is_error, text).
fn tool_results(lines: &[Value]) -> Vec<(bool, String)> {
    gyre_e2e::tool_results_of_lines(lines)
}

#[test]
fn a_read_deny_rule_the_sdk_adds_mid_session_is_enforced_by_the_kernel() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("secret.txt", "hunter2\n").unwrap();
    let server = TestServer::spawn(Script::new([
        // Plan mode runs readers (Bash in the read-only sandbox) without asking.
        Turn::tool_use("Grep", json!({"pattern": "hunter"})),
        Turn::tool_use("Bash", json!({"command": "cat secret.txt"})),
        // A writer is asked about; the SDK allows it and adds rules for the session.
        Turn::tool_use("Bash", json!({"command": "touch made.txt"})),
        // A name the parser cannot see (it refuses `cat secret.txt` itself): the kernel's.
        Turn::tool_use("Bash", json!({"command": "f=secret.txt; cat \"$f\""})),
        Turn::tool_use("Grep", json!({"pattern": "hunter"})),
        Turn::text("done"),
    ]))
    .unwrap();
    let mut questions = 0;
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &[
            "--permission-mode",
            "plan",
            "--permission-prompt-tool",
            "stdio",
        ],
        &[],
        &[user("read the secret")],
        |line| {
            if is_result(line) {
                return None;
            }
            if line["type"] != "control_request" || line["request"]["subtype"] != "can_use_tool" {
                return Some(Vec::new());
            }
            questions += 1;
            let updates = json!([
                {"type": "addRules", "behavior": "deny", "destination": "session",
                 "rules": [{"toolName": "Read", "ruleContent": "secret.txt"}]},
                {"type": "addRules", "behavior": "allow", "destination": "session",
                 "rules": [{"toolName": "Bash"}]},
            ]);
            Some(vec![json!({
                "type": "control_response",
                "response": {
                    "subtype": "success",
                    "request_id": line["request_id"],
                    "response": {"behavior": "allow", "updatedPermissions": updates},
                },
            })])
        },
    );
    assert!(!stderr.contains("not applied"), "{stderr}");
    assert_eq!(questions, 1, "{lines:?}");
    let results = tool_results(&lines);
    assert_eq!(results.len(), 5, "{lines:?}\n{stderr}");
    assert!(results[0].1.contains("secret.txt"), "{:?}", results[0]);
    assert_eq!(results[1], (false, "hunter2".to_owned()), "{stderr}");
    // Allowed, but plan mode's sandbox is read-only.
    assert!(results[2].0, "{:?}", results[2]);
    assert!(!sandbox.project().join("made.txt").exists());
    // Searches skip what the new rule denies.
    assert!(!results[4].1.contains("secret.txt"), "{:?}", results[4]);
    // The Bash allow rule lets the command run; the deny rule added with it reached the
    // kernel, which refuses the read.
    let (is_error, text) = &results[3];
    assert!(
        *is_error && text.contains("Permission denied"),
        "the new deny rule did not reach the sandbox: {text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

const WARNING: &str = "this kernel has no Landlock";

#[test]
fn a_session_switched_into_plan_mode_without_landlock_says_so_once_and_asks() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("data.txt", "b\na\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "cat data.txt"})),
        Turn::text("first done"),
        Turn::tool_use("Bash", json!({"command": "cat data.txt"})),
        Turn::tool_use("Bash", json!({"command": "ls"})),
        Turn::text("second done"),
    ]))
    .unwrap();
    let mut results_seen = 0;
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--permission-mode", "default", "--allowedTools", "Bash"],
        &[("GYRE_TEST_NO_LANDLOCK", "1")],
        &[user("first")],
        |line| {
            if !is_result(line) {
                return Some(Vec::new());
            }
            results_seen += 1;
            if results_seen == 1 {
                return Some(vec![
                    json!({"type": "control_request", "request_id": "mode",
                           "request": {"subtype": "set_permission_mode", "mode": "plan"}}),
                    user("second"),
                ]);
            }
            None
        },
    );
    let results = tool_results(&lines);
    assert_eq!(results.len(), 3, "{lines:?}\n{stderr}");
    // Before the switch nothing asked for a sandbox: the allowed command ran.
    assert_eq!(results[0], (false, "b\na".to_owned()), "{stderr}");
    // After it, plan mode cannot be confined here: said once, and every command asked
    // about (headless without a prompt: denied).
    assert_eq!(stderr.matches(WARNING).count(), 1, "{stderr}");
    for (is_error, text) in &results[1..] {
        assert!(*is_error && text.contains("Landlock"), "{text}");
    }
}
