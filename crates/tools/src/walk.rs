//! Directory walks shared by Grep and Glob: ripgrep's rules (`.gitignore`, `.ignore`,
//! hidden files searched, `.git` skipped), walked in parallel.

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use ignore::{DirEntry, WalkBuilder, WalkState};
use tokio_util::sync::CancellationToken;

use crate::paths::PathFilter;

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
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::XDEV) => Some(Err(swapped(path))),
            Err(e) => Some(Err(e.into())),
        }
    }

    /// The directory holding `path`, opened below the root and kept in `dir` for the
    /// next file of the same directory (a walker thread visits a directory's files one
    /// after the other); `None`: use the fallback.
    #[cfg(target_os = "linux")]
    fn parent_fd<'d, 'p>(
        &'d self,
        dir: &'d mut DirCache,
        path: &'p Path,
    ) -> Option<std::io::Result<(std::os::fd::BorrowedFd<'d>, &'p std::ffi::OsStr)>> {
        use std::os::fd::AsFd as _;
        let root = self.fd.as_ref()?;
        let (parent, name) = (path.parent()?, path.file_name()?);
        if parent == self.root {
            return Some(Ok((root.as_fd(), name)));
        }
        if dir.path.as_deref() != Some(parent) {
            let flags = rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY;
            // Not where the walk found it (`Err`): every file in it is refused.
            dir.fd = self.open_below(parent, flags)?.ok();
            dir.path = Some(parent.to_path_buf());
        }
        Some(match &dir.fd {
            Some(fd) => Ok((fd.as_fd(), name)),
            None => Err(swapped(parent)),
        })
    }

    /// A regular file the walk found, open for reading, with its metadata: opened by
    /// name in its directory (see [`Beneath::parent_fd`]), never through a symlink.
    /// Anything else (a FIFO swapped in meanwhile) is refused; the open does not block.
    pub(crate) fn open(
        &self,
        dir: &mut DirCache,
        path: &Path,
    ) -> std::io::Result<(File, Metadata)> {
        #[cfg(target_os = "linux")]
        if let Some(parent) = self.parent_fd(dir, path) {
            use rustix::fs::{Mode, OFlags};
            let (fd, name) = parent?;
            let flags = OFlags::RDONLY
                | OFlags::NONBLOCK
                | OFlags::NOCTTY
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC;
            let file = File::from(rustix::fs::openat(fd, name, flags, Mode::empty()).map_err(
                |e| {
                    if e == rustix::io::Errno::LOOP {
                        swapped(path)
                    } else {
                        e.into()
                    }
                },
            )?);
            let metadata = file.metadata()?;
            crate::paths::refuse_special(path, &metadata)?;
            return Ok((file, metadata));
        }
        let _ = dir;
        let file = crate::paths::open_as_checked(path)?;
        let metadata = file.metadata()?;
        Ok((file, metadata))
    }

    /// The modification time of a file the walk found, stat'ed by name in its directory
    /// (see [`Beneath::parent_fd`]) without following a symlink: one call a file.
    pub(crate) fn modified(
        &self,
        dir: &mut DirCache,
        path: &Path,
    ) -> std::io::Result<Option<SystemTime>> {
        #[cfg(target_os = "linux")]
        if let Some(parent) = self.parent_fd(dir, path) {
            let (fd, name) = parent?;
            let stat = rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
            let (Ok(secs), Ok(nanos)) = (
                u64::try_from(stat.st_mtime),
                u32::try_from(stat.st_mtime_nsec),
            ) else {
                return Ok(None);
            };
            return Ok(SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos)));
        }
        let _ = dir;
        Ok(crate::paths::metadata_as_checked(path)?.modified().ok())
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

/// A walker thread's last directory (see [`Beneath::parent_fd`]).
#[derive(Default)]
pub(crate) struct DirCache {
    path: Option<PathBuf>,
    #[cfg(target_os = "linux")]
    fd: Option<std::os::fd::OwnedFd>,
}

fn swapped(path: &Path) -> std::io::Error {
    std::io::Error::other(crate::paths::changed(path, Path::new("a symlink")))
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
        let mut dir = DirCache::default();
        let (mut file, metadata) = beneath
            .open(&mut dir, &root_path.join("sub/in.txt"))
            .unwrap();
        assert!(metadata.is_file());
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).unwrap();
        assert_eq!(text, "inside");
        assert_eq!(
            beneath
                .modified(&mut dir, &root_path.join("sub/in.txt"))
                .unwrap(),
            metadata.modified().ok()
        );
        assert!(
            beneath
                .open(&mut dir, &root_path.join("link/in.txt"))
                .is_err()
        );
        assert!(
            beneath
                .modified(&mut dir, &root_path.join("link/in.txt"))
                .is_err()
        );
        // A file named like the symlink itself is not followed either.
        assert!(beneath.open(&mut dir, &root_path.join("link")).is_err());
        assert!(beneath.check_dir(&root_path.join("link")).is_err());
        assert!(beneath.check_dir(&root_path.join("sub")).is_ok());
    }
}
