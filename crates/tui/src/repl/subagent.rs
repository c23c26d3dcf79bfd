//! Sub-agents while they run: one live line per Agent call under the answer (its
//! description, the tool it runs now, how many tools it used, its context's tokens),
//! and the one-line summary its outcome becomes when the call's result arrives.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use gyre_loop::{SubagentProgress, SubagentState};
use ratatui::text::{Line, Span};

use super::slash::format_duration;
use super::style::{Palette, PaletteSpans};
use gyre_term::tool_line::{Outcome, call_summary, count, shorten};

/// How much of a failure's reason a line shows.
const MAX_REASON_CHARS: usize = 80;

/// One Agent call and the newest word of its sub-agent.
#[derive(Debug, Clone)]
struct Running {
    progress: SubagentProgress,
    started: Instant,
    /// When the sub-agent said it ended.
    ended: Option<Instant>,
}

/// The Agent calls of a turn, in the order they started.
#[derive(Debug, Default)]
pub struct Subagents {
    calls: Vec<Running>,
    /// Calls whose result arrived: a late word from their sub-agent is not news.
    finished: HashSet<String>,
}

/// `Agent` or its old name.
#[must_use]
pub fn is_agent(tool: &str) -> bool {
    tool == "Agent" || tool == "Task"
}

impl Subagents {
    /// An Agent call started (its sub-agent has not spoken yet).
    pub fn started(&mut self, id: &str, description: &str, now: Instant) {
        if self
            .calls
            .iter()
            .any(|c| c.progress.parent_tool_use_id == id)
        {
            return;
        }
        self.calls.push(Running {
            progress: SubagentProgress {
                parent_tool_use_id: id.to_owned(),
                description: description.to_owned(),
                last_tool: None,
                tool_uses: 0,
                tokens: 0,
                state: SubagentState::Running,
            },
            started: now,
            ended: None,
        });
    }

    /// A sub-agent's newest progress replaces what was known of it.
    pub fn update(&mut self, progress: SubagentProgress, now: Instant) {
        if self.finished.contains(&progress.parent_tool_use_id) {
            return;
        }
        let ended = progress.state != SubagentState::Running;
        match self
            .calls
            .iter_mut()
            .find(|c| c.progress.parent_tool_use_id == progress.parent_tool_use_id)
        {
            Some(call) => {
                if ended && call.ended.is_none() {
                    call.ended = Some(now);
                }
                call.progress = progress;
            }
            None => self.calls.push(Running {
                progress,
                started: now,
                ended: ended.then_some(now),
            }),
        }
    }

    /// The live lines: one per Agent call whose result has not arrived.
    #[must_use]
    pub fn lines(&self, p: Palette, cwd: &Path, now: Instant) -> Vec<Line<'static>> {
        self.calls
            .iter()
            .map(|call| {
                let elapsed = call.ended.unwrap_or(now).duration_since(call.started);
                let text = match &call.progress.state {
                    SubagentState::Running => p.dim(running_text(&call.progress, cwd)),
                    SubagentState::Done => p.dim(done_text(&call.progress, elapsed)),
                    SubagentState::Failed(why) => {
                        p.red(format!("✗ {}", failed_text(&call.progress, why)))
                    }
                };
                Line::from(vec![
                    Span::raw("  "),
                    p.dim("⎿"),
                    Span::raw(" "),
                    p.bold(shorten(&call.progress.description, MAX_REASON_CHARS)),
                    Span::raw(" "),
                    p.dim("·"),
                    Span::raw(" "),
                    text,
                ])
            })
            .collect()
    }

    /// The call's result arrived: its live line goes, and this is its outcome line.
    /// `None` for a call that is not an Agent call of this turn.
    pub fn finish(
        &mut self,
        id: &str,
        is_error: bool,
        content: &str,
        now: Instant,
    ) -> Option<Outcome> {
        let at = self
            .calls
            .iter()
            .position(|c| c.progress.parent_tool_use_id == id)?;
        let call = self.calls.remove(at);
        self.finished.insert(id.to_owned());
        let elapsed = call.ended.unwrap_or(now).duration_since(call.started);
        let text = if is_error {
            let why = match &call.progress.state {
                SubagentState::Failed(why) => why.clone(),
                SubagentState::Running | SubagentState::Done => content.to_owned(),
            };
            failed_text(&call.progress, &why)
        } else {
            done_text(&call.progress, elapsed)
        };
        Some(Outcome {
            ok: !is_error,
            text,
        })
    }

    /// Forgets every call (an attempt that was retried, the turn's end).
    pub fn clear(&mut self) {
        self.calls.clear();
        self.finished.clear();
    }
}

/// `Grep parser in src · 3 tool uses · 12.4k tokens`.
fn running_text(progress: &SubagentProgress, cwd: &Path) -> String {
    let Some((name, input)) = &progress.last_tool else {
        return "Starting…".to_owned();
    };
    let mut parts = vec![call_summary(name, input, cwd)];
    parts.extend(tally(progress));
    shorten(&parts.join(" · "), 120)
}

/// `Done (3 tool uses · 12.4k tokens · 8.2s)`.
fn done_text(progress: &SubagentProgress, elapsed: Duration) -> String {
    let mut parts = tally(progress);
    parts.push(format_duration(
        u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
    ));
    format!("Done ({})", parts.join(" · "))
}

/// `Failed after 1 tool use: API error …`.
fn failed_text(progress: &SubagentProgress, why: &str) -> String {
    let why = why
        .strip_prefix(&format!("Agent \"{}\" ", progress.description))
        .unwrap_or(why);
    let why = why.strip_prefix("failed: ").unwrap_or(why);
    // Esc or Ctrl+C stopped it: not a failure of its own.
    if why.starts_with("Interrupted") {
        return match progress.tool_uses {
            0 => "Interrupted".to_owned(),
            n => format!("Interrupted after {}", count(n as usize, "tool use")),
        };
    }
    let why = shorten(why, MAX_REASON_CHARS);
    if progress.tool_uses == 0 {
        format!("Failed: {why}")
    } else {
        format!(
            "Failed after {}: {why}",
            count(progress.tool_uses as usize, "tool use")
        )
    }
}

/// `3 tool uses`, `12.4k tokens` (what is known so far).
fn tally(progress: &SubagentProgress) -> Vec<String> {
    let mut parts = vec![count(progress.tool_uses as usize, "tool use")];
    if progress.tokens > 0 {
        parts.push(format!("{} tokens", tokens(progress.tokens)));
    }
    parts
}

/// `850`, `12.4k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::repl::style::ansi;
    use crate::repl::text::texts;

    fn progress(id: &str, tools: u32, tokens: u64, state: SubagentState) -> SubagentProgress {
        SubagentProgress {
            parent_tool_use_id: id.to_owned(),
            description: format!("find {id}"),
            last_tool: (tools > 0).then(|| ("Grep".to_owned(), json!({"pattern": "fn parse"}))),
            tool_uses: tools,
            tokens,
            state,
        }
    }

    #[test]
    fn each_sub_agent_has_a_live_line_with_its_tool_uses_and_tokens() {
        let plain = Palette::new(false);
        let cwd = Path::new("/p");
        let t0 = Instant::now();
        let mut agents = Subagents::default();
        for id in ["a", "b", "c"] {
            agents.started(id, &format!("find {id}"), t0);
        }
        agents.update(progress("a", 2, 12_400, SubagentState::Running), t0);
        agents.update(
            progress("b", 1, 850, SubagentState::Done),
            t0 + Duration::from_millis(8_200),
        );
        agents.update(
            progress(
                "c",
                0,
                0,
                SubagentState::Failed("Agent \"find c\" failed: API error 400".to_owned()),
            ),
            t0,
        );
        assert_eq!(
            texts(&agents.lines(plain, cwd, t0 + Duration::from_secs(9))),
            vec![
                "  ⎿ find a · Grep fn parse · 2 tool uses · 12.4k tokens",
                "  ⎿ find b · Done (1 tool use · 850 tokens · 8.2s)",
                "  ⎿ find c · ✗ Failed: API error 400",
            ]
        );
    }

    #[test]
    fn a_live_line_is_dim_with_its_description_bold_and_a_failure_red() {
        let t0 = Instant::now();
        let mut agents = Subagents::default();
        agents.started("a", "find a", t0);
        agents.update(
            progress("a", 0, 0, SubagentState::Failed("API error 400".to_owned())),
            t0,
        );
        let lines = agents.lines(Palette::new(true), Path::new("/p"), t0);
        assert_eq!(
            ansi(&lines[0]),
            "  \x1b[2m⎿\x1b[22m \x1b[1mfind a\x1b[22m \x1b[2m·\x1b[22m \x1b[31m✗ Failed: API error 400\x1b[39m"
        );
    }

    #[test]
    fn a_result_turns_the_live_line_into_a_one_line_outcome() {
        let t0 = Instant::now();
        let mut agents = Subagents::default();
        agents.started("a", "find a", t0);
        agents.update(
            progress("a", 3, 1_500, SubagentState::Done),
            t0 + Duration::from_secs(2),
        );
        assert_eq!(agents.finish("x", false, "", t0), None);
        let outcome = agents.finish("a", false, "the answer", t0 + Duration::from_secs(5));
        assert_eq!(
            outcome,
            Some(Outcome {
                ok: true,
                text: "Done (3 tool uses · 1.5k tokens · 2.0s)".to_owned()
            })
        );
        assert!(
            agents
                .lines(Palette::new(false), Path::new("/p"), t0)
                .is_empty()
        );
        // A late word from a finished sub-agent brings no line back.
        agents.update(progress("a", 3, 1_500, SubagentState::Done), t0);
        assert!(
            agents
                .lines(Palette::new(false), Path::new("/p"), t0)
                .is_empty()
        );
    }

    #[test]
    fn an_interrupted_sub_agent_says_so_rather_than_failed() {
        let t0 = Instant::now();
        let mut agents = Subagents::default();
        agents.started("a", "find a", t0);
        agents.update(progress("a", 2, 900, SubagentState::Running), t0);
        let outcome = agents.finish("a", true, "Interrupted by user", t0);
        assert_eq!(
            outcome.map(|o| o.text),
            Some("Interrupted after 2 tool uses".to_owned())
        );
    }

    #[test]
    fn an_error_result_without_progress_still_says_why() {
        let t0 = Instant::now();
        let mut agents = Subagents::default();
        agents.started("a", "find a", t0);
        let outcome = agents.finish("a", true, "Agent \"find a\" ended without a result", t0);
        assert_eq!(
            outcome.map(|o| (o.ok, o.text)),
            Some((false, "Failed: ended without a result".to_owned()))
        );
    }
}
