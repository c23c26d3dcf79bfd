//! A scripted Anthropic-compatible Messages API server for gyre's tests, demo and benchmarks.
//!
//! [`TestServer`] listens on `127.0.0.1` (random port) and answers each
//! `POST /v1/messages` with the next [`Turn`] of a [`Script`]: a response streamed as real
//! SSE exactly as the API sends it (or as one JSON message for `"stream": false`), or an
//! HTTP error. Faults can be injected per turn: per-event delays, cuts, stalls, in-stream
//! error events, unknown event types, raw (malformed) SSE. Every request is recorded for
//! assertions ([`TestServer::requests`]).
//!
//! ```
//! use gyre_testkit::{Script, TestServer, Turn};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = TestServer::start(Script::new([
//!     Turn::tool_use("Read", json!({"file_path": "/tmp/a"})),
//!     Turn::text("done").with_tokens(120, 8),
//! ]))
//! .await?;
//!
//! # let _ = rustls::crypto::ring::default_provider().install_default();
//! let sse = reqwest::Client::new()
//!     .post(format!("{}/v1/messages", server.url()))
//!     .header("x-api-key", "test")
//!     .body(json!({"model": "claude-x", "max_tokens": 10, "stream": true, "messages": []}).to_string())
//!     .send()
//!     .await?
//!     .text()
//!     .await?;
//! assert!(sse.starts_with("event: message_start\n"));
//! assert!(sse.contains(r#""stop_reason":"tool_use""#));
//!
//! let requests = server.requests();
//! assert_eq!(requests[0].header("x-api-key"), Some("test"));
//! assert_eq!(requests[0].turn, Some(0));
//! # Ok(())
//! # }
//! ```
//!
//! From synchronous tests (e.g. ones that run the `gyre` binary with
//! `std::process::Command`) use [`TestServer::spawn`], which runs the server on a thread
//! of its own. As a binary, `gyre-testkit --script FILE [--port P]` prints `PORT <n>` on
//! stdout and serves until SIGTERM or SIGINT.
//!
//! # Script format
//!
//! A script is a JSON object (or just the array of turns):
//!
//! ```json
//! {
//!   "turns": [ … ],
//!   "when_exhausted": "error",
//!   "require_api_key": "sk-test",
//!   "chunk_chars": 20,
//!   "summary": {"when_prompt_contains": "Write a detailed summary", "turn": { … }}
//! }
//! ```
//!
//! - `turns`: each `POST /v1/messages` takes the next turn, in order.
//! - `when_exhausted`: `"error"` (default) answers HTTP 500 `api_error`
//!   "gyre-testkit: script exhausted after N turns" with `x-should-retry: false`;
//!   `"repeat_last"` serves the last turn again.
//! - `require_api_key`: when set, a request whose `x-api-key` differs gets 401
//!   `authentication_error` and takes no turn. Otherwise headers are only recorded.
//! - `chunk_chars`: size of text, thinking and tool-input deltas (default 20).
//! - `summary` ([`SummaryAnswer`]): answers summary (compaction) requests on the side. A
//!   `POST /v1/messages` whose last message has a `text` block containing
//!   `when_prompt_contains` (tool results are not looked at) gets `turn`, a response turn,
//!   and takes no turn of `turns`; it is recorded with `"summary": true` and no `turn`.
//!   A scripted session can then run through autocompact, whenever its client decides
//!   to compact, without knowing in advance between which turns.
//! - `context_window`: when set, a `POST /v1/messages` whose size / 4 is more tokens gets
//!   the API's 400 `invalid_request_error` "prompt is too long: N tokens > W maximum"
//!   and takes no turn, so a client that does not compact in time meets the error a real
//!   session would.
//!
//! Unknown fields are errors, so that a typo (`cut_after_event`) cannot silently disable
//! a fault. Errors name the turn (`turns[3]: unknown field …`).
//!
//! ## Response turns
//!
//! ```json
//! {
//!   "content": [
//!     {"type": "thinking", "thinking": "Let me look.", "signature": "sig"},
//!     {"type": "redacted_thinking", "data": "opaque"},
//!     {"type": "text", "text": "Reading the file."},
//!     {"type": "tool_use", "name": "Read", "input": {"file_path": "src/main.rs"}},
//!     {"type": "tool_use", "id": "toolu_fixed", "name": "Bash", "raw_input_json": "{\"command\": \"ls"}
//!   ],
//!   "stop_reason": "tool_use",
//!   "usage": {"input_tokens": 1200, "output_tokens": 80,
//!             "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 0},
//!   "model": "claude-x",
//!   "id": "msg_1"
//! }
//! ```
//!
//! - `content`: `text`, `tool_use`, `thinking`, `redacted_thinking` blocks. A tool_use
//!   without `id` gets `toolu_testkit_<request number>_<block index>`, unique per server
//!   (also when the last turn repeats) and stable from run to run. `raw_input_json`
//!   replaces `input` and is streamed verbatim, for malformed-input tests.
//! - `stop_reason`: any string; default `tool_use` if there is a tool_use block, else
//!   `end_turn`. `stop_sequence` is optional.
//! - `usage`: all fields optional (default 0). When the input side (`input_tokens`,
//!   `cache_read_input_tokens`, `cache_creation_input_tokens`) is all 0, `input_tokens`
//!   is the request body's size / 4, as the API would count it, so a scripted session
//!   grows its context like a real one. `message_start` carries the input side and
//!   `output_tokens: 1`; `message_delta` carries all four as cumulative totals.
//! - `model`: default the request's `model`. `id`: default `msg_testkit_<request number>`.
//! - `headers`: extra response headers, `{"name": "value"}`.
//! - `chunk_chars`: this turn's delta size.
//!
//! The stream is `message_start`, `ping`, then per block `content_block_start`, its
//! deltas (`text_delta`s; an empty then several `input_json_delta`s; `thinking_delta`s
//! then one `signature_delta`; none for redacted thinking) and `content_block_stop`,
//! then `message_delta` and `message_stop`. Each event is framed
//! `event: <type>\ndata: <json>\n\n`. A request with `"stream": false` gets the whole
//! message as JSON instead; unlike the real API, a request without `stream` gets SSE,
//! since gyre always streams. Faults other than `delay_ms` apply to SSE only.
//!
//! Faults (all optional; "events" counts every SSE event, `ping` included):
//!
//! | field | effect |
//! |---|---|
//! | `"delay_ms": 300` | wait before answering at all (also on HTTP error turns) |
//! | `"delay_ms_per_event": 50` | wait before each event |
//! | `"cut_after_events": 4` | after 4 events close the connection (no `message_stop`) |
//! | `"cut_mode": "eof"` | with `cut_after_events`: end the body cleanly instead of aborting the connection (default `"close"`) |
//! | `"stall": {"after_events": 3, "ms": 500}` | after 3 events go silent for 500 ms, then continue; `"ms": null` holds the connection open forever |
//! | `"error_event": {"after_events": 2, "error": {"type": "overloaded_error", "message": "Overloaded"}}` | after 2 events send `event: error` and end the stream (`error` defaults to that one) |
//! | `"unknown_event_after": 2` | insert an event of type `testkit_unknown_event` after 2 events |
//! | `"raw_sse": "event: message_start\ndata: {oops\n\n"` | send exactly this text as the body (status 200, `text/event-stream`) |
//! | `"raw_events": [{"type": "message_start", …}, …]` | send these events instead of rendering `content`, each framed `event: <type>` + `data: <json>`, always as SSE; the other faults still apply (stream files: [`corpus`]) |
//! | `"raw_events_file": "streams/web_search.jsonl"` | the same, read from a stream file (one event per line) relative to the script file's directory when loading it |
//!
//! ## HTTP error turns
//!
//! ```json
//! {"http_error": {"status": 529,
//!                 "body": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
//!                 "headers": {"retry-after": "2", "x-should-retry": "false"}},
//!  "delay_ms": 0}
//! ```
//!
//! `body` defaults to the API's error body for the status: 400 `invalid_request_error`,
//! 401 `authentication_error`, 403 `permission_error`, 404 `not_found_error`, 408 and 504
//! `timeout_error`, 413 `request_too_large`, 429 `rate_limit_error`, 529
//! `overloaded_error`, other 5xx `api_error`. A JSON string body is sent as `text/plain`.
//!
//! # Other endpoints
//!
//! - `GET /_testkit/requests`: the recorded requests as a JSON array of
//!   [`CapturedRequest`] (for the binary mode); `?bodies=false` leaves the bodies out.
//! - `GET /_testkit/health`: 200 `ok`.
//! - Any other path is recorded and answered 404 `not_found_error`. Every response has a
//!   `request-id: req_testkit_<request number>` header.

mod background;
mod bedrock;
pub mod cargo;
pub mod corpus;
mod error;
mod google;
mod relay;
mod render;
mod script;
mod server;
mod sigv4;
mod summary;

pub use error::TestkitError;
pub use google::GoogleTokenServer;
pub use relay::{ConnectProxy, TlsFront};
pub use script::{
    Block, CutMode, DEFAULT_CHUNK_CHARS, ErrorEvent, HttpError, HttpErrorTurn, ResponseTurn,
    Script, Stall, SummaryAnswer, Turn, WhenExhausted,
};
pub use server::{CapturedRequest, TestServer};
pub use sigv4::SigV4Check;

/// Usage and error types from `gyre-protocol`, as they appear in scripts.
pub use gyre_protocol::{ErrorDetail, Usage};
