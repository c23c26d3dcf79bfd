//! The private namespaces a sandboxed command runs in: a mount namespace whose view of
//! the filesystem is read-only but for the writable roots, with protected paths
//! read-only inside them, denied paths pinned (no rename, no link), a `/dev` of a few
//! character devices and a `/proc` of its own PID namespace.
//!
//! [`MountPlan`] is built in gyre (it allocates); [`enter`] runs in the forked child
//! before exec and only makes syscalls on the plan's prepared C strings. The child
//! unshares, forks once more so that the command is PID 1 of the new PID namespace
//! (which must be entered by a child), and the first child waits for it and exits with
//! its status. When the command's shell exits, the kernel kills whatever it left in the
//! namespace.

use std::ffi::{CStr, CString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags};
use rustix::thread::UnshareFlags;

/// The character devices a sandboxed command's `/dev` holds (as in a container).
pub const DEV_NODES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The links in that `/dev`: name and target.
const DEV_LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
    ("ptmx", "pts/ptmx"),
];

/// What the child mounts, prepared in gyre so that the child only makes syscalls.
#[derive(Debug)]
pub struct MountPlan {
    /// `/proc/self/uid_map` and `gid_map` contents, when gyre is not root and needs a
    /// user namespace to own the others.
    user_maps: Option<(CString, CString)>,
    /// Directories writable again after the whole tree is made read-only.
    writable: Vec<CString>,
    /// Paths inside the writable ones that stay read-only (settings, hooks, config).
    read_only: Vec<CString>,
    /// Paths made mount points of their own so they cannot be renamed or linked:
    /// denied files and their ancestors inside the writable directories.
    pinned: Vec<CString>,
    /// An empty directory in the sandbox's temp dir where `/dev` is assembled.
    dev_staging: CString,
    /// Host device, node in the staging dir.
    dev_nodes: Vec<(CString, CString)>,
    dev_pts: CString,
    dev_shm: CString,
    /// Target, link in the staging dir.
    dev_links: Vec<(CString, CString)>,
    /// The command's directory, entered again once the mounts are made (the one entered
    /// before them is on the read-only mount beneath).
    cwd: CString,
}

/// What [`MountPlan::new`] could not prepare.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A path holds a NUL byte (no such path can be mounted).
    #[error("{0} cannot be sandboxed: its name holds a NUL byte")]
    Nul(PathBuf),
    /// The staging dir for `/dev` could not be made.
    #[error("could not prepare the sandbox's /dev: {0}")]
    Staging(io::Error),
    /// The empty file or directory that covers a denied path could not be made.
    #[error("could not make what covers a Read-denied path: {0}")]
    Placeholder(io::Error),
}

fn c_path(path: &Path) -> Result<CString, PlanError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| PlanError::Nul(path.to_path_buf()))
}

impl MountPlan {
    /// The plan for one command run in `cwd`: `writable` directories (the temp dir, and
    /// the working dirs in the workspace sandbox), `read_only` paths inside them that
    /// exist, `pinned` paths, and `temp_dir`, where `/dev` is assembled.
    ///
    /// # Errors
    /// A path with a NUL byte, or a staging dir that cannot be made.
    pub fn new(
        cwd: &Path,
        writable: &[PathBuf],
        read_only: &[PathBuf],
        pinned: &[PathBuf],
        temp_dir: &Path,
    ) -> Result<Self, PlanError> {
        let staging = temp_dir.join(".dev");
        std::fs::create_dir(&staging).map_err(PlanError::Staging)?;
        let all = |paths: &[PathBuf]| paths.iter().map(|p| c_path(p)).collect::<Result<_, _>>();
        let dev_nodes = DEV_NODES
            .iter()
            .map(|name| Path::new("/dev").join(name))
            .filter(|host| host.exists())
            .map(|host| {
                let node = staging.join(host.file_name().unwrap_or_default());
                Ok((c_path(&host)?, c_path(&node)?))
            })
            .collect::<Result<_, PlanError>>()?;
        let dev_links = DEV_LINKS
            .iter()
            .map(|(name, target)| Ok((c_path(Path::new(target))?, c_path(&staging.join(name))?)))
            .collect::<Result<_, PlanError>>()?;
        Ok(Self {
            user_maps: id_maps(),
            writable: all(writable)?,
            read_only: all(read_only)?,
            pinned: all(pinned)?,
            dev_pts: c_path(&staging.join("pts"))?,
            dev_shm: c_path(&staging.join("shm"))?,
            dev_staging: c_path(&staging)?,
            dev_nodes,
            dev_links,
            cwd: c_path(cwd)?,
        })
    }
}

/// The id maps of the user namespace a process that is not root needs: its own uid and
/// gid mapped to themselves (`None` for root, who needs no user namespace).
fn id_maps() -> Option<(CString, CString)> {
    let uid = rustix::process::getuid();
    (!uid.is_root()).then(|| {
        let gid = rustix::process::getgid().as_raw();
        let uid = uid.as_raw();
        (
            CString::new(format!("{uid} {uid} 1\n")).unwrap_or_default(),
            CString::new(format!("{gid} {gid} 1\n")).unwrap_or_default(),
        )
    })
}

/// What an unsandboxed command's child mounts so that the paths `Read(…)` deny rules
/// name read as empty: an empty read-only file or directory over each.
#[derive(Debug)]
pub struct MaskPlan {
    user_maps: Option<(CString, CString)>,
    /// Placeholder, denied path.
    masks: Vec<(CString, CString)>,
    cwd: CString,
}

impl MaskPlan {
    /// Masks for the `denied` paths that exist, with placeholders made in `temp_dir`;
    /// `None` when none exists.
    ///
    /// # Errors
    /// A path with a NUL byte, or a placeholder that cannot be made.
    pub fn new(
        cwd: &Path,
        denied: &std::collections::BTreeSet<PathBuf>,
        temp_dir: &Path,
    ) -> Result<Option<Self>, PlanError> {
        let mut masks = Vec::new();
        for (n, path) in denied.iter().enumerate() {
            let Ok(meta) = std::fs::metadata(path) else {
                continue;
            };
            let placeholder = temp_dir.join(format!("mask-{n}"));
            let made = if meta.is_dir() {
                std::fs::create_dir(&placeholder)
            } else {
                std::fs::write(&placeholder, b"")
            };
            made.map_err(PlanError::Placeholder)?;
            masks.push((c_path(&placeholder)?, c_path(path)?));
        }
        if masks.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            user_maps: id_maps(),
            masks,
            cwd: c_path(cwd)?,
        }))
    }
}

/// In the forked child before exec of a command that runs unsandboxed: a private mount
/// namespace (with a user namespace when gyre is not root) in which each denied path is
/// covered by an empty read-only file or directory.
///
/// # Errors
/// A namespace or a mount the kernel refused: the command must not run.
pub fn enter_masked(plan: &MaskPlan) -> io::Result<()> {
    unshare(plan.user_maps.as_ref(), false)?;
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    for (placeholder, path) in &plan.masks {
        rustix::mount::mount_bind(placeholder.as_c_str(), path.as_c_str())?;
        set_mount_attr(path, false, MOUNT_ATTR_RDONLY, 0)?;
    }
    rustix::process::chdir(plan.cwd.as_c_str())?;
    Ok(())
}

/// `mount_setattr(2)` flags (linux/mount.h); rustix has no wrapper for the call.
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const AT_RECURSIVE: libc::c_uint = 0x8000;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Sets and clears mount flags on the mount at `path` (and all beneath it with
/// `recursive`).
#[allow(unsafe_code)]
fn set_mount_attr(path: &CStr, recursive: bool, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { AT_RECURSIVE } else { 0 };
    // SAFETY: a plain syscall; `path` is NUL-terminated and `attr` lives on the stack
    // for its duration with the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn open_for_write(path: &CStr) -> io::Result<rustix::fd::OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Writes the id maps of the user namespace just entered. gyre is non-dumpable (its
/// memory holds the API key), which makes its `/proc/self` files root's, so the child
/// is dumpable only while it opens the three files, and the writes happen after.
fn write_id_maps(uid_map: &CStr, gid_map: &CStr) -> io::Result<()> {
    use rustix::process::{DumpableBehavior, set_dumpable_behavior};
    set_dumpable_behavior(DumpableBehavior::Dumpable)?;
    let files = (
        open_for_write(c"/proc/self/uid_map"),
        open_for_write(c"/proc/self/setgroups"),
        open_for_write(c"/proc/self/gid_map"),
    );
    set_dumpable_behavior(DumpableBehavior::NotDumpable)?;
    let (uid_file, setgroups, gid_file) = (files.0?, files.1?, files.2?);
    // The order util-linux uses: setgroups must be denied before the gid map.
    rustix::io::write(&uid_file, uid_map.to_bytes())?;
    rustix::io::write(&setgroups, b"deny")?;
    rustix::io::write(&gid_file, gid_map.to_bytes())?;
    Ok(())
}

fn unshare_flags(user: bool, pid: bool) -> UnshareFlags {
    let mut flags = UnshareFlags::NEWNS;
    if pid {
        flags |= UnshareFlags::NEWPID;
    }
    if user {
        flags | UnshareFlags::NEWUSER
    } else {
        flags
    }
}

/// Enters new namespaces; with `maps`, a user namespace mapping gyre's ids to themselves.
#[allow(unsafe_code)]
fn unshare(maps: Option<&(CString, CString)>, pid: bool) -> io::Result<()> {
    // SAFETY: called in the forked child of a Command before exec, a single-threaded
    // process, so no other thread shares the namespaces or file table being changed.
    unsafe { rustix::thread::unshare_unsafe(unshare_flags(maps.is_some(), pid))? };
    if let Some((uid_map, gid_map)) = maps {
        write_id_maps(uid_map, gid_map)?;
    }
    Ok(())
}

/// In the forked child before exec: enters the namespaces and sets up the mounts of
/// `plan`. Returns in the command's process (PID 1 of the new PID namespace); the
/// process it was called in stays behind to wait for it and never returns.
///
/// # Errors
/// A namespace or a mount the kernel refused: the command must not run.
#[allow(unsafe_code)]
pub fn enter(plan: &MountPlan) -> io::Result<()> {
    unshare(plan.user_maps.as_ref(), true)?;
    // SAFETY: the forked child of a Command is single-threaded, so forking again is
    // as safe as the first fork; both sides only make syscalls from here on.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => return Err(io::Error::last_os_error()),
        0 => {}
        child => wait_and_exit(child),
    }
    // Dies with the process gyre started (killed on timeout or abort).
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    mount_all(plan)
}

/// The first child: holds no descriptor (so gyre's pipes close when the command's
/// processes are done, and the exec-error pipe when the command starts), waits for the
/// command and exits as it did.
#[allow(unsafe_code)]
fn wait_and_exit(child: libc::pid_t) -> ! {
    // SAFETY: closing every descriptor of this process, which runs no Rust code that
    // uses them afterwards (only waitpid and _exit).
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
    }
    let code = loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into a local.
        let rc = unsafe { libc::waitpid(child, &raw mut status, 0) };
        if rc == child {
            if libc::WIFEXITED(status) {
                break libc::WEXITSTATUS(status);
            }
            if libc::WIFSIGNALED(status) {
                break 128 + libc::WTERMSIG(status);
            }
        } else if rc == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break 127;
        }
    };
    // SAFETY: ends this process without running destructors or atexit handlers, which
    // belong to gyre, not to this forked copy.
    unsafe { libc::_exit(code) }
}

fn mount_all(plan: &MountPlan) -> io::Result<()> {
    rustix::mount::mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    // Everything read-only, no set-uid programs, no device nodes: chmod, chown,
    // timestamps and xattrs outside the writable roots fail (EROFS), as do writes.
    set_mount_attr(
        c"/",
        true,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        0,
    )?;
    for dir in &plan.writable {
        rustix::mount::mount_bind_recursive(dir.as_c_str(), dir.as_c_str())?;
        set_mount_attr(dir, false, 0, MOUNT_ATTR_RDONLY)?;
    }
    mount_dev(plan)?;
    rustix::mount::mount(
        c"proc",
        c"/proc",
        c"proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )?;
    for path in &plan.read_only {
        rustix::mount::mount_bind_recursive(path.as_c_str(), path.as_c_str())?;
        set_mount_attr(path, true, MOUNT_ATTR_RDONLY, 0)?;
    }
    for path in &plan.pinned {
        rustix::mount::mount_bind_recursive(path.as_c_str(), path.as_c_str())?;
    }
    rustix::process::chdir(plan.cwd.as_c_str())?;
    Ok(())
}

/// A `/dev` of a few character devices, a private pty instance and a `shm`, assembled
/// in the staging dir and moved over `/dev`.
fn mount_dev(plan: &MountPlan) -> io::Result<()> {
    let staging = plan.dev_staging.as_c_str();
    rustix::mount::mount(
        c"tmpfs",
        staging,
        c"tmpfs",
        MountFlags::NOSUID | MountFlags::NOEXEC,
        c"mode=0755,size=65536",
    )?;
    for (host, node) in &plan.dev_nodes {
        drop(rustix::fs::open(
            node.as_c_str(),
            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?);
        rustix::mount::mount_bind(host.as_c_str(), node.as_c_str())?;
        set_mount_attr(node, false, 0, MOUNT_ATTR_NODEV | MOUNT_ATTR_RDONLY)?;
    }
    // A private pty instance (the user's terminals are not reachable through it) and a
    // shm of its own.
    let filesystems: [(&CStr, &CStr, MountFlags, &CStr); 2] = [
        (
            &plan.dev_pts,
            c"devpts",
            MountFlags::NOSUID | MountFlags::NOEXEC,
            c"newinstance,ptmxmode=0666,mode=0620",
        ),
        (
            &plan.dev_shm,
            c"tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            c"mode=1777,size=67108864",
        ),
    ];
    for (dir, kind, flags, data) in filesystems {
        rustix::fs::mkdir(dir, Mode::from_raw_mode(0o755))?;
        rustix::mount::mount(kind, dir, kind, flags, data)?;
    }
    for (target, link) in &plan.dev_links {
        rustix::fs::symlink(target.as_c_str(), link.as_c_str())?;
    }
    set_mount_attr(staging, false, MOUNT_ATTR_RDONLY, 0)?;
    rustix::mount::mount_move(staging, c"/dev")?;
    Ok(())
}

/// In debug builds (the ones tests run), this variable makes [`available`] report a
/// system without namespaces, so the fallback can be tested where they exist.
pub const SIMULATE_NO_NAMESPACES_ENV: &str = "GYRE_TEST_NO_NAMESPACES";

/// Whether this process may create the namespaces [`enter`] needs, probed once by
/// starting `true` in them: root may, another user only where unprivileged user
/// namespaces are allowed (`kernel.unprivileged_userns_clone`,
/// `user.max_user_namespaces`, AppArmor's `restrict_unprivileged_userns`).
#[must_use]
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if cfg!(debug_assertions) && std::env::var_os(SIMULATE_NO_NAMESPACES_ENV).is_some() {
            return false;
        }
        probe()
    })
}

#[allow(unsafe_code)]
fn probe() -> bool {
    let maps = id_maps();
    let mut command = std::process::Command::new("true");
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: runs in the forked child before exec and only makes syscalls (unshare,
    // and open/write/close on the prepared id maps).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            unshare(maps.as_ref(), true)?;
            rustix::mount::mount_change(
                c"/",
                MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
            )?;
            Ok(())
        });
    }
    command.status().is_ok_and(|s| s.success())
}
