//! The session in which every compaction stage of gyre's pipeline runs, and the count of
//! each stage's firings, read from what gyre sent.
//!
//! The testkit reports each request's size / 4 as its input tokens. The model of the
//! script reads 10 KB files and writes 8 KB ones in turn, with a few words of text each
//! time; every 40 turns it reads a file over the 50000-character cap of a tool result,
//! and once it reads four 30 KB files at once. Read results are cleared by microcompact
//! past the warning level; what the model wrote stays, so the context keeps growing. The
//! testkit answers summary requests on the side ([`SummaryAnswer`]).
//!
//! gyre runs with a 100k-token window ([`CONTEXT_WINDOW`]; `max_tokens` 8192: effective
//! window 91.8k, autocompact at 78.8k, warning 58.8k, collapse staging from 82.6k). With
//! the default 200k window collapse stages from 172.6k, *below* the autocompact
//! threshold (178.8k): each turn it stages the round that just aged and commits just
//! enough, so the context settles under the threshold and autocompact never runs unless
//! one turn adds more than every staged round together (about 100k tokens). An effective
//! window under 130k puts staging above the threshold: growth crosses the threshold and
//! autocompacts, while the turn reading four files at once jumps past staging, so
//! collapse commits digests first, and autocompact follows once they are used up.
//!
//! How each firing is seen from outside, per request (turns only):
//! - tool result budget: a file in the session's `tool-results/` (one per result);
//! - microcompact: more `[Old tool result content cleared]` than in the last request;
//! - context collapse: more `[Collapsed …]` digests than in the last request;
//! - autocompact: a `compact_boundary` line (and one summary request each).
//!
//! Snip is off in gyre (no setting turns it on), so it is not counted.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result};
use gyre_testkit::{Block, ResponseTurn, Script, SummaryAnswer, Turn};
use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::json;

/// Turns of the session (tool rounds, then a text answer), and of the long one (full
/// runs only).
pub(super) const TURNS: usize = 150;
pub(super) const LONG_TURNS: usize = 500;
/// `GYRE_CONTEXT_WINDOW` of the session (see the module docs).
pub(super) const CONTEXT_WINDOW: &str = "100000";
/// What the turns do, for the row's label.
pub(super) const WHAT: &str = "Reads of 10 KB, Writes of 8 KB, 100k window";
/// Bytes of each file read in a normal turn, and of each file written.
const READ_BYTES: usize = 10_000;
const WRITE_BYTES: usize = 8_000;
/// A file over the 50000-character cap of a Read result (line numbers add ~8%), read
/// every [`BIG_EVERY`] turns: the tool result budget writes it to disk.
const BIG_BYTES: usize = 60_000;
const BIG_EVERY: usize = 40;
/// The turn that reads [`JUMP_FILES`] files of [`JUMP_BYTES`] at once: after the first
/// microcompact (turn 22), before the context reaches the autocompact threshold.
const JUMP_TURN: usize = 45;
const JUMP_FILES: usize = 4;
const JUMP_BYTES: usize = 30_000;
/// Text before each tool call.
const TEXT_BYTES: usize = 600;

/// The opening words of gyre's compaction prompt (`gyre_compact::compaction_prompt`).
const SUMMARY_PROMPT: &str = "Write a detailed summary of the conversation so far";

/// What the testkit answers to a summary request: a short summary with its sections.
pub(super) fn summary_answer() -> SummaryAnswer {
    let mut summary =
        String::from("<analysis>The files were read in order.</analysis>\n<summary>\n");
    for (i, section) in [
        "Primary Request and Intent: read every file and write the notes.",
        "Key Technical Concepts: the parser's value computations.",
        "Files and Code Sections: the files read so far, the notes written.",
        "Errors and Fixes: none.",
        "Problem Solving: none pending.",
        "All User Messages: \"Read every file.\"",
        "Pending Tasks: the remaining files.",
        "Current Work: reading the next file.",
        "Optional Next Step: read the next file.",
    ]
    .iter()
    .enumerate()
    {
        summary.push_str(&format!("{}. {section}\n", i + 1));
    }
    summary.push_str("</summary>");
    SummaryAnswer::new(SUMMARY_PROMPT, Turn::text(summary).with_tokens(0, 900))
}

/// `bytes` of code-like lines tagged with `tag`.
pub(super) fn code(bytes: usize, tag: &str) -> String {
    let mut text = String::with_capacity(bytes + 80);
    let mut line = 0;
    while text.len() < bytes {
        line += 1;
        text.push_str(&format!(
            "    let value_{line} = compute(&input[{}..], Mode::Fast)?; // {tag}\n",
            line * 7
        ));
    }
    text
}

/// A Read of a new file of `bytes` in `project`.
fn read(project: &Path, name: &str, bytes: usize) -> Result<Block> {
    let path = project.join(name);
    std::fs::write(&path, code(bytes, name))?;
    Ok(Block::tool_use(
        "Read",
        json!({ "file_path": path.to_string_lossy() }),
    ))
}

/// The script of `turns` turns (see the module docs); its files are created in `project`.
pub(super) fn script(project: &Path, turns: usize) -> Result<Script> {
    let count = turns;
    let mut turns = Vec::with_capacity(count);
    for i in 1..count {
        let mut content = vec![Block::text(
            format!("Turn {i}: on to the next part of the parser. ")
                .repeat(TEXT_BYTES / 40)
                .chars()
                .take(TEXT_BYTES)
                .collect::<String>(),
        )];
        if i == JUMP_TURN {
            for j in 0..JUMP_FILES {
                content.push(read(project, &format!("j{i}_{j}.rs"), JUMP_BYTES)?);
            }
        } else if i % BIG_EVERY == BIG_EVERY / 2 {
            content.push(read(project, &format!("big{i}.rs"), BIG_BYTES)?);
        } else if i % 2 == 0 {
            content.push(read(project, &format!("r{i}.rs"), READ_BYTES)?);
        } else {
            let path = project.join(format!("w{i}.rs"));
            content.push(Block::tool_use(
                "Write",
                json!({
                    "file_path": path.to_string_lossy(),
                    "content": code(WRITE_BYTES, &format!("w{i}")),
                }),
            ));
        }
        turns.push(
            Turn::from(ResponseTurn {
                content,
                ..ResponseTurn::default()
            })
            .with_tokens(0, 40),
        );
    }
    turns.push(Turn::text(format!("Done: {} rounds.", count - 1)).with_tokens(0, 12));
    Ok(Script::new(turns).with_summary(summary_answer()))
}

/// How often each stage fired in one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Stages {
    /// Tool results written to `tool-results/`.
    pub persisted: usize,
    /// Requests with more cleared results than the one before.
    pub microcompact: usize,
    /// Requests with more collapse digests than the one before.
    pub collapse: usize,
    /// `compact_boundary` lines.
    pub autocompact: usize,
}

impl Stages {
    /// The stages that never fired.
    pub fn silent(&self) -> Vec<&'static str> {
        [
            ("tool result budget", self.persisted),
            ("microcompact", self.microcompact),
            ("context collapse", self.collapse),
            ("autocompact", self.autocompact),
        ]
        .into_iter()
        .filter(|(_, n)| *n == 0)
        .map(|(name, _)| name)
        .collect()
    }
}

impl fmt::Display for Stages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} results persisted, microcompact in {} requests, collapse in {}, {} autocompacts",
            self.persisted, self.microcompact, self.collapse, self.autocompact
        )
    }
}

/// Counts the stages from the testkit's recorded requests (`/_testkit/requests` with
/// bodies, as JSON), the `compact_boundary` lines and the session directory under `home`.
pub(super) fn count(requests_json: &str, boundaries: usize, home: &Path) -> Result<Stages> {
    let requests: Vec<Request> =
        serde_json::from_str(requests_json).context("gyre-testkit's request list")?;
    let mut stages = Stages {
        persisted: persisted_files(home)?,
        autocompact: boundaries,
        ..Stages::default()
    };
    let mut last = Markers::default();
    for request in requests.iter().filter(|r| !r.summary) {
        let now = request.body;
        stages.microcompact += usize::from(now.cleared > last.cleared);
        stages.collapse += usize::from(now.collapsed > last.collapsed);
        last = now;
    }
    Ok(stages)
}

/// Files in every `tool-results/` directory under `dir`.
fn persisted_files(dir: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            n += if entry.file_name() == "tool-results" {
                std::fs::read_dir(entry.path())?.count()
            } else {
                persisted_files(&entry.path())?
            };
        }
    }
    Ok(n)
}

/// What the stages leave in a request body.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Markers {
    cleared: usize,
    collapsed: usize,
}

impl Markers {
    fn add(&mut self, text: &str) {
        self.cleared += text.matches(gyre_compact::CLEARED_PLACEHOLDER).count();
        self.collapsed += usize::from(text.starts_with(gyre_compact::COLLAPSE_PREFIX));
    }

    fn merge(&mut self, other: Self) {
        self.cleared += other.cleared;
        self.collapsed += other.collapsed;
    }
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    summary: bool,
    #[serde(default)]
    body: Markers,
}

/// Counts the markers in every string of a JSON value without building it: a session's
/// request list is a few hundred megabytes.
impl<'de> Deserialize<'de> for Markers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Walk;
        impl<'de> Visitor<'de> for Walk {
            type Value = Markers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, text: &str) -> Result<Markers, E> {
                let mut m = Markers::default();
                m.add(text);
                Ok(m)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Markers, E> {
                Ok(Markers::default())
            }
            fn visit_i64<E>(self, _: i64) -> Result<Markers, E> {
                Ok(Markers::default())
            }
            fn visit_u64<E>(self, _: u64) -> Result<Markers, E> {
                Ok(Markers::default())
            }
            fn visit_f64<E>(self, _: f64) -> Result<Markers, E> {
                Ok(Markers::default())
            }
            fn visit_unit<E>(self) -> Result<Markers, E> {
                Ok(Markers::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Markers, A::Error> {
                let mut m = Markers::default();
                while let Some(inner) = seq.next_element::<Markers>()? {
                    m.merge(inner);
                }
                Ok(m)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Markers, A::Error> {
                let mut m = Markers::default();
                while map.next_key::<IgnoredAny>()?.is_some() {
                    m.merge(map.next_value::<Markers>()?);
                }
                Ok(m)
            }
        }
        deserializer.deserialize_any(Walk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_counted_in_every_string_of_a_body() {
        let requests = json!([
            {"body": {"messages": [
                {"role": "user", "content": "[Collapsed 2 earlier tool round(s)]"},
                {"role": "user", "content": [{"type": "tool_result", "content": "[Old tool result content cleared]"}]}
            ]}},
            {"summary": true, "body": {"messages": [{"role": "user", "content": "[Old tool result content cleared]"}]}},
            {"body": {"messages": [
                {"role": "user", "content": "[Collapsed 2 earlier tool round(s)]"},
                {"role": "user", "content": [{"type": "tool_result", "content": "[Old tool result content cleared]"}]},
                {"role": "user", "content": [{"type": "tool_result", "content": "[Old tool result content cleared]"}]}
            ]}, "turn": 1}
        ]);
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("projects/p/s/tool-results");
        std::fs::create_dir_all(&results).unwrap();
        std::fs::write(results.join("a.txt"), "x").unwrap();
        let stages = count(&requests.to_string(), 1, dir.path()).unwrap();
        assert_eq!(
            stages,
            Stages {
                persisted: 1,
                microcompact: 2,
                collapse: 1,
                autocompact: 1
            }
        );
        assert!(stages.silent().is_empty());
        assert_eq!(
            Stages::default().silent(),
            [
                "tool result budget",
                "microcompact",
                "context collapse",
                "autocompact"
            ]
        );
    }
}
