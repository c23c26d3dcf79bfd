//! gyre's retry policy around a call that is not the Messages API: your own service,
//! your own error type, told apart by a `RetryClassify` implementation.
//!
//! A made-up inventory service fails with a 503, then a 429 that says when to come back,
//! then answers. The same 529 "overloaded" answer is retried for a foreground caller
//! and given up on at once for a background one (`QuerySource::Background`), as gyre
//! does for its own side requests.
//!
//! Run it with `cargo run -p gyre-api --example retry_your_own_call`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use gyre_api::{
    QuerySource, RecordingSleeper, RetryClassify, RetryError, RetryEvent, RetryOptions,
    RetryPolicy, with_retry,
};
use tokio_util::sync::CancellationToken;

/// What the service answers when it fails.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ServiceError {
    status: u16,
    /// The service's `Retry-After`, when it sent one.
    retry_after: Option<Duration>,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the inventory service answered {}", self.status)
    }
}

/// How the retry layer reads a `ServiceError`.
struct ServiceClassifier;

impl RetryClassify<ServiceError> for ServiceClassifier {
    fn is_retryable(&self, error: &ServiceError) -> bool {
        matches!(error.status, 408 | 429 | 500..=599)
    }
    fn retry_after(&self, error: &ServiceError) -> Option<Duration> {
        error.retry_after
    }
    fn is_overloaded(&self, error: &ServiceError) -> bool {
        error.status == 529
    }
    fn is_rate_limited(&self, error: &ServiceError) -> bool {
        error.status == 429
    }
    fn status(&self, error: &ServiceError) -> Option<u16> {
        Some(error.status)
    }
    fn category(&self, error: &ServiceError) -> &'static str {
        match error.status {
            429 => "rate_limit",
            529 => "overloaded",
            _ => "server_error",
        }
    }
}

/// A stand-in for the service: answers from a script, one entry per call.
fn service(
    script: Vec<Result<u32, ServiceError>>,
) -> impl FnMut(gyre_api::RetryContext) -> futures::future::Ready<Result<u32, ServiceError>> {
    let script = Arc::new(Mutex::new(VecDeque::from(script)));
    move |_attempt| {
        let next = script.lock().ok().and_then(|mut s| s.pop_front());
        futures::future::ready(next.unwrap_or(Ok(0)))
    }
}

fn error(status: u16, retry_after: Option<Duration>) -> ServiceError {
    ServiceError {
        status,
        retry_after,
    }
}

/// Runs the call to its end, printing each wait; the answer or the final error.
async fn run(
    call: impl FnMut(gyre_api::RetryContext) -> futures::future::Ready<Result<u32, ServiceError>>
    + Send
    + 'static,
    options: RetryOptions,
) -> Result<u32, RetryError<ServiceError>> {
    let mut events = with_retry(call, ServiceClassifier, options, CancellationToken::new());
    while let Some(event) = events.next().await {
        match event? {
            RetryEvent::Retrying(status) => println!(
                "  {} ({}): retry {}/{} in {} ms",
                status.message, status.error, status.attempt, status.max_retries, status.delay_ms
            ),
            RetryEvent::Done(stock) => return Ok(stock),
        }
    }
    Err(RetryError::Aborted)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A recording sleeper returns at once and remembers the waits; leave it out to
    // really wait (tokio's clock).
    let sleeper = RecordingSleeper::new();
    let options = RetryOptions::new(RetryPolicy::default())
        .with_sleeper(Arc::new(sleeper.clone()))
        .with_jitter_seed(7);

    println!("foreground: 503, then 429 with Retry-After: 2, then the answer");
    let stock = run(
        service(vec![
            Err(error(503, None)),
            Err(error(429, Some(Duration::from_secs(2)))),
            Ok(17),
        ]),
        options.clone(),
    )
    .await?;
    println!("  answer: {stock} in stock");
    assert_eq!(stock, 17);
    let waits = sleeper.sleeps();
    assert_eq!(waits.len(), 2);
    // The service's Retry-After is the wait, not the policy's backoff.
    assert_eq!(waits[1], Duration::from_secs(2));

    println!("foreground: 529, then the answer");
    let stock = run(service(vec![Err(error(529, None)), Ok(5)]), options.clone()).await?;
    assert_eq!(stock, 5);

    println!("background: 529 is not worth a wait");
    let background = options.with_source(QuerySource::Background);
    let outcome = run(service(vec![Err(error(529, None)), Ok(5)]), background).await;
    println!(
        "  gave up: {:?}",
        outcome.as_ref().err().map(ToString::to_string)
    );
    assert!(matches!(outcome, Err(RetryError::Operation(e)) if e.status == 529));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
