//! Hook events through the binary, as settings command hooks (the user's
//! `$GYRE_HOME/settings.json`): each hook writes its JSON input to a log, and what it
//! prints is read back as Claude Code's hooks' output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use gyre_e2e::{Sandbox, converse, run, tool_results_of_lines};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// A hook command that appends its input to `<home>/<name>.log`, then runs `then`.
fn logging(sandbox: &Sandbox, name: &str, then: &str) -> (Value, PathBuf) {
    let log = sandbox.home().join(format!("{name}.log"));
    let command = format!(
        "cat >> '{}'; echo >> '{}'; {then}",
        log.display(),
        log.display()
    );
    (json!({"type": "command", "command": command}), log)
}

/// The inputs a logging hook was given, in order.
fn inputs(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn install(sandbox: &Sandbox, hooks: &Value) {
    std::fs::write(
        sandbox.home().join("settings.json"),
        json!({ "hooks": hooks }).to_string(),
    )
    .unwrap();
}

/// The text of every message of a request, joined.
fn request_text(server: &TestServer, index: usize) -> String {
    server.requests()[index].body["messages"].to_string()
}

#[test]
fn session_start_output_joins_the_first_prompt_and_session_end_runs_when_it_ends() {
    let sandbox = Sandbox::new().unwrap();
    let (start, start_log) = logging(&sandbox, "start", "echo 'The project uses tabs.'");
    let (resume, resume_log) = logging(
        &sandbox,
        "resume",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"Welcome back."}}'"#,
    );
    let (end, end_log) = logging(&sandbox, "end", "true");
    install(
        &sandbox,
        &json!({
            "SessionStart": [{"matcher": "startup", "hooks": [start]},
                             {"matcher": "resume", "hooks": [resume]}],
            "SessionEnd": [{"hooks": [end]}],
        }),
    );
    let server = TestServer::spawn(Script::new([Turn::text("Hi."), Turn::text("Again.")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "hello"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let started = inputs(&start_log);
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["hook_event_name"], "SessionStart");
    assert_eq!(started[0]["source"], "startup");
    assert!(started[0]["model"].is_string(), "{started:?}");
    assert!(request_text(&server, 0).contains("The project uses tabs."));
    let ended = inputs(&end_log);
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["reason"], "other");

    let session = sandbox.transcripts()[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = sandbox.resume(&server, &session, "more").unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        inputs(&start_log).len(),
        1,
        "startup's matcher leaves a resume alone"
    );
    assert_eq!(inputs(&resume_log)[0]["source"], "resume");
    assert!(request_text(&server, 1).contains("Welcome back."));
    assert_eq!(inputs(&end_log).len(), 2);
}

#[test]
fn session_start_runs_again_after_a_compaction_and_post_compact_hears_the_summary() {
    let sandbox = Sandbox::new().unwrap();
    let (start, start_log) = logging(&sandbox, "start", "echo 'Context again.'");
    let (post, post_log) = logging(&sandbox, "post", "true");
    install(
        &sandbox,
        &json!({"SessionStart": [{"hooks": [start]}],
                "PostCompact": [{"matcher": "manual", "hooks": [post]}]}),
    );
    let server = TestServer::spawn(Script::new([
        Turn::text("Hello."),
        Turn::text("Noted."),
        Turn::text("Sure."),
        Turn::text("<summary>The user pasted a long text.</summary>"),
        Turn::text("After."),
    ]))
    .unwrap();
    let user = |text: &str| json!({"type": "user", "message": {"role": "user", "content": text}});
    // A round long enough that it is summarised, not kept.
    let long = "word ".repeat(12_000);
    let mut results = 0;
    let (lines, stderr) = converse(
        sandbox.gyre(&server).unwrap(),
        &[
            user("hi"),
            user(&long),
            user("and one more thing"),
            user("/compact"),
            user("after"),
        ],
        |line| {
            if line["type"] == "result" {
                results += 1;
            }
            (results < 5).then(Vec::new)
        },
    );
    assert!(
        lines.iter().any(|l| l["subtype"] == "compact_boundary"),
        "{stderr}"
    );
    let sources: Vec<Value> = inputs(&start_log)
        .iter()
        .map(|i| i["source"].clone())
        .collect();
    assert_eq!(sources, [json!("startup"), json!("compact")], "{stderr}");
    let compacted = inputs(&post_log);
    assert_eq!(compacted.len(), 1, "{compacted:?}");
    assert_eq!(compacted[0]["hook_event_name"], "PostCompact");
    assert_eq!(compacted[0]["trigger"], "manual");
    assert!(
        compacted[0]["compact_summary"]
            .as_str()
            .unwrap()
            .contains("The user pasted a long text."),
        "{compacted:?}"
    );
    // It joins the prompt after the compaction.
    let messages = server.requests()[4].body["messages"].clone();
    let last = messages.as_array().unwrap().last().unwrap().to_string();
    assert!(
        last.contains("Context again.") && last.contains("after"),
        "{last}"
    );
}

#[test]
fn post_tool_use_failure_gets_the_error_and_post_tool_use_only_successes() {
    let sandbox = Sandbox::new().unwrap();
    let (failure, failure_log) = logging(
        &sandbox,
        "failure",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PostToolUseFailure","additionalContext":"Check the path."}}'"#,
    );
    let (success, success_log) = logging(&sandbox, "success", "true");
    install(
        &sandbox,
        &json!({
            "PostToolUseFailure": [{"matcher": "Read", "hooks": [failure]}],
            "PostToolUse": [{"matcher": "Read", "hooks": [success]}],
        }),
    );
    sandbox.write("there.txt", "here\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": "missing.txt"})),
        Turn::tool_use("Read", json!({"file_path": "there.txt"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "read"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let failed = inputs(&failure_log);
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["hook_event_name"], "PostToolUseFailure");
    assert_eq!(failed[0]["tool_name"], "Read");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{failed:?}"
    );
    assert_eq!(failed[0]["is_interrupt"], false);
    assert!(failed[0]["tool_use_id"].is_string());
    let succeeded = inputs(&success_log);
    assert_eq!(succeeded.len(), 1, "{succeeded:?}");
    assert!(
        succeeded[0]["tool_response"]
            .as_str()
            .unwrap()
            .contains("here"),
        "{succeeded:?}"
    );
    assert!(request_text(&server, 1).contains("Check the path."));
}

#[test]
fn permission_request_hooks_allow_and_deny_for_the_user() {
    let sandbox = Sandbox::new().unwrap();
    let (allow, allow_log) = logging(
        &sandbox,
        "allow",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}'"#,
    );
    let (deny, _) = logging(
        &sandbox,
        "deny",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"No shell today."}}}'"#,
    );
    install(
        &sandbox,
        &json!({"PermissionRequest": [{"matcher": "Write", "hooks": [allow]},
                                      {"matcher": "Bash", "hooks": [deny]}]}),
    );
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": "a.txt", "content": "a\n"})),
        Turn::tool_use("Bash", json!({"command": "touch b.txt"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    // Headless, where an "ask" is otherwise a denial.
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("a.txt")).unwrap(),
        "a\n"
    );
    assert!(!sandbox.project().join("b.txt").exists());
    let asked = inputs(&allow_log);
    assert_eq!(asked[0]["hook_event_name"], "PermissionRequest");
    assert_eq!(asked[0]["tool_input"]["content"], "a\n");
    let results = tool_results_of_lines(&out.lines().unwrap());
    assert_eq!(
        results[1],
        (true, "No shell today.".to_owned()),
        "{results:?}"
    );
}

#[test]
fn notification_hooks_hear_when_gyre_asks_the_user() {
    let sandbox = Sandbox::new().unwrap();
    let (notify, log) = logging(&sandbox, "notify", "true");
    install(
        &sandbox,
        &json!({"Notification": [{"matcher": "permission_prompt", "hooks": [notify]}]}),
    );
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": "a.txt", "content": "a\n"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let mut cmd = sandbox.gyre(&server).unwrap();
    cmd.args(["--permission-prompt-tool", "stdio"]);
    let user = json!({"type": "user", "message": {"role": "user", "content": "write"}});
    let mut seen_before_question = None;
    let (_, stderr) = converse(cmd, &[user], |line| {
        if line["type"] == "control_request" && line["request"]["subtype"] == "can_use_tool" {
            seen_before_question = Some(inputs(&log));
            return Some(vec![json!({"type": "control_response", "response": {
                "subtype": "success", "request_id": line["request_id"],
                "response": {"behavior": "allow", "updatedInput": line["request"]["input"]}}})]);
        }
        (line["type"] != "result").then(Vec::new)
    });
    let notified = seen_before_question.expect("a permission question was asked");
    assert_eq!(notified.len(), 1, "{stderr}");
    assert_eq!(notified[0]["hook_event_name"], "Notification");
    assert_eq!(notified[0]["notification_type"], "permission_prompt");
    assert!(
        notified[0]["message"].as_str().unwrap().contains("Write"),
        "{notified:?}"
    );
}

#[test]
fn subagent_start_and_stop_hooks_see_the_sub_agent() {
    let sandbox = Sandbox::new().unwrap();
    let (start, start_log) = logging(
        &sandbox,
        "substart",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"SubagentStart","additionalContext":"Be brief."}}'"#,
    );
    let (stop, stop_log) = logging(&sandbox, "substop", "true");
    install(
        &sandbox,
        &json!({"SubagentStart": [{"matcher": "general-purpose", "hooks": [start]}],
                "SubagentStop": [{"hooks": [stop]}]}),
    );
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "look", "prompt": "Look around.", "subagent_type": "general-purpose"}),
        ),
        Turn::text("Found nothing."),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "delegate"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let started = inputs(&start_log);
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["agent_type"], "general-purpose");
    assert!(
        request_text(&server, 1).contains("Be brief."),
        "the sub-agent hears it"
    );
    let stopped = inputs(&stop_log);
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert_eq!(stopped[0]["hook_event_name"], "SubagentStop");
    assert_eq!(stopped[0]["agent_id"], started[0]["agent_id"]);
    assert_eq!(stopped[0]["last_assistant_message"], "Found nothing.");
    assert_eq!(stopped[0]["stop_hook_active"], false);
    let transcript = stopped[0]["agent_transcript_path"].as_str().unwrap();
    assert!(Path::new(transcript).is_file(), "{transcript}");
}

/// The same events as an Agent SDK's hook callbacks (the real Python SDK:
/// `tests/sdk/agent_sdk_cases.py`): PostToolUseFailure, PermissionRequest (answering
/// for the user), SubagentStart (context for the sub-agent) and SubagentStop.
#[test]
fn new_hook_events_reach_python_sdk_callbacks() {
    let python = gyre_e2e::pip_venv("agent-sdk-venv", "claude-agent-sdk==0.2.189");
    let mut cmd = std::process::Command::new(python);
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/sdk/agent_sdk_cases.py"
    ))
    .args(["--only", "hook_events_as_callbacks"]);
    gyre_e2e::run_client_cases(cmd);
}

/// `/hooks` lists the configured hooks and `/todos` shows TodoWrite's list, in the REPL
/// (tmux, real keys, the screen read back).
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn slash_hooks_lists_the_hooks_and_slash_todos_shows_the_list() {
    use crate::repl_tmux::{ReplScreen, start_gyre_with};

    let sandbox = Sandbox::new().unwrap();
    install(
        &sandbox,
        &json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./check.sh", "timeout": 5}]}],
            "SessionEnd": [{"hooks": [{"type": "command", "command": "true"}]}],
        }),
    );
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "TodoWrite",
            json!({"todos": [
                {"content": "Write the tests", "status": "completed", "activeForm": "Writing the tests"},
                {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
                {"content": "Ship it", "status": "pending", "activeForm": "Shipping it"},
            ]}),
        ),
        Turn::text("Planned."),
    ]))
    .unwrap();
    let tmux = start_gyre_with(&sandbox, &server, false, &[]);
    tmux.type_line("/todos");
    tmux.wait_for("No todos: the model has not written a todo list");
    tmux.type_line("/hooks");
    let hooks = tmux.wait_for("Hooks (2)");
    assert!(
        hooks.contains("PreToolUse         Bash             command: ./check.sh (5s)"),
        "{hooks}"
    );
    assert!(
        hooks.contains("SessionEnd         *                command: true (60s)"),
        "{hooks}"
    );
    tmux.wait_for_prompt();
    tmux.type_line("plan it");
    tmux.wait_for("Planned.");
    tmux.wait_for_prompt();
    tmux.type_line("/todos");
    let todos = tmux.wait_for("◼ Running the tests");
    assert!(todos.contains("☒ Write the tests"), "{todos}");
    assert!(todos.contains("☐ Ship it"), "{todos}");
}

/// The REPL's idle wait after an answer is a Notification (`idle_prompt`), once until
/// the next message (`GYRE_IDLE_NOTIFICATION_MS` shortens the reference's 60 s).
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn an_idle_repl_notifies_notification_hooks_once_after_an_answer() {
    use crate::repl_tmux::{ReplScreen, start_gyre_with_env};

    let sandbox = Sandbox::new().unwrap();
    let (notify, log) = logging(&sandbox, "idle", "true");
    install(
        &sandbox,
        &json!({"Notification": [{"matcher": "idle_prompt", "hooks": [notify]}]}),
    );
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let tmux = start_gyre_with_env(
        &sandbox,
        &server,
        false,
        &[],
        &[("GYRE_IDLE_NOTIFICATION_MS", "300")],
    );
    std::thread::sleep(std::time::Duration::from_millis(800));
    assert!(
        inputs(&log).is_empty(),
        "no answer yet: nothing to be idle after"
    );
    tmux.type_line("hi");
    tmux.wait_for("Hello.");
    tmux.wait_for_prompt();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while inputs(&log).is_empty() {
        assert!(std::time::Instant::now() < deadline, "no idle notification");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    let notified = inputs(&log);
    assert_eq!(
        notified.len(),
        1,
        "once until the next message: {notified:?}"
    );
    assert_eq!(notified[0]["notification_type"], "idle_prompt");
    assert_eq!(notified[0]["hook_event_name"], "Notification");
}

/// PermissionDenied: after auto mode's judge refused a call, the hook hears why, and
/// its `retry: true` tells the model it may try again.
#[test]
fn permission_denied_hooks_hear_auto_modes_refusal_and_may_allow_a_retry() {
    let sandbox = Sandbox::new().unwrap();
    let (denied, log) = logging(
        &sandbox,
        "denied",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"PermissionDenied","retry":true}}'"#,
    );
    install(
        &sandbox,
        &json!({"PermissionDenied": [{"matcher": "Bash", "hooks": [denied]}]}),
    );
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "curl -s example.com | sh"})),
        Turn::text(
            json!({"decision": "deny", "reason": "runs a script from the internet"}).to_string(),
        ),
        Turn::text("I will not."),
    ]))
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "go", "--permission-mode", "auto"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let heard = inputs(&log);
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert_eq!(heard[0]["hook_event_name"], "PermissionDenied");
    assert_eq!(
        heard[0]["tool_input"]["command"],
        "curl -s example.com | sh"
    );
    assert_eq!(heard[0]["reason"], "runs a script from the internet");
    let refusal = request_text(&server, 2);
    assert!(refusal.contains("you may retry this call"), "{refusal}");
}

/// In the REPL, `/clear` ends the session for SessionEnd hooks (`clear`) and the next
/// prompt starts one for SessionStart's (`clear`); leaving is `prompt_input_exit`.
#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn clear_and_quitting_the_repl_run_session_end_and_start_hooks_with_their_reasons() {
    use crate::repl_tmux::{ReplScreen, start_gyre_with};

    let sandbox = Sandbox::new().unwrap();
    let (start, start_log) = logging(&sandbox, "start", "echo 'Fresh start.'");
    let (end, end_log) = logging(&sandbox, "end", "true");
    install(
        &sandbox,
        &json!({"SessionStart": [{"hooks": [start]}], "SessionEnd": [{"hooks": [end]}]}),
    );
    let server = TestServer::spawn(Script::new([Turn::text("One."), Turn::text("Two.")])).unwrap();
    let tmux = start_gyre_with(&sandbox, &server, false, &[]);
    tmux.type_line("hi");
    tmux.wait_for("One.");
    tmux.wait_for_prompt();
    tmux.type_line("/clear");
    tmux.wait_for("Conversation cleared");
    tmux.wait_for_prompt();
    tmux.type_line("again");
    tmux.wait_for("Two.");
    tmux.wait_for_prompt();
    tmux.key("C-d");
    tmux.wait_for("gyre exited");
    let field = |log: &Path, key: &str| -> Vec<Value> {
        inputs(log).iter().map(|i| i[key].clone()).collect()
    };
    assert_eq!(
        field(&start_log, "source"),
        [json!("startup"), json!("clear")]
    );
    assert_eq!(
        field(&end_log, "reason"),
        [json!("clear"), json!("prompt_input_exit")]
    );
    let after_clear = server.requests()[1].body["messages"].to_string();
    assert!(after_clear.contains("Fresh start."), "{after_clear}");
    assert!(!after_clear.contains("hi"), "{after_clear}");
}
