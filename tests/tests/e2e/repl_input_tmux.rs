//! What users type at the REPL's input box, through a real terminal (tmux, as
//! `repl_tmux`): custom commands and skills as `/name args` (completed with Tab and
//! listed by `/help`), `!cmd` run as the user's own shell command, and `@path`
//! mentions completed with Tab and attached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::Sandbox;
use gyre_e2e::tmux::SESSION;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

use crate::repl_tmux::{ReplScreen, box_text, start_gyre};

/// Every text of the newest user message the server received.
fn last_user_message(server: &TestServer) -> String {
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"].clone();
    let last = messages.as_array().and_then(|m| m.last()).unwrap().clone();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn repl_custom_commands_and_skills_complete_run_and_show_in_help() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(
            ".claude/commands/review.md",
            "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS carefully",
        )
        .unwrap();
    sandbox
        .write(
            ".claude/skills/pdf/SKILL.md",
            "---\nname: pdf\ndescription: Work with PDF files\n---\nUse pdftotext on $ARGUMENTS",
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("reviewed"),
        Turn::text("pdf done"),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);

    tmux.run(&["send-keys", "-t", SESSION, "-l", "/rev"]);
    tmux.key("Tab");
    tmux.wait_until("the completed command", |p| {
        box_text(p).as_deref() == Some("/review")
    });
    tmux.type_line("main.rs");
    tmux.wait_for("reviewed");
    tmux.wait_for_prompt();
    assert!(
        last_user_message(&server).contains("Review main.rs carefully"),
        "{}",
        last_user_message(&server)
    );

    tmux.type_line("/pdf report.pdf");
    tmux.wait_for("pdf done");
    tmux.wait_for_prompt();
    assert!(last_user_message(&server).contains("Use pdftotext on report.pdf"));

    tmux.type_line("/help");
    let pane = tmux.wait_for("Custom commands");
    assert!(pane.contains("/review <file>"), "{pane}");
    assert!(pane.contains("Review a file"), "{pane}");
    assert!(pane.contains("Skills"), "{pane}");
    assert!(pane.contains("Work with PDF files"), "{pane}");
    tmux.wait_for_prompt();
    tmux.type_line("/exit");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn repl_bang_runs_the_users_shell_command_and_the_model_reads_its_output() {
    let sandbox = Sandbox::new().unwrap();
    // A deny rule for the model's Bash does not stop what the user types.
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({"permissions": {"deny": ["Bash(echo:*)"]}}).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("it printed hello")])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("!echo hello-from-the-shell; touch typed-by-user");
    tmux.wait_for("  hello-from-the-shell");
    tmux.wait_for_prompt();
    assert_eq!(server.request_count(), 0, "a shell command is no turn");
    assert!(sandbox.project().join("typed-by-user").exists());
    tmux.type_line("what did it print?");
    tmux.wait_for("it printed hello");
    let sent = last_user_message(&server);
    assert!(
        sent.contains("<bash-input>echo hello-from-the-shell; touch typed-by-user</bash-input>"),
        "{sent}"
    );
    assert!(
        sent.contains("hello-from-the-shell</bash-output>"),
        "{sent}"
    );
    assert!(sent.contains("what did it print?"), "{sent}");
    tmux.wait_for_prompt();
    tmux.type_line("/exit");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn repl_at_mention_completes_the_path_and_attaches_the_file() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("docs/notes.txt", "first note\nsecond note\n")
        .unwrap();
    sandbox.write("docs/secret.txt", "the password").unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({"permissions": {"deny": ["Read(./docs/secret.txt)"]}}).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("summarised")])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.run(&["send-keys", "-t", SESSION, "-l", "summarise @do"]);
    tmux.key("Tab");
    tmux.wait_until("the folder completed", |p| {
        box_text(p).as_deref() == Some("summarise @docs/")
    });
    tmux.run(&["send-keys", "-t", SESSION, "-l", "n"]);
    tmux.key("Tab");
    tmux.wait_until("the file completed", |p| {
        box_text(p).as_deref() == Some("summarise @docs/notes.txt")
    });
    tmux.type_line("and @docs/secret.txt");
    tmux.wait_for("summarised");
    let sent = last_user_message(&server);
    assert!(
        sent.contains("summarise @docs/notes.txt and @docs/secret.txt"),
        "{sent}"
    );
    assert!(sent.contains("1\tfirst note"), "{sent}");
    assert!(!sent.contains("the password"), "{sent}");
    tmux.wait_for_prompt();
    tmux.type_line("/exit");
    tmux.wait_for("gyre exited with status 0");
}
