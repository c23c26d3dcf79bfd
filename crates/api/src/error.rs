//! `ApiError`: everything that can go wrong talking to the Messages API, and how each
//! failure is classified for retry.

use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use gyre_protocol::{ErrorDetail, ErrorResponse};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// What the server said about retrying, read from the response headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerHints {
    /// `retry-after-ms`, else `retry-after` (seconds or an HTTP date), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// `x-should-retry: true|false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_retry: Option<bool>,
    /// `request-id`, for bug reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ServerHints {
    /// Reads the hints from response headers; `now` resolves an HTTP-date `retry-after`.
    #[must_use]
    pub fn from_headers(headers: &http::HeaderMap, now: SystemTime) -> Self {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let retry_after_ms = get("retry-after-ms")
            .and_then(parse_retry_after_ms)
            .or_else(|| get("retry-after").and_then(|v| parse_retry_after(v, now)))
            .map(duration_ms);
        let should_retry = match get("x-should-retry") {
            Some(v) if v.eq_ignore_ascii_case("true") => Some(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Some(false),
            Some(_) | None => None,
        };
        Self {
            retry_after_ms,
            should_retry,
            request_id: get("request-id").map(str::to_owned),
        }
    }

    /// The server's requested delay, if any.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after_ms.map(Duration::from_millis)
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Parses a `retry-after-ms` value (a non-negative number of milliseconds, fractions allowed).
#[must_use]
pub fn parse_retry_after_ms(value: &str) -> Option<Duration> {
    let ms: f64 = value.trim().parse().ok()?;
    (ms.is_finite() && ms >= 0.0).then(|| Duration::from_secs_f64(ms / 1000.0))
}

/// Parses a `retry-after` value: delay seconds, or an HTTP date resolved against `now`
/// (a date in the past means "now").
#[must_use]
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The numbers of a context-overflow 400:
/// ``input length and `max_tokens` exceed context limit: X + Y > Z``.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextOverflow {
    /// X: the prompt's tokens.
    pub input_tokens: u64,
    /// Y: the `max_tokens` the request asked for.
    pub max_tokens: u64,
    /// Z: the model's context window.
    pub context_limit: u64,
}

static OVERFLOW_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"input length and `?max_tokens`? exceed context limit: (\d+) \+ (\d+) > (\d+)").ok()
});

static BILLING_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(spend(ing)? (limit|cap)|credit balance|billing|usage limit|quota|out of credits)",
    )
    .ok()
});

impl ContextOverflow {
    /// Reads the numbers out of an API error message, if it is a context overflow.
    #[must_use]
    pub fn parse(message: &str) -> Option<Self> {
        let caps = OVERFLOW_RE.as_ref()?.captures(message)?;
        let num = |i: usize| caps.get(i)?.as_str().parse::<u64>().ok();
        Some(Self {
            input_tokens: num(1)?,
            max_tokens: num(2)?,
            context_limit: num(3)?,
        })
    }

    /// `Z − X − safety_buffer`: the output budget that fits, saturating at zero.
    #[must_use]
    pub fn available_output_tokens(&self, safety_buffer: u64) -> u64 {
        self.context_limit
            .saturating_sub(self.input_tokens)
            .saturating_sub(safety_buffer)
    }
}

/// Which service answered: an error's advice names that service's credentials and
/// settings (an Amazon Bedrock user has no `ANTHROPIC_API_KEY` to check).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// The Anthropic API, or a gateway that speaks it.
    #[default]
    Anthropic,
    /// Amazon Bedrock.
    Bedrock,
    /// Google Vertex AI.
    Vertex,
}

impl Service {
    /// The service a request URL gyre built goes to: Bedrock's end in
    /// `/invoke-with-response-stream`, Vertex AI's in `:streamRawPredict`.
    #[must_use]
    pub fn of_url(url: &str) -> Self {
        if url.ends_with("/invoke-with-response-stream") {
            Self::Bedrock
        } else if url.ends_with(":streamRawPredict") {
            Self::Vertex
        } else {
            Self::Anthropic
        }
    }

    /// What to check when the service refuses the credentials.
    #[must_use]
    pub fn credentials_advice(self) -> &'static str {
        match self {
            Self::Anthropic => "Check that ANTHROPIC_API_KEY holds a valid, active API key",
            Self::Bedrock => {
                "Check the AWS credentials gyre signs with (AWS_PROFILE, AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY, or run `aws sso login`) and that they have not expired"
            }
            Self::Vertex => {
                "Check the Google credentials (GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud \
                 auth application-default login`)"
            }
        }
    }

    /// Why the credentials may not use a model.
    #[must_use]
    pub fn access_advice(self) -> &'static str {
        match self {
            Self::Anthropic => "Your API key may not have access to this model",
            Self::Bedrock => {
                "Your AWS identity may not have access to this model: request model access in \
                 the Bedrock console and check its IAM policy (bedrock:InvokeModelWithResponseStream)"
            }
            Self::Vertex => {
                "Your Google identity may not have access to this model: enable it in Vertex AI's \
                 Model Garden and check the project's IAM roles"
            }
        }
    }

    /// The settings that choose where requests go.
    #[must_use]
    pub fn endpoint_variables(self) -> &'static str {
        match self {
            Self::Anthropic => "ANTHROPIC_BASE_URL",
            Self::Bedrock => "AWS_REGION (and ANTHROPIC_BEDROCK_BASE_URL if set)",
            Self::Vertex => {
                "CLOUD_ML_REGION and ANTHROPIC_VERTEX_PROJECT_ID (and ANTHROPIC_VERTEX_BASE_URL \
                 if set)"
            }
        }
    }
}

/// Every failure of a Messages API call.
///
/// `Display` is the text shown to the user: what happened and what to do about it.
/// [`ApiError::is_retryable`] says whether another attempt could succeed; the retry
/// layer adds the budget rules on top (401 only once, background sources never on 529…).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ApiError {
    /// No API key in the environment; nothing was sent.
    #[error(
        "ANTHROPIC_API_KEY is not set. Export your Anthropic API key \
         (export ANTHROPIC_API_KEY=...), set ANTHROPIC_AUTH_TOKEN for a gateway's bearer \
         token, or an apiKeyHelper in ~/.gyre/settings.json, and run gyre again."
    )]
    MissingApiKey,

    /// The credentials could not be obtained (a key helper failed, no cloud credentials);
    /// nothing was sent.
    #[error("Could not get credentials from {source_name}: {message}.")]
    Credentials {
        /// Where they were to come from (`apiKeyHelper \`…\``, `AWS profile default`, …).
        source_name: String,
        /// What went wrong, and what to do about it.
        message: String,
    },

    /// The client could not be built, or a request encoded (a bad base URL or header, …).
    #[error("Invalid API client configuration: {message}.")]
    InvalidConfig {
        /// What is wrong with the configuration.
        message: String,
    },

    /// 401: the key is missing, wrong or revoked.
    #[error("Authentication failed (401): {message}. {}.", .service.credentials_advice())]
    Authentication {
        /// The API's own explanation (or the transport's).
        message: String,
        /// The service that refused: its credentials are the ones to check.
        #[serde(default)]
        service: Service,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 403: the key may not use this model.
    #[error(
        "Permission denied (403) for model `{model}`: {message}. {}; choose another with \
         --model or check your organization's settings.",
        .service.access_advice()
    )]
    PermissionDenied {
        /// The model the request named.
        model: String,
        /// The API's own explanation.
        message: String,
        /// The service that refused.
        #[serde(default)]
        service: Service,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 404: usually a wrong model name or base URL.
    #[error(
        "Not found (404) at {url}: {message}. Check the model name `{model}` (--model) and \
         {}.",
        Service::of_url(.url).endpoint_variables()
    )]
    NotFound {
        /// The model the request named.
        model: String,
        /// The URL that was not found.
        url: String,
        /// The API's own explanation.
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 413: the request body is over the API's size limit.
    #[error(
        "Request too large (413): {message}. The conversation or an attachment is too big for \
         the API; run /compact, or remove large files or images from the conversation."
    )]
    RequestTooLarge {
        /// The API's own explanation (or the transport's).
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 400 `invalid_request_error` other than the prompt-length ones.
    #[error("The API rejected the request (400 invalid_request_error): {message}.")]
    InvalidRequest {
        /// The API's own explanation (or the transport's).
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 400: the prompt alone is over the context window (reactive compaction's cue).
    #[error(
        "Prompt is too long: {message}. Run /compact, or start a new conversation with /clear."
    )]
    PromptTooLong {
        /// The API's own explanation (or the transport's).
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 400: prompt plus `max_tokens` is over the context window; retried with a smaller `max_tokens`.
    #[error(
        "The input ({input_tokens} tokens) leaves too little room for a response in the \
         model's {context_limit}-token context window ({max_tokens} output tokens were \
         requested). Run /compact, or start a new conversation with /clear."
    )]
    ContextOverflow {
        /// The prompt's tokens.
        input_tokens: u64,
        /// The `max_tokens` the request asked for.
        max_tokens: u64,
        /// The model's context window.
        context_limit: u64,
        /// The API's own explanation.
        message: String,
    },

    /// 429 with a retry-after: a rate limit that passes.
    #[error(
        "{}. Wait a moment and try again (GYRE_UNATTENDED_RETRY=1 retries rate limits \
         without limit).",
        self.retry_reason()
    )]
    RateLimited {
        /// The API's own explanation (or the transport's).
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 429 without a retry-after, or naming billing: a limit that waiting does not lift.
    #[error(
        "Usage limit reached (429): {message}. Not retrying: the server gave no retry-after \
         time, so this is a spend or billing limit; check your plan and billing settings."
    )]
    BillingLimit {
        /// The API's own explanation (or the transport's).
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 529 or an `overloaded_error`: retried, and counted toward the fallback model.
    #[error(
        "{}. Try again in a few minutes, or pass --fallback-model to switch models \
         automatically.",
        self.retry_reason()
    )]
    Overloaded {
        /// The HTTP status, when it came as a response rather than mid-stream.
        status: Option<u16>,
        /// The API's own explanation.
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// 5xx other than 529: a failure on the API's side, retried.
    #[error("{}. This is on the API's side; try again shortly.", self.retry_reason())]
    Server {
        /// The HTTP status.
        status: u16,
        /// The API's own explanation.
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// Any other HTTP error status.
    #[error("The API returned HTTP {status} ({error_type}): {message}.")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The error body's `type`, or `http_error` without one.
        error_type: String,
        /// The API's own explanation.
        message: String,
        /// What the response headers said about retrying, and the request id.
        hints: ServerHints,
    },

    /// An `error` event inside a 200 stream, other than an overload.
    #[error("{}. Try again.", self.retry_reason())]
    StreamError {
        /// The error's `type` (`overloaded_error`, `api_error`, …).
        error_type: String,
        /// The API's own explanation (or the transport's).
        message: String,
    },

    /// No connection: DNS, TCP, TLS or a reset before the response began.
    #[error(
        "{}. Check your network connection and ANTHROPIC_BASE_URL.",
        self.retry_reason()
    )]
    Connection {
        /// The API's own explanation (or the transport's).
        message: String,
    },

    /// The API cannot be reached, and another attempt a second later will not change
    /// that: nothing listens at the address, the host name does not resolve, or the TLS
    /// handshake fails. Retried only [`crate::MAX_UNREACHABLE_RETRIES`] times, quickly.
    #[error("{}. {}.", self.retry_reason(), reason.advice_for(*service))]
    Unreachable {
        /// Which of the three it is.
        reason: UnreachableReason,
        /// The service that could not be reached: its settings are the ones to check.
        #[serde(default)]
        service: Service,
        /// The transport's explanation (the whole error chain, with the URL).
        message: String,
    },

    /// The connection or the request took longer than allowed.
    #[error(
        "{}. Check your network connection and try again.",
        self.retry_reason()
    )]
    Timeout {
        /// The API's own explanation (or the transport's).
        message: String,
    },

    /// The stream ended before `message_stop`.
    #[error(
        "{}; the partial response was discarded. Try again.",
        self.retry_reason()
    )]
    StreamCut {
        /// Stream events received before it happened.
        events: u64,
    },

    /// No byte arrived within the idle timeout.
    #[error(
        "{}; the partial response was discarded. Raise GYRE_STREAM_IDLE_TIMEOUT_MS if your \
         network is slow.",
        self.retry_reason()
    )]
    StreamIdle {
        /// How long no byte arrived, in milliseconds.
        idle_ms: u64,
        /// Stream events received before it happened.
        events: u64,
    },

    /// A second `message_start` for another message in the middle of a stream.
    #[error(
        "{}; the partial response was discarded. Try again.",
        self.retry_reason()
    )]
    StreamRestarted {
        /// The id of the message that was streaming.
        first: String,
        /// The id of the message that started over it.
        second: String,
        /// Stream events received before it happened.
        events: u64,
    },

    /// The response was not what the Messages API sends (bad JSON, events out of order).
    #[error(
        "Malformed response from the API: {message}. Check that ANTHROPIC_BASE_URL points at an \
         Anthropic-compatible Messages API."
    )]
    InvalidResponse {
        /// What was wrong with the response.
        message: String,
    },

    /// The caller's cancellation token fired.
    #[error("Request aborted by the user.")]
    Aborted,

    /// Overloaded too often: the retry layer switches to the fallback model (an event, not a failure).
    #[error("Model {original} is overloaded; switching to the fallback model {fallback}.")]
    FallbackTriggered {
        /// The model that was overloaded.
        original: String,
        /// The model used from now on.
        fallback: String,
    },

    /// A recorded fixture could not be read, or ran out of exchanges.
    #[error("Fixture error: {message}")]
    Fixture {
        /// What is wrong with the fixture.
        message: String,
    },
}

/// Why the API is unreachable, for [`ApiError::Unreachable`]: failures to connect that
/// do not heal in the seconds a retry waits (a reset or a timeout may, and are not here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnreachableReason {
    /// The TCP connection was refused: nothing listens at that host and port.
    Refused,
    /// The host name does not resolve.
    Dns,
    /// The TLS handshake failed: a bad or untrusted certificate, a handshake alert, or a
    /// server that does not speak TLS.
    Tls,
    /// The server's certificate chains to no CA gyre trusts (a TLS-inspecting proxy's
    /// own CA, a private gateway's): it will not heal by itself, so it is not retried.
    UntrustedCertificate,
}

impl UnreachableReason {
    /// What failed, in a few words: `connection refused`, …
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Refused => "connection refused",
            Self::Dns => "the host name does not resolve",
            Self::Tls => "the TLS handshake failed",
            Self::UntrustedCertificate => "the server's certificate is issued by an unknown CA",
        }
    }

    /// What a user of `service` should check: [`UnreachableReason::advice`] with that
    /// service's base URL variable.
    #[must_use]
    pub fn advice_for(self, service: Service) -> String {
        let (var, endpoint) = match service {
            Service::Anthropic => return self.advice().to_owned(),
            Service::Bedrock => (
                "ANTHROPIC_BEDROCK_BASE_URL",
                "Bedrock's endpoint in AWS_REGION",
            ),
            Service::Vertex => (
                "ANTHROPIC_VERTEX_BASE_URL",
                "Vertex AI's endpoint in CLOUD_ML_REGION",
            ),
        };
        self.advice()
            .replace("https://api.anthropic.com", endpoint)
            .replace("ANTHROPIC_BASE_URL", var)
    }

    /// What the user should check.
    #[must_use]
    pub fn advice(self) -> &'static str {
        match self {
            Self::Refused => {
                "Nothing accepts connections at that address: check the host and port in \
                 ANTHROPIC_BASE_URL (unset it to use https://api.anthropic.com) and that the \
                 server or proxy it names is running"
            }
            Self::Dns => {
                "Check the host name in ANTHROPIC_BASE_URL (unset it to use \
                 https://api.anthropic.com), your network connection and DNS, and any \
                 HTTPS_PROXY setting"
            }
            Self::Tls => {
                "Check that ANTHROPIC_BASE_URL starts with https:// only for a server that \
                 speaks TLS (http:// otherwise), and that the server's certificate is valid \
                 for its host name and issued by a public CA (a proxy that re-signs TLS with \
                 its own CA is not trusted)"
            }
            Self::UntrustedCertificate => {
                "If a proxy or gateway re-signs TLS with its own CA, set NODE_EXTRA_CA_CERTS \
                 (or SSL_CERT_FILE) to a PEM file holding that CA's certificate; gyre trusts \
                 it on top of the system's root certificates"
            }
        }
    }
}

fn status_suffix(status: Option<u16>) -> String {
    status.map(|s| format!(" ({s})")).unwrap_or_default()
}

impl ApiError {
    /// What went wrong, without the advice of the final error: the line shown while the
    /// retry layer waits to try again, when "try again" would tell the user to do what
    /// gyre is about to do. The retried errors' `Display` is this and then the advice;
    /// the others read as their `Display`.
    #[must_use]
    pub fn retry_reason(&self) -> String {
        match self {
            Self::RateLimited { message, .. } => {
                format!("Rate limited by the API (429): {message}")
            }
            Self::Overloaded {
                status, message, ..
            } => format!("The API is overloaded{}: {message}", status_suffix(*status)),
            Self::Server {
                status, message, ..
            } => format!("API server error ({status}): {message}"),
            Self::StreamError {
                error_type,
                message,
                ..
            } => format!("The API reported an error mid-response ({error_type}): {message}"),
            Self::Connection { message, .. } => format!("Could not reach the API: {message}"),
            Self::Unreachable {
                reason, message, ..
            } => {
                format!("Could not reach the API ({}): {message}", reason.label())
            }
            Self::Timeout { message, .. } => format!("The API request timed out: {message}"),
            Self::StreamCut { events } => format!(
                "The response stream ended early (after {events} events, before message_stop)"
            ),
            Self::StreamIdle { idle_ms, events } => format!(
                "The response stream stalled: no data for {idle_ms} ms (after {events} events)"
            ),
            Self::StreamRestarted {
                first,
                second,
                events,
            } => format!(
                "The response stream started message {second} in the middle of message {first} \
                 (after {events} events)"
            ),
            other => other.to_string(),
        }
    }

    /// The same error, its advice naming `service`'s credentials and settings.
    #[must_use]
    pub fn for_service(mut self, service: Service) -> Self {
        if let Self::Authentication { service: s, .. }
        | Self::PermissionDenied { service: s, .. }
        | Self::Unreachable { service: s, .. } = &mut self
        {
            *s = service;
        }
        self
    }

    /// Whether another attempt with the same request could succeed. Budget rules (how
    /// many times, 401 only once, no 529 retry for background sources) live in the retry
    /// layer; a context overflow is retried there with a smaller `max_tokens`, so it is
    /// not retryable as is.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::MissingApiKey
            | Self::Credentials { .. }
            | Self::InvalidConfig { .. }
            | Self::PermissionDenied { .. }
            | Self::NotFound { .. }
            | Self::RequestTooLarge { .. }
            | Self::InvalidRequest { .. }
            | Self::PromptTooLong { .. }
            | Self::ContextOverflow { .. }
            | Self::BillingLimit { .. }
            | Self::InvalidResponse { .. }
            | Self::Aborted
            | Self::FallbackTriggered { .. }
            | Self::Fixture { .. } => false,
            Self::Authentication { hints, .. }
            | Self::RateLimited { hints, .. }
            | Self::Overloaded { hints, .. }
            | Self::Server { hints, .. } => hints.should_retry != Some(false),
            Self::Http { status, hints, .. } => hints
                .should_retry
                .unwrap_or(matches!(status, 408 | 409 | 429) || *status >= 500),
            Self::StreamError { error_type, .. } => error_type == "api_error",
            Self::Unreachable { reason, .. } => *reason != UnreachableReason::UntrustedCertificate,
            Self::Connection { .. }
            | Self::Timeout { .. }
            | Self::StreamCut { .. }
            | Self::StreamIdle { .. }
            | Self::StreamRestarted { .. } => true,
        }
    }

    /// The HTTP status this error came with, if it came from an HTTP response.
    #[must_use]
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Authentication { .. } => Some(401),
            Self::PermissionDenied { .. } => Some(403),
            Self::NotFound { .. } => Some(404),
            Self::RequestTooLarge { .. } => Some(413),
            Self::InvalidRequest { .. }
            | Self::PromptTooLong { .. }
            | Self::ContextOverflow { .. } => Some(400),
            Self::RateLimited { .. } | Self::BillingLimit { .. } => Some(429),
            Self::Overloaded { status, .. } => *status,
            Self::Server { status, .. } | Self::Http { status, .. } => Some(*status),
            Self::MissingApiKey
            | Self::Credentials { .. }
            | Self::InvalidConfig { .. }
            | Self::StreamError { .. }
            | Self::Connection { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::StreamCut { .. }
            | Self::StreamIdle { .. }
            | Self::StreamRestarted { .. }
            | Self::InvalidResponse { .. }
            | Self::Aborted
            | Self::FallbackTriggered { .. }
            | Self::Fixture { .. } => None,
        }
    }

    /// Whether the prompt does not fit the model's context window: the loop answers this
    /// with reactive compaction.
    #[must_use]
    pub fn is_prompt_too_long(&self) -> bool {
        matches!(
            self,
            Self::PromptTooLong { .. } | Self::ContextOverflow { .. }
        )
    }

    /// Whether the API is unreachable in a way that does not heal soon (refused, DNS, TLS).
    #[must_use]
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }

    /// Whether this is a 529 or an `overloaded_error` (HTTP or in-stream).
    #[must_use]
    pub fn is_overloaded(&self) -> bool {
        matches!(self, Self::Overloaded { .. })
    }

    /// A short machine-readable name for the kind of failure (`rate_limit`,
    /// `overloaded`, `server_error`, `connection`, `unreachable`, `timeout`, `stream_cut`, …).
    #[must_use]
    pub fn category(&self) -> &'static str {
        match self {
            Self::MissingApiKey => "missing_api_key",
            Self::Credentials { .. } => "credentials",
            Self::InvalidConfig { .. } => "invalid_config",
            Self::Authentication { .. } => "authentication_failed",
            Self::PermissionDenied { .. } => "permission_denied",
            Self::NotFound { .. } => "not_found",
            Self::RequestTooLarge { .. } => "request_too_large",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::PromptTooLong { .. } => "prompt_too_long",
            Self::ContextOverflow { .. } => "context_overflow",
            Self::RateLimited { .. } => "rate_limit",
            Self::BillingLimit { .. } => "billing_limit",
            Self::Overloaded { .. } => "overloaded",
            Self::Server { .. } => "server_error",
            Self::Http { .. } => "http_error",
            Self::StreamError { .. } => "stream_error",
            Self::Connection { .. } => "connection",
            Self::Unreachable { .. } => "unreachable",
            Self::Timeout { .. } => "timeout",
            Self::StreamCut { .. } => "stream_cut",
            Self::StreamIdle { .. } => "stream_idle",
            Self::StreamRestarted { .. } => "stream_restarted",
            Self::InvalidResponse { .. } => "invalid_response",
            Self::Aborted => "aborted",
            Self::FallbackTriggered { .. } => "fallback_triggered",
            Self::Fixture { .. } => "fixture",
        }
    }

    /// The server's hints, for errors that came from an HTTP response.
    #[must_use]
    pub fn hints(&self) -> Option<&ServerHints> {
        match self {
            Self::Authentication { hints, .. }
            | Self::PermissionDenied { hints, .. }
            | Self::NotFound { hints, .. }
            | Self::RequestTooLarge { hints, .. }
            | Self::InvalidRequest { hints, .. }
            | Self::PromptTooLong { hints, .. }
            | Self::RateLimited { hints, .. }
            | Self::BillingLimit { hints, .. }
            | Self::Overloaded { hints, .. }
            | Self::Server { hints, .. }
            | Self::Http { hints, .. } => Some(hints),
            Self::MissingApiKey
            | Self::Credentials { .. }
            | Self::InvalidConfig { .. }
            | Self::ContextOverflow { .. }
            | Self::StreamError { .. }
            | Self::Connection { .. }
            | Self::Unreachable { .. }
            | Self::Timeout { .. }
            | Self::StreamCut { .. }
            | Self::StreamIdle { .. }
            | Self::StreamRestarted { .. }
            | Self::InvalidResponse { .. }
            | Self::Aborted
            | Self::FallbackTriggered { .. }
            | Self::Fixture { .. } => None,
        }
    }

    /// The numbers of a context-overflow 400.
    #[must_use]
    pub fn context_overflow(&self) -> Option<ContextOverflow> {
        if let Self::ContextOverflow {
            input_tokens,
            max_tokens,
            context_limit,
            ..
        } = self
        {
            Some(ContextOverflow {
                input_tokens: *input_tokens,
                max_tokens: *max_tokens,
                context_limit: *context_limit,
            })
        } else {
            None
        }
    }

    /// Builds the error for a non-2xx HTTP response. `body` is the response body (an
    /// `ErrorResponse` JSON when the API sent one); `model` and `url` name what was asked for.
    #[must_use]
    pub fn from_response(
        status: u16,
        hints: ServerHints,
        body: &str,
        model: &str,
        url: &str,
    ) -> Self {
        let detail = serde_json::from_str::<ErrorResponse>(body)
            .map(|r| r.error)
            .unwrap_or_else(|_| ErrorDetail {
                kind: String::new(),
                message: fallback_message(status, body),
            });
        let message = if detail.message.is_empty() {
            fallback_message(status, body)
        } else {
            detail.message
        };
        if status == 529 || detail.kind == "overloaded_error" {
            return Self::Overloaded {
                status: Some(status),
                message,
                hints,
            };
        }
        match status {
            400 => {
                if let Some(o) = ContextOverflow::parse(&message) {
                    Self::ContextOverflow {
                        input_tokens: o.input_tokens,
                        max_tokens: o.max_tokens,
                        context_limit: o.context_limit,
                        message,
                    }
                } else if message.to_ascii_lowercase().contains("prompt is too long") {
                    Self::PromptTooLong { message, hints }
                } else {
                    Self::InvalidRequest { message, hints }
                }
            }
            401 => Self::Authentication {
                message,
                service: Service::Anthropic,
                hints,
            },
            403 => Self::PermissionDenied {
                model: model.to_owned(),
                message,
                service: Service::Anthropic,
                hints,
            },
            404 => Self::NotFound {
                model: model.to_owned(),
                url: url.to_owned(),
                message,
                hints,
            },
            413 => Self::RequestTooLarge { message, hints },
            429 => {
                let billing = detail.kind == "billing_error"
                    || BILLING_RE.as_ref().is_some_and(|re| re.is_match(&message));
                if billing && hints.retry_after_ms.is_none() {
                    Self::BillingLimit { message, hints }
                } else {
                    Self::RateLimited { message, hints }
                }
            }
            500..=599 => Self::Server {
                status,
                message,
                hints,
            },
            _ => Self::Http {
                status,
                error_type: if detail.kind.is_empty() {
                    "http_error".to_owned()
                } else {
                    detail.kind
                },
                message,
                hints,
            },
        }
    }

    /// Builds the error for an in-stream `error` event.
    #[must_use]
    pub fn from_stream_error(detail: &ErrorDetail) -> Self {
        if detail.kind == "overloaded_error" {
            Self::Overloaded {
                status: None,
                message: detail.message.clone(),
                hints: ServerHints::default(),
            }
        } else {
            Self::StreamError {
                error_type: detail.kind.clone(),
                message: detail.message.clone(),
            }
        }
    }
}

fn fallback_message(status: u16, body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("no details")
            .to_owned()
    } else {
        body.chars().take(500).collect()
    }
}

#[cfg(feature = "client")]
impl From<reqwest::Error> for ApiError {
    fn from(e: reqwest::Error) -> Self {
        let message = error_chain(&e);
        if e.is_timeout() {
            Self::Timeout { message }
        } else if e.is_builder() {
            Self::InvalidConfig { message }
        } else if let Some(reason) = unreachable_reason(&e) {
            Self::Unreachable {
                reason,
                service: Service::Anthropic,
                message,
            }
        } else {
            Self::Connection { message }
        }
    }
}

/// A failed request of any of gyre's HTTP clients (WebFetch, MCP) as a line for the
/// user: the whole cause chain (reqwest's own text stops at "error sending request"),
/// and, when the server's certificate chains to no trusted CA, which variables add one.
#[cfg(feature = "client")]
#[must_use]
pub fn describe_transport_error(e: &reqwest::Error) -> String {
    let chain = error_chain(e);
    match unreachable_reason(e) {
        Some(reason @ UnreachableReason::UntrustedCertificate) => {
            format!("{chain}: {}. {}", reason.label(), reason.advice())
        }
        _ => chain,
    }
}

/// Whether a failed request never got a connection for a reason that will not heal
/// within a retry's wait: refused, DNS, TLS. Only connect errors qualify; a reset or a
/// timeout is left to the ordinary retries.
#[cfg(feature = "client")]
fn unreachable_reason(e: &reqwest::Error) -> Option<UnreachableReason> {
    if !e.is_connect() {
        return None;
    }
    std::error::Error::source(e).and_then(unreachable_cause)
}

/// [`unreachable_reason`] for one error of the chain and the causes under it.
#[cfg(feature = "client")]
fn unreachable_cause(e: &(dyn std::error::Error + 'static)) -> Option<UnreachableReason> {
    if let Some(tls) = e.downcast_ref::<rustls::Error>() {
        return Some(match tls {
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
                UnreachableReason::UntrustedCertificate
            }
            _ => UnreachableReason::Tls,
        });
    }
    // hyper-util's `ConnectError` is private and carries no typed kind; a resolver
    // failure is the one whose `Display` is exactly "dns error" (`ConnectError::dns`), and
    // its cause is an untyped `io::Error` from getaddrinfo: the text is all there is.
    if e.to_string() == "dns error" {
        return Some(UnreachableReason::Dns);
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        if io.kind() == std::io::ErrorKind::ConnectionRefused {
            return Some(UnreachableReason::Refused);
        }
        // A wrapped error hides behind `get_ref`: `io::Error::source` skips it. rustls's
        // handshake errors come that way, twice wrapped (tokio-rustls, then hyper-rustls).
        if let Some(reason) = io.get_ref().and_then(|inner| unreachable_cause(inner)) {
            return Some(reason);
        }
    }
    e.source().and_then(unreachable_cause)
}

impl From<std::convert::Infallible> for ApiError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl From<std::io::Error> for ApiError {
    fn from(e: std::io::Error) -> Self {
        let message = e.to_string();
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            Self::Unreachable {
                reason: UnreachableReason::Refused,
                service: Service::Anthropic,
                message,
            }
        } else {
            Self::Connection { message }
        }
    }
}

/// `error: cause: cause` — reqwest hides the useful part (refused, DNS…) in sources.
#[cfg(feature = "client")]
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(kind: &str, message: &str) -> String {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message}})
            .to_string()
    }

    fn from(status: u16, kind: &str, message: &str) -> ApiError {
        ApiError::from_response(
            status,
            ServerHints::default(),
            &body(kind, message),
            "claude-test",
            "http://x/v1/messages",
        )
    }

    #[test]
    fn a_retry_reason_says_what_failed_without_telling_the_user_to_retry() {
        let errors = [
            from(529, "overloaded_error", "Overloaded"),
            from(429, "rate_limit_error", "slow down"),
            from(500, "api_error", "Internal"),
            ApiError::Connection {
                message: "connection refused".into(),
            },
            ApiError::Timeout {
                message: "no answer".into(),
            },
            ApiError::Unreachable {
                reason: UnreachableReason::Refused,
                service: Service::Anthropic,
                message: "tcp connect error: Connection refused".into(),
            },
            ApiError::Unreachable {
                reason: UnreachableReason::Dns,
                service: Service::Anthropic,
                message: "dns error".into(),
            },
            ApiError::Unreachable {
                reason: UnreachableReason::Tls,
                service: Service::Anthropic,
                message: "invalid peer certificate: UnknownIssuer".into(),
            },
            ApiError::StreamCut { events: 3 },
            ApiError::StreamIdle {
                idle_ms: 100,
                events: 3,
            },
        ];
        for error in errors {
            assert!(error.is_retryable(), "{error}");
            let reason = error.retry_reason();
            let full = error.to_string();
            assert!(
                full.starts_with(&reason),
                "{reason:?} is not how {full:?} starts"
            );
            for advice in [
                "try again",
                "Try again",
                "Check",
                "Raise",
                "pass --",
                "Wait",
            ] {
                assert!(!reason.contains(advice), "{reason:?} advises {advice:?}");
            }
        }
        let not_retried = from(401, "authentication_error", "bad key");
        assert_eq!(not_retried.retry_reason(), not_retried.to_string());
    }

    #[test]
    fn statuses_map_to_kinds() {
        assert_eq!(
            from(529, "overloaded_error", "Overloaded").category(),
            "overloaded"
        );
        assert_eq!(
            from(401, "authentication_error", "bad").category(),
            "authentication_failed"
        );
        assert_eq!(
            from(403, "permission_error", "no").category(),
            "permission_denied"
        );
        assert_eq!(from(404, "not_found_error", "no").category(), "not_found");
        assert_eq!(
            from(413, "request_too_large", "big").category(),
            "request_too_large"
        );
        assert_eq!(
            from(429, "rate_limit_error", "slow").category(),
            "rate_limit"
        );
        assert_eq!(from(500, "api_error", "boom").category(), "server_error");
        assert_eq!(from(408, "timeout_error", "t").category(), "http_error");
        assert_eq!(
            from(400, "invalid_request_error", "bad").category(),
            "invalid_request"
        );
    }

    #[test]
    fn retryable_kinds_follow_the_policy() {
        for (status, kind, retry) in [
            (529, "overloaded_error", true),
            (429, "rate_limit_error", true),
            (500, "api_error", true),
            (503, "api_error", true),
            (408, "timeout_error", true),
            (409, "conflict", true),
            (401, "authentication_error", true),
            (400, "invalid_request_error", false),
            (403, "permission_error", false),
            (404, "not_found_error", false),
            (413, "request_too_large", false),
            (418, "teapot", false),
        ] {
            assert_eq!(from(status, kind, "m").is_retryable(), retry, "{status}");
        }
    }

    #[test]
    fn x_should_retry_overrides_the_status() {
        let no = ServerHints {
            should_retry: Some(false),
            ..ServerHints::default()
        };
        let e = ApiError::from_response(500, no, &body("api_error", "x"), "m", "u");
        assert!(!e.is_retryable());
        let yes = ServerHints {
            should_retry: Some(true),
            ..ServerHints::default()
        };
        let e = ApiError::from_response(418, yes.clone(), &body("x", "x"), "m", "u");
        assert!(e.is_retryable());
        // 403 is never retried, whatever the header says.
        let e = ApiError::from_response(403, yes, &body("permission_error", "x"), "m", "u");
        assert!(!e.is_retryable());
    }

    #[test]
    fn context_overflow_message_is_parsed() {
        let e = from(
            400,
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000, \
             decrease input length or `max_tokens` and try again",
        );
        assert_eq!(
            e.context_overflow(),
            Some(ContextOverflow {
                input_tokens: 188_059,
                max_tokens: 20_000,
                context_limit: 200_000
            })
        );
        assert!(e.is_prompt_too_long());
        assert_eq!(e.status(), Some(400));
    }

    #[test]
    fn prompt_too_long_is_recognised() {
        let e = from(
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        );
        assert!(e.is_prompt_too_long());
        assert!(!e.is_retryable());
    }

    #[test]
    fn billing_429_without_retry_after_is_not_retried() {
        let e = from(429, "rate_limit_error", "You have reached your spend limit");
        assert_eq!(e.category(), "billing_limit");
        assert!(!e.is_retryable());
        assert!(e.to_string().contains("Not retrying"));
        let hints = ServerHints {
            retry_after_ms: Some(1000),
            ..ServerHints::default()
        };
        let e = ApiError::from_response(
            429,
            hints,
            &body("rate_limit_error", "You have reached your spend limit"),
            "m",
            "u",
        );
        assert_eq!(e.category(), "rate_limit");
    }

    #[test]
    fn messages_say_what_to_do() {
        assert!(
            from(401, "authentication_error", "invalid x-api-key")
                .to_string()
                .contains("ANTHROPIC_API_KEY")
        );
        assert!(
            from(403, "permission_error", "no")
                .to_string()
                .contains("claude-test")
        );
        let nf = from(404, "not_found_error", "model: nope").to_string();
        assert!(nf.contains("claude-test") && nf.contains("http://x/v1/messages"));
        assert!(nf.contains("ANTHROPIC_BASE_URL"), "{nf}");
        let bedrock = ApiError::from_response(
            404,
            ServerHints::default(),
            &body("not_found_error", "no such model"),
            "m",
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/invoke-with-response-stream",
        )
        .to_string();
        assert!(bedrock.contains("AWS_REGION"), "{bedrock}");
        for service in [Service::Bedrock, Service::Vertex] {
            for status in [401, 403] {
                let told = from(status, "authentication_error", "refused")
                    .for_service(service)
                    .to_string();
                assert!(
                    !told.contains("ANTHROPIC_API_KEY") && !told.contains("API key"),
                    "{told}"
                );
            }
        }
        assert!(
            from(413, "request_too_large", "big")
                .to_string()
                .contains("too large")
        );
        assert!(
            ApiError::MissingApiKey
                .to_string()
                .contains("ANTHROPIC_API_KEY")
        );
    }

    #[test]
    fn non_json_body_is_kept_as_message() {
        let e = ApiError::from_response(
            502,
            ServerHints::default(),
            "<html>bad gateway</html>",
            "m",
            "u",
        );
        assert_eq!(e.status(), Some(502));
        assert!(e.to_string().contains("bad gateway"));
        let e = ApiError::from_response(503, ServerHints::default(), "", "m", "u");
        assert!(e.to_string().contains("Service Unavailable"));
    }

    #[test]
    fn in_stream_errors_are_classified() {
        let over = ApiError::from_stream_error(&ErrorDetail {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        });
        assert!(over.is_overloaded() && over.is_retryable());
        assert_eq!(over.status(), None);
        let api = ApiError::from_stream_error(&ErrorDetail {
            kind: "api_error".into(),
            message: "x".into(),
        });
        assert!(api.is_retryable());
        let other = ApiError::from_stream_error(&ErrorDetail {
            kind: "invalid_request_error".into(),
            message: "x".into(),
        });
        assert!(!other.is_retryable());
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("2", now), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_retry_after_ms("1500"),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(parse_retry_after(&date, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after_ms("-1"), None);
    }

    #[test]
    fn hints_prefer_retry_after_ms() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", http::HeaderValue::from_static("9"));
        h.insert("retry-after-ms", http::HeaderValue::from_static("250"));
        h.insert("x-should-retry", http::HeaderValue::from_static("false"));
        let hints = ServerHints::from_headers(&h, SystemTime::now());
        assert_eq!(hints.retry_after_ms, Some(250));
        assert_eq!(hints.should_retry, Some(false));
    }

    #[test]
    fn errors_round_trip_through_serde() {
        let e = from(529, "overloaded_error", "Overloaded");
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<ApiError>(&json).unwrap(), e);
        let e = ApiError::Unreachable {
            reason: UnreachableReason::Dns,
            service: Service::Anthropic,
            message: "dns error".into(),
        };
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["kind"], "unreachable");
        assert_eq!(json["reason"], "dns");
        assert_eq!(serde_json::from_value::<ApiError>(json).unwrap(), e);
    }

    #[test]
    fn unreachable_errors_say_what_to_check() {
        for (reason, check) in [
            (UnreachableReason::Refused, "port"),
            (UnreachableReason::Dns, "host name"),
            (UnreachableReason::Tls, "certificate"),
        ] {
            let e = ApiError::Unreachable {
                reason,
                service: Service::Anthropic,
                message: "m".into(),
            };
            assert_eq!(e.category(), "unreachable");
            assert!(e.is_retryable() && e.is_unreachable());
            let text = e.to_string();
            assert!(text.contains(reason.label()), "{text}");
            assert!(text.contains("ANTHROPIC_BASE_URL"), "{text}");
            assert!(text.contains(check), "{text}");
            let bedrock = e.clone().for_service(Service::Bedrock).to_string();
            assert!(bedrock.contains(check), "{bedrock}");
            assert!(
                bedrock.contains("ANTHROPIC_BEDROCK_BASE_URL")
                    && !bedrock.contains("ANTHROPIC_BASE_URL")
                    && !bedrock.contains("api.anthropic.com"),
                "{bedrock}"
            );
        }
    }

    #[test]
    fn only_a_refused_io_error_is_unreachable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(ApiError::from(refused).category(), "unreachable");
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(ApiError::from(reset).category(), "connection");
    }
}
