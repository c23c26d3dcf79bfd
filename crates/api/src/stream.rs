//! `stream_with_retry`: one model response, streamed, retried as the policy says.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use gyre_protocol::{AssistantResponse, ContentBlock, MessagesRequest, StreamEvent};
use tokio_util::sync::CancellationToken;

use crate::ApiError;
use crate::assemble::{Assembled, MessageAssembler};
use crate::client::ModelClient;
use crate::retry::{
    ApiErrorClassifier, Decision, RetryOptions, RetryState, RetryStatus, sleep_or_cancel,
};

/// What the loop sees of a model call.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Every raw event, as it arrives (for `--include-partial-messages`).
    Stream(StreamEvent),
    /// A content block, at its `content_block_stop`. A tool_use input that was not a
    /// JSON object is replaced by the [`crate::INVALID_JSON_KEY`] marker (see
    /// [`crate::invalid_tool_input`]); the loop answers that call with an input error.
    BlockComplete {
        /// The block's position in the message's content.
        index: usize,
        /// The complete block.
        block: ContentBlock,
    },
    /// An attempt failed and we wait before the next. Everything yielded since the
    /// attempt began is void: the partial message is dropped.
    Retry(RetryStatus),
    /// The final assembled message, after `message_stop`. Always the last item.
    Message(AssistantResponse),
}

/// The stream [`stream_with_retry`] returns.
pub type ModelEventStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ApiError>> + Send>>;

/// Streams one response from `client`, retrying failed attempts as `options` says.
///
/// Ends with [`ModelEvent::Message`], or with the error that could not be retried:
/// the last failure, [`ApiError::FallbackTriggered`] after 3 consecutive overloads when
/// a fallback model is set, or [`ApiError::Aborted`] when `cancel` fires (during a
/// request, a stream or a wait). A stream that ends before `message_stop` or sends
/// nothing for `policy.stream_idle_timeout` counts as a failed attempt. After a context
/// overflow the next attempt is sent with a smaller `max_tokens`. Every attempt shares
/// `request`; it is copied only to lower `max_tokens`.
pub fn stream_with_retry(
    client: Arc<dyn ModelClient>,
    request: impl Into<Arc<MessagesRequest>>,
    options: RetryOptions,
    cancel: CancellationToken,
) -> ModelEventStream {
    let mut request = request.into();
    Box::pin(async_stream::stream! {
        let mut state = RetryState::new(&options);
        let idle = options.policy.stream_idle_timeout;
        loop {
            if cancel.is_cancelled() {
                yield Err(ApiError::Aborted);
                return;
            }
            let mut events = client.stream(Arc::clone(&request), cancel.child_token());
            let mut assembler = MessageAssembler::new();
            let outcome: Result<AssistantResponse, ApiError> = loop {
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break Err(ApiError::Aborted),
                    n = tokio::time::timeout(idle, events.next()) => n,
                };
                let event = match next {
                    Err(_) => {
                        break Err(ApiError::StreamIdle {
                            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
                            events: assembler.events(),
                        })
                    }
                    Ok(None) => break Err(ApiError::StreamCut { events: assembler.events() }),
                    Ok(Some(Err(e))) => break Err(e),
                    Ok(Some(Ok(event))) => event,
                };
                let assembled = assembler.push(&event);
                yield Ok(ModelEvent::Stream(event));
                match assembled {
                    Ok(None) => {}
                    Ok(Some(Assembled::Block { index, block })) => {
                        yield Ok(ModelEvent::BlockComplete { index, block });
                    }
                    Ok(Some(Assembled::Message(message))) => break Ok(message),
                    Err(e) => break Err(e),
                }
            };
            drop(events);
            let error = match outcome {
                Ok(message) => {
                    yield Ok(ModelEvent::Message(message));
                    return;
                }
                Err(ApiError::Aborted) => {
                    yield Err(ApiError::Aborted);
                    return;
                }
                Err(e) => e,
            };
            match state.decide(&error, &ApiErrorClassifier, &options) {
                Decision::GiveUp => {
                    yield Err(error);
                    return;
                }
                Decision::Fallback(fallback) => {
                    yield Err(ApiError::FallbackTriggered { original: request.model.clone(), fallback });
                    return;
                }
                Decision::Retry { waits, max_tokens_override } => {
                    if let Some(max_tokens) = max_tokens_override {
                        Arc::make_mut(&mut request).max_tokens = max_tokens;
                    }
                    for (status, wait) in waits {
                        yield Ok(ModelEvent::Retry(status));
                        if !sleep_or_cancel(options.sleeper.as_ref(), wait, &cancel).await {
                            yield Err(ApiError::Aborted);
                            return;
                        }
                    }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ServerHints;
    use crate::retry::{QuerySource, RecordingSleeper, RetryPolicy};
    use gyre_protocol::{Message, StopReason};
    use serde_json::json;
    use std::collections::VecDeque;
    use std::sync::Mutex;
    use std::time::Duration;

    /// One scripted attempt: these items, then the end of the stream (or a stall).
    #[derive(Clone)]
    struct Attempt {
        items: Vec<Result<StreamEvent, ApiError>>,
        stall: bool,
    }

    #[derive(Default)]
    struct FakeClient {
        attempts: Mutex<VecDeque<Attempt>>,
        requests: Mutex<Vec<MessagesRequest>>,
    }

    impl FakeClient {
        fn new(attempts: Vec<Attempt>) -> Arc<Self> {
            Arc::new(Self {
                attempts: Mutex::new(attempts.into()),
                requests: Mutex::default(),
            })
        }
        fn requests(&self) -> Vec<MessagesRequest> {
            self.requests.lock().unwrap().clone()
        }
    }

    impl ModelClient for FakeClient {
        fn stream(
            &self,
            request: Arc<MessagesRequest>,
            _cancel: CancellationToken,
        ) -> crate::EventStream {
            self.requests.lock().unwrap().push((*request).clone());
            let attempt = self
                .attempts
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or(Attempt {
                    items: vec![Err(ApiError::Fixture {
                        message: "script exhausted".into(),
                    })],
                    stall: false,
                });
            let head = futures::stream::iter(attempt.items);
            if attempt.stall {
                Box::pin(head.chain(futures::stream::pending()))
            } else {
                Box::pin(head)
            }
        }
    }

    fn ev(v: serde_json::Value) -> StreamEvent {
        serde_json::from_value(v).unwrap()
    }

    fn text_reply(text: &str) -> Vec<StreamEvent> {
        vec![
            ev(
                json!({"type":"message_start","message":{"id":"msg","model":"claude-test","usage":{"input_tokens":5}}}),
            ),
            ev(
                json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            ),
            ev(
                json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":text}}),
            ),
            ev(json!({"type":"content_block_stop","index":0})),
            ev(
                json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}),
            ),
            StreamEvent::MessageStop,
        ]
    }

    fn ok(text: &str) -> Attempt {
        Attempt {
            items: text_reply(text).into_iter().map(Ok).collect(),
            stall: false,
        }
    }

    fn fail(e: ApiError) -> Attempt {
        Attempt {
            items: vec![Err(e)],
            stall: false,
        }
    }

    fn overloaded() -> ApiError {
        ApiError::Overloaded {
            status: Some(529),
            message: "Overloaded".into(),
            hints: ServerHints::default(),
        }
    }

    fn request() -> MessagesRequest {
        MessagesRequest::new("claude-test", 8192, vec![Message::user_text("hi")])
    }

    fn options(sleeper: &RecordingSleeper) -> RetryOptions {
        RetryOptions::default()
            .with_sleeper(Arc::new(sleeper.clone()))
            .with_jitter_seed(11)
    }

    async fn run(
        client: Arc<FakeClient>,
        options: RetryOptions,
    ) -> Vec<Result<ModelEvent, ApiError>> {
        stream_with_retry(client, request(), options, CancellationToken::new())
            .collect()
            .await
    }

    fn retries(items: &[Result<ModelEvent, ApiError>]) -> Vec<RetryStatus> {
        items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::Retry(s)) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn happy_path_yields_events_blocks_then_message() {
        let client = FakeClient::new(vec![ok("Hello")]);
        let items = run(client.clone(), options(&RecordingSleeper::new())).await;
        let kinds: Vec<&str> = items
            .iter()
            .map(|i| match i {
                Ok(ModelEvent::Stream(_)) => "stream",
                Ok(ModelEvent::BlockComplete { .. }) => "block",
                Ok(ModelEvent::Retry(_)) => "retry",
                Ok(ModelEvent::Message(_)) => "message",
                Err(_) => "error",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "stream", "stream", "stream", "stream", "block", "stream", "stream", "message"
            ]
        );
        let Some(Ok(ModelEvent::Message(m))) = items.last() else {
            panic!()
        };
        assert_eq!(m.to_message().text(), "Hello");
        assert_eq!(m.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(client.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_repeated_message_start_is_ignored_and_another_message_is_retried() {
        let mut repeated = ok("once");
        repeated.items.insert(1, repeated.items[0].clone());
        let mut restarted = ok("lost");
        let mut other = text_reply("x").remove(0);
        if let StreamEvent::MessageStart { message } = &mut other {
            message.id = "msg_other".into();
        }
        restarted.items.insert(3, Ok(other));
        let client = FakeClient::new(vec![repeated, restarted, ok("again")]);
        let first = run(client.clone(), options(&RecordingSleeper::new())).await;
        let Some(Ok(ModelEvent::Message(m))) = first.last() else {
            panic!("{first:?}")
        };
        assert_eq!(m.to_message().text(), "once");
        assert!(retries(&first).is_empty());

        let second = run(client.clone(), options(&RecordingSleeper::new())).await;
        let r = retries(&second);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].error, "stream_restarted");
        assert!(r[0].message.contains("msg_other"), "{}", r[0].message);
        let Some(Ok(ModelEvent::Message(m))) = second.last() else {
            panic!("{second:?}")
        };
        assert_eq!(m.to_message().text(), "again");
        assert_eq!(client.requests().len(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn stall_of_95s_trips_the_default_90s_idle_timeout() {
        let mut stalled = ok("never");
        stalled.items.truncate(3);
        stalled.stall = true;
        let client = FakeClient::new(vec![stalled, ok("after stall")]);
        let started = tokio::time::Instant::now();
        let sleeper = RecordingSleeper::new();
        let items = run(client.clone(), options(&sleeper)).await;
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_secs(90) && waited < Duration::from_secs(95),
            "{waited:?}"
        );
        let r = retries(&items);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].error, "stream_idle");
        assert!(r[0].message.contains("90000 ms"));
        assert!(matches!(items.last(), Some(Ok(ModelEvent::Message(_)))));
        assert_eq!(client.requests().len(), 2);
    }

    #[tokio::test]
    async fn three_overloads_with_fallback_trigger_it() {
        let client = FakeClient::new(vec![
            fail(overloaded()),
            fail(overloaded()),
            fail(overloaded()),
            ok("x"),
        ]);
        let sleeper = RecordingSleeper::new();
        let items = run(
            client.clone(),
            options(&sleeper).with_fallback_model("claude-small"),
        )
        .await;
        assert_eq!(
            items.last(),
            Some(&Err(ApiError::FallbackTriggered {
                original: "claude-test".into(),
                fallback: "claude-small".into()
            }))
        );
        assert_eq!(client.requests().len(), 3);
        assert_eq!(sleeper.sleeps().len(), 2);
    }

    #[tokio::test]
    async fn overload_streak_is_broken_by_other_errors() {
        let server = ApiError::Server {
            status: 500,
            message: "x".into(),
            hints: ServerHints::default(),
        };
        let client = FakeClient::new(vec![
            fail(overloaded()),
            fail(overloaded()),
            fail(server),
            fail(overloaded()),
            fail(overloaded()),
            ok("made it"),
        ]);
        let items = run(
            client.clone(),
            options(&RecordingSleeper::new()).with_fallback_model("small"),
        )
        .await;
        assert!(matches!(items.last(), Some(Ok(ModelEvent::Message(_)))));
        assert_eq!(client.requests().len(), 6);
    }

    #[tokio::test]
    async fn background_source_never_retries_529() {
        let client = FakeClient::new(vec![fail(overloaded()), ok("x")]);
        let items = run(
            client.clone(),
            options(&RecordingSleeper::new()).with_source(QuerySource::Background),
        )
        .await;
        assert_eq!(items, vec![Err(overloaded())]);
        assert_eq!(client.requests().len(), 1);
    }

    #[tokio::test]
    async fn unattended_mode_retries_rate_limits_past_the_budget_with_heartbeats() {
        let limited = |ms: Option<u64>| ApiError::RateLimited {
            message: "slow down".into(),
            hints: ServerHints {
                retry_after_ms: ms,
                ..ServerHints::default()
            },
        };
        let mut attempts: Vec<Attempt> = (0..4).map(|_| fail(limited(None))).collect();
        attempts.push(fail(limited(Some(75_000))));
        attempts.push(ok("finally"));
        let client = FakeClient::new(attempts);
        let sleeper = RecordingSleeper::new();
        let mut opts = options(&sleeper);
        opts.policy = RetryPolicy {
            max_retries: 2,
            unattended: true,
            ..RetryPolicy::default()
        };
        let items = run(client.clone(), opts).await;
        assert!(matches!(items.last(), Some(Ok(ModelEvent::Message(_)))));
        assert_eq!(client.requests().len(), 6);
        let r = retries(&items);
        // The 75 s wait is announced three times: 75 s, 45 s and 15 s left.
        let last: Vec<(u32, u64)> = r
            .iter()
            .filter(|s| s.attempt == 5)
            .map(|s| (s.attempt, s.delay_ms))
            .collect();
        assert_eq!(last, vec![(5, 75_000), (5, 45_000), (5, 15_000)]);
        assert!(
            sleeper
                .sleeps()
                .iter()
                .all(|d| *d <= Duration::from_secs(30))
        );
    }

    #[tokio::test]
    async fn authentication_failure_is_retried_once() {
        let auth = ApiError::Authentication {
            message: "invalid x-api-key".into(),
            service: crate::Service::Anthropic,
            hints: ServerHints::default(),
        };
        let client = FakeClient::new(vec![fail(auth.clone()), fail(auth.clone()), ok("x")]);
        let items = run(client.clone(), options(&RecordingSleeper::new())).await;
        assert_eq!(items.last(), Some(&Err(auth)));
        assert_eq!(client.requests().len(), 2);
    }

    #[tokio::test]
    async fn context_overflow_that_leaves_too_little_is_a_clear_error() {
        let overflow = ApiError::ContextOverflow {
            input_tokens: 197_500,
            max_tokens: 8192,
            context_limit: 200_000,
            message: "input length and `max_tokens` exceed context limit: 197500 + 8192 > 200000"
                .into(),
        };
        let client = FakeClient::new(vec![fail(overflow.clone()), ok("x")]);
        let items = run(client.clone(), options(&RecordingSleeper::new())).await;
        assert_eq!(items, vec![Err(overflow)]);
        assert!(items[0].as_ref().unwrap_err().is_prompt_too_long());
        assert_eq!(client.requests().len(), 1);
    }

    #[tokio::test]
    async fn cancel_mid_stream_aborts_at_once() {
        let mut stalled = ok("x");
        stalled.items.truncate(2);
        stalled.stall = true;
        let client = FakeClient::new(vec![stalled]);
        let cancel = CancellationToken::new();
        let mut s = stream_with_retry(
            client,
            request(),
            options(&RecordingSleeper::new()),
            cancel.clone(),
        );
        assert!(matches!(s.next().await, Some(Ok(ModelEvent::Stream(_)))));
        assert!(matches!(s.next().await, Some(Ok(ModelEvent::Stream(_)))));
        cancel.cancel();
        assert_eq!(s.next().await, Some(Err(ApiError::Aborted)));
        assert_eq!(s.next().await, None);
    }
}
