//! Server-sent events: bytes on the wire to [`StreamEvent`]s and back.

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use gyre_protocol::StreamEvent;

use crate::ApiError;

/// Decodes a byte stream of `text/event-stream` into Messages API events.
///
/// Each SSE event's `data` is one JSON event; its `type` field (not the SSE `event:`
/// line) decides what it is. Events with empty data are skipped; unknown event types
/// become [`StreamEvent::Unknown`]. A transport error ends the stream with that error,
/// malformed data with [`ApiError::InvalidResponse`].
pub fn sse_events<S, B, E>(bytes: S) -> impl Stream<Item = Result<StreamEvent, ApiError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send,
    B: Into<Bytes> + Send,
    E: Into<ApiError> + Send,
{
    // eventsource-stream re-copies its whole buffer after every line it consumes, which is
    // quadratic in the chunk size; handing it one line at a time (zero-copy slices) keeps
    // parsing linear however large the network's chunks are.
    let lines = bytes.flat_map(|item| {
        futures::stream::iter(match item {
            Ok(chunk) => split_lines(chunk.into())
                .into_iter()
                .map(Ok)
                .collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
    });
    lines.eventsource().filter_map(|item| async move {
        match item {
            Ok(event) if event.data.is_empty() => None,
            Ok(event) => Some(
                serde_json::from_str::<StreamEvent>(&event.data).map_err(|e| {
                    ApiError::InvalidResponse {
                        message: format!(
                            "could not parse SSE event `{}`: {e}",
                            if event.event.is_empty() {
                                "message"
                            } else {
                                &event.event
                            }
                        ),
                    }
                }),
            ),
            Err(EventStreamError::Transport(e)) => Some(Err(e.into())),
            Err(EventStreamError::Utf8(e)) => Some(Err(ApiError::InvalidResponse {
                message: format!("event stream is not UTF-8: {e}"),
            })),
            Err(EventStreamError::Parser(e)) => Some(Err(ApiError::InvalidResponse {
                message: format!("event stream could not be parsed: {e}"),
            })),
        }
    })
}

/// Splits a chunk after each `\n`, without copying.
fn split_lines(mut chunk: Bytes) -> Vec<Bytes> {
    let mut out = Vec::new();
    while let Some(pos) = chunk.iter().position(|b| *b == b'\n') {
        out.push(chunk.split_to(pos + 1));
    }
    if !chunk.is_empty() {
        out.push(chunk);
    }
    out
}

/// Writes one event as the API sends it: `event: <type>\ndata: <json>\n\n`.
#[must_use]
pub fn encode_sse(event: &StreamEvent) -> String {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_owned());
    format!("event: {}\ndata: {data}\n\n", event.name())
}

/// Splits recorded SSE text into chunks of at most `chunk` bytes (on char boundaries),
/// the way a network would deliver it. Feeding [`sse_events`] moderate chunks keeps its
/// line parser linear.
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

    #[test]
    fn lines_split_after_newlines() {
        let parts = split_lines(Bytes::from_static(b"a\nbc\r\n\nd"));
        assert_eq!(
            parts,
            vec![&b"a\n"[..], &b"bc\r\n"[..], &b"\n"[..], &b"d"[..]]
        );
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
