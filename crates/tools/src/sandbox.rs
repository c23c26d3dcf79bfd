//! The kernel holds the line: Bash commands run in namespaces of their own, under a
//! Landlock ruleset and a seccomp filter.
//!
//! - [`SandboxPolicy::ReadOnly`] (plan mode): reads only under the allowed roots (the
//!   working directories, the system's directories, toolchains under the home directory
//!   and `sandbox.readRoots`, see [`SandboxAccess`]); writes only to a private temp dir
//!   (`TMPDIR`) and the few devices of its `/dev`.
//! - [`SandboxPolicy::Workspace`] (`"sandbox": {"enabled": true}` in settings): also
//!   writes inside the working directories, except the [`protected_paths`] in them.
//! - A private mount namespace ([`namespace`]) makes the rest of the filesystem
//!   read-only (so chmod, chown and timestamps outside are refused too), mounts a `/dev`
//!   of `null`, `zero`, `full`, `random`, `urandom`, `tty`, a private `pts` and `shm`,
//!   and pins denied paths so they cannot be renamed or linked. A new PID namespace with
//!   its own `/proc` shows the command only its own processes.
//! - A seccomp filter ([`seccomp`]) refuses sockets the policy does not allow (no
//!   network, no `AF_UNIX` unless `sandbox.allowUnixSockets`), device nodes, mounts,
//!   namespaces, kernel modules and the like. Landlock refuses TCP connect and bind too
//!   (ABI 4+) and signals and abstract sockets outside the sandbox (ABI 6).
//! - Paths that `Read(…)` deny rules name ([`ReadDenied`]) cannot be read: Landlock only
//!   grants, so instead of read on a root the ruleset grants read on every entry of each
//!   ancestor of a denied path except the one leading to it (see [`read_grants`]).
//!
//! The parser and classifier only decide when to ask; this decides what can happen.
//! Where the kernel has no Landlock ([`landlock_abi`] is `None`), or this process may not
//! create the namespaces ([`namespaces_available`]), a policy is [`unenforceable`]: the
//! session says so once, and the permission check asks before every Bash command the
//! sandbox would have confined.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

mod access;
pub mod namespace;
mod placeholder;
pub mod seccomp;

pub use access::{
    GIT_PROTECTED, HOME_NEVER_READ, HOME_READ_ROOTS, SYSTEM_NEVER_READ, SYSTEM_READ_ROOTS,
    SandboxAccess, pinned_parents, protected_paths,
};
pub use namespace::available as namespaces_available;

/// What a sandboxed command may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxPolicy {
    /// Nothing but `/dev/null` and a private temp dir.
    ReadOnly {
        /// Whether TCP connections stay allowed (kernels without network rules cannot forbid them).
        allow_network: bool,
    },
    /// The working directories too.
    Workspace {
        /// Whether TCP connections stay allowed (kernels without network rules cannot forbid them).
        allow_network: bool,
    },
}

/// The policies of a session whose mode can change: `plan` while the shared mode is
/// plan, `other` in every other mode (`None`: unconfined). A policy is what the session
/// wants; on a kernel without Landlock it is [`unenforceable`] and commands are asked
/// about instead.
#[derive(Debug, Clone)]
pub struct SandboxByMode {
    /// The session's mode, read at each command.
    pub mode: crate::ModeHandle,
    /// The policy while the mode is plan.
    pub plan: Option<SandboxPolicy>,
    /// The policy in every other mode.
    pub other: Option<SandboxPolicy>,
    /// What sandboxed commands may not read, whatever the policy: read at each
    /// command, so a deny rule added mid-session holds from the next command on.
    pub read_denied: ReadDeniedSource,
    /// Set once the session has said that this kernel cannot enforce its sandbox.
    told_unenforceable: Arc<AtomicBool>,
}

impl SandboxByMode {
    /// The policies of a session whose mode is `mode`.
    #[must_use]
    pub fn new(
        mode: crate::ModeHandle,
        plan: Option<SandboxPolicy>,
        other: Option<SandboxPolicy>,
        read_denied: impl Into<ReadDeniedSource>,
    ) -> Self {
        Self {
            mode,
            plan,
            other,
            read_denied: read_denied.into(),
            told_unenforceable: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether the policy for the mode now is [`unenforceable`]. The first time it is,
    /// the session says so on stderr (once per session, also when the session started
    /// unconfined and switched into plan mode later).
    #[must_use]
    pub fn unenforceable_now(&self) -> bool {
        let unenforceable = unenforceable(self.now().as_ref());
        if unenforceable {
            self.tell_unenforceable();
        }
        unenforceable
    }

    /// Stops later notices on stderr: the REPL draws on the terminal, and its question
    /// for each such command already gives the reason.
    pub fn quiet_from_now(&self) {
        self.told_unenforceable.store(true, Ordering::SeqCst);
    }

    /// Says once per session that this kernel has no Landlock, or that this process may
    /// not create the namespaces the sandbox needs.
    pub fn tell_unenforceable(&self) {
        if !self.told_unenforceable.swap(true, Ordering::SeqCst) {
            if landlock_abi().is_none() {
                eprintln!("{NO_LANDLOCK_WARNING}");
            } else {
                eprintln!("{NO_NAMESPACES_WARNING}");
            }
        }
    }

    /// The policy for the mode now.
    #[must_use]
    pub fn now(&self) -> Option<SandboxPolicy> {
        match self.mode.get() {
            crate::PermissionMode::Plan => self.plan.clone(),
            crate::PermissionMode::Default
            | crate::PermissionMode::AcceptEdits
            | crate::PermissionMode::BypassPermissions => self.other.clone(),
        }
    }
}

impl SandboxPolicy {
    fn allow_network(&self) -> bool {
        match self {
            Self::ReadOnly { allow_network } | Self::Workspace { allow_network } => *allow_network,
        }
    }
}

/// A path a `Read(…)` deny rule names, as the sandbox enforces it.
#[derive(Debug, Clone)]
pub enum DeniedPath {
    /// This path and everything beneath it, whether it exists yet or not.
    Exact(PathBuf),
    /// The entries under `root` that `matches` accepts (and everything beneath them),
    /// found by walking `root` when a command starts.
    Matching {
        /// The literal directory the pattern starts at.
        root: PathBuf,
        /// Which entries under `root` the rule denies.
        matches: crate::paths::PathFilter,
    },
}

/// What sandboxed commands may not read: the paths of the session's `Read(…)` deny
/// rules, resolved against its cwd.
#[derive(Debug, Clone, Default)]
pub struct ReadDenied {
    /// One entry per deny rule that names something on disk.
    pub paths: Vec<DeniedPath>,
}

impl ReadDenied {
    /// The concrete paths now: exact ones as they are, patterns searched under their
    /// root (not following symlinked directories), each canonical where it exists.
    ///
    /// # Errors
    /// A pattern whose root holds more than [`MAX_SEARCHED_ENTRIES`] entries: the rule
    /// cannot be enforced, so the command does not run.
    pub fn resolve(&self) -> Result<BTreeSet<PathBuf>, SandboxError> {
        let mut out = BTreeSet::new();
        for denied in &self.paths {
            match denied {
                DeniedPath::Exact(path) => {
                    out.insert(canonical(path));
                }
                DeniedPath::Matching { root, matches } => {
                    search(root, matches, &mut out)?;
                }
            }
        }
        Ok(out)
    }
}

/// Where the sandbox finds what commands may not read: fixed, or asked at each command
/// (a session's permission policy, which `addRules` or an "always deny" answer rebuilds).
#[derive(Clone)]
pub struct ReadDeniedSource(Arc<dyn Fn() -> ReadDenied + Send + Sync>);

impl ReadDeniedSource {
    /// Asks `now` at each command.
    pub fn live(now: impl Fn() -> ReadDenied + Send + Sync + 'static) -> Self {
        Self(Arc::new(now))
    }

    /// What is denied now.
    #[must_use]
    pub fn now(&self) -> ReadDenied {
        (self.0)()
    }
}

impl From<ReadDenied> for ReadDeniedSource {
    fn from(denied: ReadDenied) -> Self {
        Self::live(move || denied.clone())
    }
}

impl Default for ReadDeniedSource {
    fn default() -> Self {
        ReadDenied::default().into()
    }
}

impl std::fmt::Debug for ReadDeniedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadDeniedSource")
    }
}

/// What a session says once when its sandbox cannot be enforced.
pub const NO_LANDLOCK_WARNING: &str = "warning: this kernel has no Landlock, so Bash cannot be sandboxed; every command the sandbox would confine will be asked about instead";
/// What a session says once when it may not create the sandbox's namespaces (not root,
/// and unprivileged user namespaces are off).
pub const NO_NAMESPACES_WARNING: &str = "warning: this system does not let gyre create user namespaces (unprivileged user namespaces are off), so Bash cannot be sandboxed; every command the sandbox would confine will be asked about instead";

/// Entries a pattern rule may search through per command before gyre gives up on
/// enforcing it (and refuses to run the command).
pub const MAX_SEARCHED_ENTRIES: usize = 200_000;
/// Read rules the ruleset may hold (one per sibling of a denied path's ancestors).
pub const MAX_READ_RULES: usize = 4_096;

/// `path` with symlinks resolved as far as it exists (Landlock sees real paths).
fn canonical(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (
            existing.file_name().map(ToOwned::to_owned),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Adds the entries under `root` that `matches` accepts to `out`.
fn search(
    root: &Path,
    matches: &crate::paths::PathFilter,
    out: &mut BTreeSet<PathBuf>,
) -> Result<(), SandboxError> {
    let root = canonical(root);
    if matches.matches(&root) {
        out.insert(root);
        return Ok(());
    }
    let mut seen = 0usize;
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_SEARCHED_ENTRIES {
                return Err(SandboxError::TooManyEntries { root });
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if matches.matches(&path) {
                // A symlink's target is what the kernel checks.
                out.insert(if kind.is_symlink() {
                    canonical(&path)
                } else {
                    path
                });
            } else if kind.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}

/// A path the ruleset grants read on, and whether it is a directory split because a
/// denied path lies beneath it (then only listing it is granted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadGrant {
    /// The file or directory granted.
    pub path: PathBuf,
    /// Only listing is granted: a denied path lies beneath it.
    pub list_only: bool,
}

/// The read rules that cover everything but `denied` (canonical paths).
///
/// Landlock rules only grant, and a rule on a directory covers all beneath it. So an
/// ancestor of a denied path gets no read rule of its own: each of its entries does,
/// except the one leading to the denied path, which is split the same way in turn. Split
/// directories may still be listed (`ls` works; the names under them are visible). What
/// is created in a split directory after the ruleset is built (by the command itself,
/// say) has no rule and cannot be read by that command. Symlinks get no rule: the
/// kernel checks the path they lead to.
///
/// # Errors
/// More than [`MAX_READ_RULES`] rules (a denied path under a directory with that many
/// entries), or a split directory that cannot be listed.
pub fn read_grants(denied: &BTreeSet<PathBuf>) -> Result<Vec<ReadGrant>, SandboxError> {
    read_grants_under(&[PathBuf::from("/")], denied)
}

/// The read rules that cover `roots` but `denied` (canonical paths), split as
/// [`read_grants`] says. A root beneath a denied path, or that does not exist, gets none.
///
/// # Errors
/// As [`read_grants`].
pub fn read_grants_under(
    roots: &[PathBuf],
    denied: &BTreeSet<PathBuf>,
) -> Result<Vec<ReadGrant>, SandboxError> {
    let mut grants = Vec::new();
    let roots: BTreeSet<PathBuf> = roots
        .iter()
        .filter_map(|root| root.canonicalize().ok())
        .collect();
    for root in &roots {
        if denied.iter().any(|d| root.starts_with(d))
            || roots.iter().any(|r| r != root && root.starts_with(r))
        {
            continue;
        }
        if !root.is_dir() || !denied.iter().any(|d| d.starts_with(root)) {
            grants.push(ReadGrant {
                path: root.clone(),
                list_only: false,
            });
        } else {
            split(root, denied, &mut grants)?;
        }
    }
    Ok(grants)
}

fn split(
    dir: &Path,
    denied: &BTreeSet<PathBuf>,
    grants: &mut Vec<ReadGrant>,
) -> Result<(), SandboxError> {
    grants.push(ReadGrant {
        path: dir.to_path_buf(),
        list_only: true,
    });
    let entries = std::fs::read_dir(dir).map_err(|e| SandboxError::Path {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        if denied.contains(&path) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            continue;
        }
        if kind.is_dir() && denied.iter().any(|d| d.starts_with(&path)) {
            split(&path, denied, grants)?;
        } else {
            grants.push(ReadGrant {
                path,
                list_only: false,
            });
        }
        if grants.len() > MAX_READ_RULES {
            return Err(SandboxError::TooManyRules {
                dir: dir.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Whether `policy` asks for a sandbox this system cannot give (no Landlock, or no
/// namespaces for this process): such a command must be asked about, never run as if
/// confined.
#[must_use]
pub fn unenforceable(policy: Option<&SandboxPolicy>) -> bool {
    policy.is_some() && (landlock_abi().is_none() || !namespaces_available())
}

/// Why this system cannot enforce the sandbox, for the question asked instead.
#[must_use]
pub fn unenforceable_reason() -> &'static str {
    if landlock_abi().is_none() {
        "this kernel has no Landlock, so Bash cannot run in the sandbox this session asks for"
    } else {
        "this system does not let gyre create user namespaces (unprivileged user namespaces are off), so Bash cannot run in the sandbox this session asks for"
    }
}

/// Why a command could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel has no Landlock: the command is not run unconfined.
    #[error(
        "this kernel has no Landlock, so the sandbox cannot be enforced; the command was not run"
    )]
    Unsupported,
    /// This process may not create the namespaces the sandbox needs.
    #[error(
        "this system does not let gyre create user namespaces, so the sandbox cannot be enforced; the command was not run"
    )]
    NoNamespaces,
    /// The kernel refused the ruleset.
    #[error("could not build the sandbox: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    /// The mounts could not be prepared.
    #[error(transparent)]
    Mounts(#[from] namespace::PlanError),
    /// The seccomp filter could not be built.
    #[error(transparent)]
    Filter(#[from] seccomp::FilterError),
    /// A directory of the rules could not be opened.
    #[error("could not open {path} for the sandbox rules: {message}")]
    Path {
        /// The path that could not be opened.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The private temp dir could not be created.
    #[error("could not create the sandbox's temp dir: {0}")]
    TempDir(std::io::Error),
    /// A deny pattern matched under a tree too large to search before each command.
    #[error(
        "a Read deny rule could not be enforced in the sandbox: searching {root} for what it denies went past {MAX_SEARCHED_ENTRIES} entries; anchor the rule to a path (e.g. Read(./config/.env)); the command was not run"
    )]
    TooManyEntries {
        /// Where the search started.
        root: PathBuf,
    },
    /// A directory to split has more entries than a ruleset may hold.
    #[error(
        "a Read deny rule could not be enforced in the sandbox: {dir} has too many entries to grant one by one (more than {MAX_READ_RULES} rules); the command was not run"
    )]
    TooManyRules {
        /// The directory with too many entries.
        dir: PathBuf,
    },
}

/// In debug builds (the ones tests run), this variable makes [`landlock_abi`] report a
/// kernel without Landlock, so the fallback can be tested on machines that have it. It
/// can only take the sandbox away, and a project settings file cannot set `GYRE_*`.
pub const SIMULATE_NO_LANDLOCK_ENV: &str = "GYRE_TEST_NO_LANDLOCK";

/// The newest Landlock ABI this kernel supports, probed once; `None` without Landlock.
#[must_use]
pub fn landlock_abi() -> Option<ABI> {
    static ABI_FOUND: OnceLock<Option<ABI>> = OnceLock::new();
    *ABI_FOUND.get_or_init(|| {
        if cfg!(debug_assertions) && std::env::var_os(SIMULATE_NO_LANDLOCK_ENV).is_some() {
            return None;
        }
        [ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1]
            .into_iter()
            .find(|abi| {
                Ruleset::default()
                    .set_compatibility(CompatLevel::HardRequirement)
                    .handle_access(AccessFs::from_all(*abi))
                    .and_then(Ruleset::create)
                    .is_ok()
            })
    })
}

/// Whether this kernel's Landlock can refuse TCP connect and bind (ABI 4 and later).
#[must_use]
pub fn network_rules_supported() -> bool {
    landlock_abi().is_some_and(|abi| abi >= ABI::V4)
}

/// Everything the child applies between fork and exec, prepared in gyre.
#[derive(Debug)]
pub enum ChildSetup {
    /// The sandbox of a policy: namespaces, mounts, Landlock, seccomp.
    Sandbox(Box<SandboxSetup>),
    /// An unsandboxed command of a session with `Read(…)` deny rules: the denied paths
    /// covered in a private mount namespace.
    Masks(namespace::MaskPlan),
}

/// What the child of a sandboxed command applies.
#[derive(Debug)]
pub struct SandboxSetup {
    ruleset: RulesetCreated,
    mounts: namespace::MountPlan,
    filter: seccompiler::BpfProgram,
    /// Rights on the command's own `/proc`, `/dev` and `/dev/shm`, granted in the
    /// child once they are mounted.
    proc_access: BitFlags<AccessFs>,
    dev_access: BitFlags<AccessFs>,
    shm_access: BitFlags<AccessFs>,
}

/// A command's sandbox: what the child applies, the temp dir it may write, and the
/// protected paths to check when it is done.
#[derive(Debug)]
pub struct Confinement {
    /// Applied in the child by [`confine_child`].
    pub child: ChildSetup,
    /// Removed when the command is done.
    pub temp_dir: Option<tempfile::TempDir>,
    /// The empty files and directories that cover denied paths, removed when the
    /// command is done.
    pub placeholders: Option<tempfile::TempDir>,
    /// Protected paths that did not exist when the command started.
    pub sweep: ProtectedSweep,
}

/// Protected paths that did not exist when a command started. Each has a placeholder
/// the command's namespace mounts read-only (see [`placeholder`]), released when the
/// command is done; where none could be made, what the command created there is
/// removed once its PID namespace, and everything it started, is gone.
#[derive(Debug, Default)]
pub struct ProtectedSweep {
    missing: Vec<PathBuf>,
    placeholders: placeholder::Lease,
}

impl ProtectedSweep {
    /// Releases the placeholders and removes what was created at the protected paths
    /// that had none; the paths removed, for the command's output.
    #[must_use]
    pub fn sweep(self) -> Vec<PathBuf> {
        let Self {
            missing,
            placeholders,
        } = self;
        drop(placeholders);
        let mut removed = Vec::new();
        for path in missing {
            let Ok(meta) = path.symlink_metadata() else {
                continue;
            };
            let gone = if meta.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if gone.is_ok() {
                removed.push(path);
            }
        }
        removed
    }

    /// The note for a command's output when `removed` is not empty.
    #[must_use]
    pub fn note(removed: &[PathBuf]) -> Option<String> {
        (!removed.is_empty()).then(|| {
            let names: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
            format!(
                "The sandbox does not let commands create {}: removed. gyre's and git's settings, hooks and MCP servers are edited with Edit/Write, which ask.",
                names.join(", ")
            )
        })
    }
}

/// The rights no grant gives: device nodes (seccomp refuses them too).
fn no_devices(access: BitFlags<AccessFs>) -> BitFlags<AccessFs> {
    access & !(AccessFs::MakeChar | AccessFs::MakeBlock)
}

/// The sandbox for one command run in `cwd`; `None` without a policy. Reads are granted under the
/// working directories and `access`'s roots but under `read_denied` (canonical paths,
/// see [`read_grants`]) and `access`'s never-read paths.
///
/// # Errors
/// No Landlock or no namespaces while a policy is asked for, or a rule that cannot be
/// built.
pub fn confinement(
    policy: Option<&SandboxPolicy>,
    cwd: &Path,
    working_dirs: &[PathBuf],
    read_denied: &BTreeSet<PathBuf>,
    access: &SandboxAccess,
) -> Result<Option<Confinement>, SandboxError> {
    let Some(policy) = policy else {
        return Ok(None);
    };
    let abi = landlock_abi().ok_or(SandboxError::Unsupported)?;
    if !namespaces_available() {
        return Err(SandboxError::NoNamespaces);
    }
    let mut denied = read_denied.clone();
    denied.extend(access.never_read().iter().map(|p| canonical(p)));
    let mut roots: Vec<PathBuf> = working_dirs.to_vec();
    roots.extend(access.roots());
    let grants = read_grants_under(&roots, &denied)?;
    let temp_dir = tempfile::Builder::new()
        .prefix("gyre-sandbox-")
        .tempdir()
        .map_err(SandboxError::TempDir)?;
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
    if !policy.allow_network() {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    let mut created = ruleset.create()?;
    for grant in &grants {
        let access = if grant.list_only {
            AccessFs::ReadDir.into()
        } else {
            read
        };
        // An entry gone since it was listed (a busy /tmp) needs no rule.
        if let Ok(rule) = path_rule(&grant.path, access, abi) {
            created = created.add_rule(rule)?;
        }
    }
    created = created.add_rule(path_rule(temp_dir.path(), no_devices(all), abi)?)?;
    let mut writable = vec![temp_dir.path().to_path_buf()];
    let mut read_only = Vec::new();
    let mut missing = Vec::new();
    let mut placeholders = placeholder::Lease::default();
    // Before placeholders are made: a `.git` placeholder is covered, not pinned.
    let parents: Vec<PathBuf> = working_dirs
        .iter()
        .flat_map(|dir| pinned_parents(dir))
        .collect();
    if matches!(policy, SandboxPolicy::Workspace { .. }) {
        // Writes in the working dirs; reading there is what the grants above say, so a
        // denied file inside the project stays unreadable.
        for dir in working_dirs {
            created = created.add_rule(path_rule(dir, no_devices(all & !read), abi)?)?;
            writable.push(dir.clone());
        }
        for dir in working_dirs {
            for path in protected_paths(dir) {
                // A placeholder where nothing is (or what appeared meanwhile) is
                // covered like an existing path.
                if path.symlink_metadata().is_err()
                    && !placeholders.hold(&path)
                    && path.symlink_metadata().is_err()
                {
                    missing.push(path);
                    continue;
                }
                // A protected name that links elsewhere protects what it leads to.
                let real = canonical(&path);
                if writable.iter().any(|w| real.starts_with(canonical(w))) {
                    read_only.push(real);
                }
            }
        }
    }
    let mut pinned = pinned_paths(&writable, &denied);
    if matches!(policy, SandboxPolicy::Workspace { .. }) {
        pinned.extend(parents);
    }
    let mounts = namespace::MountPlan::new(cwd, &writable, &read_only, &pinned, temp_dir.path())?;
    let filter = seccomp::filter(seccomp::SocketPolicy {
        network: policy.allow_network(),
        unix: access.allow_unix_sockets,
    })?;
    let dev = AccessFs::WriteFile | AccessFs::IoctlDev;
    Ok(Some(Confinement {
        child: ChildSetup::Sandbox(Box::new(SandboxSetup {
            ruleset: created,
            mounts,
            filter,
            proc_access: read,
            dev_access: (read | dev) & all,
            shm_access: no_devices(all),
        })),
        temp_dir: Some(temp_dir),
        placeholders: None,
        sweep: ProtectedSweep {
            missing,
            placeholders,
        },
    }))
}

/// For a command that runs unsandboxed: the paths `read_denied` names (canonical) that
/// exist, covered by empty read-only files and directories in a private mount
/// namespace, so the kernel holds the deny rules in every mode; `None` when none
/// exists, or when this system cannot create the namespace (the permission check then
/// asked, and the user let the command run as it is).
///
/// # Errors
/// A placeholder that cannot be made.
pub fn masks(
    cwd: &Path,
    read_denied: &BTreeSet<PathBuf>,
) -> Result<Option<Confinement>, SandboxError> {
    if read_denied.is_empty() || !namespaces_available() {
        return Ok(None);
    }
    let placeholders = tempfile::Builder::new()
        .prefix("gyre-masks-")
        .tempdir()
        .map_err(SandboxError::TempDir)?;
    let Some(plan) = namespace::MaskPlan::new(cwd, read_denied, placeholders.path())? else {
        return Ok(None);
    };
    Ok(Some(Confinement {
        child: ChildSetup::Masks(plan),
        temp_dir: None,
        placeholders: Some(placeholders),
        sweep: ProtectedSweep::default(),
    }))
}

/// Whether the kernel cannot hold `read_denied` for an unsandboxed command: some denied
/// path exists and this system cannot create the namespace that covers it.
#[must_use]
pub fn masks_unenforceable(read_denied: &BTreeSet<PathBuf>) -> bool {
    !namespaces_available() && read_denied.iter().any(|p| p.symlink_metadata().is_ok())
}

/// The denied paths inside the writable directories, and their ancestors up to those
/// directories, outermost first: made mount points of their own, they cannot be renamed
/// (`EBUSY`) or linked (`EXDEV`), so a denied file stays where its rule names it.
fn pinned_paths(writable: &[PathBuf], denied: &BTreeSet<PathBuf>) -> Vec<PathBuf> {
    let mut pinned = BTreeSet::new();
    for dir in writable {
        let dir = canonical(dir);
        for path in denied {
            if path == &dir || !path.starts_with(&dir) || path.symlink_metadata().is_err() {
                continue;
            }
            let mut at = Some(path.as_path());
            while let Some(p) = at {
                if p == dir {
                    break;
                }
                pinned.insert(p.to_path_buf());
                at = p.parent();
            }
        }
    }
    // Sorted, a directory comes before what is beneath it.
    pinned.into_iter().collect()
}

fn path_rule(
    path: &Path,
    access: landlock::BitFlags<AccessFs>,
    abi: ABI,
) -> Result<PathBeneath<PathFd>, SandboxError> {
    let fd = PathFd::new(path).map_err(|e| SandboxError::Path {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    // A file (`/dev/null`) takes only the rights that apply to files.
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    Ok(PathBeneath::new(fd, access))
}

/// Grants `access` beneath `path` in the child, where `path` was mounted after the
/// ruleset was built. A path that does not open needs no rule.
fn grant_in_child(
    ruleset: RulesetCreated,
    path: &std::ffi::CStr,
    access: BitFlags<AccessFs>,
) -> std::io::Result<RulesetCreated> {
    let Ok(fd) = rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return Ok(ruleset);
    };
    ruleset
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// Applies `setup` to the child of `command` between fork and exec: the namespaces and
/// mounts, then Landlock, then seccomp.
pub fn confine_child(command: &mut tokio::process::Command, setup: ChildSetup) {
    let mut setup = Some(setup);
    let restrict = move || -> std::io::Result<()> {
        let setup = match setup.take() {
            Some(ChildSetup::Sandbox(setup)) => setup,
            Some(ChildSetup::Masks(plan)) => {
                namespace::enter_masked(&plan)?;
                drop_mount_capabilities();
                return Ok(());
            }
            None => return Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
        };
        namespace::enter(&setup.mounts)?;
        drop_ptrace_capability();
        let mut ruleset = grant_in_child(setup.ruleset, c"/proc", setup.proc_access)?;
        ruleset = grant_in_child(ruleset, c"/dev", setup.dev_access)?;
        ruleset = grant_in_child(ruleset, c"/dev/shm", setup.shm_access)?;
        // No allocation after fork: the errno says what failed.
        ruleset
            .restrict_self()
            .map(drop)
            .map_err(|_| std::io::Error::last_os_error())?;
        seccomp::apply(&setup.filter)
    };
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, a single-threaded copy
    // of gyre. It allocates nothing on the success path: `namespace::enter` makes
    // syscalls on C strings prepared in the parent (unshare, fork, mount, open, mkdir,
    // symlink, waitpid, _exit); the Landlock rules added here open a path and make one
    // syscall each; restrict_self makes two syscalls (prctl NO_NEW_PRIVS and
    // landlock_restrict_self); the seccomp filter was compiled in the parent and is
    // installed with one syscall. On failure the error is reported and the command
    // does not run.
    unsafe {
        command.pre_exec(restrict);
    }
}

/// Marks every descriptor above 2 close-on-exec, so what gyre inherited from its parent
/// (an open file, a socket) reaches no command, hook or server it starts. Descriptors
/// gyre opens itself are close-on-exec already. Call first thing in `main`.
#[allow(unsafe_code)]
pub fn close_inherited_descriptors() {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on descriptors; it
    // closes none and touches no memory of this process.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return;
    }
    // Kernels before 5.11: one descriptor at a time.
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_GETFD/F_SETFD on a number that may be closed by now (the listing's
        // own descriptor) fail with EBADF and touch no memory.
        let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        let _ = rc;
    }
}

/// Environment variables that hold gyre's own credentials.
pub const SECRET_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "CLAUDE_CODE_OAUTH_TOKEN",
];

/// Keeps gyre's credentials out of `/proc/<gyre>/environ`: each variable in `names` is
/// copied to the heap (so `std::env::var` still finds it) and its bytes in the original
/// environment block, which that file shows, are overwritten; then the process is made
/// non-dumpable, so processes of the same user cannot read its memory either. Call it
/// first thing in `main`, before any other thread exists.
pub fn hide_process_environment(names: &[&str]) {
    for name in names {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        let original = environ_entry(name);
        set_env(name, &value);
        if let Some(entry) = original {
            scrub(entry);
        }
    }
    set_non_dumpable();
}

/// The original `NAME=value` string of `name`, as a pointer into the environment block.
#[allow(unsafe_code)]
fn environ_entry(name: &str) -> Option<*mut libc::c_char> {
    unsafe extern "C" {
        static mut environ: *mut *mut libc::c_char;
    }
    let prefix = format!("{name}=");
    // SAFETY: single-threaded (documented precondition); `environ` is the C library's
    // NULL-terminated array of NUL-terminated strings, read without modification here.
    unsafe {
        let mut p = environ;
        if p.is_null() {
            return None;
        }
        while !(*p).is_null() {
            let entry = std::ffi::CStr::from_ptr(*p);
            if entry.to_bytes().starts_with(prefix.as_bytes()) {
                return Some(*p);
            }
            p = p.add(1);
        }
    }
    None
}

#[allow(unsafe_code)]
fn set_env(name: &str, value: &std::ffi::OsStr) {
    // SAFETY: single-threaded (documented precondition of hide_process_environment).
    unsafe { std::env::set_var(name, value) };
}

/// Overwrites the value of a `NAME=value` string in place (length kept).
#[allow(unsafe_code)]
fn scrub(entry: *mut libc::c_char) {
    // SAFETY: `entry` points to a NUL-terminated string in the environment block that
    // no one references any more (set_env replaced it in `environ`); writing within its
    // length keeps the terminator.
    unsafe {
        let len = libc::strlen(entry);
        let mut i = 0;
        while i < len && *entry.add(i) != b'=' as libc::c_char {
            i += 1;
        }
        for j in (i + 1)..len {
            *entry.add(j) = b'x' as libc::c_char;
        }
    }
}

/// Removes `CAP_SYS_PTRACE` from the bounding set of the child before it execs, so a
/// command run as root cannot read the memory of non-dumpable gyre: the exec recomputes
/// root's permitted and effective sets from the bounding set, and `no_new_privs` (set by
/// Landlock) keeps later execs from regaining it. (`/proc/<gyre>/environ` stays readable
/// to root without the capability on Linux 6.18; it holds no secret.) Without
/// `CAP_SETPCAP` (not root) this fails harmlessly: such a process has no
/// `CAP_SYS_PTRACE` to lose.
fn drop_ptrace_capability() {
    let _ = rustix::thread::remove_capability_from_bounding_set(
        rustix::thread::CapabilitySet::SYS_PTRACE,
    );
}

/// Removes from the bounding set of an unsandboxed root command the capabilities that
/// would undo or get past the masks over denied paths: `CAP_SYS_ADMIN` (unmount them)
/// and `CAP_DAC_READ_SEARCH` (`open_by_handle_at`). As in [`drop_ptrace_capability`],
/// exec recomputes root's sets from the bounding set; a user who is not root has
/// neither to lose.
fn drop_mount_capabilities() {
    use rustix::thread::CapabilitySet;
    for capability in [CapabilitySet::SYS_ADMIN, CapabilitySet::DAC_READ_SEARCH] {
        let _ = rustix::thread::remove_capability_from_bounding_set(capability);
    }
}

fn set_non_dumpable() {
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
}
