//! Property: for any sequence of faults, every delay lies inside the policy and the
//! outcome is the first success or the error the policy documents.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use gyre_api::{
    ApiError, EventStream, ModelClient, ModelEvent, QuerySource, RecordingSleeper, RetryOptions,
    RetryPolicy, ServerHints, stream_with_retry,
};
use gyre_protocol::{ErrorDetail, Message, MessagesRequest, StreamEvent};
use proptest::prelude::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    Overloaded529,
    InStreamOverloaded,
    RateLimited { retry_after_ms: Option<u64> },
    Server500,
    Server500NoRetry,
    Connection,
    StreamCut,
    Unauthorized,
    BadRequest,
    Success,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        3 => Just(Fault::Overloaded529),
        2 => Just(Fault::InStreamOverloaded),
        2 => proptest::option::of(0u64..5_000).prop_map(|retry_after_ms| Fault::RateLimited { retry_after_ms }),
        2 => Just(Fault::Server500),
        1 => Just(Fault::Server500NoRetry),
        2 => Just(Fault::Connection),
        2 => Just(Fault::StreamCut),
        1 => Just(Fault::Unauthorized),
        1 => Just(Fault::BadRequest),
        2 => Just(Fault::Success),
    ]
}

fn ev(v: serde_json::Value) -> StreamEvent {
    serde_json::from_value(v).unwrap()
}

fn reply(n: usize) -> Vec<StreamEvent> {
    vec![
        ev(json!({"type":"message_start","message":{"id":format!("msg_{n}"),"model":"m"}})),
        ev(
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        ev(
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":format!("attempt {n}")}}),
        ),
        ev(json!({"type":"content_block_stop","index":0})),
        ev(
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}),
        ),
        StreamEvent::MessageStop,
    ]
}

fn http(status: u16, should_retry: Option<bool>, retry_after_ms: Option<u64>) -> ApiError {
    let hints = ServerHints {
        retry_after_ms,
        should_retry,
        request_id: None,
    };
    ApiError::from_response(status, hints, "", "m", "http://fake/v1/messages")
}

fn attempt(n: usize, fault: Fault) -> Vec<Result<StreamEvent, ApiError>> {
    let partial = |k: usize| reply(n).into_iter().take(k).map(Ok).collect::<Vec<_>>();
    match fault {
        Fault::Success => reply(n).into_iter().map(Ok).collect(),
        Fault::Overloaded529 => vec![Err(http(529, None, None))],
        Fault::InStreamOverloaded => {
            let mut v = partial(3);
            v.push(Ok(StreamEvent::Error {
                error: ErrorDetail {
                    kind: "overloaded_error".into(),
                    message: "Overloaded".into(),
                },
            }));
            v
        }
        Fault::RateLimited { retry_after_ms } => vec![Err(http(429, None, retry_after_ms))],
        Fault::Server500 => vec![Err(http(500, None, None))],
        Fault::Server500NoRetry => vec![Err(http(500, Some(false), None))],
        Fault::Connection => vec![Err(ApiError::Connection {
            message: "refused".into(),
        })],
        Fault::StreamCut => partial(4),
        Fault::Unauthorized => vec![Err(http(401, None, None))],
        Fault::BadRequest => vec![Err(http(400, None, None))],
    }
}

struct FakeClient {
    faults: Mutex<VecDeque<Fault>>,
    calls: Mutex<usize>,
}

impl ModelClient for FakeClient {
    fn stream(&self, _request: Arc<MessagesRequest>, _cancel: CancellationToken) -> EventStream {
        let mut calls = self.calls.lock().unwrap();
        let n = *calls;
        *calls += 1;
        let fault = self
            .faults
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Fault::Success);
        Box::pin(futures::stream::iter(attempt(n, fault)))
    }
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Success { message_id: String },
    Error { category: &'static str },
    Fallback,
}

/// The retry policy, written out plainly: a background request gives up on overload;
/// the third overloaded error in a row switches to the fallback model if there is one;
/// a 400 or a non-retryable 500 ends it, and so does a second 401; anything else is
/// retried until `max_retries`. Returns (requests, waits, outcome).
/// A wait is `Ok(exact)` for a server hint or `Err(retry number)` for backoff.
fn oracle(
    faults: &[Fault],
    max_retries: u32,
    fallback: bool,
    background: bool,
) -> (usize, Vec<Result<Duration, u32>>, Outcome) {
    let (mut retries, mut streak, mut auth) = (0u32, 0u32, 0u32);
    let mut waits = Vec::new();
    for (i, f) in faults
        .iter()
        .copied()
        .chain(std::iter::once(Fault::Success))
        .enumerate()
    {
        let category = match f {
            Fault::Success => {
                return (
                    i + 1,
                    waits,
                    Outcome::Success {
                        message_id: format!("msg_{i}"),
                    },
                );
            }
            Fault::Overloaded529 | Fault::InStreamOverloaded => "overloaded",
            Fault::RateLimited { .. } => "rate_limit",
            Fault::Server500 | Fault::Server500NoRetry => "server_error",
            Fault::Connection => "connection",
            Fault::StreamCut => "stream_cut",
            Fault::Unauthorized => "authentication_failed",
            Fault::BadRequest => "invalid_request",
        };
        let overloaded = category == "overloaded";
        streak = if overloaded { streak + 1 } else { 0 };
        let give_up = (i + 1, Outcome::Error { category });
        if overloaded && background {
            return (give_up.0, waits, give_up.1);
        }
        if overloaded && streak >= 3 && fallback {
            return (i + 1, waits, Outcome::Fallback);
        }
        if matches!(f, Fault::BadRequest | Fault::Server500NoRetry) {
            return (give_up.0, waits, give_up.1);
        }
        if f == Fault::Unauthorized {
            auth += 1;
            if auth > 1 {
                return (give_up.0, waits, give_up.1);
            }
        }
        if retries >= max_retries {
            return (give_up.0, waits, give_up.1);
        }
        retries += 1;
        waits.push(match f {
            Fault::RateLimited {
                retry_after_ms: Some(ms),
            } => Ok(Duration::from_millis(ms)),
            _ => Err(retries),
        });
    }
    unreachable!("the sequence ends in a success")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn delays_stay_in_policy_and_outcome_is_documented(
        faults in proptest::collection::vec(fault(), 0..14),
        max_retries in 0u32..=12,
        fallback in any::<bool>(),
        background in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let client = Arc::new(FakeClient { faults: Mutex::new(faults.clone().into()), calls: Mutex::new(0) });
        let sleeper = RecordingSleeper::new();
        let mut options = RetryOptions::new(RetryPolicy { max_retries, ..RetryPolicy::default() })
            .with_sleeper(Arc::new(sleeper.clone()))
            .with_jitter_seed(seed)
            .with_source(if background { QuerySource::Background } else { QuerySource::Foreground });
        if fallback {
            options = options.with_fallback_model("fallback");
        }
        let request = MessagesRequest::new("m", 1000, vec![Message::user_text("hi")]);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let items: Vec<_> = rt.block_on(
            stream_with_retry(client.clone(), request, options, CancellationToken::new()).collect(),
        );

        let (requests, waits, expected) = oracle(&faults, max_retries, fallback, background);
        prop_assert_eq!(*client.calls.lock().unwrap(), requests);

        let sleeps = sleeper.sleeps();
        prop_assert_eq!(sleeps.len(), waits.len());
        let policy = RetryPolicy::default();
        for (slept, wait) in sleeps.iter().zip(&waits) {
            match wait {
                Ok(exact) => prop_assert_eq!(slept, exact),
                Err(n) => {
                    let (lo, hi) = policy.delay_bounds(*n);
                    prop_assert!(*slept >= lo && *slept <= hi, "retry {}: {:?} not in {:?}..={:?}", n, slept, lo, hi);
                    prop_assert!(*slept <= Duration::from_secs(40));
                }
            }
        }

        let statuses: Vec<u32> = items.iter().filter_map(|i| match i {
            Ok(ModelEvent::Retry(s)) => Some(s.attempt),
            _ => None,
        }).collect();
        prop_assert_eq!(statuses, (1..=u32::try_from(waits.len()).unwrap()).collect::<Vec<_>>());

        // Only one final message ever, and only as the last item.
        let messages = items.iter().filter(|i| matches!(i, Ok(ModelEvent::Message(_)))).count();
        let got = match items.last() {
            Some(Ok(ModelEvent::Message(m))) => Outcome::Success { message_id: m.id.clone() },
            Some(Err(ApiError::FallbackTriggered { original, fallback })) => {
                prop_assert_eq!(original.as_str(), "m");
                prop_assert_eq!(fallback.as_str(), "fallback");
                Outcome::Fallback
            }
            Some(Err(e)) => Outcome::Error { category: e.category() },
            other => return Err(TestCaseError::fail(format!("stream ended with {other:?}"))),
        };
        prop_assert_eq!(messages, usize::from(matches!(got, Outcome::Success { .. })));
        prop_assert_eq!(got, expected);
    }
}
