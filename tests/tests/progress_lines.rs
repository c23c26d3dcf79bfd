//! Headless text mode says on stderr what it waits for and what was refused, one line
//! each, with the default retry settings; stdout stays the answer alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

fn overloaded() -> Turn {
    Turn::http_error(529).with_header("retry-after-ms", "20")
}

#[test]
fn text_mode_reports_each_retry_on_stderr_and_prints_the_answer() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        overloaded(),
        overloaded(),
        Turn::text("made it"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "hello"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "made it\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    for (n, line) in lines.iter().enumerate() {
        assert!(line.starts_with("gyre: "), "{line}");
        assert!(line.to_lowercase().contains("overloaded"), "{line}");
        assert!(line.contains("retrying in 20 ms"), "{line}");
        assert!(line.ends_with(&format!("(attempt {}/10)", n + 1)), "{line}");
    }
    assert_eq!(server.request_count(), 3);
}

#[test]
fn quiet_hides_the_progress_lines() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([overloaded(), Turn::text("made it")])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "hello", "--quiet"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "made it\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn text_mode_reports_a_permission_denial_on_stderr() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "touch made-it"})),
        Turn::text("I could not run it."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "make a file"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "I could not run it.\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("gyre: denied Bash touch made-it: "),
        "{}",
        lines[0]
    );
    assert!(!sandbox.project().join("made-it").exists());
}

#[test]
fn usage_errors_show_clap_s_whole_message_and_exit_2() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let typo = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "x", "--modle", "m"]))
    .unwrap();
    assert_eq!(typo.code, Some(2));
    assert!(typo.stderr.contains("'--modle'"), "{}", typo.stderr);
    assert!(typo.stderr.contains("--model"), "{}", typo.stderr);
    let missing = run(sandbox.gyre(&server).unwrap().arg("completions")).unwrap();
    assert_eq!(missing.code, Some(2));
    assert!(missing.stderr.contains("<SHELL>"), "{}", missing.stderr);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn verbose_text_mode_adds_a_line_per_tool_call_and_outcome() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("notes.txt", "one\ntwo\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": file})),
        Turn::text("Two lines."),
    ]))
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "count", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Two lines.\n");
    assert_eq!(out.stderr, "● Read notes.txt\n  ⎿ 2 lines\n\n");
}
