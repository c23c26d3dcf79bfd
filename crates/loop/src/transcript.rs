//! Session transcripts: one JSON object per line, flushed per line, so a killed process
//! loses nothing it had shown.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use gyre_protocol::{ContentBlock, Message, Role};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::compaction::CompactionOutcome;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TranscriptEntry {
    /// `user`, `assistant` or `system`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `compact_boundary` and the like, on `system` lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
    /// This line's id.
    pub uuid: String,
    /// The id of the line before, chaining the conversation.
    pub parent_uuid: Option<String>,
    /// The session's id.
    pub session_id: String,
    /// When the line was written (RFC 3339).
    pub timestamp: String,
    /// The working directory of the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Whether gyre wrote the message to the model on the user's behalf.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_meta: bool,
    /// The message of a `user` or `assistant` line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// On a `compact_boundary`: trigger and token counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compact_metadata: Option<CompactionOutcome>,
    /// On a `compact_boundary`: the history that replaced everything before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    /// On the first line: the model and other session facts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// Where transcript lines go.
pub trait TranscriptStore: Send {
    /// Appends one line; it is on disk when this returns.
    fn append(&mut self, entry: &TranscriptEntry) -> io::Result<()>;
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

    fn write_line(&mut self, entry: &TranscriptEntry) -> io::Result<()> {
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
    /// The session's model as the transcript recorded it (the last line naming one).
    pub model: Option<String>,
    /// Lines that did not parse (a torn last line after a kill): skipped.
    pub skipped_lines: usize,
    /// Synthetic tool results added for calls that had none.
    pub repaired_tool_calls: usize,
}

/// Reads a transcript: the history after the last compact boundary, with every
/// unanswered tool call given an "Interrupted by user" result so the API accepts it.
///
/// # Errors
/// When the file cannot be read.
pub fn load_transcript(path: &Path) -> io::Result<LoadedSession> {
    let reader = BufReader::new(File::open(path)?);
    let mut session = LoadedSession::default();
    for line in reader.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(entry) = serde_json::from_str::<TranscriptEntry>(&line) else {
            session.skipped_lines += 1;
            continue;
        };
        session.last_uuid = Some(entry.uuid.clone());
        if entry.model.is_some() {
            session.model.clone_from(&entry.model);
        }
        if entry.subtype.as_deref() == Some("compact_boundary") {
            if let Some(history) = entry.history {
                session.messages = history;
            }
            continue;
        }
        if let Some(message) = entry.message {
            session.messages.push(message);
        }
    }
    session.repaired_tool_calls = repair_pairing(&mut session.messages);
    Ok(session)
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

/// Days since 1970-01-01 to (year, month, day), after Howard Hinnant's algorithm.
/// The first user prompt of a transcript and its number of lines, for `gyre sessions`.
#[must_use]
pub fn summarize_entry_value(v: &Value) -> Option<String> {
    let msg = v.get("message")?;
    if msg.get("role")?.as_str()? != "user"
        || v.get("isMeta").and_then(Value::as_bool) == Some(true)
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

    fn entry(uuid: &str, m: Message) -> TranscriptEntry {
        TranscriptEntry {
            kind: if m.role == Role::User {
                "user"
            } else {
                "assistant"
            }
            .into(),
            subtype: None,
            uuid: uuid.into(),
            parent_uuid: None,
            session_id: "s".into(),
            timestamp: timestamp(SystemTime::now()),
            cwd: None,
            is_meta: false,
            message: Some(m),
            compact_metadata: None,
            history: None,
            model: None,
        }
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
        t.append(&entry("1", Message::user_text("one"))).unwrap();
        drop(t);
        tear(&path);
        let mut t = JsonlTranscript::open(path.clone()).unwrap();
        t.append(&entry("2", Message::user_text("two"))).unwrap();
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
        t.append(&entry("1", Message::user_text("one"))).unwrap();
        assert_eq!(health.failure(), None);
        // A file that refuses writes: the same path reopened read-only.
        t.file = File::open(&path).unwrap();
        assert!(t.append(&entry("2", Message::user_text("two"))).is_err());
        assert!(t.append(&entry("3", Message::user_text("three"))).is_err());
        let failure = health.failure().unwrap();
        assert!(
            failure.contains("could not write the transcript"),
            "{failure}"
        );
        assert_eq!(reports.lock().unwrap().len(), 1);
        assert_eq!(load_transcript(&path).unwrap().messages.len(), 1);
    }

    #[test]
    fn transcript_lines_round_trip_through_a_file_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut t = JsonlTranscript::open(path.clone()).unwrap();
        t.append(&entry("1", Message::user_text("hello"))).unwrap();
        t.append(&entry(
            "2",
            Message::assistant(vec![ContentBlock::text("hi")]),
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
