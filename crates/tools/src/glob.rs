//! Glob: files matching a glob pattern, newest first.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tool::call_blocking;
use crate::walk::{Beneath, DirCache, collect_files, walk_builder};
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// At most this many paths are returned.
pub const MAX_RESULTS: usize = 100;
/// The note after a cut list (Claude Code's Glob).
pub const TRUNCATED_NOTE: &str =
    "(Results are truncated. Consider using a more specific path or pattern.)";

/// The Glob tool: file paths matching a pattern, newest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GlobInput {
    /// The glob pattern to match files against
    pattern: String,
    /// The directory to search in. If not specified, the current working directory will be used. Omit this field for the default; do not enter "undefined" or "null".
    #[serde(default)]
    path: Option<String>,
}

impl Tool for GlobTool {
    fn name(&self) -> Cow<'static, str> {
        "Glob".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "- Fast file pattern matching tool that works with any codebase size\n\
- Supports glob patterns like \"**/*.js\" or \"src/**/*.ts\"; a pattern without a slash matches file names at any depth\n\
- Returns matching file paths sorted by modification time, newest first, at most 100\n\
- Respects .gitignore; hidden files are included, .git is skipped\n\
- Use this tool when you need to find files by name patterns".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<GlobInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        let pattern = input.get("pattern").and_then(Value::as_str).unwrap_or("");
        if pattern.trim().is_empty() {
            return Err("pattern must not be empty".into());
        }
        compile(pattern)
            .map(drop)
            .map_err(|e| ToolInputError::new(e.to_string()))
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
        50_000
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
        call_blocking(input, ctx, |input: GlobInput, ctx| glob_files(&input, ctx))
    }
}

fn glob_files(input: &GlobInput, ctx: &ToolContext) -> ToolOutput {
    let root = match ctx.resolve_as_checked(input.path.as_deref().unwrap_or(".")) {
        Ok(root) => root,
        Err(changed) => return ToolOutput::error(changed.to_string()),
    };
    match std::fs::metadata(&root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return ToolOutput::error(format!("Path is not a directory: {}", root.display()));
        }
        Err(_) => {
            return ToolOutput::error(format!("Directory does not exist: {}", root.display()));
        }
    }
    let (files, total) = match find_newest(&root, &input.pattern, ctx, MAX_RESULTS) {
        Ok(found) => found,
        Err(error) => return ToolOutput::tool_use_error(error),
    };
    if files.is_empty() {
        return ToolOutput::ok("No files found");
    }
    let truncated = total > MAX_RESULTS;
    let mut out: Vec<String> = files
        .iter()
        .take(MAX_RESULTS)
        .map(|p| p.display().to_string())
        .collect();
    if truncated {
        out.push(TRUNCATED_NOTE.to_owned());
    }
    ToolOutput::ok(out.join("\n"))
}

/// Why a glob pattern cannot be searched with; the message is for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// Longer than [`MAX_PATTERN_BYTES`].
    #[error(
        "pattern is {len} bytes long; the limit is {MAX_PATTERN_BYTES}. Use a shorter pattern (a directory as `path`, `**` for any depth)."
    )]
    TooLong {
        /// The pattern's length in bytes.
        len: usize,
    },
    /// Not glob syntax.
    #[error("pattern is not a valid glob: {0}")]
    Invalid(#[source] globset::Error),
    /// A glob whose matcher would be too large to build.
    #[error("pattern is too complex to match with: {0}")]
    TooComplex(#[source] globset::Error),
    /// A literal prefix (an absolute path, a symlinked directory) that leaves the
    /// directory the permission check judged.
    #[error(
        "the pattern reaches outside the search path {}; pass that directory as `path` instead",
        .root.display()
    )]
    OutsideRoot {
        /// The search path.
        root: PathBuf,
    },
}

/// Every file under `root` matching `pattern`, newest first (ties by path).
///
/// # Errors
/// [`GlobError`] for a pattern that is not a usable glob or that reaches outside `root`.
pub fn find(root: &Path, pattern: &str, ctx: &ToolContext) -> Result<Vec<PathBuf>, GlobError> {
    find_newest(root, pattern, ctx, usize::MAX).map(|(files, _)| files)
}

/// The `limit` newest files of [`find`] and how many matched in all. Only those are
/// sorted: a registry's files share their mtime, and ordering ten thousand paths by
/// component to keep a hundred costs more than the walk's stats.
fn find_newest(
    root: &Path,
    pattern: &str,
    ctx: &ToolContext,
    limit: usize,
) -> Result<(Vec<PathBuf>, usize), GlobError> {
    let (base, rest) = split_literal_prefix(root, pattern);
    let matcher = compile(&rest)?;
    if !base.is_dir() {
        return Ok((Vec::new(), 0));
    }
    // The permission check judged `root`: a pattern's literal prefix (an absolute path,
    // a symlinked directory) must not move the walk outside it.
    let base = base.canonicalize().unwrap_or(base);
    if !base.starts_with(root.canonicalize().unwrap_or_else(|_| root.to_path_buf())) {
        return Err(GlobError::OutsideRoot {
            root: root.to_path_buf(),
        });
    }
    // Without a slash a pattern names files at any depth, as `rg --glob` does.
    let by_name = !pattern.contains('/');
    let builder = walk_builder(&base, ctx.hidden.as_ref());
    let beneath = Beneath::new(&base);
    let mut hits: Vec<(PathBuf, Option<SystemTime>)> = collect_files(
        &builder,
        &beneath,
        &ctx.cancel,
        DirCache::default,
        |dir, entry| {
            let path = entry.path();
            let matched = if by_name {
                matcher.is_match(entry.file_name())
            } else {
                path.strip_prefix(&base)
                    .is_ok_and(|rel| matcher.is_match(rel))
            };
            if !matched {
                return None;
            }
            // Listed only if it is where the walk found it (see `collect_files`).
            let modified = beneath.modified(dir, path).ok()?;
            Some((path.to_path_buf(), modified))
        },
    );
    let total = hits.len();
    let newest_first = |a: &(PathBuf, Option<SystemTime>), b: &(PathBuf, Option<SystemTime>)| {
        b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0))
    };
    if limit < hits.len() {
        hits.select_nth_unstable_by(limit, newest_first);
        hits.truncate(limit);
    }
    hits.sort_by(newest_first);
    Ok((hits.into_iter().map(|(p, _)| p).collect(), total))
}

/// The longest glob pattern accepted, in bytes: far beyond any real path pattern
/// (PATH_MAX is 4096), far below what makes the regex behind it expensive to build.
pub const MAX_PATTERN_BYTES: usize = 16 * 1024;

/// `pattern` as a matcher, or why it is not one. Built as a one-glob set, whose
/// compilation reports a regex that grows too large as an error:
/// `Glob::compile_matcher` panics on it, and the release build aborts on a panic.
pub(crate) fn compile(pattern: &str) -> Result<GlobSet, GlobError> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(GlobError::TooLong { len: pattern.len() });
    }
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(GlobError::Invalid)?;
    GlobSetBuilder::new()
        .add(glob)
        .build()
        .map_err(GlobError::TooComplex)
}

/// Moves the glob-free leading directories of `pattern` into the walk root:
/// `src/**/*.rs` under `/p` walks `/p/src` for `**/*.rs`. An absolute pattern replaces
/// the root.
fn split_literal_prefix(root: &Path, pattern: &str) -> (PathBuf, String) {
    let mut base = if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        root.to_path_buf()
    };
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    let mut used = 0;
    for part in &parts[..parts.len().saturating_sub(1)] {
        if part.contains(['*', '?', '[', '{']) || *part == ".." || *part == "." {
            break;
        }
        base.push(part);
        used += 1;
    }
    let rest = parts[used..].join("/");
    (base, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_leading_dirs_move_into_the_root() {
        let (base, rest) = split_literal_prefix(Path::new("/p"), "src/**/*.rs");
        assert_eq!(base, PathBuf::from("/p/src"));
        assert_eq!(rest, "**/*.rs");
        let (base, rest) = split_literal_prefix(Path::new("/p"), "/abs/dir/*.txt");
        assert_eq!(base, PathBuf::from("/abs/dir"));
        assert_eq!(rest, "*.txt");
        let (base, rest) = split_literal_prefix(Path::new("/p"), "*.rs");
        assert_eq!(base, PathBuf::from("/p"));
        assert_eq!(rest, "*.rs");
    }
}

#[cfg(test)]
mod newest {
    use super::*;

    #[test]
    fn the_newest_few_are_the_head_of_the_whole_sorted_list() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for i in 0..30u64 {
            let path = root.join(format!("f{i:02}.rs"));
            std::fs::write(&path, "x").unwrap();
            // Three files per second: ties broken by path.
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000 + i / 3);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(at)
                .unwrap();
        }
        let ctx = ToolContext::new(&root);
        let all = find(&root, "*.rs", &ctx).unwrap();
        assert_eq!(all.len(), 30);
        assert_eq!(all[0], root.join("f27.rs"));
        let (few, total) = find_newest(&root, "*.rs", &ctx, 7).unwrap();
        assert_eq!(total, 30);
        assert_eq!(few, all[..7].to_vec());
    }
}

#[cfg(test)]
mod limits {
    use super::*;

    #[test]
    fn an_overlong_pattern_is_an_error_not_a_panic() {
        let huge = "a".repeat(500 * 1024);
        let err = compile(&huge).unwrap_err().to_string();
        assert!(err.contains("the limit is"), "{err}");
        // Within the length limit, a pattern whose regex is too big is an error too.
        let nested = "{a,b,c,d,e,f,g,h}*".repeat(MAX_PATTERN_BYTES / 20);
        assert!(nested.len() <= MAX_PATTERN_BYTES);
        let _ = compile(&nested);
        let stars = "*?[a-z]".repeat(MAX_PATTERN_BYTES / 8);
        let _ = compile(&stars);
    }
}
