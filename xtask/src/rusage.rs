//! Peak RSS of one child process, from the `rusage` that `wait4` returns when it reaps
//! it. (`getrusage(RUSAGE_CHILDREN)` would mix in every earlier child: cargo, the
//! testkit.) Used by `xtask-bench-probe spawn`. The one place xtask needs `unsafe`: two
//! libc calls, no pointers kept.

#![allow(unsafe_code)]

use std::io;
use std::process::Child;

/// What `wait4` says of a child.
pub struct Usage {
    /// Exit code; -1 when a signal ended it.
    pub code: i32,
    /// Peak resident set size in KiB.
    pub peak_kib: u64,
    /// User plus system CPU time, in microseconds.
    pub cpu_us: u64,
}

/// Waits for `child` (instead of `Child::wait`) and returns its [`Usage`].
pub fn wait_usage(child: &Child) -> io::Result<Usage> {
    let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: a zeroed `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types; `pid` is our
        // unreaped child.
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let us = |t: libc::timeval| {
        u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000 + u64::try_from(t.tv_usec).unwrap_or(0)
    };
    Ok(Usage {
        code,
        // Linux reports ru_maxrss in KiB.
        peak_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        cpu_us: us(usage.ru_utime) + us(usage.ru_stime),
    })
}
