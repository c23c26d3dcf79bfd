//! Fault injection: HTTP errors, cuts, stalls, in-stream errors, delays.

use std::time::Duration;

use crate::common::{body, names, parse_sse, post, stream_events};
use futures::StreamExt;
use gyre_protocol::{ErrorDetail, ErrorResponse, StreamEvent};
use gyre_testkit::{CutMode, Script, TestServer, Turn};
use serde_json::json;

/// Reads a streaming body chunk by chunk until it ends or fails; returns the text read and
/// whether it failed.
#[allow(clippy::unwrap_used)] // test helper
async fn read_until_end(response: reqwest::Response) -> (String, bool) {
    let mut text = String::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => text.push_str(std::str::from_utf8(&bytes).unwrap()),
            Err(_) => return (text, true),
        }
    }
    (text, false)
}

#[tokio::test]
async fn http_error_sends_status_body_and_headers() {
    let turn = Turn::http_error(529)
        .with_header("retry-after", "2")
        .with_header("x-should-retry", "false");
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let response = post(&server.url(), &body(true)).await;
    assert_eq!(response.status(), 529);
    assert_eq!(response.headers()["retry-after"], "2");
    assert_eq!(response.headers()["x-should-retry"], "false");
    assert_eq!(response.headers()["content-type"], "application/json");
    let error: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    assert_eq!(
        error,
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    );
}

#[tokio::test]
async fn http_error_default_bodies_name_the_api_error_type() {
    let statuses = [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (529, "overloaded_error"),
    ];
    let server = TestServer::start(Script::new(statuses.map(|(s, _)| Turn::http_error(s))))
        .await
        .unwrap();
    for (status, kind) in statuses {
        let response = post(&server.url(), &body(true)).await;
        assert_eq!(response.status(), status);
        let error: ErrorResponse = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(error.error.kind, kind, "status {status}");
    }
}

#[tokio::test]
async fn http_error_custom_body_json_or_text() {
    let context_overflow = json!({"type": "error", "error": {"type": "invalid_request_error",
        "message": "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000"}});
    let server = TestServer::start(Script::new([
        Turn::http_error(400).with_body(context_overflow.clone()),
        Turn::http_error(502).with_body(json!("<html>Bad Gateway</html>")),
    ]))
    .await
    .unwrap();
    let first = post(&server.url(), &body(true)).await;
    assert_eq!(first.status(), 400);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&first.text().await.unwrap()).unwrap(),
        context_overflow
    );
    let second = post(&server.url(), &body(true)).await;
    assert_eq!(second.status(), 502);
    assert!(
        second.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(second.text().await.unwrap(), "<html>Bad Gateway</html>");
}

#[tokio::test]
async fn cut_after_events_closes_the_connection_before_message_stop() {
    let server = TestServer::start(Script::new([
        Turn::text("hello world").cut_after(4),
        Turn::text("ok"),
    ]))
    .await
    .unwrap();
    let (text, failed) = read_until_end(post(&server.url(), &body(true)).await).await;
    assert!(failed, "the body must end in a transport error");
    let events = parse_sse(&text);
    assert_eq!(
        names(&events),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta"
        ]
    );
    // The server keeps serving after a cut.
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    assert_eq!(names(&events).last(), Some(&"message_stop"));
}

#[tokio::test]
async fn cut_mode_eof_ends_the_body_cleanly_without_message_stop() {
    let turn = Turn::text("hello").cut_after(3).with_cut_mode(CutMode::Eof);
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let (text, failed) = read_until_end(post(&server.url(), &body(true)).await).await;
    assert!(!failed);
    assert_eq!(
        names(&parse_sse(&text)),
        ["message_start", "ping", "content_block_start"]
    );
}

#[tokio::test]
async fn stall_pauses_then_continues() {
    let turn = Turn::text("abc").stall(3, Duration::from_millis(50));
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let (text, failed) = read_until_end(post(&server.url(), &body(true)).await).await;
    assert!(!failed);
    let events = parse_sse(&text);
    assert_eq!(events.len(), 7);
    assert_eq!(names(&events).last(), Some(&"message_stop"));
}

#[tokio::test]
async fn stall_forever_sends_n_events_then_holds_the_connection() {
    let turn = Turn::text("abc").stall_forever(2);
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let response = post(&server.url(), &body(true)).await;
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while parse_sse_prefix(&text) < 2 {
        let chunk = stream.next().await.unwrap().unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(names(&parse_sse(&text)), ["message_start", "ping"]);
    // Nothing more arrives while the server holds the stream.
    let more = tokio::time::timeout(Duration::from_millis(100), stream.next()).await;
    assert!(more.is_err(), "expected silence, got {more:?}");
    // Dropping the server closes the held connection.
    drop(server);
    let end = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert!(matches!(end, None | Some(Err(_))), "{end:?}");
}

fn parse_sse_prefix(text: &str) -> usize {
    text.matches("\n\n").count()
}

#[tokio::test]
async fn error_event_replaces_the_rest_of_the_stream() {
    let turn = Turn::text("abc").error_event(3, "overloaded_error", "Overloaded");
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    assert_eq!(
        names(&events),
        ["message_start", "ping", "content_block_start", "error"]
    );
    assert_eq!(
        stream_events(&events)[3],
        StreamEvent::Error {
            error: ErrorDetail {
                kind: "overloaded_error".into(),
                message: "Overloaded".into()
            }
        }
    );
}

#[tokio::test]
async fn error_event_from_json_defaults_to_overloaded() {
    let script = Script::from_json(
        r#"[{"content":[{"type":"text","text":"a"}],"error_event":{"after_events":0}}]"#,
    )
    .unwrap();
    let server = TestServer::start(script).await.unwrap();
    let events = parse_sse(&post(&server.url(), &body(true)).await.text().await.unwrap());
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].1["error"]["type"], "overloaded_error");
}

#[tokio::test]
async fn per_event_delay_and_turn_delay_still_deliver_everything() {
    let turn = Turn::text("abcdefghij")
        .with_chunk_chars(2)
        .delay_per_event(Duration::from_millis(1))
        .delay(Duration::from_millis(5));
    let server = TestServer::start(Script::new([turn])).await.unwrap();
    let (text, failed) = read_until_end(post(&server.url(), &body(true)).await).await;
    assert!(!failed);
    let events = parse_sse(&text);
    assert_eq!(events.len(), 2 + 1 + 5 + 1 + 2);
}
