//! Google Vertex AI through the real HTTP client: streamRawPredict against gyre-testkit,
//! with access tokens minted by a loopback token endpoint that checks each
//! service-account JWT against the public half of a key the test makes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, Backend, ClientConfig, GoogleCredentialSource, ModelClient,
    ModelEvent, RecordingSleeper, RetryOptions, VertexOptions, stream_with_retry,
};
use gyre_protocol::{ContentBlock, Message, MessagesRequest};
use gyre_testkit::{GoogleTokenServer, Script, TestServer, Turn};
use tokio_util::sync::CancellationToken;

const MODEL: &str = "claude-sonnet-4-5@20250929";

struct Setup {
    tokens: GoogleTokenServer,
    _dir: tempfile::TempDir,
    client: Arc<dyn ModelClient>,
}

fn setup(server: &TestServer, expires_in: u64, email_in_file: Option<&str>) -> Setup {
    let tokens = GoogleTokenServer::spawn(expires_in).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("sa.json");
    tokens
        .write_service_account(&key, "gyre@test.iam.gserviceaccount.com")
        .unwrap();
    if let Some(email) = email_in_file {
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&key).unwrap()).unwrap();
        json["client_email"] = email.into();
        std::fs::write(&key, json.to_string()).unwrap();
    }
    let backend = Backend::Vertex(VertexOptions {
        region: "europe-west1".to_owned(),
        project_id: "my-project".to_owned(),
        credentials: GoogleCredentialSource::File(key),
    });
    let config = ClientConfig::for_backend(backend).with_base_url(server.url());
    Setup {
        tokens,
        _dir: dir,
        client: Arc::new(AnthropicClient::new(config).unwrap()),
    }
}

async fn ask(client: &Arc<dyn ModelClient>) -> Vec<Result<ModelEvent, ApiError>> {
    let options = RetryOptions::default().with_sleeper(Arc::new(RecordingSleeper::new()));
    let request = MessagesRequest::new(MODEL, 100, vec![Message::user_text("hi")]);
    stream_with_retry(
        Arc::clone(client),
        request,
        options,
        CancellationToken::new(),
    )
    .collect()
    .await
}

fn answered(items: &[Result<ModelEvent, ApiError>], text: &str) -> bool {
    matches!(items.last(), Some(Ok(ModelEvent::Message(m))) if m.content == [ContentBlock::text(text)])
}

#[tokio::test]
async fn a_service_account_token_is_minted_once_and_reused_while_fresh() {
    let server = TestServer::start(
        Script::new([Turn::text("one"), Turn::text("two")]).require_api_key("ya29.gyre-test-1"),
    )
    .await
    .unwrap();
    let s = setup(&server, 3600, None);
    assert!(answered(&ask(&s.client).await, "one"));
    assert!(answered(&ask(&s.client).await, "two"));
    assert_eq!(s.tokens.minted(), 1);
    assert_eq!(s.tokens.refused(), Vec::<String>::new());
    let requests = server.requests();
    assert_eq!(
        requests[0].path,
        "/projects/my-project/locations/europe-west1/publishers/anthropic/models/\
         claude-sonnet-4-5@20250929:streamRawPredict"
    );
    assert_eq!(requests[0].body["anthropic_version"], "vertex-2023-10-16");
    assert!(requests[0].body.get("model").is_none());
    assert_eq!(requests[0].header("x-api-key"), None);
}

#[tokio::test]
async fn a_token_that_expires_within_the_margin_is_refreshed_before_the_next_request() {
    let server = TestServer::start(Script::new([Turn::text("one"), Turn::text("two")]))
        .await
        .unwrap();
    // 60 s left is inside the 5-minute margin: every request fetches a new token.
    let s = setup(&server, 60, None);
    assert!(answered(&ask(&s.client).await, "one"));
    assert!(answered(&ask(&s.client).await, "two"));
    assert_eq!(s.tokens.minted(), 2);
    let auth: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(auth, ["Bearer ya29.gyre-test-1", "Bearer ya29.gyre-test-2"]);
}

#[tokio::test]
async fn a_401_mints_a_new_token_and_the_retry_uses_it() {
    let server =
        TestServer::start(Script::new([Turn::text("ok")]).require_api_key("ya29.gyre-test-2"))
            .await
            .unwrap();
    let s = setup(&server, 3600, None);
    assert!(answered(&ask(&s.client).await, "ok"));
    assert_eq!(s.tokens.minted(), 2);
}

#[tokio::test]
async fn overloads_and_a_cut_stream_are_retried_as_against_the_anthropic_api() {
    let server = TestServer::start(Script::new([
        Turn::http_error(529),
        Turn::text("cut short, long enough to cut").cut_after(3),
        Turn::text("whole"),
    ]))
    .await
    .unwrap();
    let s = setup(&server, 3600, None);
    let items = ask(&s.client).await;
    assert!(answered(&items, "whole"), "{items:?}");
    assert_eq!(s.tokens.minted(), 1);
}

#[tokio::test]
async fn a_jwt_the_endpoint_refuses_is_a_credentials_error_and_nothing_is_sent() {
    let server = TestServer::start(Script::new([Turn::text("never")]))
        .await
        .unwrap();
    // The key file names another account than the key's: the endpoint refuses the JWT.
    let s = setup(
        &server,
        3600,
        Some("someone-else@test.iam.gserviceaccount.com"),
    );
    let items = ask(&s.client).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(e.category(), "credentials", "{e:?}");
    assert!(e.to_string().contains("invalid_grant"), "{e}");
    assert_eq!(s.tokens.refused().len(), 1);
    assert_eq!(server.request_count(), 0);
}
