//! Multi-turn sessions: stream-json input, transcripts, --continue and --resume.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::Stdio;

use gyre_e2e::{Run, Sandbox, copy_tree, kinds, run, transcript_fixture};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// The conversation's lines of the one transcript: the checkpoints' own lines
/// (`file-history-snapshot`, one at each prompt; `rewind_e2e` tests them) left out.
fn transcript_lines(sandbox: &Sandbox) -> Vec<Value> {
    let files = sandbox.transcripts();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] != "file-history-snapshot")
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
    let second = sandbox.resume(&server, id, "again").unwrap();
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

/// The texts of a request's messages, one string each.
fn message_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].to_string())
        .collect()
}

const OLD_SESSION: &str = "5e0c9a77-2b41-4d3e-9f18-6a7b8c9d0e1f";
const REFERENCE_SESSION: &str = "7d3c1a52-9b8e-4f61-a0d2-5e4b3c2a1f90";

#[test]
fn a_transcript_written_by_an_older_gyre_still_resumes_and_is_listed() {
    let sandbox = Sandbox::new().unwrap();
    copy_tree(
        &transcript_fixture("gyre-0.1"),
        &sandbox.transcript_folder(&sandbox.home()),
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("b.txt is empty.")])).unwrap();
    let listing = run(sandbox.gyre(&server).unwrap().arg("sessions")).unwrap();
    assert!(listing.stdout.contains(OLD_SESSION), "{}", listing.stdout);
    assert!(listing.stdout.contains("read a.txt"), "{}", listing.stdout);

    let out = sandbox
        .resume(&server, OLD_SESSION, "read b.txt then")
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let request = &server.requests()[0].body;
    // The history after the compaction boundary (its summary first), then the prompt.
    let texts = message_texts(request);
    assert_eq!(texts.len(), 4, "{texts:#?}");
    assert!(texts[0].contains("Summary of the conversation so far"));
    assert!(texts[1].contains("and what is in b.txt?"));
    assert!(texts[2].contains("I have not read b.txt yet."));
    assert!(texts[3].contains("read b.txt then"));
    assert_eq!(request["model"], "claude-sonnet-4-5");
    // The lines gyre adds chain onto the old ones, in the new layout.
    let lines = transcript_lines(&sandbox);
    assert_eq!(lines.len(), 9);
    assert_eq!(lines[7]["parentUuid"], lines[6]["uuid"]);
    assert!(lines[8]["message"]["usage"]["output_tokens"].is_u64());
    assert_eq!(lines[8]["isSidechain"], false);
}

#[test]
fn a_claude_code_session_is_listed_then_resumed_imported_with_what_was_left_out_said() {
    let sandbox = Sandbox::new().unwrap();
    let reference_home = sandbox.home().join(".claude");
    let theirs = sandbox.transcript_folder(&reference_home);
    copy_tree(&transcript_fixture("claude-code-2.1"), &theirs).unwrap();
    let original = std::fs::read(theirs.join(format!("{REFERENCE_SESSION}.jsonl"))).unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Still 2 TODOs.")])).unwrap();

    let listing = run(sandbox.gyre(&server).unwrap().arg("sessions")).unwrap();
    assert!(
        listing.stdout.contains("Claude Code sessions"),
        "{}",
        listing.stdout
    );
    assert!(
        listing.stdout.contains(REFERENCE_SESSION),
        "{}",
        listing.stdout
    );
    assert!(
        listing
            .stdout
            .contains("How many lines does notes.txt have?"),
        "{}",
        listing.stdout
    );

    let out = sandbox
        .resume(&server, REFERENCE_SESSION, "How many TODOs again?")
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("imported Claude Code session"),
        "{}",
        out.stderr
    );
    for left_out in ["api-error", "summary"] {
        assert!(out.stderr.contains(left_out), "{}", out.stderr);
    }
    // Its checkpoints are read, not left out (`/rewind` offers them).
    assert!(
        !out.stderr.contains("file-history-snapshot"),
        "{}",
        out.stderr
    );
    let request = &server.requests()[0].body;
    assert_eq!(request["model"], "claude-sonnet-4-5-20250929");
    let texts = message_texts(request);
    // After the boundary: the summary, the prompt, a response of three lines joined
    // into one message, two results of two lines joined into one, the Task call and
    // its result, the answer, then the new prompt. The API error line is left out.
    assert_eq!(texts.len(), 8, "{texts:#?}");
    assert!(texts[0].contains("This session is being continued"));
    assert!(texts[1].contains("Compare notes.txt with todo.txt"));
    let messages = request["messages"].as_array().unwrap();
    assert_eq!(messages[2]["content"].as_array().unwrap().len(), 3);
    assert_eq!(messages[3]["content"].as_array().unwrap().len(), 2);
    assert!(texts[5].contains("Found 2 TODOs"));
    assert!(texts[6].contains("the agent found 2 TODOs"));
    assert!(texts[7].contains("How many TODOs again?"));
    let all = texts.join("\n");
    assert!(!all.contains("Interrupted by user"), "{all}");
    assert!(!all.contains("API Error"), "{all}");

    // The reference's file is as it was; gyre went on in its own copy.
    let after = std::fs::read(theirs.join(format!("{REFERENCE_SESSION}.jsonl"))).unwrap();
    assert_eq!(after, original);
    let ours = sandbox.transcript_folder(&sandbox.home());
    assert!(
        ours.join(REFERENCE_SESSION)
            .join("subagents/agent-a3f9c2e1.jsonl")
            .is_file()
    );
    let copy = std::fs::read_to_string(ours.join(format!("{REFERENCE_SESSION}.jsonl"))).unwrap();
    assert!(copy.contains("Still 2 TODOs."));

    // From now on it is one of gyre's sessions, listed once.
    let listing = run(sandbox.gyre(&server).unwrap().arg("sessions")).unwrap();
    assert_eq!(
        listing.stdout.matches(REFERENCE_SESSION).count(),
        1,
        "{}",
        listing.stdout
    );
    assert!(
        !listing.stdout.contains("Claude Code sessions"),
        "{}",
        listing.stdout
    );
}

#[test]
fn claude_config_dir_names_where_the_claude_code_sessions_are() {
    let sandbox = Sandbox::new().unwrap();
    let elsewhere = sandbox.home().join("claude-config");
    copy_tree(
        &transcript_fixture("claude-code-2.1"),
        &sandbox.transcript_folder(&elsewhere),
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Yes.")])).unwrap();
    let listing = run(sandbox
        .gyre(&server)
        .unwrap()
        .arg("sessions")
        .env("CLAUDE_CONFIG_DIR", &elsewhere))
    .unwrap();
    assert!(
        listing.stdout.contains(REFERENCE_SESSION),
        "{}",
        listing.stdout
    );
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "still there?", "--resume", REFERENCE_SESSION])
        .env("CLAUDE_CONFIG_DIR", &elsewhere))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "Yes.");
}
