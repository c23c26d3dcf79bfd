//! Amazon Bedrock's `InvokeModelWithResponseStream`: what differs from the Anthropic API
//! behind `AnthropicClient`'s provider seam.
//!
//! - URL: `{base}/model/{model id}/invoke-with-response-stream`; the model is in the
//!   path, not the body, and the body says `anthropic_version: bedrock-2023-05-31`.
//! - Each request is signed with SigV4 (`aws-sigv4`), service `bedrock`.
//! - The answer is AWS event-stream frames (`aws-smithy-eventstream`): a `chunk` event's
//!   payload is `{"bytes": base64(one Messages API event)}`; an `exception` frame is an
//!   error mid-stream.
//! - Errors are mapped onto the same [`ApiError`] taxonomy as the Anthropic API's, so
//!   retry and fallback act alike: throttling is a rate limit, an unavailable service an
//!   overload, a validation error naming the prompt length a context overflow.

use std::time::SystemTime;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::{HeaderValue as FrameHeader, Message};
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use gyre_protocol::{ErrorDetail, MessagesRequest, StreamEvent};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::aws_credentials::AwsCredentialProvider;
use crate::client::BedrockOptions;
use crate::error::ServerHints;
use crate::{ApiError, NetworkOptions};

/// The body's `anthropic_version` on Bedrock.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// Signs Bedrock requests (or not, for a gateway that signs them).
#[derive(Debug)]
pub(crate) struct BedrockSigner {
    region: String,
    credentials: AwsCredentialProvider,
}

impl BedrockSigner {
    /// Fetches nothing yet: the credentials are fetched at the first request.
    pub(crate) fn new(options: &BedrockOptions, network: &NetworkOptions) -> Self {
        Self {
            region: options.region.clone(),
            credentials: AwsCredentialProvider::new(options.credentials.clone(), network.clone()),
        }
    }

    /// The model id a request for `model` goes to in this region.
    pub(crate) fn model_id(&self, model: &str) -> String {
        crate::model_ids::bedrock_model_id(model, &self.region)
    }

    /// Bedrock refused the credentials: the next request fetches them anew.
    pub(crate) async fn refused(&self) {
        self.credentials.invalidate().await;
    }

    /// Adds the SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`)
    /// for `POST url` with these headers and body.
    pub(crate) async fn sign(
        &self,
        http: &reqwest::Client,
        url: &str,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<(), ApiError> {
        let Some(creds) = self.credentials.get(http).await? else {
            return Ok(());
        };
        let failed = |e: &dyn std::fmt::Display| ApiError::InvalidConfig {
            message: format!("the Bedrock request could not be signed: {e}"),
        };
        let identity = aws_credential_types::Credentials::new(
            &creds.access_key_id,
            &creds.secret_access_key,
            creds.session_token.clone(),
            None,
            "gyre",
        )
        .into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name("bedrock")
            .time(SystemTime::now())
            .settings(aws_sigv4::http_request::SigningSettings::default())
            .build()
            .map_err(|e| failed(&e))?
            .into();
        let pairs: Vec<(&str, &str)> = headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str(), v.to_str().ok()?)))
            .collect();
        let signable = aws_sigv4::http_request::SignableRequest::new(
            "POST",
            url,
            pairs.into_iter(),
            aws_sigv4::http_request::SignableBody::Bytes(body),
        )
        .map_err(|e| failed(&e))?;
        let (instructions, _signature) = aws_sigv4::http_request::sign(signable, &params)
            .map_err(|e| failed(&e))?
            .into_parts();
        let (signed, _params) = instructions.into_parts();
        for header in signed {
            let mut value = HeaderValue::from_str(header.value()).map_err(|e| failed(&e))?;
            value.set_sensitive(header.sensitive());
            headers.insert(HeaderName::from_static(header.name()), value);
        }
        Ok(())
    }
}

/// `{base}/model/{model}/invoke-with-response-stream`, the model id percent-encoded
/// (`:` in `…-v1:0` becomes `%3A`, as the AWS SDKs send it).
#[must_use]
pub(crate) fn url(base_url: &str, model: &str) -> String {
    format!(
        "{}/model/{}/invoke-with-response-stream",
        base_url.trim_end_matches('/'),
        crate::encode::percent_encode(model)
    )
}

/// The request body Bedrock takes: the Messages API's without `model`, `stream` and
/// `metadata`, with `anthropic_version`.
pub(crate) fn body(request: &MessagesRequest) -> Result<Vec<u8>, ApiError> {
    crate::encode::provider_body(
        request,
        &["model", "stream", "metadata"],
        BEDROCK_ANTHROPIC_VERSION,
    )
}

fn header_str<'a>(message: &'a Message, name: &str) -> Option<&'a str> {
    message
        .headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| match h.value() {
            FrameHeader::String(s) => Some(s.as_str()),
            _ => None,
        })
}

/// The Messages API error type an AWS exception amounts to.
fn error_type(exception: &str) -> &'static str {
    let name = exception.trim_end_matches("Exception").to_ascii_lowercase();
    match name.as_str() {
        "throttling" | "serviceunavailable" => "overloaded_error",
        "validation" => "invalid_request_error",
        "accessdenied" => "permission_error",
        "unrecognizedclient" | "invalidsignature" | "expiredtoken" => "authentication_error",
        "resourcenotfound" => "not_found_error",
        _ => "api_error",
    }
}

/// The `message` (or `Message`) of an AWS error body.
fn aws_message(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    value
        .get("message")
        .or_else(|| value.get("Message"))
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// One frame as a stream event, or the error an `exception` frame carries.
fn frame_event(message: &Message) -> Result<Option<StreamEvent>, ApiError> {
    let invalid = |what: String| ApiError::InvalidResponse {
        message: format!("Bedrock event stream: {what}"),
    };
    match header_str(message, ":message-type") {
        Some("event") => {}
        Some("exception" | "error") => {
            let exception = header_str(message, ":exception-type")
                .or_else(|| header_str(message, ":error-code"))
                .unwrap_or("unknownException");
            let text = aws_message(message.payload())
                .unwrap_or_else(|| String::from_utf8_lossy(message.payload()).into_owned());
            return Err(ApiError::from_stream_error(&ErrorDetail {
                kind: error_type(exception).to_owned(),
                message: format!("{exception}: {text}"),
            }));
        }
        other => return Err(invalid(format!("a frame of message type {other:?}"))),
    }
    if header_str(message, ":event-type") != Some("chunk") {
        // Other events (none are documented today) carry nothing gyre uses.
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Chunk {
        bytes: String,
    }
    let chunk: Chunk = serde_json::from_slice(message.payload())
        .map_err(|e| invalid(format!("a chunk that is not {{\"bytes\": …}}: {e}")))?;
    let json = base64::engine::general_purpose::STANDARD
        .decode(chunk.bytes.as_bytes())
        .map_err(|e| invalid(format!("a chunk whose bytes are not base64: {e}")))?;
    serde_json::from_slice::<StreamEvent>(&json)
        .map(Some)
        .map_err(|e| invalid(format!("a chunk that is not a Messages API event: {e}")))
}

/// The Messages API events in a body of event-stream frames. A transport error is
/// passed on as the [`ApiError`] it converts to; bytes left over at the end are a
/// truncated frame, which the caller sees as a stream that ended early.
pub(crate) fn events<S, E>(bytes: S) -> impl Stream<Item = Result<StreamEvent, ApiError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send,
    E: Into<ApiError> + Send,
{
    async_stream::stream! {
        let mut bytes = std::pin::pin!(bytes);
        let mut buffer = BytesMut::new();
        let mut decoder = MessageFrameDecoder::new();
        while let Some(chunk) = bytes.next().await {
            match chunk {
                Ok(chunk) => buffer.extend_from_slice(&chunk),
                Err(e) => {
                    yield Err(e.into());
                    return;
                }
            }
            loop {
                match decoder.decode_frame(&mut buffer) {
                    Ok(DecodedFrame::Incomplete) => break,
                    Ok(DecodedFrame::Complete(message)) => match frame_event(&message) {
                        Ok(Some(event)) => yield Ok(event),
                        Ok(None) => {}
                        Err(e) => {
                            yield Err(e);
                            return;
                        }
                    },
                    Err(e) => {
                        yield Err(ApiError::InvalidResponse {
                            message: format!("Bedrock event stream: a malformed frame: {e}"),
                        });
                        return;
                    }
                }
            }
        }
    }
}

/// The error of a non-2xx Bedrock response, in the Anthropic API's taxonomy. The
/// exception's name comes from `x-amzn-errortype` (`ThrottlingException:http://…`) or
/// the body's `__type`.
#[must_use]
pub(crate) fn error(
    status: u16,
    headers: &HeaderMap,
    hints: ServerHints,
    body: &str,
    model: &str,
    url: &str,
) -> ApiError {
    let from_header = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(':').next().unwrap_or(v).to_owned());
    let from_body = || {
        serde_json::from_str::<serde_json::Value>(body)
            .ok()?
            .get("__type")?
            .as_str()
            .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned())
    };
    let exception = from_header.or_else(from_body).unwrap_or_default();
    let kind = if exception.is_empty() {
        match status {
            429 | 503 => "overloaded_error",
            _ => "api_error",
        }
    } else {
        error_type(&exception)
    };
    let text = aws_message(body.as_bytes()).unwrap_or_else(|| body.trim().to_owned());
    let message = if exception.is_empty() {
        text
    } else {
        format!("{exception}: {text}")
    };
    // The status the Anthropic API gives this kind, so that `from_response` classifies
    // it as it does there (a throttled request is retried like a 429, an unavailable
    // service like an overload).
    let status = match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "overloaded_error" if exception.starts_with("Throttling") || status == 429 => 429,
        _ => status,
    };
    let kind = if status == 429 {
        "rate_limit_error"
    } else {
        kind
    };
    let anthropic_body = serde_json::json!({
        "type": "error",
        "error": {"type": kind, "message": message},
    });
    ApiError::from_response(status, hints, &anthropic_body.to_string(), model, url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_types::event_stream::Header;

    #[test]
    fn the_model_goes_in_the_path_percent_encoded_and_not_in_the_body() {
        assert_eq!(
            url(
                "https://bedrock-runtime.us-east-1.amazonaws.com/",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
            ),
            "https://bedrock-runtime.us-east-1.amazonaws.com/model/\
             us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
        );
        let mut request = MessagesRequest::new(
            "anthropic.claude-x",
            100,
            vec![gyre_protocol::Message::user_text("hi")],
        );
        request.stream = true;
        let body: serde_json::Value = serde_json::from_slice(&body(&request).unwrap()).unwrap();
        assert_eq!(body["anthropic_version"], BEDROCK_ANTHROPIC_VERSION);
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("model").is_none() && body.get("stream").is_none());
    }

    fn frame(headers: &[(&'static str, &'static str)], payload: &str) -> Bytes {
        let mut message = Message::new(Bytes::from(payload.to_owned()));
        for (name, value) in headers {
            message = message.add_header(Header::new(*name, FrameHeader::String((*value).into())));
        }
        let mut out = Vec::new();
        aws_smithy_eventstream::frame::write_message_to(&message, &mut out).unwrap();
        Bytes::from(out)
    }

    fn chunk(event: &serde_json::Value) -> Bytes {
        let b64 = base64::engine::general_purpose::STANDARD.encode(event.to_string());
        frame(
            &[(":message-type", "event"), (":event-type", "chunk")],
            &serde_json::json!({ "bytes": b64 }).to_string(),
        )
    }

    async fn decode(parts: Vec<Bytes>) -> Vec<Result<StreamEvent, ApiError>> {
        let stream = futures::stream::iter(parts.into_iter().map(Ok::<_, ApiError>));
        events(stream).collect().await
    }

    #[tokio::test]
    async fn chunks_split_anywhere_decode_to_the_events_they_carry() {
        let stop = chunk(&serde_json::json!({"type": "message_stop"}));
        let ping = chunk(&serde_json::json!({"type": "ping"}));
        let mut all = ping.to_vec();
        all.extend_from_slice(&stop);
        for cut in [1, 7, 12, ping.len(), all.len() - 1] {
            let parts = vec![
                Bytes::copy_from_slice(&all[..cut]),
                Bytes::copy_from_slice(&all[cut..]),
            ];
            let got = decode(parts).await;
            assert_eq!(
                got,
                vec![Ok(StreamEvent::Ping), Ok(StreamEvent::MessageStop)],
                "cut at {cut}"
            );
        }
    }

    #[tokio::test]
    async fn exception_frames_map_onto_the_taxonomy() {
        let throttled = frame(
            &[
                (":message-type", "exception"),
                (":exception-type", "throttlingException"),
            ],
            r#"{"message":"Too many requests"}"#,
        );
        let got = decode(vec![throttled]).await;
        assert!(matches!(&got[..], [Err(e)] if e.is_overloaded()), "{got:?}");
        let model = frame(
            &[
                (":message-type", "exception"),
                (":exception-type", "modelStreamErrorException"),
            ],
            r#"{"message":"the model failed"}"#,
        );
        let got = decode(vec![model]).await;
        assert!(
            matches!(&got[..], [Err(e)] if e.is_retryable() && e.to_string().contains("the model failed")),
            "{got:?}"
        );
    }

    fn http_error(status: u16, exception: &str, message: &str) -> ApiError {
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-amzn-errortype",
            HeaderValue::from_str(&format!("{exception}:http://internal.amazon.com/coral/"))
                .unwrap(),
        );
        error(
            status,
            &headers,
            ServerHints::default(),
            &serde_json::json!({ "message": message }).to_string(),
            "anthropic.claude-x",
            "https://bedrock/x",
        )
    }

    #[test]
    fn http_errors_map_onto_the_taxonomy() {
        for (status, exception, message, category) in [
            (
                429,
                "ThrottlingException",
                "Too many requests",
                "rate_limit",
            ),
            (503, "ServiceUnavailableException", "busy", "overloaded"),
            (
                400,
                "ValidationException",
                "prompt is too long: 250000 tokens > 200000",
                "prompt_too_long",
            ),
            (
                400,
                "ValidationException",
                "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000",
                "context_overflow",
            ),
            (
                403,
                "AccessDeniedException",
                "no access to the model",
                "permission_denied",
            ),
            (
                403,
                "UnrecognizedClientException",
                "bad key",
                "authentication_failed",
            ),
            (400, "ValidationException", "bad field", "invalid_request"),
        ] {
            let error = http_error(status, exception, message);
            assert_eq!(error.category(), category, "{exception}: {error:?}");
            // A context overflow is told in numbers; the others repeat Bedrock's words.
            let told = error.to_string();
            assert!(
                category == "context_overflow" || told.contains(message),
                "{told}"
            );
        }
    }
}
