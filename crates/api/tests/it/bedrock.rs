//! Amazon Bedrock through the real HTTP client against gyre-testkit's Bedrock dialect:
//! signed requests (checked with botocore), event-stream answers, and the same
//! recovery as against the Anthropic API (throttling, an unavailable service, a cut
//! stream, a prompt that is too long).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, AwsCredentialSource, AwsCredentials, Backend, BedrockOptions,
    ClientConfig, ModelClient, ModelEvent, RecordingSleeper, RetryOptions, stream_with_retry,
};
use gyre_protocol::{ContentBlock, Message, MessagesRequest};
use gyre_testkit::{Script, SigV4Check, TestServer, Turn};
use tokio_util::sync::CancellationToken;

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
const KEY_ID: &str = "AKIDGYRETEST";
const SECRET: &str = "gyre/test+secret";
const TOKEN: &str = "session-token";

fn check() -> SigV4Check<'static> {
    SigV4Check {
        access_key_id: KEY_ID,
        secret_access_key: SECRET,
        session_token: Some(TOKEN),
        region: "eu-west-3",
        service: "bedrock",
    }
}

async fn run(server: &TestServer, options: RetryOptions) -> Vec<Result<ModelEvent, ApiError>> {
    let backend = Backend::Bedrock(BedrockOptions {
        region: "eu-west-3".to_owned(),
        credentials: AwsCredentialSource::Environment(AwsCredentials {
            access_key_id: KEY_ID.to_owned(),
            secret_access_key: SECRET.to_owned(),
            session_token: Some(TOKEN.to_owned()),
        }),
    });
    let config = ClientConfig::for_backend(backend).with_base_url(server.url());
    let client: Arc<dyn ModelClient> = Arc::new(AnthropicClient::new(config).unwrap());
    let options = options.with_sleeper(Arc::new(RecordingSleeper::new()));
    let request = MessagesRequest::new(MODEL, 100, vec![Message::user_text("hi")]);
    stream_with_retry(client, request, options, CancellationToken::new())
        .collect()
        .await
}

fn answered(items: &[Result<ModelEvent, ApiError>], text: &str) -> bool {
    matches!(items.last(), Some(Ok(ModelEvent::Message(m))) if m.content == [ContentBlock::text(text)])
}

fn retries(items: &[Result<ModelEvent, ApiError>]) -> Vec<String> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Retry(s)) => Some(s.error.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_signed_request_to_the_model_path_is_answered_with_event_stream_frames() {
    let server = TestServer::start(Script::new([Turn::text("hello from bedrock")]))
        .await
        .unwrap();
    let items = run(&server, RetryOptions::default()).await;
    assert!(answered(&items, "hello from bedrock"), "{items:?}");
    let requests = server.requests();
    assert_eq!(
        requests[0].path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
    );
    assert_eq!(requests[0].body["anthropic_version"], "bedrock-2023-05-31");
    assert!(requests[0].body.get("model").is_none());
    assert_eq!(requests[0].header("x-amz-security-token"), Some(TOKEN));
    assert_eq!(check().verify(&server), Ok(1));
}

#[tokio::test]
async fn throttling_and_an_unavailable_service_are_retried_and_every_retry_is_signed_anew() {
    let server = TestServer::start(Script::new([
        Turn::http_error(429).with_header("retry-after", "0"),
        Turn::http_error(529),
        Turn::text("after the storm"),
    ]))
    .await
    .unwrap();
    let items = run(&server, RetryOptions::default()).await;
    assert!(answered(&items, "after the storm"), "{items:?}");
    assert_eq!(retries(&items), ["rate_limit", "overloaded"]);
    assert_eq!(check().verify(&server), Ok(3));
}

#[tokio::test]
async fn unavailable_three_times_switches_to_the_fallback_model() {
    let server = TestServer::start(Script::new([
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::text("never"),
    ]))
    .await
    .unwrap();
    let items = run(
        &server,
        RetryOptions::default().with_fallback_model("small"),
    )
    .await;
    assert!(
        matches!(items.last(), Some(Err(ApiError::FallbackTriggered { .. }))),
        "{items:?}"
    );
}

#[tokio::test]
async fn a_cut_stream_and_an_in_stream_exception_are_retried() {
    let server = TestServer::start(Script::new([
        Turn::text("partial answer that is long enough").cut_after(3),
        Turn::text("x").error_event(2, "overloaded_error", "throttled mid-stream"),
        Turn::text("whole"),
    ]))
    .await
    .unwrap();
    let items = run(&server, RetryOptions::default()).await;
    assert!(answered(&items, "whole"), "{items:?}");
    assert_eq!(retries(&items), ["stream_cut", "overloaded"]);
}

#[tokio::test]
async fn a_prompt_too_long_validation_error_is_the_context_overflow_the_loop_compacts_on() {
    let server = TestServer::start(Script::new([Turn::http_error(400).with_body(
        serde_json::json!({
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}
        }),
    )]))
    .await
    .unwrap();
    let items = run(&server, RetryOptions::default()).await;
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert!(e.is_prompt_too_long(), "{e:?}");
    assert_eq!(server.request_count(), 1);
}
