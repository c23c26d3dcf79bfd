//! The system calls a sandboxed command may not make, as a seccomp filter: sockets the
//! policy does not allow (Landlock governs TCP only), device nodes, and what root could
//! use to leave the sandbox or change the machine (kernel modules, mounts, namespaces,
//! raw I/O, keyrings, handles that bypass paths). Refused calls fail with `EPERM`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Why the filter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// seccompiler knows no filter for this processor.
    #[error("seccomp filters are not supported on {0}")]
    Arch(&'static str),
    /// A rule seccompiler refused.
    #[error("could not build the seccomp filter: {0}")]
    Build(#[from] seccompiler::BackendError),
}

/// Which sockets a command may open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketPolicy {
    /// Internet, netlink, packet and every other non-Unix family.
    pub network: bool,
    /// `AF_UNIX` (`socketpair` is always allowed: it reaches nothing).
    pub unix: bool,
}

/// Calls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_by_handle_at,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_syslog,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_vhangup,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

fn arg(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, FilterError> {
    Ok(SeccompCondition::new(
        index,
        SeccompCmpArgLen::Dword,
        op,
        value,
    )?)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, FilterError> {
    Ok(SeccompRule::new(conditions)?)
}

/// `mknod`/`mknodat` of a character or block device, the mode being argument `mode`.
fn device_nodes(mode: u8) -> Result<Vec<SeccompRule>, FilterError> {
    let kind = u64::from(libc::S_IFMT);
    [libc::S_IFCHR, libc::S_IFBLK]
        .into_iter()
        .map(|device| {
            rule(vec![arg(
                mode,
                SeccompCmpOp::MaskedEq(kind),
                u64::from(device),
            )?])
        })
        .collect()
}

fn socket_rules(sockets: SocketPolicy) -> Result<Option<Vec<SeccompRule>>, FilterError> {
    let unix = u64::try_from(libc::AF_UNIX).unwrap_or_default();
    Ok(match (sockets.network, sockets.unix) {
        (true, true) => None,
        // An empty rule list matches every call.
        (false, false) => Some(Vec::new()),
        (false, true) => Some(vec![rule(vec![arg(0, SeccompCmpOp::Ne, unix)?])?]),
        (true, false) => Some(vec![rule(vec![arg(0, SeccompCmpOp::Eq, unix)?])?]),
    })
}

/// The filter for a command allowed `sockets`.
///
/// # Errors
/// A processor seccompiler has no filter for, or a rule it refuses.
pub fn filter(sockets: SocketPolicy) -> Result<BpfProgram, FilterError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| FilterError::Arch(std::env::consts::ARCH))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|call| (*call, Vec::new())).collect();
    if let Some(socket) = socket_rules(sockets)? {
        rules.insert(libc::SYS_socket, socket);
    }
    #[cfg(target_arch = "x86_64")]
    rules.insert(libc::SYS_mknod, device_nodes(1)?);
    rules.insert(libc::SYS_mknodat, device_nodes(2)?);
    // Typing into the terminal the command shares with gyre.
    rules.insert(
        libc::SYS_ioctl,
        vec![rule(vec![arg(1, SeccompCmpOp::Eq, libc::TIOCSTI)?])?],
    );
    let program = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(u32::try_from(libc::EPERM).unwrap_or(1)),
        arch,
    )?;
    Ok(program.try_into()?)
}

/// Installs `program` on the calling thread (in the forked child before exec: it makes
/// two syscalls and allocates nothing).
///
/// # Errors
/// The kernel refused the filter.
pub fn apply(program: &BpfProgram) -> std::io::Result<()> {
    seccompiler::apply_filter(program).map_err(|_| std::io::Error::last_os_error())
}
