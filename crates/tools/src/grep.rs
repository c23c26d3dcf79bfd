//! Grep: ripgrep's search (grep-searcher, grep-regex, ignore) with Claude Code's modes.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::paths::display_relative;
use crate::read::push_cut;
use crate::tool::call_blocking;
use crate::walk::{Beneath, DirCache, collect_files, walk_builder};
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// Entries returned when no `head_limit` is given (0 = unlimited).
pub const DEFAULT_HEAD_LIMIT: usize = 250;
/// Output lines are cut at this many characters.
pub const MAX_LINE_CHARS: usize = 500;

/// The Grep tool: a ripgrep-style search of file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum OutputMode {
    Content,
    FilesWithMatches,
    Count,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrepInput {
    /// The regular expression pattern to search for in file contents
    pattern: String,
    /// File or directory to search in. Defaults to current working directory.
    #[serde(default)]
    path: Option<String>,
    /// Glob pattern to filter files (e.g. "*.js", "*.{ts,tsx}")
    #[serde(default)]
    glob: Option<String>,
    /// File type to search (rg --type), e.g. js, py, rust, go, java
    #[serde(default, rename = "type")]
    file_type: Option<String>,
    /// Output mode: "content" shows matching lines, "files_with_matches" shows file paths (default), "count" shows match counts
    #[serde(default)]
    output_mode: Option<OutputMode>,
    /// Number of lines to show after each match. Requires output_mode: "content".
    #[serde(default, rename = "-A")]
    after: Option<f64>,
    /// Number of lines to show before each match. Requires output_mode: "content".
    #[serde(default, rename = "-B")]
    before: Option<f64>,
    /// Number of lines to show before and after each match. Requires output_mode: "content".
    #[serde(default, rename = "-C")]
    context: Option<f64>,
    /// Show line numbers in output (default true). Requires output_mode: "content".
    #[serde(default, rename = "-n")]
    line_numbers: Option<bool>,
    /// Case insensitive search
    #[serde(default, rename = "-i")]
    case_insensitive: Option<bool>,
    /// Enable multiline mode where . matches newlines and patterns can span lines (default false)
    #[serde(default)]
    multiline: Option<bool>,
    /// Limit output to the first N lines/entries (default 250, 0 for unlimited)
    #[serde(default)]
    head_limit: Option<f64>,
    /// Skip the first N lines/entries before applying head_limit (default 0)
    #[serde(default)]
    offset: Option<f64>,
}

impl Tool for GrepTool {
    fn name(&self) -> Cow<'static, str> {
        "Grep".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "A powerful search tool built on ripgrep's libraries\n\n\
Usage:\n\
- ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash command.\n\
- Supports full regex syntax (e.g., \"log.*Error\", \"function\\\\s+\\\\w+\")\n\
- Filter files with glob parameter (e.g., \"*.js\", \"**/*.tsx\") or type parameter (e.g., \"js\", \"py\", \"rust\")\n\
- Output modes: \"content\" shows matching lines (`path:line:text`), \"files_with_matches\" shows only file paths, newest first (default), \"count\" shows match counts\n\
- Respects .gitignore; hidden files are searched, .git is skipped\n\
- Pattern syntax: Uses ripgrep (not grep) - literal braces need escaping (use `interface\\\\{\\\\}` to find `interface{}` in Go code)\n\
- Multiline matching: By default patterns match within single lines only. For cross-line patterns, use `multiline: true`\n\
- Results are limited to head_limit entries (default 250, 0 for unlimited); use offset to page".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<GrepInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        for field in ["-A", "-B", "-C", "head_limit", "offset"] {
            if let Some(n) = input.get(field).and_then(Value::as_f64)
                && (n < 0.0 || n.fract() != 0.0)
            {
                return Err(format!("{field} must be a whole number of 0 or more").into());
            }
        }
        Ok(())
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        20_000
    }

    fn path_field(&self) -> Option<&'static str> {
        Some("path")
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        call_blocking(input, ctx, |input: GrepInput, ctx| grep(&input, ctx))
    }
}

/// What one file contributed.
struct FileHits {
    path: PathBuf,
    mtime: Option<SystemTime>,
    count: u64,
    lines: Vec<String>,
}

/// Settings every walker thread shares.
struct Search<'a> {
    matcher: RegexMatcher,
    searcher: SearcherBuilder,
    mode: OutputMode,
    line_numbers: bool,
    display_base: &'a Path,
    beneath: &'a Beneath,
}

fn grep(input: &GrepInput, ctx: &ToolContext) -> ToolOutput {
    let mode = input.output_mode.unwrap_or(OutputMode::FilesWithMatches);
    let root = match ctx.resolve_as_checked(input.path.as_deref().unwrap_or(".")) {
        Ok(root) => root,
        Err(changed) => return ToolOutput::error(changed.to_string()),
    };
    if !root.exists() {
        return ToolOutput::error(format!("Path does not exist: {}", root.display()));
    }
    let multiline = input.multiline.unwrap_or(false);
    let mut matcher = RegexMatcherBuilder::new();
    matcher
        .case_insensitive(input.case_insensitive.unwrap_or(false))
        .multi_line(true)
        .dot_matches_new_line(multiline);
    if !multiline {
        // Line-oriented search is ripgrep's fast path.
        matcher.line_terminator(Some(b'\n'));
    }
    let matcher = match matcher.build(&input.pattern) {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::error(format!("Invalid regex pattern `{}`: {e}", input.pattern));
        }
    };

    let mut builder = walk_builder(&root, ctx.hidden.as_ref());
    if let Some(glob) = input.glob.as_deref().filter(|g| !g.trim().is_empty()) {
        let mut overrides = OverrideBuilder::new(&root);
        if glob.len() > crate::glob::MAX_PATTERN_BYTES {
            return ToolOutput::tool_use_error(format_args!(
                "glob is {} bytes long; the limit is {}. Use a shorter glob or a directory as `path`.",
                glob.len(),
                crate::glob::MAX_PATTERN_BYTES
            ));
        }
        for pattern in split_globs(glob) {
            if let Err(e) = overrides.add(&pattern) {
                return ToolOutput::tool_use_error(format_args!(
                    "glob `{pattern}` is invalid: {e}"
                ));
            }
        }
        match overrides.build() {
            Ok(o) => {
                builder.overrides(o);
            }
            Err(e) => return ToolOutput::tool_use_error(format_args!("glob is invalid: {e}")),
        }
    }
    if let Some(name) = input.file_type.as_deref().filter(|t| !t.is_empty()) {
        let mut types = TypesBuilder::new();
        types.add_defaults().select(name);
        match types.build() {
            Ok(t) => {
                builder.types(t);
            }
            Err(e) => {
                return ToolOutput::tool_use_error(format_args!("type `{name}` is unknown: {e}"));
            }
        }
    }

    let context = to_count(input.context);
    let mut searcher = SearcherBuilder::new();
    searcher
        // Counting lines costs a pass over every buffer: only content shows them.
        .line_number(mode == OutputMode::Content)
        .multi_line(multiline)
        .binary_detection(BinaryDetection::quit(0))
        // One line (with multiline, one file) is held whole: a file made of one huge
        // line must not take gyre's memory. Past this the file is skipped.
        .heap_limit(Some(MAX_LINE_BYTES));
    if mode == OutputMode::Content {
        searcher
            .before_context(to_count(input.before).max(context))
            .after_context(to_count(input.after).max(context));
    }
    let display_base = ctx.resolve(".");
    let beneath = Beneath::new(&root);
    let search = Search {
        matcher,
        searcher,
        mode,
        line_numbers: input.line_numbers.unwrap_or(true),
        display_base: &display_base,
        beneath: &beneath,
    };
    let mut hits = collect_files(
        &builder,
        &beneath,
        &ctx.cancel,
        || (search.searcher.build(), DirCache::default()),
        |(searcher, dir), entry| search_file(&search, searcher, dir, entry.path()),
    );
    if ctx.cancel.is_cancelled() {
        return ToolOutput::error(crate::INTERRUPTED_MESSAGE);
    }
    let uses_context = mode == OutputMode::Content
        && (context > 0 || to_count(input.before) > 0 || to_count(input.after) > 0);
    let (entries, summary) = match mode {
        OutputMode::FilesWithMatches => {
            hits.sort_by(|a, b| b.mtime.cmp(&a.mtime).then_with(|| a.path.cmp(&b.path)));
            let entries: Vec<String> = hits.iter().map(|h| h.path.display().to_string()).collect();
            (entries, None)
        }
        OutputMode::Content => {
            hits.sort_by(|a, b| a.path.cmp(&b.path));
            let mut entries = Vec::new();
            for (i, hit) in hits.into_iter().enumerate() {
                if uses_context && i > 0 {
                    entries.push("--".to_owned());
                }
                entries.extend(hit.lines);
            }
            (entries, None)
        }
        OutputMode::Count => {
            hits.sort_by(|a, b| a.path.cmp(&b.path));
            let total: u64 = hits.iter().map(|h| h.count).sum();
            let files = hits.len();
            let entries = hits
                .iter()
                .map(|h| format!("{}:{}", display_relative(&h.path, &display_base), h.count))
                .collect();
            let summary = format!(
                "Found {total} total {} across {files} {}.",
                plural(total, "occurrence"),
                plural(files as u64, "file")
            );
            (entries, Some(summary))
        }
    };
    if entries.is_empty() {
        return ToolOutput::ok(match mode {
            OutputMode::FilesWithMatches => "No files found",
            OutputMode::Content | OutputMode::Count => "No matches found",
        });
    }
    let total = entries.len();
    let offset = to_count(input.offset);
    let limit = input
        .head_limit
        .map_or(DEFAULT_HEAD_LIMIT, |l| to_count(Some(l)));
    let shown: Vec<String> = entries
        .into_iter()
        .skip(offset)
        .take(if limit == 0 { usize::MAX } else { limit })
        .collect();
    let paginated = offset > 0 || (limit > 0 && total > offset + limit);
    let mut out = String::new();
    if mode == OutputMode::FilesWithMatches {
        out.push_str(&format!("Found {total} {}\n", plural(total as u64, "file")));
    }
    out.push_str(&shown.join("\n"));
    if let Some(summary) = summary {
        out.push_str("\n\n");
        out.push_str(&summary);
    }
    if paginated {
        out.push_str(&format!(
            "\n\n[Showing results with pagination = limit: {limit}, offset: {offset}]"
        ));
    }
    ToolOutput::ok(out)
}

/// The most of one line (with `multiline`, of one file) Grep holds in memory.
const MAX_LINE_BYTES: usize = 16 << 20;

fn search_file(
    search: &Search<'_>,
    searcher: &mut Searcher,
    dir: &mut DirCache,
    path: &Path,
) -> Option<FileHits> {
    // Unreadable files are skipped, as ripgrep skips them with a warning; so is a file
    // that is not where the walk found it (a directory swapped for a symlink).
    let (file, metadata) = search.beneath.open(dir, path).ok()?;
    let mut sink = HitSink {
        mode: search.mode,
        line_numbers: search.line_numbers,
        path,
        display_base: search.display_base,
        prefix: None,
        count: 0,
        lines: Vec::new(),
    };
    searcher
        .search_file(&search.matcher, &file, &mut sink)
        .ok()?;
    if sink.count == 0 {
        return None;
    }
    let mtime = match search.mode {
        OutputMode::FilesWithMatches => metadata.modified().ok(),
        OutputMode::Content | OutputMode::Count => None,
    };
    Some(FileHits {
        path: path.to_path_buf(),
        mtime,
        count: sink.count,
        lines: sink.lines,
    })
}

struct HitSink<'a> {
    mode: OutputMode,
    line_numbers: bool,
    path: &'a Path,
    display_base: &'a Path,
    /// The path as shown before each line, made at the first line (most files have none).
    prefix: Option<String>,
    count: u64,
    lines: Vec<String>,
}

impl HitSink<'_> {
    fn push_line(&mut self, number: Option<u64>, separator: char, bytes: &[u8]) {
        let prefix = self
            .prefix
            .get_or_insert_with(|| display_relative(self.path, self.display_base));
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let mut line = String::with_capacity(prefix.len() + text.len().min(MAX_LINE_CHARS) + 16);
        line.push_str(prefix);
        line.push(separator);
        if self.line_numbers
            && let Some(n) = number
        {
            line.push_str(&n.to_string());
            line.push(separator);
        }
        push_cut(&mut line, text, MAX_LINE_CHARS);
        self.lines.push(line);
    }
}

impl Sink for HitSink<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.count += 1;
        match self.mode {
            OutputMode::FilesWithMatches => Ok(false),
            OutputMode::Count => Ok(true),
            OutputMode::Content => {
                let first = mat.line_number();
                for (i, line) in mat.lines().enumerate() {
                    self.push_line(first.map(|n| n + i as u64), ':', line);
                }
                Ok(true)
            }
        }
    }

    fn context(
        &mut self,
        _searcher: &Searcher,
        ctx: &SinkContext<'_>,
    ) -> Result<bool, Self::Error> {
        if matches!(ctx.kind(), SinkContextKind::Before | SinkContextKind::After) {
            self.push_line(ctx.line_number(), '-', ctx.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, Self::Error> {
        self.lines.push("--".to_owned());
        Ok(true)
    }
}

/// `"*.{ts,tsx} *.js"` and `"*.ts,*.js"` → separate globs; commas inside braces stay.
fn split_globs(glob: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in glob.split_whitespace() {
        if word.contains('{') {
            out.push(word.to_owned());
        } else {
            out.extend(word.split(',').filter(|g| !g.is_empty()).map(str::to_owned));
        }
    }
    out
}

/// A validated non-negative whole number as a count.
fn to_count(n: Option<f64>) -> usize {
    // Saturating cast: validate_input refused negatives and fractions.
    n.map_or(0, |n| n.max(0.0) as usize)
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_on_spaces_and_commas_outside_braces() {
        assert_eq!(split_globs("*.{ts,tsx} *.js"), vec!["*.{ts,tsx}", "*.js"]);
        assert_eq!(split_globs("*.ts,*.js"), vec!["*.ts", "*.js"]);
    }
}
