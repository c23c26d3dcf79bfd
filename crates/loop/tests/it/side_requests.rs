//! Requests beside the conversation (a side query, a sub-agent) through the real HTTP
//! client against gyre-testkit: they go through a fork of the session's client, so the
//! conversation's next request still reuses the body its encoder kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{AnthropicClient, ClientConfig, RetryOptions};
use gyre_loop::{
    AgentCatalog, AgentSetup, AgentTool, ApiDeps, EngineConfig, EngineEvent, MemoryTranscript,
    NoCompaction, QueryDeps, QueryEngine, general_purpose, side_query, subagent_channel,
};
use gyre_protocol::{ContentBlock, Message};
use gyre_testkit::{Script, TestServer, Turn};
use gyre_tools::{AllowAll, ToolContext, ToolRegistry};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "claude-test";

/// The client (whose encoder counts what it encoded) and the session's deps over it.
fn client(server: &TestServer) -> (AnthropicClient, Arc<dyn QueryDeps>) {
    let client = AnthropicClient::new(ClientConfig::new("k").with_base_url(server.url())).unwrap();
    let deps = ApiDeps::new(Arc::new(client.clone()), RetryOptions::default());
    (client, Arc::new(deps))
}

fn engine(deps: Arc<dyn QueryDeps>, tools: ToolRegistry) -> QueryEngine {
    let config = EngineConfig {
        session_id: "s".into(),
        cwd: std::env::temp_dir(),
        model: MODEL.into(),
        fallback_model: None,
        system: Vec::new(),
        max_turns: Some(5),
        max_budget_usd: None,
        max_output_tokens: None,
        token_budget: None,
    };
    QueryEngine::new(
        config,
        deps,
        Arc::new(tools),
        ToolContext::new(std::env::temp_dir()),
        Arc::new(AllowAll),
        Box::new(NoCompaction),
        Box::new(MemoryTranscript::default()),
    )
}

async fn turn(engine: &mut QueryEngine, prompt: &str) {
    let events: Vec<EngineEvent> = engine
        .submit_message(vec![ContentBlock::text(prompt)])
        .collect()
        .await;
    assert!(
        matches!(events.last(), Some(EngineEvent::Result(r)) if !r.is_error),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_side_query_leaves_the_conversation_s_encoded_body_alone() {
    let server = TestServer::start(Script::new([
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("an answer on the side"),
        Turn::text("three"),
    ]))
    .await
    .unwrap();
    let (client, deps) = client(&server);
    let mut engine = engine(Arc::clone(&deps), ToolRegistry::new());
    turn(&mut engine, "first").await;
    turn(&mut engine, "second").await;
    // `first`, then `first` again (its cache marker gone), `one` and `second`.
    assert_eq!(client.messages_encoded(), 4);
    let answer = side_query(
        deps.as_ref(),
        MODEL,
        "You answer questions about a web page's content.",
        vec![Message::user_text("What does the page say?")],
        1000,
        CancellationToken::new(),
    )
    .await
    .unwrap();
    assert_eq!(answer.text, "an answer on the side");
    assert_eq!(
        client.messages_encoded(),
        4,
        "the side query is encoded apart"
    );
    turn(&mut engine, "third").await;
    // `second` (its marker gone), `two` and `third`; `first` and `one` are reused.
    assert_eq!(client.messages_encoded(), 7);
    assert_eq!(server.request_count(), 4);
}

#[tokio::test]
async fn a_sub_agent_leaves_the_conversation_s_encoded_body_alone() {
    let server = TestServer::start(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "look", "prompt": "Find it."}),
        ),
        Turn::text("found it"),
        Turn::text("done"),
    ]))
    .await
    .unwrap();
    let (client, deps) = client(&server);
    let (tx, rx) = subagent_channel();
    let setup = AgentSetup {
        definitions: AgentCatalog::new(vec![general_purpose()]),
        tools: ToolRegistry::new(),
        deps: Arc::clone(&deps),
        can_use_tool: Arc::new(AllowAll),
        model: MODEL.into(),
        max_turns: 5,
        session_id: "s".into(),
        sidechain_dir: None,
        hook: None,
        append_system_prompt: None,
    };
    let tools = ToolRegistry::new().with(Arc::new(AgentTool::new(setup, tx)));
    let mut engine = engine(deps, tools).with_subagent_events(rx);
    turn(&mut engine, "go").await;
    assert_eq!(
        engine.messages().last().map(Message::text).as_deref(),
        Some("done")
    );
    // The main requests only: `go`, then `go` again (its cache marker gone), the call and
    // its result. The sub-agent's `Find it.` went through a fork.
    assert_eq!(client.messages_encoded(), 4);
    assert_eq!(server.request_count(), 3);
}
