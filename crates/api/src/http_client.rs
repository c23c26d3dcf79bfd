//! `AnthropicClient`: the Messages API over HTTPS (reqwest, rustls, SSE). Behind the
//! `client` feature (on by default): without it gyre-api is the retry layer, the error
//! taxonomy, the stream assembly and the `ModelClient` seam, with no HTTP client.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use futures::StreamExt;
use gyre_protocol::{MessagesRequest, StreamEvent};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use tokio_util::sync::CancellationToken;

use crate::ApiError;
use crate::client::{ANTHROPIC_VERSION, ClientConfig, EventStream, ModelClient};
use crate::encode::BodyEncoder;
use crate::error::ServerHints;
use crate::sse::sse_events;

/// The Messages API over HTTPS (reqwest + SSE).
#[derive(Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    base_url: String,
    /// Shared by clones: the JSON of the last request's messages. A
    /// [`fork`](ModelClient::fork) has its own.
    encoder: Arc<Mutex<BodyEncoder>>,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl AnthropicClient {
    /// Builds the HTTP client. Fails on a key or user agent that cannot be a header,
    /// or a base URL that is not http(s).
    pub fn new(config: ClientConfig) -> Result<Self, ApiError> {
        let bad = |what: &str| ApiError::InvalidConfig {
            message: format!("{what} contains characters not allowed in an HTTP header"),
        };
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ApiError::InvalidConfig {
                message: format!(
                    "ANTHROPIC_BASE_URL must start with http:// or https:// (got `{}`)",
                    config.base_url
                ),
            });
        }
        let mut headers = HeaderMap::new();
        let mut key = HeaderValue::from_str(&config.api_key).map_err(|_| bad("the API key"))?;
        key.set_sensitive(true);
        headers.insert("x-api-key", key);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&config.user_agent).map_err(|_| bad("the user agent"))?,
        );
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .build()?;
        Ok(Self {
            http,
            url: config.messages_url(),
            headers,
            base_url: config.base_url,
            encoder: Arc::default(),
        })
    }

    /// The base URL requests go to.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// How many messages this client (and its clones, not its forks) serialised rather
    /// than reused so far; for tests and benchmarks.
    #[must_use]
    pub fn messages_encoded(&self) -> usize {
        self.encoder
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .messages_encoded()
    }
}

impl ModelClient for AnthropicClient {
    /// The same HTTP client (its connections), URL and headers, with an encoder of its own.
    fn fork(&self) -> Option<Arc<dyn ModelClient>> {
        Some(Arc::new(Self {
            encoder: Arc::default(),
            ..self.clone()
        }))
    }

    fn stream(&self, request: Arc<MessagesRequest>, cancel: CancellationToken) -> EventStream {
        let http = self.http.clone();
        let url = self.url.clone();
        let headers = self.headers.clone();
        let encoder = Arc::clone(&self.encoder);
        Box::pin(async_stream::stream! {
            let encoded = encoder
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .encode(&request);
            let body = match encoded {
                Ok(b) => b,
                Err(e) => {
                    yield Err(ApiError::InvalidConfig { message: format!("request could not be encoded: {e}") });
                    return;
                }
            };
            let send = http.post(&url).headers(headers).body(body).send();
            let response = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ApiError::Aborted),
                r = send => r.map_err(ApiError::from),
            };
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let status = response.status();
            if !status.is_success() {
                let hints = ServerHints::from_headers(response.headers(), SystemTime::now());
                let body = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Err(ApiError::Aborted),
                    b = response.text() => Ok(b.unwrap_or_default()),
                };
                yield Err(match body {
                    Ok(body) => ApiError::from_response(status.as_u16(), hints, &body, &request.model, &url),
                    Err(e) => e,
                });
                return;
            }
            let mut events = std::pin::pin!(sse_events(response.bytes_stream()));
            let mut received = 0u64;
            loop {
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Some(Err(ApiError::Aborted)),
                    n = events.next() => n,
                };
                match next {
                    None => return,
                    Some(Ok(event)) => {
                        received += 1;
                        let stop = matches!(event, StreamEvent::MessageStop);
                        yield Ok(event);
                        if stop {
                            return;
                        }
                    }
                    // The connection broke mid-body: to the user that is a cut stream.
                    Some(Err(ApiError::Connection { message })) => {
                        tracing::debug!("stream broken after {received} events: {message}");
                        yield Err(ApiError::StreamCut { events: received });
                        return;
                    }
                    Some(Err(e)) => {
                        yield Err(e);
                        return;
                    }
                }
            }
        })
    }
}
