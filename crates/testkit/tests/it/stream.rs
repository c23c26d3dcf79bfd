//! Response turns: the SSE stream, its order, and the non-streaming message.

use crate::common::{body, names, parse_sse, post, stream_events};
use gyre_protocol::{
    AssistantResponse, ContentBlock, ContentDelta, StopReason, StreamEvent, Usage,
};
use gyre_testkit::{Block, Script, TestServer, Turn};
use serde_json::{Value, json};

fn full_turn() -> Turn {
    Turn::response([
        Block::thinking("I should look at both files first.", "sig-abc"),
        Block::text("Let me read both files for you now."),
        Block::tool_use("Read", json!({"file_path": "/src/main.rs", "limit": 200})),
        Block::tool_use_with_id(
            "toolu_fixed",
            "Grep",
            json!({"pattern": "fn main", "path": "."}),
        ),
    ])
    .with_usage(Usage {
        input_tokens: 1500,
        output_tokens: 90,
        cache_read_input_tokens: 1000,
        cache_creation_input_tokens: 20,
        ..Usage::default()
    })
}

#[tokio::test]
async fn thinking_text_and_two_tools_stream_in_api_order() {
    let server = TestServer::start(Script::new([full_turn()])).await.unwrap();
    let response = post(&server.url(), &body(true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream; charset=utf-8"
    );
    let events = parse_sse(&response.text().await.unwrap());
    let parsed = stream_events(&events);

    // Shape: start, ping, four blocks each start..deltas..stop, delta, stop.
    let names = names(&events);
    assert_eq!(names[..2], ["message_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    assert!(!parsed.iter().any(|e| matches!(e, StreamEvent::Unknown)));

    // Blocks open and close in index order, never interleaved, deltas inside their block.
    let mut open: Option<usize> = None;
    let mut next_index = 0;
    for event in &parsed {
        match event {
            StreamEvent::ContentBlockStart { index, .. } => {
                assert_eq!(open, None);
                assert_eq!(*index, next_index);
                open = Some(*index);
            }
            StreamEvent::ContentBlockDelta { index, .. } => assert_eq!(open, Some(*index)),
            StreamEvent::ContentBlockStop { index } => {
                assert_eq!(open, Some(*index));
                open = None;
                next_index += 1;
            }
            _ => assert_eq!(open, None),
        }
    }
    assert_eq!(next_index, 4);

    let StreamEvent::MessageStart { message } = &parsed[0] else {
        panic!()
    };
    assert_eq!(
        message.model, "claude-test",
        "model defaults to the request's"
    );
    assert_eq!(message.usage.input_tokens, 1500);
    assert_eq!(message.usage.cache_read_input_tokens, 1000);
    assert_eq!(message.usage.output_tokens, 1);
    let StreamEvent::MessageDelta { delta, usage, .. } = &parsed[parsed.len() - 2] else {
        panic!()
    };
    assert_eq!(
        delta.stop_reason,
        Some(StopReason::ToolUse),
        "tool_use is the default with tools"
    );
    assert_eq!(usage.output_tokens, Some(90));
    assert_eq!(usage.cache_creation_input_tokens, Some(20));

    // Reassemble the blocks from the deltas the way a client would.
    let mut blocks: Vec<(ContentBlock, String)> = Vec::new();
    for event in parsed {
        match event {
            StreamEvent::ContentBlockStart { content_block, .. } => {
                blocks.push((content_block, String::new()));
            }
            StreamEvent::ContentBlockDelta { delta, .. } => {
                let (block, json) = blocks.last_mut().unwrap();
                match (block, delta) {
                    (ContentBlock::Text { text, .. }, ContentDelta::TextDelta { text: t }) => {
                        text.push_str(&t);
                    }
                    (
                        ContentBlock::Thinking { thinking, .. },
                        ContentDelta::ThinkingDelta { thinking: t },
                    ) => {
                        thinking.push_str(&t);
                    }
                    (
                        ContentBlock::Thinking { signature, .. },
                        ContentDelta::SignatureDelta { signature: s },
                    ) => {
                        *signature = s;
                    }
                    (
                        ContentBlock::ToolUse { .. },
                        ContentDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                    }
                    (block, delta) => panic!("{delta:?} in {block:?}"),
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        blocks[0].0,
        ContentBlock::thinking("I should look at both files first.", "sig-abc")
    );
    assert_eq!(
        blocks[1].0,
        ContentBlock::text("Let me read both files for you now.")
    );
    let (id, name, _) = blocks[2].0.as_tool_use().unwrap();
    assert!(id.starts_with("toolu_"));
    assert_eq!(name, "Read");
    assert_eq!(
        serde_json::from_str::<Value>(&blocks[2].1).unwrap(),
        json!({"file_path": "/src/main.rs", "limit": 200})
    );
    assert_eq!(blocks[3].0.as_tool_use().unwrap().0, "toolu_fixed");
    assert_eq!(
        serde_json::from_str::<Value>(&blocks[3].1).unwrap(),
        json!({"pattern": "fn main", "path": "."})
    );
}

#[tokio::test]
async fn text_and_tool_input_are_split_into_several_deltas() {
    let text = "x".repeat(45);
    let turn = Turn::text(text.clone()).and_tool_use("Write", json!({"content": "y".repeat(50)}));
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    let text_deltas: Vec<&str> = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text_deltas, ["x".repeat(20), "x".repeat(20), "x".repeat(5)]);
    let json_deltas = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .count();
    assert!(json_deltas >= 3, "{json_deltas} input_json_delta events");
}

#[tokio::test]
async fn chunk_chars_sets_the_delta_size() {
    let script = Script::new([Turn::text("abcdef")]).with_chunk_chars(4);
    let server = TestServer::start(script).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(deltas, ["abcd", "ef"]);
}

#[tokio::test]
async fn stream_false_returns_the_whole_message() {
    let server = TestServer::start(Script::new([full_turn()
        .with_model("claude-other")
        .with_id("msg_1")]))
    .await
    .unwrap();
    let response = post(&server.url(), &body(false)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let message: AssistantResponse = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(message.id, "msg_1");
    assert_eq!(message.model, "claude-other");
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(message.usage.output_tokens, 90);
    assert_eq!(message.content.len(), 4);
    assert_eq!(
        message.content[1],
        ContentBlock::text("Let me read both files for you now.")
    );
    assert_eq!(
        message.content[2].as_tool_use().unwrap().2,
        &json!({"file_path": "/src/main.rs", "limit": 200})
    );
}

#[tokio::test]
async fn stop_reason_and_redacted_thinking_are_sent_as_scripted() {
    let turn = Turn::response([Block::redacted_thinking("opaque"), Block::text("cut short")])
        .with_stop_reason("max_tokens");
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    let parsed = stream_events(&events);
    assert!(parsed.contains(&StreamEvent::ContentBlockStart {
        index: 0,
        content_block: ContentBlock::redacted_thinking("opaque"),
    }));
    let StreamEvent::MessageDelta { delta, .. } = &parsed[parsed.len() - 2] else {
        panic!()
    };
    assert_eq!(delta.stop_reason, Some(StopReason::MaxTokens));
}

#[tokio::test]
async fn malformed_tool_input_is_streamed_verbatim() {
    let turn = Turn::response([Block::raw_tool_use("Bash", "{\"command\": \"ls")]);
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    let json: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"]["partial_json"].as_str())
        .collect();
    assert_eq!(json, "{\"command\": \"ls");
}

#[tokio::test]
async fn raw_sse_is_sent_exactly() {
    let raw = "event: message_start\ndata: {not json\n\nevent: ping\n";
    let server = TestServer::start(Script::new([Turn::raw_sse(raw)]))
        .await
        .unwrap();
    let response = post(&server.url(), &body(true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), raw);
}

#[tokio::test]
async fn unknown_event_is_inserted_and_tolerated() {
    let server = TestServer::start(Script::new([Turn::text("a").unknown_event_after(2)]))
        .await
        .unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    assert_eq!(
        names(&events)[..3],
        ["message_start", "ping", "testkit_unknown_event"]
    );
    assert_eq!(stream_events(&events)[2], StreamEvent::Unknown);
    assert_eq!(names(&events).last(), Some(&"message_stop"));
}

#[tokio::test]
async fn response_turn_headers_are_sent() {
    let server = TestServer::start(Script::new([Turn::text("a").with_header("x-custom", "1")]))
        .await
        .unwrap();
    let response = post(&server.url(), &body(true)).await;
    assert_eq!(response.headers()["x-custom"], "1");
    assert_eq!(response.headers()["request-id"], "req_testkit_0");
}

#[tokio::test]
async fn raw_events_are_sent_as_they_are_and_faults_still_apply() {
    let events =
        gyre_testkit::corpus::read_events(gyre_testkit::corpus::dir().join("web_search.jsonl"))
            .unwrap();
    let server = TestServer::start(Script::new([
        Turn::raw_events(events.clone()),
        Turn::raw_events(events.clone())
            .cut_after(3)
            .with_cut_mode(gyre_testkit::CutMode::Eof),
    ]))
    .await
    .unwrap();
    // Sent as SSE even to a request that asks for a whole message.
    let text = post(&server.url(), &body(false))
        .await
        .text()
        .await
        .unwrap();
    let sent = parse_sse(&text);
    assert_eq!(sent.len(), events.len());
    for ((name, data), event) in sent.iter().zip(&events) {
        assert_eq!(name, event["type"].as_str().unwrap());
        assert_eq!(data, event);
    }
    let text = post(&server.url(), &body(true)).await.text().await.unwrap();
    assert_eq!(parse_sse(&text).len(), 3);
}

#[test]
fn raw_events_file_is_read_next_to_the_script() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("streams")).unwrap();
    std::fs::copy(
        gyre_testkit::corpus::dir().join("mcp.jsonl"),
        dir.path().join("streams/mcp.jsonl"),
    )
    .unwrap();
    let script_path = dir.path().join("script.json");
    std::fs::write(
        &script_path,
        r#"{"turns": [{"raw_events_file": "streams/mcp.jsonl"}]}"#,
    )
    .unwrap();
    let script = Script::from_file(&script_path).unwrap();
    let Turn::Response(turn) = &script.turns[0] else {
        panic!()
    };
    assert_eq!(
        turn.raw_events.as_ref().unwrap()[0]["message"]["id"],
        "msg_corpus_mcp"
    );
    script.validate().unwrap();

    std::fs::write(
        dir.path().join("streams/bad.jsonl"),
        "{\"type\":\"ping\"}\nnope\n",
    )
    .unwrap();
    std::fs::write(
        &script_path,
        r#"{"turns": [{"raw_events_file": "streams/bad.jsonl"}]}"#,
    )
    .unwrap();
    let err = Script::from_file(&script_path).unwrap_err().to_string();
    assert!(err.contains("bad.jsonl:2"), "{err}");

    let both = r#"{"turns": [{"raw_events_file": "x.jsonl", "content": [{"type": "text", "text": "x"}]}]}"#;
    let err = Script::from_json(both).unwrap_err().to_string();
    assert!(err.contains("give only one"), "{err}");
}
