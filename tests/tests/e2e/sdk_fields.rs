//! Flags the Agent SDKs pass for options their programs set (`--thinking-display`,
//! `--resume-session-at`, `--plugin-dir`, `--permission-prompts`), driven through the
//! binary against gyre-testkit. The `initialize` fields run in `ts_sdk.rs` with the
//! real TypeScript SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

#[test]
fn thinking_display_goes_in_the_thinking_parameter_and_a_wrong_value_is_refused() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "omitted",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    assert_eq!(
        server.requests()[0].body["thinking"],
        json!({"type": "adaptive", "display": "omitted"})
    );
    let wrong = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "loud",
    ]))
    .unwrap();
    assert_ne!(wrong.code, Some(0));
    assert!(
        wrong
            .stderr
            .contains("--thinking-display \"loud\": use summarized or omitted"),
        "{}",
        wrong.stderr
    );
}

/// The text of every message request `i` sent.
fn sent_texts(server: &TestServer, i: usize) -> String {
    server.requests()[i].body["messages"].to_string()
}

/// A project and a testkit answering "answer one" to "answer four".
fn four_answers() -> (Sandbox, TestServer) {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new(
        ["one", "two", "three", "four"].map(|n| Turn::text(format!("answer {n}"))),
    ))
    .unwrap();
    (sandbox, server)
}

/// A finished stream-json run's session id and the uuids of its assistant lines.
fn session_and_answers(out: &gyre_e2e::Run) -> (String, Vec<String>) {
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let session = out.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let answers = out
        .lines()
        .unwrap()
        .iter()
        .filter(|l| l["type"] == "assistant")
        .map(|l| l["uuid"].as_str().unwrap().to_owned())
        .collect();
    (session, answers)
}

#[test]
fn resume_session_at_goes_on_from_that_message_and_leaves_the_later_ones_behind() {
    let (sandbox, server) = four_answers();
    let first = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt one",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    let (session, answers) = session_and_answers(&first);
    let answer = &answers[0];
    let second =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt two", "--resume", &session]))
        .unwrap();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert!(sent_texts(&server, 1).contains("answer one"));
    let third = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt three",
        "--resume",
        &session,
        "--resume-session-at",
        answer,
    ]))
    .unwrap();
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    assert!(!third.stderr.contains("warning"), "{}", third.stderr);
    let sent = sent_texts(&server, 2);
    assert!(
        sent.contains("prompt one") && sent.contains("answer one"),
        "{sent}"
    );
    assert!(
        !sent.contains("prompt two") && !sent.contains("answer two"),
        "{sent}"
    );
    // The session goes on from there: the turns left behind stay behind.
    let fourth =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "prompt four", "--resume", &session]))
        .unwrap();
    assert_eq!(fourth.code, Some(0), "{}", fourth.stderr);
    let sent = sent_texts(&server, 3);
    assert!(
        sent.contains("answer three") && !sent.contains("prompt two"),
        "{sent}"
    );
    let unknown = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "x",
        "--resume",
        &session,
        "--resume-session-at",
        "00000000-0000-0000-0000-000000000000",
    ]))
    .unwrap();
    assert_ne!(unknown.code, Some(0));
    assert!(
        unknown.stderr.contains("has no message with that uuid"),
        "{}",
        unknown.stderr
    );
}

/// A plugin folder as Claude Code lays one out: a command, a skill, an agent, a hook
/// and an MCP server (the testkit's).
fn plugin(root: &std::path::Path) -> std::path::PathBuf {
    let dir = root.join("plugin");
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "commands/greet.md",
        "---\ndescription: Greets someone\n---\nSay hello to $ARGUMENTS, from the plugin.\n",
    );
    write(
        "skills/lint/SKILL.md",
        "---\nname: lint\ndescription: Lints the project the plugin's way\n---\nRun the linter.\n",
    );
    write(
        "agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews a change for the plugin\n---\nYou review changes.\n",
    );
    write("context.txt", "context from the plugin hook");
    write(
        "hooks/hooks.json",
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "cat ${CLAUDE_PLUGIN_ROOT}/context.txt"}]}]}}"#,
    );
    write(
        ".mcp.json",
        &json!({"mcpServers": {"plug": {"command": gyre_e2e::test_mcp_binary().unwrap()}}})
            .to_string(),
    );
    dir
}

#[test]
fn plugin_dir_adds_its_commands_skills_agents_hooks_and_servers_and_no_mcp_leaves_the_servers_out()
{
    let sandbox = Sandbox::new().unwrap();
    let dir = plugin(sandbox.project().parent().unwrap());
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "/greet Bob"])
        .arg("--plugin-dir")
        .arg(&dir))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let body = &server.requests()[0].body;
    let sent = body["messages"].to_string();
    assert!(
        sent.contains("Say hello to Bob, from the plugin."),
        "{sent}"
    );
    assert!(sent.contains("context from the plugin hook"), "{sent}");
    let tool = |name: &str| {
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .cloned()
    };
    let skill = tool("Skill").expect("the Skill tool");
    assert!(
        skill["description"]
            .as_str()
            .unwrap()
            .contains("lint: Lints the project"),
        "{skill}"
    );
    let agent = tool("Agent").expect("the Agent tool");
    assert!(
        agent["description"].as_str().unwrap().contains("reviewer"),
        "{agent}"
    );
    let mcp: Vec<String> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("mcp__plug__"))
        .map(str::to_owned)
        .collect();
    assert!(!mcp.is_empty(), "{body}");

    let quiet = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "hi"])
        .arg("--plugin-dir-no-mcp")
        .arg(&dir))
    .unwrap();
    assert_eq!(quiet.code, Some(0), "{}", quiet.stderr);
    let body = &server.requests()[1].body;
    let names = body["tools"].to_string();
    assert!(!names.contains("mcp__plug__"), "{names}");
    assert!(names.contains("lint: Lints the project"), "{names}");

    let missing =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "hi", "--plugin-dir", "no-such-plugin"]))
        .unwrap();
    assert_ne!(missing.code, Some(0));
    assert!(
        missing
            .stderr
            .contains("--plugin-dir no-such-plugin: not a directory"),
        "{}",
        missing.stderr
    );
}

#[test]
fn project_config_root_reads_the_projects_settings_and_commands_from_that_folder() {
    let sandbox = Sandbox::new().unwrap();
    let main = sandbox.project().parent().unwrap().join("main-checkout");
    let write = |path: &std::path::Path, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        &main.join(".claude/commands/hello.md"),
        "---\ndescription: Greets\n---\nHello from the main checkout.\n",
    );
    write(
        &main.join(".gyre/settings.json"),
        r#"{"model": "claude-opus-4-5"}"#,
    );
    write(
        &sandbox.project().join(".claude/commands/hello.md"),
        "---\ndescription: Greets\n---\nHello from the worktree.\n",
    );
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    let trust = run(sandbox.gyre(&server).unwrap().arg("trust").arg(&main)).unwrap();
    assert_eq!(trust.code, Some(0), "{}", trust.stderr);
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "/hello"])
        .arg("--project-config-root")
        .arg(&main))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    let body = &server.requests()[0].body;
    assert_eq!(body["model"], "claude-opus-4-5");
    let sent = body["messages"].to_string();
    assert!(sent.contains("Hello from the main checkout."), "{sent}");
    assert!(!sent.contains("Hello from the worktree."), "{sent}");
    // Without the flag, the working directory's own configuration.
    let own = run(sandbox.gyre(&server).unwrap().args(["-p", "/hello"])).unwrap();
    assert_eq!(own.code, Some(0), "{}", own.stderr);
    let sent = server.requests()[1].body["messages"].to_string();
    assert!(sent.contains("Hello from the worktree."), "{sent}");
}

fn prompt(text: &str, uuid: &str) -> serde_json::Value {
    json!({"type": "user", "message": {"role": "user", "content": text}, "uuid": uuid})
}

#[test]
fn resume_drops_turn_refuses_a_cut_that_would_leave_behind_more_than_that_turn() {
    let (sandbox, server) = four_answers();
    let ids = [
        "11111111-1111-4111-8111-111111111111",
        "22222222-2222-4222-8222-222222222222",
        "33333333-3333-4333-8333-333333333333",
    ];
    let first = gyre_e2e::stream_json_lines(
        &sandbox,
        &server,
        &[],
        &[],
        &[
            prompt("prompt one", ids[0]),
            prompt("prompt two", ids[1]),
            prompt("prompt three", ids[2]),
        ],
    );
    let (session, answers) = session_and_answers(&first);
    // Cutting after answer one would leave prompts two and three behind.
    let refused = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt four",
        "--output-format",
        "json",
        "--resume",
        &session,
        "--resume-session-at",
        &answers[0],
        "--resume-drops-turn",
        ids[1],
    ]))
    .unwrap();
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    let result = refused.result().unwrap();
    assert_eq!(result["subtype"], "error_during_execution", "{result}");
    assert!(
        result["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("Resume rejected by --resume-drops-turn:"),
        "{result}"
    );
    assert_eq!(
        server.requests().len(),
        3,
        "the refused resume sent nothing"
    );
    // After answer two, only the turn of prompt three is left behind.
    let kept = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "prompt four",
        "--resume",
        &session,
        "--resume-session-at",
        &answers[1],
        "--resume-drops-turn",
        ids[2],
    ]))
    .unwrap();
    assert_eq!(kept.code, Some(0), "{}", kept.stderr);
    let sent = sent_texts(&server, 3);
    assert!(
        sent.contains("answer two") && !sent.contains("prompt three"),
        "{sent}"
    );
}

#[test]
fn initialize_answers_the_code_running_mcp_tools_it_applied() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = gyre_e2e::stream_json_lines(
        &sandbox,
        &server,
        &[],
        &[],
        &[
            json!({"type": "control_request", "request_id": "init", "request": {
                "subtype": "initialize",
                "codeRunningMcpTools": {"ws": ["run", "mcp__bad"], "mcp__x": ["y"]},
            }}),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let answer = lines
        .iter()
        .find(|l| l["type"] == "control_response")
        .unwrap();
    assert_eq!(
        answer["response"]["response"]["code_running_mcp_tools_applied"],
        json!({"ws": ["run"]}),
        "{answer}"
    );
    assert!(
        out.stderr
            .contains("skipped 2 malformed part(s) of codeRunningMcpTools"),
        "{}",
        out.stderr
    );
}
