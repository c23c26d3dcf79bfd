//! Server-sent events: bytes on the wire to [`StreamEvent`]s and back.
//!
//! [`server_sent_events`] is the one `text/event-stream` decoder of gyre: the Messages
//! API stream ([`sse_events`]) and gyre-mcp's legacy HTTP+SSE transport both read
//! through it.

use bytes::{Buf as _, Bytes, BytesMut};
use futures::{Stream, StreamExt, TryStreamExt};
use gyre_protocol::StreamEvent;

use crate::ApiError;

/// The longest SSE line accepted, and the most `data` one event may carry. The API's
/// events are a few KB; a server that sends more is broken or hostile, and without a
/// bound one endless line would take all memory.
pub const MAX_SSE_LINE_BYTES: usize = 32 * 1024 * 1024;

/// One event of a `text/event-stream`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSentEvent {
    /// Its `event:` field, empty when it had none (see [`ServerSentEvent::name`]).
    pub event: String,
    /// Its `data:` lines, joined with `\n`; never empty (an event without data is not
    /// dispatched).
    pub data: String,
}

impl ServerSentEvent {
    /// The event's type: its `event:` field, `message` when it named none.
    #[must_use]
    pub fn name(&self) -> &str {
        if self.event.is_empty() {
            "message"
        } else {
            &self.event
        }
    }
}

/// Why an event stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line, or one event's data, over [`MAX_SSE_LINE_BYTES`].
    #[error(
        "the event stream sent {what} over {} MiB; gave up on this response",
        MAX_SSE_LINE_BYTES / (1024 * 1024)
    )]
    TooLarge {
        /// `a line` or `an event`.
        what: &'static str,
    },
    /// An event's data is not UTF-8.
    #[error("event stream is not UTF-8: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
}

/// A stream that could not be decoded: the same request would get the same answer.
impl From<SseError> for ApiError {
    fn from(e: SseError) -> Self {
        Self::InvalidResponse {
            message: e.to_string(),
        }
    }
}

/// Decodes a byte stream of `text/event-stream` into its events.
///
/// Comments, `id` and `retry` fields and events without data are skipped. A transport
/// error ends the stream with that error; so does an [`SseError`] (a line or an event
/// over `MAX_SSE_LINE_BYTES`, 32 MiB; data that is not UTF-8), turned into `E`.
///
/// Parsing is linear in the bytes received however the network chunks them: each byte
/// is looked at once when searching for the end of its line.
pub fn server_sent_events<S, B, E>(
    bytes: S,
) -> impl Stream<Item = Result<ServerSentEvent, E>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: From<SseError> + Send,
{
    let mut decoder = SseDecoder::default();
    let mut failed = false;
    bytes.flat_map(move |item| {
        let out: Vec<Result<ServerSentEvent, E>> = if failed {
            Vec::new()
        } else {
            match item {
                Ok(chunk) => decoder
                    .feed(&chunk.into())
                    .into_iter()
                    .map(|event| event.map_err(E::from))
                    .collect(),
                Err(e) => vec![Err(e)],
            }
        };
        failed |= out.iter().any(Result::is_err);
        futures::stream::iter(out)
    })
}

/// Decodes a byte stream of `text/event-stream` into Messages API events.
///
/// Each SSE event's `data` is one JSON event; its `type` field (not the SSE `event:`
/// line) decides what it is. Unknown event types become [`StreamEvent::Unknown`]. Errors
/// are [`server_sent_events`]'s, as [`ApiError`]s; malformed data is
/// [`ApiError::InvalidResponse`], and so is an [`SseError`] — not retried: the same
/// request would get the same answer.
pub fn sse_events<S, B, E>(bytes: S) -> impl Stream<Item = Result<StreamEvent, ApiError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: Into<ApiError> + Send,
{
    server_sent_events(bytes.map_err(Into::into)).map(|event| {
        let event = event?;
        serde_json::from_str::<StreamEvent>(&event.data).map_err(|e| ApiError::InvalidResponse {
            message: format!("could not parse SSE event `{}`: {e}", event.name()),
        })
    })
}

/// The SSE framing state between chunks: the unfinished line, and the event's fields
/// so far.
#[derive(Debug, Default)]
struct SseDecoder {
    /// Bytes of the line not yet ended.
    line: BytesMut,
    /// The `event:` field of the event being read.
    event: String,
    /// Its `data:` lines, joined with `\n`.
    data: Vec<u8>,
    has_data: bool,
}

impl SseDecoder {
    /// Takes one chunk; returns the events it completed and any error.
    fn feed(&mut self, mut chunk: &[u8]) -> Vec<Result<ServerSentEvent, SseError>> {
        let mut out = Vec::new();
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|&b| b == b'\n') else {
                if self.line.len() + chunk.len() > MAX_SSE_LINE_BYTES {
                    out.push(Err(SseError::TooLarge { what: "a line" }));
                    return out;
                }
                self.line.extend_from_slice(chunk);
                break;
            };
            // The line's start from earlier chunks, if any, taken out so the fields can
            // be updated while it is read (and put back to keep its allocation).
            let mut joined = std::mem::take(&mut self.line);
            let line_bytes = if joined.is_empty() {
                &chunk[..end]
            } else {
                if joined.len() + end > MAX_SSE_LINE_BYTES {
                    out.push(Err(SseError::TooLarge { what: "a line" }));
                    return out;
                }
                joined.extend_from_slice(&chunk[..end]);
                &joined[..]
            };
            let line = line_bytes.strip_suffix(b"\r").unwrap_or(line_bytes);
            let result = if line.is_empty() {
                self.dispatch()
            } else {
                self.field(line).map(|()| None)
            };
            joined.clear();
            self.line = joined;
            chunk = &chunk[end + 1..];
            match result {
                Ok(Some(event)) => out.push(Ok(event)),
                Ok(None) => {}
                Err(e) => {
                    out.push(Err(e));
                    return out;
                }
            }
        }
        out
    }

    /// One `name: value` line of the event being read.
    fn field(&mut self, line: &[u8]) -> Result<(), SseError> {
        if line.starts_with(b":") {
            return Ok(()); // a comment
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let mut value = &line[i + 1..];
                if value.first() == Some(&b' ') {
                    value.advance(1);
                }
                (&line[..i], value)
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                if self.data.len() + value.len() + 1 > MAX_SSE_LINE_BYTES {
                    return Err(SseError::TooLarge { what: "an event" });
                }
                if self.has_data {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
                self.has_data = true;
            }
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            // `id` and `retry` steer reconnection, which neither reader does.
            _ => {}
        }
        Ok(())
    }

    /// The blank line that ends an event: the event, if it has data.
    fn dispatch(&mut self) -> Result<Option<ServerSentEvent>, SseError> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        self.has_data = false;
        if data.is_empty() {
            return Ok(None);
        }
        let data = String::from_utf8(data).map_err(|e| e.utf8_error())?;
        Ok(Some(ServerSentEvent { event, data }))
    }
}

/// Writes one event as the API sends it: `event: <type>\ndata: <json>\n\n`.
#[must_use]
pub fn encode_sse(event: &StreamEvent) -> String {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_owned());
    format!("event: {}\ndata: {data}\n\n", event.name())
}

/// Splits recorded SSE text into chunks of at most `chunk` bytes (on char boundaries),
/// the way a network would deliver it.
#[must_use]
pub fn chunk_text(text: &str, chunk: usize) -> Vec<Bytes> {
    let chunk = chunk.max(4);
    let mut out = Vec::with_capacity(text.len() / chunk + 1);
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = chunk.min(rest.len());
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(Bytes::copy_from_slice(head.as_bytes()));
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_protocol::ContentDelta;
    use std::convert::Infallible;

    async fn decode(chunks: Vec<&'static str>) -> Vec<Result<StreamEvent, ApiError>> {
        let s = futures::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
        sse_events(s).collect::<Vec<_>>().await
    }

    #[tokio::test]
    async fn events_split_across_chunks_are_joined() {
        let out = decode(vec![
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"ind",
            "ex\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hé\"}}\n",
            "\nevent: ping\ndata: {\"type\":\"ping\"}\n\n",
        ])
        .await;
        assert_eq!(
            out,
            vec![
                Ok(StreamEvent::ContentBlockDelta {
                    index: 0,
                    delta: ContentDelta::TextDelta { text: "hé".into() }
                }),
                Ok(StreamEvent::Ping)
            ]
        );
    }

    #[tokio::test]
    async fn unknown_events_are_tolerated_and_bad_json_is_an_error() {
        let out = decode(vec![
            ": comment\n\nevent: future\ndata: {\"type\":\"future_thing\",\"x\":1}\n\n",
            "event: message_stop\ndata: {not json\n\n",
        ])
        .await;
        assert_eq!(out[0], Ok(StreamEvent::Unknown));
        assert!(matches!(out[1], Err(ApiError::InvalidResponse { .. })));
    }

    #[tokio::test]
    async fn encode_then_decode_is_identity() {
        let ev = StreamEvent::ContentBlockDelta {
            index: 2,
            delta: ContentDelta::InputJsonDelta {
                partial_json: "{\"a\":\n1".into(),
            },
        };
        let text = encode_sse(&ev);
        let chunks: Vec<Result<Bytes, Infallible>> =
            chunk_text(&text, 5).into_iter().map(Ok).collect();
        let out = sse_events(futures::stream::iter(chunks))
            .collect::<Vec<_>>()
            .await;
        assert_eq!(out, vec![Ok(ev)]);
    }

    async fn chunked(text: &str, chunk: usize) -> Vec<Result<StreamEvent, ApiError>> {
        let chunks: Vec<Result<Bytes, Infallible>> =
            chunk_text(text, chunk).into_iter().map(Ok).collect();
        sse_events(futures::stream::iter(chunks)).collect().await
    }

    #[tokio::test]
    async fn a_16_mib_line_in_small_chunks_is_decoded() {
        let text = "x".repeat(16 * 1024 * 1024);
        let ev = StreamEvent::ContentBlockDelta {
            index: 0,
            delta: ContentDelta::TextDelta {
                text: text.as_str().into(),
            },
        };
        // 4 KiB chunks: 4096 of them; a parser that rescans its buffer per chunk would
        // look at 32 GiB here.
        let out = chunked(&encode_sse(&ev), 4096).await;
        assert_eq!(out, vec![Ok(ev)]);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_ends_the_stream_with_a_clear_error() {
        let mut text = String::from("event: content_block_delta\ndata: ");
        text.push_str(&"x".repeat(MAX_SSE_LINE_BYTES + 10));
        text.push_str("\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n");
        let out = chunked(&text, 1024 * 1024).await;
        assert_eq!(out.len(), 1, "nothing after the error");
        let Err(ApiError::InvalidResponse { message }) = &out[0] else {
            panic!("{out:?}");
        };
        assert!(message.contains("a line over 32 MiB"), "{message}");
    }

    #[tokio::test]
    async fn data_lines_join_with_newlines_and_crlf_endings_are_accepted() {
        let out = chunked(
            "event: x\r\ndata: {\"type\":\r\ndata:\"ping\"}\r\n\r\nid: 3\nretry: 5\n\n",
            3,
        )
        .await;
        assert_eq!(out, vec![Ok(StreamEvent::Ping)]);
    }

    #[tokio::test]
    async fn raw_events_carry_their_name_and_joined_data() {
        let chunks: Vec<Result<Bytes, SseError>> = chunk_text(
            ": keep-alive\n\nevent: endpoint\ndata: /m?s=1\n\nevent: empty\n\n\
             data: a\ndata:b\n\n",
            4,
        )
        .into_iter()
        .map(Ok)
        .collect();
        let out: Vec<_> = server_sent_events(futures::stream::iter(chunks))
            .collect()
            .await;
        let endpoint = ServerSentEvent {
            event: "endpoint".into(),
            data: "/m?s=1".into(),
        };
        let message = ServerSentEvent {
            event: String::new(),
            data: "a\nb".into(),
        };
        assert_eq!(out, vec![Ok(endpoint), Ok(message.clone())]);
        assert_eq!(message.name(), "message");
    }

    #[tokio::test]
    async fn data_that_is_not_utf8_ends_the_stream() {
        let chunks = vec![Ok::<_, SseError>(Bytes::from_static(
            b"data: \xff\n\ndata: x\n\n",
        ))];
        let out: Vec<_> = server_sent_events(futures::stream::iter(chunks))
            .collect()
            .await;
        assert!(matches!(out[..], [Err(SseError::NotUtf8(_))]), "{out:?}");
    }

    #[test]
    fn chunks_respect_char_boundaries() {
        let text = "ééééé";
        let chunks = chunk_text(text, 4);
        let joined: Vec<u8> = chunks.iter().flat_map(|b| b.to_vec()).collect();
        assert_eq!(joined, text.as_bytes());
        assert!(chunks.iter().all(|c| std::str::from_utf8(c).is_ok()));
    }
}
