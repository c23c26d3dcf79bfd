//! The kernel holds the line: Bash commands run under a Landlock ruleset.
//!
//! - [`SandboxPolicy::ReadOnly`] (plan mode): the whole filesystem may be read and
//!   executed; writes only to `/dev/null` and a private temp dir (`TMPDIR`).
//! - [`SandboxPolicy::Workspace`] (`"sandbox": {"enabled": true}` in settings): also
//!   writes inside the working directories.
//! - TCP connect and bind are refused unless the network is allowed (Landlock ABI 4+).
//! - A sandboxed command runs in a Landlock domain of its own. Landlock forbids a domain
//!   to ptrace processes outside it, and the kernel checks exactly that before showing
//!   `/proc/<pid>/environ` or `mem`: it cannot read gyre's memory even as root. Outside
//!   the sandbox, [`hide_process_environment`] scrubs the secrets from the block
//!   `/proc/<pid>/environ` shows and makes gyre non-dumpable.
//!
//! The parser and classifier only decide when to ask; this decides what can happen.
//! Where the kernel has no Landlock, [`landlock_abi`] is `None`: the session says so once
//! and plan mode asks before every Bash command instead.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

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
/// plan, `other` in every other mode (`None`: unconfined, or no Landlock here).
#[derive(Debug, Clone)]
pub struct SandboxByMode {
    /// The session's mode, read at each command.
    pub mode: crate::ModeHandle,
    /// The policy while the mode is plan.
    pub plan: Option<SandboxPolicy>,
    /// The policy in every other mode.
    pub other: Option<SandboxPolicy>,
}

impl SandboxByMode {
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

/// Why a command could not be confined.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel has no Landlock: the command is not run unconfined.
    #[error(
        "this kernel has no Landlock, so the sandbox cannot be enforced; the command was not run"
    )]
    Unsupported,
    /// The kernel refused the ruleset.
    #[error("could not build the sandbox: {0}")]
    Ruleset(#[from] landlock::RulesetError),
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
}

/// The newest Landlock ABI this kernel supports, probed once; `None` without Landlock.
#[must_use]
pub fn landlock_abi() -> Option<ABI> {
    static ABI_FOUND: OnceLock<Option<ABI>> = OnceLock::new();
    *ABI_FOUND.get_or_init(|| {
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

/// A ruleset ready to be applied in the child, and the temp dir it may write.
#[derive(Debug)]
pub struct Confinement {
    pub(crate) ruleset: RulesetCreated,
    /// Removed when the command is done.
    pub temp_dir: Option<tempfile::TempDir>,
}

/// The ruleset for one command; `None` without a policy.
///
/// # Errors
/// No Landlock while a policy is asked for, or a rule that cannot be built.
pub fn confinement(
    policy: Option<&SandboxPolicy>,
    working_dirs: &[PathBuf],
) -> Result<Option<Confinement>, SandboxError> {
    let Some(policy) = policy else {
        return Ok(None);
    };
    let abi = landlock_abi().ok_or(SandboxError::Unsupported)?;
    let temp_dir = tempfile::Builder::new()
        .prefix("gyre-sandbox-")
        .tempdir()
        .map_err(SandboxError::TempDir)?;
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?;
    if !policy.allow_network() {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
    let mut created = ruleset
        .create()?
        .add_rule(path_rule(Path::new("/"), AccessFs::from_read(abi), abi)?)?
        .add_rule(path_rule(
            Path::new("/dev/null"),
            AccessFs::ReadFile | AccessFs::WriteFile,
            abi,
        )?)?
        .add_rule(path_rule(temp_dir.path(), all, abi)?)?;
    if matches!(policy, SandboxPolicy::Workspace { .. }) {
        for dir in working_dirs {
            created = created.add_rule(path_rule(dir, all, abi)?)?;
        }
    }
    Ok(Some(Confinement {
        ruleset: created,
        temp_dir: Some(temp_dir),
    }))
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

/// Applies `ruleset` to the child of `command` between fork and exec.
pub(crate) fn confine_child(command: &mut tokio::process::Command, ruleset: RulesetCreated) {
    let mut ruleset = Some(ruleset);
    let restrict = move || -> std::io::Result<()> {
        let Some(ruleset) = ruleset.take() else {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        };
        drop_ptrace_capability();
        // No allocation after fork: the errno says what failed.
        ruleset
            .restrict_self()
            .map(drop)
            .map_err(|_| std::io::Error::last_os_error())
    };
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec. It allocates nothing on
    // the success path: restrict_self makes two syscalls (prctl NO_NEW_PRIVS and
    // landlock_restrict_self) on a ruleset fd built in the parent and closes it. On
    // failure the error is reported and the command does not run.
    unsafe {
        command.pre_exec(restrict);
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

/// Removes `CAP_SYS_PTRACE` from the bounding set, so a command run as root cannot read
/// the memory or `/proc/<pid>/environ` of non-dumpable gyre. Without `CAP_SETPCAP` (not
/// root) this fails harmlessly: such a process has no `CAP_SYS_PTRACE` to lose.
fn drop_ptrace_capability() {
    let _ = rustix::thread::remove_capability_from_bounding_set(
        rustix::thread::CapabilitySet::SYS_PTRACE,
    );
}

fn set_non_dumpable() {
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
}
