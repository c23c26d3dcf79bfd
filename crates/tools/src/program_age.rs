//! Whether a command word's program was written during the session: under deny rules
//! such a program is code the rules cannot read (a copy of `rm` made in an earlier call).

use std::path::{Path, PathBuf};

use crate::paths::{lexical_path, resolve_path};

/// Whether the program a command word names may be one a tool call of this session
/// wrote: the file it runs (the word as a path, else the first match on the `PATH`
/// bash will search) lies inside the working directories, or its inode changed at
/// `since` or later (a copy, a rename, an overwrite: `cp -p` keeps the modification
/// time, not the change time). For `git`, also the repository's configuration and
/// hooks and the user's git configuration, which decide what git runs; for every word,
/// `/etc/ld.so.preload` (a library every program loads). A word that names no file (a
/// builtin, a function) is not.
#[must_use]
pub fn program_written_since(
    word: &str,
    ctx: &crate::ToolContext,
    since: std::time::SystemTime,
) -> bool {
    let changed = |path: &Path| {
        std::fs::symlink_metadata(path)
            .ok()
            .zip(std::fs::metadata(path).ok())
            .is_some_and(|(link, meta)| changed_since(&link, since) || changed_since(&meta, since))
    };
    // A library every program loads, which only root can plant: any word then.
    if changed(Path::new("/etc/ld.so.preload")) {
        return true;
    }
    // The word's own file (a symlink's change time is its own), then where it leads.
    let found = if word.contains('/') {
        Some(lexical_path(&ctx.cwd, word))
    } else {
        let path = ctx
            .child_env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"))
            .unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| ctx.cwd.join(dir).join(word))
            .find(|p| p.is_file())
    };
    let Some(found) = found else {
        return false;
    };
    let program = resolve_path(&ctx.cwd, &found.to_string_lossy());
    if ctx.is_inside_working_dirs(&program)
        || ctx.is_inside_working_dirs(&found)
        || changed(&found)
        || changed(&program)
    {
        return true;
    }
    if Path::new(word).file_name().is_some_and(|n| n == "git") {
        return git_config_changed(ctx, &changed);
    }
    false
}

fn changed_since(meta: &std::fs::Metadata, since: std::time::SystemTime) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(since) = since.duration_since(std::time::UNIX_EPOCH) else {
        return true;
    };
    let (secs, nanos) = (meta.ctime(), meta.ctime_nsec());
    let Ok(secs) = u64::try_from(secs) else {
        return false;
    };
    std::time::Duration::new(secs, u32::try_from(nanos).unwrap_or(0)) >= since
}

/// Whether what decides the code git runs in `ctx.cwd` changed: the `.git` entry of the
/// nearest repository above the cwd, its `config`, `config.worktree`, `commondir` and
/// hooks, and the user's `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config`.
fn git_config_changed(ctx: &crate::ToolContext, changed: &dyn Fn(&Path) -> bool) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let user = [
        home.map(|h| h.join(".gitconfig")),
        xdg.map(|x| x.join("git/config")),
    ];
    if user.iter().flatten().any(|p| changed(p)) {
        return true;
    }
    let Some(dot_git) = ctx
        .cwd
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.symlink_metadata().is_ok())
    else {
        return false;
    };
    if changed(&dot_git) {
        return true;
    }
    let hooks = dot_git.join("hooks");
    ["config", "config.worktree", "commondir", "hooks"]
        .iter()
        .any(|name| changed(&dot_git.join(name)))
        || std::fs::read_dir(&hooks)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| changed(&entry.path()))
}
