//! The cost meter against the published price table: usage as the API reports it
//! (cache writes of both lifetimes, cache reads, web searches, a long-context request),
//! from the conversation's model and a sub-agent's, priced per response and per model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_protocol::Usage;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

fn usage(recorded: serde_json::Value) -> Usage {
    serde_json::from_value(recorded).unwrap()
}

#[test]
fn the_cost_meter_prices_recorded_usage_by_model_cache_lifetime_and_context_length() {
    let sandbox = Sandbox::new().unwrap();
    let agents = json!({"quick": {"description": "Answers quickly", "prompt": "Be quick.", "model": "haiku"}});
    let server = TestServer::spawn(Script::new([
        // Sonnet 4.5 writes the prompt cache: 15k tokens for 5 minutes, 5k for an hour.
        Turn::tool_use(
            "Agent",
            json!({"description": "ask", "prompt": "what is 2+2", "subagent_type": "quick"}),
        )
        .with_usage(usage(json!({
            "input_tokens": 12, "output_tokens": 150,
            "cache_creation_input_tokens": 20_000, "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 15_000, "ephemeral_1h_input_tokens": 5_000}
        }))),
        // Haiku 4.5, the sub-agent, reads from its cache.
        Turn::text("4").with_usage(usage(json!({
            "input_tokens": 3_000, "output_tokens": 400,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 8_000
        }))),
        // Sonnet 4.5 again, with 210k input tokens in all: long-context rates, and two
        // web searches at a cent each.
        Turn::text("It is 4.").with_usage(usage(json!({
            "input_tokens": 150_000, "output_tokens": 1_000,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 60_000,
            "server_tool_use": {"web_search_requests": 2}
        }))),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--agents",
        &agents.to_string(),
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let result = out.result().unwrap();
    // Anthropic's prices per million tokens: Sonnet 4.5 $3 in, $15 out, $3.75 for a
    // 5-minute cache write, $6 (2× input) for a 1-hour one, $0.30 a cache read; above
    // 200k input tokens $6, $22.50, $7.50, $0.60. Haiku 4.5 $1, $5, $1.25, $0.10.
    let sonnet = (12.0 * 3.0 + 150.0 * 15.0 + 15_000.0 * 3.75 + 5_000.0 * 6.0) / 1e6
        + (150_000.0 * 6.0 + 60_000.0 * 0.6 + 1_000.0 * 22.5) / 1e6
        + 2.0 * 0.01;
    let haiku = (3_000.0 * 1.0 + 400.0 * 5.0 + 8_000.0 * 0.1) / 1e6;
    let by_model = result["modelUsage"].as_object().unwrap();
    let cost = |model: &str| by_model[model]["costUSD"].as_f64().unwrap();
    assert!(
        (cost("claude-sonnet-4-5") - sonnet).abs() < 1e-9,
        "{by_model:?}"
    );
    assert!(
        (cost("claude-haiku-4-5") - haiku).abs() < 1e-9,
        "{by_model:?}"
    );
    let total = result["total_cost_usd"].as_f64().unwrap();
    assert!((total - (sonnet + haiku)).abs() < 1e-9, "{total}");
    let tokens = &by_model["claude-sonnet-4-5"];
    assert_eq!(tokens["cacheCreationInputTokens"], 20_000);
    assert_eq!(tokens["cacheReadInputTokens"], 60_000);
    assert_eq!(tokens["webSearchRequests"], 2);
    assert_eq!(by_model["claude-haiku-4-5"]["cacheReadInputTokens"], 8_000);
}
