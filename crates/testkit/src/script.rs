//! The script: what the server answers, turn by turn. See the crate docs for the JSON format.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use gyre_protocol::{ErrorDetail, Usage};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::TestkitError;

/// Text and tool input are streamed in deltas of this many characters unless a script says otherwise.
pub const DEFAULT_CHUNK_CHARS: usize = 20;

fn default_chunk_chars() -> usize {
    DEFAULT_CHUNK_CHARS
}

fn is_default_chunk_chars(n: &usize) -> bool {
    *n == DEFAULT_CHUNK_CHARS
}

/// A whole script: the turns to serve in order and what to do when they run out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Script {
    /// One turn per `POST /v1/messages`, in order.
    pub turns: Vec<Turn>,
    /// What to answer once every turn has been served.
    #[serde(default)]
    pub when_exhausted: WhenExhausted,
    /// When set, a request whose `x-api-key` differs gets a 401 `authentication_error`
    /// (and consumes no turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_api_key: Option<String>,
    /// Characters per `text_delta` / `thinking_delta` / `input_json_delta` (default 20);
    /// a turn's own `chunk_chars` wins.
    #[serde(
        default = "default_chunk_chars",
        skip_serializing_if = "is_default_chunk_chars"
    )]
    pub chunk_chars: usize,
    /// Answers summary (compaction) requests without taking a turn; see [`SummaryAnswer`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<SummaryAnswer>,
    /// When set, a `POST /v1/messages` of more input tokens (its size / 4) gets the API's
    /// 400 `invalid_request_error` "prompt is too long: N tokens > W maximum" and takes
    /// no turn, as the API refuses a request over the model's context window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

impl Default for Script {
    fn default() -> Self {
        Self::new([])
    }
}

/// What the server answers once every turn of the script has been served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenExhausted {
    /// HTTP 500 `api_error` "gyre-testkit: script exhausted after N turns", with
    /// `x-should-retry: false` so that a client under test fails at once instead of retrying.
    #[default]
    Error,
    /// Serve the last turn again (auto-generated tool ids stay unique).
    RepeatLast,
}

/// The on-disk shape of a script object; turns are kept as JSON so that errors can name
/// the turn they come from.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<Value>,
    #[serde(default)]
    when_exhausted: WhenExhausted,
    #[serde(default)]
    require_api_key: Option<String>,
    #[serde(default = "default_chunk_chars")]
    chunk_chars: usize,
    #[serde(default)]
    summary: Option<SummaryAnswer>,
    #[serde(default)]
    context_window: Option<u64>,
}

impl<'de> Deserialize<'de> for Script {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let file = match Value::deserialize(deserializer)? {
            // A bare array is a script with default settings.
            Value::Array(turns) => ScriptFile {
                turns,
                when_exhausted: WhenExhausted::default(),
                require_api_key: None,
                chunk_chars: DEFAULT_CHUNK_CHARS,
                summary: None,
                context_window: None,
            },
            other => ScriptFile::deserialize(other).map_err(D::Error::custom)?,
        };
        let turns = file
            .turns
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                Turn::from_value(v).map_err(|e| D::Error::custom(format!("turns[{i}]: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let script = Self {
            turns,
            when_exhausted: file.when_exhausted,
            require_api_key: file.require_api_key,
            chunk_chars: file.chunk_chars,
            summary: file.summary,
            context_window: file.context_window,
        };
        script.check().map_err(D::Error::custom)?;
        Ok(script)
    }
}

impl FromStr for Script {
    type Err = TestkitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut script: Self = serde_json::from_str(s).map_err(TestkitError::ParseScript)?;
        script.load_event_files(Path::new("."))?;
        Ok(script)
    }
}

impl Script {
    /// A script serving `turns` in order, then failing (`when_exhausted: "error"`).
    #[must_use]
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            when_exhausted: WhenExhausted::Error,
            require_api_key: None,
            chunk_chars: DEFAULT_CHUNK_CHARS,
            summary: None,
            context_window: None,
        }
    }

    /// Parses a script from JSON text (same as [`str::parse`]).
    ///
    /// # Errors
    /// [`TestkitError::ParseScript`] with serde's message when the text is not a valid script.
    pub fn from_json(json: &str) -> Result<Self, TestkitError> {
        json.parse()
    }

    /// Reads and parses a script file.
    ///
    /// # Errors
    /// [`TestkitError::ReadScript`] when the file cannot be read,
    /// [`TestkitError::ParseScriptFile`] (file name and serde's message) when it is not a
    /// valid script.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, TestkitError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|error| TestkitError::ReadScript {
            path: path.to_owned(),
            error,
        })?;
        let mut script: Self =
            serde_json::from_str(&text).map_err(|error| TestkitError::ParseScriptFile {
                path: path.to_owned(),
                error,
            })?;
        script.load_event_files(path.parent().unwrap_or_else(|| Path::new(".")))?;
        Ok(script)
    }

    /// Loads every turn's `raw_events_file` (relative to `base`) into its `raw_events`.
    /// [`Script::from_file`] and [`Script::from_json`] do this; a script deserialized
    /// some other way needs it before it is served.
    ///
    /// # Errors
    /// [`TestkitError::ReadScript`] or [`TestkitError::ParseEvents`] for the first file
    /// that cannot be read or holds a line that is not an event.
    pub fn load_event_files(&mut self, base: &Path) -> Result<(), TestkitError> {
        for turn in &mut self.turns {
            if let Turn::Response(r) = turn
                && let Some(file) = r.raw_events_file.take()
            {
                r.raw_events = Some(crate::corpus::read_events(base.join(file))?);
            }
        }
        Ok(())
    }

    /// Appends a turn.
    #[must_use]
    pub fn turn(mut self, turn: Turn) -> Self {
        self.turns.push(turn);
        self
    }

    /// Serve the last turn again once the turns run out.
    #[must_use]
    pub fn repeat_last(mut self) -> Self {
        self.when_exhausted = WhenExhausted::RepeatLast;
        self
    }

    /// Sets what happens once the turns run out.
    #[must_use]
    pub fn when_exhausted(mut self, when: WhenExhausted) -> Self {
        self.when_exhausted = when;
        self
    }

    /// Answers 401 `authentication_error` to requests whose `x-api-key` is not `key`.
    #[must_use]
    pub fn require_api_key(mut self, key: impl Into<String>) -> Self {
        self.require_api_key = Some(key.into());
        self
    }

    /// Answers summary (compaction) requests, recognised by `answer`'s prompt, on the
    /// side: they take no turn.
    #[must_use]
    pub fn with_summary(mut self, answer: SummaryAnswer) -> Self {
        self.summary = Some(answer);
        self
    }

    /// Refuses requests of more than `tokens` input tokens, as the API does past the
    /// model's context window.
    #[must_use]
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// Sets the default delta size in characters.
    #[must_use]
    pub fn with_chunk_chars(mut self, chars: usize) -> Self {
        self.chunk_chars = chars;
        self
    }

    /// Checks what serde cannot: sizes of 0, impossible statuses, contradictory blocks.
    ///
    /// # Errors
    /// [`TestkitError::InvalidScript`] naming the first problem found.
    pub fn validate(&self) -> Result<(), TestkitError> {
        self.check().map_err(TestkitError::InvalidScript)?;
        let unloaded = self
            .turns
            .iter()
            .position(|t| matches!(t, Turn::Response(r) if r.raw_events_file.is_some()));
        match unloaded {
            Some(i) => Err(TestkitError::InvalidScript(format!(
                "turns[{i}]: raw_events_file was not loaded; read the script with \
                 Script::from_file or Script::from_json, or call Script::load_event_files"
            ))),
            None => Ok(()),
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.chunk_chars == 0 {
            return Err("chunk_chars must be at least 1".to_owned());
        }
        for (i, turn) in self.turns.iter().enumerate() {
            turn.check().map_err(|e| format!("turns[{i}]: {e}"))?;
        }
        if let Some(summary) = &self.summary {
            summary.check()?;
        }
        Ok(())
    }
}

/// How the server answers summary requests: `{"summary": {"when_prompt_contains": …,
/// "turn": {…}}}` in a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryAnswer {
    /// A `POST /v1/messages` whose last message has a text block containing this is a
    /// summary request (e.g. the opening words of the client's compaction prompt). Tool
    /// results are not looked at, so a file that quotes the prompt does not count.
    pub when_prompt_contains: String,
    /// The answer, served to every summary request: a response (usually one text block
    /// with `<summary>…</summary>`) or an HTTP error (a compaction that fails).
    pub turn: Turn,
}

impl SummaryAnswer {
    /// Answers summary requests, recognised by `prompt`, with `turn`.
    #[must_use]
    pub fn new(prompt: impl Into<String>, turn: Turn) -> Self {
        Self {
            when_prompt_contains: prompt.into(),
            turn,
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if self.when_prompt_contains.is_empty() {
            return Err("summary.when_prompt_contains must not be empty".to_owned());
        }
        if matches!(&self.turn, Turn::Response(r) if r.raw_events_file.is_some()) {
            return Err("summary.turn: raw_events_file is not loaded here; give raw_events".into());
        }
        self.turn.check().map_err(|e| format!("summary.turn: {e}"))
    }

    /// Whether `body` (a Messages API request) is a summary request.
    pub(crate) fn matches(&self, body: &[u8]) -> bool {
        crate::summary::last_message_contains(body, &self.when_prompt_contains)
    }
}

/// One answer of the server: a streamed (or plain JSON) response, or an HTTP error.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
// Scripts hold a handful of turns; plain variants keep `Turn::Response(r)` patterns simple.
#[allow(clippy::large_enum_variant)]
pub enum Turn {
    /// A successful response: content blocks, stop reason, usage and optional faults.
    Response(ResponseTurn),
    /// An HTTP error status with body and headers.
    HttpError(HttpErrorTurn),
}

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self::from_value(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

impl From<ResponseTurn> for Turn {
    fn from(turn: ResponseTurn) -> Self {
        Self::Response(turn)
    }
}

impl From<HttpErrorTurn> for Turn {
    fn from(turn: HttpErrorTurn) -> Self {
        Self::HttpError(turn)
    }
}

impl Turn {
    /// An object with an `http_error` key is an error turn, anything else a response; this
    /// keeps serde's precise messages (`unknown field …`) that an untagged enum would lose.
    fn from_value(value: Value) -> Result<Self, serde_json::Error> {
        if value.get("http_error").is_some() {
            HttpErrorTurn::deserialize(value).map(Self::HttpError)
        } else {
            ResponseTurn::deserialize(value).map(Self::Response)
        }
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        match self {
            Self::Response(r) => r.check(),
            Self::HttpError(e) => {
                if !(100..=999).contains(&e.http_error.status) {
                    return Err(format!(
                        "http_error.status {} is not an HTTP status",
                        e.http_error.status
                    ));
                }
                check_headers(&e.http_error.headers)
            }
        }
    }

    /// A response with one block, or none: the starting point of the builders below.
    #[must_use]
    pub fn response(content: impl IntoIterator<Item = Block>) -> Self {
        Self::Response(ResponseTurn {
            content: content.into_iter().collect(),
            ..ResponseTurn::default()
        })
    }

    /// A response with one text block (`stop_reason` `end_turn`).
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::response([Block::text(text)])
    }

    /// A response with one `tool_use` block and an auto-generated id (`stop_reason` `tool_use`).
    #[must_use]
    pub fn tool_use(name: impl Into<String>, input: Value) -> Self {
        Self::response([Block::tool_use(name, input)])
    }

    /// A response whose body is exactly `sse` (status 200, `text/event-stream`).
    #[must_use]
    pub fn raw_sse(sse: impl Into<String>) -> Self {
        Self::Response(ResponseTurn {
            raw_sse: Some(sse.into()),
            ..ResponseTurn::default()
        })
    }

    /// A response whose SSE events are exactly `events` (each a JSON object with a string
    /// `type`), e.g. a stream file read with [`corpus::read_events`](crate::corpus::read_events).
    #[must_use]
    pub fn raw_events(events: impl IntoIterator<Item = Value>) -> Self {
        Self::Response(ResponseTurn {
            raw_events: Some(events.into_iter().collect()),
            ..ResponseTurn::default()
        })
    }

    /// An HTTP error with the API's error body for that status (529 → `overloaded_error`, …).
    #[must_use]
    pub fn http_error(status: u16) -> Self {
        Self::HttpError(HttpErrorTurn {
            http_error: HttpError {
                status,
                body: None,
                headers: BTreeMap::new(),
            },
            delay_ms: None,
        })
    }

    fn map_response(mut self, f: impl FnOnce(&mut ResponseTurn)) -> Self {
        if let Self::Response(r) = &mut self {
            f(r);
        }
        self
    }

    /// Appends a block. Response turns only; an HTTP error turn is returned unchanged
    /// (as by every response-only builder below).
    #[must_use]
    pub fn and(self, block: Block) -> Self {
        self.map_response(|r| r.content.push(block))
    }

    /// Appends a text block.
    #[must_use]
    pub fn and_text(self, text: impl Into<String>) -> Self {
        self.and(Block::text(text))
    }

    /// Appends a `tool_use` block with an auto-generated id.
    #[must_use]
    pub fn and_tool_use(self, name: impl Into<String>, input: Value) -> Self {
        self.and(Block::tool_use(name, input))
    }

    /// Sets the stop reason (default: `tool_use` when there is a tool_use block, else `end_turn`).
    #[must_use]
    pub fn with_stop_reason(self, stop_reason: impl Into<String>) -> Self {
        self.map_response(|r| r.stop_reason = Some(stop_reason.into()))
    }

    /// Sets the usage reported in `message_start` and `message_delta`.
    #[must_use]
    pub fn with_usage(self, usage: Usage) -> Self {
        self.map_response(|r| r.usage = usage)
    }

    /// Sets input and output tokens (cache tokens 0).
    #[must_use]
    pub fn with_tokens(self, input_tokens: u64, output_tokens: u64) -> Self {
        self.with_usage(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        })
    }

    /// Sets the model named in the response (default: the request's model).
    #[must_use]
    pub fn with_model(self, model: impl Into<String>) -> Self {
        self.map_response(|r| r.model = Some(model.into()))
    }

    /// Sets the message id (default `msg_testkit_<request number>`).
    #[must_use]
    pub fn with_id(self, id: impl Into<String>) -> Self {
        self.map_response(|r| r.id = Some(id.into()))
    }

    /// Sets this turn's delta size in characters.
    #[must_use]
    pub fn with_chunk_chars(self, chars: usize) -> Self {
        self.map_response(|r| r.chunk_chars = Some(chars))
    }

    /// Adds a response header (both kinds of turn).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let headers = match &mut self {
            Self::Response(r) => &mut r.headers,
            Self::HttpError(e) => &mut e.http_error.headers,
        };
        headers.insert(name.into(), value.into());
        self
    }

    /// Sets the body of an HTTP error turn: JSON, or a JSON string sent as plain text.
    /// Response turns are returned unchanged.
    #[must_use]
    pub fn with_body(mut self, body: Value) -> Self {
        if let Self::HttpError(e) = &mut self {
            e.http_error.body = Some(body);
        }
        self
    }

    /// Waits this long before answering at all (both kinds of turn).
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        let ms = Some(millis(delay));
        match &mut self {
            Self::Response(r) => r.delay_ms = ms,
            Self::HttpError(e) => e.delay_ms = ms,
        }
        self
    }

    /// Waits this long before each SSE event.
    #[must_use]
    pub fn delay_per_event(self, delay: Duration) -> Self {
        self.map_response(|r| r.delay_ms_per_event = Some(millis(delay)))
    }

    /// Closes the connection after `events` SSE events, without `message_stop`.
    #[must_use]
    pub fn cut_after(self, events: usize) -> Self {
        self.map_response(|r| r.cut_after_events = Some(events))
    }

    /// How [`cut_after`](Self::cut_after) ends the stream.
    #[must_use]
    pub fn with_cut_mode(self, mode: CutMode) -> Self {
        self.map_response(|r| r.cut_mode = mode)
    }

    /// Sends `events` SSE events, goes silent for `pause`, then continues.
    #[must_use]
    pub fn stall(self, events: usize, pause: Duration) -> Self {
        self.map_response(|r| {
            r.stall = Some(Stall {
                after_events: events,
                ms: Some(millis(pause)),
            });
        })
    }

    /// Sends `events` SSE events and then nothing, holding the connection open until the
    /// client goes away or the server stops.
    #[must_use]
    pub fn stall_forever(self, events: usize) -> Self {
        self.map_response(|r| {
            r.stall = Some(Stall {
                after_events: events,
                ms: None,
            });
        })
    }

    /// Sends `events` SSE events, then an `event: error` of this type and message, then ends.
    #[must_use]
    pub fn error_event(
        self,
        events: usize,
        kind: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.map_response(|r| {
            r.error_event = Some(ErrorEvent {
                after_events: events,
                error: ErrorDetail {
                    kind: kind.into(),
                    message: message.into(),
                },
            });
        })
    }

    /// Inserts an event of an unknown type after `events` events.
    #[must_use]
    pub fn unknown_event_after(self, events: usize) -> Self {
        self.map_response(|r| r.unknown_event_after = Some(events))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A successful response turn. Every field but `content` is optional in JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseTurn {
    /// The content blocks, streamed in order.
    #[serde(default)]
    pub content: Vec<Block>,
    /// `end_turn`, `tool_use`, `max_tokens`, … (any string is sent as is). Default:
    /// `tool_use` when `content` has a tool_use block, else `end_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The `stop_sequence` of the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
    /// Usage: `message_start` carries the input side (and `output_tokens: 1`),
    /// `message_delta` all four fields as cumulative totals.
    #[serde(default)]
    pub usage: Usage,
    /// The model named in the response (default: the request's `model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The message id (default `msg_testkit_<request number>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Extra response headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Delta size in characters for this turn (default: the script's `chunk_chars`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_chars: Option<usize>,
    /// Wait before answering at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Wait before each SSE event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms_per_event: Option<u64>,
    /// End the stream after this many events, before `message_stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_after_events: Option<usize>,
    /// How `cut_after_events` ends the stream.
    #[serde(default, skip_serializing_if = "is_default_cut_mode")]
    pub cut_mode: CutMode,
    /// Go silent after some events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    /// Replace the rest of the stream with an in-stream `error` event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_event: Option<ErrorEvent>,
    /// Insert an event of an unknown type after this many events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown_event_after: Option<usize>,
    /// Send exactly this text as the body instead of rendering `content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_sse: Option<String>,
    /// Send these events, in order, instead of rendering `content`: each a JSON object
    /// with a string `type`, framed `event: <type>\ndata: <json>\n\n` as it is (always
    /// as SSE). Faults still apply; see [`corpus`](crate::corpus) for recorded-style
    /// stream files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_events: Option<Vec<Value>>,
    /// A stream file (one event per line, see [`corpus`](crate::corpus)) to load into
    /// `raw_events` when the script is loaded: relative to the script file's directory
    /// with [`Script::from_file`], to the working directory with [`Script::from_json`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_events_file: Option<PathBuf>,
}

impl ResponseTurn {
    /// The stop reason sent: the scripted one, else `tool_use` if a tool is called, else `end_turn`.
    #[must_use]
    pub fn effective_stop_reason(&self) -> &str {
        match &self.stop_reason {
            Some(s) => s,
            None if self
                .content
                .iter()
                .any(|b| matches!(b, Block::ToolUse { .. })) =>
            {
                "tool_use"
            }
            None => "end_turn",
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.chunk_chars == Some(0) {
            return Err("chunk_chars must be at least 1".to_owned());
        }
        let raw_events = self.raw_events.is_some() || self.raw_events_file.is_some();
        if raw_events && (!self.content.is_empty() || self.raw_sse.is_some()) {
            return Err("`raw_events` replaces `content` and `raw_sse`: give only one".into());
        }
        if self.raw_events.is_some() && self.raw_events_file.is_some() {
            return Err("give `raw_events` or `raw_events_file`, not both".into());
        }
        if let Some(events) = &self.raw_events {
            for (i, event) in events.iter().enumerate() {
                if event.get("type").and_then(Value::as_str).is_none() {
                    return Err(format!(
                        "raw_events[{i}]: an event must be a JSON object with a string `type`"
                    ));
                }
            }
        }
        for (i, block) in self.content.iter().enumerate() {
            if let Block::ToolUse {
                input: Some(_),
                raw_input_json: Some(_),
                ..
            } = block
            {
                return Err(format!(
                    "content[{i}]: tool_use has both `input` and `raw_input_json`"
                ));
            }
        }
        check_headers(&self.headers)
    }
}

fn check_headers(headers: &BTreeMap<String, String>) -> Result<(), String> {
    for (name, value) in headers {
        if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("`{name}` is not a valid header name"));
        }
        if hyper::header::HeaderValue::from_str(value).is_err() {
            return Err(format!("header `{name}` has an invalid value {value:?}"));
        }
    }
    Ok(())
}

fn is_default_cut_mode(mode: &CutMode) -> bool {
    *mode == CutMode::default()
}

/// How a stream cut by `cut_after_events` ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CutMode {
    /// Abort the connection mid-body (the client sees a truncated chunked body, like a
    /// dropped connection).
    #[default]
    Close,
    /// End the body cleanly: the HTTP response is complete but has no `message_stop`.
    Eof,
}

/// Silence in the middle of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// Events sent before the silence (at most all of them: then the silence comes
    /// before the body ends).
    pub after_events: usize,
    /// Length of the silence; `null` or absent holds the connection open forever.
    #[serde(default)]
    pub ms: Option<u64>,
}

/// An in-stream `event: error` that replaces the rest of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorEvent {
    /// Events sent before the error event.
    pub after_events: usize,
    /// The `error` object (default `overloaded_error` / `Overloaded`).
    #[serde(default = "overloaded")]
    pub error: ErrorDetail,
}

fn overloaded() -> ErrorDetail {
    ErrorDetail {
        kind: "overloaded_error".to_owned(),
        message: "Overloaded".to_owned(),
    }
}

/// An HTTP error turn: `{"http_error": {…}, "delay_ms": …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpErrorTurn {
    /// Status, body and headers.
    pub http_error: HttpError,
    /// Wait before answering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// Status, body and headers of an HTTP error turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpError {
    /// The HTTP status (100–999).
    pub status: u16,
    /// JSON body (sent as `application/json`), or a JSON string sent as `text/plain`.
    /// Default: the API's error body for the status, e.g.
    /// `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// Extra headers (`retry-after`, `x-should-retry`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A content block of a response turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Block {
    /// `{"type":"text","text":…}`, streamed as `text_delta`s.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type":"tool_use","id"?:…,"name":…,"input":{…}}`, input streamed as
    /// `input_json_delta`s; or with `raw_input_json` instead of `input`, that text is
    /// streamed as is (for malformed-input tests).
    ToolUse {
        /// The tool use id; auto-generated (`toolu_testkit_<request>_<block>`) when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name.
        name: String,
        /// The input (default `{}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input: Option<Value>,
        /// Input JSON text sent verbatim instead of `input`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        raw_input_json: Option<String>,
    },
    /// `{"type":"thinking","thinking":…,"signature":…}`, streamed as `thinking_delta`s
    /// then one `signature_delta`.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The signature.
        #[serde(default)]
        signature: String,
    },
    /// `{"type":"redacted_thinking","data":…}`, sent whole in `content_block_start`.
    RedactedThinking {
        /// The opaque data.
        data: String,
    },
}

impl Block {
    /// A text block.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// A tool_use block with an auto-generated id.
    #[must_use]
    pub fn tool_use(name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse {
            id: None,
            name: name.into(),
            input: Some(input),
            raw_input_json: None,
        }
    }

    /// A tool_use block with a fixed id.
    #[must_use]
    pub fn tool_use_with_id(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse {
            id: Some(id.into()),
            name: name.into(),
            input: Some(input),
            raw_input_json: None,
        }
    }

    /// A tool_use block whose input JSON text is streamed verbatim (may be malformed).
    #[must_use]
    pub fn raw_tool_use(name: impl Into<String>, raw_input_json: impl Into<String>) -> Self {
        Self::ToolUse {
            id: None,
            name: name.into(),
            input: None,
            raw_input_json: Some(raw_input_json.into()),
        }
    }

    /// A thinking block with its signature.
    #[must_use]
    pub fn thinking(thinking: impl Into<String>, signature: impl Into<String>) -> Self {
        Self::Thinking {
            thinking: thinking.into(),
            signature: signature.into(),
        }
    }

    /// A redacted thinking block.
    #[must_use]
    pub fn redacted_thinking(data: impl Into<String>) -> Self {
        Self::RedactedThinking { data: data.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_full_script() {
        let script: Script = serde_json::from_value(json!({
            "when_exhausted": "repeat_last",
            "require_api_key": "k",
            "chunk_chars": 5,
            "turns": [
                {"content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "text", "text": "hi"},
                    {"type": "tool_use", "name": "Read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_x", "name": "Bad", "raw_input_json": "{not json"}
                 ],
                 "usage": {"input_tokens": 3, "output_tokens": 4},
                 "stall": {"after_events": 2, "ms": null},
                 "error_event": {"after_events": 4},
                 "cut_after_events": 7, "cut_mode": "eof"},
                {"http_error": {"status": 529, "headers": {"retry-after": "2"}}, "delay_ms": 5}
            ]
        }))
        .unwrap();
        assert_eq!(script.when_exhausted, WhenExhausted::RepeatLast);
        assert_eq!(script.chunk_chars, 5);
        let Turn::Response(r) = &script.turns[0] else {
            panic!("response")
        };
        assert_eq!(r.content.len(), 5);
        assert_eq!(r.effective_stop_reason(), "tool_use");
        assert_eq!(
            r.stall,
            Some(Stall {
                after_events: 2,
                ms: None
            })
        );
        assert_eq!(
            r.error_event.as_ref().unwrap().error.kind,
            "overloaded_error"
        );
        let Turn::HttpError(e) = &script.turns[1] else {
            panic!("error")
        };
        assert_eq!(e.http_error.status, 529);
        assert_eq!(e.delay_ms, Some(5));
    }

    #[test]
    fn bare_array_is_a_script() {
        let script = Script::from_json(r#"[{"content":[{"type":"text","text":"a"}]}]"#).unwrap();
        assert_eq!(script, Script::new([Turn::text("a")]));
    }

    #[test]
    fn unknown_field_error_names_the_turn() {
        let err =
            Script::from_json(r#"{"turns":[{"content":[]},{"content":[],"cut_after_event":3}]}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("turns[1]"), "{err}");
        assert!(err.contains("cut_after_event"), "{err}");
    }

    #[test]
    fn unknown_block_field_is_rejected() {
        let err = Script::from_json(r#"[{"content":[{"type":"text","txt":"a"}]}]"#).unwrap_err();
        assert!(err.to_string().contains("txt"), "{err}");
    }

    #[test]
    fn zero_chunk_chars_is_invalid() {
        assert!(Script::from_json(r#"{"turns":[],"chunk_chars":0}"#).is_err());
        assert!(
            Script::new([Turn::text("a").with_chunk_chars(0)])
                .validate()
                .is_err()
        );
    }

    #[test]
    fn both_input_kinds_are_invalid() {
        let err = Script::from_json(
            r#"[{"content":[{"type":"tool_use","name":"X","input":{},"raw_input_json":"{"}]}]"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("raw_input_json"), "{err}");
    }

    #[test]
    fn builders_round_trip_through_json() {
        let script = Script::new([
            Turn::text("hi")
                .and_tool_use("Read", json!({"file_path": "/x"}))
                .with_tokens(10, 5)
                .with_stop_reason("max_tokens")
                .cut_after(4)
                .stall(2, Duration::from_millis(30))
                .error_event(3, "api_error", "boom")
                .delay_per_event(Duration::from_millis(1))
                .unknown_event_after(1)
                .with_header("request-id", "r"),
            Turn::http_error(429)
                .with_header("retry-after", "2")
                .with_body(json!("plain"))
                .delay(Duration::from_millis(3)),
            Turn::raw_sse("event: ping\n\n"),
        ])
        .repeat_last()
        .require_api_key("sk")
        .with_chunk_chars(7);
        let text = serde_json::to_string(&script).unwrap();
        assert_eq!(Script::from_json(&text).unwrap(), script);
    }

    #[test]
    fn response_builders_leave_http_errors_alone() {
        assert_eq!(
            Turn::http_error(500).cut_after(3).and_text("x"),
            Turn::http_error(500)
        );
    }

    #[test]
    fn bad_status_is_invalid() {
        assert!(Script::new([Turn::http_error(42)]).validate().is_err());
    }
}
