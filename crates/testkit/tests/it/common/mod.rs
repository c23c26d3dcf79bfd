//! Helpers shared by the integration tests: a request builder and an SSE parser.

#![allow(dead_code)] // each test file uses a different subset
#![allow(clippy::unwrap_used)] // test helpers: a failure here is a failed test

use std::io::{Read, Write};
use std::net::TcpStream;

use gyre_protocol::StreamEvent;
use serde_json::{Value, json};

/// A minimal Messages API request body.
pub fn body(stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    })
}

/// A reqwest client; gyre builds reqwest without a TLS provider of its own, so ring is
/// installed first (as gyre-api's `ensure_crypto_provider` does).
pub fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

pub async fn post(url: &str, body: &Value) -> reqwest::Response {
    http()
        .post(format!("{url}/v1/messages"))
        .header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// Splits an SSE body into `(event name, data JSON)`; panics on anything malformed.
pub fn parse_sse(text: &str) -> Vec<(String, Value)> {
    assert!(
        text.is_empty() || text.ends_with("\n\n"),
        "body ends mid-event: {text:?}"
    );
    text.split_terminator("\n\n")
        .map(|frame| {
            let mut lines = frame.lines();
            let name = lines
                .next()
                .unwrap()
                .strip_prefix("event: ")
                .unwrap()
                .to_owned();
            let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
            assert!(lines.next().is_none(), "extra lines in {frame:?}");
            let data: Value = serde_json::from_str(data).unwrap();
            assert_eq!(
                data["type"],
                name.as_str(),
                "event name and data type differ"
            );
            (name, data)
        })
        .collect()
}

pub fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(name, _)| name.as_str()).collect()
}

/// Parses every event as the protocol type gyre's client uses.
pub fn stream_events(events: &[(String, Value)]) -> Vec<StreamEvent> {
    events
        .iter()
        .map(|(_, data)| serde_json::from_value::<StreamEvent>(data.clone()).unwrap())
        .collect()
}

/// A blocking HTTP/1.1 exchange with `Connection: close`; returns the raw response text.
pub fn raw_http(port: u16, method: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}
