//! Checkpoints and rewind through the binary: the Agent SDK's `rewind_files` (the real
//! Python SDK, `tests/sdk/agent_sdk_cases.py`) and `--resume`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The SDK release the cases were written against (as `agent_sdk.rs`).
const SDK_REQUIREMENT: &str = "claude-agent-sdk==0.2.189";

fn sdk_cases(names: &[&str]) {
    let python = gyre_e2e::pip_venv("agent-sdk-venv", SDK_REQUIREMENT);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/agent_sdk_cases.py");
    let mut cmd = Command::new(python);
    cmd.arg(script);
    for name in names {
        cmd.args(["--only", name]);
    }
    gyre_e2e::run_client_cases(cmd);
}

#[test]
fn rewind_files_from_the_python_sdk_restores_what_the_session_wrote_and_nothing_else() {
    sdk_cases(&["rewind_files"]);
}

#[test]
fn rewind_files_keeps_nothing_without_enable_file_checkpointing() {
    sdk_cases(&["rewind_files_needs_checkpointing"]);
}

/// `/rewind` and Esc Esc in the REPL: a real terminal (tmux), real keys, the screens
/// read back. Two prompts change files; Esc Esc opens the picker over the prompts,
/// choosing the first shows what its code rewind would change, and "code and
/// conversation" puts both back and the prompt into the input box.
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn esc_esc_and_slash_rewind_restore_code_and_conversation_through_the_picker() {
    use crate::repl_tmux::{ReplScreen, box_text, start_gyre_with};
    use gyre_testkit::{Script, TestServer, Turn};
    use serde_json::json;

    let sandbox = gyre_e2e::Sandbox::new().unwrap();
    let a = sandbox.write("a.txt", "one\n").unwrap();
    let b = sandbox.project().join("b.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": a})),
        Turn::tool_use(
            "Edit",
            json!({"file_path": a, "old_string": "one", "new_string": "two"}),
        ),
        Turn::text("Changed."),
        Turn::tool_use("Write", json!({"file_path": b, "content": "new\n"})),
        Turn::text("Added."),
        Turn::text("Hi again."),
        Turn::text("Resumed."),
    ]))
    .unwrap();
    let tmux = start_gyre_with(
        &sandbox,
        &server,
        false,
        &["--permission-mode", "acceptEdits"],
    );
    tmux.type_line("make it two");
    tmux.wait_for("Changed.");
    tmux.wait_for_prompt();
    tmux.type_line("add b");
    tmux.wait_for("Added.");
    tmux.wait_for_prompt();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "two\n");
    assert!(b.exists());

    tmux.key("Escape");
    tmux.wait_for("Press Esc again to rewind");
    tmux.key("Escape");
    let picker = tmux.wait_for("Rewind: go back to before which prompt?");
    assert!(picker.contains("   make it two"), "{picker}");
    assert!(
        picker.contains(" › add b"),
        "the newest prompt is selected: {picker}"
    );
    tmux.key("Up");
    tmux.key("Enter");
    let modes = tmux.wait_for("Restore code and conversation");
    assert!(modes.contains("Rewind to before: make it two"), "{modes}");
    assert!(modes.contains("Restore conversation"), "{modes}");
    assert!(modes.contains("Restore code"), "{modes}");
    assert!(
        modes.contains("2 files would change (+2 -1)."),
        "a.txt and b.txt changed since: {modes}"
    );
    assert!(
        modes.contains("Changes made by Bash commands are not undone."),
        "{modes}"
    );
    assert!(b.exists(), "choosing a prompt changes nothing yet");
    tmux.key("Enter");
    let done = tmux.wait_for("Rewound the conversation to before");
    assert!(
        done.contains("Rewound the code to before “make it two”: 2 files restored (+2 -1)."),
        "{done}"
    );
    let back = tmux.wait_until("the prompt back in the input box", |pane| {
        box_text(pane).as_deref() == Some("make it two")
    });
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\n", "{back}");
    assert!(!b.exists(), "the file the session created is gone");

    // Nothing left to go back to; the next message starts from the empty conversation.
    tmux.key("C-u");
    tmux.wait_for_prompt();
    tmux.type_line("/rewind");
    tmux.wait_for("Nothing to rewind: no prompt in this conversation yet.");
    tmux.type_line("hello");
    tmux.wait_for("Hi again.");
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(messages.len(), 1, "{messages:#?}");
}

/// A session killed with `kill -9` right after an Edit keeps its checkpoint (the
/// backup and its `file-history-snapshot` line are on disk before the file changes);
/// `gyre --resume` offers the prompt in `/rewind`, and "Restore code" puts the file
/// back while the conversation stays.
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn checkpoints_survive_kill_9_and_a_resumed_repl_rewinds_the_code() {
    use crate::repl_tmux::{ReplScreen, start_gyre_with};
    use gyre_testkit::{Script, TestServer, Turn};
    use serde_json::{Value, json};
    use std::time::{Duration, Instant};

    let sandbox = gyre_e2e::Sandbox::new().unwrap();
    let a = sandbox.write("a.txt", "one\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": a})),
        Turn::tool_use(
            "Edit",
            json!({"file_path": a, "old_string": "one", "new_string": "two"}),
        ),
        Turn::text("never finished").stall_forever(1),
    ]))
    .unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "make it two", "--allowedTools", "Edit"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.turns_served() < 3 {
        assert!(Instant::now() < deadline, "the third request never came");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "two\n");

    let transcript = sandbox.transcripts().pop().unwrap();
    let session = transcript
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let lines: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let snapshot = lines
        .iter()
        .rev()
        .find(|l| l["type"] == "file-history-snapshot")
        .unwrap();
    let prompt = lines.iter().find(|l| l["type"] == "user").unwrap();
    assert_eq!(
        snapshot["messageId"], prompt["uuid"],
        "the prompt is the checkpoint"
    );
    assert_eq!(snapshot["isSnapshotUpdate"], true);
    let backup = &snapshot["snapshot"]["trackedFileBackups"][a.display().to_string()];
    assert_eq!(backup["version"], 1, "{snapshot}");
    let name = backup["backupFileName"].as_str().unwrap();
    let kept = sandbox
        .home()
        .join("file-history")
        .join(&session)
        .join(name);
    assert_eq!(std::fs::read_to_string(kept).unwrap(), "one\n");

    let tmux = start_gyre_with(&sandbox, &server, false, &["--resume", &session]);
    tmux.type_line("/rewind");
    let picker = tmux.wait_for("Rewind: go back to before which prompt?");
    assert!(picker.contains(" › make it two"), "{picker}");
    tmux.key("Enter");
    let modes = tmux.wait_for("1 file would change (+1 -1).");
    assert!(modes.contains("Restore code"), "{modes}");
    tmux.key("Down");
    tmux.key("Down");
    tmux.key("Enter");
    let done = tmux.wait_for("Rewound the code to before “make it two”: 1 file restored (+1 -1).");
    assert!(!done.contains("Rewound the conversation"), "{done}");
    tmux.wait_for_prompt();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\n");
}

/// `rewind_files` on the wire, as the TypeScript SDK's `rewindFiles(id, {dryRun})`
/// sends it: the id is the `uuid` the SDK gave its user message; a dry run answers
/// `RewindFilesResult` and changes nothing, the real one puts the files back.
#[test]
fn rewind_files_answers_a_dry_run_then_rewinds_to_the_sdks_own_message_uuid() {
    use gyre_testkit::{Script, TestServer, Turn};
    use serde_json::{Value, json};

    let sandbox = gyre_e2e::Sandbox::new().unwrap();
    let b = sandbox.project().join("b.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": b, "content": "one\ntwo\n"})),
        Turn::text("Written."),
    ]))
    .unwrap();
    let mut cmd = sandbox.gyre(&server).unwrap();
    cmd.args(["--permission-mode", "acceptEdits", "--replay-user-messages"])
        .env("CLAUDE_CODE_ENTRYPOINT", "sdk-ts")
        .env("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true");
    let uuid = "5a0c1d2e-3f40-4b5c-8d6e-7f8091a2b3c4";
    let user = json!({"type": "user", "uuid": uuid, "session_id": "",
                      "parent_tool_use_id": null,
                      "message": {"role": "user", "content": "write b.txt"}});
    let rewind = |id: &str, dry_run: bool| {
        json!({"type": "control_request", "request_id": id, "request": {
            "subtype": "rewind_files", "user_message_id": uuid, "dry_run": dry_run}})
    };
    let b_after_dry_run = std::cell::RefCell::new(None);
    let (lines, stderr) = gyre_e2e::converse(cmd, &[user], |line| {
        if line["type"] == "result" {
            return Some(vec![rewind("dry", true)]);
        }
        match line["response"]["request_id"].as_str() {
            Some("dry") => {
                *b_after_dry_run.borrow_mut() = Some(b.exists());
                Some(vec![rewind("real", false)])
            }
            Some("real") => None,
            _ => Some(Vec::new()),
        }
    });
    let replayed = lines
        .iter()
        .find(|l| l["type"] == "user" && l["uuid"] == uuid);
    assert!(
        replayed.is_some(),
        "the message is replayed under its uuid: {lines:?}"
    );
    let answer = |id: &str| -> Value {
        lines
            .iter()
            .find(|l| l["response"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no answer to {id}: {stderr}"))["response"]["response"]
            .clone()
    };
    let path = b.display().to_string();
    assert_eq!(
        answer("dry"),
        json!({"canRewind": true, "filesChanged": [path], "insertions": 2, "deletions": 0})
    );
    assert_eq!(
        *b_after_dry_run.borrow(),
        Some(true),
        "a dry run changes nothing"
    );
    assert_eq!(answer("real")["canRewind"], true);
    assert!(!b.exists(), "the file the session wrote is gone");
}

/// `--fork-session` takes the checkpoints along: the fork's `/rewind` restores what the
/// original session wrote.
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn a_forked_session_rewinds_to_the_checkpoints_it_copied() {
    use crate::repl_tmux::{ReplScreen, start_gyre_with};
    use gyre_testkit::{Script, TestServer, Turn};
    use serde_json::json;

    let sandbox = gyre_e2e::Sandbox::new().unwrap();
    let a = sandbox.write("a.txt", "one\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": a})),
        Turn::tool_use("Write", json!({"file_path": a, "content": "rewritten\n"})),
        Turn::text("Rewritten."),
    ]))
    .unwrap();
    let out = gyre_e2e::run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "rewrite a.txt",
        "--permission-mode",
        "acceptEdits",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let session = out.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tmux = start_gyre_with(
        &sandbox,
        &server,
        false,
        &["--resume", &session, "--fork-session"],
    );
    tmux.type_line("/rewind");
    tmux.wait_for(" › rewrite a.txt");
    tmux.key("Enter");
    tmux.wait_for("1 file would change (+1 -1).");
    tmux.key("Down");
    tmux.key("Down");
    tmux.key("Enter");
    tmux.wait_for("1 file restored (+1 -1).");
    tmux.wait_for_prompt();
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\n");
    assert_eq!(
        sandbox.transcripts().len(),
        2,
        "the original stays as it was"
    );
}
