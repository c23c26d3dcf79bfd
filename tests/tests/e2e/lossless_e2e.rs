//! Every stream of gyre-testkit's corpus, replayed through the real binary: the
//! assistant message gyre shows, writes and sends back is the one the streaming
//! reference assembles, block for block and field for field, and a resumed session sends
//! the same bytes again (issue 17). Then the behaviours around the streams, through the
//! binary: a repeated or foreign `message_start`, `pause_turn`, `refusal`,
//! `model_context_window_exceeded`, usage and cost from `message_delta`, citations, and
//! the raw events of `--include-partial-messages`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn, corpus};
use serde_json::{Value, json};

const SESSION: &str = "7d3f1c2a-0b4e-4c5d-9e6f-123456789abc";

fn transcript_assistant_contents(sandbox: &Sandbox) -> Vec<Value> {
    let files = sandbox.transcripts();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "assistant")
        .map(|l| l["message"]["content"].clone())
        .collect()
}

/// Runs one corpus stream through gyre: two user turns of one session over stream-json,
/// then a third with `--resume`.
fn replay(file: &Path) {
    let name = file.display().to_string();
    let events = corpus::read_events(file).unwrap();
    let expected = corpus::assemble(&events).unwrap()["content"].clone();
    let sandbox = Sandbox::new().unwrap();
    let server =
        TestServer::spawn(Script::new([Turn::raw_events(events), Turn::text("ok")]).repeat_last())
            .unwrap();

    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--session-id",
            SESSION,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for text in ["first", "second"] {
        let line = json!({"type": "user", "message": {"role": "user", "content": text}});
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out: Run = child.wait_with_output().unwrap().into();
    assert_eq!(out.code, Some(0), "{name}: {}", out.stderr);

    // (a) what gyre shows: the first assistant line is the reference assembly.
    let lines = out.lines().unwrap();
    let shown = lines
        .iter()
        .find(|l| l["type"] == "assistant")
        .unwrap_or_else(|| panic!("{name}: no assistant line"));
    assert_eq!(shown["message"]["content"], expected, "{name}: stream-json");
    // … and what it wrote to the transcript.
    assert_eq!(
        transcript_assistant_contents(&sandbox)[0],
        expected,
        "{name}: transcript"
    );

    // (b) the next request echoes the message exactly (but for the prompt-cache
    // marker gyre puts on the newest message's last block that can carry one: a paused
    // turn's continuation ends with this message).
    let requests = server.requests();
    let mut echoed = requests[1].body["messages"][1].clone();
    assert_eq!(echoed["role"], "assistant", "{name}");
    strip_cache_markers(&mut echoed);
    assert_eq!(echoed["content"], expected, "{name}: next request");

    // (c) a resumed session sends the same bytes again.
    let resumed = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "third",
        "--resume",
        SESSION,
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(resumed.code, Some(0), "{name}: {}", resumed.stderr);
    let requests = server.requests();
    let last = &requests.last().unwrap().body["messages"];
    let before = requests[requests.len() - 2].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        last[1].to_string(),
        before[1].to_string(),
        "{name}: resumed request"
    );
    // The whole history before the new prompt is sent as it was.
    let again = last.as_array().unwrap();
    for (i, message) in before.iter().enumerate() {
        let mut message = message.clone();
        strip_cache_markers(&mut message);
        let mut sent = again[i].clone();
        strip_cache_markers(&mut sent);
        assert_eq!(sent, message, "{name}: resumed messages[{i}]");
    }
}

/// `gyre -p <prompt> --output-format stream-json --verbose` in `sandbox`, against a
/// server playing `script`.
fn stream_json(sandbox: &Sandbox, script: Script, prompt: &str) -> (TestServer, Run) {
    let server = TestServer::spawn(script).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    (server, out)
}

/// The prompt-cache marker moves to the newest message from request to request.
fn strip_cache_markers(message: &mut Value) {
    if let Some(blocks) = message["content"].as_array_mut() {
        for block in blocks {
            if let Some(fields) = block.as_object_mut() {
                fields.remove("cache_control");
            }
        }
    }
}

macro_rules! corpus_tests {
    (
        replayed { $($test:ident => $file:literal,)* }
        own_tests { $($other:literal,)* }
    ) => {
        $(
            #[test]
            fn $test() {
                replay(&corpus::dir().join($file));
            }
        )*

        #[test]
        fn every_corpus_file_has_a_test() {
            let mut named = vec![$($file,)* $($other,)*];
            named.sort_unstable();
            let files: Vec<String> = corpus::files()
                .unwrap()
                .iter()
                .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
                .collect();
            assert_eq!(files, named);
        }
    };
}

corpus_tests! {
    replayed {
        advisor_calls_and_their_three_result_kinds_round_trip => "advisor.jsonl",
        citations_round_trip => "citations.jsonl",
        code_execution_results_round_trip => "code_execution.jsonl",
        text_editor_bash_and_encrypted_code_execution_results_round_trip => "code_execution_more.jsonl",
        compaction_round_trips => "compaction.jsonl",
        chunked_compaction_round_trips => "compaction_chunked.jsonl",
        a_compaction_stop_with_context_management_round_trips => "compaction_stop.jsonl",
        container_upload_and_tool_search_round_trip => "container_upload.jsonl",
        empty_server_tool_inputs_round_trip => "empty_input.jsonl",
        a_fallback_block_between_two_models_text_round_trips => "fallback.jsonl",
        future_block_and_delta_types_round_trip => "future_types.jsonl",
        mcp_tool_use_and_results_round_trip => "mcp.jsonl",
        a_paused_server_tool_turn_round_trips => "pause_turn.jsonl",
        a_tool_call_made_from_code_execution_round_trips => "programmatic_tool_call.jsonl",
        redacted_thinking_round_trips => "redacted_thinking.jsonl",
        a_refusal_round_trips => "refusal.jsonl",
        several_server_tools_in_one_message_round_trip => "several_server_tools.jsonl",
        thinking_before_a_tool_call_round_trips => "thinking_tool_use.jsonl",
        tool_search_results_and_errors_round_trip => "tool_search.jsonl",
        usage_details_and_two_message_deltas_round_trip => "usage_details.jsonl",
        web_fetch_round_trips => "web_fetch.jsonl",
        web_search_with_chunked_input_round_trips => "web_search.jsonl",
    }
    // Streams whose response gyre withholds by design; tested below.
    own_tests {
        "context_window_exceeded.jsonl",
    }
}

#[test]
fn usage_is_message_delta_s_where_it_carries_a_field() {
    let events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let sandbox = Sandbox::new().unwrap();
    let (_, out) = stream_json(&sandbox, Script::new([Turn::raw_events(events)]), "search");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    // message_start said 1200 input tokens; message_delta's 2400 is the later value.
    let expected = json!({
        "input_tokens": 2400,
        "output_tokens": 120,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 800,
        "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
    });
    assert_eq!(assistant["message"]["usage"], expected);
    let result = out.result().unwrap();
    assert_eq!(result["usage"], expected, "{result:#}");
}

/// The model gyre reports in its init line, whose prices the session's cost uses.
fn session_model(lines: &[Value]) -> String {
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    init["model"].as_str().unwrap().to_owned()
}

#[test]
fn the_cost_is_priced_on_message_delta_s_usage() {
    let events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let sandbox = Sandbox::new().unwrap();
    let (_, out) = stream_json(&sandbox, Script::new([Turn::raw_events(events)]), "search");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let model = session_model(&lines);
    let mut usage = gyre_protocol::Usage {
        input_tokens: 2400,
        output_tokens: 120,
        cache_read_input_tokens: 800,
        ..gyre_protocol::Usage::default()
    };
    usage.server_tool_use.web_search_requests = 1;
    let expected = gyre_loop::usage_cost_usd(&model, &usage);
    // What message_start alone said: 1200 input tokens, 3 output, no search.
    let stale = gyre_protocol::Usage {
        input_tokens: 1200,
        output_tokens: 3,
        cache_read_input_tokens: 800,
        ..gyre_protocol::Usage::default()
    };
    assert!((expected - gyre_loop::usage_cost_usd(&model, &stale)).abs() > 1e-6);
    let cost = out.result().unwrap()["total_cost_usd"].as_f64().unwrap();
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}

#[test]
fn the_later_of_two_message_deltas_wins_and_the_cache_breakdown_is_kept() {
    let events = corpus::read_events(corpus::dir().join("usage_details.jsonl")).unwrap();
    let sandbox = Sandbox::new().unwrap();
    let (_, out) = stream_json(&sandbox, Script::new([Turn::raw_events(events)]), "count");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let expected = json!({
        "input_tokens": 60,
        "output_tokens": 35,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 10500,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 2},
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
    });
    let lines = out.lines().unwrap();
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    assert_eq!(assistant["message"]["usage"], expected);
    assert_eq!(assistant["message"]["stop_reason"], "end_turn");
    assert_eq!(out.result().unwrap()["usage"], expected);
}

#[test]
fn a_repeated_message_start_for_the_same_message_is_ignored() {
    let mut events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let expected = corpus::assemble(&events).unwrap()["content"].clone();
    let again = events[0].clone();
    events.insert(4, again.clone());
    events.insert(12, again);
    let sandbox = Sandbox::new().unwrap();
    let (server, out) = stream_json(&sandbox, Script::new([Turn::raw_events(events)]), "search");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    assert!(
        !lines.iter().any(|l| l["subtype"] == "api_retry"),
        "not retried"
    );
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    assert_eq!(assistant["message"]["content"], expected);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_message_start_for_another_message_is_retried_like_a_cut_stream() {
    let mut events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let mut other = events[0].clone();
    other["message"]["id"] = json!("msg_someone_else");
    // The first text block is complete when the stream restarts: it must not be shown.
    events.insert(5, other);
    let sandbox = Sandbox::new().unwrap();
    let (server, out) = stream_json(
        &sandbox,
        Script::new([Turn::raw_events(events), Turn::text("the second attempt")]),
        "search",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let retries: Vec<&Value> = lines
        .iter()
        .filter(|l| l["subtype"] == "api_retry")
        .collect();
    assert_eq!(retries.len(), 1, "{lines:#?}");
    assert_eq!(retries[0]["error"], "stream_restarted");
    assert!(
        retries[0]["message"]
            .as_str()
            .unwrap()
            .contains("msg_someone_else"),
        "{}",
        retries[0]
    );
    let assistants: Vec<&Value> = lines.iter().filter(|l| l["type"] == "assistant").collect();
    assert_eq!(assistants.len(), 1, "the broken attempt is never shown");
    assert_eq!(
        assistants[0]["message"]["content"],
        json!([{"type": "text", "text": "the second attempt"}])
    );
    assert_eq!(out.result().unwrap()["result"], "the second attempt");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].body["messages"], requests[0].body["messages"]);
}

#[test]
fn pause_turn_sends_the_history_back_as_is_and_counts_as_a_turn() {
    let events = corpus::read_events(corpus::dir().join("pause_turn.jsonl")).unwrap();
    let paused = corpus::assemble(&events).unwrap()["content"].clone();
    let sandbox = Sandbox::new().unwrap();
    let (server, out) = stream_json(
        &sandbox,
        Script::new([
            Turn::raw_events(events.clone()),
            Turn::text("Tokio 2 is out."),
        ]),
        "what is new in tokio",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // The continuation is the first request plus the paused response, nothing else.
    let mut first = requests[0].body["messages"].as_array().unwrap().clone();
    let second = requests[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(second.len(), first.len() + 1, "{second:#?}");
    let mut continued = second[first.len()].clone();
    assert_eq!(continued["role"], "assistant");
    strip_cache_markers(&mut continued);
    assert_eq!(continued["content"], paused);
    for (i, message) in first.iter_mut().enumerate() {
        let mut sent = second[i].clone();
        strip_cache_markers(message);
        strip_cache_markers(&mut sent);
        assert_eq!(&sent, message, "messages[{i}]");
    }
    let result = out.result().unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "Tokio 2 is out.");
    assert_eq!(result["num_turns"], 2, "{result:#}");

    // With one turn allowed, the continuation is the turn too many.
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::raw_events(events),
        Turn::text("never asked"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "what is new in tokio",
        "--max-turns",
        "1",
        "--output-format",
        "json",
    ]))
    .unwrap();
    let result = out.result().unwrap();
    assert_eq!(result["subtype"], "error_max_turns", "{result:#}");
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_refusal_ends_the_turn_with_what_the_model_wrote() {
    let events = corpus::read_events(corpus::dir().join("refusal.jsonl")).unwrap();
    let sandbox = Sandbox::new().unwrap();
    let (server, out) = stream_json(
        &sandbox,
        Script::new([Turn::raw_events(events), Turn::text("never asked")]),
        "explain",
    );
    let lines = out.lines().unwrap();
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    assert_eq!(assistant["message"]["stop_reason"], "refusal");
    let result = out.result().unwrap();
    assert_eq!(
        result["result"], "I can explain how exploits are",
        "{result:#}"
    );
    assert_eq!(result["terminal_reason"], "completed", "{result:#}");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        server.requests().len(),
        1,
        "no stop hook or nudge asks again"
    );
}

#[test]
fn model_context_window_exceeded_is_recovered_like_prompt_too_long() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write(
            "log.txt",
            &"a line of a long log file for the context\n".repeat(800),
        )
        .unwrap();
    let read = || Turn::tool_use("Read", json!({"file_path": file}));
    let exceeded =
        corpus::read_events(corpus::dir().join("context_window_exceeded.jsonl")).unwrap();
    let (server, out) = stream_json(
        &sandbox,
        Script::new([
            read(),
            read(),
            read(),
            Turn::raw_events(exceeded),
            Turn::text("<summary>The user asked to read log.txt three times.</summary>"),
            Turn::text("Done, after compacting."),
        ]),
        "read the log",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let boundary = lines
        .iter()
        .find(|l| l["subtype"] == "compact_boundary")
        .unwrap_or_else(|| panic!("no compaction: {lines:#?}"));
    assert_eq!(boundary["compact_metadata"]["trigger"], "reactive");
    assert_eq!(out.result().unwrap()["result"], "Done, after compacting.");
    // The response that filled the window is withheld: never shown, never sent back.
    assert!(!out.stdout.contains("WINDOW-FILLED"), "{}", out.stdout);
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    assert!(!requests[5].body.to_string().contains("WINDOW-FILLED"));
    assert!(
        requests[5]
            .body
            .to_string()
            .contains("The user asked to read log.txt three times.")
    );
}

#[test]
fn citations_deltas_are_appended_to_their_text_block() {
    let events = corpus::read_events(corpus::dir().join("citations.jsonl")).unwrap();
    let sent: Vec<&Value> = events
        .iter()
        .filter(|e| e["delta"]["type"] == "citations_delta")
        .map(|e| &e["delta"]["citation"])
        .collect();
    assert!(sent.len() >= 4);
    let sandbox = Sandbox::new().unwrap();
    let (_, out) = stream_json(
        &sandbox,
        Script::new([Turn::raw_events(events.clone())]),
        "cite",
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    let shown: Vec<&Value> = assistant["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["citations"].as_array())
        .flatten()
        .collect();
    assert_eq!(shown, sent, "every citation, in order");
}

/// An event as `--include-partial-messages` must show it: as sent, but for its usage,
/// which gyre shows as it counts it (the four token counts always present).
fn without_usage(event: &Value) -> Value {
    let mut event = event.clone();
    if let Some(fields) = event.as_object_mut() {
        fields.remove("usage");
    }
    if let Some(message) = event["message"].as_object_mut() {
        message.remove("usage");
    }
    event
}

#[test]
fn partial_messages_show_every_event_as_the_api_sent_it() {
    const KNOWN: [&str; 8] = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    ];
    for file in corpus::files().unwrap() {
        let name = file.display().to_string();
        let events = corpus::read_events(&file).unwrap();
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(
            Script::new([Turn::raw_events(events.clone()), Turn::text("ok")]).repeat_last(),
        )
        .unwrap();
        let out = run(sandbox.gyre(&server).unwrap().args([
            "-p",
            "go",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ]))
        .unwrap();
        // Event types gyre does not know are tolerated, not shown.
        let sent: Vec<Value> = events
            .iter()
            .filter(|e| KNOWN.contains(&e["type"].as_str().unwrap()))
            .map(without_usage)
            .collect();
        let lines = out.lines().unwrap();
        // The first response's events, up to its message_stop.
        let mut shown: Vec<Value> = Vec::new();
        for line in lines.iter().filter(|l| l["type"] == "stream_event") {
            shown.push(without_usage(&line["event"]));
            if line["event"]["type"] == "message_stop" {
                break;
            }
        }
        let shown: Vec<Value> = shown
            .into_iter()
            .filter(|e| e["type"] != "unknown")
            .collect();
        assert_eq!(shown, sent, "{name}");
    }
}
