//! The REPL's reporting and housekeeping slash commands through a real terminal:
//! `/context`, `/status`, `/doctor`, `/permissions`, `/agents`, `/add-dir`, `/export`,
//! `/init` and `/memory` (tmux, as `repl_tmux`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::Sandbox;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

use crate::repl_tmux::{ReplScreen, start_gyre, start_gyre_with_env};

/// The screen's words joined by single spaces (wrapped rows read as one text).
fn words(pane: &str) -> String {
    pane.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn quit(tmux: &gyre_e2e::tmux::Tmux) {
    tmux.key("C-d");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn context_status_and_doctor_report_the_session() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("CLAUDE.md", &"Run cargo test. ".repeat(30))
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("hi");
    tmux.wait_for("Hello.");
    tmux.wait_for_prompt();

    tmux.type_line("/context");
    let pane = words(&tmux.wait_for("Free space:"));
    assert!(pane.contains("Context usage"), "{pane}");
    assert!(pane.contains("claude-sonnet-4-5 ·"), "{pane}");
    // 480 bytes of memory at 3 bytes a token.
    assert!(pane.contains("◼ Memory files: 160 tokens"), "{pane}");
    assert!(pane.contains("■ Messages:"), "{pane}");
    assert!(pane.contains("▲ System tools:"), "{pane}");
    assert!(
        pane.contains("▒ Autocompact buffer: 13.0k tokens (6.5%)"),
        "{pane}"
    );
    assert!(pane.contains("CLAUDE.md: 160 tokens"), "{pane}");
    tmux.wait_for_prompt();

    tmux.type_line("/status");
    let pane = words(&tmux.wait_for("MCP servers"));
    assert!(pane.contains("Version gyre "), "{pane}");
    assert!(pane.contains("Model claude-sonnet-4-5"), "{pane}");
    assert!(pane.contains("Backend Anthropic API"), "{pane}");
    assert!(pane.contains("Auth ANTHROPIC_API_KEY"), "{pane}");
    assert!(pane.contains("Permission mode default"), "{pane}");
    assert!(pane.contains("CLAUDE.md"), "{pane}");
    let session = sandbox.transcripts()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(pane.contains(&format!("Session ID {session}")), "{pane}");
    tmux.wait_for_prompt();

    // A broken user settings file is named with what to do (gyre started before it broke).
    std::fs::write(sandbox.home().join("settings.json"), "{\"model\": }").unwrap();
    tmux.type_line("/doctor");
    let pane = words(&tmux.wait_for("to look at."));
    assert!(pane.contains("✓ gyre home:"), "{pane}");
    assert!(
        pane.contains("✓ Credentials: Anthropic API via ANTHROPIC_API_KEY"),
        "{pane}"
    );
    assert!(pane.contains("✗ Settings:"), "{pane}");
    assert!(pane.contains("settings.json"), "{pane}");
    assert!(
        pane.contains("→ fix the JSON at that line and column"),
        "{pane}"
    );
    assert!(pane.contains("Sandbox:"), "{pane}");
    tmux.wait_for_prompt();
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn permissions_adds_a_rule_the_next_call_follows_saves_it_where_asked_and_removes_it() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo permitted-by-rule"})),
        Turn::text("Ran it."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("/permissions add allow Bash(echo permitted-by-rule) local");
    let pane = words(&tmux.wait_for("settings.local.json"));
    assert!(
        pane.contains("Added allow rule Bash(echo permitted-by-rule): this session and"),
        "{pane}"
    );
    let local = sandbox.project().join(".gyre/settings.local.json");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&local).unwrap()).unwrap();
    assert_eq!(
        saved["permissions"]["allow"],
        json!(["Bash(echo permitted-by-rule)"])
    );
    tmux.wait_for_prompt();

    // The rule is in force: the call runs without a question.
    tmux.type_line("run it");
    tmux.wait_for("Ran it.");
    let pane = tmux.wait_for_prompt();
    assert!(!pane.contains("needs permission"), "{pane}");
    assert!(pane.contains("permitted-by-rule"), "{pane}");

    tmux.type_line("/permissions");
    let pane = words(&tmux.wait_for("Deny"));
    assert!(
        pane.contains("Allow Bash(echo permitted-by-rule)"),
        "{pane}"
    );
    tmux.wait_for_prompt();

    tmux.type_line("/permissions remove allow Bash(echo permitted-by-rule) local");
    tmux.wait_for("Removed allow rule");
    tmux.wait_for_prompt();
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&local).unwrap()).unwrap();
    assert_eq!(saved["permissions"]["allow"], json!([]));
    tmux.type_line("/permissions");
    tmux.wait_for("Deny");
    let pane = words(&tmux.wait_for_prompt());
    assert!(pane.contains("Allow none"), "{pane}");

    tmux.type_line("/permissions add maybe Bash");
    let pane = words(&tmux.wait_for("is not allow, ask or deny"));
    assert!(pane.contains("/permissions add|remove"), "{pane}");
    tmux.wait_for_prompt();
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn agents_lists_each_sub_agent_with_its_source() {
    let sandbox = Sandbox::new().unwrap();
    let agents = sandbox.home().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews a diff for bugs\n---\nReview the diff.\n",
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("unused")])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("/agents");
    let pane = words(&tmux.wait_for("Reviews a diff"));
    assert!(pane.contains("general-purpose built-in"), "{pane}");
    assert!(
        pane.contains("reviewer user Reviews a diff for bugs"),
        "{pane}"
    );
    tmux.wait_for_prompt();
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn add_dir_lets_accept_edits_write_in_another_directory() {
    let sandbox = Sandbox::new().unwrap();
    let other = sandbox.project().parent().unwrap().join("other-repo");
    std::fs::create_dir_all(&other).unwrap();
    let target = other.join("notes.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": target, "content": "shared\n"})),
        Turn::text("Wrote it there."),
    ]))
    .unwrap();
    let tmux = start_gyre_with_env(
        &sandbox,
        &server,
        false,
        &["--permission-mode", "acceptEdits"],
        &[],
    );
    tmux.type_line(&format!("/add-dir {}", other.display()));
    tmux.wait_for("as a working directory for this session");
    tmux.wait_for_prompt();
    tmux.type_line("write the note over there");
    tmux.wait_for("Wrote it there.");
    let pane = tmux.wait_for_prompt();
    // acceptEdits writes inside the working directories without asking.
    assert!(!pane.contains("needs permission"), "{pane}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "shared\n");
    tmux.type_line("/status");
    let pane = words(&tmux.wait_for("MCP servers"));
    assert!(pane.contains(&other.display().to_string()), "{pane}");
    tmux.type_line("/add-dir no/such/dir");
    tmux.wait_for("no/such/dir: No such file or directory");
    tmux.wait_for_prompt();
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn export_writes_the_conversation_to_a_file_or_the_clipboard() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo exported-output"})),
        Turn::text("All done here."),
    ]))
    .unwrap();
    let tmux = start_gyre_with_env(
        &sandbox,
        &server,
        false,
        &["--allowedTools", "Bash(echo exported-output)"],
        &[],
    );
    tmux.type_line("/export");
    tmux.wait_for("Nothing to export yet.");
    tmux.type_line("say it");
    tmux.wait_for("All done here.");
    tmux.wait_for_prompt();
    tmux.type_line("/export chat.txt");
    tmux.wait_for("Conversation exported to");
    tmux.wait_for_prompt();
    let text = std::fs::read_to_string(sandbox.project().join("chat.txt")).unwrap();
    assert_eq!(
        text,
        "> say it\n\n⏺ Bash(echo exported-output)\n  ⎿ exported-output\n\nAll done here.\n\n"
    );
    // Without a file: OSC 52, which tmux keeps as its newest buffer.
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.type_line("/export");
    tmux.wait_for("Conversation copied to the clipboard");
    tmux.wait_for_prompt();
    let buffer = tmux.run(&["show-buffer"]);
    assert_eq!(buffer, text);
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn init_has_the_model_write_the_projects_claude_md() {
    let sandbox = Sandbox::new().unwrap();
    let memory = sandbox.project().join("CLAUDE.md");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Write",
            json!({"file_path": memory, "content": "# Project\n\nBuild: cargo build\n"}),
        ),
        Turn::text("Wrote CLAUDE.md."),
    ]))
    .unwrap();
    let tmux = start_gyre_with_env(
        &sandbox,
        &server,
        false,
        &["--permission-mode", "acceptEdits"],
        &[],
    );
    tmux.type_line("/init");
    tmux.wait_for("Wrote CLAUDE.md.");
    tmux.wait_for_prompt();
    let prompt = server.requests()[0].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(prompt.contains("create a CLAUDE.md file"), "{prompt}");
    assert!(
        std::fs::read_to_string(&memory)
            .unwrap()
            .contains("cargo build")
    );
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn memory_opens_claude_md_in_the_users_editor_and_the_ui_comes_back() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("CLAUDE.md", "# Rules\n").unwrap();
    // An "editor" that appends a line and exits, as a user saving would.
    let editor = sandbox.home().join("append-editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nprintf -- '- use tabs\\n' >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Noted.")])).unwrap();
    let editor_path = editor.display().to_string();
    let tmux = start_gyre_with_env(&sandbox, &server, false, &[], &[("EDITOR", &editor_path)]);
    tmux.type_line("/memory");
    tmux.wait_for("Edited ");
    tmux.wait_for_prompt();
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("CLAUDE.md")).unwrap(),
        "# Rules\n- use tabs\n"
    );
    // The UI is back and takes messages.
    tmux.type_line("hello");
    tmux.wait_for("Noted.");
    tmux.wait_for_prompt();
    quit(&tmux);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn resume_lists_this_folders_sessions_and_continues_the_one_picked() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("The answer is 42."),
        Turn::text("Still 42, as I said."),
    ]))
    .unwrap();
    // An earlier session of this folder, run headless.
    let earlier = gyre_e2e::run(
        sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "what is the answer to everything"]),
    )
    .unwrap();
    assert_eq!(earlier.code, Some(0), "{}", earlier.stderr);
    let id = sandbox.transcripts()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();

    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("/resume");
    let pane = words(&tmux.wait_for("/resume N continues the Nth"));
    assert!(
        pane.contains("1. what is the answer to everything ·"),
        "{pane}"
    );
    assert!(pane.contains(&format!("· 1 turn · {id}")), "{pane}");
    tmux.wait_for_prompt();
    tmux.type_line("/resume 1");
    let pane = words(&tmux.wait_for(&format!("Resumed {id}")));
    assert!(pane.contains("The answer is 42."), "{pane}");
    tmux.wait_for_prompt();
    tmux.type_line("are you sure");
    tmux.wait_for("Still 42, as I said.");
    tmux.wait_for_prompt();
    // The follow-up went with the earlier conversation, into the earlier transcript.
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"].clone();
    assert_eq!(messages.as_array().unwrap().len(), 3, "{messages}");
    assert_eq!(
        messages[0]["content"][0]["text"],
        "what is the answer to everything"
    );
    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    assert!(transcript.contains("are you sure"), "{transcript}");
    tmux.type_line("/resume 7");
    tmux.wait_for("No session 7 here");
    tmux.wait_for_prompt();
    quit(&tmux);
    // Nothing was sent in the session /resume replaced: no empty transcript is left.
    assert_eq!(sandbox.transcripts().len(), 1);
}
