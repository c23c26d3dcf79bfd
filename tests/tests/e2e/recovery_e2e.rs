//! Recovery paths of the loop through the real binary (issue #6).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

#[test]
fn max_tokens_five_times_escalates_recovers_three_times_then_errors() {
    let sandbox = Sandbox::new().unwrap();
    let cut = || Turn::text("partial answer").with_stop_reason("max_tokens");
    let server = TestServer::spawn(Script::new([cut(), cut(), cut(), cut(), cut()])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "write a novel",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let result = out.result().unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(result["subtype"], "error_during_execution");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert_eq!(requests[0].body["max_tokens"], 8192);
    for r in &requests[1..] {
        assert_eq!(r.body["max_tokens"], 64000);
    }
    let recovery = "Output token limit hit. Resume directly — no apology, no recap of what you were doing. Pick up mid-thought if that is where the cut happened. Break remaining work into smaller pieces.";
    for (i, r) in requests[2..].iter().enumerate() {
        let msgs = r.body["messages"].as_array().unwrap();
        let nudges = msgs
            .iter()
            .filter(|m| m["content"][0]["text"] == recovery)
            .count();
        assert_eq!(nudges, i + 1, "request {}", i + 2);
    }
}

#[test]
fn sigint_during_a_long_bash_call_kills_it_and_exits_130() {
    let sandbox = Sandbox::new().unwrap();
    // A distinctive duration so we can look for the process afterwards.
    let command = "sleep 37.25";
    let server = TestServer::spawn(Script::new([
        Turn::text("Running it.").and_tool_use("Bash", json!({"command": command})),
        Turn::text("never reached"),
    ]))
    .unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "run the slow thing",
            "--allowedTools",
            "Bash",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut printed: Vec<Value> = Vec::new();
    let mut line = String::new();
    while reader.read_line(&mut line).unwrap() > 0 {
        let v: Value = serde_json::from_str(&line).unwrap();
        line.clear();
        let is_call = v["type"] == "assistant";
        printed.push(v);
        if is_call {
            break;
        }
    }
    // Wait for the command to be running, then interrupt gyre.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pgrep(command) {
        assert!(Instant::now() < deadline, "the Bash command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    for l in reader.lines() {
        printed.push(serde_json::from_str(&l.unwrap()).unwrap());
    }
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, Some(130), "{}", out.stderr);
    let result = printed.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["terminal_reason"], "aborted_tools");
    let deadline = Instant::now() + Duration::from_secs(5);
    while pgrep(command) {
        assert!(Instant::now() < deadline, "the Bash process group survived");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The transcript ends with the synthetic result for the interrupted call.
    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    let last: Value = serde_json::from_str(transcript.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "user");
    let block = &last["message"]["content"][0];
    assert_eq!(block["type"], "tool_result");
    assert_eq!(block["is_error"], true);
    assert_eq!(server.request_count(), 1);
}

fn pgrep(pattern: &str) -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn three_overloads_with_a_fallback_model_switch_models_and_succeed() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::http_error(529),
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
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    assert_eq!(
        gyre_e2e::kinds(&lines),
        [
            "system/init",
            "system/api_retry",
            "system/api_retry",
            "system/model_fallback",
            "assistant",
            "result"
        ]
    );
    assert_eq!(lines[1]["attempt"], 1);
    assert_eq!(lines[1]["error_status"], 529);
    assert_eq!(lines[1]["max_retries"], 10);
    let first_delay = lines[1]["retry_delay_ms"].as_u64().unwrap();
    assert!((500..=625).contains(&first_delay), "{first_delay}");
    assert_eq!(lines[3]["original_model"], "big-model");
    assert_eq!(lines[3]["fallback_model"], "small-model");
    assert_eq!(lines[4]["message"]["model"], "small-model");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2].body["model"], "big-model");
    assert_eq!(requests[3].body["model"], "small-model");
}

#[test]
fn prompt_too_long_on_a_long_history_compacts_and_succeeds() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(gyre_e2e::prompt_too_long_after_three_reads(&sandbox)).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read the log",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let boundary = lines
        .iter()
        .find(|l| l["subtype"] == "compact_boundary")
        .unwrap();
    assert_eq!(boundary["compact_metadata"]["trigger"], "reactive");
    let result = out.result().unwrap();
    assert_eq!(result["result"], "Done, after compacting.");
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    let last = requests[5].body.to_string();
    assert!(last.contains("The user asked to read log.txt three times."));
    assert!(last.len() < requests[3].body.to_string().len() / 2);
}
