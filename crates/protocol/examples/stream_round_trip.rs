//! Reading a Messages API stream with gyre-protocol's types, and writing it back.
//!
//! The events are the `data:` lines of a streamed answer that used the API's web search
//! (a server tool): gyre models the blocks it reads (text, tool calls, thinking) and
//! keeps the others (`server_tool_use`, `web_search_tool_result`) verbatim, so a
//! history written back is what the API sent.
//!
//! Run it with `cargo run -p gyre-protocol --example stream_round_trip`.

use gyre_protocol::{ContentBlock, ContentDelta, StreamEvent};
use serde_json::Value;

const STREAM: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}
{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"rust 2024 edition"}}}
{"type":"content_block_stop","index":0}
{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.com/","title":"Rust 2024","encrypted_content":"e1"}]}}
{"type":"content_block_stop","index":1}
{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}
{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"It shipped with Rust 1.85."}}
{"type":"content_block_stop","index":2}
{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":30,"server_tool_use":{"web_search_requests":1}}}
{"type":"ping"}
{"type":"message_stop"}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut text = String::new();
    let mut kept = 0;
    for line in STREAM.lines() {
        let event: StreamEvent = serde_json::from_str(line)?;
        match &event {
            StreamEvent::ContentBlockStart {
                content_block: ContentBlock::Unknown(block),
                ..
            } => {
                kept += 1;
                println!("kept as sent: a {} block", block["type"]);
            }
            StreamEvent::ContentBlockDelta {
                delta: ContentDelta::TextDelta { text: more },
                ..
            } => text.push_str(more),
            StreamEvent::MessageDelta { usage, .. } => {
                println!("usage update: {usage:?}");
            }
            _ => {}
        }
        // Every event writes back to the JSON it came from (what gyre knows of it).
        let again: Value = serde_json::to_value(&event)?;
        let sent: Value = serde_json::from_str(line)?;
        if let StreamEvent::ContentBlockStart { .. } = event {
            assert_eq!(again, sent, "a block start round-trips whole");
        }
    }
    println!("text: {text}");
    assert_eq!(kept, 2);
    assert_eq!(text, "It shipped with Rust 1.85.");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
