//! `stream_with_retry` through the real HTTP client against gyre-testkit: one test per
//! fault, each asserting the requests sent, the delays chosen and the outcome.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, ClientConfig, ModelClient, ModelEvent, RecordingSleeper,
    RetryOptions, RetryPolicy, RetryStatus, Sleeper, UnreachableReason, add_cache_markers,
    invalid_tool_input, stream_with_retry,
};
use gyre_protocol::{
    AssistantResponse, ContentBlock, Message, MessagesRequest, SystemBlock, ToolDefinition,
};
use gyre_testkit::{Block, Script, TestServer, Turn};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "claude-test";

fn request() -> MessagesRequest {
    MessagesRequest::new(MODEL, 8192, vec![Message::user_text("hello")])
}

fn client(server: &TestServer) -> Arc<dyn ModelClient> {
    Arc::new(
        AnthropicClient::new(ClientConfig::new("sk-test-key").with_base_url(server.url())).unwrap(),
    )
}

struct Run {
    server: TestServer,
    items: Vec<Result<ModelEvent, ApiError>>,
    sleeps: Vec<Duration>,
}

impl Run {
    fn retries(&self) -> Vec<RetryStatus> {
        self.items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::Retry(s)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    fn message(&self) -> &AssistantResponse {
        match self.items.last() {
            Some(Ok(ModelEvent::Message(m))) => m,
            other => panic!("expected a final message, got {other:?}"),
        }
    }

    fn error(&self) -> &ApiError {
        match self.items.last() {
            Some(Err(e)) => e,
            other => panic!("expected an error, got {other:?}"),
        }
    }

    fn requests(&self) -> usize {
        self.server.request_count()
    }

    /// Each recorded delay lies in the policy's bounds for its retry number.
    fn assert_backoff(&self) {
        let policy = RetryPolicy::default();
        for (i, d) in self.sleeps.iter().enumerate() {
            let (lo, hi) = policy.delay_bounds(u32::try_from(i + 1).unwrap());
            assert!(
                *d >= lo && *d <= hi,
                "retry {}: {d:?} not in {lo:?}..={hi:?}",
                i + 1
            );
        }
    }
}

async fn run_with(script: Script, mut options: RetryOptions) -> Run {
    let server = TestServer::start(script).await.unwrap();
    let sleeper = RecordingSleeper::new();
    options.sleeper = Arc::new(sleeper.clone());
    let items = stream_with_retry(
        client(&server),
        request(),
        options,
        CancellationToken::new(),
    )
    .collect()
    .await;
    Run {
        server,
        items,
        sleeps: sleeper.sleeps(),
    }
}

async fn run(turns: impl IntoIterator<Item = Turn>) -> Run {
    run_with(Script::new(turns), RetryOptions::default()).await
}

#[tokio::test]
async fn sends_the_documented_headers_and_body() {
    let r = run([Turn::text("hi")]).await;
    assert_eq!(r.message().to_message().text(), "hi");
    let req = &r.server.requests()[0];
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.header("x-api-key"), Some("sk-test-key"));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("content-type"), Some("application/json"));
    assert!(req.header("user-agent").unwrap().starts_with("gyre/"));
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["model"], json!(MODEL));
}

#[tokio::test]
async fn the_response_carries_the_request_id_the_api_sent() {
    let r = run([Turn::http_error(529), Turn::text("hi")]).await;
    // The testkit numbers its requests from 0: the one that answered was the second.
    assert_eq!(r.message().request_id.as_deref(), Some("req_testkit_1"));
}

#[tokio::test]
async fn each_turn_of_a_growing_conversation_sends_its_whole_history() {
    // One client across turns: message JSON reused from the previous body must never
    // leak a stale message into the next one.
    let server = TestServer::start(Script::new([
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ]))
    .await
    .unwrap();
    let client = client(&server);
    let mut messages = vec![Message::user_text("first")];
    let mut sent = Vec::new();
    for turn in 0..3 {
        let mut req = MessagesRequest::new(MODEL, 8192, messages.clone());
        add_cache_markers(&mut req);
        let items: Vec<_> = stream_with_retry(
            Arc::clone(&client),
            req.clone(),
            RetryOptions::default(),
            CancellationToken::new(),
        )
        .collect()
        .await;
        let Some(Ok(ModelEvent::Message(reply))) = items.last() else {
            panic!("turn {turn} ended with {:?}", items.last());
        };
        messages.push(reply.to_message());
        messages.push(Message::user_text(format!("next {turn}")));
        sent.push(req);
    }
    let got: Vec<MessagesRequest> = server
        .requests()
        .iter()
        .map(|r| r.body_as().unwrap())
        .collect();
    assert_eq!(got, sent);
}

#[tokio::test]
async fn retries_529_twice_then_succeeds() {
    let r = run([
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::text("recovered"),
    ])
    .await;
    assert_eq!(r.requests(), 3);
    assert_eq!(r.sleeps.len(), 2);
    r.assert_backoff();
    let statuses: Vec<(u32, Option<u16>, String)> = r
        .retries()
        .into_iter()
        .map(|s| (s.attempt, s.status, s.error))
        .collect();
    assert_eq!(
        statuses,
        vec![
            (1, Some(529), "overloaded".to_owned()),
            (2, Some(529), "overloaded".to_owned())
        ]
    );
    assert_eq!(r.message().to_message().text(), "recovered");
}

#[tokio::test]
async fn three_529s_with_a_fallback_model_trigger_the_fallback() {
    let r = run_with(
        Script::new([
            Turn::http_error(529),
            Turn::http_error(529),
            Turn::http_error(529),
            Turn::text("x"),
        ]),
        RetryOptions::default().with_fallback_model("claude-fallback"),
    )
    .await;
    assert_eq!(r.requests(), 3);
    assert_eq!(r.sleeps.len(), 2);
    r.assert_backoff();
    assert_eq!(
        r.error(),
        &ApiError::FallbackTriggered {
            original: MODEL.into(),
            fallback: "claude-fallback".into()
        }
    );
}

#[tokio::test]
async fn three_529s_without_a_fallback_model_keep_retrying() {
    let r = run([
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::http_error(529),
        Turn::text("patience"),
    ])
    .await;
    assert_eq!(r.requests(), 5);
    assert_eq!(r.sleeps.len(), 4);
    r.assert_backoff();
    assert_eq!(r.message().to_message().text(), "patience");
}

#[tokio::test]
async fn exhausting_the_budget_returns_the_last_error() {
    let mut options = RetryOptions::default();
    options.policy.max_retries = 3;
    let r = run_with(Script::new((0..5).map(|_| Turn::http_error(503))), options).await;
    assert_eq!(r.requests(), 4);
    assert_eq!(r.sleeps.len(), 3);
    r.assert_backoff();
    assert_eq!(r.error().status(), Some(503));
    assert_eq!(r.error().category(), "server_error");
}

#[tokio::test]
async fn retry_after_2_waits_exactly_2_seconds() {
    let r = run([
        Turn::http_error(429).with_header("retry-after", "2"),
        Turn::text("ok"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps, vec![Duration::from_secs(2)]);
    let s = &r.retries()[0];
    assert_eq!(
        (s.delay_ms, s.status, s.error.as_str()),
        (2000, Some(429), "rate_limit")
    );
    assert_eq!(r.message().to_message().text(), "ok");
}

#[tokio::test]
async fn retry_after_ms_wins_over_retry_after() {
    let r = run([
        Turn::http_error(429)
            .with_header("retry-after-ms", "150")
            .with_header("retry-after", "9"),
        Turn::text("ok"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps, vec![Duration::from_millis(150)]);
}

#[tokio::test]
async fn retry_after_http_date_is_honoured() {
    let at = std::time::SystemTime::now() + Duration::from_secs(30);
    let r = run([
        Turn::http_error(503).with_header("retry-after", httpdate::fmt_http_date(at)),
        Turn::text("ok"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    // Whole seconds on the wire, so 29–30 s remain.
    assert!(
        r.sleeps[0] > Duration::from_secs(28) && r.sleeps[0] <= Duration::from_secs(30),
        "{:?}",
        r.sleeps
    );
}

#[tokio::test]
async fn x_should_retry_false_on_a_500_is_not_retried() {
    let r = run([
        Turn::http_error(500).with_header("x-should-retry", "false"),
        Turn::text("never"),
    ])
    .await;
    assert_eq!(r.requests(), 1);
    assert!(r.sleeps.is_empty());
    assert_eq!(r.error().status(), Some(500));
}

#[tokio::test]
async fn x_should_retry_true_retries_an_otherwise_final_status() {
    let r = run([
        Turn::http_error(418).with_header("x-should-retry", "true"),
        Turn::text("ok"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.message().to_message().text(), "ok");
}

#[tokio::test]
async fn unauthorized_is_retried_once_then_explains() {
    let r = run([
        Turn::http_error(401),
        Turn::http_error(401),
        Turn::text("never"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps.len(), 1);
    r.assert_backoff();
    let e = r.error();
    assert_eq!(e.status(), Some(401));
    assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
}

#[tokio::test]
async fn invalid_request_400_is_not_retried() {
    let r = run([Turn::http_error(400), Turn::text("never")]).await;
    assert_eq!(r.requests(), 1);
    assert!(r.sleeps.is_empty());
    assert_eq!(r.error().category(), "invalid_request");
}

#[tokio::test]
async fn forbidden_not_found_and_too_large_are_not_retried_and_say_why() {
    for (status, needle) in [(403, MODEL), (404, "/v1/messages"), (413, "too large")] {
        let r = run([Turn::http_error(status), Turn::text("never")]).await;
        assert_eq!(r.requests(), 1, "{status}");
        assert!(r.sleeps.is_empty());
        assert_eq!(r.error().status(), Some(status));
        assert!(
            r.error().to_string().contains(needle),
            "{status}: {}",
            r.error()
        );
    }
}

#[tokio::test]
async fn billing_429_without_retry_after_is_not_retried() {
    let body = json!({"type":"error","error":{"type":"rate_limit_error",
        "message":"Your credit balance is too low to access the Anthropic API."}});
    let r = run([Turn::http_error(429).with_body(body), Turn::text("never")]).await;
    assert_eq!(r.requests(), 1);
    assert_eq!(r.error().category(), "billing_limit");
    assert!(r.error().to_string().contains("Not retrying"));
}

#[tokio::test]
async fn context_overflow_retries_with_a_smaller_max_tokens() {
    let body = json!({"type":"error","error":{"type":"invalid_request_error",
        "message":"input length and `max_tokens` exceed context limit: 150000 + 64000 > 200000, decrease input length or `max_tokens` and try again"}});
    let r = run([Turn::http_error(400).with_body(body), Turn::text("fits")]).await;
    assert_eq!(r.requests(), 2);
    assert!(r.sleeps.is_empty());
    let bodies: Vec<u64> = r
        .server
        .requests()
        .iter()
        .map(|q| q.body["max_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(bodies, vec![8192, 200_000 - 150_000 - 1000]);
    assert_eq!(r.retries()[0].error, "context_overflow");
    assert_eq!(r.message().to_message().text(), "fits");
}

#[tokio::test]
async fn context_overflow_leaving_under_3000_tokens_is_a_clear_error() {
    let body = json!({"type":"error","error":{"type":"invalid_request_error",
        "message":"input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000"}});
    let r = run([Turn::http_error(400).with_body(body), Turn::text("never")]).await;
    assert_eq!(r.requests(), 1);
    assert!(r.error().is_prompt_too_long());
    assert!(r.error().to_string().contains("/compact"));
}

#[tokio::test]
async fn stream_cut_after_4_events_is_retried_and_the_partial_message_dropped() {
    let r = run([
        Turn::text("first try, lost").cut_after(4),
        Turn::text("second try"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps.len(), 1);
    r.assert_backoff();
    let retry = &r.retries()[0];
    assert_eq!(retry.error, "stream_cut");
    assert!(
        retry.message.contains("after 4 events"),
        "{}",
        retry.message
    );
    // Four raw events of the void attempt, then the retry notice.
    let before_retry = r
        .items
        .iter()
        .take_while(|i| !matches!(i, Ok(ModelEvent::Retry(_))))
        .filter(|i| matches!(i, Ok(ModelEvent::Stream(_))))
        .count();
    assert_eq!(before_retry, 4);
    assert_eq!(r.message().to_message().text(), "second try");
}

#[tokio::test]
async fn clean_eof_before_message_stop_is_a_stream_cut() {
    let r = run([
        Turn::text("lost")
            .cut_after(4)
            .with_cut_mode(gyre_testkit::CutMode::Eof),
        Turn::text("ok"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.retries()[0].error, "stream_cut");
}

#[tokio::test]
async fn a_95s_stall_trips_the_idle_timeout_and_is_retried() {
    // Real sockets, so a short idle timeout stands in for the default 90 s (the default
    // itself, with a 95 s stall, is tested on tokio's paused clock in the unit tests).
    let mut options = RetryOptions::default();
    options.policy.stream_idle_timeout = Duration::from_millis(300);
    let r = run_with(
        Script::new([
            Turn::text("stalls").stall(3, Duration::from_secs(95)),
            Turn::text("after stall"),
        ]),
        options,
    )
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps.len(), 1);
    r.assert_backoff();
    let retry = &r.retries()[0];
    assert_eq!(retry.error, "stream_idle");
    assert!(retry.message.contains("300 ms"), "{}", retry.message);
    assert_eq!(r.message().to_message().text(), "after stall");
}

#[test]
fn default_idle_timeout_is_90000_ms() {
    let policy = RetryPolicy::from_lookup(|_| None);
    assert_eq!(policy.stream_idle_timeout, Duration::from_millis(90_000));
    assert_eq!(
        RetryPolicy::default().stream_idle_timeout,
        Duration::from_millis(90_000)
    );
}

#[tokio::test]
async fn in_stream_overloaded_error_is_retried() {
    let r = run([
        Turn::text("partial").error_event(3, "overloaded_error", "Overloaded"),
        Turn::text("complete"),
    ])
    .await;
    assert_eq!(r.requests(), 2);
    assert_eq!(r.sleeps.len(), 1);
    r.assert_backoff();
    let retry = &r.retries()[0];
    assert_eq!((retry.error.as_str(), retry.status), ("overloaded", None));
    assert_eq!(r.message().to_message().text(), "complete");
}

#[tokio::test]
async fn in_stream_overloads_count_toward_the_fallback() {
    let over = || Turn::text("x").error_event(1, "overloaded_error", "Overloaded");
    let r = run_with(
        Script::new([over(), Turn::http_error(529), over(), Turn::text("never")]),
        RetryOptions::default().with_fallback_model("small"),
    )
    .await;
    assert_eq!(r.requests(), 3);
    assert!(matches!(r.error(), ApiError::FallbackTriggered { .. }));
}

/// One request to `base_url` with the default budget (10 retries) and a recording
/// sleeper: the items and the waits.
async fn run_at(base_url: String) -> (Vec<Result<ModelEvent, ApiError>>, Vec<Duration>) {
    let client: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(ClientConfig::new("k").with_base_url(base_url)).unwrap());
    let sleeper = RecordingSleeper::new();
    let options = RetryOptions::default().with_sleeper(Arc::new(sleeper.clone()));
    let items = stream_with_retry(client, request(), options, CancellationToken::new())
        .collect()
        .await;
    (items, sleeper.sleeps())
}

/// Gave up on an unreachable API for `reason` after 3 attempts (2 short waits, each
/// shown as "attempt n/2"), with advice that names ANTHROPIC_BASE_URL.
fn assert_gave_up_unreachable(
    items: &[Result<ModelEvent, ApiError>],
    sleeps: &[Duration],
    reason: UnreachableReason,
) -> String {
    let statuses: Vec<(u32, u32, &str)> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Retry(s)) => Some((s.attempt, s.max_retries, s.error.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        statuses,
        vec![(1, 2, "unreachable"), (2, 2, "unreachable")],
        "{items:?}"
    );
    assert_eq!(sleeps.len(), 2);
    let policy = RetryPolicy::default();
    for (n, d) in (1..).zip(sleeps) {
        let (lo, hi) = policy.delay_bounds(n);
        assert!(*d >= lo && *d <= hi, "retry {n}: {d:?}");
    }
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert_eq!(e.category(), "unreachable");
    assert!(
        matches!(e, ApiError::Unreachable { reason: r, .. } if *r == reason),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains("ANTHROPIC_BASE_URL"), "{text}");
    assert!(text.contains(reason.label()), "{text}");
    text
}

#[tokio::test]
async fn connection_refused_gives_up_after_three_attempts() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (items, sleeps) = run_at(format!("http://127.0.0.1:{port}")).await;
    let text = assert_gave_up_unreachable(&items, &sleeps, UnreachableReason::Refused);
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
}

#[tokio::test]
async fn a_host_name_that_does_not_resolve_gives_up_after_three_attempts() {
    // `.invalid` is reserved (RFC 2606): the local resolver answers "no such name".
    let (items, sleeps) = run_at("http://gyre-test.invalid".to_owned()).await;
    let text = assert_gave_up_unreachable(&items, &sleeps, UnreachableReason::Dns);
    assert!(text.contains("gyre-test.invalid"), "{text}");
}

#[tokio::test]
async fn a_failed_tls_handshake_gives_up_after_three_attempts() {
    // https:// to a server that answers in plain HTTP: the handshake fails locally.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut hello = [0u8; 1024];
            let _ = socket.read(&mut hello).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
            let _ = socket.shutdown().await;
        }
    });
    let (items, sleeps) = run_at(format!("https://127.0.0.1:{port}")).await;
    server.abort();
    assert_gave_up_unreachable(&items, &sleeps, UnreachableReason::Tls);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_connection_closed_before_the_response_keeps_the_whole_budget() {
    // Connected, then closed without an answer: that can heal, so it is not unreachable.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let server = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        while let Ok((mut socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = [0u8; 1024];
            let _ = socket.read(&mut head).await;
            drop(socket);
        }
    });
    let (items, sleeps) = run_at(format!("http://127.0.0.1:{port}")).await;
    server.abort();
    assert_eq!(sleeps.len(), 10);
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 11);
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert_ne!(e.category(), "unreachable", "{e:?}");
}

#[tokio::test]
async fn an_overloaded_api_still_gets_the_whole_budget() {
    let r = run((0..12).map(|_| Turn::http_error(529))).await;
    assert_eq!(r.requests(), 11);
    assert_eq!(r.sleeps.len(), 10);
    r.assert_backoff();
    let shown: Vec<(u32, u32)> = r
        .retries()
        .iter()
        .map(|s| (s.attempt, s.max_retries))
        .collect();
    assert_eq!(shown, (1..=10).map(|n| (n, 10)).collect::<Vec<_>>());
    assert!(r.retries().iter().all(|s| !s.is_unreachable()));
    assert_eq!(r.error().category(), "overloaded");
}

#[tokio::test]
async fn tool_use_blocks_complete_at_their_stop_and_bad_json_is_an_input_error() {
    let r = run([Turn::response([
        Block::text("Let me look."),
        Block::tool_use_with_id("toolu_1", "Read", json!({"file_path": "/etc/hosts"})),
        Block::raw_tool_use("Bash", "{\"command\": \"ls"),
    ])])
    .await;
    let blocks: Vec<(usize, ContentBlock)> = r
        .items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::BlockComplete { index, block }) => Some((*index, block.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(blocks.len(), 3);
    assert_eq!(
        blocks[1],
        (
            1,
            ContentBlock::tool_use("toolu_1", "Read", json!({"file_path": "/etc/hosts"}))
        )
    );
    let (_, name, input) = blocks[2].1.as_tool_use().unwrap();
    assert_eq!(name, "Bash");
    assert_eq!(invalid_tool_input(input).unwrap().raw, "{\"command\": \"ls");
    assert_eq!(r.message().content.len(), 3);
}

/// Never wakes: only cancellation can end a wait.
struct ForeverSleeper;

impl Sleeper for ForeverSleeper {
    fn sleep(&self, _: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn abort_during_a_retry_sleep_ends_at_once() {
    let server = TestServer::start(Script::new([Turn::http_error(529), Turn::text("never")]))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let options = RetryOptions::default().with_sleeper(Arc::new(ForeverSleeper));
    let mut s = stream_with_retry(client(&server), request(), options, cancel.clone());
    let Some(Ok(ModelEvent::Retry(status))) = s.next().await else {
        panic!("expected a retry notice")
    };
    assert_eq!(status.status, Some(529));
    cancel.cancel();
    let next = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap();
    assert_eq!(next, Some(Err(ApiError::Aborted)));
    assert_eq!(s.next().await, None);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn abort_during_a_stream_ends_at_once() {
    let server = TestServer::start(Script::new([Turn::text("hangs").stall_forever(2)]))
        .await
        .unwrap();
    let cancel = CancellationToken::new();
    let mut s = stream_with_retry(
        client(&server),
        request(),
        RetryOptions::default(),
        cancel.clone(),
    );
    for _ in 0..2 {
        assert!(matches!(s.next().await, Some(Ok(ModelEvent::Stream(_)))));
    }
    cancel.cancel();
    let next = tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .unwrap();
    assert_eq!(next, Some(Err(ApiError::Aborted)));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn cache_markers_reach_the_server() {
    let server = TestServer::start(Script::new([Turn::text("ok")]))
        .await
        .unwrap();
    let mut req = request();
    req.system = vec![SystemBlock::text("You are gyre.")];
    req.tools = vec![ToolDefinition {
        name: "Read".into(),
        description: "Reads a file".into(),
        input_schema: json!({"type": "object"}),
        cache_control: None,
        kind: None,
        options: serde_json::Map::new(),
    }];
    add_cache_markers(&mut req);
    let items: Vec<_> = stream_with_retry(
        client(&server),
        req,
        RetryOptions::default(),
        CancellationToken::new(),
    )
    .collect()
    .await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Message(_)))));
    let body = &server.requests()[0].body;
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["cache_control"], ephemeral);
    assert_eq!(body["tools"][0]["cache_control"], ephemeral);
    assert_eq!(
        body["messages"][0]["content"][0]["cache_control"],
        ephemeral
    );
}
