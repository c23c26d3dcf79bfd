//! Files as an editor holds them: a front-end that drives gyre from an editor (the
//! Agent Client Protocol's `fs/read_text_file` and `fs/write_text_file`) gives the
//! [`ToolContext`](crate::ToolContext) an [`EditorFiles`], and then Read sees the
//! editor's unsaved buffers and Edit and Write hand their text to the editor, which
//! writes it (and keeps its undo history and open buffers right) instead of gyre
//! writing the disk behind its back.
//!
//! Every path has passed the tools' checks (working directories, protected paths, the
//! permission policy) before it reaches the editor. The methods are called from
//! blocking threads, never from the async ones, so an implementation may wait for the
//! editor's answer. Edit's and Write's checks before the permission question (not read
//! yet, changed since, no such string) need the editor's text, so with an editor they
//! are made when the call runs instead.

use std::fmt;
use std::path::Path;

/// See the module docs.
pub trait EditorFiles: Send + Sync + fmt::Debug {
    /// The editor's text of `path`, unsaved changes included; `None` when the editor
    /// has nothing to say about it (then the disk is read).
    fn read_text(&self, path: &Path) -> Option<String>;

    /// Has the editor write `text` to `path` (a new file or a whole new text): its
    /// outcome, an error saying why the editor refused or could not be reached; `None`
    /// when the editor takes no writes (then the disk is written).
    fn write_text(&self, path: &Path, text: &str) -> Option<std::io::Result<()>>;
}
