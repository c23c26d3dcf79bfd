//! The file-state cache: what was read, with which mtime and content hash.
//!
//! Edit and Write refuse to touch a file the model has not read, or that changed on disk
//! since it was read, so the model never overwrites edits it has not seen.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// What the cache remembers of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    /// The modification time seen at the read, if the file system reports one.
    pub mtime: Option<SystemTime>,
    /// `None` when only part of the file was read (a paged Read of a large file): then
    /// only an unchanged mtime and length make it fresh.
    pub content_hash: Option<u64>,
    /// The file's length in bytes at the read.
    pub len: u64,
}

impl FileState {
    /// The state of `bytes` last modified at `mtime`.
    #[must_use]
    pub fn of(bytes: &[u8], mtime: Option<SystemTime>) -> Self {
        Self {
            mtime,
            content_hash: Some(content_hash(bytes)),
            len: bytes.len() as u64,
        }
    }

    /// The state of a file of `len` bytes of which only a part was read.
    #[must_use]
    pub fn partial(len: u64, mtime: Option<SystemTime>) -> Self {
        Self {
            mtime,
            content_hash: None,
            len,
        }
    }
}

/// Whether a file may be written given what was read of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Never read in this session.
    NotRead,
    /// Changed on disk since it was read.
    Stale,
    /// As it was read (same mtime, or same content).
    Fresh,
}

#[derive(Debug, Default)]
struct Entries {
    by_path: HashMap<PathBuf, (FileState, u64)>,
    next_seq: u64,
}

/// Files read in a session, keyed by resolved path. Shared by all tool calls.
#[derive(Debug, Default)]
pub struct FileStateCache {
    entries: Mutex<Entries>,
}

impl FileStateCache {
    /// An empty cache: no file has been read.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `path` was read (or written) with this state.
    pub fn record(&self, path: &Path, state: FileState) {
        let mut entries = self.lock();
        let seq = entries.next_seq;
        entries.next_seq += 1;
        entries.by_path.insert(path.to_path_buf(), (state, seq));
    }

    /// What was recorded for `path`, if it was read.
    #[must_use]
    pub fn get(&self, path: &Path) -> Option<FileState> {
        self.lock().by_path.get(path).map(|(s, _)| *s)
    }

    /// Forgets `path` (it was deleted or must be read again).
    pub fn remove(&self, path: &Path) {
        self.lock().by_path.remove(path);
    }

    /// The `n` files read or written most recently, newest first (compaction re-reads them).
    #[must_use]
    pub fn recent(&self, n: usize) -> Vec<PathBuf> {
        let entries = self.lock();
        let mut all: Vec<(&PathBuf, u64)> = entries
            .by_path
            .iter()
            .map(|(p, (_, seq))| (p, *seq))
            .collect();
        // The n newest first, then only those sorted: this runs before every request,
        // and a long session has read hundreds of files.
        if all.len() > n {
            all.select_nth_unstable_by_key(n, |entry| std::cmp::Reverse(entry.1));
            all.truncate(n);
        }
        all.sort_unstable_by_key(|entry| std::cmp::Reverse(entry.1));
        all.into_iter().map(|(p, _)| p.clone()).collect()
    }

    /// Compares the file as it is now with what was read. The mtime decides when it is
    /// unchanged; when it moved, the content decides (a `touch` is not a change).
    #[must_use]
    pub fn freshness(&self, path: &Path, current: &[u8], mtime: Option<SystemTime>) -> Freshness {
        let Some(seen) = self.get(path) else {
            return Freshness::NotRead;
        };
        if seen.mtime.is_some() && seen.mtime == mtime && seen.len == current.len() as u64 {
            return Freshness::Fresh;
        }
        if seen.len == current.len() as u64 && seen.content_hash == Some(content_hash(current)) {
            Freshness::Fresh
        } else {
            Freshness::Stale
        }
    }
}

/// FNV-1a, 64 bit: stable across runs, fast enough for files the model reads.
#[must_use]
pub fn content_hash(bytes: &[u8]) -> u64 {
    let mut hasher = ContentHasher::default();
    hasher.update(bytes);
    hasher.finish()
}

/// [`content_hash`] over bytes that arrive in pieces (a file read as a stream).
#[derive(Debug, Clone, Copy)]
pub struct ContentHasher(u64);

impl Default for ContentHasher {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl ContentHasher {
    /// Feeds the next piece of the file.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// The hash of everything fed so far.
    #[must_use]
    pub fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unread_file_is_not_read() {
        let cache = FileStateCache::new();
        assert_eq!(
            cache.freshness(Path::new("/a"), b"x", None),
            Freshness::NotRead
        );
    }

    #[test]
    fn same_content_with_new_mtime_is_fresh() {
        let cache = FileStateCache::new();
        let t0 = SystemTime::UNIX_EPOCH;
        cache.record(Path::new("/a"), FileState::of(b"hello", Some(t0)));
        let t1 = t0 + std::time::Duration::from_secs(5);
        assert_eq!(
            cache.freshness(Path::new("/a"), b"hello", Some(t1)),
            Freshness::Fresh
        );
        assert_eq!(
            cache.freshness(Path::new("/a"), b"hellO", Some(t1)),
            Freshness::Stale
        );
    }

    #[test]
    fn recent_lists_newest_first() {
        let cache = FileStateCache::new();
        cache.record(Path::new("/a"), FileState::of(b"", None));
        cache.record(Path::new("/b"), FileState::of(b"", None));
        cache.record(Path::new("/a"), FileState::of(b"", None));
        assert_eq!(
            cache.recent(5),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        for i in 0..30 {
            cache.record(Path::new(&format!("/f{i}")), FileState::of(b"", None));
        }
        assert_eq!(cache.recent(0), Vec::<PathBuf>::new());
        assert_eq!(
            cache.recent(3),
            ["/f29", "/f28", "/f27"].map(PathBuf::from).to_vec()
        );
        assert_eq!(cache.recent(40).len(), 32);
    }
}
