//! Directory walks shared by Grep and Glob: ripgrep's rules (`.gitignore`, `.ignore`,
//! hidden files searched, `.git` skipped), walked in parallel.

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ignore::{DirEntry, WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use crate::tool::PathFilter;

/// A walker over `root` with the rules above. `.gitignore` counts outside git
/// repositories too, as a user of these tools expects.
/// Entries `hidden` matches (paths read deny rules name) are skipped, with their
/// contents.
pub(crate) fn walk_builder(root: &Path, hidden: Option<&PathFilter>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    let hidden = hidden.cloned();
    builder
        .hidden(false)
        .require_git(false)
        .filter_entry(move |entry| {
            entry.file_name() != ".git" && !hidden.as_ref().is_some_and(|h| h.matches(entry.path()))
        })
        .threads(walk_threads());
    builder
}

fn walk_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().min(12))
}

/// The walk's root, held open. What the walk finds is opened relative to it with
/// `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`: one system call that refuses a
/// symlink anywhere on the way, so a directory swapped for a symlink while the walk runs
/// cannot lead outside the root. (The walk follows no symlinks, so none is on the way
/// of a path it found.) Where `openat2` is missing (Linux before 5.6, other systems) or
/// the root is a file, each path is opened and checked as
/// [`open_as_checked`](crate::paths::open_as_checked) does (`/proc/self/fd`).
pub(crate) struct Beneath {
    root: PathBuf,
    #[cfg(target_os = "linux")]
    fd: Option<std::os::fd::OwnedFd>,
}

impl Beneath {
    /// `root` (resolved, as checked) opened once, and checked to be `root`.
    pub(crate) fn new(root: &Path) -> Self {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            let fd = rustix::fs::open(root, flags, Mode::empty())
                .ok()
                .filter(|fd| crate::paths::verify_opened(fd, root).is_ok());
            Self {
                root: root.to_path_buf(),
                fd,
            }
        }
        #[cfg(not(target_os = "linux"))]
        Self {
            root: root.to_path_buf(),
        }
    }

    /// `path`, found by the walk, opened below the root with `flags`; `None`: use the
    /// fallback.
    #[cfg(target_os = "linux")]
    fn open_below(
        &self,
        path: &Path,
        flags: rustix::fs::OFlags,
    ) -> Option<std::io::Result<std::os::fd::OwnedFd>> {
        use rustix::fs::{Mode, OFlags, ResolveFlags};
        let fd = self.fd.as_ref()?;
        let rel = path.strip_prefix(&self.root).ok()?;
        if rel.as_os_str().is_empty() {
            return None;
        }
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS;
        match rustix::fs::openat2(
            fd,
            rel,
            flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        ) {
            Ok(fd) => Some(Ok(fd)),
            Err(rustix::io::Errno::NOSYS) => None,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => Some(Err(
                std::io::Error::other(crate::paths::changed_message(path, Path::new("a symlink"))),
            )),
            Err(e) => Some(Err(e.into())),
        }
    }

    /// A regular file the walk found, open for reading, with its metadata. Anything
    /// else (a FIFO swapped in meanwhile) is refused; the open does not block.
    pub(crate) fn open(&self, path: &Path) -> std::io::Result<(File, Metadata)> {
        #[cfg(target_os = "linux")]
        if let Some(opened) = self.open_below(
            path,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY,
        ) {
            let file = File::from(opened?);
            let metadata = file.metadata()?;
            crate::paths::refuse_special(path, &metadata)?;
            return Ok((file, metadata));
        }
        let file = crate::paths::open_as_checked(path)?;
        let metadata = file.metadata()?;
        Ok((file, metadata))
    }

    /// The metadata of a file or directory the walk found, from a descriptor opened
    /// below the root (needs no read permission: `O_PATH`).
    pub(crate) fn metadata(&self, path: &Path) -> std::io::Result<Metadata> {
        #[cfg(target_os = "linux")]
        if let Some(opened) = self.open_below(path, rustix::fs::OFlags::PATH) {
            return File::from(opened?).metadata();
        }
        crate::paths::metadata_as_checked(path)
    }

    /// Whether a directory the walk found is where it was found (not a symlink swapped
    /// in): one `openat2`, no `stat`.
    fn check_dir(&self, path: &Path) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(opened) = self.open_below(
            path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
        ) {
            return opened.map(drop);
        }
        crate::paths::metadata_as_checked(path).map(drop)
    }
}

/// Items produced by one walker thread, handed over when the thread is done.
struct ThreadItems<'a, T> {
    items: Vec<T>,
    sink: &'a Mutex<Vec<T>>,
}

impl<T> Drop for ThreadItems<'_, T> {
    fn drop(&mut self) {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&mut self.items);
    }
}

/// Walks in parallel and collects what `visit` returns for each file. Each walker
/// thread gets its own state from `make_state` (a searcher, a buffer). Stops early when
/// `cancel` fires. `visit` must open or stat the file through `beneath` (the walk's
/// root), not by path alone: the walk itself reads directories by path, and one may be
/// swapped for a symlink while it runs.
pub(crate) fn collect_files<S, T, M, V>(
    builder: &WalkBuilder,
    beneath: &Beneath,
    cancel: &CancellationToken,
    make_state: M,
    visit: V,
) -> Vec<T>
where
    S: Send,
    T: Send,
    M: Fn() -> S + Sync,
    V: Fn(&mut S, &DirEntry) -> Option<T> + Sync,
{
    let sink = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let mut state = make_state();
        let mut local = ThreadItems {
            items: Vec::new(),
            sink: &sink,
        };
        let visit = &visit;
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            // A directory swapped for a symlink after it was listed would lead the walk
            // outside its root: not entered. (Files are checked again when opened.)
            if entry.depth() > 0
                && entry.file_type().is_some_and(|t| t.is_dir())
                && beneath.check_dir(entry.path()).is_err()
            {
                return WalkState::Skip;
            }
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Some(item) = visit(&mut state, &entry)
            {
                local.items.push(item);
            }
            WalkState::Continue
        })
    });
    sink.into_inner().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beneath_opens_files_below_the_root_and_refuses_a_path_through_a_symlink() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root_path = root.path().canonicalize().unwrap();
        std::fs::create_dir(root_path.join("sub")).unwrap();
        std::fs::write(root_path.join("sub/in.txt"), "inside").unwrap();
        std::fs::write(outside.path().join("in.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(outside.path(), root_path.join("link")).unwrap();
        let beneath = Beneath::new(&root_path);
        let (mut file, metadata) = beneath.open(&root_path.join("sub/in.txt")).unwrap();
        assert!(metadata.is_file());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).unwrap();
        assert_eq!(text, "inside");
        assert!(beneath.open(&root_path.join("link/in.txt")).is_err());
        assert!(beneath.metadata(&root_path.join("link/in.txt")).is_err());
        assert!(beneath.check_dir(&root_path.join("link")).is_err());
        assert!(beneath.check_dir(&root_path.join("sub")).is_ok());
    }
}
