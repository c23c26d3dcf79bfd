//! Bounded operations (issue #19): no tool call and no response can hang gyre or grow its
//! memory without bound. FIFOs and devices are refused before they are read, paged Reads
//! stream, an absurd Glob pattern is an error, and one endless SSE line is cut off with a
//! clear error. All through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gyre_e2e::{Run, Sandbox};
use gyre_testkit::{Block, CapturedRequest, Script, TestServer, Turn};
use serde_json::{Value, json};

/// Far above a healthy run: a gyre still running after this is hung.
const DEADLINE: Duration = Duration::from_secs(300);

/// Runs gyre to completion, or kills it at [`DEADLINE`] and fails the test.
fn run_bounded(cmd: &mut Command) -> Run {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > DEADLINE {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "gyre hung (killed after {DEADLINE:?}); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap().into()
}

/// The tool_results the model was sent in the last request, in order.
fn last_results(requests: &[CapturedRequest]) -> Vec<(String, bool)> {
    let last = requests.last().unwrap();
    let messages = last.body["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (text, b["is_error"] == true)
        })
        .collect()
}

fn headless(sandbox: &Sandbox, server: &TestServer, mode: &str) -> Run {
    run_bounded(sandbox.gyre(server).unwrap().args([
        "-p",
        "go",
        "--permission-mode",
        mode,
        "--output-format",
        "json",
    ]))
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn read_edit_and_write_of_a_fifo_are_refused_without_blocking() {
    let sandbox = Sandbox::new().unwrap();
    let fifo = sandbox.project().join("pipe");
    mkfifo(&fifo);
    let server = TestServer::spawn(Script::new([
        Turn::response([
            Block::tool_use("Read", json!({"file_path": "pipe"})),
            Block::tool_use(
                "Read",
                json!({"file_path": "pipe", "offset": 1, "limit": 5}),
            ),
        ]),
        Turn::tool_use(
            "Edit",
            json!({"file_path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        Turn::tool_use("Write", json!({"file_path": "pipe", "content": "x"})),
        Turn::text("done"),
    ]))
    .unwrap();
    let out = headless(&sandbox, &server, "acceptEdits");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for (i, request) in requests[1..].iter().enumerate() {
        for (text, is_error) in last_results(std::slice::from_ref(request)) {
            assert!(is_error, "call {i}: {text}");
            // The Edit names a file never read: refused before anything is opened.
            let expected = if i == 1 {
                "File has not been read yet"
            } else {
                "is a FIFO (named pipe)"
            };
            assert!(text.contains(expected), "call {i}: {text}");
        }
    }
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo(),
        "the FIFO was replaced"
    );
}

#[test]
fn read_of_a_character_device_is_refused() {
    let sandbox = Sandbox::new().unwrap();
    // A device node inside the project (root can make one), and /dev/zero itself.
    let node = sandbox.project().join("zero");
    let made = Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "5"])
        .status()
        .is_ok_and(|s| s.success());
    let mut calls = vec![Block::tool_use(
        "Read",
        json!({"file_path": "/dev/zero", "offset": 1, "limit": 1}),
    )];
    if made {
        calls.push(Block::tool_use("Read", json!({"file_path": "zero"})));
    }
    let server = TestServer::spawn(Script::new([
        Turn::response(calls.clone()),
        Turn::text("done"),
    ]))
    .unwrap();
    let out = headless(&sandbox, &server, "bypassPermissions");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = last_results(&server.requests());
    assert_eq!(results.len(), calls.len());
    for (text, is_error) in results {
        assert!(is_error, "{text}");
        assert!(text.contains("is a character device"), "{text}");
    }
}

/// A sparse file of `len` bytes: 2000 text lines (past the 8 KiB sniffed for binary
/// content), a hole, a line at the end.
fn sparse_file(path: &Path, len: u64) {
    use std::io::{Seek as _, SeekFrom, Write as _};
    let mut file = std::fs::File::create(path).unwrap();
    for i in 1..=2000 {
        writeln!(file, "line {i}").unwrap();
    }
    file.seek(SeekFrom::Start(len - 5)).unwrap();
    file.write_all(b"\nend\n").unwrap();
}

#[test]
fn a_paged_read_of_a_huge_file_reads_only_the_lines_asked_for() {
    let sandbox = Sandbox::new().unwrap();
    // 4 GiB, and gyre may use 2 GiB of address space: loading the file would fail.
    sparse_file(&sandbox.project().join("huge.txt"), 4 << 30);
    let server = TestServer::spawn(Script::new([
        Turn::response([
            Block::tool_use(
                "Read",
                json!({"file_path": "huge.txt", "offset": 3, "limit": 2}),
            ),
            Block::tool_use("Read", json!({"file_path": "huge.txt"})),
        ]),
        Turn::text("done"),
    ]))
    .unwrap();
    let cmd = sandbox.gyre(&server).unwrap();
    let program = cmd.get_program().to_owned();
    let mut limited = Command::new("bash");
    limited
        .arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(program)
        .args([
            "-p",
            "go",
            "--output-format",
            "json",
            "--permission-mode",
            "acceptEdits",
        ])
        .current_dir(sandbox.project())
        .env_clear()
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))))
        // Address space a many-core machine reserves per thread (malloc arenas, worker
        // stacks) must not eat the limit.
        .env("MALLOC_ARENA_MAX", "2")
        .env("TOKIO_WORKER_THREADS", "2")
        .stdin(Stdio::null());
    let out = run_bounded(&mut limited);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = last_results(&server.requests());
    assert_eq!(results[0], ("3\tline 3\n4\tline 4".to_owned(), false));
    assert!(results[1].1, "{:?}", results[1]);
    assert!(
        results[1].0.contains("exceeds maximum allowed size"),
        "{:?}",
        results[1]
    );
}

#[test]
fn an_enormous_glob_pattern_is_an_error_not_a_crash() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("a.txt", "a\n").unwrap();
    let huge = "*a".repeat(250 * 1024);
    let server = TestServer::spawn(Script::new([
        Turn::response([
            Block::tool_use("Glob", json!({"pattern": huge})),
            Block::tool_use("Grep", json!({"pattern": "a", "glob": huge})),
            Block::tool_use("Glob", json!({"pattern": "*.txt"})),
        ]),
        Turn::text("done"),
    ]))
    .unwrap();
    let out = headless(&sandbox, &server, "default");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = last_results(&server.requests());
    assert_eq!(results.len(), 3);
    for (text, is_error) in &results[..2] {
        assert!(is_error, "{text}");
        assert!(text.contains("the limit is"), "{text}");
        assert!(text.len() < 1000, "the error repeats the pattern");
    }
    assert!(results[2].0.ends_with("a.txt"), "{:?}", results[2]);
}

/// A whole response as raw SSE, with `pad` bytes in an unknown field of its ping event
/// (all on one line).
fn padded_response(pad: usize) -> String {
    let event = |name: &str, data: String| format!("event: {name}\ndata: {data}\n\n");
    let mut out = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null, "usage": {"input_tokens": 1, "output_tokens": 0}}}).to_string(),
    );
    out.push_str(&event(
        "ping",
        format!("{{\"type\":\"ping\",\"pad\":\"{}\"}}", "x".repeat(pad)),
    ));
    for (name, data) in [
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "padded answer"}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ] {
        out.push_str(&event(name, data.to_string()));
    }
    out
}

#[test]
fn a_16_mib_sse_line_is_parsed_and_one_over_32_mib_is_a_clear_error() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::raw_sse(padded_response(
        16 * 1024 * 1024,
    ))]))
    .unwrap();
    let out = headless(&sandbox, &server, "default");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.result().unwrap()["result"], "padded answer");

    let server = TestServer::spawn(Script::new([Turn::raw_sse(padded_response(
        40 * 1024 * 1024,
    ))]))
    .unwrap();
    let out = headless(&sandbox, &server, "default");
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(
        out.stdout.contains("a line over 32 MiB") || out.stderr.contains("a line over 32 MiB"),
        "{}\n{}",
        out.stdout.chars().take(2000).collect::<String>(),
        out.stderr
    );
    assert_eq!(server.request_count(), 1, "not retried");
}
