//! Stage 1, tool result budget: oversized results go to disk, a preview stays.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use gyre_protocol::{ContentBlock, Message, Role, ToolResultContent, ToolResultPart};

use crate::config::ToolResultBudgetConfig;
use crate::stage::{Stage, StageReport, StageResult};
use crate::tokens::{TokenCounter, result_tokens};

/// Opening tag of a persisted result; a result starting with it is never persisted again.
pub const PERSISTED_OUTPUT_TAG: &str = "<persisted-output>";
/// Closing tag of a persisted result.
pub const PERSISTED_OUTPUT_CLOSING_TAG: &str = "</persisted-output>";
/// Sub-directory of the session directory holding persisted results.
pub const TOOL_RESULTS_DIR: &str = "tool-results";

/// Where full tool results are written. The pipeline's only I/O goes through it.
pub trait ResultStore {
    /// Saves `content` for `tool_use_id` and returns the path the model can read it from.
    ///
    /// # Errors
    /// Any I/O error; the stage then keeps only the preview and says so.
    fn persist(&self, tool_use_id: &str, content: &str) -> io::Result<PathBuf>;
}

/// Writes `<session dir>/tool-results/<tool_use_id>.txt`.
#[derive(Debug, Clone)]
pub struct DirResultStore {
    dir: PathBuf,
}

impl DirResultStore {
    /// A store writing under `<session_dir>/tool-results/`.
    #[must_use]
    pub fn new(session_dir: &Path) -> Self {
        Self {
            dir: session_dir.join(TOOL_RESULTS_DIR),
        }
    }

    /// The file a result is written to; the id is reduced to `[A-Za-z0-9_-]` so it can
    /// never leave the directory.
    #[must_use]
    pub fn path_for(&self, tool_use_id: &str) -> PathBuf {
        let safe: String = tool_use_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(format!("{safe}.txt"))
    }
}

impl ResultStore for DirResultStore {
    fn persist(&self, tool_use_id: &str, content: &str) -> io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.path_for(tool_use_id);
        std::fs::write(&path, content)?;
        Ok(path)
    }
}

/// `1536` → `1.5KB`, `2000` → `2KB`, `999` → `999 bytes`.
#[must_use]
pub fn format_size(bytes: usize) -> String {
    #[allow(clippy::cast_precision_loss)]
    fn one_decimal(v: f64, unit: &str) -> String {
        let s = format!("{v:.1}");
        let s = s.strip_suffix(".0").unwrap_or(&s);
        format!("{s}{unit}")
    }
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if bytes < 1024 * 1024 {
        #[allow(clippy::cast_precision_loss)]
        one_decimal(bytes as f64 / 1024.0, "KB")
    } else {
        #[allow(clippy::cast_precision_loss)]
        one_decimal(bytes as f64 / (1024.0 * 1024.0), "MB")
    }
}

/// The first `max_bytes` of `text` (at a char boundary, at the last newline when that
/// keeps more than half) and whether anything was cut.
#[must_use]
pub fn preview(text: &str, max_bytes: usize) -> (&str, bool) {
    if text.len() <= max_bytes {
        return (text, false);
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    match head.rfind('\n') {
        Some(nl) if nl > max_bytes / 2 => (&head[..nl], true),
        _ => (head, true),
    }
}

/// The block that replaces a persisted result.
#[must_use]
pub fn persisted_output_message(
    text: &str,
    saved: Result<&Path, &str>,
    preview_bytes: usize,
) -> String {
    let mut out = String::with_capacity(preview_bytes + 256);
    out.push_str(PERSISTED_OUTPUT_TAG);
    out.push('\n');
    let size = format_size(text.len());
    match saved {
        Ok(path) => {
            let _ = write!(
                out,
                "Output too large ({size}). Full output saved to: {}",
                path.display()
            );
        }
        Err(why) => {
            let _ = write!(
                out,
                "Output too large ({size}). The full output could not be saved: {why}"
            );
        }
    }
    let (head, more) = preview(text, preview_bytes);
    let _ = write!(
        out,
        "\n\nPreview (first {}):\n{head}",
        format_size(preview_bytes)
    );
    out.push_str(if more { "\n...\n" } else { "\n" });
    out.push_str(PERSISTED_OUTPUT_CLOSING_TAG);
    out
}

fn is_persisted(content: &ToolResultContent) -> bool {
    match content {
        ToolResultContent::Text(t) => t.starts_with(PERSISTED_OUTPUT_TAG),
        ToolResultContent::Parts(parts) => parts.iter().any(
            |p| matches!(p, ToolResultPart::Text { text } if text.starts_with(PERSISTED_OUTPUT_TAG)),
        ),
    }
}

fn char_len(content: &ToolResultContent) -> usize {
    match content {
        ToolResultContent::Text(t) => t.chars().count(),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                ToolResultPart::Text { text } => text.chars().count(),
                ToolResultPart::Image { .. } => 0,
            })
            .sum(),
    }
}

/// One result of a message that may be persisted.
struct Candidate {
    block: usize,
    chars: usize,
    over_cap: bool,
}

/// Total and largest byte length of the tool results in `message`.
fn result_bytes(message: &Message) -> (usize, usize) {
    message
        .content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolResult { content, .. } => Some(content.text_len()),
            _ => None,
        })
        .fold((0, 0), |(total, largest), bytes| {
            (total + bytes, largest.max(bytes))
        })
}

/// Applies the budget: every result over its tool's cap, then the largest results of a
/// message while its results exceed `per_message_limit` characters, are persisted
/// through `store` and replaced by a `<persisted-output>` block. The tool of a result
/// comes from the `tool_use` in the previous assistant message. Results already
/// persisted are left alone, so the stage is idempotent.
pub fn apply_tool_result_budget(
    mut messages: Vec<Message>,
    config: &ToolResultBudgetConfig,
    store: &dyn ResultStore,
    counter: &dyn TokenCounter,
) -> StageResult {
    if !config.enabled {
        return StageResult::unchanged(messages, Stage::ToolResultBudget, "disabled");
    }
    let mut freed = 0u64;
    let mut persisted: Vec<String> = Vec::new();
    // No result under the smallest cap can be over its own: most messages are settled
    // on byte lengths alone, without looking up their tools. This runs every turn over
    // the whole history.
    let smallest_cap = config
        .caps
        .iter()
        .map(|(_, cap)| *cap)
        .fold(config.default_cap, usize::min);
    let mut last_assistant: Option<usize> = None;
    for i in 0..messages.len() {
        if messages[i].role == Role::Assistant {
            last_assistant = Some(i);
            continue;
        }
        let (total_bytes, largest) = result_bytes(&messages[i]);
        if largest <= smallest_cap && total_bytes <= config.per_message_limit {
            continue;
        }
        let names: HashMap<String, String> = last_assistant.map_or_else(HashMap::new, |a| {
            messages[a]
                .tool_uses()
                .map(|(id, name, _)| (id.to_owned(), name.to_owned()))
                .collect()
        });
        let message = &mut messages[i];
        // Byte lengths bound char counts from above: most messages are settled here
        // without scanning their text.
        let mut any_over = false;
        for block in &message.content {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            {
                let tool = names.get(tool_use_id).map_or("", String::as_str);
                any_over |= content.text_len() > config.cap_for(tool) && !is_persisted(content);
            }
        }
        if !any_over && total_bytes <= config.per_message_limit {
            continue;
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        let mut total_chars = 0usize;
        for (i, block) in message.content.iter().enumerate() {
            if let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = block
            {
                let chars = char_len(content);
                total_chars += chars;
                if is_persisted(content) || chars == 0 {
                    continue;
                }
                let tool = names.get(tool_use_id).map_or("", String::as_str);
                candidates.push(Candidate {
                    block: i,
                    chars,
                    over_cap: chars > config.cap_for(tool),
                });
            }
        }
        // Over-cap results first, then the largest, until the message fits.
        candidates.sort_by(|a, b| b.over_cap.cmp(&a.over_cap).then(b.chars.cmp(&a.chars)));
        for c in candidates {
            if !c.over_cap && total_chars <= config.per_message_limit {
                break;
            }
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                ..
            } = &mut message.content[c.block]
            else {
                continue;
            };
            let text = content.text();
            let saved = store.persist(tool_use_id, &text);
            let block = match &saved {
                Ok(path) => persisted_output_message(&text, Ok(path), config.preview_bytes),
                Err(e) => {
                    persisted_output_message(&text, Err(&e.to_string()), config.preview_bytes)
                }
            };
            let images: Vec<ToolResultPart> = match content {
                ToolResultContent::Parts(parts) => parts
                    .iter()
                    .filter(|p| matches!(p, ToolResultPart::Image { .. }))
                    .cloned()
                    .collect(),
                ToolResultContent::Text(_) => Vec::new(),
            };
            let new_content = if images.is_empty() {
                ToolResultContent::Text(block.into())
            } else {
                let mut parts = vec![ToolResultPart::Text { text: block }];
                parts.extend(images);
                ToolResultContent::Parts(parts)
            };
            let before = result_tokens(content, &|t| counter.count_text(t));
            let after = result_tokens(&new_content, &|t| counter.count_text(t));
            if after >= before {
                continue;
            }
            total_chars = total_chars - c.chars + char_len(&new_content);
            freed += before - after;
            persisted.push(tool_use_id.clone());
            *content = new_content;
        }
    }
    if persisted.is_empty() {
        return StageResult::unchanged(messages, Stage::ToolResultBudget, "all results in budget");
    }
    let detail = format!(
        "persisted {} tool result(s): {}",
        persisted.len(),
        persisted.join(", ")
    );
    StageResult {
        messages,
        report: StageReport::changed(Stage::ToolResultBudget, freed, detail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::BytesPerTokenCounter;
    use serde_json::json;

    fn round(id: &str, tool: &str, result: String) -> Vec<Message> {
        vec![
            Message::assistant(vec![ContentBlock::tool_use(id, tool, json!({}))]),
            Message::user(vec![ContentBlock::tool_result(id, result, false)]),
        ]
    }

    fn result_text(m: &Message, i: usize) -> String {
        match &m.content[i] {
            ContentBlock::ToolResult { content, .. } => content.text(),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn over_cap_result_is_persisted_with_size_path_and_preview() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirResultStore::new(dir.path());
        let big: String = (0..2000).map(|i| format!("line {i:05}\n")).collect(); // 22000 bytes
        let mut h = vec![Message::user_text("go")];
        h.extend(round("toolu_1", "Grep", big.clone()));
        let r = apply_tool_result_budget(
            h,
            &ToolResultBudgetConfig::default(),
            &store,
            &BytesPerTokenCounter,
        );
        assert!(r.report.changed);
        assert!(r.tokens_freed() > 4000);
        let path = dir.path().join("tool-results").join("toolu_1.txt");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), big);
        let text = result_text(&r.messages[2], 0);
        let (head, more) = preview(&big, 2000);
        assert!(more);
        assert!(head.len() <= 2000 && head.len() > 1000);
        let expected = format!(
            "<persisted-output>\nOutput too large (21.5KB). Full output saved to: {}\n\nPreview (first 2KB):\n{head}\n...\n</persisted-output>",
            path.display()
        );
        assert_eq!(text, expected);
        // Idempotent: a second pass changes nothing.
        let again = apply_tool_result_budget(
            r.messages.clone(),
            &ToolResultBudgetConfig::default(),
            &store,
            &BytesPerTokenCounter,
        );
        assert!(!again.report.changed);
        assert_eq!(again.messages, r.messages);
    }

    #[test]
    fn caps_depend_on_the_tool() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirResultStore::new(dir.path());
        let text = "x".repeat(25_000);
        let mut h = vec![Message::user_text("go")];
        h.extend(round("a", "Bash", text.clone())); // cap 30000: kept
        h.extend(round("b", "Grep", text.clone())); // cap 20000: persisted
        h.extend(round("c", "Read", text)); // cap 50000: kept
        let r = apply_tool_result_budget(
            h,
            &ToolResultBudgetConfig::default(),
            &store,
            &BytesPerTokenCounter,
        );
        assert_eq!(r.report.detail, "persisted 1 tool result(s): b");
        assert_eq!(result_text(&r.messages[2], 0).len(), 25_000);
        assert!(result_text(&r.messages[4], 0).starts_with(PERSISTED_OUTPUT_TAG));
        assert_eq!(result_text(&r.messages[6], 0).len(), 25_000);
    }

    #[test]
    fn per_message_limit_replaces_largest_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = DirResultStore::new(dir.path());
        // Five Read results under their 50000 cap, 230000 chars together.
        let sizes = [40_000usize, 49_000, 45_000, 48_000, 48_000];
        let ids = ["r0", "r1", "r2", "r3", "r4"];
        let uses = ids
            .iter()
            .map(|id| ContentBlock::tool_use(*id, "Read", json!({})))
            .collect();
        let results = ids
            .iter()
            .zip(sizes)
            .map(|(id, n)| ContentBlock::tool_result(*id, "y".repeat(n), false))
            .collect();
        let h = vec![
            Message::user_text("go"),
            Message::assistant(uses),
            Message::user(results),
        ];
        let r = apply_tool_result_budget(
            h,
            &ToolResultBudgetConfig::default(),
            &store,
            &BytesPerTokenCounter,
        );
        // Only the largest (r1, 49000) must go: 230000 − 49000 + ~2.2k ≤ 200000.
        assert_eq!(r.report.detail, "persisted 1 tool result(s): r1");
        let m = &r.messages[2];
        assert!(result_text(m, 1).starts_with(PERSISTED_OUTPUT_TAG));
        for i in [0, 2, 3, 4] {
            assert_eq!(result_text(m, i).len(), sizes[i]);
        }
    }

    #[test]
    fn a_failed_write_keeps_the_preview_and_says_so() {
        struct Broken;
        impl ResultStore for Broken {
            fn persist(&self, _: &str, _: &str) -> io::Result<PathBuf> {
                Err(io::Error::other("disk full"))
            }
        }
        let mut h = vec![Message::user_text("go")];
        h.extend(round("a", "Bash", "z".repeat(40_000)));
        let r = apply_tool_result_budget(
            h,
            &ToolResultBudgetConfig::default(),
            &Broken,
            &BytesPerTokenCounter,
        );
        let text = result_text(&r.messages[2], 0);
        assert!(text.contains("could not be saved: disk full"), "{text}");
        assert!(text.ends_with(PERSISTED_OUTPUT_CLOSING_TAG));
    }

    #[test]
    fn ids_cannot_escape_the_directory() {
        let store = DirResultStore::new(Path::new("/s"));
        assert_eq!(
            store.path_for("../../etc/passwd"),
            PathBuf::from("/s/tool-results/______etc_passwd.txt")
        );
    }

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(format_size(999), "999 bytes");
        assert_eq!(format_size(2000), "2KB");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(3 * 1024 * 1024), "3MB");
    }
}
