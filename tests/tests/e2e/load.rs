//! Load (issue #9): 20 headless sessions at once against one testkit server all complete,
//! each with its own session id and transcript, and no session sees another's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use gyre_e2e::{Sandbox, pairing_problems};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

const SESSIONS: usize = 20;

#[test]
fn twenty_concurrent_sessions_complete_with_their_own_transcripts() {
    // The server hands turns out in arrival order, so which session gets which turn is
    // up to the scheduler: Read and answer turns alternate, a session reads (its own
    // `marker.txt`, relative to its cwd) until it draws an answer, and the answer is
    // repeated once the script runs out. Every session ends with an answer.
    let turns = (0..SESSIONS).flat_map(|_| {
        [
            Turn::text("Reading.")
                .and_tool_use("Read", json!({"file_path": "marker.txt"}))
                .delay_per_event(std::time::Duration::from_millis(2)),
            Turn::text("Done."),
        ]
    });
    let server = TestServer::spawn(Script::new(turns).repeat_last()).unwrap();
    let sandboxes: Vec<Sandbox> = (0..SESSIONS).map(|_| Sandbox::new().unwrap()).collect();
    let mut children = Vec::new();
    for (i, sandbox) in sandboxes.iter().enumerate() {
        sandbox
            .write("marker.txt", &format!("marker-of-session-{i:02}\n"))
            .unwrap();
        let child = sandbox
            .gyre(&server)
            .unwrap()
            .args([
                "-p",
                &format!("prompt-of-session-{i:02}"),
                "--output-format",
                "stream-json",
                "--verbose",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push(child);
    }
    let outputs: Vec<std::process::Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();

    let mut session_ids = HashSet::new();
    for (i, (out, sandbox)) in outputs.iter().zip(&sandboxes).enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let result = lines.last().unwrap();
        assert_eq!(result["type"], "result", "session {i}: {stdout}\n{stderr}");
        let id = result["session_id"].as_str().unwrap().to_owned();
        assert!(
            lines.iter().all(|l| l["session_id"] == id.as_str()),
            "session {i}"
        );
        assert!(session_ids.insert(id.clone()), "session id {id} reused");

        // Its transcript is its own: named for its id, holding its prompt and marker
        // and nobody else's.
        let transcripts = sandbox.transcripts();
        assert_eq!(transcripts.len(), 1, "session {i}");
        assert_eq!(
            transcripts[0].file_stem().unwrap().to_string_lossy(),
            id,
            "session {i}"
        );
        let text = std::fs::read_to_string(&transcripts[0]).unwrap();
        assert!(text.contains(&format!("prompt-of-session-{i:02}")));
        let read = lines.iter().any(|l| l["type"] == "user");
        assert_eq!(
            text.contains(&format!("marker-of-session-{i:02}")),
            read,
            "session {i}"
        );
        assert_eq!(result["subtype"], "success", "session {i}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "session {i}: {stderr}");
        for j in (0..SESSIONS).filter(|j| *j != i) {
            assert!(
                !text.contains(&format!("session-{j:02}")),
                "session {i}'s transcript mentions session {j}"
            );
        }
        let loaded = gyre_loop::load_transcript(&transcripts[0]).unwrap();
        assert_eq!(loaded.skipped_lines, 0);
        assert_eq!(loaded.repaired_tool_calls, 0);
    }
    assert_eq!(session_ids.len(), SESSIONS);

    // Every request carries one session's history only, correctly paired.
    for (n, r) in server.requests().iter().enumerate() {
        let body = r.body["messages"].to_string();
        let mentioned: HashSet<usize> = (0..SESSIONS)
            .filter(|i| body.contains(&format!("session-{i:02}")))
            .collect();
        assert_eq!(
            mentioned.len(),
            1,
            "request {n} mixes sessions {mentioned:?}"
        );
        assert_eq!(pairing_problems(&r.body["messages"]), Vec::<String>::new());
    }
}
