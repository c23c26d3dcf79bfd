//! `--session-mirror`: the lines gyre appends to the session's transcript, sent to the
//! SDK as `transcript_mirror` frames (`{"type":"transcript_mirror","filePath":…,
//! "entries":[…]}`), so a program's `sessionStore` keeps a copy of the session. The
//! frames name the file where the reference CLI keeps the session
//! (`$CLAUDE_CONFIG_DIR` or `~/.claude`, then `projects/<project>/<id>.jsonl`), which is
//! where the SDK expects them and where it puts a stored session back for `--resume`
//! (gyre imports it from there). The new lines are read back from the transcript after
//! each turn and when the session ends.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::control::LineOut;

/// The transcript being mirrored and how much of it the SDK has.
#[derive(Debug)]
pub struct Mirror {
    /// gyre's transcript.
    transcript: PathBuf,
    /// The path the frames name.
    reported: PathBuf,
    /// The bytes of `transcript` already sent.
    sent: u64,
}

impl Mirror {
    /// Mirrors what is appended to `transcript` from now on, under the name `reported`.
    #[must_use]
    pub fn new(transcript: PathBuf, reported: PathBuf) -> Self {
        let sent = std::fs::metadata(&transcript).map_or(0, |m| m.len());
        Self {
            transcript,
            reported,
            sent,
        }
    }

    /// Sends the whole lines appended since the last call, as one frame (nothing when
    /// there are none).
    ///
    /// # Errors
    /// stdout cannot be written. A transcript that cannot be read sends nothing: its
    /// failure is reported where it is written.
    pub fn flush(&mut self, out: &LineOut) -> std::io::Result<()> {
        let Ok(mut file) = std::fs::File::open(&self.transcript) else {
            return Ok(());
        };
        let mut text = String::new();
        if file.seek(SeekFrom::Start(self.sent)).is_err() || file.read_to_string(&mut text).is_err()
        {
            return Ok(());
        }
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        let entries: Vec<Value> = text[..complete]
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        self.sent += complete as u64;
        if entries.is_empty() {
            return Ok(());
        }
        out.line(&json!({
            "type": "transcript_mirror",
            "filePath": self.reported,
            "entries": entries,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn only_whole_new_lines_are_sent_once_each() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"uuid\":\"old\"}\n").unwrap();
        let sink = Sink::default();
        let out = LineOut::new(Box::new(sink.clone()));
        let mut mirror = Mirror::new(path.clone(), PathBuf::from("/c/projects/p/s.jsonl"));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        write!(file, "{{\"uuid\":\"a\"}}\n{{\"uuid\":\"b\"").unwrap();
        mirror.flush(&out).unwrap();
        writeln!(file, "}}").unwrap();
        mirror.flush(&out).unwrap();
        mirror.flush(&out).unwrap();
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        let frames: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(frames.len(), 2, "{text}");
        assert_eq!(frames[0]["type"], "transcript_mirror");
        assert_eq!(frames[0]["filePath"], "/c/projects/p/s.jsonl");
        assert_eq!(frames[0]["entries"], json!([{"uuid": "a"}]));
        assert_eq!(frames[1]["entries"], json!([{"uuid": "b"}]));
    }
}
