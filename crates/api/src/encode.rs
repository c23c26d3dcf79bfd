//! Request bodies without re-serialising or copying the whole history every turn.
//!
//! A session sends its history again with each request, and the history only grows at
//! the end: turn 100 of a session that read 99 files carries a megabyte of tool results
//! that turn 99 already encoded. [`BodyEncoder`] writes the messages first
//! (`{"messages":[...],"model":...}`; JSON objects are unordered), so the body of the
//! last request is, up to its last unchanged message, the start of the next one: it
//! cuts the buffer back there and appends only the rest (the new messages, the one
//! that lost its cache marker, the other fields). The buffer is handed out as `Bytes`
//! without a copy and taken back once that body has been sent.

use std::sync::Arc;

use bytes::Bytes;
use gyre_protocol::{
    Message, MessagesRequest, Metadata, OutputConfig, SystemBlock, ThinkingConfig, ToolDefinition,
};
use serde::Serialize;

/// How every body starts.
const OPEN: &[u8] = b"{\"messages\":[";

/// Encodes request bodies, reusing the JSON of the leading messages unchanged since the
/// last call.
///
/// The output parses to what `serde_json` gives for the request with `stream: true`
/// (the same keys and values; `messages` comes first). Correctness never depends on
/// the cache: a message is reused only when it is equal (`==`) to the one encoded at
/// its position before, and so are all the messages before it.
#[derive(Debug)]
pub struct BodyEncoder {
    /// The last body: [`OPEN`], the messages' JSON separated by commas, the rest.
    body: Arc<Vec<u8>>,
    /// Position by position: the message encoded there and where its JSON ends in
    /// `body`.
    cached: Vec<(Message, usize)>,
    /// Messages encoded (not reused) so far; for tests and benchmarks.
    encoded: usize,
}

impl Default for BodyEncoder {
    fn default() -> Self {
        Self {
            body: Arc::new(OPEN.to_vec()),
            cached: Vec::new(),
            encoded: 0,
        }
    }
}

/// The fields after `messages`.
#[derive(Serialize)]
struct Rest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    system: &'a [SystemBlock],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: &'a [ToolDefinition],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<&'a ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<&'a OutputConfig>,
}

/// A body handed to the HTTP client: a view of the encoder's buffer, no copy.
struct Shared(Arc<Vec<u8>>);

impl AsRef<[u8]> for Shared {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl BodyEncoder {
    /// An encoder with no previous body: the first request is encoded whole.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The JSON body of `request`, sent as a stream.
    ///
    /// # Errors
    /// serde's error should a value fail to encode (none of gyre's types do today).
    /// The encoder stays usable.
    pub fn encode(&mut self, request: &MessagesRequest) -> Result<Bytes, serde_json::Error> {
        // Naming every field makes a new one in `MessagesRequest` a compile error here
        // instead of a field silently left out of the body.
        let MessagesRequest {
            model,
            max_tokens,
            messages,
            system,
            tools,
            stream: _,
            metadata,
            thinking,
            temperature,
            stop_sequences,
            output_config,
        } = request;
        let rest = serde_json::to_vec(&Rest {
            model,
            max_tokens: *max_tokens,
            system,
            tools,
            stream: true,
            metadata: metadata.as_ref(),
            thinking: thinking.as_ref(),
            temperature: *temperature,
            stop_sequences,
            output_config: output_config.as_ref(),
        })?;
        let kept = self
            .cached
            .iter()
            .zip(messages)
            .take_while(|((seen, _), message)| seen == *message)
            .count();
        self.cached.truncate(kept);
        // The buffer is ours again once the last body was sent; a body still held (a
        // retry in flight elsewhere) keeps its bytes and this one gets a copy.
        let body = Arc::make_mut(&mut self.body);
        body.truncate(self.cached.last().map_or(OPEN.len(), |(_, end)| *end));
        let appended = (|| {
            for (i, message) in messages.iter().enumerate().skip(kept) {
                if i > 0 {
                    body.push(b',');
                }
                serde_json::to_writer(&mut *body, message)?;
                self.encoded += 1;
                self.cached.push((message.clone(), body.len()));
            }
            Ok(())
        })();
        if let Err(e) = appended {
            // Whatever was half written is cut off by the next call.
            self.cached.clear();
            return Err(e);
        }
        body.push(b']');
        // `rest` is a non-empty object (`model` is always there): its fields follow.
        body.push(b',');
        body.extend_from_slice(rest.get(1..).unwrap_or_default());
        Ok(Bytes::from_owner(Shared(Arc::clone(&self.body))))
    }

    /// How many messages were serialised (rather than reused) since this encoder was made.
    #[must_use]
    pub fn messages_encoded(&self) -> usize {
        self.encoded
    }
}

/// A cloud provider's request body: the Messages API's without the fields it takes
/// elsewhere (`drop`: the model goes in the URL), with its `anthropic_version`. Built
/// whole each time: only the Anthropic API's path reuses the last body.
#[cfg(any(feature = "bedrock", feature = "vertex"))]
pub(crate) fn provider_body(
    request: &MessagesRequest,
    drop: &[&str],
    anthropic_version: &str,
) -> Result<Vec<u8>, crate::ApiError> {
    let encode_error = |e: serde_json::Error| crate::ApiError::InvalidConfig {
        message: format!("request could not be encoded: {e}"),
    };
    let mut value = serde_json::to_value(request).map_err(encode_error)?;
    if let Some(object) = value.as_object_mut() {
        for field in drop {
            object.remove(*field);
        }
        object.insert("anthropic_version".to_owned(), anthropic_version.into());
    }
    serde_json::to_vec(&value).map_err(encode_error)
}

/// Percent-encodes every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`): a URL
/// path segment or a form value.
#[cfg(any(feature = "bedrock", feature = "vertex"))]
pub(crate) fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::add_cache_markers;
    use gyre_protocol::{CacheControl, ContentBlock};
    use serde_json::json;

    fn full_request(messages: Vec<Message>) -> MessagesRequest {
        // Every field set, so that one the encoder drops or renders differently shows.
        MessagesRequest {
            model: "claude-sonnet-4-5".into(),
            max_tokens: 8192,
            messages,
            system: vec![SystemBlock::text("You are gyre.")],
            tools: vec![ToolDefinition {
                name: "Read".into(),
                description: "Reads a file".into(),
                input_schema: json!({"type": "object", "properties": {"messages": {"default": []}}}),
                cache_control: Some(CacheControl::ephemeral()),
                kind: None,
                options: serde_json::Map::new(),
            }],
            stream: true,
            metadata: Some(Metadata {
                user_id: Some("u-1".into()),
            }),
            thinking: Some(ThinkingConfig {
                kind: "enabled".into(),
                budget_tokens: Some(1024),
                display: None,
            }),
            temperature: Some(0.5),
            stop_sequences: vec!["\n\nHuman:".into()],
            output_config: Some(OutputConfig {
                effort: Some("medium".into()),
                task_budget: Some(gyre_protocol::TaskBudget {
                    kind: "tokens".into(),
                    total: 400_000,
                }),
            }),
        }
    }

    /// `body` says what serde says of `request` (sent as a stream), messages first.
    fn assert_encodes(body: &Bytes, request: &MessagesRequest) {
        let mut expected = serde_json::to_value(request).unwrap();
        expected["stream"] = json!(true);
        let got: serde_json::Value = serde_json::from_slice(body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)));
        assert_eq!(got, expected);
        assert!(body.starts_with(OPEN));
    }

    fn history(turns: usize) -> Vec<Message> {
        let mut h = vec![Message::user_text("read the files \"quoted\"\n\ttabbed")];
        for i in 0..turns {
            let id = format!("toolu_{i}");
            h.push(Message::assistant(vec![
                ContentBlock::thinking("hmm", "sig"),
                ContentBlock::tool_use(&id, "Read", json!({"file_path": format!("/f{i}")})),
            ]));
            h.push(Message::user(vec![ContentBlock::tool_result(
                &id,
                format!("     1\tline of file {i} with \u{e9}\u{1F600} and \\ and \u{1}\n"),
                i % 3 == 0,
            )]));
        }
        h
    }

    #[test]
    fn body_matches_serde_for_every_field() {
        let request = full_request(history(3));
        let body = BodyEncoder::new().encode(&request).unwrap();
        assert_encodes(&body, &request);
    }

    #[test]
    fn empty_optional_fields_are_left_out_as_serde_does() {
        let request = MessagesRequest::new("m", 10, history(1));
        let body = BodyEncoder::new().encode(&request).unwrap();
        assert_encodes(&body, &request);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body)
                .unwrap()
                .as_object()
                .unwrap()
                .len(),
            4,
            "messages, model, max_tokens, stream"
        );
        let empty = MessagesRequest::new("m", 10, Vec::new());
        let body = BodyEncoder::new().encode(&empty).unwrap();
        assert_encodes(&body, &empty);
    }

    #[test]
    fn a_request_is_always_sent_as_a_stream() {
        let mut request = full_request(history(1));
        request.stream = false;
        let body: serde_json::Value =
            serde_json::from_slice(&BodyEncoder::new().encode(&request).unwrap()).unwrap();
        assert_eq!(body["stream"], json!(true));
    }

    #[test]
    fn a_growing_session_encodes_only_what_changed() {
        let mut encoder = BodyEncoder::new();
        let mut total = 0;
        for turn in 1..=20 {
            let mut request = full_request(history(turn));
            add_cache_markers(&mut request);
            let body = encoder.encode(&request).unwrap();
            assert_encodes(&body, &request);
            total += request.messages.len();
        }
        // Turn 1 encodes 3 messages; each later turn its 2 new ones plus the message
        // that lost its cache marker.
        assert_eq!(encoder.messages_encoded(), 3 + 19 * 3);
        assert!(encoder.messages_encoded() < total / 5);
    }

    #[test]
    fn the_next_body_reuses_the_memory_of_a_sent_one() {
        let mut encoder = BodyEncoder::new();
        let first = encoder.encode(&full_request(history(60))).unwrap();
        let at = first.as_ptr();
        drop(first); // sent
        let smaller = encoder.encode(&full_request(history(50))).unwrap();
        assert_eq!(smaller.as_ptr(), at);
        drop(smaller);
        let second = encoder.encode(&full_request(history(51))).unwrap();
        assert_eq!(second.as_ptr(), at);
        // While a body is still held (a retry may send it again) the next one is
        // written elsewhere and the held one keeps its bytes.
        let third = encoder.encode(&full_request(history(52))).unwrap();
        assert_ne!(third.as_ptr(), second.as_ptr());
        assert_encodes(&second, &full_request(history(51)));
        assert_encodes(&third, &full_request(history(52)));
    }

    #[test]
    fn a_rewritten_or_shorter_history_is_encoded_afresh() {
        let mut encoder = BodyEncoder::new();
        let request = full_request(history(5));
        encoder.encode(&request).unwrap();
        // An old tool result cleared (microcompact): everything from it on is redone.
        let mut changed = request.clone();
        changed.messages[2] = Message::user(vec![ContentBlock::tool_result(
            "toolu_0",
            "[Old tool result content cleared]",
            false,
        )]);
        assert_encodes(&encoder.encode(&changed).unwrap(), &changed);
        // A compaction: a much shorter history.
        let short = full_request(vec![Message::user_text("summary")]);
        assert_encodes(&encoder.encode(&short).unwrap(), &short);
        // And back to the long one.
        assert_encodes(&encoder.encode(&request).unwrap(), &request);
    }
}
