//! Where a sandboxed command may read besides the working directories, and what it may
//! never read: the kernel refuses reads outside these roots, whatever the command.

use std::path::{Path, PathBuf};

/// The system's program, library and configuration directories. The command's own
/// `/proc` and `/dev` are granted in the child, where they are mounted.
pub const SYSTEM_READ_ROOTS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/snap",
    "/sys",
    // Where /etc/resolv.conf points on systemd hosts.
    "/run/systemd/resolve",
];

/// Secrets under the system roots: never readable, even by root.
pub const SYSTEM_NEVER_READ: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssl/private",
];

/// Toolchains and caches under the home directory that programs need to run.
pub const HOME_READ_ROOTS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".pyenv",
    ".cache/pip",
    ".cache/go-build",
    ".cache/yarn",
    ".local/bin",
    ".local/lib",
    ".m2",
    ".gradle",
    "go",
    ".gitconfig",
];

/// Secrets under the home directory: never readable, even beneath a read root.
pub const HOME_NEVER_READ: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".kube",
    ".docker",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// What sandboxed commands may reach beyond the working directories and the temp dir.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxAccess {
    /// Directories readable besides the defaults (settings `sandbox.readRoots`).
    pub read_roots: Vec<PathBuf>,
    /// Whether commands may open `AF_UNIX` sockets (settings `sandbox.allowUnixSockets`).
    pub allow_unix_sockets: bool,
    /// The user's home: toolchain directories under it are read roots, its secrets never.
    pub home: Option<PathBuf>,
    /// gyre's own configuration, credentials and transcripts: never readable.
    pub gyre_home: Option<PathBuf>,
}

impl SandboxAccess {
    /// The defaults for this process: `HOME`, and `GYRE_HOME` (else `~/.gyre`).
    #[must_use]
    pub fn from_env() -> Self {
        let home = std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        let gyre_home = std::env::var_os("GYRE_HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".gyre")));
        Self {
            read_roots: Vec::new(),
            allow_unix_sockets: false,
            home,
            gyre_home,
        }
    }

    /// Adds `roots` (settings `sandbox.readRoots`) to the defaults.
    #[must_use]
    pub fn with_read_roots(mut self, roots: impl IntoIterator<Item = PathBuf>) -> Self {
        self.read_roots.extend(roots);
        self
    }

    /// Every directory reads are granted under, besides the working directories:
    /// the system roots, the toolchain roots under the home directory, the settings'.
    #[must_use]
    pub fn roots(&self) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = SYSTEM_READ_ROOTS.iter().map(PathBuf::from).collect();
        if let Some(home) = &self.home {
            roots.extend(HOME_READ_ROOTS.iter().map(|r| home.join(r)));
        }
        roots.extend(self.read_roots.iter().cloned());
        roots
    }

    /// What no grant covers, whatever the roots: the system's and the home directory's
    /// secrets and gyre's own home.
    #[must_use]
    pub fn never_read(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = SYSTEM_NEVER_READ.iter().map(PathBuf::from).collect();
        out.extend(
            self.home
                .iter()
                .flat_map(|home| HOME_NEVER_READ.iter().map(move |p| home.join(p))),
        );
        out.extend(self.gyre_home.iter().cloned());
        out
    }
}

/// What under `.git/` decides which code git runs: its config, hooks, the config and
/// hooks of submodules and worktrees, and the files that point git at another
/// repository's config (`commondir`) or add to it (`config.worktree`).
pub const GIT_PROTECTED: &[&str] = &[
    "config",
    "hooks",
    "modules",
    "worktrees",
    "commondir",
    "config.worktree",
];

/// The paths inside a writable directory that a sandboxed command may not write,
/// because the next session or the user's next git command would run what they hold:
/// gyre's and Claude's settings, the project's MCP servers, git's config and hooks
/// ([`GIT_PROTECTED`]; a `.git` file, a worktree's pointer, as a whole).
#[must_use]
pub fn protected_paths(dir: &Path) -> Vec<PathBuf> {
    let git = dir.join(".git");
    let mut out = vec![
        dir.join(".gyre"),
        dir.join(".claude"),
        dir.join(".mcp.json"),
    ];
    if git.is_dir() {
        out.extend(GIT_PROTECTED.iter().map(|name| git.join(name)));
    } else {
        out.push(git);
    }
    out
}

/// The directories that hold protected paths and must stay where they are: a `.git`
/// directory moved aside (its protected files with it) and replaced by a new one would
/// bring its own config.
#[must_use]
pub fn pinned_parents(dir: &Path) -> Vec<PathBuf> {
    let git = dir.join(".git");
    if git.is_dir() { vec![git] } else { Vec::new() }
}
