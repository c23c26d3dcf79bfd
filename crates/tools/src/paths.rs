//! Resolving the paths tools are given: against the cwd, `..` folded, symlinks resolved;
//! and [`PathFilter`], a predicate over resolved paths.
//!
//! The permission check and the tool both see the resolved path, so a symlink pointing
//! outside the working directories is judged by where it points.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// A predicate over resolved paths, shareable across walker threads.
#[derive(Clone)]
pub struct PathFilter(Arc<dyn Fn(&Path) -> bool + Send + Sync>);

impl PathFilter {
    /// A filter holding paths for which `f` is true.
    pub fn new(f: impl Fn(&Path) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Whether `path` is one the filter holds.
    #[must_use]
    pub fn matches(&self, path: &Path) -> bool {
        (self.0)(path)
    }
}

impl std::fmt::Debug for PathFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PathFilter")
    }
}

/// `raw` made absolute against `cwd` (`~/` is the home directory), `.` and `..` folded,
/// and every symlink in the longest existing prefix resolved. A path that does not exist
/// yet (a file Write will create) keeps its missing tail as written.
#[must_use]
pub fn resolve_path(cwd: &Path, raw: &str) -> PathBuf {
    canonicalize_existing_prefix(&lexical_path(cwd, raw))
}

/// How many paths [`glob_now`] lists before it gives up.
const MAX_GLOB_MATCHES: usize = 10_000;

/// The paths a bash glob (`s*/key`, `{a,b}/*.pem`, `~/x*`) matches now, one directory
/// level per component as bash expands it (without `globstar`, `**` is `*`; dot files
/// are included, which only adds paths to check). `None` past [`MAX_GLOB_MATCHES`] or
/// for a pattern that does not compile.
#[must_use]
pub fn glob_now(cwd: &Path, pattern: &str) -> Option<Vec<PathBuf>> {
    let mut found = vec![PathBuf::new()];
    for component in lexical_path(cwd, pattern).components() {
        let part = component.as_os_str().to_string_lossy();
        if !part.contains(['*', '?', '[', '{']) {
            for path in &mut found {
                path.push(component);
            }
            continue;
        }
        let matcher = globset::GlobBuilder::new(&part)
            .literal_separator(true)
            .build()
            .ok()?
            .compile_matcher();
        let mut next = Vec::new();
        for dir in &found {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if matcher.is_match(entry.file_name()) {
                    next.push(dir.join(entry.file_name()));
                    if next.len() > MAX_GLOB_MATCHES {
                        return None;
                    }
                }
            }
        }
        found = next;
    }
    Some(found)
}

/// `raw` made absolute against `cwd` and `.`/`..` folded, without touching symlinks.
pub(crate) fn lexical_path(cwd: &Path, raw: &str) -> PathBuf {
    let expanded = match raw.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME")
            .map_or_else(|| PathBuf::from(raw), |h| PathBuf::from(h).join(rest)),
        None if raw == "~" => {
            std::env::var_os("HOME").map_or_else(|| PathBuf::from(raw), PathBuf::from)
        }
        None => PathBuf::from(raw),
    };
    let absolute = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    normalize(&absolute)
}

/// The path a tool may open for `raw`, which the runner already resolved for the
/// permission check ([`Tool::path_field`](crate::Tool::path_field)): resolving it again
/// must give the same path. Another one means a symlink was swapped into it after the
/// check, and the call is refused rather than following it.
pub(crate) fn resolve_as_checked(cwd: &Path, raw: &str) -> Result<PathBuf, PathChanged> {
    let lexical = lexical_path(cwd, raw);
    let resolved = canonicalize_existing_prefix(&lexical);
    if resolved == lexical {
        Ok(resolved)
    } else {
        Err(PathChanged {
            path: lexical,
            now: resolved,
        })
    }
}

/// A path the permission check judged that leads somewhere else now (a symlink was
/// swapped into it): the call is refused rather than following it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} changed after the permission check (it now leads to {}); it was not used. Try the call again.",
    path.display(),
    now.display()
)]
pub struct PathChanged {
    /// The path as checked.
    pub path: PathBuf,
    /// Where it leads now.
    pub now: PathBuf,
}

/// The [`PathChanged`] of `path`, which leads to `now`.
pub(crate) fn changed(path: &Path, now: &Path) -> PathChanged {
    PathChanged {
        path: path.to_path_buf(),
        now: now.to_path_buf(),
    }
}

/// Opens `path` (resolved, as checked) for reading, and makes sure the file opened is the
/// one at `path`: a symlink swapped into any component after the check is refused, so
/// what was judged is what is read.
///
/// Only regular files and directories are opened: a FIFO would block the open and every
/// read forever, a device (`/dev/zero`) never ends. The type is checked before the open
/// (so a device's open has no side effect) and again on the open descriptor (so one
/// swapped in between is caught); the open itself does not block (`O_NONBLOCK`).
pub(crate) fn open_as_checked(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Ok(metadata) = std::fs::symlink_metadata(path) {
        refuse_special(path, &metadata)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                std::io::Error::other(changed(path, Path::new("a symlink")))
            } else {
                e
            }
        })?;
    refuse_special(path, &file.metadata()?)?;
    verify_opened(&file, path)?;
    Ok(file)
}

/// An error for anything but a regular file or a directory, saying what it is.
pub(crate) fn refuse_special(path: &Path, metadata: &std::fs::Metadata) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt as _;
    let kind = metadata.file_type();
    let what = if kind.is_file() || kind.is_dir() {
        return Ok(());
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is {what}; only regular files can be read, edited or written. Use Bash if you really mean to use it.",
            path.display()
        ),
    ))
}

/// The content of `path` (resolved, as checked), read through [`open_as_checked`]: at
/// most `max` bytes, more is an error (a file that grows without end cannot fill memory).
pub(crate) fn read_as_checked(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = open_as_checked(path)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, max.saturating_add(1)),
        &mut bytes,
    )?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("{} is larger than {max} bytes", path.display()),
        ));
    }
    Ok(bytes)
}

/// The metadata of `path` (found by a directory walk), from a descriptor checked to be
/// at `path`: a directory swapped for a symlink while the walk ran leads elsewhere and
/// is refused, so nothing outside the walk's root is listed or searched. Needs no read
/// permission (`O_PATH`).
pub(crate) fn metadata_as_checked(path: &Path) -> std::io::Result<std::fs::Metadata> {
    use std::os::unix::fs::OpenOptionsExt as _;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let flags = libc::O_PATH | libc::O_NOFOLLOW;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)?;
    verify_opened(&file, path)?;
    file.metadata()
}

/// Creates `dir` (resolved, as checked) and its missing parents, each one relative to a
/// descriptor of its parent: the deepest existing ancestor is opened and checked to be
/// where it should be, and every step below it names one component, never followed if
/// it is a symlink. A directory swapped for a symlink meanwhile cannot make them land
/// outside.
pub(crate) fn create_dir_all_as_checked(dir: &Path) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut existing = dir;
    let mut missing = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
            break;
        };
        missing.push(name);
        existing = parent;
    }
    let mut fd = rustix::fs::open(existing, flags, Mode::empty()).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            std::io::Error::other(changed(existing, Path::new("a symlink")))
        } else {
            e.into()
        }
    })?;
    verify_opened(&fd, existing)?;
    for name in missing.into_iter().rev() {
        match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        fd = rustix::fs::openat(&fd, name, flags, Mode::empty())?;
    }
    Ok(())
}

/// Whether the open `file` really is `path` (Linux: `/proc/self/fd`; elsewhere the
/// `O_NOFOLLOW` open is the only guard).
pub(crate) fn verify_opened(file: &impl std::os::fd::AsRawFd, path: &Path) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        if let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
            && real != path
        {
            return Err(std::io::Error::other(changed(path, &real)));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, path);
    Ok(())
}

/// Folds `.` and `..` without touching the filesystem; `..` at the root stays at the root.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

fn canonicalize_existing_prefix(path: &Path) -> PathBuf {
    if let Ok(canonical) = std::fs::canonicalize(path) {
        return canonical;
    }
    let mut missing = Vec::new();
    let mut existing = path.to_path_buf();
    loop {
        let Some(name) = existing.file_name().map(std::ffi::OsStr::to_os_string) else {
            return path.to_path_buf();
        };
        missing.push(name);
        if !existing.pop() {
            return path.to_path_buf();
        }
        if let Ok(mut canonical) = std::fs::canonicalize(&existing) {
            for name in missing.iter().rev() {
                canonical.push(name);
            }
            return canonical;
        }
    }
}

/// Whether `path` (resolved) lies in one of `dirs` (resolved here).
#[must_use]
pub fn is_inside_any(path: &Path, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|dir| {
        let dir = canonicalize_existing_prefix(&normalize(dir));
        path.starts_with(&dir)
    })
}

/// `path` shown relative to `base` when inside it, else as is.
#[must_use]
pub fn display_relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .ok()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The most a configuration file (settings, `.mcp.json`, an agent, a memory file) may
/// hold: more is a mistake or an attack, not configuration.
pub const CONFIG_FILE_LIMIT: u64 = 10 << 20;

/// Reads a configuration file: only a regular file (a symlink to one is followed), and
/// at most [`CONFIG_FILE_LIMIT`] bytes. A device (`/dev/zero`), a FIFO or a directory
/// is refused before anything is read, and opening does not wait for a FIFO's writer.
///
/// # Errors
/// The file cannot be opened or read, is not a regular file, is larger than the limit,
/// or is not UTF-8; the error's text says which.
pub fn read_config_file(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mut text = String::new();
    file.take(CONFIG_FILE_LIMIT + 1).read_to_string(&mut text)?;
    if text.len() as u64 > CONFIG_FILE_LIMIT {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "{} is larger than {} MiB, too large for a configuration file",
                path.display(),
                CONFIG_FILE_LIMIT >> 20
            ),
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_is_a_bounded_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        std::fs::write(&file, "{}").unwrap();
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&file, &linked).unwrap();
        assert_eq!(read_config_file(&linked).unwrap(), "{}");
        // A device, read forever, and a FIFO, which would wait for a writer.
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_config_file(&zero).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let fifo = dir.path().join("fifo.json");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(read_config_file(&fifo).is_err());
        assert!(read_config_file(dir.path()).is_err());
        let big = dir.path().join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(CONFIG_FILE_LIMIT + 1).unwrap();
        let err = read_config_file(&big).unwrap_err();
        assert!(err.to_string().contains("too large"), "{err}");
    }

    #[test]
    fn dot_dot_is_folded() {
        let cwd = Path::new("/nonexistent-gyre/a/b");
        assert_eq!(resolve_path(cwd, "../../../etc/x"), PathBuf::from("/etc/x"));
        assert_eq!(resolve_path(cwd, "/../../x"), PathBuf::from("/x"));
    }

    #[test]
    fn symlinks_resolve_to_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let resolved = resolve_path(dir.path(), "link/new.txt");
        assert_eq!(
            resolved,
            outside.path().canonicalize().unwrap().join("new.txt")
        );
        assert!(!is_inside_any(&resolved, &[dir.path().to_path_buf()]));
    }
}
