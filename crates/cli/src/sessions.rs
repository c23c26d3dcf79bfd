//! `gyre sessions`: the saved sessions of this directory.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use anyhow::Result;
use serde_json::Value;

use gyre_core::session::project_dir;

/// One saved session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub timestamp: String,
    pub first_prompt: String,
    pub turns: usize,
}

/// Reads the summary of one transcript file.
#[must_use]
pub fn summarize(path: &Path) -> Option<SessionSummary> {
    let file = std::fs::File::open(path).ok()?;
    let id = path.file_stem()?.to_string_lossy().into_owned();
    let mut summary = SessionSummary {
        id,
        timestamp: String::new(),
        first_prompt: String::new(),
        turns: 0,
    };
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(ts) = v.get("timestamp").and_then(Value::as_str) {
            summary.timestamp = ts.to_owned();
        }
        if let Some(text) = gyre_loop::summarize_entry_value(&v) {
            summary.turns += 1;
            if summary.first_prompt.is_empty() {
                summary.first_prompt = text;
            }
        }
    }
    Some(summary)
}

/// All sessions of `cwd` under gyre's `home` (or the reference CLI's), newest first.
#[must_use]
pub fn list(home: &Path, cwd: &Path) -> Vec<SessionSummary> {
    let Ok(entries) = std::fs::read_dir(project_dir(home, cwd)) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| summarize(&p))
        .collect();
    out.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    out
}

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
