//! Amazon Bedrock's dialect of the scripted server: `POST
//! /model/{model}/invoke-with-response-stream` takes turns like `/v1/messages` does, and
//! each answer is re-framed as Bedrock sends it.
//!
//! - A streamed turn's events become AWS event-stream frames (`:message-type: event`,
//!   `:event-type: chunk`, payload `{"bytes": base64(event JSON)}`); an `error` event
//!   becomes an `exception` frame (`overloaded_error` → `throttlingException`, others
//!   → `modelStreamErrorException`). Cuts and stalls apply to frames as to events.
//! - An HTTP error turn becomes Bedrock's: `x-amzn-ErrorType` and `{"message": …}`, with
//!   the status Bedrock uses (529 → 503 `ServiceUnavailableException`, 429
//!   `ThrottlingException`, 400 `ValidationException`, 401 → 403
//!   `UnrecognizedClientException`, 403 `AccessDeniedException`, …).
//!
//! The server checks no signature: tests verify the recorded requests' SigV4 signatures
//! with an independent implementation.

use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::Value;

/// The model id of a Bedrock invoke path, percent-decoded; `None` for other paths.
#[must_use]
pub(crate) fn invoke_model(path: &str) -> Option<String> {
    let id = path
        .strip_prefix("/model/")?
        .strip_suffix("/invoke-with-response-stream")?;
    let mut out = Vec::with_capacity(id.len());
    let bytes = id.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let decoded = (byte == b'%')
            .then(|| std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok())
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn frame(headers: &[(&'static str, String)], payload: Vec<u8>) -> Bytes {
    let mut message = Message::new(payload);
    for (name, value) in headers {
        message = message.add_header(Header::new(
            *name,
            HeaderValue::String(value.clone().into()),
        ));
    }
    let mut out = Vec::new();
    // Writing to a Vec fails only for headers or payloads over the format's limits.
    match aws_smithy_eventstream::frame::write_message_to(&message, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(_) => Bytes::new(),
    }
}

/// One rendered SSE event (`event: NAME\ndata: JSON\n\n`) as a Bedrock frame.
#[must_use]
pub(crate) fn reframe(sse: &Bytes) -> Bytes {
    let text = String::from_utf8_lossy(sse);
    let name = text
        .lines()
        .find_map(|l| l.strip_prefix("event: "))
        .unwrap_or_default();
    let data: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect::<Vec<_>>()
        .join("\n");
    if name == "error" {
        let error: Value = serde_json::from_str(&data).unwrap_or_default();
        let kind = error["error"]["type"].as_str().unwrap_or_default();
        let exception = if kind == "overloaded_error" {
            "throttlingException"
        } else {
            "modelStreamErrorException"
        };
        let message = error["error"]["message"].as_str().unwrap_or_default();
        return frame(
            &[
                (":message-type", "exception".to_owned()),
                (":exception-type", exception.to_owned()),
                (":content-type", "application/json".to_owned()),
            ],
            serde_json::json!({ "message": message })
                .to_string()
                .into_bytes(),
        );
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(data.as_bytes());
    frame(
        &[
            (":message-type", "event".to_owned()),
            (":event-type", "chunk".to_owned()),
            (":content-type", "application/json".to_owned()),
        ],
        serde_json::json!({ "bytes": b64 }).to_string().into_bytes(),
    )
}

/// Bedrock's status and exception name for an Anthropic API error status.
#[must_use]
pub(crate) fn error_status(status: u16) -> (u16, &'static str) {
    match status {
        529 | 503 => (503, "ServiceUnavailableException"),
        429 => (429, "ThrottlingException"),
        400 | 413 => (400, "ValidationException"),
        401 => (403, "UnrecognizedClientException"),
        403 => (403, "AccessDeniedException"),
        404 => (404, "ResourceNotFoundException"),
        408 => (408, "ModelTimeoutException"),
        _ => (500, "InternalServerException"),
    }
}

/// Bedrock's error body for an Anthropic API error body: `{"message": …}`.
#[must_use]
pub(crate) fn error_body(anthropic_body: &str) -> String {
    let value: Value = serde_json::from_str(anthropic_body).unwrap_or_default();
    let message = value["error"]["message"]
        .as_str()
        .map_or_else(|| anthropic_body.to_owned(), str::to_owned);
    serde_json::json!({ "message": message }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invoke_path_names_the_model_percent_decoded() {
        assert_eq!(
            invoke_model("/model/us.anthropic.claude-x-v1%3A0/invoke-with-response-stream")
                .as_deref(),
            Some("us.anthropic.claude-x-v1:0")
        );
        assert_eq!(invoke_model("/v1/messages"), None);
    }

    #[test]
    fn an_event_becomes_a_chunk_frame_carrying_its_json() {
        let sse = Bytes::from("event: ping\ndata: {\"type\":\"ping\"}\n\n");
        let framed = reframe(&sse);
        let message = aws_smithy_eventstream::frame::read_message_from(&framed[..]).unwrap();
        let payload: Value = serde_json::from_slice(message.payload()).unwrap();
        let json = base64::engine::general_purpose::STANDARD
            .decode(payload["bytes"].as_str().unwrap())
            .unwrap();
        assert_eq!(json, br#"{"type":"ping"}"#);
    }
}
