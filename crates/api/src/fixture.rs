//! Fixtures: record a client's exchanges to JSON lines and replay them.
//!
//! One line per request: `{"request": {...}, "sse": "event: ...\ndata: ...\n\n...",
//! "error": {...}?}`. The SSE text is written the way the API sends it, so a fixture is
//! readable and can be served by any SSE server. Headers are never recorded, and
//! anything that looks like an Anthropic API key (`sk-ant-…`) or a secret given to
//! [`RecordingClient::with_secret`] is replaced by `[REDACTED]` before writing.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use futures::StreamExt;
use gyre_protocol::{ContentDelta, MessagesRequest, StreamEvent};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::ApiError;
use crate::client::{EventStream, ModelClient};
use crate::sse::{chunk_text, encode_sse, sse_events};

/// One recorded exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FixtureEntry {
    /// The request that was sent (replay checks the next one against it).
    pub request: MessagesRequest,
    /// The events received, as SSE text.
    pub sse: String,
    /// The error that ended the attempt, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
}

const REDACTED: &str = "[REDACTED]";

static KEY_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"sk-ant-[A-Za-z0-9_\-]{4,}").ok());

fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = KEY_RE.as_ref().map_or_else(
        || text.to_owned(),
        |re| re.replace_all(text, REDACTED).into_owned(),
    );
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        out = out.replace(secret.as_str(), REDACTED);
    }
    out
}

/// The streamed text of a delta, and which kind it is.
fn delta_text(delta: &ContentDelta) -> Option<(u8, &str)> {
    match delta {
        ContentDelta::TextDelta { text } => Some((0, text)),
        ContentDelta::InputJsonDelta { partial_json } => Some((1, partial_json)),
        ContentDelta::ThinkingDelta { thinking } => Some((2, thinking)),
        ContentDelta::SignatureDelta { signature } => Some((3, signature)),
        ContentDelta::CitationsDelta { .. } | ContentDelta::Other(_) => None,
    }
}

fn with_text(kind: u8, text: String) -> ContentDelta {
    match kind {
        0 => ContentDelta::TextDelta { text },
        1 => ContentDelta::InputJsonDelta { partial_json: text },
        2 => ContentDelta::ThinkingDelta { thinking: text },
        _ => ContentDelta::SignatureDelta { signature: text },
    }
}

/// Redaction works on the written line, where a key the stream cut into several deltas
/// is in no single piece. The deltas of each block whose joined text holds a secret
/// are merged into one (where its first delta was), so the line holds the key whole.
fn join_split_secrets(events: Vec<StreamEvent>, secrets: &[String]) -> Vec<StreamEvent> {
    let mut joined: BTreeMap<(usize, u8), String> = BTreeMap::new();
    for event in &events {
        if let StreamEvent::ContentBlockDelta { index, delta } = event
            && let Some((kind, text)) = delta_text(delta)
        {
            joined.entry((*index, kind)).or_default().push_str(text);
        }
    }
    joined.retain(|_, text| redact(text, secrets) != *text);
    if joined.is_empty() {
        return events;
    }
    let mut out = Vec::with_capacity(events.len());
    let mut merged = BTreeSet::new();
    for event in events {
        let key = match &event {
            StreamEvent::ContentBlockDelta { index, delta } => {
                delta_text(delta).map(|(kind, _)| (*index, kind))
            }
            _ => None,
        };
        match key.and_then(|k| joined.get_mut(&k).map(|text| (k, text))) {
            // The first delta of the block carries all of it; the others go.
            Some((key, text)) => {
                if merged.insert(key) {
                    out.push(StreamEvent::ContentBlockDelta {
                        index: key.0,
                        delta: with_text(key.1, std::mem::take(text)),
                    });
                }
            }
            None => out.push(event),
        }
    }
    out
}

fn fixture_error(message: impl Into<String>) -> ApiError {
    ApiError::Fixture {
        message: message.into(),
    }
}

/// Wraps a client and appends every exchange to a fixture file.
pub struct RecordingClient {
    inner: Arc<dyn ModelClient>,
    file: Arc<Mutex<File>>,
    path: PathBuf,
    secrets: Arc<Vec<String>>,
}

impl std::fmt::Debug for RecordingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingClient")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RecordingClient {
    /// Creates (or truncates) the fixture at `path`.
    pub fn create(inner: Arc<dyn ModelClient>, path: impl AsRef<Path>) -> Result<Self, ApiError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path)
            .map_err(|e| fixture_error(format!("cannot create {}: {e}", path.display())))?;
        Ok(Self {
            inner,
            file: Arc::new(Mutex::new(file)),
            path,
            secrets: Arc::new(Vec::new()),
        })
    }

    /// Also redact this exact string (e.g. the API key in use, whatever its form).
    #[must_use]
    pub fn with_secret(mut self, secret: impl Into<String>) -> Self {
        let mut secrets = (*self.secrets).clone();
        secrets.push(secret.into());
        self.secrets = Arc::new(secrets);
        self
    }

    /// Where the fixture is written.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes its entry once: at `message_stop`, at the stream's end or error, or when the
/// consumer drops the stream early.
struct PendingEntry {
    request: Arc<MessagesRequest>,
    events: Vec<StreamEvent>,
    error: Option<ApiError>,
    file: Arc<Mutex<File>>,
    secrets: Arc<Vec<String>>,
    written: bool,
}

impl PendingEntry {
    fn write(&mut self) {
        if self.written {
            return;
        }
        self.written = true;
        let entry = FixtureEntry {
            request: MessagesRequest::clone(&self.request),
            sse: join_split_secrets(std::mem::take(&mut self.events), &self.secrets)
                .iter()
                .map(encode_sse)
                .collect(),
            error: self.error.take(),
        };
        let line = match serde_json::to_string(&entry) {
            Ok(l) => redact(&l, &self.secrets),
            Err(e) => {
                tracing::error!("fixture entry could not be encoded: {e}");
                return;
            }
        };
        match self.file.lock() {
            Ok(mut f) => {
                if let Err(e) = writeln!(f, "{line}").and_then(|()| f.flush()) {
                    tracing::error!("fixture write failed: {e}");
                }
            }
            Err(_) => tracing::error!("fixture file lock poisoned"),
        }
    }
}

impl Drop for PendingEntry {
    fn drop(&mut self) {
        self.write();
    }
}

impl ModelClient for RecordingClient {
    /// Records to the same fixture what a fork of the wrapped client answers.
    fn fork(&self) -> Option<Arc<dyn ModelClient>> {
        let inner = self.inner.fork()?;
        Some(Arc::new(Self {
            inner,
            file: Arc::clone(&self.file),
            path: self.path.clone(),
            secrets: Arc::clone(&self.secrets),
        }))
    }

    fn stream(&self, request: Arc<MessagesRequest>, cancel: CancellationToken) -> EventStream {
        let mut inner = self.inner.stream(Arc::clone(&request), cancel);
        let mut pending = PendingEntry {
            request,
            events: Vec::new(),
            error: None,
            file: Arc::clone(&self.file),
            secrets: Arc::clone(&self.secrets),
            written: false,
        };
        Box::pin(async_stream::stream! {
            while let Some(item) = inner.next().await {
                match item {
                    Ok(event) => {
                        let stop = matches!(event, StreamEvent::MessageStop);
                        pending.events.push(event.clone());
                        if stop {
                            pending.write();
                        }
                        yield Ok(event);
                    }
                    Err(e) => {
                        pending.error = Some(e.clone());
                        pending.write();
                        yield Err(e);
                        return;
                    }
                }
            }
            pending.write();
        })
    }
}

/// Serves a fixture back, in order. A request that differs from the recorded one, or
/// one more request than was recorded, fails with [`ApiError::Fixture`] naming the
/// first difference.
#[derive(Debug)]
pub struct ReplayClient {
    entries: Vec<FixtureEntry>,
    next: AtomicUsize,
    source: String,
}

impl ReplayClient {
    /// Reads a fixture file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ApiError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| fixture_error(format!("cannot read {}: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses fixture text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, ApiError> {
        let entries = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str::<FixtureEntry>(l).map_err(|e| {
                    fixture_error(format!("{source}:{}: not a fixture entry: {e}", i + 1))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_entries(entries, source))
    }

    /// A client replaying `entries` in order; `source` names them in errors.
    #[must_use]
    pub fn from_entries(entries: Vec<FixtureEntry>, source: &str) -> Self {
        Self {
            entries,
            next: AtomicUsize::new(0),
            source: source.to_owned(),
        }
    }

    /// The recorded exchanges.
    #[must_use]
    pub fn entries(&self) -> &[FixtureEntry] {
        &self.entries
    }

    /// How many recorded exchanges have not been asked for yet.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.entries
            .len()
            .saturating_sub(self.next.load(Ordering::SeqCst))
    }

    fn check(&self, index: usize, request: &MessagesRequest) -> Result<&FixtureEntry, ApiError> {
        let entry = self.entries.get(index).ok_or_else(|| {
            fixture_error(format!(
                "{}: request #{} has no recording (the fixture holds {})",
                self.source,
                index + 1,
                self.entries.len()
            ))
        })?;
        let recorded = serde_json::to_value(&entry.request).unwrap_or(Value::Null);
        let got = serde_json::to_string(request)
            .ok()
            .map(|s| redact(&s, &[]))
            .and_then(|s| serde_json::from_str::<Value>(&s).ok())
            .unwrap_or(Value::Null);
        if let Some(diff) = first_difference(&recorded, &got, "") {
            return Err(fixture_error(format!(
                "{}: request #{} does not match the recording: {diff}",
                self.source,
                index + 1
            )));
        }
        Ok(entry)
    }
}

/// The first place two JSON values differ, as `at <path>: recorded X, got Y`.
fn first_difference(recorded: &Value, got: &Value, path: &str) -> Option<String> {
    let show = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 80 {
            format!("{}…", s.chars().take(80).collect::<String>())
        } else {
            s
        }
    };
    let here = || {
        Some(format!(
            "at {}: recorded {}, got {}",
            if path.is_empty() { "/" } else { path },
            show(recorded),
            show(got)
        ))
    };
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let p = format!("{path}/{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => first_difference(x, y, &p),
                    (x, y) => Some(format!(
                        "at {p}: recorded {}, got {}",
                        x.map_or_else(|| "nothing".to_owned(), show),
                        y.map_or_else(|| "nothing".to_owned(), show)
                    )),
                }
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!(
                    "at {}: recorded {} items, got {}",
                    if path.is_empty() { "/" } else { path },
                    a.len(),
                    b.len()
                ));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}/{i}")))
        }
        (a, b) if a == b => None,
        _ => here(),
    }
}

impl ModelClient for ReplayClient {
    fn stream(&self, request: Arc<MessagesRequest>, cancel: CancellationToken) -> EventStream {
        let index = self.next.fetch_add(1, Ordering::SeqCst);
        let entry = match self.check(index, &request) {
            Ok(entry) => entry.clone(),
            Err(e) => {
                tracing::error!("{e}");
                return Box::pin(futures::stream::iter([Err(e)]));
            }
        };
        Box::pin(async_stream::stream! {
            let chunks = chunk_text(&entry.sse, 8192)
                .into_iter()
                .map(Ok::<_, std::convert::Infallible>);
            let mut events = std::pin::pin!(sse_events(futures::stream::iter(chunks)));
            loop {
                let next = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Some(Err(ApiError::Aborted)),
                    n = events.next() => n,
                };
                match next {
                    Some(Ok(event)) => yield Ok(event),
                    Some(Err(e)) => {
                        yield Err(e);
                        return;
                    }
                    None => break,
                }
            }
            if let Some(e) = entry.error {
                yield Err(e);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_redacted() {
        let text = r#"{"k":"sk-ant-api03-AbC_d-e","x":"my-proxy-token"}"#;
        let out = redact(text, &["my-proxy-token".to_owned()]);
        assert_eq!(out, r#"{"k":"[REDACTED]","x":"[REDACTED]"}"#);
    }

    #[test]
    fn first_difference_names_the_path() {
        let a = json!({"model":"m","messages":[{"content":[{"text":"hi"}]}]});
        let b = json!({"model":"m","messages":[{"content":[{"text":"ho"}]}]});
        assert_eq!(
            first_difference(&a, &b, "").unwrap(),
            r#"at /messages/0/content/0/text: recorded "hi", got "ho""#
        );
        assert_eq!(first_difference(&a, &a, ""), None);
        let c = json!({"model":"m"});
        assert!(first_difference(&a, &c, "").unwrap().contains("/messages"));
    }

    #[test]
    fn bad_fixture_lines_are_reported_with_their_line() {
        let err = ReplayClient::parse("\n{oops\n", "f.jsonl").unwrap_err();
        assert!(err.to_string().contains("f.jsonl:2"), "{err}");
    }
}
