//! `AnthropicClient`: the Messages API over HTTPS (reqwest, rustls, SSE). Behind the
//! `client` feature (on by default): without it gyre-api is the retry layer, the error
//! taxonomy, the stream assembly and the `ModelClient` seam, with no HTTP client.

use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use gyre_protocol::{MessagesRequest, StreamEvent};
use reqwest::header::{
    AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT,
};
use tokio_util::sync::CancellationToken;

use crate::ApiError;
#[cfg(feature = "vertex")]
use crate::client::GoogleCredentialSource;
use crate::client::{
    ANTHROPIC_VERSION, Backend, ClientConfig, Credential, EventStream, ModelClient,
};
use crate::encode::BodyEncoder;
use crate::error::ServerHints;
use crate::key_helper::CachedKey;
use crate::sse::sse_events;

/// The Messages API over HTTPS (reqwest + SSE), at the Anthropic API or a gateway.
#[derive(Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    provider: Arc<Provider>,
    base_url: String,
    /// Shared by clones: the JSON of the last request's messages. A
    /// [`fork`](ModelClient::fork) has its own.
    encoder: Arc<Mutex<BodyEncoder>>,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// The provider seam: what differs between the services one `AnthropicClient` can talk
/// to (the URL, the body's framing, how a request is authorised, how the answer is
/// framed). Everything above it (retry, fallback, the error taxonomy, stream assembly)
/// is shared.
enum Provider {
    /// The Messages API: `POST {base}/v1/messages`, SSE back.
    Anthropic {
        url: String,
        /// `anthropic-version`, content type, user agent.
        headers: HeaderMap,
        auth: AnthropicAuth,
    },
    /// Amazon Bedrock: `POST {base}/model/{model}/invoke-with-response-stream`, SigV4,
    /// event-stream frames back.
    #[cfg(feature = "bedrock")]
    Bedrock {
        base_url: String,
        /// Content type, accept, user agent.
        headers: HeaderMap,
        /// Boxed: its credential source is large, and the other variants are not.
        signer: Box<crate::bedrock::BedrockSigner>,
    },
    /// Google Vertex AI: `POST …/models/{model}:streamRawPredict`, a Google OAuth bearer
    /// token, SSE back.
    #[cfg(feature = "vertex")]
    Vertex {
        base_url: String,
        project_id: String,
        region: String,
        /// Content type, user agent.
        headers: HeaderMap,
        /// `None` for a gateway that authorises the requests itself. Boxed: a key pair
        /// is large, and the other variants are not.
        tokens: Option<Box<crate::vertex::TokenSource>>,
    },
}

/// How an Anthropic API request is authorised.
enum AnthropicAuth {
    /// A header that never changes (`x-api-key` or `authorization`).
    Fixed(HeaderName, HeaderValue),
    /// `x-api-key` from the key helper.
    Helper(CachedKey),
}

/// One request, ready to send.
struct Prepared {
    url: String,
    headers: HeaderMap,
    body: reqwest::Body,
}

fn header_error(what: &str) -> ApiError {
    ApiError::InvalidConfig {
        message: format!("{what} contains characters not allowed in an HTTP header"),
    }
}

fn secret_header(value: &str, what: &str) -> Result<HeaderValue, ApiError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| header_error(what))?;
    value.set_sensitive(true);
    Ok(value)
}

impl Provider {
    fn new(config: &ClientConfig) -> Result<Self, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&config.user_agent)
                .map_err(|_| header_error("the user agent"))?,
        );
        if !config.betas.is_empty() {
            headers.insert(
                "anthropic-beta",
                HeaderValue::from_str(&config.betas.join(","))
                    .map_err(|_| header_error("--betas"))?,
            );
        }
        match &config.backend {
            Backend::Anthropic(credential) => {
                headers.insert(
                    "anthropic-version",
                    HeaderValue::from_static(ANTHROPIC_VERSION),
                );
                let auth = match credential {
                    Credential::ApiKey(key) => AnthropicAuth::Fixed(
                        HeaderName::from_static("x-api-key"),
                        secret_header(key, "the API key")?,
                    ),
                    Credential::BearerToken(token) => AnthropicAuth::Fixed(
                        AUTHORIZATION,
                        secret_header(&format!("Bearer {token}"), "ANTHROPIC_AUTH_TOKEN")?,
                    ),
                    Credential::KeyHelper(helper) => {
                        AnthropicAuth::Helper(CachedKey::new(helper.clone()))
                    }
                };
                Ok(Self::Anthropic {
                    url: config.messages_url(),
                    headers,
                    auth,
                })
            }
            #[cfg(feature = "bedrock")]
            Backend::Bedrock(options) => {
                headers.insert(
                    reqwest::header::ACCEPT,
                    HeaderValue::from_static("application/vnd.amazon.eventstream"),
                );
                Ok(Self::Bedrock {
                    base_url: config.base_url.clone(),
                    headers,
                    signer: Box::new(crate::bedrock::BedrockSigner::new(options, &config.network)),
                })
            }
            #[cfg(feature = "vertex")]
            Backend::Vertex(options) => {
                if options.project_id.is_empty() {
                    return Err(ApiError::InvalidConfig {
                        message: "Vertex AI needs a project: set ANTHROPIC_VERTEX_PROJECT_ID"
                            .to_owned(),
                    });
                }
                Ok(Self::Vertex {
                    base_url: config.base_url.clone(),
                    project_id: options.project_id.clone(),
                    region: options.region.clone(),
                    headers,
                    tokens: match &options.credentials {
                        GoogleCredentialSource::Skip => None,
                        GoogleCredentialSource::File(file) => {
                            Some(Box::new(crate::vertex::TokenSource::new(file)?))
                        }
                        GoogleCredentialSource::Metadata { host } => Some(Box::new(
                            crate::vertex::TokenSource::metadata(host, &config.network),
                        )),
                    },
                })
            }
            #[cfg(not(feature = "vertex"))]
            Backend::Vertex(_) => Err(ApiError::InvalidConfig {
                message: "this gyre was built without Google Vertex AI support (the `vertex` \
                          feature of gyre-api)"
                    .to_owned(),
            }),
            #[cfg(not(feature = "bedrock"))]
            Backend::Bedrock(_) => Err(ApiError::InvalidConfig {
                message: "this gyre was built without Amazon Bedrock support (the `bedrock` \
                          feature of gyre-api)"
                    .to_owned(),
            }),
        }
    }

    /// The URL, headers and body of one attempt at `request`.
    async fn prepare(
        &self,
        request: &MessagesRequest,
        encoder: &Mutex<BodyEncoder>,
        // Bedrock and Vertex may fetch credentials over it first.
        #[cfg_attr(
            not(any(feature = "vertex", feature = "bedrock")),
            allow(unused_variables)
        )]
        http: &reqwest::Client,
    ) -> Result<Prepared, ApiError> {
        match self {
            Self::Anthropic { url, headers, auth } => {
                let body = encode(request, encoder)?;
                let mut headers = headers.clone();
                match auth {
                    AnthropicAuth::Fixed(name, value) => {
                        headers.insert(name, value.clone());
                    }
                    AnthropicAuth::Helper(key) => {
                        let key = key.get().await?;
                        headers.insert("x-api-key", secret_header(&key, "apiKeyHelper's output")?);
                    }
                }
                Ok(Prepared {
                    url: url.clone(),
                    headers,
                    body: body.into(),
                })
            }
            #[cfg(feature = "bedrock")]
            Self::Bedrock {
                base_url,
                headers,
                signer,
            } => {
                let url = crate::bedrock::url(base_url, &signer.model_id(&request.model));
                let body = crate::bedrock::body(request)?;
                let mut headers = headers.clone();
                signer.sign(http, &url, &mut headers, &body).await?;
                Ok(Prepared {
                    url,
                    headers,
                    body: body.into(),
                })
            }
            #[cfg(feature = "vertex")]
            Self::Vertex {
                base_url,
                project_id,
                region,
                headers,
                tokens,
            } => {
                let model = crate::model_ids::vertex_model_id(&request.model);
                let url = crate::vertex::url(base_url, project_id, region, &model);
                let body = crate::vertex::body(request)?;
                let mut headers = headers.clone();
                if let Some(tokens) = tokens {
                    let token = tokens.token(http).await?;
                    headers.insert(
                        AUTHORIZATION,
                        secret_header(&format!("Bearer {token}"), "the Google access token")?,
                    );
                }
                Ok(Prepared {
                    url,
                    headers,
                    body: body.into(),
                })
            }
        }
    }

    /// The service behind this provider, whose settings errors name.
    fn service(&self) -> crate::Service {
        match self {
            Self::Anthropic { .. } => crate::Service::Anthropic,
            #[cfg(feature = "bedrock")]
            Self::Bedrock { .. } => crate::Service::Bedrock,
            #[cfg(feature = "vertex")]
            Self::Vertex { .. } => crate::Service::Vertex,
        }
    }

    /// The error of a non-2xx response.
    fn error(
        &self,
        status: u16,
        headers: &HeaderMap,
        body: &str,
        model: &str,
        url: &str,
    ) -> ApiError {
        let hints = ServerHints::from_headers(headers, SystemTime::now());
        match self {
            Self::Anthropic { .. } => ApiError::from_response(status, hints, body, model, url),
            #[cfg(feature = "vertex")]
            Self::Vertex { .. } => {
                ApiError::from_response(status, hints, body, model, url).for_service(self.service())
            }
            #[cfg(feature = "bedrock")]
            Self::Bedrock { .. } => crate::bedrock::error(status, headers, hints, body, model, url)
                .for_service(self.service()),
        }
    }

    /// The stream events of a 2xx response's body.
    fn events(
        &self,
        response: reqwest::Response,
    ) -> Pin<Box<dyn Stream<Item = Result<StreamEvent, ApiError>> + Send>> {
        match self {
            Self::Anthropic { .. } => Box::pin(sse_events(response.bytes_stream())),
            #[cfg(feature = "vertex")]
            Self::Vertex { .. } => Box::pin(sse_events(response.bytes_stream())),
            #[cfg(feature = "bedrock")]
            Self::Bedrock { .. } => Box::pin(crate::bedrock::events(response.bytes_stream())),
        }
    }

    /// The service refused the credentials (a 401, or Bedrock's 403 for unknown or
    /// expired keys): forget any that were fetched, so that the retry fetches them anew.
    async fn refused(&self) {
        match self {
            Self::Anthropic {
                auth: AnthropicAuth::Helper(key),
                ..
            } => key.invalidate().await,
            Self::Anthropic {
                auth: AnthropicAuth::Fixed(..),
                ..
            } => {}
            #[cfg(feature = "bedrock")]
            Self::Bedrock { signer, .. } => signer.refused().await,
            #[cfg(feature = "vertex")]
            Self::Vertex {
                tokens: Some(tokens),
                ..
            } => tokens.invalidate().await,
            #[cfg(feature = "vertex")]
            Self::Vertex { tokens: None, .. } => {}
        }
    }
}

fn encode(request: &MessagesRequest, encoder: &Mutex<BodyEncoder>) -> Result<Bytes, ApiError> {
    encoder
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .encode(request)
        .map_err(|e| ApiError::InvalidConfig {
            message: format!("request could not be encoded: {e}"),
        })
}

impl AnthropicClient {
    /// Builds the HTTP client. Fails on a key or user agent that cannot be a header,
    /// a base URL that is not http(s), or unusable proxy or CA settings.
    pub fn new(config: ClientConfig) -> Result<Self, ApiError> {
        if !(config.base_url.starts_with("http://") || config.base_url.starts_with("https://")) {
            return Err(ApiError::InvalidConfig {
                message: format!(
                    "ANTHROPIC_BASE_URL must start with http:// or https:// (got `{}`)",
                    config.base_url
                ),
            });
        }
        let provider = Provider::new(&config)?;
        let http = config
            .network
            .client_builder()
            .map_err(|e| ApiError::InvalidConfig {
                message: e.to_string(),
            })?
            .connect_timeout(config.connect_timeout)
            .build()?;
        Ok(Self {
            http,
            provider: Arc::new(provider),
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
        let provider = Arc::clone(&self.provider);
        let encoder = Arc::clone(&self.encoder);
        Box::pin(async_stream::stream! {
            let prepared = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ApiError::Aborted),
                p = provider.prepare(&request, &encoder, &http) => p,
            };
            let Prepared { url, headers, body } = match prepared {
                Ok(p) => p,
                Err(e) => {
                    yield Err(e);
                    return;
                }
            };
            let send = http.post(&url).headers(headers).body(body).send();
            let response = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ApiError::Aborted),
                r = send => r.map_err(|e| ApiError::from(e).for_service(provider.service())),
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
                let response_headers = response.headers().clone();
                let body = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Err(ApiError::Aborted),
                    b = response.text() => Ok(b.unwrap_or_default()),
                };
                let error = match body {
                    Ok(body) => provider.error(status.as_u16(), &response_headers, &body, &request.model, &url),
                    Err(e) => e,
                };
                if matches!(error, ApiError::Authentication { .. }) {
                    provider.refused().await;
                }
                yield Err(error);
                return;
            }
            // The API names each request in a header; the response's message carries it.
            let request_id = response
                .headers()
                .get("request-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut events = provider.events(response);
            let mut received = 0u64;
            loop {
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Some(Err(ApiError::Aborted)),
                    n = events.next() => n,
                };
                match next {
                    None => return,
                    Some(Ok(mut event)) => {
                        received += 1;
                        if let StreamEvent::MessageStart { message } = &mut event {
                            message.request_id.clone_from(&request_id);
                        }
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
