//! Write: create or overwrite a file, atomically.

use std::io::Write as _;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::file_state::{FileState, Freshness};
use crate::tool::call_blocking;
use crate::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};

/// "File has not been read yet…" (Claude Code's Edit and Write).
pub const NOT_READ_MESSAGE: &str =
    "File has not been read yet. Read it first before writing to it.";
/// "File has been modified since read…" (Claude Code's Edit and Write).
pub const MODIFIED_MESSAGE: &str = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.";

/// The largest file Edit or Write reads back to compare with what was read (Claude
/// Code's Edit refuses files over 1 GiB).
pub const MAX_EDIT_FILE_BYTES: u64 = 1024 * 1024 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Debug, Deserialize)]
struct WriteInput {
    file_path: String,
    content: String,
}

impl Tool for WriteTool {
    fn name(&self) -> &'static str {
        "Write"
    }

    fn description(&self) -> &'static str {
        "Writes a file to the local filesystem.\n\n\
Usage:\n\
- This tool will overwrite the existing file if there is one at the provided path.\n\
- If this is an existing file, you MUST use the Read tool first to read the file's contents. This tool will fail if you did not read the file first.\n\
- Parent directories are created as needed.\n\
- ALWAYS prefer editing existing files with Edit. NEVER write new files unless explicitly required.\n\
- The file_path parameter must be an absolute path, not a relative path"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file to write (must be absolute, not relative)"},
                "content": {"type": "string", "description": "The content to write to the file"}
            },
            "required": ["file_path", "content"],
            "additionalProperties": false
        })
    }

    fn validate_input(&self, _input: &Value, _ctx: &ToolContext) -> Result<(), String> {
        Ok(())
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        false
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: "Write changes files".to_owned(),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        50_000
    }

    fn path_field(&self) -> Option<&'static str> {
        Some("file_path")
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        call_blocking(input, ctx, |input: WriteInput, ctx| {
            match ctx.resolve_as_checked(&input.file_path) {
                Ok(path) => write_file(&path, &input.content, ctx),
                Err(changed) => ToolOutput::error(changed),
            }
        })
    }
}

/// Runs blocking file work off the async threads.
fn write_file(path: &Path, content: &str, ctx: &ToolContext) -> ToolOutput {
    let existing = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return ToolOutput::error(format!(
                "{} is a directory; Write needs a file path.",
                path.display()
            ));
        }
        Ok(m) => {
            if let Err(e) = crate::paths::refuse_special(path, &m) {
                return ToolOutput::tool_use_error(e);
            }
            Some(m)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return ToolOutput::error(format!("Cannot write {}: {e}", path.display())),
    };
    if let Some(metadata) = &existing {
        let current = match crate::paths::read_as_checked(path, MAX_EDIT_FILE_BYTES) {
            Ok(b) => b,
            Err(e) => return ToolOutput::error(format!("Cannot read {}: {e}", path.display())),
        };
        match ctx
            .file_state
            .freshness(path, &current, metadata.modified().ok())
        {
            Freshness::NotRead => return ToolOutput::tool_use_error(NOT_READ_MESSAGE),
            Freshness::Stale => return ToolOutput::tool_use_error(MODIFIED_MESSAGE),
            Freshness::Fresh => {}
        }
    } else if let Some(parent) = path.parent()
        && let Err(e) = std::fs::create_dir_all(parent)
    {
        return ToolOutput::error(format!("Cannot create {}: {e}", parent.display()));
    }
    if let Err(e) = write_atomic(path, content.as_bytes()) {
        return ToolOutput::error(format!("Cannot write {}: {e}", path.display()));
    }
    record_written(ctx, path, content.as_bytes());
    if existing.is_some() {
        ToolOutput::ok(format!(
            "The file {} has been updated successfully.",
            path.display()
        ))
    } else {
        ToolOutput::ok(format!("File created successfully at: {}", path.display()))
    }
}

/// Records what was just written, so the next Edit does not call it stale.
pub(crate) fn record_written(ctx: &ToolContext, path: &Path, bytes: &[u8]) {
    let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    ctx.file_state.record(path, FileState::of(bytes, mtime));
}

/// Writes `bytes` to a temp file in the same directory and renames it over `path`, so a
/// reader sees the old file or the new one, never half of it. The old file's permission
/// bits are kept.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let old_permissions = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mut temp = tempfile::Builder::new()
        .prefix(".gyre-write-")
        .tempfile_in(dir)?;
    // The directory may have been swapped for a symlink since the check: the temp file
    // must be in the directory that was judged, or the rename would land elsewhere.
    crate::paths::verify_opened(
        temp.as_file(),
        &dir.join(temp.path().file_name().unwrap_or_default()),
    )?;
    temp.write_all(bytes)?;
    temp.flush()?;
    let permissions = match old_permissions {
        Some(p) => p,
        None => default_new_file_permissions(),
    };
    temp.as_file().set_permissions(permissions)?;
    temp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// 0644 less nothing: tempfile creates 0600, which would surprise for a new source file.
fn default_new_file_permissions() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::Permissions::from_mode(0o644)
}
