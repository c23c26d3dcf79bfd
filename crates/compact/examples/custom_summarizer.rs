//! Compacting a conversation with your own `Summarizer`, no model and no async runtime.
//!
//! The summarizer here is a plain function of the messages: it lists what the user asked
//! and which files the agent read. A real one sends `SummaryRequest::to_messages()` to a
//! model. The example compacts a history of tool rounds on request (`/compact`), then
//! shows that the new history keeps every `tool_use` with its `tool_result`.
//!
//! Run it with `cargo run -p gyre-compact --example custom_summarizer`.

use std::sync::Arc;

use futures::future::BoxFuture;
use gyre_compact::{
    CompactConfig, Pipeline, PrepareContext, SummarizeError, Summarizer, SummaryRequest,
    TiktokenCounter, Trigger, check_pairing, is_compact_boundary,
};
use gyre_protocol::{ContentBlock, Message, Role};
use serde_json::json;

/// Summarises by listing the user's requests and the files the agent read.
struct Inventory;

impl Summarizer for Inventory {
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        Box::pin(async move {
            let mut asked = Vec::new();
            let mut read = Vec::new();
            for message in &request.messages {
                if message.role == Role::User && !message.is_tool_result_message() {
                    asked.push(message.text());
                }
                for (_, name, input) in message.tool_uses() {
                    if name == "Read" {
                        read.push(input["file_path"].as_str().unwrap_or("?").to_owned());
                    }
                }
            }
            if asked.is_empty() {
                return Err(SummarizeError::new("nothing the user asked"));
            }
            // Only what is inside <summary> is kept; <analysis> is the model's scratch pad.
            Ok(format!(
                "<analysis>{} messages</analysis><summary>1. Primary Request and Intent: {}\n\
                 3. Files and Code Sections: {}</summary>",
                request.messages.len(),
                asked.join("; "),
                read.join(", ")
            ))
        })
    }
}

/// A conversation of `rounds` tool rounds: the agent reads a file and comments on it.
fn history(rounds: usize) -> Vec<Message> {
    let mut messages = vec![Message::user_text("Review the parser, one file at a time.")];
    for i in 0..rounds {
        let id = format!("toolu_{i}");
        let path = format!("/src/parser/part_{i}.rs");
        messages.push(Message::assistant(vec![
            ContentBlock::text(format!("Reading part {i}.")),
            ContentBlock::tool_use(&id, "Read", json!({ "file_path": path })),
        ]));
        messages.push(Message::user(vec![ContentBlock::tool_result(
            &id,
            "fn parse() {}\n".repeat(200),
            false,
        )]));
        messages.push(Message::assistant(vec![ContentBlock::text(format!(
            "Part {i} looks fine."
        ))]));
        messages.push(Message::user_text(format!("Go on with part {}.", i + 1)));
    }
    messages
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let history = history(12);
    let config = CompactConfig::new("claude-sonnet-4-5", 8_000);
    let mut pipeline = Pipeline::new(config, Arc::new(Inventory), Arc::new(TiktokenCounter));
    let ctx = PrepareContext {
        compact_instructions: Some("Keep the file names.".to_owned()),
        ..PrepareContext::default()
    };

    let prepared =
        futures::executor::block_on(pipeline.compact_now(&history, &ctx, Trigger::Manual))?;

    let boundary = prepared.boundary.ok_or("no compaction happened")?;
    println!(
        "{} compaction: {} -> {} tokens",
        boundary.trigger.as_str(),
        boundary.pre_tokens,
        boundary.post_tokens
    );
    let new_history = prepared.history.ok_or("the history was not replaced")?;
    assert!(is_compact_boundary(&new_history[0]));
    assert!(boundary.post_tokens < boundary.pre_tokens);
    // What is sent keeps every tool_use with its tool_result.
    check_pairing(&prepared.messages)?;
    println!(
        "{} messages became {} ({} sent)",
        history.len(),
        new_history.len(),
        prepared.messages.len()
    );
    println!("summary: {}", prepared.messages[0].text());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
