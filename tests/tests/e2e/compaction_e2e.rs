//! Compaction end to end: usage near the window triggers a summary, a boundary line
//! and a much smaller next request; a failing summarizer opens the breaker.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, kinds, run};
use gyre_testkit::{Script, TestServer, Turn, Usage};
use serde_json::json;

fn usage(input: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: 50,
        ..Usage::default()
    }
}

fn is_summary_request(body: &serde_json::Value) -> bool {
    body.to_string()
        .contains("You are summarizing a coding session")
}

#[test]
fn usage_near_the_window_compacts_and_the_next_request_is_far_smaller() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write(
            "big.txt",
            &"some content line that is long enough to count\n".repeat(800),
        )
        .unwrap();
    let read = || Turn::tool_use("Read", json!({"file_path": file}));
    let server = TestServer::spawn(Script::new([
        read().with_usage(usage(5_000)),
        read().with_usage(usage(9_000)),
        read().with_usage(usage(13_000)),
        read().with_usage(usage(190_000)),
        Turn::text("<analysis>thinking it over</analysis><summary>1. Primary request: read big.txt repeatedly.</summary>"),
        Turn::text("All done after compaction."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read big.txt a few times",
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
        .unwrap_or_else(|| panic!("no compact_boundary in {:?}", kinds(&lines)));
    assert_eq!(boundary["compact_metadata"]["trigger"], "auto");
    assert!(boundary["compact_metadata"]["pre_tokens"].as_u64().unwrap() >= 190_000);

    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    assert!(is_summary_request(&requests[4].body));
    let before = requests[3].body.to_string().len();
    let after = &requests[5].body;
    assert!(!is_summary_request(after));
    let after_text = after.to_string();
    assert!(after_text.contains("Primary request: read big.txt repeatedly."));
    assert!(
        !after_text.contains("thinking it over"),
        "analysis must be stripped"
    );
    assert!(
        after_text.len() * 2 < before,
        "{} vs {before}",
        after_text.len()
    );
    assert_eq!(
        out.result().unwrap()["result"],
        "All done after compaction."
    );
}

#[test]
fn a_summarizer_failing_three_times_opens_the_breaker_and_the_session_goes_on() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write(
            "a.txt",
            &"alpha beta gamma delta epsilon zeta eta theta\n".repeat(800),
        )
        .unwrap();
    let read = |n: u64| Turn::tool_use("Read", json!({"file_path": file})).with_usage(usage(n));
    let fail = || Turn::http_error(400);
    let server = TestServer::spawn(Script::new([
        read(5_000),
        read(9_000),
        read(190_000),
        fail(),
        read(190_000),
        fail(),
        read(190_000),
        fail(),
        read(190_000),
        read(190_000),
        Turn::text("finished without compaction").with_usage(usage(190_000)),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    let summaries = requests
        .iter()
        .filter(|r| is_summary_request(&r.body))
        .count();
    assert_eq!(summaries, 3, "the breaker stops after three failures");
    assert_eq!(requests.len(), 11);
    assert_eq!(
        out.result().unwrap()["result"],
        "finished without compaction"
    );
    assert!(!kinds(&out.lines().unwrap()).contains(&"system/compact_boundary".to_owned()));
}
