//! Headless text mode says on stderr what it waits for and what was refused, one line
//! each, with the default retry settings; stdout stays the answer alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn, Usage};
use serde_json::json;

fn overloaded() -> Turn {
    Turn::http_error(529).with_header("retry-after-ms", "20")
}

#[test]
fn text_mode_reports_each_retry_on_stderr_and_prints_the_answer() {
    // Default retry settings (no GYRE_MAX_RETRIES): two 529s, the second with a
    // `retry-after` in seconds, as the API sends it.
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        overloaded(),
        Turn::http_error(529).with_header("retry-after", "1"),
        Turn::text("made it"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "hello"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "made it\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stderr);
    for (n, (line, wait)) in lines.iter().zip(["20 ms", "1 s"]).enumerate() {
        assert!(line.starts_with("gyre: "), "{line}");
        assert!(line.to_lowercase().contains("overloaded"), "{line}");
        assert!(line.contains(&format!("retrying in {wait}")), "{line}");
        assert!(line.ends_with(&format!("(attempt {}/10)", n + 1)), "{line}");
    }
    assert_eq!(server.request_count(), 3);
}

#[test]
fn an_unreachable_api_is_reported_on_stderr_before_the_first_wait() {
    // A port nobody listens on: every attempt is refused. gyre waits about 0.5 s before
    // the second attempt; the first line must come before that wait, naming the cause.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .args(["-p", "hello"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // Still retrying: the line came while gyre waits, not with its final error.
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(still_running, "gyre had already exited: {first}");
    assert!(first.starts_with("gyre: "), "{first}");
    assert!(first.contains(&format!("127.0.0.1:{port}")), "{first}");
    assert!(first.contains("Connection refused"), "{first}");
    assert!(first.contains("retrying in "), "{first}");
    assert!(
        first
            .trim_end()
            .ends_with("(attempt 1/2) · Ctrl+C stops, nothing is lost"),
        "{first}"
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn an_unreachable_api_gives_up_after_three_attempts() {
    // Refused on every attempt: not an overload. Two short waits that say stopping is
    // safe, then the error naming what to check; no ten retries over minutes.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .args(["-p", "hi"]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    let retries: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("retrying in"))
        .collect();
    assert_eq!(retries.len(), 2, "{}", out.stderr);
    for (n, line) in (1..).zip(&retries) {
        assert!(line.starts_with("gyre: "), "{line}");
        assert!(line.contains("(connection refused)"), "{line}");
        assert!(
            line.ends_with(&format!("(attempt {n}/2) · Ctrl+C stops, nothing is lost")),
            "{line}"
        );
    }
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(!last.contains("retrying in"), "{}", out.stderr);
    assert!(last.contains("connection refused"), "{}", out.stderr);
    assert!(last.contains("ANTHROPIC_BASE_URL"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn text_mode_reports_the_switch_to_the_fallback_model() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        overloaded(),
        overloaded(),
        overloaded(),
        Turn::text("answered by the fallback"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hello",
        "--model",
        "big-model",
        "--fallback-model",
        "small-model",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "answered by the fallback\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", out.stderr);
    assert!(lines[0].ends_with("(attempt 1/10)"), "{}", lines[0]);
    assert!(lines[1].ends_with("(attempt 2/10)"), "{}", lines[1]);
    // gyre is about to retry: the line does not tell the user to.
    assert!(!lines[0].contains("Try again"), "{}", lines[0]);
    assert_eq!(
        lines[2],
        "gyre: big-model is overloaded: switched to small-model for the rest of the session"
    );
}

#[test]
fn text_mode_reports_a_compaction() {
    let sandbox = Sandbox::new().unwrap();
    // As in compaction_e2e: a few reads, the last one near the context window.
    let file = sandbox
        .write(
            "notes.txt",
            &"some content line that is long enough to count\n".repeat(800),
        )
        .unwrap();
    let read = |input_tokens| {
        Turn::tool_use("Read", json!({"file_path": file})).with_usage(Usage {
            input_tokens,
            output_tokens: 50,
            ..Usage::default()
        })
    };
    let server = TestServer::spawn(Script::new([
        read(5_000),
        read(9_000),
        read(13_000),
        read(190_000),
        Turn::text("<summary>1. Primary request: read notes.txt.</summary>"),
        Turn::text("Done after compaction."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "read notes"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Done after compaction.\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("gyre: compacted the conversation (auto): "),
        "{}",
        lines[0]
    );
    assert!(lines[0].ends_with(" tokens"), "{}", lines[0]);
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
    assert!(
        typo.stderr
            .contains("tip: a similar argument exists: '--model'"),
        "{}",
        typo.stderr
    );
    assert!(typo.stderr.contains("For more information, try '--help'"));
    let missing = run(sandbox.gyre(&server).unwrap().arg("completions")).unwrap();
    assert_eq!(missing.code, Some(2));
    assert!(
        missing
            .stderr
            .contains("the following required arguments were not provided"),
        "{}",
        missing.stderr
    );
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
    // The backend line, then the call and its outcome.
    assert_eq!(
        out.stderr,
        format!(
            "gyre: backend: Anthropic API at {}, proxy: none, credentials: ANTHROPIC_API_KEY\n\
             ● Read notes.txt\n  ⎿ 2 lines\n\n",
            server.url()
        )
    );
}

/// `--verbose` shows every call the model makes, whichever way it went: a read-only call
/// (started while the answer streams), a Bash and a Write that run after it, an Edit
/// refused before it runs (the file was never read) and a Bash the rules deny.
#[test]
fn verbose_text_mode_shows_every_kind_of_tool_call() {
    let sandbox = Sandbox::new().unwrap();
    let notes = sandbox.write("notes.txt", "one\ntwo\n").unwrap();
    let other = sandbox.write("other.txt", "old\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": notes}))
            .and_tool_use("Bash", json!({"command": "echo ran"}))
            .and_tool_use(
                "Write",
                json!({"file_path": sandbox.project().join("new.txt"), "content": "x\n"}),
            )
            .and_tool_use(
                "Edit",
                json!({"file_path": other, "old_string": "old", "new_string": "new"}),
            )
            .and_tool_use("Bash", json!({"command": "rm -rf build"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--verbose",
        "--allowedTools",
        "Bash(echo ran) Write",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "Done.\n");
    let calls: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with("● ")).collect();
    assert_eq!(
        calls,
        [
            "● Read notes.txt",
            "● Bash echo ran",
            "● Write new.txt",
            "● Edit other.txt",
            "● Bash rm -rf build",
        ],
        "{}",
        out.stderr
    );
    // Each call line is followed by its outcome.
    assert_eq!(out.stderr.matches("  ⎿ ").count(), 5, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "old\n");
}
