//! Flags the Agent SDKs pass for options their programs set (`--thinking-display`,
//! `--resume-session-at`, `--plugin-dir`, `--permission-prompts`), driven through the
//! binary against gyre-testkit. The `initialize` fields run in `ts_sdk.rs` with the
//! real TypeScript SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

#[test]
fn thinking_display_goes_in_the_thinking_parameter_and_a_wrong_value_is_refused() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "omitted",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    assert_eq!(
        server.requests()[0].body["thinking"],
        json!({"type": "adaptive", "display": "omitted"})
    );
    let wrong = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "loud",
    ]))
    .unwrap();
    assert_ne!(wrong.code, Some(0));
    assert!(
        wrong
            .stderr
            .contains("--thinking-display \"loud\": use summarized or omitted"),
        "{}",
        wrong.stderr
    );
}

/// The text of every message request `i` sent.
fn sent_texts(server: &TestServer, i: usize) -> String {
    server.requests()[i].body["messages"].to_string()
}

#[test]
fn resume_session_at_goes_on_from_that_message_and_leaves_the_later_ones_behind() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("answer one"),
        Turn::text("answer two"),
        Turn::text("answer three"),
        Turn::text("answer four"),
    ]))
    .unwrap();
    let first = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt one",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let lines = first.lines().unwrap();
    let session = first.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answer = lines
        .iter()
        .find(|l| l["type"] == "assistant")
        .and_then(|l| l["uuid"].as_str())
        .unwrap()
        .to_owned();
    let second =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt two", "--resume", &session]))
        .unwrap();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(sent_texts(&server, 1).contains("answer one"));
    let third = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt three",
        "--resume",
        &session,
        "--resume-session-at",
        &answer,
    ]))
    .unwrap();
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    assert!(!third.stderr.contains("warning"), "{}", third.stderr);
    let sent = sent_texts(&server, 2);
    assert!(
        sent.contains("prompt one") && sent.contains("answer one"),
        "{sent}"
    );
    assert!(
        !sent.contains("prompt two") && !sent.contains("answer two"),
        "{sent}"
    );
    // The session goes on from there: the turns left behind stay behind.
    let fourth =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt four", "--resume", &session]))
        .unwrap();
    assert_eq!(fourth.code, Some(0), "{}", fourth.stderr);
    let sent = sent_texts(&server, 3);
    assert!(
        sent.contains("answer three") && !sent.contains("prompt two"),
        "{sent}"
    );
    let unknown = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "x",
        "--resume",
        &session,
        "--resume-session-at",
        "00000000-0000-0000-0000-000000000000",
    ]))
    .unwrap();
    assert_ne!(unknown.code, Some(0));
    assert!(
        unknown.stderr.contains("has no message with that uuid"),
        "{}",
        unknown.stderr
    );
}
