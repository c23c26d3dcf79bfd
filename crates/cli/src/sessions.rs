//! `gyre sessions`: the saved sessions of this directory.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use gyre_core::sessions::{SessionSummary, list};

/// Prints the table of `gyre sessions`: gyre's sessions of `cwd`, then the reference
/// CLI's (under `reference`, its home) that gyre has not imported yet.
///
/// # Errors
/// When stdout cannot be written.
pub fn print_sessions(
    home: &Path,
    reference: Option<&Path>,
    cwd: &Path,
    out: &mut impl Write,
) -> Result<()> {
    let sessions = list(home, cwd);
    let theirs: Vec<SessionSummary> = reference
        .map(|r| list(r, cwd))
        .unwrap_or_default()
        .into_iter()
        .filter(|s| !sessions.iter().any(|own| own.id == s.id))
        .collect();
    if sessions.is_empty() && theirs.is_empty() {
        writeln!(out, "No sessions in {} yet.", cwd.display())?;
        return Ok(());
    }
    if !sessions.is_empty() {
        table(&sessions, out)?;
    }
    if !theirs.is_empty() {
        if !sessions.is_empty() {
            writeln!(out)?;
        }
        writeln!(
            out,
            "Claude Code sessions of this directory (resuming one imports it into gyre):"
        )?;
        table(&theirs, out)?;
    }
    writeln!(out, "\nResume one with: gyre --resume <ID>")?;
    Ok(())
}

fn table(sessions: &[SessionSummary], out: &mut impl Write) -> Result<()> {
    writeln!(
        out,
        "{:<36}  {:<20}  {:>5}  FIRST PROMPT",
        "ID", "LAST ACTIVE", "TURNS"
    )?;
    for s in sessions {
        let prompt: String = s.first_prompt.replace('\n', " ").chars().take(60).collect();
        let ts = s
            .timestamp
            .get(..19)
            .unwrap_or(&s.timestamp)
            .replace('T', " ");
        writeln!(out, "{:<36}  {:<20}  {:>5}  {prompt}", s.id, ts, s.turns)?;
    }
    Ok(())
}
