//! A Messages API endpoint on 127.0.0.1 backed by any gyre-api [`ModelClient`]: lets the
//! real `gyre` binary talk, unchanged, to a [`RecordingClient`](gyre_api::RecordingClient)
//! or a [`ReplayClient`](gyre_api::ReplayClient).
//!
//! Each `POST /v1/messages` body is parsed into a `MessagesRequest` and handed to the
//! client; its events go back as SSE (`encode_sse`), so gyre sees the same bytes whether
//! the client records or replays. A failure before the first event becomes the HTTP
//! error it came from (status, error body, `retry-after-ms`, `x-should-retry`); an error
//! event mid-stream becomes `event: error`; a cut or connection failure aborts the
//! connection.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, Result};
use bytes::Bytes;
use futures::StreamExt;
use gyre_api::{ApiError, ModelClient, encode_sse};
use gyre_protocol::{MessagesRequest, StreamEvent};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The proxy, serving on a thread of its own until dropped.
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    pub fn spawn(client: Arc<dyn ModelClient>) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("could not start the proxy runtime")?;
        let listener = runtime
            .block_on(TcpListener::bind(SocketAddr::from((
                Ipv4Addr::LOCALHOST,
                0,
            ))))
            .context("could not bind the proxy")?;
        let addr = listener.local_addr()?;
        let (shutdown, stop) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("xtask-proxy".to_owned())
            .spawn(move || {
                runtime.block_on(async move {
                    tokio::select! {
                        () = serve(listener, client) => {}
                        _ = stop => {}
                    }
                });
            })?;
        Ok(Self {
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, for `ANTHROPIC_BASE_URL`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(listener: TcpListener, client: Arc<dyn ModelClient>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let client = Arc::clone(&client);
                connections.spawn(async move {
                    let service = service_fn(move |req| handle(Arc::clone(&client), req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Ends a body with an error, which makes hyper abort the connection (a cut stream).
#[derive(Debug)]
struct Cut;
impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stream cut")
    }
}
impl std::error::Error for Cut {}

type Body = UnsyncBoxBody<Bytes, Cut>;

fn full(status: u16, content_type: &str, body: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never: Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    if let Ok(v) = content_type.parse() {
        response.headers_mut().insert("content-type", v);
    }
    response
}

async fn handle(
    client: Arc<dyn ModelClient>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if req.method() != hyper::Method::POST || !req.uri().path().ends_with("/v1/messages") {
        return Ok(error_response(
            404,
            "not_found_error",
            "xtask proxy: only POST /v1/messages",
        ));
    }
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(error_response(400, "invalid_request_error", &e.to_string())),
    };
    let request: MessagesRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return Ok(error_response(400, "invalid_request_error", &e.to_string())),
    };
    let mut events = client.stream(Arc::new(request), CancellationToken::new());
    let first = events.next().await;
    let first = match first {
        None => return Ok(sse_response(futures::stream::empty().boxed())),
        Some(Err(e)) if e.status().is_some() => return Ok(http_error(&e)),
        // A replay that went off the recording: fail gyre at once, not after 10 retries.
        Some(Err(e @ ApiError::Fixture { .. })) => {
            let mut response = error_response(400, "invalid_request_error", &e.to_string());
            response.headers_mut().insert(
                "x-should-retry",
                hyper::header::HeaderValue::from_static("false"),
            );
            return Ok(response);
        }
        Some(item) => item,
    };
    let frames = futures::stream::once(async move { first })
        .chain(events)
        .scan(false, |ended, item| {
            if *ended {
                return futures::future::ready(None);
            }
            let frame = match item {
                Ok(event) => Ok(Frame::data(Bytes::from(encode_sse(&event)))),
                Err(e) => {
                    *ended = true;
                    match stream_error(&e) {
                        Some(event) => Ok(Frame::data(Bytes::from(encode_sse(&event)))),
                        None => Err(Cut),
                    }
                }
            };
            futures::future::ready(Some(frame))
        })
        .boxed();
    Ok(sse_response(frames))
}

fn sse_response(
    frames: futures::stream::BoxStream<'static, Result<Frame<Bytes>, Cut>>,
) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    if let Ok(v) = "text/event-stream".parse() {
        response.headers_mut().insert("content-type", v);
    }
    response
}

/// The `event: error` an in-stream failure was, if it was one.
fn stream_error(e: &ApiError) -> Option<StreamEvent> {
    let kind = match e {
        ApiError::StreamError { error_type, .. } => error_type.clone(),
        ApiError::Overloaded { status: None, .. } => "overloaded_error".to_owned(),
        _ => return None,
    };
    Some(StreamEvent::Error {
        error: gyre_protocol::ErrorDetail {
            kind,
            message: message_of(e),
        },
    })
}

/// The server's own message inside an error (not gyre's explanation around it).
fn message_of(e: &ApiError) -> String {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::Object(map) => map
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| map.values().find_map(find)),
            _ => None,
        }
    }
    serde_json::to_value(e)
        .ok()
        .as_ref()
        .and_then(find)
        .unwrap_or_else(|| e.to_string())
}

fn http_error(e: &ApiError) -> Response<Body> {
    let status = e.status().unwrap_or(500);
    let kind = match e {
        ApiError::Http { error_type, .. } => error_type.clone(),
        ApiError::Overloaded { .. } => "overloaded_error".to_owned(),
        ApiError::BillingLimit { .. } => "billing_error".to_owned(),
        _ => match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            408 | 504 => "timeout_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            _ => "api_error",
        }
        .to_owned(),
    };
    let mut response = error_response(status, &kind, &message_of(e));
    if let Some(hints) = e.hints() {
        let headers = response.headers_mut();
        if let Some(ms) = hints.retry_after_ms
            && let Ok(v) = ms.to_string().parse()
        {
            headers.insert("retry-after-ms", v);
        }
        if let Some(retry) = hints.should_retry
            && let Ok(v) = retry.to_string().parse()
        {
            headers.insert("x-should-retry", v);
        }
    }
    response
}

fn error_response(status: u16, kind: &str, message: &str) -> Response<Body> {
    full(
        status,
        "application/json",
        json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}
