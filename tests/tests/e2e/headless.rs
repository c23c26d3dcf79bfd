//! The walking skeleton end to end: `gyre -p` against gyre-testkit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, kinds, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

#[test]
fn a_read_round_trip_prints_every_stream_json_line_with_its_fields() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write("notes.txt", "first line\nsecond line\n")
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("Reading it.")
            .and_tool_use("Read", json!({"file_path": file}))
            .with_tokens(100, 20),
        Turn::text("The file has two lines.").with_tokens(150, 10),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "what is in notes.txt?",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let lines = out.lines().unwrap();
    assert_eq!(
        kinds(&lines),
        ["system/init", "assistant", "user", "assistant", "result"]
    );

    let init = &lines[0];
    let session_id = init["session_id"].as_str().unwrap();
    assert_eq!(init["cwd"], sandbox.project().to_string_lossy().as_ref());
    assert!(init["tools"].as_array().unwrap().contains(&json!("Read")));
    assert_eq!(init["permissionMode"], "default");
    assert!(init["model"].is_string());

    let call = &lines[1];
    assert_eq!(call["session_id"], session_id);
    assert!(call["uuid"].is_string());
    assert!(call["parent_tool_use_id"].is_null());
    assert_eq!(call["message"]["role"], "assistant");
    let tool_use = &call["message"]["content"][1];
    assert_eq!(tool_use["type"], "tool_use");
    assert_eq!(tool_use["name"], "Read");

    let result_line = &lines[2];
    assert_eq!(result_line["message"]["role"], "user");
    let tool_result = &result_line["message"]["content"][0];
    assert_eq!(tool_result["type"], "tool_result");
    assert_eq!(tool_result["tool_use_id"], tool_use["id"]);
    let text = tool_result["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.contains("1\tfirst line"), "{text}");
    assert!(text.contains("2\tsecond line"), "{text}");

    let result = &lines[4];
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["result"], "The file has two lines.");
    assert_eq!(result["num_turns"], 2);
    assert_eq!(result["terminal_reason"], "completed");
    assert_eq!(result["session_id"], session_id);
    assert_eq!(result["usage"]["input_tokens"], 250);
    assert!(result["total_cost_usd"].as_f64().unwrap() > 0.0);
    assert!(result["duration_ms"].is_u64());
    assert_eq!(result["permission_denials"], json!([]));

    // The second request carried the tool result back to the model.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let sent = &requests[1].body["messages"];
    assert_eq!(sent.as_array().unwrap().len(), 3);
    assert_eq!(sent[2]["content"][0]["tool_use_id"], tool_use["id"]);
    assert_eq!(
        requests[0].header("x-api-key"),
        Some(gyre_e2e::TEST_API_KEY)
    );
    assert_eq!(requests[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(
        requests[0]
            .header("user-agent")
            .unwrap()
            .starts_with("gyre/")
    );
}

#[test]
fn text_output_prints_only_the_final_answer_and_json_only_the_result() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("forty-two"),
        Turn::text("forty-two"),
    ]))
    .unwrap();
    let text = run(sandbox.gyre(&server).unwrap().args(["-p", "answer?"])).unwrap();
    assert_eq!(text.code, Some(0), "{}", text.stderr);
    assert_eq!(text.stdout, "forty-two\n");

    let json_out =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "answer?", "--output-format", "json"]))
        .unwrap();
    assert_eq!(json_out.code, Some(0));
    let lines = json_out.lines().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "result");
    assert_eq!(lines[0]["result"], "forty-two");
}

#[test]
fn the_prompt_can_come_from_stdin() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("hi back")])).unwrap();
    let mut cmd = sandbox.gyre(&server).unwrap();
    cmd.arg("-p")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello from stdin\n")
        .unwrap();
    let out: gyre_e2e::Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "hi back\n");
    let sent = &server.requests()[0].body["messages"][0]["content"][0]["text"];
    assert_eq!(sent, "hello from stdin");
}

#[test]
fn max_turns_stops_a_session_that_keeps_calling_tools() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("a.txt", "x\n").unwrap();
    let server = TestServer::spawn(
        Script::new([Turn::tool_use("Read", json!({"file_path": file}))]).repeat_last(),
    )
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "loop forever",
        "--max-turns",
        "2",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let result = out.result().unwrap();
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["errors"],
        json!(["Reached maximum number of turns (2)"])
    );
    assert_eq!(result["terminal_reason"], "max_turns");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn tool_errors_go_back_to_the_model_as_error_results() {
    let sandbox = Sandbox::new().unwrap();
    let missing = sandbox.project().join("nope.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": missing})),
        Turn::text("It does not exist."),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read nope.txt",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let result_block = &lines[2]["message"]["content"][0];
    assert_eq!(result_block["is_error"], true);
    assert!(
        result_block["content"]
            .as_str()
            .unwrap()
            .contains("File does not exist.")
    );
}

#[test]
fn an_unknown_flag_is_named_and_exit_2() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "x", "--frobnicate"]))
    .unwrap();
    assert_eq!(out.code, Some(2));
    assert!(out.stderr.contains("--frobnicate"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn stream_json_without_verbose_is_a_usage_error() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let out =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "x", "--output-format", "stream-json"]))
        .unwrap();
    assert_eq!(out.code, Some(2));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("requires --verbose"), "{}", out.stderr);
}

#[test]
fn a_missing_api_key_says_which_variable_to_set() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .args(["-p", "x"]))
    .unwrap();
    assert_eq!(out.code, Some(1));
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"));
}

#[test]
fn an_unreachable_base_url_is_a_clear_error() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    // A port nothing listens on: bind one, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        // The final error alone; progress_lines.rs tests what the default budget
        // prints while it waits.
        .env("GYRE_MAX_RETRIES", "0")
        .args(["-p", "x"]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("Could not reach the API"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("ANTHROPIC_BASE_URL"), "{}", out.stderr);
}

#[test]
fn include_partial_messages_adds_stream_event_lines_with_raw_deltas() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("streamed in pieces").with_chunk_chars(5)
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hi",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let deltas: String = lines
        .iter()
        .filter(|l| l["type"] == "stream_event" && l["event"]["type"] == "content_block_delta")
        .map(|l| l["event"]["delta"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "streamed in pieces");
    let first_event = lines
        .iter()
        .position(|l| l["type"] == "stream_event")
        .unwrap();
    let assistant = lines.iter().position(|l| l["type"] == "assistant").unwrap();
    assert!(
        first_event < assistant,
        "deltas come before the whole message"
    );
    assert!(lines.iter().any(|l| l["event"]["type"] == "message_stop"));
}

#[test]
fn max_budget_usd_stops_the_session_with_its_own_subtype() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("a.txt", "x\n").unwrap();
    let expensive = gyre_testkit::Usage {
        input_tokens: 1_000_000,
        output_tokens: 10,
        ..gyre_testkit::Usage::default()
    };
    let server = TestServer::spawn(
        Script::new([Turn::tool_use("Read", json!({"file_path": file})).with_usage(expensive)])
            .repeat_last(),
    )
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "spend",
        "--max-budget-usd",
        "0.50",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let result = out.result().unwrap();
    assert_eq!(result["subtype"], "error_max_budget_usd");
    assert_eq!(result["is_error"], true);
    assert!(result["total_cost_usd"].as_f64().unwrap() >= 0.5);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn help_version_and_completions_work_without_an_api_key() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let help = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .arg("--help"))
    .unwrap();
    assert_eq!(help.code, Some(0));
    for flag in [
        "--print",
        "--output-format",
        "--allowedTools",
        "--max-turns",
        "--resume",
        "--fallback-model",
    ] {
        assert!(help.stdout.contains(flag), "--help lacks {flag}");
    }
    let version = run(sandbox.gyre(&server).unwrap().arg("--version")).unwrap();
    assert_eq!(version.code, Some(0));
    assert!(version.stdout.starts_with("gyre "), "{}", version.stdout);
    for shell in ["bash", "zsh", "fish"] {
        let c = run(sandbox.gyre(&server).unwrap().args(["completions", shell])).unwrap();
        assert_eq!(c.code, Some(0), "{shell}: {}", c.stderr);
        assert!(c.stdout.contains("allowedTools"), "{shell}");
    }
}

#[test]
fn sdk_flags_are_accepted_with_a_one_line_warning() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "hi",
        "--setting-sources",
        "user,project",
        "--channels",
        "x",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("--channels"), "{}", out.stderr);
}

/// The settings' `env` reaches what gyre configures from the environment and the
/// commands it starts, without being set in gyre's own process: a variable the process
/// already has wins.
#[test]
fn settings_env_configures_the_session_and_reaches_commands_but_the_process_wins() {
    let sandbox = Sandbox::new().unwrap();
    std::fs::create_dir_all(sandbox.home()).unwrap();
    std::fs::write(
        sandbox.home().join("settings.json"),
        json!({"env": {
            "GYRE_TEST_FROM_SETTINGS": "from settings",
            "GYRE_TEST_BOTH": "from settings",
            "GYRE_MAX_OUTPUT_TOKENS": "1234",
        }})
        .to_string(),
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Bash",
            json!({"command": "echo \"$GYRE_TEST_FROM_SETTINGS / $GYRE_TEST_BOTH\""}),
        ),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("GYRE_TEST_BOTH", "from the process")
        .args(["-p", "go", "--allowedTools", "Bash"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    let first: serde_json::Value = requests[0].body_as().unwrap();
    assert_eq!(
        first["max_tokens"], 1234,
        "GYRE_MAX_OUTPUT_TOKENS from settings"
    );
    let second = requests[1]
        .body_as::<serde_json::Value>()
        .unwrap()
        .to_string();
    assert!(
        second.contains("from settings / from the process"),
        "the command saw both: {second}"
    );
}
