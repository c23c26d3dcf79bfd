//! Multi-turn sessions: stream-json input, transcripts, --continue and --resume.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::Stdio;

use gyre_e2e::{Run, Sandbox, kinds, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

fn transcript_lines(sandbox: &Sandbox) -> Vec<Value> {
    let files = sandbox.transcripts();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn stream_json_input_runs_each_line_as_a_turn_of_one_session() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("Nice to meet you, Ada."),
        Turn::text("Your name is Ada."),
    ]))
    .unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for text in ["My name is Ada.", "What is my name?"] {
        let line = json!({"type": "user", "message": {"role": "user", "content": text}});
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    assert_eq!(
        kinds(&lines),
        ["system/init", "assistant", "result", "assistant", "result"]
    );
    assert_eq!(lines[2]["session_id"], lines[4]["session_id"]);
    // The second request carried the whole history.
    let second = &server.requests()[1].body["messages"];
    assert_eq!(second.as_array().unwrap().len(), 3);
    assert_eq!(second[0]["content"][0]["text"], "My name is Ada.");
    assert_eq!(second[1]["content"][0]["text"], "Nice to meet you, Ada.");
}

#[test]
fn the_transcript_holds_every_message_and_continue_resumes_it() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("a.txt", "alpha\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": file})),
        Turn::text("It says alpha."),
        Turn::text("You asked about a.txt."),
    ]))
    .unwrap();
    let first =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "read a.txt", "--output-format", "json"]))
        .unwrap();
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let session_id = first.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let lines = transcript_lines(&sandbox);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["user", "assistant", "user", "assistant"]);
    for pair in lines.windows(2) {
        assert_eq!(pair[1]["parentUuid"], pair[0]["uuid"]);
    }
    assert!(lines.iter().all(|l| l["sessionId"] == session_id.as_str()));

    let again = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "what did I ask?",
        "--continue",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(again.code, Some(0), "{}", again.stderr);
    assert_eq!(again.result().unwrap()["session_id"], session_id.as_str());
    let sent = &server.requests()[2].body["messages"];
    assert_eq!(sent.as_array().unwrap().len(), 5, "{sent:#}");
    assert_eq!(sent[0]["content"][0]["text"], "read a.txt");
    assert_eq!(transcript_lines(&sandbox).len(), 6);

    let listing = run(sandbox.gyre(&server).unwrap().arg("sessions")).unwrap();
    assert!(listing.stdout.contains(&session_id), "{}", listing.stdout);
    assert!(listing.stdout.contains("read a.txt"), "{}", listing.stdout);
}

#[test]
fn resume_by_id_and_clear_errors_for_unknown_sessions() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("one"), Turn::text("two")])).unwrap();
    let id = "123e4567-e89b-12d3-a456-426614174000";
    let first = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hello",
        "--session-id",
        id,
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(first.result().unwrap()["session_id"], id);
    let second = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "again",
        "--resume",
        id,
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(
        server.requests()[1].body["messages"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    let unknown = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "x",
        "--resume",
        "00000000-0000-0000-0000-000000000000",
    ]))
    .unwrap();
    assert_eq!(unknown.code, Some(1));
    assert!(
        unknown.stderr.contains("gyre sessions"),
        "{}",
        unknown.stderr
    );
    let bad = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "x", "--session-id", "nope"]))
    .unwrap();
    assert_eq!(bad.code, Some(1));
    assert!(bad.stderr.contains("not a UUID"), "{}", bad.stderr);
}

#[test]
fn no_session_persistence_writes_no_transcript_and_leaves_nothing_to_continue() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hi",
        "--no-session-persistence",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.result().unwrap()["result"], "Hello.");
    assert!(
        sandbox.transcripts().is_empty(),
        "{:?}",
        sandbox.transcripts()
    );
    let again = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "more", "--continue"]))
    .unwrap();
    assert_eq!(again.code, Some(1), "{}", again.stderr);
    assert!(
        again.stderr.contains("no session to continue"),
        "{}",
        again.stderr
    );
}
