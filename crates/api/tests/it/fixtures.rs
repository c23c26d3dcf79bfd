//! Record a session against gyre-testkit, replay it without a server, and check that no
//! secret reaches the fixture.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, ClientConfig, ModelClient, ModelEvent, RecordingClient,
    RecordingSleeper, ReplayClient, RetryOptions, stream_with_retry,
};
use gyre_protocol::{Message, MessagesRequest};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const KEY: &str = "sk-ant-api03-TOPSECRETKEYVALUE";

fn request(text: &str) -> MessagesRequest {
    MessagesRequest::new("claude-test", 1024, vec![Message::user_text(text)])
}

async fn collect(
    client: Arc<dyn ModelClient>,
    req: MessagesRequest,
) -> Vec<Result<ModelEvent, ApiError>> {
    let options = RetryOptions::default()
        .with_sleeper(Arc::new(RecordingSleeper::new()))
        .with_jitter_seed(5);
    stream_with_retry(client, req, options, CancellationToken::new())
        .collect()
        .await
}

/// `items` as a replay gives them back: a replay answers no API request, so it has no
/// request id (the live response had the server's).
fn as_replayed(mut items: Vec<Result<ModelEvent, ApiError>>) -> Vec<Result<ModelEvent, ApiError>> {
    for item in &mut items {
        match item {
            Ok(ModelEvent::Message(m)) => m.request_id = None,
            Ok(ModelEvent::Stream(gyre_protocol::StreamEvent::MessageStart { message })) => {
                message.request_id = None;
            }
            _ => {}
        }
    }
    items
}

#[tokio::test]
async fn record_then_replay_round_trips_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let server = TestServer::start(
        Script::new([
            Turn::http_error(529),
            Turn::text("Reading it.").and_tool_use("Read", json!({"file_path": "/tmp/a"})),
            Turn::text("All done."),
        ])
        .require_api_key(KEY),
    )
    .await
    .unwrap();
    let http: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(ClientConfig::new(KEY).with_base_url(server.url())).unwrap());
    let recorder: Arc<dyn ModelClient> = Arc::new(
        RecordingClient::create(http, &path)
            .unwrap()
            .with_secret(KEY),
    );

    // A prompt that itself contains a key-shaped string: redacted in the file, and the
    // replay still matches it.
    let first = request("my key is sk-ant-api03-LEAKEDLEAKED, read /tmp/a");
    let recorded_1 = collect(Arc::clone(&recorder), first.clone()).await;
    let second = request("thanks");
    let recorded_2 = collect(Arc::clone(&recorder), second.clone()).await;
    assert!(matches!(
        recorded_1.last(),
        Some(Ok(ModelEvent::Message(_)))
    ));
    assert!(matches!(
        recorded_2.last(),
        Some(Ok(ModelEvent::Message(_)))
    ));
    assert_eq!(server.request_count(), 3);
    drop(server);

    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(
        !text.contains("TOPSECRET") && !text.contains("LEAKED") && !text.contains("sk-ant-"),
        "{text}"
    );
    assert!(text.contains("[REDACTED]"));
    assert!(text.contains("event: message_start"));

    let replay = Arc::new(ReplayClient::from_file(&path).unwrap());
    assert_eq!(
        replay.entries()[0].error.as_ref().map(ApiError::category),
        Some("overloaded")
    );
    let replayed_1 = collect(replay.clone(), first).await;
    let replayed_2 = collect(replay.clone(), second).await;
    assert_eq!(replayed_1, as_replayed(recorded_1));
    assert_eq!(replayed_2, as_replayed(recorded_2));
    assert_eq!(replay.remaining(), 0);
}

#[tokio::test]
async fn a_fork_records_to_the_same_fixture_through_an_encoder_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("forked.jsonl");
    let server = TestServer::start(Script::new([Turn::text("main"), Turn::text("side")]))
        .await
        .unwrap();
    let http = AnthropicClient::new(ClientConfig::new("k").with_base_url(server.url())).unwrap();
    let recorder: Arc<dyn ModelClient> =
        Arc::new(RecordingClient::create(Arc::new(http.clone()), &path).unwrap());
    let fork = recorder.fork().expect("the HTTP client forks");
    collect(Arc::clone(&recorder), request("the conversation")).await;
    collect(fork, request("a side request")).await;
    assert_eq!(
        http.messages_encoded(),
        1,
        "the side request went through the fork's encoder"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("a side request"));
    // A replay keeps nothing per conversation: it is shared as it is.
    assert!(ReplayClient::from_file(&path).unwrap().fork().is_none());
}

#[tokio::test]
async fn replay_fails_loudly_on_a_request_that_does_not_match() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.jsonl");
    let server = TestServer::start(Script::new([Turn::text("hi")]))
        .await
        .unwrap();
    let http: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(ClientConfig::new("k").with_base_url(server.url())).unwrap());
    let recorder: Arc<dyn ModelClient> = Arc::new(RecordingClient::create(http, &path).unwrap());
    collect(recorder, request("hello")).await;

    let replay = Arc::new(ReplayClient::from_file(&path).unwrap());
    let items = collect(replay.clone(), request("goodbye")).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(e.category(), "fixture");
    let text = e.to_string();
    assert!(text.contains("request #1 does not match"), "{text}");
    assert!(text.contains("/messages/0/content/0/text"), "{text}");
    assert!(text.contains("hello") && text.contains("goodbye"), "{text}");
    assert_eq!(items.len(), 1, "a fixture error is not retried");

    let replay = Arc::new(ReplayClient::from_file(&path).unwrap());
    assert!(matches!(
        collect(replay.clone(), request("hello")).await.last(),
        Some(Ok(ModelEvent::Message(_)))
    ));
    let items = collect(replay, request("hello")).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert!(e.to_string().contains("request #2 has no recording"), "{e}");
}

#[tokio::test]
async fn a_key_split_across_streamed_deltas_is_redacted_too() {
    // The model echoes a key; the stream cuts it into 6-character deltas, so no single
    // event holds it whole. The recorder must still keep it out of the file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.jsonl");
    let server = TestServer::start(
        Script::new([
            Turn::text("your key is sk-ant-api03-SPLITSPLITSPLIT, keep it safe").and_tool_use(
                "Bash",
                json!({"command": "echo sk-ant-api03-INPUTINPUTINPUT"}),
            ),
        ])
        .with_chunk_chars(6),
    )
    .await
    .unwrap();
    let http: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(ClientConfig::new("k").with_base_url(server.url())).unwrap());
    let recorder: Arc<dyn ModelClient> = Arc::new(RecordingClient::create(http, &path).unwrap());
    let recorded = collect(recorder, request("hi")).await;
    let Some(Ok(ModelEvent::Message(live))) = recorded.last() else {
        panic!("{recorded:?}")
    };
    assert!(live.to_message().text().contains("SPLITSPLIT"));
    drop(server);

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("SPLIT") && !text.contains("INPUT") && !text.contains("sk-ant-"),
        "{text}"
    );
    // The replay is the same conversation with the keys redacted.
    let replay = Arc::new(ReplayClient::from_file(&path).unwrap());
    let replayed = collect(replay, request("hi")).await;
    let Some(Ok(ModelEvent::Message(back))) = replayed.last() else {
        panic!("{replayed:?}")
    };
    let message = back.to_message();
    assert_eq!(message.text(), "your key is [REDACTED], keep it safe");
    let (_, name, input) = message.tool_uses().next().unwrap();
    assert_eq!(name, "Bash");
    assert_eq!(input, &json!({"command": "echo [REDACTED]"}));
}
