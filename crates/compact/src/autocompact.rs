//! Stage 5, autocompact: the history is replaced by a summary, restored files and a tail.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use gyre_protocol::{ContentBlock, Message, Role};

use crate::boundary::{
    COMPACT_SUMMARY_PREFIX, CompactBoundary, RESTORED_FILE_PREFIX, Trigger, boundary_message,
    is_compact_boundary,
};
use crate::config::AutocompactConfig;
use crate::pairing::{protected_prefix_len, units};
use crate::tokens::TokenCounter;

/// Why a summary could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SummarizeError {
    /// What went wrong, shown to the user and logged with the failure.
    pub message: String,
}

impl SummarizeError {
    /// A failure with this message.
    #[must_use]
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// What the summarizer is asked: summarise `messages` following `prompt`.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRequest {
    /// The conversation to summarise (pairing intact).
    pub messages: Vec<Message>,
    /// The instructions (see [`compaction_prompt`]).
    pub prompt: String,
    /// What started the compaction (the prompt and the boundary say so).
    pub trigger: Trigger,
}

impl SummaryRequest {
    /// `messages` with `prompt` as the final user turn: ready for a Messages API call.
    #[must_use]
    pub fn to_messages(&self) -> Vec<Message> {
        let mut out = self.messages.clone();
        match out.last_mut() {
            Some(last) if last.role == Role::User => {
                last.content.push(ContentBlock::text(self.prompt.clone()));
            }
            _ => out.push(Message::user_text(self.prompt.clone())),
        }
        out
    }
}

/// Produces a summary; the loop backs it with the model client. The compactor never
/// calls HTTP itself.
pub trait Summarizer: Send + Sync {
    /// Summarises `request`. The text may contain `<analysis>` (dropped) and `<summary>`
    /// (kept) sections.
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>>;
}

/// The nine sections every summary has, in order (those of Claude Code's compaction
/// prompt).
pub const SUMMARY_SECTIONS: [&str; 9] = [
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and Fixes",
    "Problem Solving",
    "All User Messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
];

/// The instructions sent with the conversation to summarise.
#[must_use]
pub fn compaction_prompt(custom_instructions: Option<&str>) -> String {
    let mut p = String::from(
        "Write a detailed summary of the conversation so far. It will replace the earlier \
messages, so it must let the work continue without losing anything that matters: what the \
user asked for, what has been done, and what remains.\n\n\
First think it through inside <analysis> tags. Go through the conversation in order and note, \
for each part: what the user asked and how it was handled; decisions, techniques and code \
patterns; exact file names, code snippets and function signatures; errors met and how they \
were fixed; and the user's feedback, especially where they asked for something to be done \
differently. Check that the notes are accurate and complete.\n\n\
Then write the summary inside <summary> tags, with these sections:\n\n\
1. Primary Request and Intent: every explicit request and intention of the user, in detail.\n\
2. Key Technical Concepts: the technologies, frameworks and ideas that came up.\n\
3. Files and Code Sections: files read, changed or created, why each matters, and the code \
needed to continue (full snippets where it helps).\n\
4. Errors and Fixes: each error met, how it was fixed, and what the user said about it.\n\
5. Problem Solving: problems solved and troubleshooting still under way.\n\
6. All User Messages: every message the user wrote (not tool results), in order; they show \
how the intent changed.\n\
7. Pending Tasks: what the user asked for that is not done yet.\n\
8. Current Work: exactly what was being done right before this summary, with file names and \
code.\n\
9. Optional Next Step: the next step, only if it follows directly from the user's latest \
request; quote the most recent messages word for word to show where the work stopped. Do not \
start tangents or redo finished requests.\n\n\
Answer with text only; do not call tools.",
    );
    if let Some(extra) = custom_instructions.map(str::trim).filter(|s| !s.is_empty()) {
        p.push_str("\n\nAdditional instructions from the user:\n");
        p.push_str(extra);
    }
    p
}

/// Drops `<analysis>…</analysis>` and unwraps `<summary>…</summary>`.
#[must_use]
pub fn format_summary(raw: &str) -> String {
    let mut text = raw.to_owned();
    while let Some(start) = text.find("<analysis>") {
        match text[start..].find("</analysis>") {
            Some(end) => text.replace_range(start..start + end + "</analysis>".len(), ""),
            None => text.truncate(start),
        }
    }
    if let Some(start) = text.find("<summary>") {
        let inner = &text[start + "<summary>".len()..];
        let inner = inner.find("</summary>").map_or(inner, |end| &inner[..end]);
        return inner.trim().to_owned();
    }
    text.trim().to_owned()
}

/// A file read during the conversation, to restore after a compaction. The caller reads
/// it; this crate does no file I/O here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentFile {
    /// Where the file is, as the model knows it.
    pub path: PathBuf,
    /// Its text, as the caller read it just now.
    pub content: String,
}

/// Consecutive autocompact failures; open (stop trying) after the configured limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CircuitBreaker {
    failures: u32,
}

impl CircuitBreaker {
    /// Failures in a row since the last success.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Whether autocompact must not be tried again this session.
    #[must_use]
    pub fn is_open(&self, max_failures: u32) -> bool {
        self.failures >= max_failures
    }

    /// Counts one more failed autocompact.
    pub fn record_failure(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    /// Closes the breaker again after a compaction worked.
    pub fn record_success(&mut self) {
        self.failures = 0;
    }
}

/// Where the tail starts: the longest run of whole units at the end within
/// `keep_recent_tokens` (at least the last unit), never inside the protected prefix.
#[must_use]
pub fn choose_cut(
    messages: &[Message],
    keep_recent_tokens: u64,
    counter: &dyn TokenCounter,
) -> usize {
    let prefix = protected_prefix_len(messages);
    let units = units(messages, prefix);
    let Some(last) = units.last() else {
        return prefix;
    };
    let mut cut = last.start;
    let mut kept: u64 = messages[last.clone()]
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    for unit in units.iter().rev().skip(1) {
        let t: u64 = messages[unit.clone()]
            .iter()
            .map(|m| counter.count_message(m))
            .sum();
        if kept + t > keep_recent_tokens {
            break;
        }
        kept += t;
        cut = unit.start;
    }
    cut
}

/// Drops the oldest units after the first request until `messages` fit `max_tokens`,
/// so the summarizer's own request is not too long.
fn fit_for_summary(
    messages: &[Message],
    max_tokens: u64,
    counter: &dyn TokenCounter,
) -> Vec<Message> {
    let mut total: u64 = messages.iter().map(|m| counter.count_message(m)).sum();
    let prefix = protected_prefix_len(messages).max(1).min(messages.len());
    let mut from = prefix;
    for unit in units(messages, prefix) {
        if total <= max_tokens {
            break;
        }
        total -= messages[unit.clone()]
            .iter()
            .map(|m| counter.count_message(m))
            .sum::<u64>();
        from = unit.end;
    }
    let mut out = messages[..prefix].to_vec();
    out.extend_from_slice(&messages[from..]);
    out
}

/// Cuts `text` to at most `max_tokens`.
fn truncate_to_tokens(text: &str, max_tokens: u64, counter: &dyn TokenCounter) -> String {
    let mut n = counter.count_text(text);
    if n <= max_tokens {
        return text.to_owned();
    }
    let mut end = text.len();
    while n > max_tokens && end > 0 {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_precision_loss,
            clippy::cast_sign_loss
        )]
        let target = ((end as f64) * (max_tokens as f64 / n as f64) * 0.95) as usize;
        end = target.min(end - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        n = counter.count_text(&text[..end]);
    }
    format!("{}\n[... truncated]", &text[..end])
}

fn mentions_path(messages: &[Message], path: &Path) -> bool {
    let p = path.to_string_lossy();
    messages
        .iter()
        .flat_map(Message::tool_uses)
        .any(|(_, _, input)| {
            ["file_path", "path"]
                .iter()
                .any(|k| input.get(k).and_then(|v| v.as_str()) == Some(p.as_ref()))
        })
}

/// Restored file messages: up to `max_files` files not already in the tail, each within
/// `max_tokens_per_file`, all within `max_file_tokens_total`.
fn restored_files(
    files: &[RecentFile],
    tail: &[Message],
    config: &AutocompactConfig,
    counter: &dyn TokenCounter,
) -> Vec<Message> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for file in files {
        if out.len() >= config.max_files {
            break;
        }
        if mentions_path(tail, &file.path) {
            continue;
        }
        let content = truncate_to_tokens(&file.content, config.max_tokens_per_file, counter);
        let message = Message::user_text(format!(
            "{RESTORED_FILE_PREFIX}{} (read earlier in this conversation; contents at that time):\n\n{content}",
            file.path.display()
        ));
        let t = counter.count_message(&message);
        if total + t > config.max_file_tokens_total {
            continue;
        }
        total += t;
        out.push(message);
    }
    out
}

/// Everything a compaction needs besides the messages.
#[derive(Debug, Clone, Copy)]
pub struct CompactInputs<'a> {
    /// What started it: auto, manual or reactive.
    pub trigger: Trigger,
    /// Tokens of the context now (reported as `pre_tokens`).
    pub pre_tokens: u64,
    /// The summarizer's request must fit in this many tokens.
    pub summary_input_budget: u64,
    /// Files read during the conversation, restored after the summary.
    pub recent_files: &'a [RecentFile],
    /// The user's `/compact <instructions>`, added to the prompt.
    pub custom_instructions: Option<&'a str>,
}

/// A finished compaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// The new history: boundary, summary, restored files, tail.
    pub history: Vec<Message>,
    /// The marker recording the compaction (trigger, tokens before and after).
    pub boundary: CompactBoundary,
}

/// Errors of a compaction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactError {
    /// The summarizer failed.
    #[error("summarizer failed: {0}")]
    Summarizer(#[from] SummarizeError),
    /// The summarizer answered with no text.
    #[error("the summarizer returned an empty summary")]
    EmptySummary,
    /// Everything is in the tail that is kept: there is nothing before it to summarise.
    #[error("nothing to compact: the conversation is only its last round")]
    NothingToCompact,
    /// The summarised history was not smaller than the original.
    #[error("compaction did not shrink the context ({pre} -> {post} tokens)")]
    NotSmaller {
        /// Tokens before the compaction.
        pre: u64,
        /// Tokens after it.
        post: u64,
    },
    /// Reactive compaction runs once per turn; a second prompt-too-long ends the turn.
    #[error("a reactive compaction was already attempted this turn")]
    ReactiveAlreadyAttempted,
}

/// Summarises `messages` before the cut and rebuilds the history: a boundary marker,
/// the summary as a user message, restored files, then the tail kept verbatim (never
/// split inside a tool pair). `post_tokens` counts what will be sent (everything but
/// the marker).
///
/// # Errors
/// [`CompactError::NothingToCompact`] when only the last round would remain to
/// summarise; the summarizer's error; [`CompactError::EmptySummary`].
pub async fn compact(
    messages: &[Message],
    inputs: CompactInputs<'_>,
    config: &AutocompactConfig,
    summarizer: &dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<Compaction, CompactError> {
    let cut = choose_cut(messages, config.keep_recent_tokens, counter);
    if cut <= protected_prefix_len(messages) {
        return Err(CompactError::NothingToCompact);
    }
    let (head, tail) = messages.split_at(cut);
    let head: Vec<Message> = head
        .iter()
        .filter(|m| !is_compact_boundary(m))
        .cloned()
        .collect();
    let request = SummaryRequest {
        messages: fit_for_summary(&head, inputs.summary_input_budget, counter),
        prompt: compaction_prompt(inputs.custom_instructions),
        trigger: inputs.trigger,
    };
    let raw = summarizer.summarize(&request).await?;
    let summary = format_summary(&raw);
    if summary.is_empty() {
        return Err(CompactError::EmptySummary);
    }
    let mut history = Vec::with_capacity(tail.len() + 2 + config.max_files);
    history.push(boundary_message(inputs.trigger, inputs.pre_tokens));
    history.push(Message::user_text(format!(
        "{COMPACT_SUMMARY_PREFIX}{summary}"
    )));
    history.extend(restored_files(inputs.recent_files, tail, config, counter));
    history.extend_from_slice(tail);
    let post_tokens = history[1..].iter().map(|m| counter.count_message(m)).sum();
    Ok(Compaction {
        history,
        boundary: CompactBoundary {
            trigger: inputs.trigger,
            pre_tokens: inputs.pre_tokens,
            post_tokens,
            summary,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::check_pairing;
    use crate::tokens::BytesPerTokenCounter;
    use futures::executor::block_on;
    use serde_json::json;

    struct Canned(&'static str);
    impl Summarizer for Canned {
        fn summarize<'a>(
            &'a self,
            request: &'a SummaryRequest,
        ) -> BoxFuture<'a, Result<String, SummarizeError>> {
            assert!(
                request
                    .to_messages()
                    .last()
                    .is_some_and(|m| m.text().contains("Pending Tasks"))
            );
            Box::pin(async move { Ok(self.0.to_owned()) })
        }
    }

    fn history(rounds: usize) -> Vec<Message> {
        let mut h = vec![Message::user_text("refactor the parser")];
        for i in 0..rounds {
            let id = format!("t{i}");
            h.push(Message::assistant(vec![
                ContentBlock::thinking("hmm", "sig"),
                ContentBlock::tool_use(&id, "Read", json!({"file_path": format!("/src/f{i}.rs")})),
            ]));
            h.push(Message::user(vec![ContentBlock::tool_result(
                &id,
                "x".repeat(4_000),
                false,
            )]));
        }
        h
    }

    #[test]
    fn prompt_has_the_nine_sections() {
        let p = compaction_prompt(Some("focus on tests"));
        for (i, s) in SUMMARY_SECTIONS.iter().enumerate() {
            assert!(p.contains(&format!("{}. {s}:", i + 1)), "{s}");
        }
        assert!(p.contains("<analysis>") && p.contains("<summary>"));
        assert!(p.ends_with("focus on tests"));
    }

    #[test]
    fn analysis_is_stripped_and_summary_unwrapped() {
        assert_eq!(
            format_summary("<analysis>thinking\nmore</analysis>\n<summary>\n1. Intent\n</summary>"),
            "1. Intent"
        );
        assert_eq!(format_summary("plain"), "plain");
        assert_eq!(format_summary("a<analysis>unterminated"), "a");
    }

    #[test]
    fn rebuild_layout_is_boundary_summary_files_tail() {
        let h = history(10);
        let files = vec![
            RecentFile {
                path: "/src/f9.rs".into(), // in the tail: skipped
                content: "nine".into(),
            },
            RecentFile {
                path: "/src/lib.rs".into(),
                content: "pub mod parser;".into(),
            },
        ];
        let config = AutocompactConfig {
            keep_recent_tokens: 2_500,
            ..AutocompactConfig::default()
        };
        let inputs = CompactInputs {
            trigger: Trigger::Auto,
            pre_tokens: 10_500,
            summary_input_budget: 1_000_000,
            recent_files: &files,
            custom_instructions: None,
        };
        let c = block_on(compact(
            &h,
            inputs,
            &config,
            &Canned("<analysis>x</analysis><summary>the summary</summary>"),
            &BytesPerTokenCounter,
        ))
        .unwrap();
        let out = &c.history;
        assert!(is_compact_boundary(&out[0]));
        assert_eq!(
            out[0].text(),
            "[gyre:compact-boundary] trigger=auto pre_tokens=10500"
        );
        assert_eq!(
            out[1].text(),
            format!("{COMPACT_SUMMARY_PREFIX}the summary")
        );
        assert!(
            out[2]
                .text()
                .starts_with("[gyre:restored-file] /src/lib.rs")
        );
        assert!(out[2].text().ends_with("pub mod parser;"));
        // The tail: the last two rounds (about 1000 tokens each), whole.
        assert_eq!(out[3..], h[h.len() - 4..]);
        assert_eq!(c.boundary.summary, "the summary");
        assert!(c.boundary.post_tokens < c.boundary.pre_tokens);
        check_pairing(&out[1..]).unwrap();
    }

    #[test]
    fn files_are_capped_in_count_and_tokens() {
        let files: Vec<RecentFile> = (0..8)
            .map(|i| RecentFile {
                path: format!("/f{i}").into(),
                content: "y".repeat(40_000), // 10000 tokens: truncated to 5000
            })
            .collect();
        let config = AutocompactConfig::default();
        let msgs = restored_files(&files, &[], &config, &BytesPerTokenCounter);
        assert_eq!(msgs.len(), 5);
        for m in &msgs {
            let t = BytesPerTokenCounter.count_message(m);
            assert!(t <= 5_000 + 60, "{t}");
            assert!(m.text().ends_with("[... truncated]"));
        }
    }

    #[test]
    fn a_lone_round_is_nothing_to_compact() {
        let h = vec![Message::user_text("hi")];
        let inputs = CompactInputs {
            trigger: Trigger::Manual,
            pre_tokens: 10,
            summary_input_budget: 1_000,
            recent_files: &[],
            custom_instructions: None,
        };
        let r = block_on(compact(
            &h,
            inputs,
            &AutocompactConfig::default(),
            &Canned("s"),
            &BytesPerTokenCounter,
        ));
        assert_eq!(r, Err(CompactError::NothingToCompact));
    }

    #[test]
    fn breaker_opens_at_the_limit() {
        let mut b = CircuitBreaker::default();
        b.record_failure();
        b.record_failure();
        assert!(!b.is_open(3));
        b.record_failure();
        assert!(b.is_open(3));
        b.record_success();
        assert!(!b.is_open(3));
    }
}
