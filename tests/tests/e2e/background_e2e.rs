//! Background shells end to end: a shell outlives the turns that started and read it,
//! and is killed with its process group when the session ends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use gyre_e2e::Sandbox;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

fn user_line(text: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "user", "message": {"role": "user", "content": text}})
    )
}

fn pgrep(pattern: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The tool result the model got in request `i`.
fn result_in(server: &TestServer, i: usize) -> String {
    server.requests()[i].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]["content"]
        .to_string()
}

#[test]
fn a_background_shell_outlives_two_turns_and_dies_with_the_session() {
    // A command line no other test runs, to find its processes by.
    let marker = format!("sleep 8{}.25", std::process::id());
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Bash",
            json!({"command": format!("echo started; {marker} & {marker}"), "run_in_background": true}),
        ),
        Turn::tool_use("BashOutput", json!({"bash_id": "bash_1"})),
        Turn::text("It runs."),
        Turn::tool_use("BashOutput", json!({"bash_id": "bash_1"})),
        Turn::text("Still running."),
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
            "--allowedTools",
            "Bash",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next_result = || -> Value {
        for line in lines.by_ref() {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["type"] == "result" {
                return v;
            }
        }
        panic!("gyre ended before a result");
    };

    stdin
        .write_all(user_line("start the server").as_bytes())
        .unwrap();
    assert_eq!(next_result()["is_error"], false);
    assert!(
        pgrep(&marker),
        "the background shell is not running after turn 1"
    );
    assert!(result_in(&server, 1).contains("ID: bash_1"));
    assert!(result_in(&server, 2).contains("<status>running</status>"));

    stdin
        .write_all(user_line("is it still up?").as_bytes())
        .unwrap();
    assert_eq!(next_result()["is_error"], false);
    assert!(
        pgrep(&marker),
        "the background shell did not outlive turn 2"
    );
    assert!(result_in(&server, 4).contains("<status>running</status>"));

    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "gyre did not exit at EOF");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    // Killed with its group: neither the shell's sleep nor the one it backgrounded is left.
    let deadline = Instant::now() + Duration::from_secs(10);
    while pgrep(&marker) {
        assert!(Instant::now() < deadline, "orphans left: {marker}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
