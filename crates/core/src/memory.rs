//! Project memory: the `AGENTS.md` / `CLAUDE.md` files of the working directory and
//! its parents (in the system prompt), the files they import with `@path`, and the
//! memory files of subdirectories, which join the conversation when the model first
//! reads a file there.
//!
//! An import is an `@path` word outside code spans and code blocks, relative to the
//! file it is in (or `~/…`, or absolute), naming an existing file; imports are followed
//! [`MAX_IMPORT_DEPTH`] files deep, and a file already included is not included again,
//! so a cycle ends.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use gyre_tools::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};
use serde_json::Value;

/// The memory file names read in each folder.
pub const MEMORY_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// How many imports deep a memory file's `@path`s are followed (the reference's bound).
pub const MAX_IMPORT_DEPTH: usize = 5;

/// One memory file's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    pub path: PathBuf,
    pub text: String,
}

/// Reads `path`, then the files it imports (each right after the file importing it),
/// skipping those in `seen` and adding what it reads there.
#[must_use]
pub fn with_imports(
    path: &Path,
    home: Option<&Path>,
    seen: &mut HashSet<PathBuf>,
) -> Vec<MemoryFile> {
    let mut out = Vec::new();
    read_into(path, home, 0, seen, &mut out);
    out
}

fn read_into(
    path: &Path,
    home: Option<&Path>,
    depth: usize,
    seen: &mut HashSet<PathBuf>,
    out: &mut Vec<MemoryFile>,
) {
    let key = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if !seen.insert(key) {
        return;
    }
    let Ok(text) = gyre_tools::read_config_file(path) else {
        return;
    };
    let imports: Vec<PathBuf> = if depth < MAX_IMPORT_DEPTH && text.contains('@') {
        let base = path.parent().unwrap_or(Path::new("/"));
        crate::expansion::mentions(&text)
            .into_iter()
            .map(|word| import_path(word, base, home))
            .filter(|p| p.is_file())
            .collect()
    } else {
        Vec::new()
    };
    out.push(MemoryFile {
        path: path.to_path_buf(),
        text,
    });
    for import in imports {
        read_into(&import, home, depth + 1, seen, out);
    }
}

/// Where `@word` in a file of folder `base` points.
fn import_path(word: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    match (word.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => base.join(word),
    }
}

/// The memory files of `cwd` and its parents, outermost first (without imports).
#[must_use]
pub fn ancestor_files(cwd: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = cwd
        .ancestors()
        .flat_map(|dir| MEMORY_FILES.iter().map(move |name| dir.join(name)))
        .filter(|p| p.is_file())
        .collect();
    found.reverse();
    found
}

/// The memory files of `cwd` and its parents, outermost first, each followed by its
/// imports.
#[must_use]
pub fn project_files(cwd: &Path, home: Option<&Path>) -> Vec<MemoryFile> {
    let mut seen = HashSet::new();
    ancestor_files(cwd)
        .iter()
        .flat_map(|path| with_imports(path, home, &mut seen))
        .collect()
}

/// `files` as `<project-memory>` sections, each after a blank line.
#[must_use]
pub fn sections(files: &[MemoryFile]) -> String {
    let mut out = String::new();
    for file in files {
        out.push_str(&format!(
            "\n\n<project-memory path=\"{}\">\n{}\n</project-memory>",
            file.path.display(),
            file.text.trim()
        ));
    }
    out
}

/// Read, with the memory files of the folders between the working directory and the
/// file read (below the working directory, whose own are in the system prompt) added
/// to the result the first time a file there is read.
#[derive(Debug)]
pub struct NestedMemoryRead {
    read: Arc<dyn Tool>,
    cwd: PathBuf,
    home: Option<PathBuf>,
    /// Memory files already in the conversation.
    loaded: Mutex<HashSet<PathBuf>>,
}

impl NestedMemoryRead {
    /// Wraps `read` for a session in `cwd`.
    #[must_use]
    pub fn new(read: Arc<dyn Tool>, cwd: &Path, home: Option<&Path>) -> Self {
        Self {
            read,
            cwd: cwd.to_path_buf(),
            home: home.map(Path::to_path_buf),
            loaded: Mutex::new(HashSet::new()),
        }
    }

    /// The memory files not yet loaded in the folders from below the working
    /// directory down to `file`'s.
    fn nested_for(&self, file: &Path) -> Vec<MemoryFile> {
        let Some(dir) = file.parent() else {
            return Vec::new();
        };
        // Resolved here, not at start-up: a session that never reads pays nothing.
        let cwd = self.cwd.canonicalize().unwrap_or_else(|_| self.cwd.clone());
        let Ok(below) = dir.strip_prefix(&cwd) else {
            return Vec::new();
        };
        let mut folder = cwd.clone();
        let mut out = Vec::new();
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        for part in below.components() {
            folder.push(part);
            for name in MEMORY_FILES {
                let path = folder.join(name);
                if path.is_file() && path != file {
                    out.extend(with_imports(&path, self.home.as_deref(), &mut loaded));
                }
            }
        }
        out
    }
}

impl Tool for NestedMemoryRead {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.read.name()
    }
    fn description(&self) -> std::borrow::Cow<'static, str> {
        self.read.description()
    }
    fn input_schema(&self) -> Value {
        self.read.input_schema()
    }
    fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolInputError> {
        self.read.validate_input(input, ctx)
    }
    fn is_concurrency_safe(&self, input: &Value) -> bool {
        self.read.is_concurrency_safe(input)
    }
    fn is_read_only(&self, input: &Value) -> bool {
        self.read.is_read_only(input)
    }
    fn check_permissions(&self, input: &Value, ctx: &ToolContext) -> PermissionDecision {
        self.read.check_permissions(input, ctx)
    }
    fn max_result_size_chars(&self) -> usize {
        self.read.max_result_size_chars()
    }
    fn path_field(&self) -> Option<&'static str> {
        self.read.path_field()
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.read.aliases()
    }
    fn is_enabled(&self) -> bool {
        self.read.is_enabled()
    }
    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let file = input
                .get("file_path")
                .and_then(Value::as_str)
                .map(|p| ctx.resolve(p));
            let mut output = self.read.call(input, ctx, progress).await;
            if output.is_error {
                return output;
            }
            for memory in file.map(|f| self.nested_for(&f)).unwrap_or_default() {
                output.content.push_str(&format!(
                    "\n\n<system-reminder>\nProject memory of {} (it applies to the files of that folder):\n{}\n</system-reminder>",
                    memory.path.display(),
                    memory.text.trim()
                ));
            }
            output
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_follow_relative_and_home_paths_once_and_not_in_code() {
        let dir = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(
            root.join("CLAUDE.md"),
            "Rules. See @docs/style.md and @~/mine.md.\n`@docs/skipped.md` and\n```\n@docs/skipped.md\n```\n@missing.md",
        )
        .unwrap();
        std::fs::write(
            root.join("docs/style.md"),
            "style: tabs. back to @../CLAUDE.md",
        )
        .unwrap();
        std::fs::write(root.join("docs/skipped.md"), "SKIPPED").unwrap();
        std::fs::write(home.path().join("mine.md"), "my own rule").unwrap();
        let files = project_files(root, Some(home.path()));
        let texts: Vec<&str> = files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts.len(), 3, "{texts:?}");
        assert!(texts[1].starts_with("style: tabs"));
        assert_eq!(texts[2], "my own rule");
        assert!(!sections(&files).contains("SKIPPED"));
    }

    #[test]
    fn imports_stop_at_the_depth_bound() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(
                dir.path().join(format!("m{i}.md")),
                format!("level {i} @m{}.md", i + 1),
            )
            .unwrap();
        }
        std::fs::write(dir.path().join("AGENTS.md"), "top @m0.md").unwrap();
        let files = project_files(dir.path(), None);
        // AGENTS.md and five levels of imports.
        assert_eq!(files.len(), 1 + MAX_IMPORT_DEPTH);
    }

    #[tokio::test]
    async fn reading_a_file_in_a_subfolder_brings_its_memory_once() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(cwd.join("pkg/inner")).unwrap();
        std::fs::write(cwd.join("CLAUDE.md"), "top, in the system prompt").unwrap();
        std::fs::write(cwd.join("pkg/AGENTS.md"), "pkg rule").unwrap();
        std::fs::write(cwd.join("pkg/inner/CLAUDE.md"), "inner rule").unwrap();
        std::fs::write(cwd.join("pkg/inner/a.rs"), "fn a() {}").unwrap();
        std::fs::write(cwd.join("pkg/inner/b.rs"), "fn b() {}").unwrap();
        let tool = NestedMemoryRead::new(Arc::new(gyre_tools::read::ReadTool), &cwd, None);
        let ctx = ToolContext::new(&cwd);
        let read = |file: &str| {
            let input = serde_json::json!({ "file_path": cwd.join(file).display().to_string() });
            tool.call(input, &ctx, &|_| {})
        };
        let first = read("pkg/inner/a.rs").await;
        assert!(first.content.contains("fn a()"));
        assert!(first.content.contains("pkg rule"), "{}", first.content);
        assert!(first.content.contains("inner rule"));
        assert!(!first.content.contains("top, in the system prompt"));
        let second = read("pkg/inner/b.rs").await;
        assert!(!second.content.contains("pkg rule"), "{}", second.content);
    }
}
