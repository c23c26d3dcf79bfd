//! Process hygiene (issue #19): nothing a Bash command starts outlives its timeout or
//! the session — not a background job, not a `setsid` child still under its shell, not
//! one whose shell is gone (reparented to gyre, the child subreaper). Through the binary,
//! checked with `pgrep`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

/// The pids of running (not zombie) processes whose command line matches `pattern`.
fn running(pattern: &str) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .expect("pgrep (procps) is needed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, t)| t.trim_start().starts_with('Z'))
            })
        })
        .map(str::to_owned)
        .collect()
}

/// Waits a little for killed processes to disappear; returns those still there.
fn survivors(pattern: &str) -> Vec<String> {
    let started = Instant::now();
    loop {
        let left = running(pattern);
        if left.is_empty() || started.elapsed() > Duration::from_secs(5) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn setsid_children_die_with_the_bash_timeout_and_background_jobs_with_the_session() {
    // Unusual durations name this test's processes for pgrep.
    let timed_out = "setsid sleep 3141.1 & (setsid sleep 3141.2 &); sleep 3141.3";
    let finished = "setsid sleep 3141.4 & (setsid sleep 3141.5 &); sleep 3141.6 & echo started";
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": timed_out, "timeout": 3000})),
        Turn::tool_use("Bash", json!({"command": finished})),
        Turn::text("done"),
    ]))
    .unwrap();
    let pattern = "sleep 3141[.]";
    assert!(running(pattern).is_empty(), "left over from an earlier run");
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "start things",
        "--permission-mode",
        "bypassPermissions",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    let sent = requests[1].body["messages"].to_string();
    assert!(sent.contains("timed out"), "{sent}");
    let sent = requests[2].body["messages"].to_string();
    assert!(sent.contains("started"), "{sent}");
    let left = survivors(pattern);
    if !left.is_empty() {
        let _ = Command::new("kill").arg("-9").args(&left).status();
    }
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn an_interrupted_bash_call_leaves_no_setsid_child_behind() {
    let command = "setsid sleep 2718.1 & (setsid sleep 2718.2 &); sleep 2718.3";
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": command})),
        Turn::text("done"),
    ]))
    .unwrap();
    let pattern = "sleep 2718[.]";
    assert!(running(pattern).is_empty(), "left over from an earlier run");
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "start things",
            "--permission-mode",
            "bypassPermissions",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Ctrl+C once all three sleeps run.
    let started = Instant::now();
    while running(pattern).len() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130));
    let left = survivors(pattern);
    if !left.is_empty() {
        let _ = Command::new("kill").arg("-9").args(&left).status();
    }
    assert!(left.is_empty(), "still running: {left:?}");
}
