//! Serde round trips on realistic Messages API payloads.

use gyre_protocol::{
    AssistantResponse, CacheControl, CacheCreation, ContentBlock, ContentDelta, ErrorResponse,
    ExtraFields, Message, MessagesRequest, Role, ServerToolUsage, StopReason, StreamEvent,
    SystemBlock, ToolDefinition, ToolResultContent, Usage, UsageDelta,
};
use serde_json::{Value, json};

/// A full stream: text, thinking with signature, and two tool_use blocks.
const STREAM: &[&str] = &[
    r#"{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":0,"cache_read_input_tokens":1024,"output_tokens":1,"service_tier":"standard"}}}"#,
    r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me read both files."}}"#,
    r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3h"}}"#,
    r#"{"type":"content_block_stop","index":0}"#,
    r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"I'll read "}}"#,
    r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"them."}}"#,
    r#"{"type":"content_block_stop","index":1}"#,
    r#"{"type":"ping"}"#,
    r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A","name":"Read","input":{}}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/tmp/a"}}"#,
    r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":".txt\"}"}}"#,
    r#"{"type":"content_block_stop","index":2}"#,
    r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_01B","name":"Read","input":{}}}"#,
    r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"file_path\": \"/tmp/b.txt\"}"}}"#,
    r#"{"type":"content_block_stop","index":3}"#,
    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
    r#"{"type":"message_stop"}"#,
];

#[test]
fn every_event_of_a_full_stream_parses_and_round_trips() {
    for line in STREAM {
        let event: StreamEvent = serde_json::from_str(line).unwrap();
        assert_ne!(event, StreamEvent::Unknown, "{line}");
        let back = serde_json::to_string(&event).unwrap();
        let again: StreamEvent = serde_json::from_str(&back).unwrap();
        assert_eq!(event, again);
    }
}

#[test]
fn stream_events_carry_the_fields_gyre_reads() {
    let start: StreamEvent = serde_json::from_str(STREAM[0]).unwrap();
    let StreamEvent::MessageStart { message } = start else {
        panic!("not message_start")
    };
    assert_eq!(message.id, "msg_01");
    assert_eq!(message.usage.cache_read_input_tokens, 1024);
    assert_eq!(message.usage.input_tokens, 472);

    let sig: StreamEvent = serde_json::from_str(STREAM[3]).unwrap();
    assert_eq!(
        sig,
        StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::SignatureDelta {
                signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h".into()
            }
        }
    );
    let tool: StreamEvent = serde_json::from_str(STREAM[10]).unwrap();
    let StreamEvent::ContentBlockStart { content_block, .. } = tool else {
        panic!("not a block start")
    };
    assert_eq!(content_block.as_tool_use().map(|t| t.0), Some("toolu_01A"));

    let delta: StreamEvent = serde_json::from_str(STREAM[17]).unwrap();
    let StreamEvent::MessageDelta { delta, usage, .. } = delta else {
        panic!("not message_delta")
    };
    assert_eq!(delta.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(usage.output_tokens, Some(89));
}

#[test]
fn message_level_fields_gyre_does_not_read_round_trip() {
    let lines = [
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","container":{"id":"container_1","expires_at":"2026-12-01T14:00:00Z"},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"cyber","explanation":null}},"usage":{"output_tokens":9}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"compaction","stop_sequence":null},"context_management":{"applied_edits":[]},"usage":{"output_tokens":9}}"#,
    ];
    for line in lines {
        let event: StreamEvent = serde_json::from_str(line).unwrap();
        let sent: Value = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_value(&event).unwrap(), sent, "{line}");
    }
    let StreamEvent::MessageStart { message } = serde_json::from_str(lines[0]).unwrap() else {
        panic!("not message_start")
    };
    assert_eq!(message.extra["container"]["id"], "container_1");
    assert_eq!(message.extra["type"], "message");
    let StreamEvent::MessageDelta { delta, extra, .. } = serde_json::from_str(lines[2]).unwrap()
    else {
        panic!("not message_delta")
    };
    assert_eq!(
        delta.stop_reason,
        Some(StopReason::Other("compaction".into()))
    );
    assert_eq!(extra["context_management"], json!({"applied_edits": []}));
    assert!(!extra.contains_key("type"), "the tag is not an extra field");
}

#[test]
fn unknown_event_types_are_tolerated_and_unknown_deltas_kept() {
    let e: StreamEvent =
        serde_json::from_str(r#"{"type":"brand_new_event","payload":{"x":1}}"#).unwrap();
    assert_eq!(e, StreamEvent::Unknown);
    let d: StreamEvent = serde_json::from_str(
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{"type":"char_location"}}}"#,
    )
    .unwrap();
    assert_eq!(
        d,
        StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::CitationsDelta {
                citation: json!({"type": "char_location"})
            }
        }
    );
    let raw = json!({"type":"compaction_delta","content":"Summary","encrypted_content":"e"});
    let d: ContentDelta = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(d, ContentDelta::Other(raw.clone()));
    assert_eq!(d.kind(), "compaction_delta");
    assert_eq!(serde_json::to_value(&d).unwrap(), raw);
}

#[test]
fn fields_of_known_blocks_that_are_not_modelled_round_trip() {
    let raw = json!({"type":"text","text":"Rust is fast.","citations":[
        {"type":"web_search_result_location","url":"https://example.com","title":"E",
         "encrypted_index":"Eo8B","cited_text":"Rust is fast"}]});
    let block: ContentBlock = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(block.kind(), "text");
    let ContentBlock::Text { text, extra, .. } = &block else {
        panic!("not text: {block:?}")
    };
    assert_eq!(text, "Rust is fast.");
    assert_eq!(extra.len(), 1, "only `citations` is extra: {extra:?}");
    assert_eq!(serde_json::to_value(&block).unwrap(), raw);
    let tool =
        json!({"type":"tool_use","id":"t","name":"Read","input":{},"caller":{"type":"direct"}});
    let block: ContentBlock = serde_json::from_value(tool.clone()).unwrap();
    assert_eq!(serde_json::to_value(&block).unwrap(), tool);
}

#[test]
fn unknown_content_blocks_are_kept_verbatim() {
    let raw = json!({"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"rust"}});
    let block: ContentBlock = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(block.kind(), "server_tool_use");
    assert_eq!(serde_json::to_value(&block).unwrap(), raw);
}

#[test]
fn unknown_message_fields_are_ignored_and_unknown_block_fields_kept() {
    let msg: Message = serde_json::from_str(
        r#"{"role":"assistant","content":[{"type":"text","text":"hi","citations":null,"extra":1}],"future":true}"#,
    )
    .unwrap();
    assert_eq!(msg.content.len(), 1);
    assert_eq!(msg.text(), "hi");
    assert_eq!(
        serde_json::to_value(&msg).unwrap(),
        json!({"role":"assistant","content":[{"type":"text","text":"hi","citations":null,"extra":1}]})
    );
}

#[test]
fn error_bodies_parse() {
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}"#;
    let err: ErrorResponse = serde_json::from_str(body).unwrap();
    assert_eq!(err.error.kind, "overloaded_error");
    assert_eq!(err.error.message, "Overloaded");
    assert_eq!(err.request_id.as_deref(), Some("req_011"));

    let in_stream: StreamEvent = serde_json::from_str(
        r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
    )
    .unwrap();
    assert!(matches!(in_stream, StreamEvent::Error { error } if error.kind == "api_error"));
}

#[test]
fn a_conversation_with_every_block_kind_round_trips() {
    let messages = vec![
        Message::user_text("Read a.txt"),
        Message::assistant(vec![
            ContentBlock::thinking("plan", "sig=="),
            ContentBlock::redacted_thinking("opaque"),
            ContentBlock::text("Reading."),
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Read".into(),
                input: json!({"file_path": "/a.txt"}),
                cache_control: Some(CacheControl::ephemeral()),
                extra: ExtraFields::new(),
            },
        ]),
        Message::user(vec![
            ContentBlock::tool_result("toolu_1", "1\tfirst line", false),
            ContentBlock::Image {
                source: gyre_protocol::ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgo=".into(),
                },
                cache_control: Some(CacheControl::ephemeral()),
            },
        ]),
        Message::user(vec![
            ContentBlock::tool_result(
                "toolu_2",
                ToolResultContent::Parts(vec![gyre_protocol::ToolResultPart::Text {
                    text: "boom".into(),
                }]),
                true,
            ),
            ContentBlock::Text {
                text: "and then".into(),
                cache_control: Some(CacheControl::ephemeral()),
                extra: ExtraFields::new(),
            },
            ContentBlock::ToolResult {
                tool_use_id: "toolu_3".into(),
                content: "marked".into(),
                is_error: false,
                cache_control: Some(CacheControl::ephemeral()),
            },
        ]),
    ];
    let json = serde_json::to_string(&messages).unwrap();
    let back: Vec<Message> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, messages);
    // is_error is written only when true, as the API does.
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(v[2]["content"][0].get("is_error").is_none());
    assert_eq!(v[3]["content"][0]["is_error"], true);
}

#[test]
fn a_cloned_tool_result_shares_its_text() {
    // What keeps a long history cheap to copy and to compare for every request.
    let block = ContentBlock::tool_result("toolu_1", "x".repeat(10_000), false);
    let copy = block.clone();
    match (&block, &copy) {
        (
            ContentBlock::ToolResult {
                content: ToolResultContent::Text(a),
                ..
            },
            ContentBlock::ToolResult {
                content: ToolResultContent::Text(b),
                ..
            },
        ) => assert!(std::sync::Arc::ptr_eq(a, b)),
        other => panic!("not two text tool results: {other:?}"),
    }
    assert_eq!(copy, block);
}

#[test]
fn string_content_reads_as_one_text_block() {
    let msg: Message = serde_json::from_str(r#"{"role":"user","content":"hello"}"#).unwrap();
    assert_eq!(msg.role, Role::User);
    assert_eq!(msg.text(), "hello");
}

#[test]
fn request_body_serializes_like_the_api_expects() {
    let mut req = MessagesRequest::new("claude-sonnet-4-5", 8192, vec![Message::user_text("hi")]);
    let mut system = SystemBlock::text("You are gyre.");
    system.cache_control = Some(CacheControl::ephemeral());
    req.system = vec![system];
    req.tools = vec![ToolDefinition {
        name: "Read".into(),
        description: "Reads a file".into(),
        input_schema: json!({"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}),
        cache_control: None,
        kind: None,
        options: serde_json::Map::new(),
    }];
    let v = serde_json::to_value(&req).unwrap();
    assert_eq!(v["stream"], true);
    assert_eq!(v["system"][0]["cache_control"]["type"], "ephemeral");
    assert!(v["tools"][0].get("cache_control").is_none());
    assert!(v.get("metadata").is_none());
    let back: MessagesRequest = serde_json::from_value(v).unwrap();
    assert_eq!(back, req);
}

#[test]
fn stop_reasons_round_trip_and_unknown_ones_are_kept() {
    for (s, r) in [
        ("end_turn", StopReason::EndTurn),
        ("tool_use", StopReason::ToolUse),
        ("max_tokens", StopReason::MaxTokens),
        ("stop_sequence", StopReason::StopSequence),
        ("pause_turn", StopReason::PauseTurn),
        ("refusal", StopReason::Refusal),
        (
            "model_context_window_exceeded",
            StopReason::ModelContextWindowExceeded,
        ),
    ] {
        let parsed: StopReason = serde_json::from_value(json!(s)).unwrap();
        assert_eq!(parsed, r);
        assert_eq!(serde_json::to_value(&r).unwrap(), json!(s));
    }
    let other: StopReason = serde_json::from_value(json!("new_reason")).unwrap();
    assert_eq!(other, StopReason::Other("new_reason".into()));
    assert_eq!(serde_json::to_value(&other).unwrap(), json!("new_reason"));
}

#[test]
fn usage_tolerates_nulls_and_merges_cumulative_deltas() {
    let mut usage: Usage = serde_json::from_str(
        r#"{"input_tokens":100,"output_tokens":1,"cache_read_input_tokens":null}"#,
    )
    .unwrap();
    assert_eq!(usage.cache_read_input_tokens, 0);
    usage.merge_delta(&UsageDelta {
        output_tokens: Some(42),
        ..UsageDelta::default()
    });
    assert_eq!(usage.input_tokens, 100);
    assert_eq!(usage.output_tokens, 42);
    assert_eq!(usage.context_tokens(), 142);
}

#[test]
fn message_delta_usage_replaces_the_fields_it_carries_zero_included() {
    let mut usage: Usage = serde_json::from_str(
        r#"{"input_tokens":100,"output_tokens":1,"cache_read_input_tokens":7,"cache_creation_input_tokens":3}"#,
    )
    .unwrap();
    let delta: UsageDelta = serde_json::from_str(
        r#"{"input_tokens":120,"cache_read_input_tokens":0,"output_tokens":50,
            "server_tool_use":{"web_search_requests":2,"web_fetch_requests":1}}"#,
    )
    .unwrap();
    usage.merge_delta(&delta);
    assert_eq!(
        usage,
        Usage {
            input_tokens: 120,
            output_tokens: 50,
            cache_creation_input_tokens: 3,
            cache_read_input_tokens: 0,
            server_tool_use: ServerToolUsage {
                web_search_requests: 2,
                web_fetch_requests: 1
            },
            cache_creation: CacheCreation::default(),
        }
    );
    let json = serde_json::to_value(usage).unwrap();
    assert_eq!(json["server_tool_use"]["web_search_requests"], 2);
    // Without server tools the field is left out, as before.
    let plain = serde_json::to_value(Usage::default()).unwrap();
    assert!(plain.get("server_tool_use").is_none(), "{plain}");
    let mut total = usage;
    total.add(&usage);
    assert_eq!(total.server_tool_use.web_search_requests, 4);
}

#[test]
fn the_cache_write_breakdown_is_kept_summed_and_left_out_when_absent() {
    let mut usage: Usage = serde_json::from_str(
        r#"{"input_tokens":50,"output_tokens":1,"cache_creation_input_tokens":3000,
            "cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000},
            "service_tier":"priority","inference_geo":"us"}"#,
    )
    .unwrap();
    assert_eq!(
        usage.cache_creation,
        CacheCreation {
            ephemeral_5m_input_tokens: 1000,
            ephemeral_1h_input_tokens: 2000,
        }
    );
    // message_delta does not carry it today; if it does, the later value wins.
    usage.merge_delta(&serde_json::from_str(r#"{"output_tokens":9}"#).unwrap());
    assert_eq!(usage.cache_creation.ephemeral_1h_input_tokens, 2000);
    usage.merge_delta(
        &serde_json::from_str(
            r#"{"output_tokens":9,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":2500}}"#,
        )
        .unwrap(),
    );
    assert_eq!(usage.cache_creation.ephemeral_1h_input_tokens, 2500);
    assert_eq!(usage.cache_creation.ephemeral_5m_input_tokens, 0);
    let mut total = usage;
    total.add(&usage);
    assert_eq!(total.cache_creation.ephemeral_1h_input_tokens, 5000);
    let json = serde_json::to_value(usage).unwrap();
    assert_eq!(json["cache_creation"]["ephemeral_1h_input_tokens"], 2500);
    let null: Usage =
        serde_json::from_str(r#"{"input_tokens":1,"output_tokens":1,"cache_creation":null}"#)
            .unwrap();
    assert!(
        serde_json::to_value(null)
            .unwrap()
            .get("cache_creation")
            .is_none()
    );
}

#[test]
fn non_streaming_response_parses() {
    let resp: AssistantResponse = serde_json::from_str(
        r#"{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}"#,
    )
    .unwrap();
    assert_eq!(resp.to_message().text(), "done");
    assert_eq!(resp.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn a_server_tool_serializes_as_its_type_name_and_options_only() {
    let mut options = serde_json::Map::new();
    options.insert("max_uses".into(), json!(5));
    options.insert("allowed_domains".into(), json!(["docs.rs"]));
    let def = ToolDefinition::server("web_search_20250305", "web_search", options);
    let v = serde_json::to_value(&def).unwrap();
    assert_eq!(
        v,
        json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 5, "allowed_domains": ["docs.rs"]})
    );
    assert_eq!(serde_json::from_value::<ToolDefinition>(v).unwrap(), def);
    let client = ToolDefinition::client("Read", "Reads", json!({"type": "object"}));
    let v = serde_json::to_value(&client).unwrap();
    assert_eq!(
        v,
        json!({"name": "Read", "description": "Reads", "input_schema": {"type": "object"}})
    );
}
