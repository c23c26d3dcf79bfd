//! The Agent SDK's control protocol on stream-json stdin/stdout (docs/sdk-protocol.md).
//!
//! Every stdin line is one JSON object: a user message, a `control_request` from the
//! SDK, a `control_response` answering one of ours, or a `control_cancel_request`.
//! [`parse_inbound`] sorts them; [`ControlChannel`] sends our own requests
//! (`can_use_tool`, `hook_callback`) and waits for their answers; [`LineOut`] is the one
//! stdout every writer shares, so lines never interleave.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use gyre_protocol::{ContentBlock, Message};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// One stdin line, sorted.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    /// `{"type":"user","message":{…}}`: a turn to run.
    User(Vec<ContentBlock>),
    /// `{"type":"control_request","request_id":…,"request":{"subtype":…}}`.
    Request { request_id: String, request: Value },
    /// `{"type":"control_response","response":{"subtype":"success"|"error",…}}`.
    Response {
        request_id: String,
        result: Result<Value, String>,
    },
    /// `{"type":"control_cancel_request","request_id":…}`.
    Cancel { request_id: String },
    /// A line that is none of these: what was wrong with it.
    Invalid(String),
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Sorts one stdin line.
#[must_use]
pub fn parse_inbound(line: &str) -> Inbound {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Inbound::Invalid(format!(
                "stdin line is not JSON ({e}): {}",
                truncate(line, 80)
            ));
        }
    };
    let str_field = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    match v.get("type").and_then(Value::as_str) {
        Some("user") => {
            match serde_json::from_value::<Message>(v.get("message").cloned().unwrap_or_default()) {
                Ok(m) => Inbound::User(m.content.into_vec()),
                Err(e) => Inbound::Invalid(format!(
                    "stdin user line has no valid `message` ({e}); expected {{\"role\":\"user\",\"content\":…}}"
                )),
            }
        }
        Some("control_request") => match (str_field(&v, "request_id"), v.get("request")) {
            (Some(request_id), Some(request)) if request.is_object() => Inbound::Request {
                request_id,
                request: request.clone(),
            },
            _ => Inbound::Invalid(
                "control_request needs a string `request_id` and an object `request`".to_owned(),
            ),
        },
        Some("control_response") => {
            let response = v.get("response").cloned().unwrap_or_default();
            let Some(request_id) = str_field(&response, "request_id") else {
                return Inbound::Invalid("control_response needs `response.request_id`".to_owned());
            };
            let result = match response.get("subtype").and_then(Value::as_str) {
                Some("success") => Ok(response.get("response").cloned().unwrap_or_default()),
                _ => Err(str_field(&response, "error")
                    .unwrap_or_else(|| "the SDK answered with an error".to_owned())),
            };
            Inbound::Response { request_id, result }
        }
        Some("control_cancel_request") => match str_field(&v, "request_id") {
            Some(request_id) => Inbound::Cancel { request_id },
            None => Inbound::Invalid("control_cancel_request needs a `request_id`".to_owned()),
        },
        other => Inbound::Invalid(format!(
            "stdin line has type {}, expected user, control_request, control_response or control_cancel_request",
            other.map_or_else(|| "(none)".to_owned(), |t| format!("{t:?}"))
        )),
    }
}

/// Checks that the tool_result blocks of an input line answer the tool_use blocks
/// still open at the end of `history`; an orphan would be sent to the API and refused.
///
/// # Errors
/// The first orphan's id.
pub fn check_tool_results(history: &[Message], content: &[ContentBlock]) -> Result<(), String> {
    let open: Vec<&str> = history
        .last()
        .filter(|m| m.role == gyre_protocol::Role::Assistant)
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let mut answered: Vec<&str> = Vec::new();
    for block in content {
        let ContentBlock::ToolResult { tool_use_id, .. } = block else {
            continue;
        };
        if !open.contains(&tool_use_id.as_str()) {
            return Err(format!(
                "stdin user line has a tool_result for {tool_use_id}, which answers no tool_use of the conversation; send tool results only for the assistant's pending tool calls"
            ));
        }
        if answered.contains(&tool_use_id.as_str()) {
            return Err(format!(
                "stdin user line answers {tool_use_id} twice; send one tool_result per tool call"
            ));
        }
        answered.push(tool_use_id);
    }
    Ok(())
}

/// The stdout every writer shares; each `write` call writes one whole buffer under the
/// lock, so a line written with `write_all` never interleaves with another.
#[derive(Clone)]
pub struct LineOut {
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
}

impl LineOut {
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(out)),
        }
    }

    /// Writes one JSON line and flushes it.
    pub fn line(&self, v: &Value) -> std::io::Result<()> {
        let mut s = serde_json::to_string(v)?;
        s.push('\n');
        let mut out = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(s.as_bytes())?;
        out.flush()
    }
}

impl Write for LineOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        out.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush()
    }
}

/// `{"type":"control_response","response":{"subtype":"success",…}}`.
#[must_use]
pub fn success(request_id: &str, response: &Value) -> Value {
    json!({
        "type": "control_response",
        "response": { "subtype": "success", "request_id": request_id, "response": response },
    })
}

/// `{"type":"control_response","response":{"subtype":"error",…}}`.
#[must_use]
pub fn error(request_id: &str, message: &str) -> Value {
    json!({
        "type": "control_response",
        "response": { "subtype": "error", "request_id": request_id, "error": message },
    })
}

type Pending = HashMap<String, oneshot::Sender<Result<Value, String>>>;

/// Our requests to the SDK (`can_use_tool`, `hook_callback`) and their answers.
#[derive(Clone)]
pub struct ControlChannel {
    out: LineOut,
    pending: Arc<Mutex<Option<Pending>>>,
    next: Arc<AtomicU64>,
}

impl ControlChannel {
    pub fn new(out: LineOut) -> Self {
        Self {
            out,
            pending: Arc::new(Mutex::new(Some(HashMap::new()))),
            next: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Sends `request` and waits for its answer; a cancelled wait sends
    /// `control_cancel_request`.
    ///
    /// # Errors
    /// The SDK's error text, a closed stdin, or cancellation.
    pub async fn request(
        &self,
        request: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, String> {
        let id = format!("gyre_req_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(map) = pending.as_mut() else {
                return Err("stdin is closed: the SDK can no longer answer".to_owned());
            };
            map.insert(id.clone(), tx);
        }
        let line = json!({ "type": "control_request", "request_id": id, "request": request });
        if let Err(e) = self.out.line(&line) {
            self.forget(&id);
            return Err(format!("could not write to stdout: {e}"));
        }
        tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Err("stdin closed before the SDK answered".to_owned())),
            () = cancel.cancelled() => {
                self.forget(&id);
                let _ = self.out.line(&json!({ "type": "control_cancel_request", "request_id": id }));
                Err("interrupted".to_owned())
            }
        }
    }

    fn forget(&self, id: &str) {
        if let Some(map) = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            map.remove(id);
        }
    }

    /// Hands an answer to its waiting request. False when no request has that id.
    pub fn resolve(&self, request_id: &str, result: Result<Value, String>) -> bool {
        let sender = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|map| map.remove(request_id));
        sender.is_some_and(|tx| tx.send(result).is_ok())
    }

    /// stdin is gone: every waiting request fails, later ones fail at once.
    pub fn close(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.take();
    }
}

impl gyre_core::ClientRequests for ControlChannel {
    fn request<'a>(
        &'a self,
        request: Value,
        cancel: &'a CancellationToken,
    ) -> gyre_tools::BoxFuture<'a, Result<Value, gyre_core::ClientError>> {
        Box::pin(async move {
            Self::request(self, request, cancel)
                .await
                .map_err(gyre_core::ClientError)
        })
    }
}

impl ControlChannel {
    /// This channel as the session's handle to its client.
    #[must_use]
    pub fn client(&self) -> gyre_core::ClientChannel {
        Arc::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_every_kind_of_line() {
        assert_eq!(
            parse_inbound(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#),
            Inbound::User(vec![ContentBlock::text("hi")])
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_request","request_id":"r1","request":{"subtype":"interrupt"}}"#
            ),
            Inbound::Request {
                request_id: "r1".into(),
                request: json!({"subtype": "interrupt"})
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"success","request_id":"g1","response":{"behavior":"allow"}}}"#
            ),
            Inbound::Response {
                request_id: "g1".into(),
                result: Ok(json!({"behavior": "allow"}))
            }
        );
        assert_eq!(
            parse_inbound(
                r#"{"type":"control_response","response":{"subtype":"error","request_id":"g2","error":"boom"}}"#
            ),
            Inbound::Response {
                request_id: "g2".into(),
                result: Err("boom".into())
            }
        );
        assert_eq!(
            parse_inbound(r#"{"type":"control_cancel_request","request_id":"r1"}"#),
            Inbound::Cancel {
                request_id: "r1".into()
            }
        );
    }

    #[test]
    fn garbage_and_unknown_types_say_what_was_expected() {
        let Inbound::Invalid(e) = parse_inbound("not json") else {
            panic!()
        };
        assert!(e.contains("not JSON"), "{e}");
        let Inbound::Invalid(e) = parse_inbound(r#"{"type":"assistant"}"#) else {
            panic!()
        };
        assert!(e.contains("\"assistant\"") && e.contains("expected"), "{e}");
        let Inbound::Invalid(e) = parse_inbound(r#"{"type":"control_request"}"#) else {
            panic!()
        };
        assert!(e.contains("request_id"), "{e}");
    }

    #[test]
    fn orphan_and_duplicate_tool_results_are_refused_and_a_pending_one_accepted() {
        let history = vec![
            Message::user(vec![ContentBlock::text("go")]),
            Message::assistant(vec![ContentBlock::tool_use("toolu_1", "Read", json!({}))]),
        ];
        let answer = vec![ContentBlock::tool_result("toolu_1", "ok", false)];
        assert!(check_tool_results(&history, &answer).is_ok());
        let twice = vec![answer[0].clone(), answer[0].clone()];
        assert!(
            check_tool_results(&history, &twice)
                .unwrap_err()
                .contains("twice")
        );
        let orphan = vec![ContentBlock::tool_result("toolu_9", "ok", false)];
        let err = check_tool_results(&history, &orphan).unwrap_err();
        assert!(err.contains("toolu_9"), "{err}");
        assert!(check_tool_results(&[], &answer).is_err());
    }

    #[tokio::test]
    async fn a_request_gets_the_answer_with_its_id_and_fails_when_stdin_closes() {
        let out = LineOut::new(Box::new(std::io::sink()));
        let channel = ControlChannel::new(out);
        let waiter = {
            let channel = channel.clone();
            tokio::spawn(async move {
                channel
                    .request(
                        json!({"subtype": "can_use_tool"}),
                        &CancellationToken::new(),
                    )
                    .await
            })
        };
        tokio::task::yield_now().await;
        assert!(!channel.resolve("gyre_req_99", Ok(json!({}))));
        assert!(channel.resolve("gyre_req_1", Ok(json!({"behavior": "allow"}))));
        assert_eq!(waiter.await.unwrap(), Ok(json!({"behavior": "allow"})));
        channel.close();
        let late = channel
            .request(
                json!({"subtype": "hook_callback"}),
                &CancellationToken::new(),
            )
            .await;
        assert!(late.unwrap_err().contains("closed"));
    }
}
