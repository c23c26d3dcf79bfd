//! Write: create or overwrite a file, atomically.

use std::borrow::Cow;
use std::io::Write as _;
use std::path::Path;

use rustix::fs::FileType;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::file_state::{FileState, Freshness};
use crate::tool::call_blocking;
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// "File has not been read yet…" (Claude Code's Edit and Write).
pub const NOT_READ_MESSAGE: &str =
    "File has not been read yet. Read it first before writing to it.";
/// "File has been modified since read…" (Claude Code's Edit and Write).
pub const MODIFIED_MESSAGE: &str = "File has been modified since read, either by the user or by a linter. Read it again before attempting to write it.";

/// The largest file Edit or Write reads back to compare with what was read (Claude
/// Code's Edit refuses files over 1 GiB).
pub const MAX_EDIT_FILE_BYTES: u64 = 1024 * 1024 * 1024;

/// The Write tool: creates or overwrites a whole file, atomically.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteInput {
    /// The absolute path to the file to write (must be absolute, not relative)
    file_path: String,
    /// The content to write to the file
    content: String,
}

impl Tool for WriteTool {
    fn name(&self) -> Cow<'static, str> {
        "Write".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Writes a file to the local filesystem.\n\n\
Usage:\n\
- This tool will overwrite the existing file if there is one at the provided path.\n\
- If this is an existing file, you MUST use the Read tool first to read the file's contents. This tool will fail if you did not read the file first.\n\
- Parent directories are created as needed.\n\
- ALWAYS prefer editing existing files with Edit. NEVER write new files unless explicitly required.\n\
- The file_path parameter must be an absolute path, not a relative path".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<WriteInput>()
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

    fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolInputError> {
        // A file the session read that changed on disk since is told before anyone is
        // asked to approve overwriting it. Other paths are not looked at here: whether
        // they exist is not the model's to learn before the permission check.
        let Some(raw) = input.get("file_path").and_then(Value::as_str) else {
            return Ok(());
        };
        let path = ctx.resolve(raw);
        // The editor's text is read where blocking is allowed: when the call runs.
        if ctx.file_state.get(&path).is_none() || ctx.editor_files.is_some() {
            return Ok(());
        }
        let Ok(metadata) = std::fs::metadata(&path) else {
            return Ok(());
        };
        if !metadata.is_file() {
            return Ok(());
        }
        match read_with_freshness(&path, &metadata, ctx) {
            Ok((_, Freshness::Stale)) => Err(MODIFIED_MESSAGE.into()),
            Ok((_, Freshness::NotRead | Freshness::Fresh)) | Err(_) => Ok(()),
        }
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
                Err(changed) => ToolOutput::error(changed.to_string()),
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
    let mut prior = None;
    if let Some(metadata) = &existing {
        match read_with_freshness(path, metadata, ctx) {
            Err(e) => return ToolOutput::error(format!("Cannot read {}: {e}", path.display())),
            Ok((_, Freshness::NotRead)) => return ToolOutput::tool_use_error(NOT_READ_MESSAGE),
            Ok((_, Freshness::Stale)) => return ToolOutput::tool_use_error(MODIFIED_MESSAGE),
            Ok((bytes, Freshness::Fresh)) => prior = Some(bytes),
        }
    } else if let Some(parent) = path.parent()
        && let Err(e) = crate::paths::create_dir_all_as_checked(parent)
    {
        return ToolOutput::error(format!("Cannot create {}: {e}", parent.display()));
    }
    if let Err(e) = store(path, prior.as_deref(), content, ctx) {
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

/// The file's bytes now, and whether they are what the session read: the check Edit and
/// Write make before they write, and before they ask to.
pub(crate) fn read_with_freshness(
    path: &Path,
    metadata: &std::fs::Metadata,
    ctx: &ToolContext,
) -> std::io::Result<(Vec<u8>, Freshness)> {
    let editor_text = ctx.editor_files.as_ref().and_then(|e| e.read_text(path));
    let bytes = match editor_text {
        Some(text) => text.into_bytes(),
        None => crate::paths::read_as_checked(path, MAX_EDIT_FILE_BYTES)?,
    };
    let freshness = ctx
        .file_state
        .freshness(path, &bytes, metadata.modified().ok());
    Ok((bytes, freshness))
}

/// Writes `text` as the whole of `path`: through the editor when there is one, else
/// atomically to the disk. `prior` (the content now, `None` for a new file) goes to the
/// session's file history first; when it cannot be kept, nothing is written.
pub(crate) fn store(
    path: &Path,
    prior: Option<&[u8]>,
    text: &str,
    ctx: &ToolContext,
) -> std::io::Result<()> {
    if let Some(history) = &ctx.file_history {
        history.before_change(path, prior).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("could not keep a checkpoint of it first ({e}), so it was left as it was"),
            )
        })?;
    }
    match ctx
        .editor_files
        .as_ref()
        .and_then(|e| e.write_text(path, text))
    {
        Some(outcome) => outcome,
        None => write_atomic(path, text.as_bytes()),
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
///
/// Everything happens relative to one open descriptor of the directory, checked to be
/// the directory that was judged: a directory swapped for a symlink mid-call cannot
/// move the temp file, the rename or the clean-up elsewhere. The temp file is unnamed
/// while it is written (`O_TMPFILE`, where the filesystem has it), so a kill leaves
/// nothing behind; otherwise it is `.gyre-write-<pid>-<n>.tmp`, and leftovers of a gyre
/// that is gone are removed at the next write in that directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let dirfd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    // O_NOFOLLOW covers the last component; the real path covers the others.
    crate::paths::verify_opened(&dirfd, dir)?;
    remove_stale_temp_files(&dirfd);
    let permissions = match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {
            Mode::from_raw_mode(stat.st_mode) & Mode::from_raw_mode(0o7777)
        }
        // New files are 0644 less nothing: a 0600 source file would surprise.
        Ok(_) | Err(_) => Mode::from_raw_mode(0o644),
    };
    let write_via = |temp: &TempFile| {
        let written = (|| {
            let mut file = std::fs::File::from(temp.fd.try_clone()?);
            file.write_all(bytes)?;
            file.flush()?;
            rustix::fs::fchmod(&file, permissions)?;
            temp.persist(&dirfd, name)
        })();
        if written.is_err() {
            temp.discard(&dirfd);
        }
        written
    };
    let temp = TempFile::create(&dirfd, true)?;
    match write_via(&temp) {
        // An unnamed file that could not be given a name: once more with a named one.
        Err(_) if temp.name.is_none() => write_via(&TempFile::create(&dirfd, false)?),
        done => done,
    }
}

/// A temp file being written in a directory (by descriptor).
struct TempFile {
    fd: std::os::fd::OwnedFd,
    /// `None` while unnamed (`O_TMPFILE`).
    name: Option<String>,
}

/// Temp files of gyre start so: `.gyre-write-<pid>-<n>.tmp`.
const TEMP_PREFIX: &str = ".gyre-write-";

impl TempFile {
    /// A new temp file in `dirfd`, unnamed if `unnamed` and the system can.
    fn create(dirfd: &std::os::fd::OwnedFd, unnamed: bool) -> std::io::Result<Self> {
        use rustix::fs::{Mode, OFlags};
        let private = Mode::from_raw_mode(0o600);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let _ = unnamed;
        // An unnamed file is named at the end through /proc/self/fd.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if unnamed
            && Path::new("/proc/self/fd").is_dir()
            && let Ok(fd) = rustix::fs::openat(
                dirfd,
                ".",
                OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
                private,
            )
        {
            return Ok(Self { fd, name: None });
        }
        loop {
            let name = temp_name();
            match rustix::fs::openat(
                dirfd,
                name.as_str(),
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                private,
            ) {
                Ok(fd) => {
                    return Ok(Self {
                        fd,
                        name: Some(name),
                    });
                }
                Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Gives the written file its final name.
    fn persist(&self, dirfd: &std::os::fd::OwnedFd, name: &std::ffi::OsStr) -> std::io::Result<()> {
        use std::os::fd::AsRawFd as _;
        let temp_name = match &self.name {
            Some(n) => n.clone(),
            None => {
                // An unnamed file gets a name only for the instant before the rename.
                let n = temp_name();
                rustix::fs::linkat(
                    rustix::fs::CWD,
                    format!("/proc/self/fd/{}", self.fd.as_raw_fd()),
                    dirfd,
                    n.as_str(),
                    rustix::fs::AtFlags::SYMLINK_FOLLOW,
                )?;
                n
            }
        };
        let renamed = rustix::fs::renameat(dirfd, temp_name.as_str(), dirfd, name);
        if renamed.is_err() {
            let _ = rustix::fs::unlinkat(dirfd, temp_name.as_str(), rustix::fs::AtFlags::empty());
        }
        Ok(renamed?)
    }

    fn discard(&self, dirfd: &std::os::fd::OwnedFd) {
        if let Some(name) = &self.name {
            let _ = rustix::fs::unlinkat(dirfd, name.as_str(), rustix::fs::AtFlags::empty());
        }
    }
}

/// `.gyre-write-<pid>-<n>.tmp`, `n` unpredictable.
fn temp_name() -> String {
    use std::hash::BuildHasher as _;
    let n = std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{TEMP_PREFIX}{}-{n:016x}.tmp", std::process::id())
}

/// Removes temp files a killed gyre left in the directory: named with a pid that no
/// longer runs, or (older gyres named them without one) over an hour old.
fn remove_stale_temp_files(dirfd: &std::os::fd::OwnedFd) {
    let Ok(mut dir) = rustix::fs::Dir::read_from(dirfd) else {
        return;
    };
    let mut stale = Vec::new();
    while let Some(Ok(entry)) = dir.read() {
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        let Some(rest) = name.strip_prefix(TEMP_PREFIX) else {
            continue;
        };
        let owner = rest
            .split_once('-')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
            .filter(|_| rest.ends_with(".tmp"));
        let gone = match owner {
            Some(pid) => pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists(),
            None => rustix::fs::statat(dirfd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .and_then(|st| {
                    let modified = std::time::UNIX_EPOCH
                        + std::time::Duration::from_secs(u64::try_from(st.st_mtime).ok()?);
                    modified.elapsed().ok()
                })
                .is_some_and(|age| age > std::time::Duration::from_secs(3600)),
        };
        if gone {
            stale.push(name.to_owned());
        }
    }
    for name in stale {
        let _ = rustix::fs::unlinkat(dirfd, name.as_str(), rustix::fs::AtFlags::empty());
    }
}
