//! The `gyre-testkit` binary: prints `PORT n`, serves the script, reports bad scripts.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::common::{body, raw_http};

const BIN: &str = env!("CARGO_BIN_EXE_gyre-testkit");

#[allow(clippy::unwrap_used)] // test helper
fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gyre-testkit-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn prints_port_and_serves_the_script() {
    let script = temp_file(
        "serve.json",
        r#"{"turns": [{"content": [{"type": "text", "text": "hello binary"}]}]}"#,
    );
    let mut child = Command::new(BIN)
        .arg("--script")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .strip_prefix("PORT ")
        .unwrap()
        .trim_end()
        .parse()
        .unwrap();
    assert_eq!(line, format!("PORT {port}\n"));

    assert!(raw_http(port, "GET", "/_testkit/health", "").starts_with("HTTP/1.1 200"));
    let response = raw_http(port, "POST", "/v1/messages", &body(true).to_string());
    assert!(response.contains("hello binary"), "{response}");
    let requests = raw_http(port, "GET", "/_testkit/requests", "");
    assert!(requests.contains(r#""path":"/v1/messages""#), "{requests}");
    assert!(requests.contains(r#""turn":0"#), "{requests}");

    child.kill().unwrap();
    child.wait().unwrap();
}

#[cfg(unix)]
#[test]
fn exits_cleanly_on_sigterm() {
    let script = temp_file("term.json", "[]");
    let mut child = Command::new(BIN)
        .arg("--script")
        .arg(&script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("PORT "), "{line}");
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(child.wait().unwrap().success());
}

#[test]
fn bad_script_path_is_a_clear_error() {
    let output = Command::new(BIN)
        .args(["--script", "/nonexistent/script.json"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("/nonexistent/script.json"), "{stderr}");
}

#[test]
fn bad_script_json_is_a_clear_error() {
    let script = temp_file("bad.json", r#"{"turns": [{"content": [{"type": "txt"}]}]}"#);
    let output = Command::new(BIN)
        .arg("--script")
        .arg(&script)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("bad.json") && stderr.contains("turns[0]"),
        "{stderr}"
    );
}

#[test]
fn missing_script_flag_prints_usage() {
    let output = Command::new(BIN).output().unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .contains("Usage: gyre-testkit --script <FILE>")
    );
}
