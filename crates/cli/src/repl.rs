//! The interactive session.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use futures::StreamExt;
use gyre_loop::{EngineEvent, LoopEvent};
use gyre_protocol::{ContentBlock, Role};

use crate::args::Cli;
use crate::session;
use crate::settings::Settings;

/// Runs the REPL until EOF or `/exit`.
///
/// # Errors
/// When the session cannot be built or the terminal cannot be written.
pub async fn run(cli: &Cli, cwd: &Path, settings: &Settings) -> Result<ExitCode> {
    let mut session = session::build(cli, cwd, settings, true, None)?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    writeln!(
        stdout,
        "gyre {} — {} · /help for commands, Ctrl+D to quit",
        env!("CARGO_PKG_VERSION"),
        session.facts.model
    )?;
    let mut pending = cli.prompt.clone();
    loop {
        let line = if let Some(p) = pending.take() {
            p
        } else {
            write!(stdout, "> ")?;
            stdout.flush()?;
            let mut line = String::new();
            if stdin.lock().read_line(&mut line)? == 0 {
                break;
            }
            line
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line == "/exit" || line == "/quit" {
            break;
        }
        let events = session
            .engine
            .submit_message(vec![ContentBlock::text(line)]);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                EngineEvent::Message { message, .. } if message.role == Role::Assistant => {
                    writeln!(stdout, "{}", message.text())?;
                }
                EngineEvent::Loop(LoopEvent::Retry(status)) => {
                    writeln!(
                        stdout,
                        "  retrying in {} ms (attempt {}/{})",
                        status.delay_ms, status.attempt, status.max_retries
                    )?;
                }
                EngineEvent::Result(r) if r.is_error => {
                    writeln!(stdout, "error: {}", r.result)?;
                }
                EngineEvent::Message { .. } | EngineEvent::Loop(_) | EngineEvent::Result(_) => {}
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
