//! An SDK server (`{"type": "sdk"}`) reached through the channel the CLI bridges to
//! `mcp_message` control requests: here the other end is a fake SDK program.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::{SinkExt, StreamExt};
use gyre_mcp::{McpConfig, McpServers, SdkBridge, ServerState, StartOptions, sdk_channel};
use gyre_tools::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::json;

/// Answers like an SDK program's in-process server with one tool, `add`.
async fn fake_sdk_server(mut bridge: SdkBridge) {
    while let Some(message) = bridge.to_server.next().await {
        let Some(id) = message.get("id").cloned() else {
            continue; // a notification
        };
        let result = match message["method"].as_str() {
            Some("initialize") => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "probe", "version": "1.0.0"}
            }),
            Some("tools/list") => json!({"tools": [{
                "name": "add",
                "description": "Adds two numbers.",
                "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
            }]}),
            Some("tools/call") => {
                let args = &message["params"]["arguments"];
                let sum = args["a"].as_f64().unwrap() + args["b"].as_f64().unwrap();
                json!({"content": [{"type": "text", "text": sum.to_string()}]})
            }
            other => panic!("unexpected request {other:?}"),
        };
        let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if bridge.from_server.send(answer).await.is_err() {
            return;
        }
    }
}

fn sdk_config() -> McpConfig {
    McpConfig::parse(
        "test",
        r#"{"mcpServers": {"probe": {"type": "sdk", "name": "probe"}}}"#,
    )
    .unwrap()
}

#[tokio::test]
async fn an_sdk_server_over_the_channel_offers_and_runs_its_tools() {
    let (channel, bridge) = sdk_channel();
    let server = tokio::spawn(fake_sdk_server(bridge));
    let mut channel = Some(channel);
    let servers = McpServers::start_with_sdk(
        &sdk_config(),
        &StartOptions::from_env(".".as_ref()),
        |name| {
            assert_eq!(name, "probe");
            channel.take()
        },
    )
    .await;
    let status = servers.status();
    assert_eq!(status[0].state, ServerState::Connected, "{status:?}");
    assert_eq!(status[0].tools, vec!["mcp__probe__add"]);

    let tools = servers.tools();
    let ctx = ToolContext::new(".");
    let output = tools[0].call(json!({"a": 2, "b": 3}), &ctx, &|_| {}).await;
    assert_eq!(output, ToolOutput::ok("5"));

    // The SDK program goes away: the next call says so, naming the server.
    server.abort();
    let _ = server.await;
    let output = tools[0].call(json!({"a": 1, "b": 1}), &ctx, &|_| {}).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("MCP server \"probe\""),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn without_a_channel_an_sdk_server_fails_with_a_reason() {
    let servers = McpServers::start(&sdk_config(), &StartOptions::from_env(".".as_ref())).await;
    match &servers.status()[0].state {
        ServerState::Failed { error } => {
            assert!(error.contains("SDK control protocol"), "{error}");
        }
        other @ (ServerState::Connected | ServerState::Disabled) => {
            panic!("an SDK server without a channel is {other:?}")
        }
    }
    assert!(servers.tools().is_empty());
}

#[tokio::test]
async fn a_disabled_server_leaves_the_registry_and_comes_back_when_enabled_or_reconnected() {
    let (channel, bridge) = sdk_channel();
    tokio::spawn(fake_sdk_server(bridge));
    let mut channel = Some(channel);
    let servers =
        McpServers::start_with_sdk(&sdk_config(), &StartOptions::from_env(".".as_ref()), |_| {
            channel.take()
        })
        .await;
    let mut registry = ToolRegistry::new();
    for tool in servers.tools() {
        registry.register(tool);
    }
    assert_eq!(registry.names(), ["mcp__probe__add"]);

    servers.set_enabled("probe", false, None).await.unwrap();
    assert_eq!(servers.status()[0].state, ServerState::Disabled);
    assert!(servers.status()[0].tools.is_empty());
    assert!(registry.names().is_empty());
    assert!(registry.get("mcp__probe__add").is_none());
    assert!(registry.definitions().is_empty());

    let (channel, bridge) = sdk_channel();
    tokio::spawn(fake_sdk_server(bridge));
    servers
        .set_enabled("probe", true, Some(channel))
        .await
        .unwrap();
    assert_eq!(servers.status()[0].state, ServerState::Connected);
    let add = registry.get("mcp__probe__add").expect("offered again");
    let ctx = ToolContext::new(".");
    assert_eq!(
        add.call(json!({"a": 1, "b": 2}), &ctx, &|_| {}).await,
        ToolOutput::ok("3")
    );

    // The SDK program went away: a reconnect over a new channel makes calls work again.
    let (channel, bridge) = sdk_channel();
    drop(bridge);
    assert!(servers.reconnect("probe", Some(channel)).await.is_err());
    assert!(matches!(
        servers.status()[0].state,
        ServerState::Failed { .. }
    ));
    let (channel, bridge) = sdk_channel();
    tokio::spawn(fake_sdk_server(bridge));
    servers.reconnect("probe", Some(channel)).await.unwrap();
    let add = registry
        .get("mcp__probe__add")
        .expect("offered after the reconnect");
    assert_eq!(
        add.call(json!({"a": 2, "b": 2}), &ctx, &|_| {}).await,
        ToolOutput::ok("4")
    );
    assert!(matches!(
        servers.reconnect("nope", None).await,
        Err(gyre_mcp::ReconnectError::UnknownServer(_))
    ));
}
