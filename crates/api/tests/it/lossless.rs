//! Every stream of gyre-testkit's corpus assembles to what the streaming reference says,
//! and any well-formed stream assembles to the same message whatever the chunking of
//! its deltas.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use gyre_api::{Assembled, MessageAssembler};
use gyre_protocol::{AssistantResponse, StreamEvent};
use gyre_testkit::corpus;
use proptest::prelude::*;
use serde_json::{Value, json};

fn assemble(events: &[Value]) -> Result<AssistantResponse, String> {
    let mut assembler = MessageAssembler::new();
    for event in events {
        let event: StreamEvent =
            serde_json::from_value(event.clone()).map_err(|e| e.to_string())?;
        if let Some(Assembled::Message(m)) = assembler.push(&event).map_err(|e| e.to_string())? {
            return Ok(m);
        }
    }
    Err("no message_stop".into())
}

/// The usage fields gyre models, from the reference assembly's usage object.
fn modelled_usage(usage: &Value) -> Value {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    json!({
        "input_tokens": n(&usage["input_tokens"]),
        "output_tokens": n(&usage["output_tokens"]),
        "cache_creation_input_tokens": n(&usage["cache_creation_input_tokens"]),
        "cache_read_input_tokens": n(&usage["cache_read_input_tokens"]),
        "web_search_requests": n(&usage["server_tool_use"]["web_search_requests"]),
        "web_fetch_requests": n(&usage["server_tool_use"]["web_fetch_requests"]),
        "ephemeral_5m_input_tokens": n(&usage["cache_creation"]["ephemeral_5m_input_tokens"]),
        "ephemeral_1h_input_tokens": n(&usage["cache_creation"]["ephemeral_1h_input_tokens"]),
    })
}

#[test]
fn every_corpus_stream_assembles_like_the_reference() {
    let files = corpus::files().unwrap();
    assert!(files.len() >= 12);
    for file in files {
        let name = file.display();
        let events = corpus::read_events(&file).unwrap();
        let expected = corpus::assemble(&events).unwrap();
        let got = assemble(&events).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            serde_json::to_value(&got.content).unwrap(),
            expected["content"],
            "{name}"
        );
        assert_eq!(got.id, expected["id"], "{name}");
        assert_eq!(
            serde_json::to_value(&got.stop_reason).unwrap(),
            expected["stop_reason"],
            "{name}"
        );
        let u = got.usage;
        assert_eq!(
            json!({
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cache_creation_input_tokens": u.cache_creation_input_tokens,
                "cache_read_input_tokens": u.cache_read_input_tokens,
                "web_search_requests": u.server_tool_use.web_search_requests,
                "web_fetch_requests": u.server_tool_use.web_fetch_requests,
                "ephemeral_5m_input_tokens": u.cache_creation.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": u.cache_creation.ephemeral_1h_input_tokens,
            }),
            modelled_usage(&expected["usage"]),
            "{name}"
        );
    }
}

#[test]
fn server_tool_input_is_assembled_not_left_empty() {
    let events = corpus::read_events(corpus::dir().join("web_search.jsonl")).unwrap();
    let got = assemble(&events).unwrap();
    let block = serde_json::to_value(&got.content[1]).unwrap();
    assert_eq!(block["type"], "server_tool_use");
    assert_eq!(block["input"]["query"], "rust \"async\" 日本語 é\n🦀");
    assert_eq!(
        got.usage.input_tokens, 2400,
        "message_delta's input_tokens wins"
    );
    assert_eq!(got.usage.server_tool_use.web_search_requests, 1);
}

#[test]
fn a_message_start_for_another_message_is_still_an_error() {
    let mut events = corpus::read_events(corpus::dir().join("mcp.jsonl")).unwrap();
    let mut other = events[0].clone();
    other["message"]["id"] = json!("msg_someone_else");
    events.insert(3, other);
    let err = assemble(&events).unwrap_err();
    assert!(err.contains("msg_someone_else"), "{err}");
}

/// A block to stream: what it must assemble to, and the deltas that carry it.
#[derive(Debug, Clone)]
enum Spec {
    Text(String),
    Thinking(String, String),
    ServerTool(Vec<(String, String)>),
    Future(String),
    /// Text with citations streamed between its pieces.
    Cited(String, Vec<String>),
    /// A compaction summary and its opaque encrypted content.
    Compaction(String, String),
}

fn text() -> impl Strategy<Value = String> {
    "[a-z \"\\\\/é日本🦀\n\t{}\\[\\]:,]{0,24}"
}

fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        text().prop_map(Spec::Text),
        (text(), "[A-Za-z0-9+/=]{0,16}").prop_map(|(t, s)| Spec::Thinking(t, s)),
        proptest::collection::vec(("[a-z_]{1,6}", text()), 0..4).prop_map(Spec::ServerTool),
        text().prop_map(Spec::Future),
        (text(), proptest::collection::vec(text(), 1..4)).prop_map(|(t, c)| Spec::Cited(t, c)),
        (text(), "[A-Za-z0-9+/=]{1,16}").prop_map(|(t, e)| Spec::Compaction(t, e)),
    ]
}

/// Splits `s` into pieces of the given sizes in characters (cycled), never inside one.
fn split(s: &str, sizes: &[usize], next: &mut usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let n = sizes[*next % sizes.len()].max(1);
        *next += 1;
        let end = (at + n).min(chars.len());
        out.push(chars[at..end].iter().collect());
        at = end;
    }
    out
}

/// The events of a message made of `specs`, each delta cut into pieces of `sizes`;
/// also the content it must assemble to.
fn stream(specs: &[Spec], sizes: &[usize]) -> (Vec<Value>, Value) {
    let mut next = 0;
    let mut events = vec![
        json!({"type":"message_start","message":{"id":"msg_p","content":[],"usage":{"input_tokens":3}}}),
    ];
    let mut content = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        let delta = |d: Value| json!({"type":"content_block_delta","index":index,"delta":d});
        match spec {
            Spec::Text(t) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}));
                for piece in split(t, sizes, &mut next) {
                    events.push(delta(json!({"type":"text_delta","text":piece})));
                }
                content.push(json!({"type":"text","text":t}));
            }
            Spec::Thinking(t, sig) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"thinking","thinking":"","signature":""}}));
                for piece in split(t, sizes, &mut next) {
                    events.push(delta(json!({"type":"thinking_delta","thinking":piece})));
                }
                events.push(delta(json!({"type":"signature_delta","signature":sig})));
                content.push(json!({"type":"thinking","thinking":t,"signature":sig}));
            }
            Spec::ServerTool(fields) => {
                let input: serde_json::Map<String, Value> = fields
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                let input = Value::Object(input);
                let id = format!("srvtoolu_{index}");
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"server_tool_use","id":id,"name":"web_search","input":{}}}));
                events.push(delta(json!({"type":"input_json_delta","partial_json":""})));
                for piece in split(&input.to_string(), sizes, &mut next) {
                    events.push(delta(
                        json!({"type":"input_json_delta","partial_json":piece}),
                    ));
                }
                content.push(
                    json!({"type":"server_tool_use","id":id,"name":"web_search","input":input}),
                );
            }
            Spec::Future(t) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"future_block","body":null}}));
                for piece in split(t, sizes, &mut next) {
                    events.push(delta(json!({"type":"future_delta","body":piece})));
                }
                let body = if t.is_empty() { Value::Null } else { json!(t) };
                content.push(json!({"type":"future_block","body":body}));
            }
            Spec::Cited(t, cited) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"text","text":""}}));
                let citations: Vec<Value> = cited
                    .iter()
                    .map(|c| json!({"type":"char_location","cited_text":c,"document_index":0,"start_char_index":0,"end_char_index":c.chars().count()}))
                    .collect();
                let pieces = split(t, sizes, &mut next);
                // Citation i goes before text piece i; those left over, after the text.
                for i in 0..pieces.len().max(citations.len()) {
                    if let Some(c) = citations.get(i) {
                        events.push(delta(json!({"type":"citations_delta","citation":c})));
                    }
                    if let Some(p) = pieces.get(i) {
                        events.push(delta(json!({"type":"text_delta","text":p})));
                    }
                }
                content.push(json!({"type":"text","text":t,"citations":citations}));
            }
            Spec::Compaction(t, encrypted) => {
                events.push(json!({"type":"content_block_start","index":index,"content_block":{"type":"compaction","content":null,"encrypted_content":null}}));
                for piece in split(t, sizes, &mut next) {
                    events.push(delta(
                        json!({"type":"compaction_delta","content":piece,"encrypted_content":null}),
                    ));
                }
                events.push(delta(
                    json!({"type":"compaction_delta","content":null,"encrypted_content":encrypted}),
                ));
                let summary = if t.is_empty() { Value::Null } else { json!(t) };
                content.push(
                    json!({"type":"compaction","content":summary,"encrypted_content":encrypted}),
                );
            }
        }
        events.push(json!({"type":"content_block_stop","index":index}));
        if next % 3 == 0 {
            events.push(json!({"type":"ping"}));
        }
    }
    events.push(json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}));
    events.push(json!({"type":"message_stop"}));
    (events, Value::Array(content))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_assembles_to_the_same_message(
        specs in proptest::collection::vec(spec(), 1..6),
        sizes in proptest::collection::vec(1usize..9, 1..8),
    ) {
        let (events, content) = stream(&specs, &sizes);
        let got = assemble(&events).unwrap();
        prop_assert_eq!(&serde_json::to_value(&got.content).unwrap(), &content);
        // The same message streamed in one delta per block.
        let (whole, _) = stream(&specs, &[usize::MAX]);
        prop_assert_eq!(assemble(&whole).unwrap(), got.clone());
        // And the reference assembly agrees.
        prop_assert_eq!(&corpus::assemble(&events).unwrap()["content"], &content);
    }

    #[test]
    fn any_chunking_of_a_corpus_stream_assembles_to_the_same_message(
        file in 0usize..64,
        sizes in proptest::collection::vec(1usize..7, 1..8),
    ) {
        let files = corpus::files().unwrap();
        let events = corpus::read_events(&files[file % files.len()]).unwrap();
        let whole = assemble(&events).unwrap();
        let mut next = 0;
        let mut chunked = Vec::new();
        for event in events {
            let kind = event["delta"]["type"].as_str().unwrap_or_default().to_owned();
            let field = match kind.as_str() {
                "text_delta" => "text",
                "thinking_delta" => "thinking",
                "input_json_delta" => "partial_json",
                // Its summary streams; its encrypted_content is replaced, not appended:
                // the last piece carries it.
                "compaction_delta" => "content",
                _ => {
                    chunked.push(event);
                    continue;
                }
            };
            let Some(s) = event["delta"][field].as_str().map(str::to_owned) else {
                chunked.push(event);
                continue;
            };
            let pieces = split(&s, &sizes, &mut next);
            if pieces.is_empty() {
                chunked.push(event);
                continue;
            }
            let last = pieces.len() - 1;
            for (i, piece) in pieces.into_iter().enumerate() {
                let mut e = event.clone();
                e["delta"][field] = json!(piece);
                if i != last && kind == "compaction_delta" {
                    e["delta"]["encrypted_content"] = Value::Null;
                }
                chunked.push(e);
            }
        }
        prop_assert_eq!(assemble(&chunked).unwrap(), whole);
    }
}
