//! Everything a Bash command started, found and killed — also what left its process
//! group.
//!
//! Killing the command's process group misses a child that called `setsid` (it has a
//! group and a session of its own) and, once its parent exited, gets reparented to init.
//! So gyre makes itself a child subreaper ([`become_subreaper`]): orphans of its tool
//! processes reparent to gyre, where they can be found. A `ProcessTree` is then, on
//! Linux, every process that is
//! - in the command's process group, or
//! - a descendant (by parent pid) of a member, or
//! - an orphan reparented to gyre that left gyre's session and started after the command
//!   did (a `setsid` child whose parent is gone).
//!
//! A tree is killed on timeout and abort; a command that exits normally may leave
//! background jobs running, and those are killed when the session ends
//! ([`kill_left_running`]). Elsewhere than Linux only the process group is killed.

use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, Signal};

/// Kill rounds before giving up on a tree that keeps forking.
const KILL_ROUNDS: usize = 20;

/// Makes this process the child subreaper of everything it starts: an orphaned
/// descendant reparents to it instead of init, so a `ProcessTree` can still find it.
/// Call once at start-up. A no-op where the kernel has no such thing.
///
/// # Errors
/// When the kernel refuses (it never does for an ordinary process on Linux ≥ 3.4).
pub fn become_subreaper() -> std::io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// The processes one Bash command started, by the pid of its shell (which leads the
/// command's process group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessTree {
    root: Pid,
    /// The shell's start time (clock ticks since boot): an orphan started earlier is
    /// not this command's.
    started: u64,
}

/// Trees whose shell exited normally: their background jobs die with the session.
static LEFT_RUNNING: Mutex<Vec<ProcessTree>> = Mutex::new(Vec::new());

impl ProcessTree {
    /// The tree of the shell `pid`, spawned with `process_group(0)`.
    pub(crate) fn of_shell(pid: u32) -> Option<Self> {
        let root = Pid::from_raw(i32::try_from(pid).ok()?)?;
        let started = proc_stat(root.as_raw_nonzero().get()).map_or(0, |s| s.started);
        Some(Self { root, started })
    }

    /// Kills every process of the tree (the shell included) and reaps those that had
    /// become gyre's children. The shell itself is left for its `Child` to reap.
    pub(crate) fn kill(self) {
        kill_trees(&[self]);
    }

    /// The shell exited: whatever it left running is killed when the session ends.
    pub(crate) fn leave_running(self) {
        let trees = {
            let mut left = LEFT_RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
            left.retain(|t| t.root != self.root);
            left.push(self);
            left.clone()
        };
        // Background jobs of earlier commands that have finished since.
        reap_orphans(&trees, false);
    }
}

/// Kills what the session's Bash commands left running (background jobs, `setsid`
/// children). Call when the session ends.
pub fn kill_left_running() {
    let trees = std::mem::take(&mut *LEFT_RUNNING.lock().unwrap_or_else(PoisonError::into_inner));
    if !trees.is_empty() {
        kill_trees(&trees);
    }
}

fn kill_trees(trees: &[ProcessTree]) {
    for tree in trees {
        // The group first: the one part found without reading /proc.
        let _ = rustix::process::kill_process_group(tree.root, Signal::KILL);
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        for _ in 0..KILL_ROUNDS {
            let alive: Vec<ProcStat> = members(trees, &snapshot())
                .into_iter()
                .filter(|p| p.state != 'Z')
                .collect();
            if alive.is_empty() {
                break;
            }
            for p in &alive {
                if let Some(pid) = Pid::from_raw(p.pid) {
                    let _ = rustix::process::kill_process(pid, Signal::KILL);
                }
            }
        }
        reap_orphans(trees, true);
    }
}

/// Reaps the tree's processes that became gyre's children by reparenting (not the
/// shells: their `Child` owns them), so no zombie is left. With `killed`, waits a
/// little for those just sent SIGKILL to die.
fn reap_orphans(trees: &[ProcessTree], killed: bool) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let is_root = |pid: i32| trees.iter().any(|t| t.root.as_raw_nonzero().get() == pid);
        // 50 × 10 ms: far more than a SIGKILLed process takes to die.
        for _ in 0..50 {
            let orphans: Vec<ProcStat> = members(trees, &snapshot())
                .into_iter()
                .filter(|p| p.ppid == me && !is_root(p.pid))
                .collect();
            let mut alive = false;
            for p in &orphans {
                match Pid::from_raw(p.pid) {
                    Some(pid) if p.state == 'Z' => {
                        let _ = rustix::process::waitpid(
                            Some(pid),
                            rustix::process::WaitOptions::NOHANG,
                        );
                    }
                    Some(_) | None => alive = true,
                }
            }
            if !killed || !alive {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = (trees, killed);
}

/// One line of `/proc/<pid>/stat`, the fields used here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcStat {
    pid: i32,
    state: char,
    ppid: i32,
    pgrp: i32,
    session: i32,
    started: u64,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Parses `pid (comm) state ppid pgrp session … starttime …`; the command name may
/// hold spaces and parentheses, so fields are counted after the last `)`.
fn parse_stat(line: &str) -> Option<ProcStat> {
    let (head, tail) = line.rsplit_once(')')?;
    let pid = head.split_once(' ')?.0.trim().parse().ok()?;
    let fields: Vec<&str> = tail.split_whitespace().collect();
    Some(ProcStat {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        // Field 22 of the line; the first field after `)` is field 3.
        started: fields.get(19)?.parse().ok()?,
    })
}

/// Every process visible in /proc.
fn snapshot() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .collect()
}

/// The processes of `all` that belong to one of `trees` (see the module docs); never
/// gyre itself.
fn members(trees: &[ProcessTree], all: &[ProcStat]) -> Vec<ProcStat> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let my_session = all.iter().find(|p| p.pid == me).map(|p| p.session);
    // Pids are recycled: the shell counts only with its own start time, a group member
    // only if it started after the shell and stayed in gyre's session (as the shell's
    // group does), an orphan only if it started after the shell.
    let in_tree = |p: &ProcStat| {
        trees.iter().any(|t| {
            let root = t.root.as_raw_nonzero().get();
            let after = p.started >= t.started;
            let in_my_session = my_session.is_some_and(|s| s == p.session);
            (p.pid == root && p.started == t.started)
                || (p.pgrp == root && after && in_my_session)
                || (p.ppid == me && after && my_session.is_some() && !in_my_session)
        })
    };
    let mut member: Vec<bool> = all.iter().map(|p| p.pid != me && in_tree(p)).collect();
    // Descendants of members, to a fixed point (a chain is at most as long as `all`).
    loop {
        let pids: Vec<i32> = all
            .iter()
            .zip(&member)
            .filter(|(_, m)| **m)
            .map(|(p, _)| p.pid)
            .collect();
        let mut grew = false;
        for (p, m) in all.iter().zip(member.iter_mut()) {
            if !*m && p.pid != me && pids.contains(&p.ppid) {
                *m = true;
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    all.iter()
        .zip(&member)
        .filter(|(_, m)| **m)
        .map(|(p, _)| *p)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_odd_command_names() {
        let line =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        let stat = parse_stat(line).unwrap();
        assert_eq!(
            stat,
            ProcStat {
                pid: 4242,
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                session: 4242,
                started: 987_654,
            }
        );
    }

    #[test]
    fn members_are_the_group_its_descendants_and_late_orphans_out_of_our_session() {
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let p = |pid, ppid, pgrp, session, started| ProcStat {
            pid,
            state: 'S',
            ppid,
            pgrp,
            session,
            started,
        };
        let all = vec![
            p(me, 1, me, 7, 10),
            p(100, me, 100, 7, 50),    // the shell
            p(101, 100, 100, 7, 51),   // in its group
            p(102, 100, 102, 102, 52), // setsid child of the shell
            p(103, 102, 102, 102, 53), // its child
            p(104, me, 104, 104, 60),  // setsid orphan, reparented to us
            p(105, me, 105, 105, 40),  // an orphan older than the command
            p(106, me, me, 7, 70),     // another child of ours, in our session
            p(107, 1, 107, 107, 80),   // unrelated
        ];
        let tree = ProcessTree {
            root: Pid::from_raw(100).unwrap(),
            started: 50,
        };
        let mut found: Vec<i32> = members(&[tree], &all).iter().map(|p| p.pid).collect();
        found.sort_unstable();
        assert_eq!(found, [100, 101, 102, 103, 104]);
    }
}
