//! The seam through which Edit and Write hand a file's content to a checkpoint store
//! before they change it, so that the session can later put the file back (`/rewind`,
//! the SDK's `rewind_files`). The store itself lives with the session (gyre-core's
//! `checkpoint`); the tools only know this trait.

use std::fmt;
use std::path::Path;

/// Where a file's content goes before Edit or Write changes it. Called from blocking
/// threads, once per change, with the path as checked.
pub trait FileHistory: Send + Sync + fmt::Debug {
    /// `path` is about to change; `prior` is its content now as the tool read it (the
    /// editor's text when an editor holds the file), `None` when it does not exist yet.
    ///
    /// # Errors
    /// When the content cannot be kept: the tool then leaves the file as it is, since a
    /// change that could not be rewound was not what the user was promised.
    fn before_change(&self, path: &Path, prior: Option<&[u8]>) -> std::io::Result<()>;
}
