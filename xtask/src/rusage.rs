//! Peak RSS of one child process, from the `rusage` that `wait4` returns when it reaps
//! it. (`getrusage(RUSAGE_CHILDREN)` would mix in every earlier child: cargo, the
//! testkit.) Used by `xtask-bench-probe spawn`. The one place xtask needs `unsafe`: two
//! libc calls, no pointers kept.

#![allow(unsafe_code)]

use std::io;
use std::process::Child;

/// Waits for `child` (instead of `Child::wait`) and returns its exit code (-1 when a
/// signal ended it) and peak resident set size in KiB.
pub fn wait_peak_rss(child: &Child) -> io::Result<(i32, u64)> {
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
    // Linux reports ru_maxrss in KiB.
    Ok((code, u64::try_from(usage.ru_maxrss).unwrap_or(0)))
}
