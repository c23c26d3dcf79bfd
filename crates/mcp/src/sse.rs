//! The legacy HTTP+SSE transport (MCP 2024-11-05), which `rmcp` 3 no longer ships:
//! a GET opens an event stream whose first `endpoint` event names the URL (relative to
//! the server) each client message is POSTed to; the server's JSON-RPC messages come
//! back as `message` events on the stream.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures::{Sink, Stream, StreamExt, TryStreamExt, future};
use gyre_api::{ServerSentEvent, SseError, server_sent_events};
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};

use crate::start::StartError;

/// Why a message could not be POSTed to the server.
#[derive(Debug, thiserror::Error)]
pub enum SseSendError {
    /// The request failed (connection refused, reset, …).
    #[error("POST {endpoint}: {message}")]
    Request {
        /// The message endpoint.
        endpoint: String,
        /// The HTTP client's error with its causes.
        message: String,
    },
    /// The server refused the message.
    #[error("POST {endpoint}: HTTP {status}")]
    Status {
        /// The message endpoint.
        endpoint: String,
        /// The server's status.
        status: reqwest::StatusCode,
    },
    /// The message could not be turned into JSON.
    #[error("the message could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
}

/// One event of the server's stream, as the client reads it.
#[derive(Debug)]
pub(crate) enum SseEvent {
    /// `event: endpoint`: where to POST messages, resolved against the stream's URL.
    Endpoint(Url),
    /// `event: message` (or no event name): one JSON-RPC message.
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Anything else: a comment, a keep-alive, an unknown event, data that is not
    /// JSON-RPC (logged).
    Ignored,
}

/// What one event means for the client connected to `base`.
pub(crate) fn classify(event: &ServerSentEvent, base: &Url) -> SseEvent {
    let data = event.data.trim();
    match event.name() {
        "endpoint" => match base.join(data) {
            Ok(url) => SseEvent::Endpoint(url),
            Err(e) => {
                tracing::warn!("MCP SSE server sent an endpoint {data:?} that is no URL: {e}");
                SseEvent::Ignored
            }
        },
        "message" if !data.is_empty() => {
            match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(data) {
                Ok(message) => SseEvent::Message(Box::new(message)),
                Err(e) => {
                    tracing::warn!("dropped an SSE message that is not JSON-RPC: {e}");
                    SseEvent::Ignored
                }
            }
        }
        _ => SseEvent::Ignored,
    }
}

/// Why the event stream broke off: the transport's error with its causes, or the
/// decoder's.
#[derive(Debug)]
struct StreamError(String);

impl From<SseError> for StreamError {
    fn from(e: SseError) -> Self {
        Self(e.to_string())
    }
}

type Messages = Pin<Box<dyn Stream<Item = RxJsonRpcMessage<RoleClient>> + Send>>;
type Posts = Pin<Box<dyn Sink<TxJsonRpcMessage<RoleClient>, Error = SseSendError> + Send>>;

/// `error: cause: cause`, as reqwest's own message hides why a request failed.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        message.push_str(": ");
        message.push_str(&e.to_string());
        cause = e.source();
    }
    message
}

/// The configured headers as an HTTP header map.
pub(crate) fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, StartError> {
    let mut map = HeaderMap::new();
    for (key, value) in headers {
        let header_error = |message: String| StartError::Header {
            name: key.clone(),
            message,
        };
        let name = HeaderName::try_from(key.as_str()).map_err(|e| header_error(e.to_string()))?;
        let value =
            HeaderValue::try_from(value.as_str()).map_err(|e| header_error(e.to_string()))?;
        map.insert(name, value);
    }
    Ok(map)
}

/// Opens the event stream at `url` and waits for its `endpoint` event, within `timeout`;
/// returns the sink that POSTs gyre's messages and the stream of the server's. The
/// stream ends when the server closes its event stream.
pub(crate) async fn connect(
    client: reqwest::Client,
    url: &str,
    headers: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(Posts, Messages), StartError> {
    let headers = header_map(headers)?;
    let base = Url::parse(url).map_err(|e| StartError::Sse(format!("invalid URL {url:?}: {e}")))?;
    let open = async {
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| StartError::Sse(format!("GET {base}: {}", with_causes(&e))))?;
        if !response.status().is_success() {
            return Err(StartError::Sse(format!(
                "GET {base}: HTTP {}",
                response.status()
            )));
        }
        let mut events = Box::pin(server_sent_events(
            response
                .bytes_stream()
                .map_err(|e| StreamError(with_causes(&e))),
        ));
        loop {
            match events.next().await {
                Some(Ok(event)) => match classify(&event, &base) {
                    SseEvent::Endpoint(endpoint) => return Ok((endpoint, events)),
                    SseEvent::Message(_) | SseEvent::Ignored => {}
                },
                Some(Err(StreamError(e))) => {
                    return Err(StartError::Sse(format!("reading the event stream: {e}")));
                }
                None => {
                    return Err(StartError::Sse(
                        "the event stream ended before its `endpoint` event".to_owned(),
                    ));
                }
            }
        }
    };
    let (endpoint, events) = match tokio::time::timeout(timeout, open).await {
        Ok(opened) => opened?,
        Err(_) => {
            return Err(StartError::Timeout {
                timeout,
                stderr: String::new(),
            });
        }
    };
    let messages = events
        .take_while(|event| {
            if let Err(StreamError(e)) = event {
                tracing::debug!("MCP SSE stream ended: {e}");
            }
            future::ready(event.is_ok())
        })
        .filter_map(move |event| {
            future::ready(match event.map(|e| classify(&e, &base)) {
                Ok(SseEvent::Message(message)) => Some(*message),
                Ok(SseEvent::Endpoint(_) | SseEvent::Ignored) | Err(_) => None,
            })
        });
    let posts = futures::sink::unfold(
        (client, endpoint, headers),
        |(client, endpoint, headers), message: TxJsonRpcMessage<RoleClient>| async move {
            let body = serde_json::to_vec(&message)?;
            let response = client
                .post(endpoint.clone())
                .headers(headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| SseSendError::Request {
                    endpoint: endpoint.to_string(),
                    message: with_causes(&e),
                })?;
            if !response.status().is_success() {
                return Err(SseSendError::Status {
                    endpoint: endpoint.to_string(),
                    status: response.status(),
                });
            }
            Ok((client, endpoint, headers))
        },
    );
    Ok((Box::pin(posts), Box::pin(messages)))
}

/// The events of a complete SSE body, for tests of [`classify`].
#[cfg(test)]
async fn events_of(body: &'static str) -> Vec<ServerSentEvent> {
    let chunks = body
        .as_bytes()
        .chunks(7)
        .map(|c| Ok::<_, SseError>(bytes::Bytes::copy_from_slice(c)))
        .collect::<Vec<_>>();
    server_sent_events(futures::stream::iter(chunks))
        .filter_map(|e| future::ready(e.ok()))
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_endpoint_is_resolved_and_messages_are_json_rpc() {
        let body = ": keep-alive\n\n\
            event: endpoint\ndata: /message?sessionId=abc\n\n\
            event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n\
            event: message\ndata: not json\n\n\
            event: ping\ndata: {}\n\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
        let base = Url::parse("http://127.0.0.1:3001/sse").unwrap();
        let kinds: Vec<String> = events_of(body)
            .await
            .iter()
            .map(|e| match classify(e, &base) {
                SseEvent::Endpoint(url) => format!("endpoint {url}"),
                SseEvent::Message(m) => format!("message {}", serde_json::to_string(&m).unwrap()),
                SseEvent::Ignored => "ignored".to_owned(),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                // The comment (a keep-alive) is no event at all.
                "endpoint http://127.0.0.1:3001/message?sessionId=abc".to_owned(),
                r#"message {"jsonrpc":"2.0","id":1,"result":{}}"#.to_owned(),
                "ignored".to_owned(),
                "ignored".to_owned(),
                r#"message {"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#
                    .to_owned(),
            ]
        );
    }
}
