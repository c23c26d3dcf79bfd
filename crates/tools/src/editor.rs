//! Files as an editor holds them: a front-end that drives gyre from an editor (the
//! Agent Client Protocol's `fs/read_text_file` and `fs/write_text_file`) gives the
//! [`ToolContext`](crate::ToolContext) an [`EditorFiles`], and then Read sees the
//! editor's unsaved buffers and Edit and Write hand their text to the editor, which
//! writes it (and keeps its undo history and open buffers right) instead of gyre
//! writing the disk behind its back.
//!
//! An editor with terminals ([`EditorTerminals`]) runs Bash's commands where the user
//! watches them, when nothing must confine them: a command the sandbox confines (plan
//! mode, `sandbox.enabled`, read deny rules the kernel enforces) runs in gyre, under the
//! kernel's rules, as do background shells.
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

/// A Bash command the editor runs in a terminal it shows the user (ACP's
/// `terminal/*`): only a command no sandbox has to confine is offered.
#[derive(Debug)]
pub struct TerminalCommand<'a> {
    /// The command line, run with `bash -c`.
    pub command: &'a str,
    /// Where it runs: the session's working directory.
    pub cwd: &'a Path,
    /// Variables on top of the editor's environment (the session's settings `env`).
    pub env: &'a [(String, String)],
    /// When it is killed.
    pub timeout: std::time::Duration,
    /// The turn's abort: the command is killed.
    pub cancel: &'a tokio_util::sync::CancellationToken,
    /// The call it runs for, so the editor can show the terminal in it.
    pub tool_use_id: Option<&'a str>,
    /// Output kept at the most, in bytes (the editor drops the start of longer output).
    pub output_byte_limit: usize,
}

/// How a terminal command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TerminalEnding {
    /// It exited with this code (128 + the signal when a signal ended it).
    Exited(i32),
    /// It ran past its timeout and was killed.
    TimedOut,
    /// The turn was interrupted and it was killed.
    Cancelled,
}

/// What a terminal command printed, and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRun {
    /// stdout and stderr as the terminal shows them.
    pub output: String,
    /// Whether the editor dropped the start of the output (over the byte limit).
    pub truncated: bool,
    /// How it ended.
    pub ending: TerminalEnding,
}

/// Terminals of the editor, for Bash; see [`TerminalCommand`].
pub trait EditorTerminals: Send + Sync + fmt::Debug {
    /// Runs `command` in a terminal of the editor; its output and ending, or why it
    /// could not run there.
    fn run<'a>(
        &'a self,
        command: TerminalCommand<'a>,
    ) -> futures::future::BoxFuture<'a, std::io::Result<TerminalRun>>;
}
