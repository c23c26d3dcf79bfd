//! Checkpoints: every user prompt is one. Before Edit or Write changes a file (through
//! gyre-tools' [`FileHistory`] seam, the editor's files included), the store keeps the
//! file's content — or that it did not exist — once per checkpoint, so that rewinding to
//! a prompt puts back exactly the files the session wrote since then. Files the session
//! did not write are never touched; what Bash did is not undone.
//!
//! The store agrees with the reference CLI's: each checkpoint is a
//! `file-history-snapshot` transcript line (written when the prompt starts, and again
//! each time it keeps another file), and each backup a file
//! `$GYRE_HOME/file-history/<session>/<16 hex of the path's SHA-256>@v<version>`,
//! written before the line that names it and before the tool writes, so a kill at any
//! point leaves checkpoints that still restore what was shown. `--resume` reads them
//! back ([`Checkpoints::resume`]).
//!
//! A checkpoint names, for each file first changed after its prompt (before any later
//! prompt), the file's content just before that change. Rewinding to checkpoint `k`
//! restores every file named by `k` or a later checkpoint to the content the earliest
//! of them kept; a file whose content is already that is left alone.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use gyre_loop::{
    FILE_HISTORY_SNAPSHOT, FileBackup, FileHistoryLine, FileHistorySnapshot, SharedTranscript,
    TranscriptStore, timestamp,
};
use gyre_tools::editor::EditorFiles;
use gyre_tools::file_history::FileHistory;

/// Why a rewind could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewindError {
    /// No checkpoint has that id.
    #[error(
        "no checkpoint {0:?} in this session: rewind to the uuid of one of its user messages (replayed with --replay-user-messages)"
    )]
    UnknownCheckpoint(String),
    /// The session keeps no checkpoints.
    #[error("{0}")]
    Disabled(String),
    /// Some files could not be put back; the others were.
    #[error("could not restore {}", .0.join("; "))]
    Restore(Vec<String>),
    /// The conversation cannot go back to that prompt (a compaction summarised it).
    #[error(
        "the conversation cannot go back to that prompt: it was compacted or cleared since; rewind the code only"
    )]
    ConversationGone,
}

/// What a rewind changes (or, for a dry run, would change).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesRewound {
    /// The files put back (or deleted, for a file that did not exist), sorted.
    pub files_changed: Vec<PathBuf>,
    /// Lines written since the checkpoint, which the rewind takes out.
    pub insertions: usize,
    /// Lines removed since the checkpoint, which the rewind puts back.
    pub deletions: usize,
}

#[derive(Debug, Default)]
struct State {
    /// In the order their prompts came.
    snapshots: Vec<FileHistorySnapshot>,
    /// The checkpoint files are kept in now: the last prompt's.
    current: Option<usize>,
    /// The last backup version of each file.
    versions: HashMap<String, u32>,
}

/// The session's checkpoints. See the module docs.
pub struct Checkpoints {
    /// `$GYRE_HOME/file-history/<session>`; made at the first backup.
    dir: PathBuf,
    transcript: Option<SharedTranscript>,
    editor: Option<Arc<dyn EditorFiles>>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Where a session's backups are kept.
#[must_use]
pub fn backup_dir(gyre_home: &Path, session_id: &str) -> PathBuf {
    gyre_home.join("file-history").join(session_id)
}

impl Checkpoints {
    /// A store keeping backups in `dir`, its lines in `transcript` (none: in memory
    /// only), restoring through `editor` when the editor holds the files.
    #[must_use]
    pub fn new(
        dir: PathBuf,
        transcript: Option<SharedTranscript>,
        editor: Option<Arc<dyn EditorFiles>>,
    ) -> Self {
        Self {
            dir,
            transcript,
            editor,
            state: Mutex::new(State::default()),
        }
    }

    /// Goes on from the checkpoints a transcript recorded (`--resume`).
    #[must_use]
    pub fn resume(self, snapshots: Vec<FileHistorySnapshot>) -> Self {
        {
            let mut state = self.lock();
            for snapshot in &snapshots {
                for (path, backup) in &snapshot.tracked_file_backups {
                    let version = state.versions.entry(path.clone()).or_default();
                    *version = (*version).max(backup.version);
                }
            }
            state.snapshots = snapshots;
        }
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The prompt `message_id` starts: files changed from now on are kept in its
    /// checkpoint.
    pub fn begin(&self, message_id: &str) {
        let mut state = self.lock();
        let snapshot = FileHistorySnapshot {
            message_id: message_id.to_owned(),
            timestamp: timestamp(SystemTime::now()),
            tracked_file_backups: BTreeMap::new(),
        };
        self.write_line(&snapshot, false);
        state.snapshots.push(snapshot);
        state.current = Some(state.snapshots.len() - 1);
    }

    /// Whether `message_id` is a checkpoint of this session.
    #[must_use]
    pub fn has(&self, message_id: &str) -> bool {
        self.lock()
            .snapshots
            .iter()
            .any(|s| s.message_id == message_id)
    }

    fn write_line(&self, snapshot: &FileHistorySnapshot, update: bool) {
        let Some(transcript) = &self.transcript else {
            return;
        };
        let line = FileHistoryLine {
            kind: FILE_HISTORY_SNAPSHOT.to_owned(),
            message_id: snapshot.message_id.clone(),
            snapshot: snapshot.clone(),
            is_snapshot_update: update,
        };
        // A failure is kept in the transcript's health and reported there.
        let _ = transcript.clone().append_file_history(&line);
    }

    /// The backup file's name for `path`'s `version`, as the reference names them.
    fn backup_name(path: &str, version: u32) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, path.as_bytes());
        let hex: String = digest
            .as_ref()
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{hex}@v{version}")
    }

    /// Puts the files back as checkpoint `message_id` found them: see the module docs.
    /// With `dry_run`, only says what would change.
    ///
    /// # Errors
    /// An unknown checkpoint, or files that could not be put back (the others are).
    pub fn rewind(&self, message_id: &str, dry_run: bool) -> Result<FilesRewound, RewindError> {
        let state = self.lock();
        let Some(at) = state
            .snapshots
            .iter()
            .position(|s| s.message_id == message_id)
        else {
            return Err(RewindError::UnknownCheckpoint(message_id.to_owned()));
        };
        let mut wanted: BTreeMap<&str, &FileBackup> = BTreeMap::new();
        for snapshot in &state.snapshots[at..] {
            for (path, backup) in &snapshot.tracked_file_backups {
                wanted.entry(path.as_str()).or_insert(backup);
            }
        }
        let mut outcome = FilesRewound::default();
        let mut failed = Vec::new();
        for (path, backup) in wanted {
            let path = Path::new(path);
            let kept = match &backup.backup_file_name {
                None => None,
                Some(name) => match std::fs::read(self.dir.join(name)) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        failed.push(format!(
                            "{}: its backup {name} is unreadable: {e}",
                            path.display()
                        ));
                        continue;
                    }
                },
            };
            let now = self.read_now(path);
            if now == kept {
                continue;
            }
            let (insertions, deletions) = line_changes(kept.as_deref(), now.as_deref());
            outcome.insertions += insertions;
            outcome.deletions += deletions;
            outcome.files_changed.push(path.to_path_buf());
            if dry_run {
                continue;
            }
            if let Err(e) = self.put_back(path, kept.as_deref()) {
                failed.push(format!("{}: {e}", path.display()));
            }
        }
        if failed.is_empty() {
            Ok(outcome)
        } else {
            Err(RewindError::Restore(failed))
        }
    }

    /// The file's content now: the editor's text when it holds the file, else the disk's.
    fn read_now(&self, path: &Path) -> Option<Vec<u8>> {
        if let Some(text) = self.editor.as_ref().and_then(|e| e.read_text(path)) {
            return Some(text.into_bytes());
        }
        std::fs::read(path).ok()
    }

    fn put_back(&self, path: &Path, content: Option<&[u8]>) -> std::io::Result<()> {
        match content {
            None => match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
            Some(bytes) => {
                if let Some(editor) = &self.editor
                    && let Ok(text) = std::str::from_utf8(bytes)
                    && let Some(written) = editor.write_text(path, text)
                {
                    return written;
                }
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                gyre_tools::write::write_atomic(path, bytes)
            }
        }
    }
}

/// Lines added and removed going from `before` to `after`.
fn line_changes(before: Option<&[u8]>, after: Option<&[u8]>) -> (usize, usize) {
    let before = String::from_utf8_lossy(before.unwrap_or_default());
    let after = String::from_utf8_lossy(after.unwrap_or_default());
    let diff = similar::TextDiff::from_lines(before.as_ref(), after.as_ref());
    let mut added = 0;
    let mut removed = 0;
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => added += 1,
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (added, removed)
}

impl FileHistory for Checkpoints {
    fn before_change(&self, path: &Path, prior: Option<&[u8]>) -> std::io::Result<()> {
        let mut state = self.lock();
        let Some(current) = state.current else {
            return Ok(());
        };
        let key = path.display().to_string();
        if state.snapshots[current]
            .tracked_file_backups
            .contains_key(&key)
        {
            return Ok(());
        }
        let version = state.versions.get(&key).copied().unwrap_or_default() + 1;
        let backup_file_name = match prior {
            None => None,
            Some(bytes) => {
                let name = Self::backup_name(&key, version);
                std::fs::create_dir_all(&self.dir)?;
                gyre_tools::write::write_atomic(&self.dir.join(&name), bytes)?;
                Some(name)
            }
        };
        state.versions.insert(key.clone(), version);
        let snapshot = &mut state.snapshots[current];
        snapshot.tracked_file_backups.insert(
            key,
            FileBackup {
                backup_file_name,
                version,
                backup_time: timestamp(SystemTime::now()),
            },
        );
        self.write_line(snapshot, true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An editor holding `a.txt` in a buffer: what it was asked to write.
    #[derive(Debug, Default)]
    struct Buffers(Mutex<HashMap<PathBuf, String>>);

    impl EditorFiles for Buffers {
        fn read_text(&self, path: &Path) -> Option<String> {
            self.0.lock().unwrap().get(path).cloned()
        }

        fn write_text(&self, path: &Path, text: &str) -> Option<std::io::Result<()>> {
            self.0
                .lock()
                .unwrap()
                .insert(path.to_path_buf(), text.to_owned());
            Some(Ok(()))
        }
    }

    #[test]
    fn with_an_editor_the_buffer_is_compared_and_written_back_not_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.txt");
        std::fs::write(&a, "on disk\n").unwrap();
        let editor = Arc::new(Buffers::default());
        editor.write_text(&a, "unsaved\n");
        let store = Checkpoints::new(
            dir.path().join("backups"),
            None,
            Some(Arc::clone(&editor) as Arc<dyn EditorFiles>),
        );
        store.begin("p1");
        // Edit hands over the editor's text, as it read it.
        store.before_change(&a, Some(b"unsaved\n")).unwrap();
        editor.write_text(&a, "edited\n");
        let done = store.rewind("p1", false).unwrap();
        assert_eq!(done.files_changed, std::slice::from_ref(&a));
        assert_eq!(editor.read_text(&a).as_deref(), Some("unsaved\n"));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "on disk\n");
    }

    #[test]
    fn a_rewind_restores_only_what_was_written_since_and_says_what() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let (a, b, untouched) = (work.join("a.txt"), work.join("b.txt"), work.join("c.txt"));
        std::fs::write(&a, "one\n").unwrap();
        std::fs::write(&untouched, "mine\n").unwrap();
        let store = Checkpoints::new(dir.path().join("backups"), None, None);
        store.begin("p1");
        store.before_change(&a, Some(b"one\n")).unwrap();
        std::fs::write(&a, "one\ntwo\n").unwrap();
        store.begin("p2");
        store.before_change(&a, Some(b"one\ntwo\n")).unwrap();
        std::fs::write(&a, "one\ntwo\nthree\n").unwrap();
        store.before_change(&b, None).unwrap();
        std::fs::write(&b, "new\n").unwrap();
        // Kept once per checkpoint: a second change in p2 keeps nothing more.
        store.before_change(&a, Some(b"ignored")).unwrap();
        std::fs::write(&untouched, "changed by bash\n").unwrap();

        let dry = store.rewind("p2", true).unwrap();
        assert_eq!(dry.files_changed, [a.clone(), b.clone()]);
        assert_eq!((dry.insertions, dry.deletions), (2, 0));
        assert!(b.exists(), "a dry run changes nothing");

        let done = store.rewind("p2", false).unwrap();
        assert_eq!(done, dry);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\ntwo\n");
        assert!(!b.exists(), "a file the session created is removed");
        store.rewind("p1", false).unwrap();
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\n");
        assert_eq!(
            std::fs::read_to_string(&untouched).unwrap(),
            "changed by bash\n"
        );
        assert_eq!(
            store.rewind("p1", false).unwrap(),
            FilesRewound::default(),
            "files already as kept are left alone"
        );
        assert!(matches!(
            store.rewind("nope", false),
            Err(RewindError::UnknownCheckpoint(_))
        ));
    }
}
