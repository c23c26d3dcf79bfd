//! The HTTP server: accepts connections on 127.0.0.1, hands each `POST /v1/messages` the
//! next turn of the script and records every request.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::TestkitError;
use crate::background::{Background, bind};
use crate::render::{self, RenderContext};
use crate::script::{CutMode, HttpErrorTurn, ResponseTurn, Script, Turn, WhenExhausted};

/// One request the server received, as tests see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapturedRequest {
    /// `POST`, `GET`, …
    pub method: String,
    /// The path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// The query string, if any (without `?`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Every header, names lower-cased; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON; a body that is not JSON is kept as a JSON string, an empty
    /// one is `null`.
    pub body: Value,
    /// Index into `Script::turns` of the turn that answered this request; `None` when no
    /// turn did (script exhausted, wrong API key, invalid body, unknown path).
    pub turn: Option<usize>,
    /// Answered by the script's [`summary`](crate::Script::summary) answer (a summary
    /// request: `turn` is `None`, no turn was taken).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub summary: bool,
    /// Microseconds the server took from the moment the whole body was read to its
    /// answer: parsing the body, the turn's `delay_ms`, rendering (not the streaming of
    /// an SSE body after that). Sending the body is the client's work and is not
    /// included. A benchmark subtracts it to time the client alone. `None` until the
    /// answer is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handled_us: Option<u64>,
}

impl CapturedRequest {
    /// A header's value; the name is matched case-insensitively.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The body as a typed request, e.g. `gyre_protocol::MessagesRequest`.
    ///
    /// # Errors
    /// serde's error when the body does not have that shape.
    pub fn body_as<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.body)
    }
}

/// A request as stored: the body stays raw until someone asks, so a megabyte of history
/// costs the server a reference count, not a parse.
#[derive(Debug)]
struct Captured {
    method: String,
    path: String,
    query: Option<String>,
    headers: BTreeMap<String, String>,
    body: Bytes,
    turn: Option<usize>,
    summary: bool,
    handled: Option<Duration>,
}

impl Captured {
    /// `with_body: false` leaves the body out (`null`): a timing query on a long
    /// session need not parse megabytes.
    fn to_public(&self, with_body: bool) -> CapturedRequest {
        let body = if self.body.is_empty() || !with_body {
            Value::Null
        } else {
            serde_json::from_slice(&self.body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&self.body).into_owned()))
        };
        CapturedRequest {
            method: self.method.clone(),
            path: self.path.clone(),
            query: self.query.clone(),
            headers: self.headers.clone(),
            body,
            turn: self.turn,
            summary: self.summary,
            handled_us: self
                .handled
                .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
        }
    }
}

#[derive(Debug, Default)]
struct Log {
    requests: Vec<Captured>,
    /// Requests answered by a turn (repeats included).
    served: usize,
}

#[derive(Debug)]
struct State {
    script: Script,
    log: Mutex<Log>,
}

impl State {
    fn log(&self) -> MutexGuard<'_, Log> {
        // A panic elsewhere while holding the lock leaves the log consistent (every
        // mutation is a single push or increment), so poisoning is ignored.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn requests(&self, with_body: bool) -> Vec<CapturedRequest> {
        self.log()
            .requests
            .iter()
            .map(|r| r.to_public(with_body))
            .collect()
    }

    /// Records a request and picks its turn, atomically, so that capture order and turn
    /// order agree. Returns the request number and the turn index (`None`: exhausted).
    fn admit(&self, mut captured: Captured, wants_turn: bool) -> (usize, Option<usize>) {
        let mut log = self.log();
        let number = log.requests.len();
        let turns = self.script.turns.len();
        let turn = if !wants_turn {
            None
        } else if log.served < turns {
            Some(log.served)
        } else {
            match self.script.when_exhausted {
                WhenExhausted::RepeatLast => turns.checked_sub(1),
                WhenExhausted::Error => None,
            }
        };
        if turn.is_some() {
            log.served += 1;
        }
        captured.turn = turn;
        log.requests.push(captured);
        (number, turn)
    }
}

/// The subset of the request body the server reads.
#[derive(Deserialize)]
struct Probe {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

/// A running scripted server on `127.0.0.1`. Dropping it stops the server and closes every
/// open connection (stalled streams included).
#[derive(Debug)]
pub struct TestServer {
    addr: SocketAddr,
    state: Arc<State>,
    run: Run,
}

#[derive(Debug)]
enum Run {
    /// Serving on a task of the caller's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// Serving on a runtime of its own, on a background thread.
    Thread(#[expect(dead_code, reason = "held for its Drop, which stops the thread")] Background),
}

impl TestServer {
    /// Starts serving `script` on a random port, on the current tokio runtime.
    ///
    /// The server runs on a task of that runtime: a test that blocks its thread (e.g. on
    /// `std::process::Command`) in a current-thread runtime would starve it; use
    /// [`TestServer::spawn`] there.
    ///
    /// # Errors
    /// [`TestkitError::InvalidScript`], [`TestkitError::Bind`], or
    /// [`TestkitError::NoRuntime`] when called outside a tokio runtime.
    // `async` although nothing is awaited: it documents (and the compiler enforces) that
    // the caller is on a runtime, which the server task needs.
    pub async fn start(script: Script) -> Result<Self, TestkitError> {
        Self::start_on(script, 0)
    }

    /// Like [`TestServer::start`] on a chosen port (0: random).
    ///
    /// # Errors
    /// As [`TestServer::start`].
    pub fn start_on(script: Script, port: u16) -> Result<Self, TestkitError> {
        script.validate()?;
        let handle = tokio::runtime::Handle::try_current().map_err(|_| TestkitError::NoRuntime)?;
        let (std_listener, addr) = bind(port)?;
        let listener = {
            let _entered = handle.enter();
            TcpListener::from_std(std_listener)
                .map_err(|error| TestkitError::Bind { addr, error })?
        };
        let state = Arc::new(State {
            script,
            log: Mutex::default(),
        });
        let task = handle.spawn(serve(listener, Arc::clone(&state)));
        Ok(Self {
            addr,
            state,
            run: Run::Task(task),
        })
    }

    /// Starts serving `script` on a random port from synchronous code: the server gets a
    /// runtime of its own on a background thread. Dropping the server stops that thread.
    ///
    /// # Errors
    /// [`TestkitError::InvalidScript`], [`TestkitError::Bind`], [`TestkitError::Runtime`].
    pub fn spawn(script: Script) -> Result<Self, TestkitError> {
        Self::spawn_on(script, 0)
    }

    /// Like [`TestServer::spawn`] on a chosen port (0: random).
    ///
    /// # Errors
    /// As [`TestServer::spawn`].
    pub fn spawn_on(script: Script, port: u16) -> Result<Self, TestkitError> {
        script.validate()?;
        let state = Arc::new(State {
            script,
            log: Mutex::default(),
        });
        let served_state = Arc::clone(&state);
        let run = Background::spawn("testkit", port, move |listener| {
            serve(listener, served_state)
        })?;
        Ok(Self {
            addr: run.addr(),
            state,
            run: Run::Thread(run),
        })
    }

    /// The base URL, `http://127.0.0.1:PORT` (no trailing slash): what `ANTHROPIC_BASE_URL` takes.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The listening port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every request received so far (except `/_testkit/*`), in arrival order.
    #[must_use]
    pub fn requests(&self) -> Vec<CapturedRequest> {
        self.state.requests(true)
    }

    /// The body of the `index`-th request (except `/_testkit/*`) exactly as it arrived:
    /// what a signature covers.
    #[must_use]
    pub fn raw_body(&self, index: usize) -> Option<Bytes> {
        self.state.log().requests.get(index).map(|r| r.body.clone())
    }

    /// How many requests were received so far (except `/_testkit/*`).
    #[must_use]
    pub fn request_count(&self) -> usize {
        self.state.log().requests.len()
    }

    /// How many requests a turn has answered so far (repeats of the last turn included).
    #[must_use]
    pub fn turns_served(&self) -> usize {
        self.state.log().served
    }

    /// The script being served.
    #[must_use]
    pub fn script(&self) -> &Script {
        &self.state.script
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        match &mut self.run {
            // Dropping the serve task drops its JoinSet, which aborts every connection.
            Run::Task(task) => task.abort(),
            // Dropping it stops its thread.
            Run::Thread(_) => {}
        }
    }
}

/// Accepts connections forever; every connection is a task of `connections`, so dropping
/// this future closes them all.
async fn serve(listener: TcpListener, state: Arc<State>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, Arc::clone(&state)));
                }
                // Out of file descriptors or similar: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(stream: TcpStream, state: Arc<State>) {
    // Small SSE writes must not wait for Nagle + delayed ACK (tens of ms).
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| handle(Arc::clone(&state), req));
    // Errors are client disconnects and deliberate cuts: nothing to report.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The error a cut stream ends with; hyper answers it by aborting the connection.
#[derive(Debug, thiserror::Error)]
#[error("gyre-testkit: stream cut after {0} events")]
struct StreamCut(usize);

type Body = UnsyncBoxBody<Bytes, StreamCut>;

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn response(status: u16, content_type: &'static str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn json_response(status: u16, json: String) -> Response<Body> {
    response(status, "application/json", full(json))
}

fn add_headers(response: &mut Response<Body>, headers: &BTreeMap<String, String>) {
    for (name, value) in headers {
        // Names and values were checked when the script was validated.
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
}

fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut map = BTreeMap::<String, String>::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        map.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    map
}

async fn handle(
    state: Arc<State>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    if parts.method == Method::GET && path == "/_testkit/health" {
        return Ok(response(200, "text/plain", full("ok")));
    }
    if parts.method == Method::GET && path == "/_testkit/requests" {
        let with_body = parts.uri.query() != Some("bodies=false");
        let requests = serde_json::to_string(&state.requests(with_body)).unwrap_or_default();
        return Ok(json_response(200, requests));
    }
    // A body cut short by the client is recorded as far as it got.
    let collected = body.collect().await;
    // The server's share starts once the last byte is in: sending it is the client's
    // work; keeping a copy of it is the server's.
    let arrived = Instant::now();
    let body = collected.map(kept_copy).unwrap_or_default();
    let headers = header_map(&parts.headers);
    let bedrock_model = (parts.method == Method::POST)
        .then(|| crate::bedrock::invoke_model(path))
        .flatten();
    // Vertex AI's streamRawPredict speaks the Messages API's SSE; the model is in the path.
    let vertex_model = (parts.method == Method::POST)
        .then(|| crate::google::stream_raw_predict_model(path))
        .flatten();
    let is_messages = parts.method == Method::POST
        && (path == "/v1/messages" || bedrock_model.is_some() || vertex_model.is_some());
    // Bedrock requests are signed, not keyed: tests check their signatures. Vertex
    // requests carry a bearer token: `require_api_key` names it.
    let key_ok = match &state.script.require_api_key {
        Some(key) if vertex_model.is_some() => {
            headers.get("authorization") == Some(&format!("Bearer {key}"))
        }
        Some(key) => bedrock_model.is_some() || headers.get("x-api-key") == Some(key),
        None => true,
    };
    let probe = serde_json::from_slice::<Probe>(&body).map(|mut probe| {
        if bedrock_model.is_some() {
            // The model is in the path, and every invoke-with-response-stream streams.
            probe.model.clone_from(&bedrock_model);
            probe.stream = Some(true);
        }
        if vertex_model.is_some() {
            probe.model.clone_from(&vertex_model);
        }
        probe
    });
    // Over the context window the API refuses the request before any turn is taken.
    let too_long = state
        .script
        .context_window
        .map(|window| (request_tokens(body.len()), window))
        .filter(|&(tokens, window)| is_messages && tokens > window);
    let answerable = is_messages && key_ok && probe.is_ok() && too_long.is_none();
    // A summary request is answered on the side and takes no turn.
    let summary = state
        .script
        .summary
        .as_ref()
        .filter(|s| answerable && s.matches(&body));
    let captured = Captured {
        method: parts.method.to_string(),
        path: path.to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers,
        body: body.clone(),
        turn: None,
        summary: summary.is_some(),
        handled: None,
    };
    let (number, turn) = state.admit(captured, answerable && summary.is_none());

    let mut response = if !is_messages {
        let message = format!("gyre-testkit: no route for {} {path}", parts.method);
        json_response(404, render::error_body("not_found_error", &message))
    } else if !key_ok {
        json_response(
            401,
            render::error_body("authentication_error", "invalid x-api-key"),
        )
    } else if let Some((tokens, window)) = too_long {
        let message = format!("prompt is too long: {tokens} tokens > {window} maximum");
        json_response(400, render::error_body("invalid_request_error", &message))
    } else {
        match (probe, turn) {
            (Err(e), _) => {
                let message = format!("gyre-testkit: request body is not a JSON object: {e}");
                json_response(400, render::error_body("invalid_request_error", &message))
            }
            (Ok(probe), turn) => match summary
                .map(|s| &s.turn)
                .or_else(|| turn.and_then(|i| state.script.turns.get(i)))
            {
                Some(Turn::Response(turn)) => {
                    let dialect = Dialect::of(bedrock_model.is_some());
                    let sizes = (state.script.chunk_chars, body.len());
                    respond(turn, &probe, number, sizes, dialect).await
                }
                Some(Turn::HttpError(turn)) => {
                    http_error(turn, Dialect::of(bedrock_model.is_some())).await
                }
                None => exhausted(state.script.turns.len()),
            },
        }
    };
    if let Ok(id) = HeaderValue::from_str(&format!("req_testkit_{number}")) {
        response.headers_mut().insert("request-id", id);
    }
    if let Some(r) = state.log().requests.get_mut(number) {
        r.handled = Some(arrived.elapsed());
    }
    Ok(response)
}

/// The body in memory of its own. Every request is kept for the test to look at; were
/// the kept body the connection's read buffer, the next request would be read into
/// fresh memory, and its page faults timed as the client's sending.
fn kept_copy(collected: http_body_util::Collected<Bytes>) -> Bytes {
    use bytes::{Buf as _, BufMut as _};
    let mut frames = collected.aggregate();
    let mut copy = Vec::with_capacity(frames.remaining());
    copy.put(&mut frames);
    Bytes::from(copy)
}

fn exhausted(turns: usize) -> Response<Body> {
    let message = format!("gyre-testkit: script exhausted after {turns} turns");
    let mut response = json_response(500, render::error_body("api_error", &message));
    // A client under test must fail now, not retry for minutes against an empty script.
    response
        .headers_mut()
        .insert("x-should-retry", HeaderValue::from_static("false"));
    response
}

async fn delay(ms: Option<u64>) {
    if let Some(ms) = ms.filter(|&ms| ms > 0) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// How an answer is framed: as the Anthropic API sends it, or as Bedrock does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Anthropic,
    Bedrock,
}

impl Dialect {
    fn of(bedrock: bool) -> Self {
        if bedrock {
            Self::Bedrock
        } else {
            Self::Anthropic
        }
    }
}

async fn http_error(turn: &HttpErrorTurn, dialect: Dialect) -> Response<Body> {
    delay(turn.delay_ms).await;
    let error = &turn.http_error;
    if dialect == Dialect::Bedrock {
        let (status, exception) = crate::bedrock::error_status(error.status);
        let anthropic = match &error.body {
            Some(Value::String(text)) => text.clone(),
            Some(body) => body.to_string(),
            None => render::default_error_body(error.status),
        };
        let mut response = json_response(status, crate::bedrock::error_body(&anthropic));
        if let Ok(value) = HeaderValue::from_str(&format!(
            "{exception}:http://internal.amazon.com/coral/com.amazon.bedrock/"
        )) {
            response.headers_mut().insert("x-amzn-errortype", value);
        }
        add_headers(&mut response, &error.headers);
        return response;
    }
    let mut response = match &error.body {
        Some(Value::String(text)) => response(
            error.status,
            "text/plain; charset=utf-8",
            full(text.clone()),
        ),
        Some(body) => json_response(error.status, body.to_string()),
        None => json_response(error.status, render::default_error_body(error.status)),
    };
    add_headers(&mut response, &error.headers);
    response
}

async fn respond(
    turn: &ResponseTurn,
    probe: &Probe,
    number: usize,
    (chunk_chars, body_len): (usize, usize),
    dialect: Dialect,
) -> Response<Body> {
    delay(turn.delay_ms).await;
    let ctx = RenderContext {
        request_tokens: request_tokens(body_len),
        request_model: probe.model.as_deref(),
        request_number: number,
        chunk_chars,
    };
    let mut response = if let Some(raw) = &turn.raw_sse {
        sse_response(full(raw.clone()))
    } else if probe.stream == Some(false) && turn.raw_events.is_none() {
        json_response(200, render::message_json(turn, &ctx))
    } else {
        let mut events = render::stream_events(turn, &ctx);
        if dialect == Dialect::Bedrock {
            events = events.iter().map(crate::bedrock::reframe).collect();
        }
        let playback = Playback::new(turn, events);
        let stream = futures::stream::unfold(playback, |mut playback| async move {
            playback.next_frame().await.map(|frame| (frame, playback))
        });
        let body = StreamBody::new(stream).boxed_unsync();
        match dialect {
            Dialect::Anthropic => sse_response(body),
            Dialect::Bedrock => response(200, "application/vnd.amazon.eventstream", body),
        }
    };
    add_headers(&mut response, &turn.headers);
    response
}

/// The input tokens a request of `body_len` bytes is reported to cost when its turn
/// scripts none: about four bytes a token, as the API counts English and code.
fn request_tokens(body_len: usize) -> u64 {
    u64::try_from(body_len / 4).unwrap_or(u64::MAX)
}

fn sse_response(body: Body) -> Response<Body> {
    let mut response = response(200, "text/event-stream; charset=utf-8", body);
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// Sends rendered events with the turn's delays, stall and cut.
struct Playback {
    events: Vec<Bytes>,
    next: usize,
    per_event: Option<Duration>,
    /// Cut before sending this event (always less than `events.len()`).
    cut_at: Option<usize>,
    cut_mode: CutMode,
    /// Stall before sending this event (may equal `events.len()`: stall before the end).
    stall_at: Option<usize>,
    /// `None`: forever.
    stall_for: Option<Duration>,
}

impl Playback {
    fn new(turn: &ResponseTurn, events: Vec<Bytes>) -> Self {
        let len = events.len();
        Self {
            cut_at: turn.cut_after_events.filter(|&n| n < len),
            cut_mode: turn.cut_mode,
            stall_at: turn.stall.map(|s| s.after_events.min(len)),
            stall_for: turn.stall.and_then(|s| s.ms).map(Duration::from_millis),
            per_event: turn
                .delay_ms_per_event
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
            events,
            next: 0,
        }
    }

    async fn next_frame(&mut self) -> Option<Result<Frame<Bytes>, StreamCut>> {
        if self.stall_at == Some(self.next) {
            self.stall_at = None;
            match self.stall_for {
                Some(pause) => tokio::time::sleep(pause).await,
                // Held until the client hangs up or the server stops (both drop this body).
                None => std::future::pending::<()>().await,
            }
        }
        if self.cut_at == Some(self.next) {
            let sent = self.next;
            self.cut_at = None;
            self.next = self.events.len();
            return match self.cut_mode {
                CutMode::Close => {
                    // hyper drops its write buffer when a body fails; returning Pending
                    // once makes it flush the events before the cut to the socket first.
                    tokio::task::yield_now().await;
                    Some(Err(StreamCut(sent)))
                }
                CutMode::Eof => None,
            };
        }
        let len = self.events.len();
        if self.next >= len {
            return None;
        }
        if let Some(pause) = self.per_event {
            tokio::time::sleep(pause).await;
            let event = self.events[self.next].clone();
            self.next += 1;
            return Some(Ok(Frame::data(event)));
        }
        // Without per-event delays, everything up to the next stall or cut goes out in
        // one write: fewer syscalls, same bytes.
        let end = [self.stall_at, self.cut_at]
            .into_iter()
            .flatten()
            .filter(|&at| at > self.next)
            .min()
            .unwrap_or(len)
            .min(len);
        let batch = &self.events[self.next..end];
        self.next = end;
        let data = if let [single] = batch {
            single.clone()
        } else {
            let mut buf = BytesMut::with_capacity(batch.iter().map(Bytes::len).sum());
            for event in batch {
                buf.extend_from_slice(event);
            }
            buf.freeze()
        };
        Some(Ok(Frame::data(data)))
    }
}
