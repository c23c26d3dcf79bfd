//! What the sandbox's namespaces, mounts and seccomp filter hold (issue #29), through
//! the real binary: a sandboxed command cannot plant code for later, read other
//! processes, make or read devices, read outside the allowed roots, carry a denied file
//! out of reach of the deny rule, write to inherited descriptors, open sockets the mode
//! forbids, or change file modes outside the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::Path;

use gyre_e2e::{Run, Sandbox};

fn bash_session(sandbox: &Sandbox, commands: &[&str], args: &[&str], env: &[(&str, &str)]) -> Run {
    gyre_e2e::bash_session(sandbox, commands, args, env).unwrap()
}

/// The Bash results in call order: (is_error, text).
fn bash_results(out: &Run) -> Vec<(bool, String)> {
    gyre_e2e::tool_results_of_lines(&out.lines().unwrap())
}

const PLAN: &[&str] = &["--permission-mode", "plan", "--allowedTools", "Bash"];
const ALLOWED: &[&str] = &["--allowedTools", "Bash"];

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("<{e}>"))
}

/// Every run the same way: each command ran (no question) and the session ended well.
fn ran(out: &Run, count: usize) -> Vec<(bool, String)> {
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(out);
    assert_eq!(results.len(), count, "{}", out.stdout);
    results
}

#[test]
fn a_command_cannot_use_descriptors_gyre_inherited() {
    let sandbox = Sandbox::new().unwrap();
    let target = sandbox.project().join("../inherited.log");
    let file = std::fs::File::create(&target).unwrap();
    // Inherited by gyre as a parent without close-on-exec would leave it.
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
    let fd = file.as_raw_fd();
    let commands = [
        format!("echo pwned >&{fd}"),
        format!("ls /proc/self/fd/{fd}"),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    for args in [PLAN, ALLOWED] {
        let out = bash_session(&sandbox, &commands, args, &[]);
        let results = ran(&out, commands.len());
        assert!(results[0].0 && results[1].0, "{args:?}: {results:?}");
    }
    drop(file);
    assert_eq!(read(&target), "");
}
