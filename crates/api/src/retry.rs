//! The retry layer: policy, delays, and `with_retry`, a stream of status events that
//! ends in the operation's result.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::ApiError;
use crate::error::ContextOverflow;

/// Retries after the first attempt, by default (as Claude Code: 10).
pub const DEFAULT_MAX_RETRIES: u32 = 10;
/// `GYRE_MAX_RETRIES` is clamped to this.
pub const MAX_RETRIES_LIMIT: u32 = 15;
/// Base of the exponential backoff (retry 1 waits this, before jitter); it doubles with
/// each retry.
pub const BASE_DELAY: Duration = Duration::from_millis(500);
/// Cap of the exponential backoff before jitter (outside unattended mode).
pub const MAX_DELAY: Duration = Duration::from_secs(32);
/// Default `GYRE_STREAM_IDLE_TIMEOUT_MS`.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_millis(90_000);
/// Delay cap in unattended mode (`GYRE_UNATTENDED_RETRY=1`).
pub const UNATTENDED_MAX_DELAY: Duration = Duration::from_secs(300);
/// Longest wait without a status event in unattended mode: a longer wait is split into
/// heartbeats this long.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(30);
/// Retries for an unreachable API (connection refused, DNS, TLS: [`ApiError::Unreachable`]):
/// those do not heal in seconds, so 3 attempts 0.5 s and 1 s apart (plus jitter) instead of
/// the full budget. `GYRE_MAX_RETRIES` below this lowers it too.
pub const MAX_UNREACHABLE_RETRIES: u32 = 2;
/// Consecutive overloaded errors (529) before switching to the fallback model, when
/// there is one.
pub const MAX_CONSECUTIVE_OVERLOADED: u32 = 3;
/// Tokens kept free when shrinking `max_tokens` after a context overflow: the retry
/// asks for the context limit minus the input minus this.
pub const OVERFLOW_SAFETY_BUFFER: u64 = 1000;
/// Below this many output tokens a context-overflow retry is pointless: the error is
/// returned instead.
pub const MIN_OVERFLOW_OUTPUT_TOKENS: u64 = 3000;

/// How often and how long to retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (`GYRE_MAX_RETRIES`, at most 15).
    pub max_retries: u32,
    /// No stream event for this long ends the attempt (`GYRE_STREAM_IDLE_TIMEOUT_MS`).
    pub stream_idle_timeout: Duration,
    /// `GYRE_UNATTENDED_RETRY=1`: 429 and 529 retry without limit, delays capped at
    /// 5 minutes, a status event at least every 30 s while waiting.
    pub unattended: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: DEFAULT_MAX_RETRIES,
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            unattended: false,
        }
    }
}

impl RetryPolicy {
    /// Reads `GYRE_MAX_RETRIES`, `GYRE_STREAM_IDLE_TIMEOUT_MS` and
    /// `GYRE_UNATTENDED_RETRY`. Call once at start-up; values that do not parse are
    /// ignored with a warning.
    #[must_use]
    pub fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`RetryPolicy::from_env`] over any variable lookup.
    #[must_use]
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let mut policy = Self::default();
        let number = |name: &str| -> Option<u64> {
            let raw = lookup(name)?;
            match raw.trim().parse::<u64>() {
                Ok(n) => Some(n),
                Err(_) => {
                    tracing::warn!("ignoring {name}={raw:?}: not a non-negative integer");
                    None
                }
            }
        };
        if let Some(n) = number("GYRE_MAX_RETRIES") {
            policy.max_retries =
                u32::try_from(n.min(u64::from(MAX_RETRIES_LIMIT))).unwrap_or(MAX_RETRIES_LIMIT);
        }
        if let Some(ms) = number("GYRE_STREAM_IDLE_TIMEOUT_MS").filter(|ms| *ms > 0) {
            policy.stream_idle_timeout = Duration::from_millis(ms);
        }
        policy.unattended = lookup("GYRE_UNATTENDED_RETRY")
            .is_some_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "yes"));
        policy
    }

    /// The backoff for retry `n` (1-based) before jitter:
    /// `min(500 ms · 2^(n−1), 32 s)`, or capped at 5 minutes in unattended mode.
    #[must_use]
    pub fn base_delay(&self, retry: u32) -> Duration {
        let cap = if self.unattended {
            UNATTENDED_MAX_DELAY
        } else {
            MAX_DELAY
        };
        let shift = retry.saturating_sub(1).min(20);
        let base = BASE_DELAY.saturating_mul(1u32 << shift);
        base.min(cap)
    }

    /// The range a delay for retry `n` may fall in without a server hint: the base
    /// delay plus up to 25% jitter (capped at 5 minutes in unattended mode).
    #[must_use]
    pub fn delay_bounds(&self, retry: u32) -> (Duration, Duration) {
        let base = self.base_delay(retry);
        let max = base + base / 4;
        (
            base,
            if self.unattended {
                max.min(UNATTENDED_MAX_DELAY)
            } else {
                max
            },
        )
    }

    /// The delay before retry `n`: a server hint wins (capped at 5 minutes in unattended
    /// mode); otherwise the base delay plus uniform jitter of up to 25%.
    #[must_use]
    pub fn delay(
        &self,
        retry: u32,
        server_hint: Option<Duration>,
        rng: &mut fastrand::Rng,
    ) -> Duration {
        if let Some(hint) = server_hint {
            return if self.unattended {
                hint.min(UNATTENDED_MAX_DELAY)
            } else {
                hint
            };
        }
        let (base, max) = self.delay_bounds(retry);
        let base_ms = duration_ms(base);
        let jitter_ms = rng.u64(0..=base_ms / 4);
        (base + Duration::from_millis(jitter_ms)).min(max)
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Who is asking: background side requests (titles, summaries…) never retry a 529,
/// so they do not add load to an overloaded service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuerySource {
    /// The main loop, compaction, SDK calls: the user is waiting on this.
    #[default]
    Foreground,
    /// Side requests whose failure costs little.
    Background,
}

/// Waits. Injected so that tests of a ten-retry schedule run in milliseconds.
pub trait Sleeper: Send + Sync {
    /// A future that completes after `duration`.
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;
}

/// The real thing: `tokio::time::sleep` (so tokio's paused test clock works too).
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// Records every requested wait and returns at once: for tests and examples.
#[derive(Debug, Clone, Default)]
pub struct RecordingSleeper {
    sleeps: Arc<Mutex<Vec<Duration>>>,
}

impl RecordingSleeper {
    /// A sleeper with no waits recorded.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The waits requested so far, in order.
    #[must_use]
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        if let Ok(mut s) = self.sleeps.lock() {
            s.push(duration);
        }
        Box::pin(std::future::ready(()))
    }
}

/// Everything a retrying call needs besides the operation.
#[derive(Clone)]
pub struct RetryOptions {
    /// How many attempts and how long to wait between them.
    pub policy: RetryPolicy,
    /// Model to switch to after 3 consecutive overloaded errors.
    pub fallback_model: Option<String>,
    /// Who is asking: background requests give up on overloads at once.
    pub source: QuerySource,
    /// Waits between attempts (not the stream idle timeout, which uses tokio's clock).
    pub sleeper: Arc<dyn Sleeper>,
    /// Seed for the jitter; `None` draws one at random.
    pub jitter_seed: Option<u64>,
}

impl fmt::Debug for RetryOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryOptions")
            .field("policy", &self.policy)
            .field("fallback_model", &self.fallback_model)
            .field("source", &self.source)
            .field("jitter_seed", &self.jitter_seed)
            .finish_non_exhaustive()
    }
}

impl Default for RetryOptions {
    fn default() -> Self {
        Self::new(RetryPolicy::default())
    }
}

impl RetryOptions {
    /// Foreground, no fallback, real sleeps.
    #[must_use]
    pub fn new(policy: RetryPolicy) -> Self {
        Self {
            policy,
            fallback_model: None,
            source: QuerySource::Foreground,
            sleeper: Arc::new(TokioSleeper),
            jitter_seed: None,
        }
    }

    /// Switches to `model` after 3 overloaded errors in a row.
    #[must_use]
    pub fn with_fallback_model(mut self, model: impl Into<String>) -> Self {
        self.fallback_model = Some(model.into());
        self
    }

    /// Sets who is asking (foreground or background).
    #[must_use]
    pub fn with_source(mut self, source: QuerySource) -> Self {
        self.source = source;
        self
    }

    /// Waits through `sleeper` (a [`RecordingSleeper`] in tests).
    #[must_use]
    pub fn with_sleeper(mut self, sleeper: Arc<dyn Sleeper>) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// Makes the jitter of the delays reproducible.
    #[must_use]
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }
}

/// One wait between attempts, for the UI: "retrying in 2 s (attempt 2/10)".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryStatus {
    /// Which retry this wait precedes (1-based); in unattended mode it may exceed
    /// `max_retries`.
    pub attempt: u32,
    /// The retry budget of the policy.
    pub max_retries: u32,
    /// Time left to wait. Unattended waits repeat the event (same attempt, less left)
    /// at least every 30 s.
    pub delay_ms: u64,
    /// HTTP status of the failure, if it had one.
    pub status: Option<u16>,
    /// Short category: `rate_limit`, `overloaded`, `server_error`, `connection`,
    /// `unreachable`, `timeout`, `stream_cut`, `stream_idle`, `authentication_failed`,
    /// `context_overflow`…
    pub error: String,
    /// The failure, as the user should read it.
    pub message: String,
}

impl RetryStatus {
    /// The [`RetryStatus::error`] category of an unreachable API
    /// ([`ApiError::Unreachable`]).
    pub const UNREACHABLE: &'static str = "unreachable";

    /// Whether this wait is one of the few before giving up on an unreachable API
    /// (refused, DNS, TLS): front-ends say that stopping now loses nothing.
    #[must_use]
    pub fn is_unreachable(&self) -> bool {
        self.error == Self::UNREACHABLE
    }
}

/// How the retry layer sees an error. Implement it for your own error type (or pass a
/// closure `Fn(&E) -> bool` for the retryable test alone) to reuse [`with_retry`].
pub trait RetryClassify<E> {
    /// Whether another identical attempt could succeed.
    fn is_retryable(&self, error: &E) -> bool;
    /// The server's requested delay (`retry-after-ms` / `retry-after`).
    fn retry_after(&self, _error: &E) -> Option<Duration> {
        None
    }
    /// A 529 / `overloaded_error`: counts toward the fallback and is never retried for
    /// background sources.
    fn is_overloaded(&self, _error: &E) -> bool {
        false
    }
    /// A 429: retried without limit in unattended mode, like overloads.
    fn is_rate_limited(&self, _error: &E) -> bool {
        false
    }
    /// A 401: retried once only.
    fn is_authentication(&self, _error: &E) -> bool {
        false
    }
    /// A failure to connect that will not heal soon (refused, DNS, TLS): retried at most
    /// [`MAX_UNREACHABLE_RETRIES`] times, with the first, short delays of the backoff.
    fn is_unreachable(&self, _error: &E) -> bool {
        false
    }
    /// A context overflow, retried with a smaller `max_tokens`.
    fn context_overflow(&self, _error: &E) -> Option<ContextOverflow> {
        None
    }
    /// The HTTP status of the failure, if it had one (for [`RetryStatus::status`]).
    fn status(&self, _error: &E) -> Option<u16> {
        None
    }
    /// Short category for [`RetryStatus::error`].
    fn category(&self, _error: &E) -> &'static str {
        "error"
    }
    /// What went wrong, for [`RetryStatus::message`]: shown while the layer waits to try
    /// again, so it should not advise the user to retry. The error's `Display` by default.
    fn describe(&self, error: &E) -> String
    where
        E: std::fmt::Display,
    {
        error.to_string()
    }
}

impl<E, F: Fn(&E) -> bool> RetryClassify<E> for F {
    fn is_retryable(&self, error: &E) -> bool {
        self(error)
    }
}

/// Classifies [`ApiError`] for [`with_retry`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiErrorClassifier;

impl RetryClassify<ApiError> for ApiErrorClassifier {
    fn is_retryable(&self, error: &ApiError) -> bool {
        error.is_retryable()
    }
    fn retry_after(&self, error: &ApiError) -> Option<Duration> {
        error
            .hints()
            .and_then(crate::error::ServerHints::retry_after)
    }
    fn is_overloaded(&self, error: &ApiError) -> bool {
        error.is_overloaded()
    }
    fn is_rate_limited(&self, error: &ApiError) -> bool {
        matches!(error, ApiError::RateLimited { .. })
    }
    fn is_authentication(&self, error: &ApiError) -> bool {
        matches!(error, ApiError::Authentication { .. })
    }
    fn is_unreachable(&self, error: &ApiError) -> bool {
        error.is_unreachable()
    }
    fn context_overflow(&self, error: &ApiError) -> Option<ContextOverflow> {
        error.context_overflow()
    }
    fn status(&self, error: &ApiError) -> Option<u16> {
        error.status()
    }
    fn category(&self, error: &ApiError) -> &'static str {
        error.category()
    }
    fn describe(&self, error: &ApiError) -> String {
        error.retry_reason()
    }
}

/// What an attempt is told about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetryContext {
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Set after a context overflow: send this `max_tokens` instead.
    pub max_tokens_override: Option<u32>,
}

/// An item of [`with_retry`]'s stream.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryEvent<T> {
    /// An attempt failed; waiting before the next.
    Retrying(RetryStatus),
    /// The operation's success; always the last item.
    Done(T),
}

/// How a retried operation ends without success.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetryError<E> {
    /// The last error: not retryable, or the budget is spent.
    #[error("{0}")]
    Operation(E),
    /// The cancellation token fired during an attempt or a wait.
    #[error("aborted")]
    Aborted,
    /// Overloaded too often in a row and a fallback model is configured.
    #[error("overloaded; switching to the fallback model {fallback}: {error}")]
    FallbackTriggered {
        /// The model used from now on.
        fallback: String,
        /// The error of the last overloaded attempt.
        error: E,
    },
}

impl From<RetryError<ApiError>> for ApiError {
    /// `FallbackTriggered` loses the original model name here: [`crate::stream_with_retry`]
    /// builds it from the request instead.
    fn from(e: RetryError<ApiError>) -> Self {
        match e {
            RetryError::Operation(e) => e,
            RetryError::Aborted => ApiError::Aborted,
            RetryError::FallbackTriggered { fallback, .. } => ApiError::FallbackTriggered {
                original: String::new(),
                fallback,
            },
        }
    }
}

/// The stream [`with_retry`] returns.
pub type RetryStream<T, E> =
    Pin<Box<dyn Stream<Item = Result<RetryEvent<T>, RetryError<E>>> + Send>>;

/// What to do after a failed attempt.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Wait these chunks (a status event before each), then try again.
    Retry {
        waits: Vec<(RetryStatus, Duration)>,
        max_tokens_override: Option<u32>,
    },
    /// Give up with the error.
    GiveUp,
    /// Switch to this model.
    Fallback(String),
}

/// The state of one retried call: counters and the jitter source. Shared by
/// [`with_retry`] and [`crate::stream_with_retry`].
#[derive(Debug)]
pub(crate) struct RetryState {
    retries: u32,
    consecutive_overloaded: u32,
    authentication_failures: u32,
    unreachable_failures: u32,
    rng: fastrand::Rng,
}

impl RetryState {
    pub(crate) fn new(options: &RetryOptions) -> Self {
        Self {
            retries: 0,
            consecutive_overloaded: 0,
            authentication_failures: 0,
            unreachable_failures: 0,
            rng: options
                .jitter_seed
                .map_or_else(fastrand::Rng::new, fastrand::Rng::with_seed),
        }
    }

    /// 1-based number of the next attempt.
    pub(crate) fn attempt(&self) -> u32 {
        self.retries + 1
    }

    pub(crate) fn decide<E: fmt::Display, C: RetryClassify<E> + ?Sized>(
        &mut self,
        error: &E,
        classifier: &C,
        options: &RetryOptions,
    ) -> Decision {
        let policy = &options.policy;
        let overloaded = classifier.is_overloaded(error);
        if overloaded {
            self.consecutive_overloaded += 1;
        } else {
            self.consecutive_overloaded = 0;
        }
        if overloaded && options.source == QuerySource::Background {
            return Decision::GiveUp;
        }
        if overloaded
            && self.consecutive_overloaded >= MAX_CONSECUTIVE_OVERLOADED
            && let Some(fallback) = &options.fallback_model
        {
            return Decision::Fallback(fallback.clone());
        }
        let status = |retry: u32, max_retries: u32, delay: Duration| RetryStatus {
            attempt: retry,
            max_retries,
            delay_ms: duration_ms(delay),
            status: classifier.status(error),
            error: classifier.category(error).to_owned(),
            message: classifier.describe(error),
        };
        if let Some(overflow) = classifier.context_overflow(error) {
            let available = overflow.available_output_tokens(OVERFLOW_SAFETY_BUFFER);
            if available < MIN_OVERFLOW_OUTPUT_TOKENS || self.retries >= policy.max_retries {
                return Decision::GiveUp;
            }
            self.retries += 1;
            return Decision::Retry {
                waits: vec![(
                    status(self.retries, policy.max_retries, Duration::ZERO),
                    Duration::ZERO,
                )],
                max_tokens_override: Some(u32::try_from(available).unwrap_or(u32::MAX)),
            };
        }
        if !classifier.is_retryable(error) {
            return Decision::GiveUp;
        }
        if classifier.is_authentication(error) {
            self.authentication_failures += 1;
            if self.authentication_failures > 1 {
                return Decision::GiveUp;
            }
        }
        let unreachable = classifier.is_unreachable(error);
        if unreachable {
            self.unreachable_failures += 1;
            if self.unreachable_failures > MAX_UNREACHABLE_RETRIES {
                return Decision::GiveUp;
            }
        }
        let unlimited = policy.unattended && (overloaded || classifier.is_rate_limited(error));
        if !unlimited && self.retries >= policy.max_retries {
            return Decision::GiveUp;
        }
        self.retries += 1;
        // An unreachable API waits the backoff's first steps, counted by its own
        // failures, and shows the budget it really has: the retries so far plus the
        // unreachable ones left ("attempt 1/2" when it failed that way from the start).
        let (backoff_step, max_retries) = if unreachable {
            let left = MAX_UNREACHABLE_RETRIES - self.unreachable_failures;
            (
                self.unreachable_failures,
                (self.retries + left).min(policy.max_retries),
            )
        } else {
            (self.retries, policy.max_retries)
        };
        let delay = policy.delay(backoff_step, classifier.retry_after(error), &mut self.rng);
        let waits = if policy.unattended {
            heartbeat_chunks(delay)
                .into_iter()
                .map(|(left, chunk)| (status(self.retries, max_retries, left), chunk))
                .collect()
        } else {
            vec![(status(self.retries, max_retries, delay), delay)]
        };
        Decision::Retry {
            waits,
            max_tokens_override: None,
        }
    }
}

/// Splits a wait into chunks of at most [`HEARTBEAT_INTERVAL`]: `(time left, chunk)`.
fn heartbeat_chunks(delay: Duration) -> Vec<(Duration, Duration)> {
    let mut out = Vec::new();
    let mut left = delay;
    loop {
        let chunk = left.min(HEARTBEAT_INTERVAL);
        out.push((left, chunk));
        left -= chunk;
        if left.is_zero() {
            return out;
        }
    }
}

/// Sleeps unless cancelled first; `false` when cancelled.
pub(crate) async fn sleep_or_cancel(
    sleeper: &dyn Sleeper,
    duration: Duration,
    cancel: &CancellationToken,
) -> bool {
    if cancel.is_cancelled() {
        return false;
    }
    if duration.is_zero() {
        return true;
    }
    tokio::select! {
        biased;
        () = cancel.cancelled() => false,
        () = sleeper.sleep(duration) => true,
    }
}

/// Runs `operation` until it succeeds, retrying as `options.policy` says.
///
/// The stream yields a [`RetryEvent::Retrying`] before each wait (several, as
/// heartbeats, in unattended mode) and ends with [`RetryEvent::Done`] or an error.
/// `classifier` decides what is retryable; the operation gets a [`RetryContext`]
/// with the attempt number and, after a context overflow, a smaller `max_tokens`.
/// Cancelling `cancel` ends an attempt or a wait at once with [`RetryError::Aborted`].
pub fn with_retry<T, E, C, F, Fut>(
    mut operation: F,
    classifier: C,
    options: RetryOptions,
    cancel: CancellationToken,
) -> RetryStream<T, E>
where
    T: Send + 'static,
    E: fmt::Display + Send + 'static,
    C: RetryClassify<E> + Send + 'static,
    F: FnMut(RetryContext) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, E>> + Send,
{
    Box::pin(async_stream::stream! {
        let mut state = RetryState::new(&options);
        let mut context = RetryContext { attempt: 1, max_tokens_override: None };
        loop {
            if cancel.is_cancelled() {
                yield Err(RetryError::Aborted);
                return;
            }
            context.attempt = state.attempt();
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                r = operation(context) => Some(r),
            };
            let error = match result {
                None => {
                    yield Err(RetryError::Aborted);
                    return;
                }
                Some(Ok(value)) => {
                    yield Ok(RetryEvent::Done(value));
                    return;
                }
                Some(Err(e)) => e,
            };
            match state.decide(&error, &classifier, &options) {
                Decision::GiveUp => {
                    yield Err(RetryError::Operation(error));
                    return;
                }
                Decision::Fallback(fallback) => {
                    yield Err(RetryError::FallbackTriggered { fallback, error });
                    return;
                }
                Decision::Retry { waits, max_tokens_override } => {
                    if max_tokens_override.is_some() {
                        context.max_tokens_override = max_tokens_override;
                    }
                    for (status, chunk) in waits {
                        yield Ok(RetryEvent::Retrying(status));
                        if !sleep_or_cancel(options.sleeper.as_ref(), chunk, &cancel).await {
                            yield Err(RetryError::Aborted);
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
    use futures::StreamExt;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn env(pairs: &[(&str, &str)]) -> RetryPolicy {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RetryPolicy::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_follow_the_spec() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_retries, 10);
        assert_eq!(p.stream_idle_timeout, Duration::from_millis(90_000));
        assert!(!p.unattended);
        assert_eq!(env(&[]), p);
    }

    #[test]
    fn env_overrides_and_clamps() {
        assert_eq!(env(&[("GYRE_MAX_RETRIES", "3")]).max_retries, 3);
        assert_eq!(env(&[("GYRE_MAX_RETRIES", "99")]).max_retries, 15);
        assert_eq!(env(&[("GYRE_MAX_RETRIES", "lots")]).max_retries, 10);
        assert_eq!(
            env(&[("GYRE_STREAM_IDLE_TIMEOUT_MS", "250")]).stream_idle_timeout,
            Duration::from_millis(250)
        );
        assert!(env(&[("GYRE_UNATTENDED_RETRY", "1")]).unattended);
        assert!(!env(&[("GYRE_UNATTENDED_RETRY", "0")]).unattended);
    }

    #[test]
    fn base_delays_double_up_to_32s() {
        let p = RetryPolicy::default();
        let secs: Vec<f64> = (1..=9).map(|n| p.base_delay(n).as_secs_f64()).collect();
        assert_eq!(secs, vec![0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 32.0]);
        let u = RetryPolicy {
            unattended: true,
            ..p
        };
        assert_eq!(u.base_delay(12), UNATTENDED_MAX_DELAY);
        assert_eq!(u.base_delay(100), UNATTENDED_MAX_DELAY);
    }

    #[test]
    fn jitter_stays_within_25_percent() {
        let p = RetryPolicy::default();
        let mut rng = fastrand::Rng::with_seed(7);
        for n in 1..=15 {
            for _ in 0..50 {
                let d = p.delay(n, None, &mut rng);
                let (lo, hi) = p.delay_bounds(n);
                assert!(
                    d >= lo && d <= hi,
                    "retry {n}: {d:?} not in {lo:?}..={hi:?}"
                );
            }
        }
    }

    #[test]
    fn server_hint_wins_and_is_capped_only_when_unattended() {
        let p = RetryPolicy::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let hint = Some(Duration::from_secs(600));
        assert_eq!(p.delay(1, hint, &mut rng), Duration::from_secs(600));
        let u = RetryPolicy {
            unattended: true,
            ..p
        };
        assert_eq!(u.delay(1, hint, &mut rng), UNATTENDED_MAX_DELAY);
    }

    #[test]
    fn heartbeats_split_long_waits() {
        let chunks = heartbeat_chunks(Duration::from_secs(75));
        assert_eq!(
            chunks,
            vec![
                (Duration::from_secs(75), Duration::from_secs(30)),
                (Duration::from_secs(45), Duration::from_secs(30)),
                (Duration::from_secs(15), Duration::from_secs(15)),
            ]
        );
    }

    #[derive(Debug, Clone, PartialEq)]
    struct Flaky(&'static str);
    impl fmt::Display for Flaky {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    fn options(sleeper: &RecordingSleeper) -> RetryOptions {
        RetryOptions::default()
            .with_sleeper(Arc::new(sleeper.clone()))
            .with_jitter_seed(3)
    }

    #[tokio::test]
    async fn generic_operation_succeeds_after_two_failures() {
        let sleeper = RecordingSleeper::new();
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let stream = with_retry(
            move |ctx: RetryContext| {
                let n = c.fetch_add(1, Ordering::SeqCst);
                async move {
                    assert_eq!(ctx.attempt, n + 1);
                    if n < 2 { Err(Flaky("flaky")) } else { Ok(n) }
                }
            },
            |_: &Flaky| true,
            options(&sleeper),
            CancellationToken::new(),
        );
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items.len(), 3);
        assert!(matches!(
            items[0],
            Ok(RetryEvent::Retrying(RetryStatus { attempt: 1, .. }))
        ));
        assert!(matches!(
            items[1],
            Ok(RetryEvent::Retrying(RetryStatus { attempt: 2, .. }))
        ));
        assert_eq!(items[2], Ok(RetryEvent::Done(2)));
        let sleeps = sleeper.sleeps();
        assert_eq!(sleeps.len(), 2);
        let p = RetryPolicy::default();
        for (i, d) in sleeps.iter().enumerate() {
            let (lo, hi) = p.delay_bounds(u32::try_from(i).unwrap() + 1);
            assert!(*d >= lo && *d <= hi);
        }
    }

    #[tokio::test]
    async fn non_retryable_error_ends_at_once() {
        let sleeper = RecordingSleeper::new();
        let stream = with_retry(
            |_| async { Err::<(), _>(Flaky("fatal")) },
            |_: &Flaky| false,
            options(&sleeper),
            CancellationToken::new(),
        );
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items, vec![Err(RetryError::Operation(Flaky("fatal")))]);
        assert!(sleeper.sleeps().is_empty());
    }

    #[tokio::test]
    async fn budget_is_max_retries_plus_one_attempts() {
        let sleeper = RecordingSleeper::new();
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let mut opts = options(&sleeper);
        opts.policy.max_retries = 4;
        let stream = with_retry(
            move |_| {
                c.fetch_add(1, Ordering::SeqCst);
                async { Err::<(), _>(Flaky("down")) }
            },
            |_: &Flaky| true,
            opts,
            CancellationToken::new(),
        );
        let items: Vec<_> = stream.collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        assert_eq!(items.len(), 5);
        assert_eq!(items[4], Err(RetryError::Operation(Flaky("down"))));
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_during_wait_aborts() {
        let cancel = CancellationToken::new();
        let opts = RetryOptions::default().with_jitter_seed(1);
        let mut stream = with_retry(
            |_| async { Err::<(), _>(Flaky("down")) },
            |_: &Flaky| true,
            opts,
            cancel.clone(),
        );
        assert!(matches!(
            stream.next().await,
            Some(Ok(RetryEvent::Retrying(_)))
        ));
        cancel.cancel();
        assert_eq!(stream.next().await, Some(Err(RetryError::Aborted)));
        assert_eq!(stream.next().await, None);
    }

    /// "down" is unreachable (refused, DNS, TLS), "busy" an ordinary retryable failure.
    struct Reach;
    impl RetryClassify<Flaky> for Reach {
        fn is_retryable(&self, _: &Flaky) -> bool {
            true
        }
        fn is_unreachable(&self, error: &Flaky) -> bool {
            error.0 == "down"
        }
        fn category(&self, error: &Flaky) -> &'static str {
            if error.0 == "down" {
                RetryStatus::UNREACHABLE
            } else {
                "error"
            }
        }
    }

    /// Runs `errors` in order (then success) through `with_retry` with `Reach`; returns the
    /// attempts made, the statuses shown and the last item.
    async fn run_reach(
        errors: &'static [&'static str],
        max_retries: u32,
    ) -> (u32, Vec<RetryStatus>, Vec<Duration>, bool) {
        let sleeper = RecordingSleeper::new();
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        let mut opts = options(&sleeper);
        opts.policy.max_retries = max_retries;
        let stream = with_retry(
            move |_| {
                let n = c.fetch_add(1, Ordering::SeqCst) as usize;
                async move { errors.get(n).map_or(Ok(()), |e| Err(Flaky(e))) }
            },
            Reach,
            opts,
            CancellationToken::new(),
        );
        let items: Vec<_> = stream.collect().await;
        let statuses = items
            .iter()
            .filter_map(|i| match i {
                Ok(RetryEvent::Retrying(s)) => Some(s.clone()),
                _ => None,
            })
            .collect();
        let done = matches!(items.last(), Some(Ok(RetryEvent::Done(()))));
        (
            calls.load(Ordering::SeqCst),
            statuses,
            sleeper.sleeps(),
            done,
        )
    }

    #[tokio::test]
    async fn an_unreachable_api_gets_two_quick_retries_only() {
        let (calls, statuses, sleeps, done) = run_reach(&["down"; 12], 10).await;
        assert!(!done);
        assert_eq!(calls, 1 + MAX_UNREACHABLE_RETRIES);
        let shown: Vec<(u32, u32)> = statuses
            .iter()
            .map(|s| (s.attempt, s.max_retries))
            .collect();
        assert_eq!(shown, vec![(1, 2), (2, 2)]);
        assert!(statuses.iter().all(RetryStatus::is_unreachable));
        // The backoff's first two steps: 0.5 s and 1 s, plus up to 25%.
        let p = RetryPolicy::default();
        for (n, d) in (1..).zip(&sleeps) {
            let (lo, hi) = p.delay_bounds(n);
            assert!(*d >= lo && *d <= hi, "retry {n}: {d:?}");
        }
        assert_eq!(sleeps.len(), 2);
        // The same errors when it heals in time: success.
        let (calls, _, _, done) = run_reach(&["down", "down"], 10).await;
        assert!(done);
        assert_eq!(calls, 3);
    }

    #[tokio::test]
    async fn unreachable_failures_count_apart_from_the_others() {
        // Three ordinary failures, then unreachable: two more retries at most, with short
        // delays, and the budget shown as what is really left (attempt 4 of at most 5).
        let (calls, statuses, sleeps, done) =
            run_reach(&["busy", "busy", "busy", "down", "down", "down"], 10).await;
        assert!(!done);
        assert_eq!(calls, 6);
        let shown: Vec<(u32, u32)> = statuses
            .iter()
            .map(|s| (s.attempt, s.max_retries))
            .collect();
        assert_eq!(shown, vec![(1, 10), (2, 10), (3, 10), (4, 5), (5, 5)]);
        let p = RetryPolicy::default();
        assert!(sleeps[3] <= p.delay_bounds(1).1 && sleeps[4] <= p.delay_bounds(2).1);
        // A smaller GYRE_MAX_RETRIES lowers the unreachable budget too.
        let (calls, statuses, _, _) = run_reach(&["down"; 5], 1).await;
        assert_eq!(calls, 2);
        assert_eq!(statuses[0].max_retries, 1);
        let (calls, _, _, _) = run_reach(&["down"; 5], 0).await;
        assert_eq!(calls, 1);
    }

    #[tokio::test]
    async fn context_overflow_retries_with_smaller_max_tokens() {
        struct Overflow;
        impl RetryClassify<Flaky> for Overflow {
            fn is_retryable(&self, _: &Flaky) -> bool {
                false
            }
            fn context_overflow(&self, _: &Flaky) -> Option<ContextOverflow> {
                Some(ContextOverflow {
                    input_tokens: 150_000,
                    max_tokens: 64_000,
                    context_limit: 200_000,
                })
            }
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = Arc::clone(&seen);
        let sleeper = RecordingSleeper::new();
        let stream = with_retry(
            move |ctx: RetryContext| {
                s.lock().unwrap().push(ctx.max_tokens_override);
                let first = ctx.attempt == 1;
                async move {
                    if first {
                        Err(Flaky("overflow"))
                    } else {
                        Ok(())
                    }
                }
            },
            Overflow,
            options(&sleeper),
            CancellationToken::new(),
        );
        let items: Vec<_> = stream.collect().await;
        assert_eq!(items.last(), Some(&Ok(RetryEvent::Done(()))));
        assert_eq!(*seen.lock().unwrap(), vec![None, Some(49_000)]);
        assert!(sleeper.sleeps().is_empty());
    }
}
