//! A session recorded through RecordingClient replays to the same stream-json output,
//! and the fixture holds no API key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, TEST_API_KEY, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// Drops what differs between two runs of the same session: ids, times, paths.
fn normalise(lines: Vec<Value>) -> Vec<Value> {
    lines
        .into_iter()
        .map(|mut v| {
            if let Some(o) = v.as_object_mut() {
                for key in [
                    "uuid",
                    "session_id",
                    "duration_ms",
                    "duration_api_ms",
                    "cwd",
                ] {
                    o.remove(key);
                }
            }
            v
        })
        .collect()
}

#[test]
fn a_recorded_two_turn_session_replays_identically_without_a_key() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("a.txt", "alpha\nbeta\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("Reading.").and_tool_use("Read", json!({"file_path": file})),
        Turn::text("Two lines: alpha and beta."),
    ]))
    .unwrap();
    let fixture = sandbox.home().join("session.fixture.jsonl");
    let args = [
        "-p",
        "what is in a.txt?",
        "--output-format",
        "stream-json",
        "--verbose",
    ];
    let recorded = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("GYRE_RECORD_FIXTURE", &fixture)
        .args(args))
    .unwrap();
    assert_eq!(recorded.code, Some(0), "{}", recorded.stderr);

    let text = std::fs::read_to_string(&fixture).unwrap();
    assert_eq!(text.lines().count(), 2, "one line per request");
    assert!(
        !text.contains(TEST_API_KEY),
        "the API key was written to the fixture"
    );
    assert!(!text.to_ascii_lowercase().contains("x-api-key"));

    let replayed = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env("GYRE_REPLAY_FIXTURE", &fixture)
        .args(args))
    .unwrap();
    assert_eq!(replayed.code, Some(0), "{}", replayed.stderr);
    assert_eq!(
        server.request_count(),
        2,
        "the replay sent nothing to the server"
    );
    assert_eq!(
        normalise(replayed.lines().unwrap()),
        normalise(recorded.lines().unwrap())
    );
}

#[test]
fn a_replay_that_diverges_from_the_recording_fails_loudly() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("hi")])).unwrap();
    let fixture = sandbox.home().join("f.jsonl");
    let rec = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("GYRE_RECORD_FIXTURE", &fixture)
        .args(["-p", "hello"]))
    .unwrap();
    assert_eq!(rec.code, Some(0), "{}", rec.stderr);
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("GYRE_REPLAY_FIXTURE", &fixture)
        .args(["-p", "a different prompt"]))
    .unwrap();
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("ixture"), "{}", out.stderr);
}
