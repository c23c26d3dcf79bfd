//! Any stream the assembler accepts assembles to the same message whatever the chunking
//! of its deltas (issue 17): text, thinking, tool and server-tool input and compaction
//! summaries cut into pieces give the message the whole deltas give.
//!
//! The first byte seeds the piece sizes (1–8 characters, cycling); the rest is a stream
//! file, one event's JSON a line, like gyre-testkit's corpus (the seeds are that corpus).
#![no_main]

use gyre_api::{Assembled, MessageAssembler};
use gyre_protocol::{AssistantResponse, StreamEvent};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};

fn assemble(events: &[Value]) -> Option<AssistantResponse> {
    let mut assembler = MessageAssembler::new();
    for event in events {
        let event: StreamEvent = serde_json::from_value(event.clone()).ok()?;
        match assembler.push(&event) {
            Ok(Some(Assembled::Message(message))) => return Some(message),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// The field of a delta whose text is appended piece by piece.
fn streamed_field(kind: &str) -> Option<&'static str> {
    match kind {
        "text_delta" => Some("text"),
        "thinking_delta" => Some("thinking"),
        "input_json_delta" => Some("partial_json"),
        "compaction_delta" => Some("content"),
        _ => None,
    }
}

/// The events with every streamed delta cut into pieces. Each piece but the last holds
/// only the delta's type and its piece of text; the last is the original delta with the
/// last piece, so fields that are replaced, not appended (a compaction's
/// `encrypted_content`), arrive once.
fn rechunk(events: &[Value], seed: u8) -> Vec<Value> {
    let mut size = usize::from(seed % 8) + 1;
    let mut out = Vec::with_capacity(events.len());
    for event in events {
        let kind = event["delta"]["type"].as_str().unwrap_or_default();
        let field = streamed_field(kind);
        let text = field.and_then(|f| event["delta"][f].as_str());
        let (Some(field), Some(text)) = (field, text) else {
            out.push(event.clone());
            continue;
        };
        let chars: Vec<char> = text.chars().collect();
        let mut at = 0;
        while at + size < chars.len() {
            let mut delta = Map::new();
            delta.insert("type".to_owned(), Value::String(kind.to_owned()));
            delta.insert(
                field.to_owned(),
                Value::String(chars[at..at + size].iter().collect()),
            );
            let mut piece = event.clone();
            piece["delta"] = Value::Object(delta);
            out.push(piece);
            at += size;
            size = size % 8 + 1;
        }
        let mut last = event.clone();
        last["delta"][field] = Value::String(chars[at..].iter().collect());
        out.push(last);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let Some(whole) = assemble(&events) else {
        return;
    };
    let chunked = assemble(&rechunk(&events, seed));
    assert_eq!(chunked.as_ref(), Some(&whole), "rechunked with seed {seed}");
});
