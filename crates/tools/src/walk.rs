//! Directory walks shared by Grep and Glob: ripgrep's rules (`.gitignore`, `.ignore`,
//! hidden files searched, `.git` skipped), walked in parallel.

use std::path::Path;
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
/// `cancel` fires. `visit` must open or stat the file through `paths` (checked to be
/// where the walk found it), not by path alone: the walk itself reads directories by
/// path, and one may be swapped for a symlink while it runs.
pub(crate) fn collect_files<S, T, M, V>(
    builder: &WalkBuilder,
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
                && crate::paths::metadata_as_checked(entry.path()).is_err()
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
