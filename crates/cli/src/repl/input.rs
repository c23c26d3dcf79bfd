//! The terminal's input side: one thread owns stdin through a rustyline editor (line
//! editing, history in `$GYRE_HOME/history`) and answers read requests from the async
//! REPL and the permission prompt, so both can wait without blocking the runtime.

use std::path::PathBuf;
use std::sync::mpsc;

use anyhow::{Context, Result};
use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};
use tokio::sync::oneshot;

/// What one read gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    Line(String),
    /// Ctrl+C at the prompt.
    Interrupted,
    /// Ctrl+D at an empty prompt, or stdin closed.
    Eof,
}

enum Request {
    Read {
        prompt: String,
        /// Lines typed at the main prompt go into the history; answers to questions don't.
        history: bool,
        reply: oneshot::Sender<Result<ReadResult, String>>,
    },
    AddHistory(String),
}

/// A handle to the input thread; the thread ends when every handle is dropped.
#[derive(Debug, Clone)]
pub struct LineReader {
    requests: mpsc::Sender<Request>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read { prompt, .. } => f.debug_struct("Read").field("prompt", prompt).finish(),
            Self::AddHistory(_) => f.write_str("AddHistory"),
        }
    }
}

impl LineReader {
    /// Starts the input thread, loading the history from `history` if it exists.
    ///
    /// # Errors
    /// When the line editor cannot be set up.
    pub fn spawn(history: Option<PathBuf>) -> Result<Self> {
        let config = Config::builder()
            .max_history_size(1000)
            .context("history size")?
            .auto_add_history(false)
            .history_ignore_dups(true)
            .context("history dedup")?
            .history_ignore_space(true)
            .build();
        let mut editor =
            DefaultEditor::with_config(config).context("could not set up line editing")?;
        if let Some(path) = &history {
            // A missing or unreadable history is not worth stopping for.
            let _ = editor.load_history(path);
        }
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("gyre-input".to_owned())
            .spawn(move || serve(&mut editor, history.as_ref(), &rx))
            .context("could not start the input thread")?;
        Ok(Self { requests: tx })
    }

    /// Reads one line with `prompt`.
    ///
    /// # Errors
    /// When the terminal cannot be read.
    pub async fn read(&self, prompt: &str, history: bool) -> Result<ReadResult> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request::Read {
                prompt: prompt.to_owned(),
                history,
                reply,
            })
            .map_err(|_| anyhow::anyhow!("the input thread has stopped"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the input thread has stopped"))?
            .map_err(|e| anyhow::anyhow!("could not read the terminal: {e}"))
    }

    /// Adds a line that was not typed (the first prompt, given as an argument).
    pub fn add_history(&self, line: &str) {
        let _ = self.requests.send(Request::AddHistory(line.to_owned()));
    }
}

fn serve(
    editor: &mut DefaultEditor,
    history: Option<&PathBuf>,
    requests: &mpsc::Receiver<Request>,
) {
    let remember = |editor: &mut DefaultEditor, line: &str| {
        if line.trim().is_empty() {
            return;
        }
        if editor.add_history_entry(line).unwrap_or(false)
            && let Some(path) = history
        {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = editor.append_history(path);
        }
    };
    while let Ok(request) = requests.recv() {
        match request {
            Request::AddHistory(line) => remember(editor, &line),
            Request::Read {
                prompt,
                history,
                reply,
            } => {
                // Only the main prompt takes several lines; answers are one line.
                let read = if history {
                    read_entry(editor, &prompt)
                } else {
                    editor.readline(&prompt)
                };
                let result = match read {
                    Ok(line) => {
                        if history {
                            remember(editor, &line);
                        }
                        Ok(ReadResult::Line(line))
                    }
                    Err(ReadlineError::Interrupted) => Ok(ReadResult::Interrupted),
                    Err(ReadlineError::Eof) => Ok(ReadResult::Eof),
                    Err(e) => Err(e.to_string()),
                };
                let _ = reply.send(result);
            }
        }
    }
}

/// The prompt of a continued line.
const CONTINUATION_PROMPT: &str = "… ";

/// One entry at the main prompt: a line ending in `\` goes on at the next one, the
/// backslash becoming a newline (as in a shell, and in Claude Code).
fn read_entry(editor: &mut DefaultEditor, prompt: &str) -> Result<String, ReadlineError> {
    let mut entry = String::new();
    let mut line = editor.readline(prompt)?;
    while continue_entry(&mut entry, &line) {
        line = editor.readline(CONTINUATION_PROMPT)?;
    }
    Ok(entry)
}

/// Adds `line` to `entry`; `true` when the entry goes on at the next line.
fn continue_entry(entry: &mut String, line: &str) -> bool {
    match line.strip_suffix('\\') {
        Some(head) => {
            entry.push_str(head);
            entry.push('\n');
            true
        }
        None => {
            entry.push_str(line);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_backslash_continues_the_entry_on_the_next_line() {
        let mut entry = String::new();
        assert!(continue_entry(&mut entry, "fix the parser \\"));
        assert!(continue_entry(&mut entry, "and its tests\\"));
        assert!(!continue_entry(&mut entry, "then run them"));
        assert_eq!(entry, "fix the parser \nand its tests\nthen run them");
        let mut single = String::new();
        assert!(!continue_entry(&mut single, "a \\ in the middle stays"));
        assert_eq!(single, "a \\ in the middle stays");
    }
}
