//! Stage 4, context collapse: a projection. Spans of older tool rounds are shown to the
//! model as one digest each; the stored history keeps every message.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use gyre_protocol::{ContentBlock, Message, Role};
use serde_json::Value;

use crate::config::CollapseConfig;
use crate::microcompact::CLEARED_PLACEHOLDER;
use crate::pairing::{protected_prefix_len, units};
use crate::stage::{Stage, StageReport, StageResult};
use crate::tokens::TokenCounter;

/// A digest message starts with this.
pub const COLLAPSE_PREFIX: &str = "[Collapsed ";

/// One span of consecutive tool rounds, identified by tool_use ids (stable while the
/// history grows or is rewritten by earlier stages).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Span {
    rounds: Vec<Vec<String>>,
    digest: String,
    committed: bool,
    /// Already shown to the model once: its savings are in the API's usage since.
    applied: bool,
}

/// Per-session collapse state: staged spans (candidates) and committed ones (shown as
/// digests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextCollapse {
    spans: Vec<Span>,
}

/// A round that can be collapsed: an assistant message with tool uses and the user
/// message with exactly their results.
fn round_ids(messages: &[Message], start: usize) -> Option<Vec<String>> {
    let a = messages.get(start)?;
    let u = messages.get(start + 1)?;
    if a.role != Role::Assistant || !u.is_tool_result_message() {
        return None;
    }
    let uses: Vec<String> = a.tool_uses().map(|(id, _, _)| id.to_owned()).collect();
    let results: HashSet<&str> = u.tool_result_ids().collect();
    (!uses.is_empty()
        && uses.len() == results.len()
        && uses.iter().all(|id| results.contains(id.as_str())))
    .then_some(uses)
}

fn truncate(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// What a tool call was about: the first of the usual target fields.
fn target(input: &Value) -> String {
    for key in [
        "file_path",
        "path",
        "pattern",
        "command",
        "url",
        "query",
        "description",
    ] {
        if let Some(v) = input.get(key).and_then(Value::as_str) {
            return truncate(v.lines().next().unwrap_or(""), 80);
        }
    }
    String::new()
}

fn digest(messages: &[Message], start: usize, rounds: usize) -> String {
    let mut lines = String::new();
    let mut calls = 0usize;
    for r in 0..rounds {
        let a = &messages[start + 2 * r];
        let u = &messages[start + 2 * r + 1];
        for (id, name, input) in a.tool_uses() {
            calls += 1;
            let outcome = u
                .content
                .iter()
                .find_map(|b| match b {
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    } if tool_use_id == id => {
                        let text = content.text();
                        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                        let status = if *is_error { "error" } else { "ok" };
                        Some(if first.is_empty() || text == CLEARED_PLACEHOLDER {
                            status.to_owned()
                        } else {
                            format!("{status}: {}", truncate(first, 80))
                        })
                    }
                    _ => None,
                })
                .unwrap_or_else(|| "no result".to_owned());
            let _ = writeln!(lines, "- {name} {} → {outcome}", target(input));
        }
    }
    format!(
        "{COLLAPSE_PREFIX}{rounds} earlier tool round(s), {calls} call(s); the full messages are kept in the session]\n{}",
        lines.trim_end()
    )
}

/// Where a span currently sits in `messages`, if it still matches.
fn locate(span: &Span, messages: &[Message], first_use: &HashMap<&str, usize>) -> Option<usize> {
    let start = *first_use.get(span.rounds.first()?.first()?.as_str())?;
    span.rounds
        .iter()
        .enumerate()
        .all(|(r, ids)| round_ids(messages, start + 2 * r).as_ref() == Some(ids))
        .then_some(start)
}

fn first_use_index(messages: &[Message]) -> HashMap<&str, usize> {
    messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .filter_map(|(i, m)| m.tool_uses().next().map(|(id, _, _)| (id, i)))
        .collect()
}

impl ContextCollapse {
    /// No collapsed spans yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Spans staged and not yet committed.
    #[must_use]
    pub fn staged(&self) -> usize {
        self.spans.iter().filter(|s| !s.committed).count()
    }

    /// Spans committed (shown as digests).
    #[must_use]
    pub fn committed(&self) -> usize {
        self.spans.iter().filter(|s| s.committed).count()
    }

    /// Forgets everything (after the history was replaced by a compaction).
    pub fn reset(&mut self) {
        self.spans.clear();
    }

    /// Stages every run of collapsible rounds older than the `keep_recent_rounds` most
    /// recent units that is not staged yet. Returns how many spans were added.
    pub fn stage(&mut self, messages: &[Message], config: &CollapseConfig) -> usize {
        let known: HashSet<&str> = self
            .spans
            .iter()
            .flat_map(|s| s.rounds.iter().flatten())
            .map(String::as_str)
            .collect();
        let all = units(messages, protected_prefix_len(messages));
        let old = &all[..all.len().saturating_sub(config.keep_recent_rounds.max(1))];
        let mut new_spans = Vec::new();
        let mut run: Vec<(usize, Vec<String>)> = Vec::new();
        let flush = |run: &mut Vec<(usize, Vec<String>)>, out: &mut Vec<Span>| {
            if let Some(&(start, _)) = run.first() {
                let rounds: Vec<Vec<String>> = run.drain(..).map(|(_, ids)| ids).collect();
                out.push(Span {
                    digest: digest(messages, start, rounds.len()),
                    rounds,
                    committed: false,
                    applied: false,
                });
            }
            run.clear();
        };
        for unit in old {
            let ids = (unit.len() == 2)
                .then(|| round_ids(messages, unit.start))
                .flatten()
                .filter(|ids| !ids.iter().any(|id| known.contains(id.as_str())));
            match ids {
                Some(ids) => {
                    run.push((unit.start, ids));
                    if run.len() >= config.max_span_rounds.max(1) {
                        flush(&mut run, &mut new_spans);
                    }
                }
                None => flush(&mut run, &mut new_spans),
            }
        }
        flush(&mut run, &mut new_spans);
        let added = new_spans.len();
        self.spans.extend(new_spans);
        added
    }

    /// Commits staged spans, oldest first, until about `tokens_to_free` tokens are
    /// saved. Returns how many were committed.
    pub fn commit(
        &mut self,
        messages: &[Message],
        tokens_to_free: u64,
        counter: &dyn TokenCounter,
    ) -> usize {
        let first_use = first_use_index(messages);
        let mut saved = 0u64;
        let mut committed = 0usize;
        for span in self.spans.iter_mut().filter(|s| !s.committed) {
            if saved >= tokens_to_free {
                break;
            }
            let Some(start) = locate(span, messages, &first_use) else {
                continue;
            };
            let before: u64 = messages[start..start + 2 * span.rounds.len()]
                .iter()
                .map(|m| counter.count_message(m))
                .sum();
            let after = counter.count_message(&Message::user_text(span.digest.clone()));
            if after >= before {
                continue;
            }
            saved += before - after;
            span.committed = true;
            committed += 1;
        }
        committed
    }

    /// Commits everything staged (the loop's "collapse drain" on prompt-too-long).
    /// Returns how many spans were committed.
    pub fn recover_from_overflow(&mut self) -> usize {
        let mut n = 0;
        for span in self.spans.iter_mut().filter(|s| !s.committed) {
            span.committed = true;
            n += 1;
        }
        n
    }

    /// The projection: committed spans replaced by their digest (a user message).
    /// Tokens freed count only spans shown for the first time, since the usage of the
    /// last response already reflects the others. Spans that no longer match the
    /// history are dropped.
    pub fn project(&mut self, messages: Vec<Message>, counter: &dyn TokenCounter) -> StageResult {
        if self.committed() == 0 {
            let detail = match self.staged() {
                0 => "nothing staged".to_owned(),
                n => format!("{n} span(s) staged"),
            };
            return StageResult {
                messages,
                report: StageReport::unchanged(Stage::ContextCollapse, detail),
            };
        }
        let first_use = first_use_index(&messages);
        self.spans
            .retain(|span| locate(span, &messages, &first_use).is_some());
        let mut replace: Vec<(usize, usize, usize)> = self // (start, end, span)
            .spans
            .iter()
            .enumerate()
            .filter(|(_, span)| span.committed)
            .filter_map(|(i, span)| {
                locate(span, &messages, &first_use)
                    .map(|start| (start, start + 2 * span.rounds.len(), i))
            })
            .collect();
        drop(first_use);
        replace.sort_unstable();
        // A span is shown only while its digest is smaller than what it hides; its
        // savings count once, the first time it is shown.
        let mut freed = 0u64;
        replace.retain(|&(start, end, span)| {
            let hidden: u64 = messages[start..end]
                .iter()
                .map(|m| counter.count_message(m))
                .sum();
            let shown = counter.count_message(&Message::user_text(self.spans[span].digest.clone()));
            if shown >= hidden {
                return false;
            }
            if !self.spans[span].applied {
                freed += hidden - shown;
            }
            true
        });
        if replace.is_empty() {
            return StageResult::unchanged(messages, Stage::ContextCollapse, "no span to show");
        }
        let mut out = Vec::with_capacity(messages.len());
        let mut next = replace.iter().peekable();
        let mut iter = messages.into_iter().enumerate();
        while let Some((i, m)) = iter.next() {
            let Some(&&(_, end, span)) = next.peek().filter(|r| r.0 == i) else {
                out.push(m);
                continue;
            };
            next.next();
            for _ in i + 1..end {
                iter.next();
            }
            out.push(Message::user_text(self.spans[span].digest.clone()));
        }
        let shown = replace.len();
        for (_, _, span) in &replace {
            self.spans[*span].applied = true;
        }
        StageResult {
            messages: out,
            report: StageReport::changed(
                Stage::ContextCollapse,
                freed,
                format!("{shown} span(s) shown as digests, {} staged", self.staged()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::check_pairing;
    use crate::tokens::BytesPerTokenCounter;
    use serde_json::json;

    fn history(rounds: usize) -> Vec<Message> {
        let mut h = vec![Message::user_text("fix the bug")];
        for i in 0..rounds {
            let id = format!("t{i}");
            h.push(Message::assistant(vec![ContentBlock::tool_use(
                &id,
                "Read",
                json!({"file_path": format!("src/f{i}.rs")}),
            )]));
            h.push(Message::user(vec![ContentBlock::tool_result(
                &id,
                format!("fn f{i}() {{}}\n{}", "// body\n".repeat(50)),
                i == 1,
            )]));
        }
        h
    }

    fn config() -> CollapseConfig {
        CollapseConfig {
            keep_recent_rounds: 2,
            max_span_rounds: 3,
            ..CollapseConfig::default()
        }
    }

    #[test]
    fn staging_does_not_change_the_projection() {
        let h = history(8);
        let mut c = ContextCollapse::new();
        assert_eq!(c.stage(&h, &config()), 2); // 6 old rounds, 3 per span
        assert_eq!(c.stage(&h, &config()), 0, "already staged");
        let r = c.project(h.clone(), &BytesPerTokenCounter);
        assert_eq!(r.messages, h);
        assert_eq!(r.report.detail, "2 span(s) staged");
    }

    #[test]
    fn committed_spans_are_shown_as_digests_while_history_is_kept() {
        let h = history(8);
        let mut c = ContextCollapse::new();
        c.stage(&h, &config());
        assert_eq!(c.commit(&h, 1, &BytesPerTokenCounter), 1);
        let r = c.project(h.clone(), &BytesPerTokenCounter);
        assert_eq!(r.messages.len(), h.len() - 6 + 1);
        assert_eq!(r.messages[0], h[0]);
        let digest = r.messages[1].text();
        assert_eq!(
            digest,
            "[Collapsed 3 earlier tool round(s), 3 call(s); the full messages are kept in the session]\n\
             - Read src/f0.rs → ok: fn f0() {}\n\
             - Read src/f1.rs → error: fn f1() {}\n\
             - Read src/f2.rs → ok: fn f2() {}"
        );
        assert_eq!(r.messages[2..], h[7..]);
        assert!(r.tokens_freed() > 0);
        check_pairing(&r.messages).unwrap();
        // Shown again next turn: same projection, nothing newly freed.
        let again = c.project(h.clone(), &BytesPerTokenCounter);
        assert_eq!(again.messages, r.messages);
        assert_eq!(again.tokens_freed(), 0);
    }

    #[test]
    fn recover_from_overflow_commits_everything_staged() {
        let h = history(8);
        let mut c = ContextCollapse::new();
        c.stage(&h, &config());
        assert_eq!(c.recover_from_overflow(), 2);
        assert_eq!(c.recover_from_overflow(), 0);
        let r = c.project(h.clone(), &BytesPerTokenCounter);
        assert_eq!(r.messages.len(), h.len() - 12 + 2);
        check_pairing(&r.messages).unwrap();
    }

    #[test]
    fn spans_that_no_longer_match_are_dropped() {
        let h = history(8);
        let mut c = ContextCollapse::new();
        c.stage(&h, &config());
        c.recover_from_overflow();
        let mut changed = h.clone();
        changed.drain(1..3); // first round gone
        let r = c.project(changed.clone(), &BytesPerTokenCounter);
        assert_eq!(c.committed(), 1);
        assert_eq!(r.messages.len(), changed.len() - 6 + 1);
        check_pairing(&r.messages).unwrap();
    }
}
