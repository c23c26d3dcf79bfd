//! The agent loop with a scripted model: `query()` driven through the `QueryDeps` seam,
//! so no API key, network or server is needed.
//!
//! The "model" first asks for a Glob of the project, then answers from the result. The
//! loop runs the tool between the two requests and sends its result back; the example
//! prints every loop event and checks what the second request carried.
//!
//! Run it with `cargo run -p gyre-loop --example scripted_model`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use gyre_api::ModelEvent;
use gyre_loop::{
    Conversation, LoopEvent, ModelStream, NoCompaction, QueryDeps, QueryParams, TerminalReason,
    query,
};
use gyre_protocol::{
    AssistantResponse, ContentBlock, Message, MessagesRequest, Role, StopReason, SystemBlock, Usage,
};
use gyre_tools::{AllowAll, ToolContext, ToolRegistry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Answers each request with the next scripted response, and keeps the requests.
struct ScriptedModel {
    replies: Mutex<VecDeque<Vec<ContentBlock>>>,
    requests: Mutex<Vec<MessagesRequest>>,
}

impl QueryDeps for ScriptedModel {
    fn call_model(
        &self,
        request: &mut Arc<MessagesRequest>,
        _fallback_model: Option<String>,
        _cancel: CancellationToken,
    ) -> ModelStream {
        if let Ok(mut requests) = self.requests.lock() {
            requests.push(MessagesRequest::clone(request));
        }
        let content = self
            .replies
            .lock()
            .ok()
            .and_then(|mut r| r.pop_front())
            .unwrap_or_else(|| vec![ContentBlock::text("(the script is over)")]);
        let calls_tools = content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolUse { .. }));
        let response = AssistantResponse {
            id: format!("msg_{}", request.messages.len()),
            model: request.model.clone(),
            role: Role::Assistant,
            content: content.clone(),
            stop_reason: Some(if calls_tools {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            }),
            stop_sequence: None,
            usage: Usage::default(),
            request_id: None,
        };
        // What a real stream ends with: each block as it completes (tools start here),
        // then the whole message.
        let mut events: Vec<_> = content
            .into_iter()
            .enumerate()
            .map(|(index, block)| Ok(ModelEvent::BlockComplete { index, block }))
            .collect();
        events.push(Ok(ModelEvent::Message(response)));
        futures::stream::iter(events).boxed()
    }
}

/// The tool results of a message, as JSON text.
fn tool_results(message: &Message) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { content, .. } => serde_json::to_string(content).ok(),
            _ => None,
        })
        .collect()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let project = tempfile::tempdir()?;
    std::fs::write(project.path().join("main.rs"), "fn main() {}\n")?;

    let model = Arc::new(ScriptedModel {
        replies: Mutex::new(VecDeque::from([
            vec![
                ContentBlock::text("Let me look."),
                ContentBlock::tool_use("toolu_1", "Glob", json!({"pattern": "*.rs"})),
            ],
            vec![ContentBlock::text("There is one Rust file: main.rs.")],
        ])),
        requests: Mutex::new(Vec::new()),
    });

    let events = query(QueryParams {
        conversation: Conversation::new(
            vec![Message::user_text("Which Rust files are there?")],
            "claude-sonnet-4-5",
            None,
        ),
        system: vec![SystemBlock::text("You are a coding agent.")],
        max_turns: Some(5),
        max_output_tokens: None,
        token_budget: None,
        deps: model.clone(),
        tools: Arc::new(ToolRegistry::with_default_tools()),
        tool_context: ToolContext::new(project.path()),
        can_use_tool: Arc::new(AllowAll),
        compactor: Arc::new(tokio::sync::Mutex::new(Box::new(NoCompaction))),
        stop_hooks: Vec::new(),
        tool_hooks: Vec::new(),
        cancel: CancellationToken::new(),
    });
    let mut events = std::pin::pin!(events);

    let mut terminal = None;
    while let Some(event) = events.next().await {
        match event {
            LoopEvent::Message { message, .. } => {
                println!("{:?}: {}", message.role, message.text());
                for (_, name, input) in message.tool_uses() {
                    println!("  calls {name} {input}");
                }
                for result in tool_results(&message) {
                    println!("  result: {result}");
                }
            }
            LoopEvent::Transition(transition) => println!("-> {}", transition.name()),
            LoopEvent::Terminal(end) => terminal = Some(end),
            _ => {}
        }
    }

    let terminal = terminal.ok_or("the loop always ends with a Terminal")?;
    println!(
        "ended: {} after {} turns",
        terminal.reason.name(),
        terminal.turn_count
    );
    assert_eq!(terminal.reason, TerminalReason::Completed);
    let requests = model.requests.lock().map_err(|_| "poisoned")?.clone();
    assert_eq!(requests.len(), 2);
    // The second request carries the Glob result, paired with its call.
    let last = requests[1].messages.last().ok_or("no messages")?;
    assert!(last.is_tool_result_message());
    assert!(tool_results(last).iter().any(|r| r.contains("main.rs")));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
