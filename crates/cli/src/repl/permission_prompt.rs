//! Asking the user at the terminal whether a tool call may run (default permission
//! mode): allow once, always for this session, or deny.

use std::io::Write;
use std::path::PathBuf;

use gyre_tools::{BoxFuture, PermissionPrompt, PromptAnswer, Tool, ToolCall};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc};

use super::input::{LineReader, ReadResult};
use super::screen::Screen;
use super::spinner::Status;
use super::style::Palette;
use super::tool_line::call_summary;

const CHOICES: &str = "  Allow? [y]es · [a]lways this session · [n]o › ";

/// The REPL's [`PermissionPrompt`]: prints the question, reads the answer through the
/// input thread. Ctrl+C at the question denies and interrupts the turn.
#[derive(Debug)]
pub struct TerminalPrompt {
    reader: LineReader,
    screen: Screen,
    palette: Palette,
    cwd: PathBuf,
    /// Where a Ctrl+C typed at the question goes (the REPL interrupts the turn).
    interrupts: mpsc::UnboundedSender<()>,
    /// One question at a time, even when tools ask concurrently.
    asking: Mutex<()>,
}

impl TerminalPrompt {
    #[must_use]
    pub fn new(
        reader: LineReader,
        screen: Screen,
        palette: Palette,
        cwd: PathBuf,
        interrupts: mpsc::UnboundedSender<()>,
    ) -> Self {
        Self {
            reader,
            screen,
            palette,
            cwd,
            interrupts,
            asking: Mutex::new(()),
        }
    }

    fn question(&self, tool: &dyn Tool, call: &ToolCall, reason: &str) -> String {
        let p = self.palette;
        let summary = call_summary(tool.name(), &call.input, &self.cwd);
        let mut out = format!("\n{} {}\n", p.yellow("?"), p.bold(&summary));
        // The whole command, when the summary had to shorten it.
        if let Some(command) = call.input.get("command").and_then(Value::as_str)
            && !summary.ends_with(command)
        {
            for line in command.lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
        let command = call.input.get("command").and_then(Value::as_str);
        // "running `cmd` needs permission" says nothing the header does not.
        if !reason.is_empty() && !command.is_some_and(|c| reason.contains(c)) {
            out.push_str(&format!("  {}\n", p.dim(reason)));
        }
        out
    }
}

/// `y`/`a`/`n` and their long forms; `None` for anything else.
#[must_use]
pub fn parse_answer(text: &str) -> Option<PromptAnswer> {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "1" => Some(PromptAnswer::AllowOnce),
        "a" | "always" | "2" => Some(PromptAnswer::AllowAlways),
        "n" | "no" | "3" | "d" | "deny" => Some(PromptAnswer::Deny),
        _ => None,
    }
}

impl PermissionPrompt for TerminalPrompt {
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
    ) -> BoxFuture<'a, PromptAnswer> {
        Box::pin(async move {
            let _one_at_a_time = self.asking.lock().await;
            self.screen.hold();
            let question = self.question(tool, call, reason);
            {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(question.as_bytes());
                let _ = out.flush();
            }
            let answer = loop {
                match self.reader.read(CHOICES, false).await {
                    Ok(ReadResult::Line(line)) => match parse_answer(&line) {
                        Some(answer) => break answer,
                        None => println!("  {}", self.palette.dim("type y, a or n")),
                    },
                    Ok(ReadResult::Interrupted) => {
                        let _ = self.interrupts.send(());
                        break PromptAnswer::Deny;
                    }
                    Ok(ReadResult::Eof) | Err(_) => break PromptAnswer::Deny,
                }
            };
            let _ = self.screen.release();
            if answer != PromptAnswer::Deny {
                self.screen
                    .spinner()
                    .show(Status::working(format!("Running {}", tool.name())));
            }
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_accept_letters_words_and_numbers() {
        assert_eq!(parse_answer("y"), Some(PromptAnswer::AllowOnce));
        assert_eq!(parse_answer(" Yes "), Some(PromptAnswer::AllowOnce));
        assert_eq!(parse_answer("a"), Some(PromptAnswer::AllowAlways));
        assert_eq!(parse_answer("2"), Some(PromptAnswer::AllowAlways));
        assert_eq!(parse_answer("n"), Some(PromptAnswer::Deny));
        assert_eq!(parse_answer("no"), Some(PromptAnswer::Deny));
        assert_eq!(parse_answer(""), None);
        assert_eq!(parse_answer("maybe"), None);
    }
}
