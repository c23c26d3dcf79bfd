//! Every stream of gyre-testkit's corpus, replayed through the real binary: the
//! assistant message gyre shows, writes and sends back is the one the streaming
//! reference assembles, block for block and field for field, and a resumed session sends
//! the same bytes again.
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

    // (b) the next request echoes the message exactly.
    let requests = server.requests();
    let echoed = &requests[1].body["messages"][1];
    assert_eq!(echoed["role"], "assistant", "{name}");
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
    assert_eq!(
        last[1].to_string(),
        echoed.to_string(),
        "{name}: resumed request"
    );
    // The whole history before the new prompt is sent as it was.
    let before = requests[requests.len() - 2].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let again = last.as_array().unwrap();
    for (i, message) in before.iter().enumerate() {
        let mut message = message.clone();
        strip_cache_markers(&mut message);
        let mut sent = again[i].clone();
        strip_cache_markers(&mut sent);
        assert_eq!(sent, message, "{name}: resumed messages[{i}]");
    }
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
    ($($test:ident => $file:literal,)*) => {
        $(
            #[test]
            fn $test() {
                replay(&corpus::dir().join($file));
            }
        )*

        #[test]
        fn every_corpus_file_has_a_test() {
            let mut named = vec![$($file),*];
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
    citations_round_trip => "citations.jsonl",
    code_execution_results_round_trip => "code_execution.jsonl",
    compaction_round_trips => "compaction.jsonl",
    chunked_compaction_round_trips => "compaction_chunked.jsonl",
    container_upload_and_tool_search_round_trip => "container_upload.jsonl",
    empty_server_tool_inputs_round_trip => "empty_input.jsonl",
    future_block_and_delta_types_round_trip => "future_types.jsonl",
    mcp_tool_use_and_results_round_trip => "mcp.jsonl",
    redacted_thinking_round_trips => "redacted_thinking.jsonl",
    several_server_tools_in_one_message_round_trip => "several_server_tools.jsonl",
    thinking_before_a_tool_call_round_trips => "thinking_tool_use.jsonl",
    web_fetch_round_trips => "web_fetch.jsonl",
    web_search_with_chunked_input_round_trips => "web_search.jsonl",
}

#[test]
fn usage_is_message_delta_s_where_it_carries_a_field() {
    let events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::raw_events(events)])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "search",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
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
