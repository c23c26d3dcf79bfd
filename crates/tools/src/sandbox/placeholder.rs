//! Placeholders for protected paths that do not exist when a sandboxed command starts
//! (`.mcp.json`, `.gyre/`, `.claude/`, `.git/hooks`, a missing `.git`): a bind mount
//! needs something to cover, and Landlock cannot refuse one name in a writable
//! directory. So gyre makes a harmless placeholder at the name (an empty directory, an
//! MCP list with no servers, a `commondir` pointing at its own directory), the command's
//! namespace mounts it read-only, and the command can neither write it, remove it nor
//! rename anything over it. When the last command holding it is done, the placeholder
//! is removed if it is still the one gyre made.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// What stands at a placeholder's path and how many commands hold it.
struct Held {
    count: usize,
    dev: u64,
    ino: u64,
}

fn held() -> &'static Mutex<HashMap<PathBuf, Held>> {
    static HELD: std::sync::OnceLock<Mutex<HashMap<PathBuf, Held>>> = std::sync::OnceLock::new();
    HELD.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The placeholder for a protected name: `None` for a directory, else a file's content.
fn content(path: &Path) -> Option<&'static [u8]> {
    match path.file_name().and_then(|n| n.to_str()) {
        // git reads the common directory from it: this one is the `.git` itself.
        Some("commondir") => Some(b".\n"),
        Some("config" | "config.worktree") => Some(b""),
        _ => None,
    }
}

/// The placeholders one command holds; released when dropped.
#[derive(Debug, Default)]
pub struct Lease {
    paths: Vec<PathBuf>,
}

impl Lease {
    /// Makes (or shares) the placeholder at `path`, which did not exist a moment ago.
    /// `true` when a placeholder now stands there for this command; `false` when
    /// something else appeared at the name meanwhile (the caller protects what is
    /// there) or it cannot be made (then the command cannot create it either, or
    /// the caller falls back to removing what the command created).
    pub fn hold(&mut self, path: &Path) -> bool {
        let mut held = held().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = held.get_mut(path)
            && std::fs::symlink_metadata(path).is_ok_and(|m| m.dev() == h.dev && m.ino() == h.ino)
        {
            h.count += 1;
            self.paths.push(path.to_path_buf());
            return true;
        }
        let made = match content(path) {
            None => std::fs::create_dir(path),
            Some(bytes) => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .and_then(|mut f| f.write_all(bytes)),
        };
        let Ok(meta) = made.and_then(|()| std::fs::symlink_metadata(path)) else {
            return false;
        };
        held.insert(
            path.to_path_buf(),
            Held {
                count: 1,
                dev: meta.dev(),
                ino: meta.ino(),
            },
        );
        self.paths.push(path.to_path_buf());
        true
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut held = held().lock().unwrap_or_else(PoisonError::into_inner);
        for path in self.paths.drain(..) {
            let Some(h) = held.get_mut(&path) else {
                continue;
            };
            h.count -= 1;
            if h.count > 0 {
                continue;
            }
            let (dev, ino) = (h.dev, h.ino);
            held.remove(&path);
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.dev() != dev || meta.ino() != ino {
                continue;
            }
            // Only what gyre made: an empty directory, a file with its own content.
            let _ = match content(&path) {
                None => std::fs::remove_dir(&path),
                Some(bytes) => {
                    if std::fs::read(&path).is_ok_and(|now| now == bytes) {
                        std::fs::remove_file(&path)
                    } else {
                        Ok(())
                    }
                }
            };
        }
    }
}
