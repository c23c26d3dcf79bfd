//! Turn order, capture, exhaustion, API key, side endpoints and the sync `spawn` mode.

use crate::common::{body, http, names, parse_sse, post, raw_http};
use gyre_protocol::MessagesRequest;
use gyre_testkit::{CapturedRequest, Script, TestServer, TestkitError, Turn, WhenExhausted};
use serde_json::json;

#[tokio::test]
async fn turns_are_consumed_in_order_and_requests_captured() {
    let server = TestServer::start(Script::new([
        Turn::text("first"),
        Turn::http_error(429),
        Turn::text("third"),
    ]))
    .await
    .unwrap();
    let url = server.url();
    assert!(
        post(&url, &body(true))
            .await
            .text()
            .await
            .unwrap()
            .contains("first")
    );
    assert_eq!(post(&url, &body(true)).await.status(), 429);
    let mut third = body(false);
    third["messages"] = json!([{"role": "user", "content": "again"}]);
    let reply = post(&url, &third).await.text().await.unwrap();
    assert!(reply.contains("third"));

    assert_eq!(server.request_count(), 3);
    assert_eq!(server.turns_served(), 3);
    let requests = server.requests();
    assert_eq!(
        requests.iter().map(|r| r.turn).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(2)]
    );
    let last = &requests[2];
    assert_eq!(last.method, "POST");
    assert_eq!(last.path, "/v1/messages");
    assert_eq!(last.header("X-Api-Key"), Some("sk-test"));
    assert_eq!(last.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(last.body["messages"][0]["content"], "again");
    let typed: MessagesRequest = last.body_as().unwrap();
    assert_eq!(typed.model, "claude-test");
}

#[tokio::test]
async fn exhausted_script_answers_500_by_default() {
    let server = TestServer::start(Script::new([Turn::text("only")]))
        .await
        .unwrap();
    post(&server.url(), &body(true)).await.text().await.unwrap();
    let response = post(&server.url(), &body(true)).await;
    assert_eq!(response.status(), 500);
    assert_eq!(response.headers()["x-should-retry"], "false");
    let error: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(error["error"]["type"], "api_error");
    assert_eq!(
        error["error"]["message"],
        "gyre-testkit: script exhausted after 1 turns"
    );
    assert_eq!(server.requests()[1].turn, None);
}

#[tokio::test]
async fn repeat_last_serves_the_last_turn_with_fresh_tool_ids() {
    let script = Script::new([
        Turn::text("a"),
        Turn::tool_use("Read", json!({"file_path": "x"})),
    ])
    .repeat_last();
    assert_eq!(script.when_exhausted, WhenExhausted::RepeatLast);
    let server = TestServer::start(script).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..4 {
        let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
        assert_eq!(names(&events).last(), Some(&"message_stop"));
        if let Some((_, start)) = events
            .iter()
            .find(|(_, d)| d["content_block"]["type"] == "tool_use")
        {
            ids.push(start["content_block"]["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(ids.len(), 3);
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "{ids:?}");
    assert_eq!(
        server.requests().iter().map(|r| r.turn).collect::<Vec<_>>(),
        [Some(0), Some(1), Some(1), Some(1)]
    );
}

#[tokio::test]
async fn empty_repeat_last_script_is_exhausted() {
    let server = TestServer::start(Script::default().repeat_last())
        .await
        .unwrap();
    assert_eq!(post(&server.url(), &body(true)).await.status(), 500);
}

#[tokio::test]
async fn require_api_key_rejects_other_keys_without_consuming_a_turn() {
    let server = TestServer::start(Script::new([Turn::text("ok")]).require_api_key("sk-right"))
        .await
        .unwrap();
    let response = post(&server.url(), &body(true)).await; // sends sk-test
    assert_eq!(response.status(), 401);
    let error: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(error["error"]["type"], "authentication_error");
    let ok = http()
        .post(format!("{}/v1/messages", server.url()))
        .header("x-api-key", "sk-right")
        .body(body(true).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        server.requests().iter().map(|r| r.turn).collect::<Vec<_>>(),
        [None, Some(0)]
    );
}

#[tokio::test]
async fn invalid_json_body_is_a_400_and_consumes_no_turn() {
    let server = TestServer::start(Script::new([Turn::text("ok")]))
        .await
        .unwrap();
    let response = http()
        .post(format!("{}/v1/messages", server.url()))
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let captured = &server.requests()[0];
    assert_eq!(captured.body, json!("{oops"));
    assert_eq!(captured.turn, None);
    assert_eq!(server.turns_served(), 0);
}

#[tokio::test]
async fn side_endpoints_answer_and_unknown_paths_are_404() {
    let server = TestServer::start(Script::new([Turn::text("ok")]))
        .await
        .unwrap();
    let client = http();
    let health = client
        .get(format!("{}/_testkit/health", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let missing = client
        .get(format!("{}/v1/models?limit=1", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    post(&server.url(), &body(true)).await.text().await.unwrap();
    let list = |path: &'static str| {
        let request = client.get(format!("{}{path}", server.url()));
        async move {
            let text = request.send().await.unwrap().text().await.unwrap();
            serde_json::from_str::<Vec<CapturedRequest>>(&text).unwrap()
        }
    };
    let listed = list("/_testkit/requests").await;
    assert_eq!(listed, server.requests());
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].path, "/v1/models");
    assert_eq!(listed[0].query.as_deref(), Some("limit=1"));
    assert_eq!(listed[1].turn, Some(0));
    // Every answered request says how long the server took; `?bodies=false` keeps
    // everything but the bodies.
    assert!(listed.iter().all(|r| r.handled_us.is_some()));
    let lean = list("/_testkit/requests?bodies=false").await;
    assert_eq!(lean.len(), 2);
    assert_eq!(lean[1].body, serde_json::Value::Null);
    assert_ne!(listed[1].body, serde_json::Value::Null);
    assert_eq!(lean[1].handled_us, listed[1].handled_us);
    assert_eq!(lean[1].turn, Some(0));
}

#[test]
fn spawn_serves_synchronous_callers() {
    let server = TestServer::spawn(Script::new([Turn::text("from a thread")])).unwrap();
    assert!(server.url().starts_with("http://127.0.0.1:"));
    let response = raw_http(
        server.port(),
        "POST",
        "/v1/messages",
        &body(true).to_string(),
    );
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("from a thread"));
    assert!(response.contains("event: message_stop"));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn start_outside_a_runtime_is_an_error() {
    let error = TestServer::start_on(Script::default(), 0).unwrap_err();
    assert!(matches!(error, TestkitError::NoRuntime), "{error}");
}

#[test]
fn invalid_scripts_are_refused_at_start() {
    let error = TestServer::spawn(Script::new([Turn::http_error(7)])).unwrap_err();
    assert!(error.to_string().contains("turns[0]"), "{error}");
    let error = TestServer::spawn(Script::new(
        [Turn::text("a").with_header("bad header", "x")],
    ))
    .unwrap_err();
    assert!(error.to_string().contains("bad header"), "{error}");
}

#[test]
fn from_file_names_the_file_and_the_problem() {
    let dir = std::env::temp_dir().join(format!("gyre-testkit-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.json");
    let error = Script::from_file(&missing).unwrap_err().to_string();
    assert!(error.contains("missing.json"), "{error}");

    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"turns": [{"content": [], "stal": {}}]}"#).unwrap();
    let error = Script::from_file(&bad).unwrap_err().to_string();
    assert!(
        error.contains("bad.json") && error.contains("stal"),
        "{error}"
    );

    let good = dir.join("good.json");
    std::fs::write(
        &good,
        r#"{"turns": [{"content": [{"type": "text", "text": "hi"}]}]}"#,
    )
    .unwrap();
    assert_eq!(
        Script::from_file(&good).unwrap(),
        Script::new([Turn::text("hi")])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
