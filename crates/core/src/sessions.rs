//! The saved sessions of a directory, newest first: `gyre sessions` prints them, the
//! REPL's `/resume` picks one.

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value;

use crate::session::project_dir;

/// One saved session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub id: String,
    pub timestamp: String,
    pub first_prompt: String,
    pub turns: usize,
    /// The folder it ran in, as its transcript records it.
    pub cwd: Option<String>,
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
        cwd: None,
    };
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(ts) = v.get("timestamp").and_then(Value::as_str) {
            summary.timestamp = ts.to_owned();
        }
        if summary.cwd.is_none() {
            summary.cwd = v.get("cwd").and_then(Value::as_str).map(str::to_owned);
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
    let mut out = in_dir(&project_dir(home, cwd));
    out.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    out
}

/// The sessions of every folder under gyre's `home`, newest first (each names its
/// folder in [`SessionSummary::cwd`]).
#[must_use]
pub fn list_all(home: &Path) -> Vec<SessionSummary> {
    let Ok(projects) = std::fs::read_dir(home.join("projects")) else {
        return Vec::new();
    };
    let mut out: Vec<SessionSummary> = projects
        .filter_map(Result::ok)
        .flat_map(|project| in_dir(&project.path()))
        .collect();
    out.sort_by(|a, b| b.timestamp.cmp(&a.timestamp));
    out
}

/// The transcripts directly in `dir`.
fn in_dir(dir: &Path) -> Vec<SessionSummary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| summarize(&p))
        .collect()
}
