//! Session transcripts: one JSON object per line, flushed per line, so a killed process
//! loses nothing it had shown.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use gyre_protocol::{ContentBlock, Message, Role, StopReason, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compaction::CompactionOutcome;

/// The `userType` of every line gyre writes: a person at the keyboard, as the reference
/// CLI writes it for its users.
pub const USER_TYPE: &str = "external";

/// The version gyre records on each line (`version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One line of a transcript, in the layout of the reference CLI's session files, so the
/// tools that read those (usage reports, HTML renderers) read gyre's too. Lines written
/// by older gyre versions (no `isSidechain`, `userType`, `version`; messages without the
/// API fields) and by the reference CLI read back through the same type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptEntry {
    /// The id of the line before, chaining the conversation (`null` on a
    /// `compact_boundary`, which starts a new chain; see `logical_parent_uuid`).
    pub parent_uuid: Option<String>,
    /// Whether the line belongs to a sub-agent's conversation.
    #[serde(default)]
    pub is_sidechain: bool,
    /// Who drove the session ([`USER_TYPE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    /// The working directory of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The session's id.
    #[serde(default)]
    pub session_id: String,
    /// The version of the program that wrote the line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The git branch checked out in the working directory, if it is a repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
    /// On a sub-agent's lines: the sub-agent (its transcript is `agent-<id>.jsonl`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// `user`, `assistant` or `system` (the reference CLI also writes others, such as
    /// `summary` or `file-history-snapshot`, which gyre reads past).
    #[serde(rename = "type")]
    pub kind: String,
    /// `compact_boundary` and the like, on `system` lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// The message of a `user` or `assistant` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<TranscriptMessage>,
    /// On an assistant line: the API request's id, when the API sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// This line's id.
    #[serde(default)]
    pub uuid: String,
    /// When the line was written (RFC 3339).
    #[serde(default)]
    pub timestamp: String,
    /// Whether gyre wrote the message to the model on the user's behalf.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_meta: bool,
    /// On a user line of tool results: what the tools returned, for readers of the
    /// transcript (the text of the result, or of each; a sub-agent's names its
    /// `agentId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_result: Option<Value>,
    /// On a `system` line: the text shown for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// On a `system` line: `info`, `warning` or `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// On a `compact_boundary`: the line the conversation went on from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logical_parent_uuid: Option<String>,
    /// On a `compact_boundary`: trigger and token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_metadata: Option<CompactMetadata>,
    /// On a gyre `compact_boundary`: the history that replaced everything before it
    /// (one line, so a kill never leaves half a replacement). The reference CLI writes
    /// no history; the lines after its boundary are the history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    /// On the reference CLI's summary of a compaction (the first message after it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_compact_summary: bool,
    /// On the reference CLI's error lines that no model wrote (`"API Error: …"`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_api_error_message: bool,
    /// On the first line gyre writes: the session's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// On a gyre `rewind` line: the prompt whose line and everything after it were
    /// taken back (the line's `history` is the conversation before that prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound_to: Option<String>,
}

/// The `subtype` of the `system` line a conversation rewind writes.
pub const REWIND_SUBTYPE: &str = "rewind";

/// The `subtype` of the line that records the conversation's system prompt (an Agent
/// SDK's `systemPromptSnapshot`): a resume sends it again instead of a new one.
pub const SYSTEM_PROMPT_SUBTYPE: &str = "system_prompt";

/// A `file-history-snapshot` line, as the reference CLI writes it: the files a
/// checkpoint (the user prompt `message_id`) kept before they were changed. A later
/// line for the same prompt (`is_snapshot_update`) replaces the earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileHistoryLine {
    /// `file-history-snapshot`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The prompt's uuid.
    pub message_id: String,
    /// The checkpoint.
    pub snapshot: FileHistorySnapshot,
    /// Whether an earlier line of the same prompt is replaced.
    #[serde(default)]
    pub is_snapshot_update: bool,
}

/// The `type` of a [`FileHistoryLine`].
pub const FILE_HISTORY_SNAPSHOT: &str = "file-history-snapshot";

/// The files a checkpoint keeps, by path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileHistorySnapshot {
    /// The prompt's uuid.
    pub message_id: String,
    /// When the checkpoint was made (RFC 3339).
    #[serde(default)]
    pub timestamp: String,
    /// Each file's backup, by its path.
    #[serde(default)]
    pub tracked_file_backups: std::collections::BTreeMap<String, FileBackup>,
}

/// One kept file: the name of its backup under the session's `file-history/` folder,
/// or `None` when the file did not exist.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileBackup {
    /// `<16 hex digits of the path's SHA-256>@v<version>`; `None`: the file was absent.
    pub backup_file_name: Option<String>,
    /// Counts the backups of this file in the session, from 1.
    pub version: u32,
    /// When it was kept (RFC 3339).
    #[serde(default)]
    pub backup_time: String,
}

/// The message of a transcript line: the conversation's message and, on an assistant
/// line, the API's fields of the response it came from (as the API sent its message
/// object).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptMessage {
    /// The response's id (`msg_…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `message`, as the API's message object says.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Role and content.
    #[serde(flatten)]
    pub message: Message,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Why the response ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that ended it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_sequence: Option<String>,
    /// The tokens the response used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl TranscriptMessage {
    /// A message without API fields (user lines; assistant lines of a response gyre
    /// has no usage of, such as one cut short by an interrupt).
    #[must_use]
    pub fn plain(message: Message) -> Self {
        Self {
            id: None,
            kind: None,
            message,
            model: None,
            stop_reason: None,
            stop_sequence: None,
            usage: None,
        }
    }

    /// An assistant message with the fields of the response it came from.
    #[must_use]
    pub fn response(message: Message, response: &ResponseInfo) -> Self {
        Self {
            id: Some(response.id.clone()),
            kind: Some("message".to_owned()),
            message,
            model: Some(response.model.clone()),
            stop_reason: response.stop_reason.clone(),
            stop_sequence: None,
            usage: Some(response.usage),
        }
    }
}

/// What the API said about one response: recorded on its assistant line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResponseInfo {
    /// The message id.
    pub id: String,
    /// The API's id of the request, when it sent one (`requestId` of the line).
    pub request_id: Option<String>,
    /// The model that answered.
    pub model: String,
    /// Why it ended.
    pub stop_reason: Option<StopReason>,
    /// Its usage.
    pub usage: Usage,
}

/// The `compactMetadata` of a `compact_boundary` line. Older gyre versions wrote the
/// counts in snake case; both spellings read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactMetadata {
    /// `auto`, `manual` or `reactive`.
    #[serde(default)]
    pub trigger: String,
    /// Tokens of the context before.
    #[serde(default, alias = "pre_tokens")]
    pub pre_tokens: u64,
    /// Tokens of what is sent after (gyre's own addition).
    #[serde(
        default,
        alias = "post_tokens",
        skip_serializing_if = "Option::is_none"
    )]
    pub post_tokens: Option<u64>,
}

impl From<&CompactionOutcome> for CompactMetadata {
    fn from(outcome: &CompactionOutcome) -> Self {
        Self {
            trigger: outcome.trigger.as_str().to_owned(),
            pre_tokens: outcome.pre_tokens,
            post_tokens: Some(outcome.post_tokens),
        }
    }
}

/// Where transcript lines go.
pub trait TranscriptStore: Send {
    /// Appends one line; it is on disk when this returns.
    fn append(&mut self, entry: &TranscriptEntry) -> io::Result<()>;

    /// Appends a checkpoint's `file-history-snapshot` line; stores that keep no
    /// checkpoints drop it.
    ///
    /// # Errors
    /// When the line cannot be written.
    fn append_file_history(&mut self, line: &FileHistoryLine) -> io::Result<()> {
        let _ = line;
        Ok(())
    }
}

/// One transcript written from several places (the conversation's recorder and the
/// checkpoint store), one whole line at a time.
#[derive(Clone)]
pub struct SharedTranscript(Arc<std::sync::Mutex<Box<dyn TranscriptStore>>>);

impl std::fmt::Debug for SharedTranscript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedTranscript")
    }
}

impl SharedTranscript {
    /// Shares `store`.
    #[must_use]
    pub fn new(store: Box<dyn TranscriptStore>) -> Self {
        Self(Arc::new(std::sync::Mutex::new(store)))
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Box<dyn TranscriptStore>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TranscriptStore for SharedTranscript {
    fn append(&mut self, entry: &TranscriptEntry) -> io::Result<()> {
        self.store().append(entry)
    }

    fn append_file_history(&mut self, line: &FileHistoryLine) -> io::Result<()> {
        self.store().append_file_history(line)
    }
}

/// A transcript kept in memory (tests, `--no-session-persistence`).
#[derive(Debug, Default, Clone)]
pub struct MemoryTranscript {
    /// The lines written, in order.
    pub entries: Vec<TranscriptEntry>,
}

impl TranscriptStore for MemoryTranscript {
    fn append(&mut self, entry: &TranscriptEntry) -> io::Result<()> {
        self.entries.push(entry.clone());
        Ok(())
    }
}

/// A transcript in a JSONL file under `$GYRE_HOME/projects/<cwd>/<session-id>.jsonl`.
///
/// A failed write is never silent: the first one is kept in the store's
/// [`TranscriptHealth`] (which whoever runs the session checks) and handed at once to the
/// callback set with [`JsonlTranscript::on_first_failure`]. A line half written when
/// the disk filled up is cut off again, so the next line that can be written starts on
/// a line of its own.
pub struct JsonlTranscript {
    path: PathBuf,
    file: File,
    /// Bytes of whole lines in the file: where a failed write is cut back to.
    len: u64,
    health: TranscriptHealth,
    on_first_failure: Option<FailureReport>,
}

/// Called once, with a sentence for the user, when a line first cannot be written.
type FailureReport = Box<dyn FnOnce(&str) + Send>;

impl std::fmt::Debug for JsonlTranscript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlTranscript")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

/// Whether a transcript lost a line, shared between the store and whoever reports it.
/// The first failure sticks: later successes do not hide that a line is missing.
#[derive(Debug, Clone, Default)]
pub struct TranscriptHealth(Arc<OnceLock<String>>);

impl TranscriptHealth {
    /// What went wrong first, as a sentence for the user; `None` while every line was
    /// written.
    #[must_use]
    pub fn failure(&self) -> Option<&str> {
        self.0.get().map(String::as_str)
    }

    /// Records a failure; returns whether it was the first.
    fn fail(&self, message: String) -> bool {
        self.0.set(message).is_ok()
    }
}

/// The directory name of a project: the cwd with every non-alphanumeric character as `-`.
#[must_use]
pub fn project_dir_name(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

impl JsonlTranscript {
    /// The transcript path of a session.
    #[must_use]
    pub fn path_for(gyre_home: &Path, cwd: &Path, session_id: &str) -> PathBuf {
        gyre_home
            .join("projects")
            .join(project_dir_name(cwd))
            .join(format!("{session_id}.jsonl"))
    }

    /// Opens (creating it and its directory) the transcript for appending. A last line
    /// without its newline (torn by a kill or a full disk) is ended first, so the next
    /// line is not glued onto it; loading skips the torn line.
    ///
    /// # Errors
    /// When the directory or the file cannot be created, or the torn tail not ended.
    pub fn open(path: PathBuf) -> io::Result<Self> {
        use std::os::unix::fs::FileExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)?;
        let mut len = file.metadata()?.len();
        if len > 0 {
            let mut last = [0u8];
            file.read_exact_at(&mut last, len - 1)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
                len += 1;
            }
        }
        Ok(Self {
            path,
            file,
            len,
            health: TranscriptHealth::default(),
            on_first_failure: None,
        })
    }

    /// Calls `report` with a message for the user at the first write that fails.
    #[must_use]
    pub fn on_first_failure(mut self, report: impl FnOnce(&str) + Send + 'static) -> Self {
        self.on_first_failure = Some(Box::new(report));
        self
    }

    /// The handle saying whether a write failed.
    #[must_use]
    pub fn health(&self) -> TranscriptHealth {
        self.health.clone()
    }

    /// The transcript file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn write_line(&mut self, entry: &impl Serialize) -> io::Result<()> {
        let mut line = serde_json::to_vec(entry)?;
        line.push(b'\n');
        // One write per line on an unbuffered file: a kill leaves whole lines behind.
        let written = self.file.write_all(&line).and_then(|()| self.file.flush());
        if let Err(e) = written {
            // Cut a partly written line off (best effort: the disk may still be full).
            let _ = self.file.set_len(self.len);
            return Err(e);
        }
        self.len += line.len() as u64;
        Ok(())
    }
}

impl TranscriptStore for JsonlTranscript {
    fn append(&mut self, entry: &TranscriptEntry) -> io::Result<()> {
        let result = self.write_line(entry);
        self.report(result)
    }

    fn append_file_history(&mut self, line: &FileHistoryLine) -> io::Result<()> {
        let result = self.write_line(line);
        self.report(result)
    }
}

impl JsonlTranscript {
    /// Keeps the first failure in the store's health and reports it.
    fn report(&mut self, result: io::Result<()>) -> io::Result<()> {
        if let Err(e) = &result {
            let message = format!(
                "could not write the transcript {}: {e}; this session cannot be resumed in full. Free disk space or fix the permissions of {}.",
                self.path.display(),
                self.path.parent().unwrap_or(&self.path).display()
            );
            if self.health.fail(message.clone())
                && let Some(report) = self.on_first_failure.take()
            {
                report(&message);
            }
        }
        result
    }
}

/// A session read back from its transcript.
#[derive(Debug, Clone, Default)]
pub struct LoadedSession {
    /// The conversation, pairing repaired.
    pub messages: Vec<Message>,
    /// The uuid of the last line, to chain new lines onto.
    pub last_uuid: Option<String>,
    /// The session's model as the transcript recorded it: the last line gyre wrote
    /// naming one, else the model of the last response.
    pub model: Option<String>,
    /// Lines that did not parse (a torn last line after a kill): skipped.
    pub skipped_lines: usize,
    /// Synthetic tool results added for calls that had none.
    pub repaired_tool_calls: usize,
    /// Lines of kinds that do not take part in the conversation (the reference CLI's
    /// titles, hook and progress lines, sub-agent lines kept in the session's own
    /// file, error lines no model wrote), by kind: read past.
    pub left_out: std::collections::BTreeMap<String, usize>,
    /// The checkpoints (`file-history-snapshot` lines), in the order they were made,
    /// each as its last line left it.
    pub file_history: Vec<FileHistorySnapshot>,
    /// One entry per message of `messages` that starts a turn ([`starts_turn`]), in
    /// order: the prompt it came from, or `None` where that is not known (messages a
    /// compaction wrote).
    pub marks: Vec<Option<PromptMark>>,
    /// The system prompt the conversation recorded (a [`SYSTEM_PROMPT_SUBTYPE`] line
    /// since the last compaction), if any.
    pub system_prompt: Option<String>,
}

/// A message of the conversation that starts a turn, and the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptMark {
    /// The uuid of its transcript line (a checkpoint's id).
    pub uuid: String,
    /// What the user typed; `None` for a message gyre wrote on the user's behalf.
    pub text: Option<String>,
}

/// Whether `message` starts a turn: a user message that answers no tool call (a
/// prompt, or a message gyre wrote on the user's behalf).
#[must_use]
pub fn starts_turn(message: &Message) -> bool {
    message.role == Role::User && message.tool_result_ids().next().is_none()
}

/// Placeholders for the turn-starting messages of `messages`, whose lines are not known.
#[must_use]
pub fn unknown_marks(messages: &[Message]) -> Vec<Option<PromptMark>> {
    messages
        .iter()
        .filter(|m| starts_turn(m))
        .map(|_| None)
        .collect()
}

/// Reads a transcript: the history after the last compact boundary, with every
/// unanswered tool call given an "Interrupted by user" result so the API accepts it.
///
/// Reads gyre's transcripts of every version and the reference CLI's (2.1.x): a
/// response it wrote as one line per content block becomes one message again, tool
/// results it wrote one to a line join one message, and a boundary without a history
/// starts the history afresh with the lines after it (its summary first).
///
/// # Errors
/// When the file cannot be read.
pub fn load_transcript(path: &Path) -> io::Result<LoadedSession> {
    load_until(path, None).map(|(session, _)| session)
}

/// [`load_transcript`] of the lines up to and including the one with `uuid` (the
/// conversation as it was at that message: `--resume-session-at`); `None` when no
/// line has that uuid.
///
/// # Errors
/// When the file cannot be read.
pub fn load_transcript_until(path: &Path, uuid: &str) -> io::Result<Option<LoadedSession>> {
    load_until(path, Some(uuid)).map(|(session, found)| found.then_some(session))
}

fn load_until(path: &Path, stop_at: Option<&str>) -> io::Result<(LoadedSession, bool)> {
    let reader = BufReader::new(File::open(path)?);
    let mut found = false;
    let mut session = LoadedSession::default();
    let mut header_model = None;
    let mut response_model = None;
    // The response the last assistant message came from, to join its other lines.
    let mut last_response: Option<String> = None;
    let mut marks = Vec::new();
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<TranscriptEntry>(&line) else {
            session.skipped_lines += 1;
            continue;
        };
        if !entry.uuid.is_empty() {
            session.last_uuid = Some(entry.uuid.clone());
        }
        let stop_here = stop_at.is_some_and(|at| at == entry.uuid);
        if entry.model.is_some() {
            header_model.clone_from(&entry.model);
        }
        let left_out = match entry.kind.as_str() {
            _ if entry.is_sidechain => Some("sub-agent"),
            _ if entry.is_api_error_message => Some("api-error"),
            "system" if entry.subtype.as_deref() == Some("compact_boundary") => {
                session.system_prompt = None;
                session.messages = entry.history.unwrap_or_default();
                marks = unknown_marks(&session.messages);
                last_response = None;
                None
            }
            "system" if entry.subtype.as_deref() == Some(SYSTEM_PROMPT_SUBTYPE) => {
                session.system_prompt.clone_from(&entry.content);
                None
            }
            "system" if entry.subtype.as_deref() == Some(REWIND_SUBTYPE) => {
                let history = entry.history.unwrap_or_default();
                let kept = entry.rewound_to.as_deref().and_then(|to| {
                    marks
                        .iter()
                        .position(|m| m.as_ref().is_some_and(|m| m.uuid == to))
                });
                marks.truncate(kept.unwrap_or(0));
                if marks.len() != history.iter().filter(|m| starts_turn(m)).count() {
                    marks = unknown_marks(&history);
                }
                session.messages = history;
                last_response = None;
                None
            }
            FILE_HISTORY_SNAPSHOT => {
                if let Ok(line) = serde_json::from_str::<FileHistoryLine>(&line) {
                    let id = &line.snapshot.message_id;
                    match session
                        .file_history
                        .iter_mut()
                        .find(|s| s.message_id == *id)
                    {
                        Some(earlier) => *earlier = line.snapshot,
                        None => session.file_history.push(line.snapshot),
                    }
                }
                None
            }
            "user" | "assistant" => {
                if let Some(message) = entry.message {
                    if let Some(model) = message.model.as_deref().filter(|m| !m.starts_with('<')) {
                        response_model = Some(model.to_owned());
                    }
                    if starts_turn(&message.message) {
                        let prompt = !entry.is_meta && !entry.is_compact_summary;
                        marks.push(Some(PromptMark {
                            uuid: entry.uuid.clone(),
                            text: prompt.then(|| message.message.text()),
                        }));
                    }
                    join(&mut session.messages, message, &mut last_response);
                }
                None
            }
            // Other system lines (hook summaries, notices) say nothing to the model.
            "system" => None,
            other => Some(other),
        };
        if let Some(kind) = left_out {
            *session.left_out.entry(kind.to_owned()).or_default() += 1;
        }
        if stop_here {
            found = true;
            break;
        }
    }
    session.model = header_model.or(response_model);
    session.repaired_tool_calls = repair_pairing(&mut session.messages);
    // A repair that dropped a turn's message leaves the marks unaligned: none is trusted.
    if marks.len() != session.messages.iter().filter(|m| starts_turn(m)).count() {
        marks = unknown_marks(&session.messages);
    }
    session.marks = marks;
    Ok((session, found))
}

/// Adds a transcript line's message to `messages`: the next block of the response
/// before it (same message id), more tool results for the calls before it, or a message
/// of its own.
fn join(messages: &mut Vec<Message>, line: TranscriptMessage, last_response: &mut Option<String>) {
    let only_results = |m: &Message| {
        !m.content.is_empty() && m.content.iter().all(|b| b.tool_result_id().is_some())
    };
    let previous = messages.last_mut();
    let same_response = line.id.is_some() && line.id == *last_response;
    match previous {
        Some(prev)
            if prev.role == Role::Assistant
                && line.message.role == Role::Assistant
                && same_response =>
        {
            prev.content.extend(line.message.content.iter().cloned());
        }
        Some(prev)
            if prev.role == Role::User
                && line.message.role == Role::User
                && only_results(prev)
                && line
                    .message
                    .content
                    .first()
                    .is_some_and(|b| b.tool_result_id().is_some()) =>
        {
            prev.content.extend(line.message.content.iter().cloned());
        }
        _ => messages.push(line.message),
    }
    *last_response = line.id;
}

/// Copies a transcript the reference CLI wrote (`from`, under its
/// `projects/<project>/`) to `to` in gyre's home, with its sub-agents' transcripts (the
/// `<session>/subagents/` folder beside it) and its checkpoints' backups (its home's
/// `file-history/<session>/`, to the same place in gyre's), so gyre goes on in its own
/// copy and the reference's files stay as they were. The transcript appears whole or
/// not at all.
///
/// # Errors
/// When a file cannot be read or written.
pub fn import_transcript(from: &Path, to: &Path) -> io::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let partial = to.with_extension("jsonl.importing");
    std::fs::copy(from, &partial)?;
    let subagents = from.with_extension("").join("subagents");
    if subagents.is_dir() {
        copy_files(&subagents, &to.with_extension("").join("subagents"))?;
    }
    // <home>/projects/<project>/<session>.jsonl → <home>/file-history/<session>/
    let backups = |transcript: &Path| {
        let home = transcript.parent()?.parent()?.parent()?;
        Some(home.join("file-history").join(transcript.file_stem()?))
    };
    if let (Some(from_dir), Some(to_dir)) = (backups(from), backups(to))
        && from_dir.is_dir()
    {
        copy_files(&from_dir, &to_dir)?;
    }
    std::fs::rename(&partial, to)
}

/// Copies the files of the folder `from` (not its subfolders) into `to`, made if need
/// be: a session's sub-agent transcripts or checkpoint backups.
///
/// # Errors
/// When a file cannot be read or written.
pub fn copy_files(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for file in std::fs::read_dir(from)? {
        let file = file?;
        if file.file_type()?.is_file() {
            std::fs::copy(file.path(), to.join(file.file_name()))?;
        }
    }
    Ok(())
}

/// What an import leaves behind, for the user: the kinds of lines read past, each with
/// what it was in the reference CLI. `None` when everything was carried over.
#[must_use]
pub fn left_out_note(left_out: &std::collections::BTreeMap<String, usize>) -> Option<String> {
    let parts: Vec<String> = left_out
        .iter()
        .map(|(kind, n)| {
            let what = match kind.as_str() {
                "sub-agent" => "sub-agent messages (kept in the transcript, not resent)",
                "api-error" => "API error notices (no model wrote them)",
                "attachment" | "progress" => "hook and progress records",
                "summary" | "custom-title" | "ai-title" | "last-prompt" => "session titles",
                "queue-operation" => "queued-prompt records",
                _ => "records gyre does not use",
            };
            format!("{n} `{kind}` line(s): {what}")
        })
        .collect();
    (!parts.is_empty()).then(|| format!("not carried over: {}", parts.join("; ")))
}

/// Gives every tool_use without a result a synthetic error result, and drops results
/// whose call is gone. Returns how many results were added.
pub fn repair_pairing(messages: &mut Vec<Message>) -> usize {
    let mut added = 0;
    let mut i = 0;
    while i < messages.len() {
        if messages[i].role != Role::Assistant {
            i += 1;
            continue;
        }
        let ids: Vec<String> = messages[i]
            .tool_uses()
            .map(|(id, _, _)| id.to_owned())
            .collect();
        if ids.is_empty() {
            i += 1;
            continue;
        }
        let next_is_results = messages
            .get(i + 1)
            .is_some_and(|m| m.role == Role::User && m.tool_result_ids().next().is_some());
        if !next_is_results {
            messages.insert(i + 1, Message::user(Vec::new()));
        }
        let answer = &mut messages[i + 1];
        answer.content.retain(|b| {
            b.tool_result_id()
                .is_none_or(|id| ids.iter().any(|x| x == id))
        });
        let answered: Vec<String> = answer.tool_result_ids().map(str::to_owned).collect();
        let mut missing: Vec<ContentBlock> = ids
            .iter()
            .filter(|id| !answered.contains(id))
            .map(|id| ContentBlock::tool_result(id.clone(), "Interrupted by user", true))
            .collect();
        added += missing.len();
        // Results go first in a user message, in call order.
        missing.append(&mut answer.content);
        answer.content = missing.into();
        i += 2;
    }
    // Results at the start of a user message that follows no tool call are orphans.
    for idx in 0..messages.len() {
        let prev_calls: Vec<String> = if idx == 0 {
            Vec::new()
        } else {
            messages[idx - 1]
                .tool_uses()
                .map(|(id, _, _)| id.to_owned())
                .collect()
        };
        if messages[idx].role == Role::User {
            messages[idx].content.retain(|b| {
                b.tool_result_id()
                    .is_none_or(|id| prev_calls.iter().any(|x| x == id))
            });
        }
    }
    messages.retain(|m| !m.content.is_empty());
    added
}

/// An RFC 3339 UTC timestamp with milliseconds, as transcripts use.
#[must_use]
pub fn timestamp(now: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(now).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The branch checked out in the git repository `cwd` is in (`None` outside one, or on
/// a detached head). A worktree's `.git` file names the directory its `HEAD` is in.
#[must_use]
pub fn git_branch(cwd: &Path) -> Option<String> {
    use std::io::Read as _;
    let read = |path: &Path| -> Option<String> {
        let mut text = String::new();
        // A HEAD or a `.git` file is one short line.
        File::open(path)
            .ok()?
            .take(4096)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    };
    let dot_git = cwd
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|p| p.exists())?;
    let head = if dot_git.is_dir() {
        read(&dot_git.join("HEAD"))?
    } else {
        let gitdir = read(&dot_git)?;
        let gitdir = Path::new(gitdir.trim().strip_prefix("gitdir:")?.trim());
        let gitdir = dot_git.parent()?.join(gitdir);
        read(&gitdir.join("HEAD"))?
    };
    head.trim()
        .strip_prefix("ref: refs/heads/")
        .map(str::to_owned)
}

/// The text of a line that is a prompt the user typed (not a tool result, a message gyre
/// or the reference CLI wrote on the user's behalf, a compaction summary or a
/// sub-agent's), for `gyre sessions`.
#[must_use]
pub fn summarize_entry_value(v: &Value) -> Option<String> {
    let msg = v.get("message")?;
    let flag = |name: &str| v.get(name).and_then(Value::as_bool) == Some(true);
    if msg.get("role")?.as_str()? != "user"
        || flag("isMeta")
        || flag("isSidechain")
        || flag("isCompactSummary")
    {
        return None;
    }
    let m: Message = serde_json::from_value(msg.clone()).ok()?;
    let text = m.text();
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_000_123);
        assert_eq!(timestamp(t), "2026-11-18T11:06:40.123Z");
        assert_eq!(timestamp(std::time::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn project_dir_replaces_non_alphanumerics() {
        assert_eq!(
            project_dir_name(Path::new("/home/me/my_proj.x")),
            "-home-me-my-proj-x"
        );
    }

    #[test]
    fn unanswered_tool_calls_get_synthetic_results_and_orphans_go() {
        let mut messages = vec![
            Message::user_text("go"),
            Message::assistant(vec![
                ContentBlock::tool_use("a", "Read", json!({})),
                ContentBlock::tool_use("b", "Read", json!({})),
            ]),
            Message::user(vec![ContentBlock::tool_result("a", "ok", false)]),
            Message::assistant(vec![ContentBlock::tool_use("c", "Bash", json!({}))]),
        ];
        let added = repair_pairing(&mut messages);
        assert_eq!(added, 2);
        assert_eq!(
            messages[2].tool_result_ids().collect::<Vec<_>>(),
            ["b", "a"]
        );
        assert_eq!(messages[4].tool_result_ids().collect::<Vec<_>>(), ["c"]);

        let mut orphan = vec![
            Message::user_text("go"),
            Message::assistant(vec![ContentBlock::text("hi")]),
            Message::user(vec![ContentBlock::tool_result("zz", "lost", false)]),
        ];
        repair_pairing(&mut orphan);
        assert_eq!(orphan.len(), 2);
    }

    fn entry(uuid: &str, m: &Message) -> TranscriptEntry {
        let kind = if m.role == Role::User {
            "user"
        } else {
            "assistant"
        };
        serde_json::from_value(json!({
            "type": kind,
            "uuid": uuid,
            "parentUuid": null,
            "sessionId": "s",
            "timestamp": timestamp(SystemTime::now()),
            "message": m,
        }))
        .unwrap()
    }

    /// Appends half a line, as a kill in the middle of a write leaves it.
    fn tear(path: &Path) {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(b"{\"type\":\"user\",\"uu")
            .unwrap();
    }

    #[test]
    fn reopening_after_a_torn_line_keeps_the_next_line_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut t = JsonlTranscript::open(path.clone()).unwrap();
        t.append(&entry("1", &Message::user_text("one"))).unwrap();
        drop(t);
        tear(&path);
        let mut t = JsonlTranscript::open(path.clone()).unwrap();
        t.append(&entry("2", &Message::user_text("two"))).unwrap();
        let loaded = load_transcript(&path).unwrap();
        assert_eq!(loaded.skipped_lines, 1);
        assert_eq!(loaded.last_uuid.as_deref(), Some("2"));
        assert_eq!(loaded.messages.len(), 2);
    }

    #[test]
    fn a_failed_write_is_reported_once_and_sticks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = Arc::clone(&reports);
        let mut t = JsonlTranscript::open(path.clone())
            .unwrap()
            .on_first_failure(move |m| sink.lock().unwrap().push(m.to_owned()));
        let health = t.health();
        t.append(&entry("1", &Message::user_text("one"))).unwrap();
        assert_eq!(health.failure(), None);
        // A file that refuses writes: the same path reopened read-only.
        t.file = File::open(&path).unwrap();
        assert!(t.append(&entry("2", &Message::user_text("two"))).is_err());
        assert!(t.append(&entry("3", &Message::user_text("three"))).is_err());
        let failure = health.failure().unwrap();
        assert!(
            failure.contains("could not write the transcript"),
            "{failure}"
        );
        assert_eq!(reports.lock().unwrap().len(), 1);
        assert_eq!(load_transcript(&path).unwrap().messages.len(), 1);
    }

    #[test]
    fn the_git_branch_is_read_from_head_or_a_worktrees_gitdir() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
        assert_eq!(git_branch(&repo.join("src")).as_deref(), Some("feature/x"));

        let worktree = dir.path().join("wt");
        let gitdir = repo.join(".git/worktrees/wt");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::create_dir_all(&gitdir).unwrap();
        std::fs::write(gitdir.join("HEAD"), "ref: refs/heads/other\n").unwrap();
        std::fs::write(
            worktree.join(".git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        assert_eq!(git_branch(&worktree).as_deref(), Some("other"));

        std::fs::write(repo.join(".git/HEAD"), "0123abcd\n").unwrap();
        assert_eq!(git_branch(&repo), None, "a detached head names no branch");
    }

    #[test]
    fn reference_lines_join_into_the_messages_the_api_saw() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let line = |kind: &str, uuid: &str, extra: Value| {
            let mut v = json!({"type": kind, "uuid": uuid, "sessionId": "s",
                               "parentUuid": null, "isSidechain": false});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v.to_string()
        };
        let response = |id: &str, block: Value| {
            json!({"message": {"id": id, "type": "message", "role": "assistant",
                               "model": "claude-x", "content": [block]}})
        };
        let result = |id: &str| {
            json!({"message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "ok"}]}})
        };
        let lines = [
            line(
                "user",
                "1",
                json!({"message": {"role": "user", "content": "old"}}),
            ),
            line("system", "2", json!({"subtype": "compact_boundary"})),
            line(
                "user",
                "3",
                json!({"isCompactSummary": true,
                       "message": {"role": "user", "content": "summary"}}),
            ),
            json!({"type": "file-history-snapshot", "messageId": "3"}).to_string(),
            line(
                "assistant",
                "4",
                response("m1", json!({"type": "text", "text": "two"})),
            ),
            line(
                "assistant",
                "5",
                response(
                    "m1",
                    json!({"type": "tool_use", "id": "a", "name": "Read", "input": {}}),
                ),
            ),
            line(
                "assistant",
                "6",
                response(
                    "m1",
                    json!({"type": "tool_use", "id": "b", "name": "Read", "input": {}}),
                ),
            ),
            line("user", "7", result("a")),
            line("user", "8", result("b")),
            line(
                "assistant",
                "9",
                json!({"isSidechain": true, "message": {"role": "assistant", "content": "side"}}),
            ),
            line(
                "assistant",
                "10",
                json!({"isApiErrorMessage": true, "message": {"role": "assistant",
                       "model": "<synthetic>", "content": "API Error"}}),
            ),
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let loaded = load_transcript(&path).unwrap();
        let shape: Vec<(Role, usize)> = loaded
            .messages
            .iter()
            .map(|m| (m.role, m.content.len()))
            .collect();
        assert_eq!(
            shape,
            [(Role::User, 1), (Role::Assistant, 3), (Role::User, 2)]
        );
        assert_eq!(loaded.messages[0].text(), "summary");
        assert_eq!(loaded.repaired_tool_calls, 0);
        assert_eq!(loaded.model.as_deref(), Some("claude-x"));
        assert_eq!(loaded.last_uuid.as_deref(), Some("10"));
        let left_out: Vec<(&str, usize)> = loaded
            .left_out
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(left_out, [("api-error", 1), ("sub-agent", 1)]);
    }

    #[test]
    fn transcript_lines_round_trip_through_a_file_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut t = JsonlTranscript::open(path.clone()).unwrap();
        t.append(&entry("1", &Message::user_text("hello"))).unwrap();
        t.append(&entry(
            "2",
            &Message::assistant(vec![ContentBlock::text("hi")]),
        ))
        .unwrap();
        drop(t);
        tear(&path);
        let loaded = load_transcript(&path).unwrap();
        assert_eq!(loaded.messages.len(), 2);
        assert_eq!(loaded.skipped_lines, 1);
        assert_eq!(loaded.last_uuid.as_deref(), Some("2"));
    }
}
