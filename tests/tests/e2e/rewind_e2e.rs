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
