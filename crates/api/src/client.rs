//! The `ModelClient` seam and what a client needs to know (`ClientConfig`); the HTTP
//! implementation, `AnthropicClient`, is in `http_client` (the `client` feature).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use gyre_protocol::{MessagesRequest, StreamEvent};
use tokio_util::sync::CancellationToken;

use crate::ApiError;

/// The raw events of one attempt, as they arrive.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ApiError>> + Send>>;

/// Something that answers a Messages API request with a stream of events.
///
/// One call is one attempt: no retry here (see [`crate::stream_with_retry`]). The stream
/// ends after `message_stop`, or with the error that ended the attempt; cancelling the
/// token ends it at once with [`ApiError::Aborted`]. The request is shared, not copied:
/// a retry sends the same one again.
pub trait ModelClient: Send + Sync {
    /// One attempt: send the request, yield raw SSE events as they arrive. No retry here.
    fn stream(&self, request: Arc<MessagesRequest>, cancel: CancellationToken) -> EventStream;

    /// A client for another conversation (a side request, a sub-agent): it shares this
    /// one's connections and settings but none of what it keeps per conversation, so
    /// that requests through either leave the other's alone. `AnthropicClient` keeps
    /// the last request body to encode only what the next one adds
    /// ([`BodyEncoder`](crate::BodyEncoder)): a request of another conversation sent
    /// through it would make the next one re-encode the whole history.
    ///
    /// `None` (the default): the client keeps nothing per conversation; share it.
    fn fork(&self) -> Option<Arc<dyn ModelClient>> {
        None
    }
}

/// `https://api.anthropic.com`, used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header gyre speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `gyre/<version>`: gyre always names itself.
#[must_use]
pub fn default_user_agent() -> String {
    format!("gyre/{}", env!("CARGO_PKG_VERSION"))
}

/// Where and how to reach the API. `Debug` never shows the key.
#[derive(Clone)]
pub struct ClientConfig {
    /// Scheme, host and optional path prefix; `/v1/messages` is appended.
    pub base_url: String,
    /// The `x-api-key` header's value; never logged, never in `Debug`.
    pub api_key: String,
    /// The `user-agent` header (`gyre/<version>` by default).
    pub user_agent: String,
    /// How long to wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"[redacted]")
            .field("user_agent", &self.user_agent)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl ClientConfig {
    /// A configuration for the public API with this key.
    #[must_use]
    pub fn new(api_key: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: api_key.into(),
            user_agent: default_user_agent(),
            connect_timeout: Duration::from_secs(30),
        }
    }

    /// Same, with another base URL (a proxy, gyre-testkit…).
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Reads `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL`.
    pub fn from_env() -> Result<Self, ApiError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`ClientConfig::from_env`] over any variable lookup (tests, settings files).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ApiError> {
        let api_key = lookup("ANTHROPIC_API_KEY")
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
            .ok_or(ApiError::MissingApiKey)?;
        let mut config = Self::new(api_key);
        if let Some(base) = lookup("ANTHROPIC_BASE_URL").filter(|b| !b.trim().is_empty()) {
            config.base_url = base.trim().to_owned();
        }
        Ok(config)
    }

    /// `{base_url}/v1/messages`.
    #[must_use]
    pub fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn from_lookup_requires_a_key() {
        let env: HashMap<&str, &str> = HashMap::new();
        let got = ClientConfig::from_lookup(|k| env.get(k).map(|v| (*v).to_owned()));
        assert_eq!(got.unwrap_err(), ApiError::MissingApiKey);
        let blank = ClientConfig::from_lookup(|_| Some("  ".to_owned()));
        assert_eq!(blank.unwrap_err(), ApiError::MissingApiKey);
    }

    #[test]
    fn from_lookup_reads_base_url_with_default() {
        let c =
            ClientConfig::from_lookup(|k| (k == "ANTHROPIC_API_KEY").then(|| "sk-1".to_owned()))
                .unwrap();
        assert_eq!(c.base_url, DEFAULT_BASE_URL);
        assert_eq!(c.messages_url(), "https://api.anthropic.com/v1/messages");
        let c = ClientConfig::from_lookup(|k| match k {
            "ANTHROPIC_API_KEY" => Some("sk-1".to_owned()),
            "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".to_owned()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.messages_url(), "http://127.0.0.1:9/v1/messages");
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = ClientConfig::new("sk-ant-secret");
        assert!(!format!("{c:?}").contains("secret"));
        #[cfg(feature = "client")]
        {
            let client = crate::AnthropicClient::new(c).unwrap();
            assert!(!format!("{client:?}").contains("secret"));
        }
    }

    #[test]
    fn user_agent_names_gyre() {
        assert!(default_user_agent().starts_with("gyre/"));
    }

    #[cfg(feature = "client")]
    #[test]
    fn bad_base_url_is_a_config_error() {
        let err =
            crate::AnthropicClient::new(ClientConfig::new("k").with_base_url("api.anthropic.com"))
                .unwrap_err();
        assert_eq!(err.category(), "invalid_config");
    }
}
