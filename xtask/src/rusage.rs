//! Peak RSS of one child process, from the `rusage` that `wait4` returns when it reaps
//! it (`getrusage(RUSAGE_CHILDREN)` would mix in every earlier child: cargo, the
//! testkit), and a running child's CPU clock ([`CpuClock`]). Used by
//! `xtask-bench-probe spawn`. The one place xtask needs `unsafe`: libc calls on live
//! locals, no pointers kept.

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

/// A running child's CPU clock (user + system time of all its threads, to the
/// nanosecond): `clock_getcpuclockid` read with `clock_gettime`.
pub struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The clock of `child`, which must not have been reaped.
    pub fn of(child: &Child) -> io::Result<Self> {
        let pid = libc::pid_t::try_from(child.id()).map_err(io::Error::other)?;
        let mut clock: libc::clockid_t = 0;
        // SAFETY: `clock` is a live local of the right type.
        let r = unsafe { libc::clock_getcpuclockid(pid, &raw mut clock) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(Self(clock))
    }

    /// The calling thread's own clock.
    pub fn this_thread() -> Self {
        Self(libc::CLOCK_THREAD_CPUTIME_ID)
    }

    /// CPU time used so far, in microseconds.
    pub fn read(&self) -> io::Result<u64> {
        // SAFETY: a zeroed `timespec` is a valid value of this plain C struct.
        let mut t: libc::timespec = unsafe { std::mem::zeroed() };
        // SAFETY: `t` is a live local of the right type.
        if unsafe { libc::clock_gettime(self.0, &raw mut t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
        Ok(secs * 1_000_000 + nanos / 1000)
    }
}
