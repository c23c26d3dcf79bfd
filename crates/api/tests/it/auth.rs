//! Credentials through the real HTTP client: a bearer token, and settings'
//! `apiKeyHelper` (cached, run again after a 401, a clear error when it fails).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, ClientConfig, Credential, KeyHelper, ModelClient, ModelEvent,
    RecordingSleeper, RetryOptions, stream_with_retry,
};
use gyre_protocol::{Message, MessagesRequest};
use gyre_testkit::{Script, TestServer, Turn};
use tokio_util::sync::CancellationToken;

async fn run(server: &TestServer, credential: Credential) -> Vec<Result<ModelEvent, ApiError>> {
    let config = ClientConfig::with_credential(credential).with_base_url(server.url());
    let client: Arc<dyn ModelClient> = Arc::new(AnthropicClient::new(config).unwrap());
    let options = RetryOptions::default().with_sleeper(Arc::new(RecordingSleeper::new()));
    let request = MessagesRequest::new("claude-test", 100, vec![Message::user_text("hi")]);
    stream_with_retry(client, request, options, CancellationToken::new())
        .collect()
        .await
}

fn answered(items: &[Result<ModelEvent, ApiError>]) -> bool {
    matches!(items.last(), Some(Ok(ModelEvent::Message(m))) if m.content == [gyre_protocol::ContentBlock::text("ok")])
}

#[tokio::test]
async fn a_bearer_token_goes_in_the_authorization_header_and_no_api_key_is_sent() {
    let server = TestServer::start(Script::new([Turn::text("ok")]))
        .await
        .unwrap();
    let items = run(&server, Credential::BearerToken("gw-token".to_owned())).await;
    assert!(answered(&items), "{items:?}");
    let requests = server.requests();
    assert_eq!(requests[0].header("authorization"), Some("Bearer gw-token"));
    assert_eq!(requests[0].header("x-api-key"), None);
}

/// A helper that prints `key-<n>` for its n-th run, counting runs in `dir/runs`.
fn counting_helper(dir: &std::path::Path) -> KeyHelper {
    KeyHelper {
        command: "echo x >> runs; echo \"key-$(wc -l < runs | tr -d ' ')\"".to_owned(),
        cwd: dir.to_path_buf(),
        ttl: Duration::from_secs(3600),
    }
}

#[tokio::test]
async fn the_key_helper_runs_again_after_a_401_and_its_new_key_is_used() {
    // The server takes only the second key: the first request gets a 401.
    let server = TestServer::start(Script::new([Turn::text("ok")]).require_api_key("key-2"))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let items = run(&server, Credential::KeyHelper(counting_helper(dir.path()))).await;
    assert!(answered(&items), "{items:?}");
    let keys: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.header("x-api-key").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(keys, ["key-1", "key-2"]);
}

#[tokio::test]
async fn the_key_helper_output_is_cached_across_requests() {
    let server = TestServer::start(Script::new([Turn::text("ok"), Turn::text("ok")]))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = ClientConfig::with_credential(Credential::KeyHelper(counting_helper(dir.path())))
        .with_base_url(server.url());
    let client = AnthropicClient::new(config).unwrap();
    for _ in 0..2 {
        let request = Arc::new(MessagesRequest::new(
            "claude-test",
            100,
            vec![Message::user_text("hi")],
        ));
        let events: Vec<_> = client
            .stream(request, CancellationToken::new())
            .collect()
            .await;
        assert!(events.iter().all(Result::is_ok), "{events:?}");
    }
    let runs = std::fs::read_to_string(dir.path().join("runs")).unwrap();
    assert_eq!(runs.lines().count(), 1);
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.header("x-api-key") == Some("key-1"))
    );
}

#[tokio::test]
async fn a_failing_key_helper_is_reported_without_sending_anything() {
    let server = TestServer::start(Script::new([Turn::text("ok")]))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let helper = KeyHelper {
        command: "echo 'not logged in to the vault' >&2; exit 1".to_owned(),
        cwd: dir.path().to_path_buf(),
        ttl: Duration::from_secs(60),
    };
    let items = run(&server, Credential::KeyHelper(helper)).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(e.category(), "credentials");
    assert!(e.to_string().contains("not logged in to the vault"), "{e}");
    assert_eq!(server.request_count(), 0);
    assert_eq!(items.len(), 1, "not retried: {items:?}");
}
