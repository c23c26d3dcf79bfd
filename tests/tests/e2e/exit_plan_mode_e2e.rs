//! ExitPlanMode end to end: plan mode ends only when the plan is approved.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

const PLAN: &str = "1. Add the flag\n2. Test it";

/// The tool_result the model got back for request `i`'s previous call.
fn result_before(server: &TestServer, i: usize) -> Value {
    server.requests()[i].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]
        .clone()
}

#[test]
fn headless_without_a_rule_the_plan_is_refused_and_plan_mode_stays() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("ExitPlanMode", json!({ "plan": PLAN })),
        Turn::tool_use("ExitPlanMode", json!({ "plan": PLAN })),
        Turn::text("Waiting for approval."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "plan the flag",
        "--permission-mode",
        "plan",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    for i in [1, 2] {
        let refused = result_before(&server, i);
        assert_eq!(refused["is_error"], true, "{refused}");
        assert!(
            !refused["content"].to_string().contains("not in plan mode"),
            "{refused}"
        );
    }
    let result = out.result().unwrap();
    let denied: Vec<&Value> = result["permission_denials"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(denied.len(), 2, "{result}");
    assert_eq!(denied[0]["tool_name"], "ExitPlanMode");
}

#[test]
fn an_approved_plan_ends_plan_mode() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.project().join("new.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": file, "content": "x\n"})),
        Turn::tool_use("ExitPlanMode", json!({ "plan": PLAN })),
        Turn::tool_use("ExitPlanMode", json!({ "plan": PLAN })),
        Turn::text("Done planning."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "plan the flag",
        "--permission-mode",
        "plan",
        "--allowedTools",
        "ExitPlanMode",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let write = result_before(&server, 1);
    assert_eq!(write["is_error"], true, "plan mode refuses writes: {write}");
    assert!(!file.exists());
    let approved = result_before(&server, 2);
    assert_ne!(approved["is_error"], true, "{approved}");
    assert!(
        approved["content"].as_str().unwrap().contains(PLAN),
        "{approved}"
    );
    // Plan mode is over: a second exit has nothing to leave.
    let again = result_before(&server, 3);
    assert!(
        again["content"].to_string().contains("not in plan mode"),
        "{again}"
    );
}

#[test]
fn after_an_approved_plan_bash_is_no_longer_held_read_only_by_the_kernel() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "touch during-plan.txt"})),
        Turn::tool_use("ExitPlanMode", json!({ "plan": PLAN })),
        Turn::tool_use("Bash", json!({"command": "touch after-plan.txt"})),
        Turn::text("Built."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "plan, then build",
        "--permission-mode",
        "plan",
        "--allowedTools",
        "ExitPlanMode",
        "Bash(touch:*)",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    // In plan mode the rule lets `touch` run, and the read-only sandbox stops it.
    assert!(!sandbox.project().join("during-plan.txt").exists());
    assert_eq!(result_before(&server, 1)["is_error"], true);
    // After the approval the mode is default, and so is the sandbox: the file is made.
    assert!(
        sandbox.project().join("after-plan.txt").exists(),
        "{:#}",
        result_before(&server, 3)
    );
}
