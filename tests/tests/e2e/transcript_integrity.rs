//! Transcript integrity (issue #19, "data hygiene"): a transcript that cannot be written
//! is reported at once and fails a headless run, and a torn last line left by a kill
//! does not swallow the first line of the session that resumes it. Through the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Stdio};

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};

const SESSION: &str = "0f6c1f9e-4d2b-4c36-9a51-2f0d3b7e8a10";

#[test]
fn a_transcript_that_cannot_be_written_fails_the_run_with_a_clear_message() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("answered")])).unwrap();
    let cmd = sandbox.gyre(&server).unwrap();
    // No file may grow past 0 bytes (as on a full disk); SIGXFSZ ignored, so the write
    // fails with EFBIG instead of killing the process.
    let mut limited = Command::new("bash");
    limited
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 0 && exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(["-p", "hello", "--output-format", "json"])
        .current_dir(sandbox.project())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .stdin(Stdio::null());
    let out = run(&mut limited).unwrap();
    assert_eq!(out.code, Some(1), "stdout: {}", out.stdout);
    assert!(
        out.stderr.contains("could not write the transcript"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("could not write the transcript").count(),
        1,
        "reported once: {}",
        out.stderr
    );
    let transcripts = sandbox.transcripts();
    assert_eq!(transcripts.len(), 1);
    assert_eq!(std::fs::metadata(&transcripts[0]).unwrap().len(), 0);
}

#[test]
fn a_torn_last_line_does_not_swallow_the_next_sessions_first_line() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(
        Script::new([Turn::text("first answer"), Turn::text("second answer")])
            .turn(Turn::text("third answer")),
    )
    .unwrap();
    let first =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt one", "--session-id", SESSION]))
        .unwrap();
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    // A kill in the middle of a write leaves half a line.
    let transcript = sandbox.transcripts().pop().unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript)
        .unwrap()
        .write_all(b"{\"type\":\"user\",\"message\":{\"role\":\"us")
        .unwrap();
    let second =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt two", "--resume", SESSION]))
        .unwrap();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    let third = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "prompt three", "-c"]))
    .unwrap();
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    let last = server.requests().pop().unwrap();
    let sent = last.body["messages"].to_string();
    for text in [
        "prompt one",
        "first answer",
        "prompt two",
        "second answer",
        "prompt three",
    ] {
        assert!(sent.contains(text), "{text} missing from {sent}");
    }
}
