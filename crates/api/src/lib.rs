//! The Anthropic Messages API for gyre: streaming, retry, fallback and fixtures.
//!
//! - [`ModelClient`] is the seam: one attempt, raw [`StreamEvent`](gyre_protocol::StreamEvent)s.
//!   [`AnthropicClient`] speaks HTTP (reqwest + SSE); [`RecordingClient`] and
//!   [`ReplayClient`] write and serve fixtures.
//! - [`MessageAssembler`] turns events into completed content blocks and the final
//!   [`AssistantResponse`](gyre_protocol::AssistantResponse). Pure.
//! - [`stream_with_retry`] is what the loop calls: raw events, completed blocks, retry
//!   notices and the final message, retried as [`RetryPolicy`] says.
//! - [`with_retry`] is the same policy for any operation: usable on its own.
//! - [`add_cache_markers`] places the prompt-caching breakpoints.
//!
//! This crate depends on `gyre-protocol` only. It knows nothing of tools, compaction
//! or the loop.
//!
//! # Retrying your own call
//!
//! [`with_retry`] wraps any operation that returns a future. It yields a
//! [`RetryEvent::Retrying`] before each wait and ends with [`RetryEvent::Done`] or a
//! [`RetryError`]. A closure `Fn(&E) -> bool` is enough as a classifier; implement
//! [`RetryClassify`] to pass server delay hints, overloads or context overflows.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use futures::StreamExt;
//! use gyre_api::{RecordingSleeper, RetryEvent, RetryOptions, RetryPolicy, with_retry};
//! use tokio_util::sync::CancellationToken;
//!
//! #[derive(Debug)]
//! struct Flaky;
//! impl std::fmt::Display for Flaky {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         f.write_str("service unavailable")
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let calls = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&calls);
//! // Fails twice, then answers 42.
//! let operation = move |_ctx| {
//!     let n = counter.fetch_add(1, Ordering::SeqCst);
//!     async move { if n < 2 { Err(Flaky) } else { Ok(42) } }
//! };
//! // A recording sleeper makes the example instant; the default sleeps for real.
//! let sleeper = RecordingSleeper::new();
//! let options = RetryOptions::new(RetryPolicy::default()).with_sleeper(Arc::new(sleeper.clone()));
//!
//! let mut events = with_retry(operation, |_: &Flaky| true, options, CancellationToken::new());
//! let mut answer = None;
//! while let Some(event) = events.next().await {
//!     match event.expect("retried until success") {
//!         RetryEvent::Retrying(s) => println!("retrying in {} ms (attempt {}/{})", s.delay_ms, s.attempt, s.max_retries),
//!         RetryEvent::Done(v) => answer = Some(v),
//!     }
//! }
//! assert_eq!(answer, Some(42));
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! assert_eq!(sleeper.sleeps().len(), 2); // 500 ms then 1 s, plus up to 25% jitter
//! # }
//! ```

#![warn(missing_docs)]

mod assemble;
#[cfg(feature = "bedrock")]
mod aws_credentials;
mod aws_profile;
mod aws_source;
#[cfg(feature = "bedrock")]
mod bedrock;
mod cache;
mod client;
mod encode;
mod error;
mod fixture;
#[cfg(feature = "client")]
mod http_client;
#[cfg(feature = "client")]
mod key_helper;
mod model_ids;
mod network;
mod retry;
mod sse;
mod stream;
#[cfg(feature = "vertex")]
mod vertex;

pub use assemble::{
    Assembled, INVALID_JSON_ERROR_KEY, INVALID_JSON_KEY, InvalidToolInput, MessageAssembler,
    invalid_tool_input,
};
#[cfg(feature = "bedrock")]
pub use bedrock::BEDROCK_ANTHROPIC_VERSION;
pub use cache::add_cache_markers;
pub use client::{
    ANTHROPIC_VERSION, AwsContainer, AwsCredentialSource, AwsCredentials, AwsProfile, AwsSso,
    AwsWebIdentity, Backend, BedrockOptions, ClientConfig, Credential, DEFAULT_BASE_URL,
    EventStream, GoogleCredentialSource, KeyHelper, ModelClient, VertexOptions, default_user_agent,
};
pub use encode::BodyEncoder;
#[cfg(feature = "client")]
pub use error::describe_transport_error;
pub use error::{
    ApiError, ContextOverflow, ServerHints, Service, UnreachableReason, parse_retry_after,
    parse_retry_after_ms,
};
pub use fixture::{FixtureEntry, RecordingClient, ReplayClient};
#[cfg(feature = "client")]
pub use http_client::AnthropicClient;
pub use model_ids::{bedrock_model_id, bedrock_region_prefix, vertex_model_id};
#[cfg(feature = "client")]
pub use network::ensure_crypto_provider;
pub use network::{
    CA_BUNDLE_VARS, CA_DIR_VAR, CaBundle, NetworkError, NetworkOptions, redact_proxy,
};
pub use retry::{
    ApiErrorClassifier, BASE_DELAY, DEFAULT_MAX_RETRIES, DEFAULT_STREAM_IDLE_TIMEOUT,
    HEARTBEAT_INTERVAL, MAX_CONSECUTIVE_OVERLOADED, MAX_DELAY, MAX_RETRIES_LIMIT,
    MAX_UNREACHABLE_RETRIES, MIN_OVERFLOW_OUTPUT_TOKENS, OVERFLOW_SAFETY_BUFFER, QuerySource,
    RecordingSleeper, RetryClassify, RetryContext, RetryError, RetryEvent, RetryOptions,
    RetryPolicy, RetryStatus, RetryStream, Sleeper, TokioSleeper, UNATTENDED_MAX_DELAY, with_retry,
};
pub use sse::{
    MAX_SSE_LINE_BYTES, ServerSentEvent, SseError, chunk_text, encode_sse, server_sent_events,
    sse_events,
};
pub use stream::{ModelEvent, ModelEventStream, stream_with_retry};
#[cfg(feature = "vertex")]
pub use vertex::VERTEX_ANTHROPIC_VERSION;

/// Cloud credentials this close to their expiry (a Vertex access token, temporary AWS
/// keys) are fetched anew before the next request.
pub const REFRESH_MARGIN: std::time::Duration = std::time::Duration::from_secs(5 * 60);
