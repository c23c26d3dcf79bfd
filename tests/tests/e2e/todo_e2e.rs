//! TodoWrite end to end: the list is accepted, kept in the transcript as the call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

#[test]
fn todo_write_updates_the_list_and_the_transcript_keeps_it() {
    let sandbox = Sandbox::new().unwrap();
    let todos = json!([
        {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Fix the lint", "status": "pending", "activeForm": "Fixing the lint"}
    ]);
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("TodoWrite", json!({ "todos": todos })),
        Turn::tool_use(
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "done", "activeForm": "x"}]}),
        ),
        Turn::text("Planned."),
    ]))
    .unwrap();
    let out =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "plan it", "--output-format", "json"]))
        .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let result_of = |i: usize| -> Value {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"][0]
            .clone()
    };
    let ok = result_of(1);
    assert_ne!(ok["is_error"], true, "{ok}");
    assert!(
        ok["content"]
            .as_str()
            .unwrap()
            .starts_with("Todos have been modified successfully"),
        "{ok}"
    );
    let bad = result_of(2);
    assert_eq!(bad["is_error"], true, "{bad}");
    assert!(bad["content"].to_string().contains("`done`"), "{bad}");

    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    let call = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["message"]["content"].as_array().cloned())
        .flatten()
        .find(|b| b["type"] == "tool_use")
        .unwrap();
    assert_eq!(call["input"]["todos"], todos);
}
