//! Stream files: Messages API streams written out one event per line, to be played with
//! [`Turn::raw_events`](crate::Turn::raw_events).
//!
//! A stream file holds one SSE event's JSON object per line (the `data:` of the event;
//! its `type` names the event), blank lines ignored. The files under
//! `crates/testkit/corpus/` are written by hand from the Messages API streaming
//! reference, one or more per block and delta type (server tools and their results,
//! MCP, citations, compaction, redacted thinking, container uploads, chunking inside
//! strings and escapes); gyre's e2e tests replay every one of them.
//!
//! ```
//! use gyre_testkit::{Script, Turn, corpus};
//!
//! let file = corpus::dir().join("web_search.jsonl");
//! let events = corpus::read_events(&file).unwrap();
//! assert_eq!(events[0]["type"], "message_start");
//! let script = Script::new([Turn::raw_events(events)]);
//! script.validate().unwrap();
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::TestkitError;

/// The directory of the stream files that come with this crate.
#[must_use]
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every `*.jsonl` stream file of [`dir`], sorted by name.
///
/// # Errors
/// [`TestkitError::ReadScript`] when the directory cannot be listed.
pub fn files() -> Result<Vec<PathBuf>, TestkitError> {
    let dir = dir();
    let entries = std::fs::read_dir(&dir).map_err(|error| TestkitError::ReadScript {
        path: dir.clone(),
        error,
    })?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads a stream file: one event object per line.
///
/// # Errors
/// [`TestkitError::ReadScript`] when the file cannot be read, [`TestkitError::ParseEvents`]
/// naming the line that is not a JSON object with a string `type`.
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Value>, TestkitError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|error| TestkitError::ReadScript {
        path: path.to_owned(),
        error,
    })?;
    parse_events(&text).map_err(|(line, message)| TestkitError::ParseEvents {
        path: path.to_owned(),
        line,
        message,
    })
}

/// Parses the text of a stream file; the error is `(line number, what is wrong)`.
///
/// # Errors
/// The first line that is not a JSON object with a string `type`.
pub fn parse_events(text: &str) -> Result<Vec<Value>, (usize, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            let value: Value = serde_json::from_str(line).map_err(|e| (i + 1, e.to_string()))?;
            if value.get("type").and_then(Value::as_str).is_none() {
                return Err((
                    i + 1,
                    "an event must be a JSON object with a string `type`".to_owned(),
                ));
            }
            Ok(value)
        })
        .collect()
}

/// The message a stream's events add up to, as JSON: `id`, `model`, `content`,
/// `stop_reason`, `stop_sequence` and `usage`, the way the Messages API streaming
/// reference says a client assembles them. This is the expected answer the e2e tests
/// hold gyre's assembler to, so it is written separately from it, over plain JSON:
///
/// - a `message_start` repeated with the same id is ignored; unknown events are ignored;
/// - `text_delta`, `thinking_delta`: appended to `text`, `thinking`;
/// - `signature_delta`: sets `signature` (it arrives whole, just before the stop);
/// - `input_json_delta`: joined, and parsed into `input` at `content_block_stop` unless
///   only whitespace was streamed;
/// - `citations_delta`: its `citation` pushed onto `citations`;
/// - `compaction_delta`: `content` appended, `encrypted_content` replaced (non-null values);
/// - any other delta: per field but `type`, a string appended to a string (or absent or
///   `null`) field, any other non-null value replacing the field;
/// - `message_delta`: non-null `stop_reason` / `stop_sequence` replace; each non-null
///   usage field replaces the one of `message_start`.
///
/// # Errors
/// What is wrong with a stream that is not well-formed (a delta for a block that was
/// not started, input that is not JSON, a second message in one stream, …).
pub fn assemble(events: &[Value]) -> Result<Value, String> {
    let mut message: Option<Map<String, Value>> = None;
    let mut blocks: BTreeMap<u64, (Value, String)> = BTreeMap::new();
    for (n, event) in events.iter().enumerate() {
        let index = event.get("index").and_then(Value::as_u64);
        let at = || format!("event {n}");
        match event
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
        {
            "message_start" => {
                let start = event["message"]
                    .as_object()
                    .ok_or_else(|| format!("{}: message_start without a message", at()))?;
                if let Some(message) = &message {
                    if message.get("id") == start.get("id") {
                        continue;
                    }
                    return Err(format!("{}: a second message in one stream", at()));
                }
                for (i, block) in start
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    blocks.insert(i as u64, (block.clone(), String::new()));
                }
                message = Some(start.clone());
            }
            "content_block_start" => {
                let index = index.ok_or_else(|| format!("{}: no index", at()))?;
                blocks.insert(index, (event["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let (block, json) = index
                    .and_then(|i| blocks.get_mut(&i))
                    .ok_or_else(|| format!("{}: delta for a block never started", at()))?;
                let block = block
                    .as_object_mut()
                    .ok_or_else(|| format!("{}: block is not an object", at()))?;
                apply(block, json, &event["delta"]).map_err(|e| format!("{}: {e}", at()))?;
            }
            "content_block_stop" => {
                let (block, json) = index
                    .and_then(|i| blocks.get_mut(&i))
                    .ok_or_else(|| format!("{}: stop for a block never started", at()))?;
                if !json.trim().is_empty() {
                    let input: Value = serde_json::from_str(json)
                        .map_err(|e| format!("{}: input is not JSON ({e}): {json}", at()))?;
                    block["input"] = input;
                    json.clear();
                }
            }
            "message_delta" => {
                let message = message
                    .as_mut()
                    .ok_or_else(|| format!("{}: message_delta before message_start", at()))?;
                for key in ["stop_reason", "stop_sequence"] {
                    if let Some(v) = event["delta"].get(key).filter(|v| !v.is_null()) {
                        message.insert(key.to_owned(), v.clone());
                    }
                }
                if let Some(usage) = event.get("usage").and_then(Value::as_object) {
                    let total = message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    for (key, value) in usage.iter().filter(|(_, v)| !v.is_null()) {
                        total[key.as_str()] = value.clone();
                    }
                }
            }
            _ => {}
        }
    }
    let mut message = message.ok_or("no message_start")?;
    let content = blocks.into_values().map(|(block, _)| block).collect();
    message.insert("content".to_owned(), Value::Array(content));
    Ok(Value::Object(message))
}

fn apply(block: &mut Map<String, Value>, json: &mut String, delta: &Value) -> Result<(), String> {
    let text = |key: &str| delta[key].as_str().unwrap_or_default().to_owned();
    match delta["type"].as_str().unwrap_or_default() {
        "input_json_delta" => json.push_str(&text("partial_json")),
        "text_delta" => append(block, "text", &text("text")),
        "thinking_delta" => append(block, "thinking", &text("thinking")),
        "signature_delta" => {
            block.insert("signature".to_owned(), Value::String(text("signature")));
        }
        "citations_delta" => {
            let list = block
                .entry("citations")
                .or_insert_with(|| Value::Array(Vec::new()));
            if list.is_null() {
                *list = Value::Array(Vec::new());
            }
            list.as_array_mut()
                .ok_or("citations is not a list")?
                .push(delta["citation"].clone());
        }
        "compaction_delta" => {
            if let Some(more) = delta["content"].as_str() {
                append(block, "content", more);
            }
            if !delta["encrypted_content"].is_null() {
                block.insert(
                    "encrypted_content".to_owned(),
                    delta["encrypted_content"].clone(),
                );
            }
        }
        _ => {
            let fields = delta.as_object().ok_or("delta is not an object")?;
            for (key, value) in fields.iter().filter(|(k, _)| *k != "type") {
                match value {
                    Value::Null => {}
                    Value::String(more) => append(block, key, more),
                    other => {
                        block.insert(key.clone(), other.clone());
                    }
                }
            }
        }
    }
    Ok(())
}

fn append(block: &mut Map<String, Value>, key: &str, more: &str) {
    let joined = match block.get(key) {
        Some(Value::String(s)) => format!("{s}{more}"),
        _ => more.to_owned(),
    };
    block.insert(key.to_owned(), Value::String(joined));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_an_event_is_named() {
        let err = parse_events("{\"type\":\"ping\"}\n\n[1]\n").unwrap_err();
        assert_eq!(err.0, 3);
        assert!(err.1.contains("string `type`"), "{}", err.1);
        assert_eq!(parse_events("{oops").unwrap_err().0, 1);
    }

    #[test]
    fn every_corpus_file_is_a_well_formed_stream() {
        let files = files().unwrap();
        assert!(files.len() >= 12, "{files:?}");
        for file in files {
            let events = read_events(&file).unwrap();
            let message = assemble(&events).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            assert!(message["stop_reason"].is_string(), "{}", file.display());
            assert!(!message["content"].as_array().unwrap().is_empty());
        }
    }

    #[test]
    fn the_reference_assembly_joins_input_and_merges_deltas() {
        let events = parse_events(
            r#"{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}
{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{}}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"q\": \"a\\"}}
{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"b\"}"}}
{"type":"content_block_stop","index":0}
{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}
{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"n":1}}}
{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}
{"type":"content_block_stop","index":1}
{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9,"input_tokens":7}}
{"type":"message_stop"}"#,
        )
        .unwrap();
        let message = assemble(&events).unwrap();
        assert_eq!(
            message["content"][0]["input"],
            serde_json::json!({"q": "a\"b"})
        );
        assert_eq!(
            message["content"][1]["citations"],
            serde_json::json!([{"n": 1}])
        );
        assert_eq!(message["content"][1]["text"], "hi");
        assert_eq!(
            message["usage"],
            serde_json::json!({"input_tokens": 7, "output_tokens": 9})
        );
    }
}
