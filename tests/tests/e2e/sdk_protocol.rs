//! The Agent SDK's control protocol and flags, driven through the real binary with raw
//! stdin lines (the Python SDK itself runs in `agent_sdk.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::Stdio;

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// Runs `gyre` in stream-json mode with `lines` on stdin (then EOF).
fn stream(sandbox: &Sandbox, server: &TestServer, extra: &[&str], lines: &[Value]) -> Run {
    stream_with_env(sandbox, server, extra, &[], lines)
}

/// [`stream`] with more environment variables.
fn stream_with_env(
    sandbox: &Sandbox,
    server: &TestServer,
    extra: &[&str],
    env: &[(&str, &str)],
    lines: &[Value],
) -> Run {
    gyre_e2e::stream_json_lines(sandbox, server, extra, env, lines)
}

fn user(content: &Value) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": content}})
}

fn control(id: &str, request: &Value) -> Value {
    json!({"type": "control_request", "request_id": id, "request": request})
}

fn response_to<'a>(lines: &'a [Value], id: &str) -> &'a Value {
    lines
        .iter()
        .find(|l| l["type"] == "control_response" && l["response"]["request_id"] == id)
        .unwrap_or_else(|| panic!("no control_response for {id}: {lines:?}"))
}

#[test]
fn control_requests_are_answered_and_garbage_is_reported_without_ending_the_session() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let out = stream(
        &sandbox,
        &server,
        &[],
        &[
            json!("not an object"),
            control("r1", &json!({"subtype": "initialize", "hooks": null})),
            control("r2", &json!({"subtype": "frobnicate"})),
            control("r3", &json!({"subtype": "mcp_status"})),
            control(
                "r4",
                &json!({"subtype": "rewind_files", "user_message_id": "u"}),
            ),
            control(
                "r5",
                &json!({"subtype": "set_permission_mode", "mode": "sideways"}),
            ),
            user(&json!("hi")),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let init = response_to(&lines, "r1");
    assert_eq!(init["response"]["subtype"], "success");
    assert!(init["response"]["response"]["commands"].is_array());
    let unknown = response_to(&lines, "r2");
    assert_eq!(unknown["response"]["subtype"], "error");
    assert!(
        unknown["response"]["error"]
            .as_str()
            .unwrap()
            .contains("frobnicate")
    );
    assert_eq!(
        response_to(&lines, "r3")["response"]["response"],
        json!({"mcpServers": []})
    );
    // As the reference answers it: a success that says it could not, and why.
    let rewind = &response_to(&lines, "r4")["response"]["response"];
    assert_eq!(rewind["canRewind"], false, "{rewind}");
    assert!(
        rewind["error"]
            .as_str()
            .unwrap()
            .contains("no checkpoint \"u\""),
        "{rewind}"
    );
    let bad_mode = response_to(&lines, "r5");
    assert!(
        bad_mode["response"]["error"]
            .as_str()
            .unwrap()
            .contains("sideways")
    );
    assert!(out.stderr.contains("stdin line has type"), "{}", out.stderr);
    let result = out.result().unwrap();
    assert_eq!(result["result"], "Hello.");
    assert_eq!(result["stop_reason"], "end_turn");
    assert!(result["modelUsage"]["claude-sonnet-4-5"]["outputTokens"].is_u64());
    assert_eq!(lines[0]["type"], "system", "init comes first: {lines:?}");
    assert_eq!(lines[0]["claude_code_version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn an_orphan_tool_result_on_stdin_is_refused_and_never_sent_to_the_api() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Fine.")])).unwrap();
    let orphan =
        user(&json!([{"type": "tool_result", "tool_use_id": "toolu_ghost", "content": "x"}]));
    let out = stream(&sandbox, &server, &[], &[orphan, user(&json!("hi"))]);
    assert!(
        out.stderr.contains("toolu_ghost") && out.stderr.contains("answers no tool_use"),
        "{}",
        out.stderr
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert!(!requests[0].body.to_string().contains("toolu_ghost"));
    // The refused line still gets its result line, so a driver is not left waiting.
    let results: Vec<Value> = out
        .lines()
        .unwrap()
        .into_iter()
        .filter(|l| l["type"] == "result")
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["errors"][0]
            .as_str()
            .unwrap()
            .contains("toolu_ghost")
    );
    assert_eq!(results[1]["result"], "Fine.");
}

#[test]
fn a_settings_hook_command_gets_the_call_on_stdin_and_exit_2_blocks_it() {
    let sandbox = Sandbox::new().unwrap();
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "cat > hook-input.json; echo 'no shell today' >&2; exit 2"}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "touch made-by-bash"})),
        Turn::text("Blocked."),
    ]))
    .unwrap();
    let out =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "go", "--dangerously-skip-permissions"]))
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!sandbox.project().join("made-by-bash").exists());
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.project().join("hook-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_input"]["command"], "touch made-by-bash");
    let sent = server.requests()[1].body["messages"].to_string();
    assert!(sent.contains("no shell today"), "{sent}");
}

#[test]
fn setting_sources_and_inline_settings_choose_what_is_read() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(".gyre/settings.json", r#"{"model": "project-model"}"#)
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    for args in [
        vec!["-p", "hi"],
        vec!["-p", "hi", "--setting-sources", "user"],
        vec!["-p", "hi", "--settings", r#"{"model": "inline-model"}"#],
    ] {
        let out = run(sandbox.gyre(&server).unwrap().args(&args)).unwrap();
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let models: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        [
            json!("project-model"),
            json!("claude-sonnet-4-5"),
            json!("inline-model")
        ]
    );
}

#[test]
fn disallowed_tools_are_not_offered_and_an_empty_system_prompt_is_not_sent() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hi",
        "--disallowedTools",
        "Bash,Write",
        "--system-prompt",
        "",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let body = &server.requests()[0].body;
    let tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !tools.contains(&"Bash") && !tools.contains(&"Write"),
        "{tools:?}"
    );
    assert!(tools.contains(&"Read"), "{tools:?}");
    assert!(body.get("system").is_none(), "{body}");

    // An Agent SDK program without a prompt of its own gets the minimal SDK prompt.
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "hi", "--system-prompt", ""])
        .env("CLAUDE_CODE_ENTRYPOINT", "sdk-py"))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let system = server.requests()[0].body["system"].to_string();
    assert!(system.contains("through the Claude Agent SDK"), "{system}");
    assert!(!system.contains("Working directory"), "{system}");
}

#[test]
fn fork_session_continues_the_history_under_a_new_id_and_leaves_the_old_one() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("Noted."),
        Turn::text("You said 7."),
    ]))
    .unwrap();
    let first =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "Remember 7", "--output-format", "json"]))
        .unwrap();
    let old_id = first.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let old_transcript = sandbox.transcripts().pop().unwrap();
    let before = std::fs::read_to_string(&old_transcript).unwrap();
    let second = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "What number?",
        "--resume",
        &old_id,
        "--fork-session",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    let new_id = second.result().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(new_id, old_id);
    assert_eq!(std::fs::read_to_string(&old_transcript).unwrap(), before);
    assert!(
        server.requests()[1].body["messages"]
            .to_string()
            .contains("Remember 7")
    );
}

#[test]
fn max_thinking_tokens_sends_a_budget_below_max_tokens_and_thinking_blocks_go_back_signed() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::response([
            gyre_testkit::Block::thinking("Let me look.", "sig-abc"),
            gyre_testkit::Block::tool_use("Glob", json!({"pattern": "*"})),
        ]),
        Turn::text("Nothing here."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "look",
        "--max-thinking-tokens",
        "1000000",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    let first = &requests[0].body;
    let budget = first["thinking"]["budget_tokens"].as_u64().unwrap();
    assert_eq!(first["thinking"]["type"], "enabled");
    assert!(budget < first["max_tokens"].as_u64().unwrap(), "{first}");
    let history = &requests[1].body["messages"];
    assert_eq!(
        history[1]["content"][0],
        json!({"type": "thinking", "thinking": "Let me look.", "signature": "sig-abc"})
    );
}

#[test]
fn effort_task_budget_and_betas_reach_every_main_loop_request() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--effort",
        "high",
        "--task-budget",
        "400000",
        "--betas",
        "effort-2025-11-24,context-1m",
        "interleaved-thinking",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("ignored"), "{}", out.stderr);
    let request = &server.requests()[0];
    assert_eq!(
        request.body["output_config"],
        json!({"effort": "high", "task_budget": {"type": "tokens", "total": 400000}})
    );
    assert_eq!(
        request.header("anthropic-beta"),
        Some("effort-2025-11-24,context-1m,interleaved-thinking")
    );

    // Without the flags, neither is sent; a level the API does not take is refused
    // before any request, naming the levels.
    let plain = run(sandbox.gyre(&server).unwrap().args(["-p", "go"])).unwrap();
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    let request = server.requests().pop().unwrap();
    assert_eq!(request.body.get("output_config"), None);
    assert_eq!(request.header("anthropic-beta"), None);
    let sent = server.request_count();
    let wrong = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "go", "--effort", "huge"]))
    .unwrap();
    assert_ne!(wrong.code, Some(0));
    assert!(
        wrong.stderr.contains("low, medium, high, xhigh or max"),
        "{}",
        wrong.stderr
    );
    assert_eq!(server.request_count(), sent);
}

#[test]
fn the_main_thread_runs_as_the_agent_named_with_its_prompt_tools_and_model() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    let agents = r#"{"reviewer": {"description": "Reviews diffs", "prompt": "You review diffs and nothing else.", "tools": ["Read", "Grep"], "model": "haiku"}}"#;
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "go", "--agents", agents, "--agent", "reviewer"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let request = &server.requests()[0];
    let system = request.body["system"].to_string();
    assert!(
        system.contains("You review diffs and nothing else."),
        "{system}"
    );
    assert!(
        !system.contains("coding agent"),
        "the default prompt is replaced: {system}"
    );
    assert_eq!(request.body["model"], "claude-haiku-4-5");
    let tools: Vec<&str> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["Grep", "Read"]);

    // --model and --tools still win; an unknown agent is refused, naming the agents.
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--agents",
        agents,
        "--agent",
        "reviewer",
        "--model",
        "claude-opus-4-1",
        "--tools",
        "Bash",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let request = server.requests().pop().unwrap();
    assert_eq!(request.body["model"], "claude-opus-4-1");
    assert_eq!(request.body["tools"][0]["name"], "Bash");
    let wrong = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "go", "--agent", "nobody"]))
    .unwrap();
    assert_ne!(wrong.code, Some(0));
    assert!(wrong.stderr.contains("no such agent"), "{}", wrong.stderr);
    assert!(wrong.stderr.contains("general-purpose"), "{}", wrong.stderr);
}

#[test]
fn project_memory_follows_setting_sources_even_with_a_custom_system_prompt() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("CLAUDE.md", "Always answer in haiku.")
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    for args in [
        vec![
            "-p",
            "hi",
            "--system-prompt",
            "Be brief.",
            "--setting-sources",
            "user,project",
        ],
        vec!["-p", "hi", "--setting-sources", "user"],
        vec!["-p", "hi", "--system-prompt", "Be brief."],
    ] {
        let out = run(sandbox.gyre(&server).unwrap().args(&args)).unwrap();
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
    let systems: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.body["system"].to_string())
        .collect();
    assert!(systems[0].contains("Be brief.") && systems[0].contains("Always answer in haiku."));
    assert!(!systems[1].contains("haiku"), "{}", systems[1]);
    assert!(!systems[2].contains("haiku"), "{}", systems[2]);
}

#[test]
fn user_prompt_submit_hooks_add_context_or_block_the_prompt() {
    let sandbox = Sandbox::new().unwrap();
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "grep -q forbidden && { echo 'not that' >&2; exit 2; }; echo 'Context: it is Tuesday.'"}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")]).repeat_last()).unwrap();
    let ok = run(sandbox.gyre(&server).unwrap().args(["-p", "what day?"])).unwrap();
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    let sent = server.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("what day?") && sent.contains("it is Tuesday"),
        "{sent}"
    );
    let blocked = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "forbidden thing"]))
    .unwrap();
    assert_eq!(blocked.code, Some(1));
    assert!(blocked.stderr.contains("not that"), "{}", blocked.stderr);
    assert_eq!(
        server.requests().len(),
        1,
        "the blocked prompt was not sent"
    );
}

#[test]
fn ctrl_c_between_turns_ends_a_stream_json_session_with_130() {
    use std::io::{BufRead, BufReader};
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{}", user(&json!("hi"))).unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait for the turn's result; stdin stays open, so gyre waits for the next line.
    for line in lines.by_ref() {
        if line.unwrap().contains(r#""type":"result""#) {
            break;
        }
    }
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    drop(stdin);
    assert_eq!(status.code(), Some(130));
}

#[test]
fn a_turn_ending_without_the_structured_answer_is_sent_back_once_to_give_it() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("The answer is 42."),
        Turn::tool_use("StructuredOutput", json!({"answer": 42})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
        "required": ["answer"]});
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "6*7?",
        "--json-schema",
        &schema.to_string(),
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let reminder = server.requests()[1].body["messages"].to_string();
    assert!(
        reminder.contains("without calling the StructuredOutput tool"),
        "{reminder}"
    );
    assert_eq!(
        out.result().unwrap()["structured_output"],
        json!({"answer": 42})
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn an_interrupt_sent_right_after_a_message_interrupts_that_turn_and_the_next_one_runs() {
    let sandbox = Sandbox::new().unwrap();
    // A slow UserPromptSubmit hook holds the first message before its turn starts, so
    // the interrupt arrives in that gap.
    let settings = json!({"hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "cat > /dev/null; sleep 1"}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Short.")]).repeat_last()).unwrap();
    let out = stream(
        &sandbox,
        &server,
        &[],
        &[
            user(&json!("tell a long story")),
            control("r1", &json!({"subtype": "interrupt"})),
            user(&json!("short then")),
        ],
    );
    let lines = out.lines().unwrap();
    assert_eq!(response_to(&lines, "r1")["response"]["subtype"], "success");
    let results: Vec<&Value> = lines.iter().filter(|l| l["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{lines:?}");
    assert!(
        results[0]["terminal_reason"]
            .as_str()
            .unwrap()
            .starts_with("aborted"),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["result"], "Short.");
}

#[test]
fn mcp_status_lists_the_sessions_servers_their_state_and_tools() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let mcp = json!({"mcpServers": {
        "test": {"command": gyre_e2e::test_mcp_binary().unwrap(), "args": []},
        "broken": {"command": "/nonexistent/mcp-server"}
    }})
    .to_string();
    let out = stream(
        &sandbox,
        &server,
        &["--mcp-config", &mcp, "--strict-mcp-config"],
        &[control("s1", &json!({"subtype": "mcp_status"}))],
    );
    let lines = out.lines().unwrap();
    let reply = response_to(&lines, "s1");
    assert_eq!(reply["response"]["subtype"], "success", "{reply}");
    let servers = reply["response"]["response"]["mcpServers"]
        .as_array()
        .unwrap();
    let by_name = |name: &str| servers.iter().find(|s| s["name"] == name).unwrap();
    assert_eq!(by_name("test")["status"], "connected");
    let tools: Vec<&str> = by_name("test")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(tools.contains(&"mcp__test__echo"), "{tools:?}");
    assert_eq!(by_name("broken")["status"], "failed");
    assert!(
        by_name("broken")["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty())
    );
}

#[test]
fn agents_from_initialize_are_offered_by_the_agent_tool() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let agents = json!({"reviewer": {
        "description": "Reviews a diff for bugs",
        "prompt": "You review code.",
        "tools": ["Read", "Grep"]
    }});
    let out = stream(
        &sandbox,
        &server,
        &[],
        &[
            control("i1", &json!({"subtype": "initialize", "agents": agents})),
            user(&json!("hi")),
        ],
    );
    let lines = out.lines().unwrap();
    let reply = response_to(&lines, "i1");
    assert_eq!(reply["response"]["subtype"], "success", "{reply}");
    let agents = reply["response"]["response"]["agents"].as_array().unwrap();
    let reviewer = agents.iter().find(|a| a["name"] == "reviewer");
    assert_eq!(
        reviewer.map(|a| &a["description"]),
        Some(&json!("Reviews a diff for bugs")),
        "{agents:?}"
    );
    assert!(
        agents.iter().any(|a| a["name"] == "general-purpose"),
        "{agents:?}"
    );
    let request = &server.requests()[0].body;
    let agent_tool = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .expect("the Agent tool is offered");
    let description = agent_tool["description"].as_str().unwrap();
    assert!(description.contains("reviewer"), "{description}");
    assert!(
        description.contains("Reviews a diff for bugs"),
        "{description}"
    );
}

/// Runs gyre in stream-json mode the way an SDK program does (see
/// [`gyre_e2e::converse`]), with `extra` arguments.
fn converse(
    sandbox: &Sandbox,
    server: &TestServer,
    extra: &[&str],
    first: &[Value],
    answer: impl FnMut(&Value) -> Option<Vec<Value>>,
) -> (Vec<Value>, String) {
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.args(extra);
    gyre_e2e::converse(cmd, first, answer)
}

/// What an SDK program's in-process server `calc` (one tool, `add`) answers to one
/// JSON-RPC message, as the Python SDK's `mcp_message` handler does: a notification
/// gets an empty acknowledgement.
fn calc_server(message: &Value) -> Value {
    let Some(id) = message.get("id") else {
        return json!({"jsonrpc": "2.0", "result": {}});
    };
    let result = match message["method"].as_str().unwrap() {
        "initialize" => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "calc", "version": "1.0.0"}
        }),
        "tools/list" => json!({"tools": [{
            "name": "add",
            "description": "Adds two numbers.",
            "inputSchema": {"type": "object", "properties": {
                "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}
        }]}),
        "tools/call" => {
            let args = &message["params"]["arguments"];
            let sum = args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap();
            json!({"content": [{"type": "text", "text": format!("sum = {sum}")}]})
        }
        other => panic!("unexpected MCP request {other}"),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The SDK's `control_response` to an `mcp_message` request `line` for `calc`.
fn calc_reply(line: &Value) -> Value {
    let answer = json!({"mcp_response": calc_server(&line["request"]["message"])});
    json!({"type": "control_response", "response": {
        "subtype": "success", "request_id": line["request_id"], "response": answer}})
}

#[test]
fn an_sdk_mcp_server_is_reached_with_mcp_message_requests_and_its_tool_result_reaches_the_model() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("It is 5."),
    ]))
    .unwrap();
    let config = json!({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}).to_string();
    let mut methods = Vec::new();
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--mcp-config", &config, "--allowedTools", "mcp__calc"],
        &[
            control("i1", &json!({"subtype": "initialize", "hooks": null})),
            user(&json!("add 2 and 3")),
        ],
        |line| match (line["type"].as_str(), line["request"]["subtype"].as_str()) {
            (Some("control_request"), Some("mcp_message")) => {
                assert_eq!(line["request"]["server_name"], "calc");
                let message = &line["request"]["message"];
                methods.push(message["method"].as_str().unwrap_or("").to_owned());
                Some(vec![calc_reply(line)])
            }
            (Some("result"), _) => Some(vec![control("s1", &json!({"subtype": "mcp_status"}))]),
            (Some("control_response"), _) if line["response"]["request_id"] == "s1" => None,
            _ => Some(Vec::new()),
        },
    );
    assert_eq!(
        methods,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ],
        "{stderr}"
    );
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "calc", "status": "connected"}])
    );
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__calc__add"))
    );
    let sent = server.requests()[1].body["messages"].to_string();
    assert!(sent.contains("sum = 5"), "{sent}");
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["result"], "It is 5.");
    let status = &response_to(&lines, "s1")["response"]["response"]["mcpServers"][0];
    assert_eq!(status["name"], "calc");
    assert_eq!(status["status"], "connected");
    assert_eq!(status["config"]["type"], "sdk");
    assert_eq!(status["tools"], json!([{"name": "mcp__calc__add"}]));
}

#[test]
fn an_sdk_mcp_server_without_an_sdk_on_stdin_is_reported_failed() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let config = json!({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}).to_string();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hi",
        "--mcp-config",
        &config,
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        out.lines().unwrap()[0]["mcp_servers"],
        json!([{"name": "calc", "status": "failed"}])
    );
    assert!(
        out.stderr.contains("\"calc\" (sdk) failed") && out.stderr.contains("mcp_message"),
        "{}",
        out.stderr
    );
}

#[test]
fn post_tool_use_settings_hooks_add_context_and_a_blocks_reason_after_the_result() {
    let sandbox = Sandbox::new().unwrap();
    let context = json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
        "additionalContext": "the build is green"}});
    let settings = json!({"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": format!("cat > post-input.json; echo '{context}'")},
        {"type": "command", "command": "echo 'too noisy' >&2; exit 2"}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo built"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "build it",
        "--dangerously-skip-permissions",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.project().join("post-input.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "Bash");
    assert!(
        input["tool_response"].to_string().contains("built"),
        "{input}"
    );
    let messages = &server.requests()[1].body["messages"];
    let results = messages.as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(results[0]["type"], "tool_result", "{results:?}");
    let texts: Vec<&str> = results[1..]
        .iter()
        .map(|b| b["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "<system-reminder>PostToolUse:Bash hook additional context: the build is green</system-reminder>",
            "<system-reminder>PostToolUse:Bash hook blocking error: too noisy</system-reminder>",
        ]
    );
    assert_eq!(out.stdout.trim(), "Done.");
}

#[test]
fn pre_tool_use_settings_hooks_context_reaches_the_model_after_the_result() {
    let sandbox = Sandbox::new().unwrap();
    let context = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "additionalContext": "builds take a minute here"}});
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": format!("echo '{context}'")}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo built"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "build it",
        "--dangerously-skip-permissions",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let messages = &server.requests()[1].body["messages"];
    let results = messages.as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(results[0]["type"], "tool_result", "{results:?}");
    assert!(
        results[0].to_string().contains("built"),
        "the call ran: {results:?}"
    );
    assert_eq!(
        results[1]["text"],
        "<system-reminder>PreToolUse:Bash hook additional context: builds take a minute here</system-reminder>",
        "{results:?}"
    );
    assert_eq!(results.len(), 2, "{results:?}");
}

fn is_summary_request(body: &Value) -> bool {
    body.to_string()
        .contains("You are summarizing a coding session")
}

#[test]
fn pre_compact_settings_hooks_run_before_an_automatic_summary_and_add_instructions() {
    let sandbox = Sandbox::new().unwrap();
    let settings = json!({"hooks": {"PreCompact": [
        {"matcher": "auto", "hooks": [{"type": "command",
            "command": "cat > pre-compact.json; echo 'Keep every file name.'"}]},
        {"matcher": "manual", "hooks": [{"type": "command", "command": "touch manual-ran"}]}
    ]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let file = sandbox
        .write(
            "big.txt",
            &"a line long enough to count for something\n".repeat(800),
        )
        .unwrap();
    let usage = |input| gyre_testkit::Usage {
        input_tokens: input,
        output_tokens: 50,
        ..gyre_testkit::Usage::default()
    };
    let read = || Turn::tool_use("Read", json!({"file_path": file}));
    let server = TestServer::spawn(Script::new([
        read().with_usage(usage(5_000)),
        read().with_usage(usage(9_000)),
        read().with_usage(usage(190_000)),
        Turn::text("<summary>1. Primary request: read big.txt.</summary>"),
        Turn::text("All done."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "read big.txt"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.project().join("pre-compact.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "auto");
    assert_eq!(input["custom_instructions"], Value::Null);
    assert!(!sandbox.project().join("manual-ran").exists());
    let requests = server.requests();
    let summary = requests
        .iter()
        .find(|r| is_summary_request(&r.body))
        .expect("a summary was asked for");
    assert!(
        summary
            .body
            .to_string()
            .contains("Additional instructions from a PreCompact hook:\\nKeep every file name."),
        "{}",
        summary.body
    );
    assert_eq!(out.stdout.trim(), "All done.");
}

#[test]
fn compact_over_stream_json_runs_pre_compact_hooks_with_the_users_instructions() {
    let sandbox = Sandbox::new().unwrap();
    let settings = json!({"hooks": {"PreCompact": [{"matcher": "manual", "hooks": [
        {"type": "command", "command": "cat > pre-compact.json"}
    ]}]}});
    sandbox
        .write(".gyre/settings.json", &settings.to_string())
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("Hello."),
        Turn::text("Noted."),
        Turn::text("Sure."),
        Turn::text("<summary>The user pasted a long text.</summary>"),
    ]))
    .unwrap();
    // A round long enough that it is summarised, not kept (the first request always is).
    let long = "word ".repeat(12_000);
    let out = stream(
        &sandbox,
        &server,
        &[],
        &[
            user(&json!("hi")),
            user(&json!(long)),
            user(&json!("and one more thing")),
            user(&json!("/compact keep the plan")),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);

    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.project().join("pre-compact.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "manual");
    assert_eq!(input["custom_instructions"], "keep the plan");
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(is_summary_request(&requests[3].body));
    assert!(requests[3].body.to_string().contains("keep the plan"));
    let lines = out.lines().unwrap();
    let boundary = lines
        .iter()
        .find(|l| l["subtype"] == "compact_boundary")
        .unwrap();
    assert_eq!(boundary["compact_metadata"]["trigger"], "manual");
    let results: Vec<&Value> = lines.iter().filter(|l| l["type"] == "result").collect();
    assert_eq!(results.len(), 4, "{lines:?}");
    assert_eq!(results[3]["result"], "Compacted.");
    assert_eq!(results[3]["is_error"], false);
}

#[test]
fn structured_output_is_checked_against_the_whole_schema_and_the_model_told_what_is_wrong() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "StructuredOutput",
            json!({"answer": 420, "unit": "km", "tags": ["x"]}),
        ),
        Turn::tool_use(
            "StructuredOutput",
            json!({"answer": 42, "unit": "m", "tags": ["x"]}),
        ),
        Turn::text("Done."),
    ]))
    .unwrap();
    let schema = json!({
        "type": "object",
        "properties": {
            "answer": {"type": "integer", "maximum": 100},
            "unit": {"$ref": "#/$defs/unit"},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1}
        },
        "required": ["answer"],
        "$defs": {"unit": {"enum": ["cm", "m"]}}
    });
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "measure it",
        "--json-schema",
        &schema.to_string(),
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let messages = &server.requests()[1].body["messages"];
    let result = &messages.as_array().unwrap().last().unwrap()["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["is_error"], true, "{result}");
    let text = result["content"].to_string();
    // Each field named, with what is wrong with it.
    assert!(
        text.contains("`answer` is invalid: 420 is greater than the maximum of 100"),
        "{text}"
    );
    assert!(
        text.contains("`unit` must be one of: cm, m (got \\\"km\\\")"),
        "{text}"
    );
    assert_eq!(
        out.result().unwrap()["structured_output"],
        json!({"answer": 42, "unit": "m", "tags": ["x"]})
    );
}

#[test]
fn an_sdk_mcp_call_the_sdk_answers_with_an_error_is_an_error_result_naming_the_server() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("It failed."),
    ]))
    .unwrap();
    let config = json!({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}).to_string();
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--mcp-config", &config, "--allowedTools", "mcp__calc"],
        &[user(&json!("add 2 and 3"))],
        |line| match (line["type"].as_str(), line["request"]["subtype"].as_str()) {
            (Some("control_request"), Some("mcp_message")) => {
                let message = &line["request"]["message"];
                let response = if message["method"] == "tools/call" {
                    json!({"subtype": "error", "request_id": line["request_id"],
                        "error": "the program's tool raised ValueError"})
                } else {
                    json!({"subtype": "success", "request_id": line["request_id"],
                        "response": {"mcp_response": calc_server(message)}})
                };
                Some(vec![
                    json!({"type": "control_response", "response": response}),
                ])
            }
            (Some("result"), _) => None,
            _ => Some(Vec::new()),
        },
    );
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["result"], "It failed.", "{stderr}");
    let messages = &server.requests()[1].body["messages"];
    let tool_result = &messages.as_array().unwrap().last().unwrap()["content"][0];
    assert_eq!(tool_result["is_error"], true, "{tool_result}");
    let text = tool_result["content"].to_string();
    assert!(
        text.contains("calc") && text.contains("ValueError"),
        "{text}"
    );
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn mcp_toggle_withdraws_and_restores_a_servers_tools_and_mcp_reconnect_restarts_a_dead_one() {
    let sandbox = Sandbox::new().unwrap();
    let pid_file = sandbox.project().join("pids");
    let echo = |text: &str| Turn::tool_use("mcp__test__echo", json!({"text": text}));
    let server = TestServer::spawn(Script::new([
        echo("first"),
        Turn::text("one"),
        Turn::text("two"),
        echo("third"),
        Turn::text("three"),
        echo("fourth"),
        Turn::text("four"),
        echo("fifth"),
        Turn::text("five"),
    ]))
    .unwrap();
    let config = json!({"mcpServers": {"test": {
        "command": gyre_e2e::test_mcp_binary().unwrap(),
        "args": ["--pid-file", pid_file.to_str().unwrap()]
    }}})
    .to_string();
    let toggle = |id: &str, enabled: bool| {
        control(
            id,
            &json!({"subtype": "mcp_toggle", "serverName": "test", "enabled": enabled}),
        )
    };
    let mut results = 0;
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--mcp-config", &config, "--allowedTools", "mcp__test"],
        &[user(&json!("one"))],
        |line| {
            let answered = line["response"]["request_id"].as_str();
            match (line["type"].as_str(), answered) {
                (Some("result"), _) => {
                    results += 1;
                    Some(match results {
                        1 => vec![toggle("off", false)],
                        2 => vec![toggle("on", true)],
                        3 => {
                            // The server dies between turns: its next call fails, naming it.
                            let pids = std::fs::read_to_string(&pid_file).unwrap();
                            let pid = pids.lines().last().unwrap();
                            let killed = std::process::Command::new("kill")
                                .args(["-9", pid])
                                .status()
                                .unwrap();
                            assert!(killed.success());
                            vec![user(&json!("four"))]
                        }
                        4 => vec![control(
                            "again",
                            &json!({"subtype": "mcp_reconnect", "serverName": "test"}),
                        )],
                        _ => vec![control("s2", &json!({"subtype": "mcp_status"}))],
                    })
                }
                (Some("control_response"), Some("off")) => Some(vec![
                    control("s1", &json!({"subtype": "mcp_status"})),
                    user(&json!("two")),
                ]),
                (Some("control_response"), Some("on")) => Some(vec![
                    control(
                        "unknown",
                        &json!({"subtype": "mcp_reconnect", "serverName": "nope"}),
                    ),
                    user(&json!("three")),
                ]),
                (Some("control_response"), Some("again")) => Some(vec![user(&json!("five"))]),
                (Some("control_response"), Some("s2")) => None,
                _ => Some(Vec::new()),
            }
        },
    );
    for id in ["off", "on", "again"] {
        assert_eq!(
            response_to(&lines, id)["response"]["subtype"],
            "success",
            "{id}: {stderr}"
        );
    }
    let unknown = &response_to(&lines, "unknown")["response"];
    assert_eq!(unknown["subtype"], "error");
    assert!(
        unknown["error"].as_str().unwrap().contains("\"nope\""),
        "{unknown}"
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 9, "{stderr}");
    let offers_echo =
        |i: usize| offered_tools(&requests[i].body).contains(&"mcp__test__echo".to_owned());
    // Disabled: the turn after the toggle goes without the server's tools.
    assert!(offers_echo(0));
    assert!(!offers_echo(2), "{:?}", offered_tools(&requests[2].body));
    assert!(offers_echo(3));
    let disabled = &response_to(&lines, "s1")["response"]["response"]["mcpServers"][0];
    assert_eq!(disabled["status"], "disabled", "{disabled}");
    assert_eq!(disabled["tools"], json!([]));

    // Enabled again: the call works; killed: the call fails naming the server;
    // reconnected: the call works again.
    let last_result = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"][0]
            .clone()
    };
    assert_eq!(last_result(4)["content"], "third", "{}", last_result(4));
    assert_eq!(last_result(6)["is_error"], true, "{}", last_result(6));
    assert!(
        last_result(6)
            .to_string()
            .contains("MCP server \\\"test\\\""),
        "{}",
        last_result(6)
    );
    assert_eq!(last_result(8)["content"], "fifth", "{}", last_result(8));
    let status = &response_to(&lines, "s2")["response"]["response"]["mcpServers"][0];
    assert_eq!(status["status"], "connected", "{status}");
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().lines().count(),
        3,
        "started, enabled again, reconnected"
    );
}

/// `get_context_usage` and `modelUsage` report the window compaction acts on: the
/// model's own (1M for a `[1m]` model) or `GYRE_CONTEXT_WINDOW`; `isAutoCompactEnabled`
/// is what the compactor does (`GYRE_DISABLE_AUTOCOMPACT=0` leaves it on). The
/// categories (what `/context` shows) fill the window: memory files named, messages,
/// the autocompact buffer when compaction is on, free space last.
#[test]
fn context_usage_reports_the_window_and_autocompaction_the_compactor_uses() {
    let ask = |env: &[(&str, &str)], model: &str| {
        let sandbox = Sandbox::new().unwrap();
        std::fs::write(sandbox.project().join("CLAUDE.md"), "Use tabs. ".repeat(60)).unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
        let out = stream_with_env(
            &sandbox,
            &server,
            &["--model", model],
            env,
            &[
                user(&json!("hi")),
                control("u1", &json!({"subtype": "get_context_usage"})),
            ],
        );
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let lines = out.lines().unwrap();
        let usage = response_to(&lines, "u1")["response"]["response"].clone();
        let result = out.result().unwrap();
        (usage, result["modelUsage"][model]["contextWindow"].clone())
    };
    let (usage, window) = ask(
        &[("GYRE_DISABLE_AUTOCOMPACT", "0")],
        "claude-sonnet-4-5[1m]",
    );
    assert_eq!(usage["maxTokens"], 1_000_000, "{usage}");
    assert_eq!(usage["isAutoCompactEnabled"], true, "{usage}");
    assert_eq!(window, 1_000_000);
    let categories = usage["categories"].as_array().unwrap();
    let tokens = |name: &str| {
        categories
            .iter()
            .find(|c| c["name"] == name)
            .and_then(|c| c["tokens"].as_u64())
    };
    assert_eq!(tokens("Memory files"), Some(200), "{usage}");
    assert!(tokens("System tools").unwrap() > 1_000, "{usage}");
    assert_eq!(tokens("Autocompact buffer"), Some(13_000), "{usage}");
    let sum: u64 = categories.iter().filter_map(|c| c["tokens"].as_u64()).sum();
    assert_eq!(sum, 1_000_000, "{usage}");
    assert_eq!(categories.last().unwrap()["name"], "Free space");
    assert!(
        usage["memoryFiles"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("CLAUDE.md"),
        "{usage}"
    );
    let (usage, window) = ask(
        &[
            ("GYRE_CONTEXT_WINDOW", "50000"),
            ("GYRE_DISABLE_AUTOCOMPACT", "1"),
        ],
        "claude-sonnet-4-5",
    );
    assert_eq!(usage["maxTokens"], 50_000, "{usage}");
    assert_eq!(usage["isAutoCompactEnabled"], false, "{usage}");
    assert_eq!(window, 50_000);
    assert!(
        usage["categories"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["name"] != "Autocompact buffer"),
        "{usage}"
    );
}

/// `stop_task` stops a background shell (gyre's tasks): the shell the model started with
/// `run_in_background` is killed, and an unknown id is an error naming the shells.
#[test]
fn stop_task_stops_a_background_shell() {
    let sandbox = Sandbox::new().unwrap();
    let marker = format!("sleep 7{}.5", std::process::id() % 1000);
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Bash",
            json!({"command": marker.clone(), "run_in_background": true}),
        ),
        Turn::text("Started."),
    ]))
    .unwrap();
    let running = |pattern: &str| {
        std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut stopped = false;
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--allowedTools", "Bash"],
        &[user(&json!("start it"))],
        |line| match line["type"].as_str() {
            Some("result") => {
                assert!(running(&marker), "the shell runs before stop_task");
                Some(vec![
                    control("t1", &json!({"subtype": "stop_task", "task_id": "bash_1"})),
                    control("t2", &json!({"subtype": "stop_task", "task_id": "bash_9"})),
                ])
            }
            Some("control_response") if line["response"]["request_id"] == "t2" => {
                stopped = !running(&marker);
                None
            }
            _ => Some(Vec::new()),
        },
    );
    assert_eq!(
        response_to(&lines, "t1")["response"]["subtype"],
        "success",
        "{stderr}"
    );
    let unknown = response_to(&lines, "t2");
    assert_eq!(unknown["response"]["subtype"], "error");
    assert!(
        unknown["response"]["error"]
            .as_str()
            .unwrap()
            .contains("bash_9"),
        "{unknown}"
    );
    assert!(stopped, "the shell was killed by stop_task");
}

/// `--tools default` offers what no `--tools` offers (the Agent SDKs and Zed's adapter
/// pass it), and the flags the TypeScript SDK adds are accepted.
#[test]
fn tools_default_offers_every_tool_and_the_sdks_flags_are_accepted() {
    let offered = |extra: &[&str]| {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
        let out = stream(&sandbox, &server, extra, &[user(&json!("hi"))]);
        assert_eq!(out.code, Some(0), "{extra:?}: {}", out.stderr);
        offered_tools(&server.requests()[0].body)
    };
    let all = offered(&[]);
    for tool in ["ExitPlanMode", "WebFetch", "Agent", "Bash", "Edit"] {
        assert!(all.iter().any(|t| t == tool), "{tool} in {all:?}");
    }
    assert_eq!(offered(&["--tools", "default"]), all);
    assert_eq!(
        offered(&[
            "--allow-dangerously-skip-permissions",
            "--await-initialize",
            "--permission-mode",
            "manual",
        ]),
        all
    );
}

/// The TypeScript SDK sends most of its options in `initialize` rather than as flags:
/// when it comes first, the session is built with them, over the flags.
#[test]
fn options_sent_in_initialize_shape_the_session_as_flags_would() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__calc__add", json!({"a": 2, "b": 3})),
        Turn::text("It is 5."),
    ]))
    .unwrap();
    let init = json!({
        "subtype": "initialize",
        "hooks": null,
        "systemPrompt": ["You are the release bot."],
        "appendSystemPrompt": "Answer in one line.",
        "disallowedTools": ["Bash"],
        "sdkMcpServers": ["calc"],
        "mcpServers": {},
    });
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &[
            "--system-prompt",
            "the flag's prompt",
            "--allowedTools",
            "mcp__calc",
            "--await-initialize",
        ],
        &[control("i1", &init), user(&json!("add 2 and 3"))],
        |line| match (line["type"].as_str(), line["request"]["subtype"].as_str()) {
            (Some("control_request"), Some("mcp_message")) => Some(vec![calc_reply(line)]),
            (Some("result"), _) => None,
            _ => Some(Vec::new()),
        },
    );
    let reply = &response_to(&lines, "i1")["response"];
    assert_eq!(reply["subtype"], "success", "{reply} {stderr}");
    assert_eq!(reply["response"]["mcp_servers_applied"], true, "{reply}");
    assert_eq!(reply["response"]["disallowed_tools_applied"], true);
    let init_line = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(
        init_line["mcp_servers"],
        json!([{"name": "calc", "status": "connected"}]),
        "{stderr}"
    );
    let first = &server.requests()[0].body;
    let system = first["system"].to_string();
    assert!(system.contains("You are the release bot."), "{system}");
    assert!(system.contains("Answer in one line."), "{system}");
    assert!(!system.contains("the flag's prompt"), "{system}");
    let tools = offered_tools(first);
    assert!(tools.iter().any(|t| t == "mcp__calc__add"), "{tools:?}");
    assert!(!tools.iter().any(|t| t == "Bash"), "{tools:?}");
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["result"], "It is 5.", "{stderr}");
}

/// An `initialize` after the session started still registers hooks and agents, but
/// says that its session options were not applied.
#[test]
fn a_late_initialize_says_its_session_options_were_not_applied() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")])).unwrap();
    let out = stream(
        &sandbox,
        &server,
        &[],
        &[
            user(&json!("hi")),
            control(
                "i1",
                &json!({"subtype": "initialize", "systemPrompt": ["late"]}),
            ),
        ],
    );
    let lines = out.lines().unwrap();
    let reply = &response_to(&lines, "i1")["response"];
    assert_eq!(reply["subtype"], "success", "{reply}");
    assert_eq!(reply["response"]["mcp_servers_applied"], false);
    assert!(
        out.stderr.contains("send initialize first"),
        "{}",
        out.stderr
    );
    let system = server.requests()[0].body["system"].to_string();
    assert!(!system.contains("late"), "{system}");
}

#[test]
fn an_sdk_that_reads_session_state_hears_running_requires_action_and_idle() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo hi"})),
        Turn::text("Done."),
        Turn::tool_use("Bash", json!({"command": "echo hi"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let states = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .filter_map(
                |l| match (l["subtype"].as_str(), l["request"]["subtype"].as_str()) {
                    (Some("session_state_changed"), _) => {
                        Some(l["state"].as_str().unwrap().to_owned())
                    }
                    (_, Some("can_use_tool")) => Some("can_use_tool".to_owned()),
                    _ if l["type"] == "result" => Some("result".to_owned()),
                    _ => None,
                },
            )
            .collect()
    };
    let answer = |line: &Value| match line["request"]["subtype"].as_str() {
        Some("can_use_tool") => Some(vec![json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": line["request_id"],
            "response": {"behavior": "allow", "updatedInput": line["request"]["input"]}}})]),
        _ if line["type"] == "result" => None,
        _ => Some(Vec::new()),
    };
    let mut cmd = sandbox.gyre(&server).unwrap();
    cmd.args(["--permission-prompt-tool", "stdio"])
        .env("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1");
    let (lines, stderr) = gyre_e2e::converse(cmd, &[user(&json!("run it"))], answer);
    assert_eq!(
        states(&lines),
        [
            "running",
            "requires_action",
            "can_use_tool",
            "running",
            "result",
            "idle"
        ],
        "{stderr}"
    );
    let state = lines
        .iter()
        .find(|l| l["subtype"] == "session_state_changed")
        .unwrap();
    assert_eq!(state["type"], "system");
    assert!(state["session_id"].is_string() && state["uuid"].is_string());
    // Without the variable (the Python SDK), no such line.
    let mut cmd = sandbox.gyre(&server).unwrap();
    cmd.args(["--permission-prompt-tool", "stdio"]);
    let (lines, _) = gyre_e2e::converse(cmd, &[user(&json!("run it"))], answer);
    assert_eq!(states(&lines), ["can_use_tool", "result"]);
}

/// The TypeScript SDK's `settingsDelivery: 'initialize'`: settings in the request, over
/// the settings files, as `--settings` would be.
#[test]
fn settings_sent_in_initialize_apply_to_the_session() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo from-initialize"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let init = json!({
        "subtype": "initialize",
        "hooks": null,
        "settings": {"permissions": {"allow": ["Bash(echo from-initialize)"]}},
    });
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--await-initialize"],
        &[control("i1", &init), user(&json!("run it"))],
        |line| (line["type"] != "result").then(Vec::new),
    );
    let reply = &response_to(&lines, "i1")["response"];
    assert_eq!(
        reply["response"]["settings_applied"], true,
        "{reply} {stderr}"
    );
    let results = gyre_e2e::tool_results_of_lines(&lines);
    assert_eq!(results.len(), 1, "{lines:?}");
    assert!(
        !results[0].0,
        "the rule from initialize allowed it: {results:?}"
    );
    assert!(results[0].1.contains("from-initialize"), "{results:?}");
    // A malformed `settings` is named; the session starts from the files.
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &[],
        &[control(
            "i2",
            &json!({"subtype": "initialize", "settings": 7}),
        )],
        |_| None,
    );
    assert!(stderr.contains("invalid `settings`"), "{stderr}");
    let reply = &response_to(&lines, "i2")["response"];
    assert_eq!(reply["subtype"], "error", "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("invalid `settings`: expected a settings object"),
        "{reply}"
    );
}

/// `--replay-user-messages`: each message the SDK sent is echoed under its own uuid
/// when its turn starts (Zed's ACP adapter waits for that before it reads the result).
#[test]
fn replayed_user_messages_carry_the_sdks_uuid_before_their_turn_runs() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let mut message = user(&json!("hello"));
    message["uuid"] = json!("5b0c1f3e-uuid-from-the-sdk");
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &["--replay-user-messages"],
        &[message],
        |line| (line["type"] != "result").then(Vec::new),
    );
    let replay = lines
        .iter()
        .position(|l| l["type"] == "user" && l["isReplay"] == true)
        .unwrap_or_else(|| panic!("no replay: {lines:?} {stderr}"));
    assert_eq!(lines[replay]["uuid"], "5b0c1f3e-uuid-from-the-sdk");
    assert_eq!(lines[replay]["message"]["content"][0]["text"], "hello");
    let answer = lines.iter().position(|l| l["type"] == "assistant").unwrap();
    assert!(replay < answer, "{lines:?}");
    // Without the flag nothing is echoed.
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let (lines, _) = converse(&sandbox, &server, &[], &[user(&json!("hello"))], |line| {
        (line["type"] != "result").then(Vec::new)
    });
    assert!(!lines.iter().any(|l| l["type"] == "user"), "{lines:?}");
}

/// An embedding program's policy settings (`--managed-settings`, or `managedSettings` in
/// `initialize`) restrict the session over every other source and never widen it.
#[test]
fn managed_settings_only_restrict_and_win_over_every_other_source() {
    let sandbox = Sandbox::new().unwrap();
    let script = Script::new([
        Turn::tool_use("Bash", json!({"command": "echo managed"})),
        Turn::text("Done."),
    ]);
    let server = TestServer::spawn(script.clone()).unwrap();
    let policy = json!({
        "permissions": {"deny": ["Bash"], "allow": ["Write"], "defaultMode": "bypassPermissions"},
        "env": {"GYRE_POLICY": "1"},
    });
    // The flag: Bash is denied although --allowedTools allows it, and the widening
    // parts are named as ignored.
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "Bash",
        "--managed-settings",
        &policy.to_string(),
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let results = gyre_e2e::tool_results_of_lines(&lines);
    assert!(results[0].0, "denied: {results:?}");
    assert!(!results[0].1.contains("managed\n"), "{results:?}");
    assert!(
        out.stderr
            .contains("managed settings may only restrict; ignored: permissions.allow, permissions.defaultMode, env"),
        "{}",
        out.stderr
    );
    // The same policy in initialize.
    let server = TestServer::spawn(script).unwrap();
    let init = json!({"subtype": "initialize", "hooks": null, "managedSettings": policy});
    let (lines, stderr) = converse(
        &sandbox,
        &server,
        &[
            "--await-initialize",
            "--managed-settings-in-initialize",
            "--allowedTools",
            "Bash",
        ],
        &[control("m1", &init), user(&json!("run it"))],
        |line| (line["type"] != "result").then(Vec::new),
    );
    assert_eq!(response_to(&lines, "m1")["response"]["subtype"], "success");
    let results = gyre_e2e::tool_results_of_lines(&lines);
    assert_eq!(results.len(), 1, "{lines:?}");
    assert!(results[0].0, "denied: {results:?} {stderr}");
    assert!(stderr.contains("ignored: permissions.allow"), "{stderr}");
}

/// Issue 29, class 13: `set_permission_mode` to bypassPermissions is refused unless the
/// session was started to allow it, and then the mode really changes.
#[test]
fn set_permission_mode_reaches_bypass_only_when_the_session_allows_it() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Write",
            json!({"file_path": "/tmp/gyre-bypass-probe/x", "content": "x"}),
        ),
        Turn::text("Done."),
    ]))
    .unwrap();
    let bypass = json!({"subtype": "set_permission_mode", "mode": "bypassPermissions"});
    let refused = stream(
        &sandbox,
        &server,
        &[],
        &[control("m1", &bypass), user(&json!("write"))],
    );
    let reply = refused
        .lines()
        .unwrap()
        .into_iter()
        .find(|l| l["response"]["request_id"] == "m1")
        .unwrap();
    assert_eq!(reply["response"]["subtype"], "error", "{reply}");
    assert!(
        reply["response"]["error"]
            .as_str()
            .unwrap()
            .contains("--allow-dangerously-skip-permissions"),
        "{reply}"
    );
    let result = refused.result().unwrap();
    assert_eq!(
        result["permission_denials"].as_array().unwrap().len(),
        1,
        "{result}"
    );
    let allowed = stream(
        &sandbox,
        &server,
        &["--allow-dangerously-skip-permissions"],
        &[control("m2", &bypass)],
    );
    let reply = allowed
        .lines()
        .unwrap()
        .into_iter()
        .find(|l| l["response"]["request_id"] == "m2")
        .unwrap();
    assert_eq!(reply["response"]["subtype"], "success", "{reply}");
}
