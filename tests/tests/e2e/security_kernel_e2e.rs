//! What the kernel holds (issue #19), through the real binary: files a `Read(…)` deny
//! rule names cannot be read by Bash in the sandbox even when a rule lets the command
//! run, and where the kernel has no Landlock, gyre says so once and asks instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Run, Sandbox, TEST_API_KEY};

fn bash_session(sandbox: &Sandbox, commands: &[&str], args: &[&str], env: &[(&str, &str)]) -> Run {
    gyre_e2e::bash_session(sandbox, commands, args, env).unwrap()
}

/// The Bash results in call order: (is_error, text).
fn bash_results(out: &Run) -> Vec<(bool, String)> {
    gyre_e2e::tool_results_of_lines(&out.lines().unwrap())
}

fn denials(out: &Run) -> usize {
    out.result().unwrap()["permission_denials"]
        .as_array()
        .unwrap()
        .len()
}

fn project_with_a_secret(sandbox: &Sandbox) {
    sandbox
        .write("config/secret.env", "TOKEN=hunter2\n")
        .unwrap();
    sandbox
        .write("config/app.toml", "name = \"app\"\n")
        .unwrap();
    sandbox.write("data.txt", "b\na\n").unwrap();
}

/// The commands of both read-deny tests. The parser refuses a command that names a
/// denied file in its words; these name it where only the kernel sees it.
const READS: &[&str] = &[
    "f=config/secret.env; cat \"$f\"",
    "d=config; sort < \"./$d/../$d/secret.env\"",
    "ln -sf \"$PWD/config/secret.env\" \"$TMPDIR/l\" && cat \"$TMPDIR/l\"",
    "head -c 16 /proc/$PPID/mem",
    "cat config/app.toml",
    "cat /proc/$PPID/environ",
];

fn assert_kernel_refused_the_secret(out: &Run) {
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(out);
    assert_eq!(results.len(), READS.len(), "{}", out.stdout);
    for (command, (is_error, text)) in READS.iter().zip(&results).take(3) {
        assert!(is_error, "`{command}` ran: {text}");
        assert!(
            text.contains("Permission denied"),
            "`{command}` was not refused by the kernel: {text}"
        );
        assert!(!text.contains("hunter2"), "`{command}`: {text}");
    }
    assert_eq!(results[4], (false, "name = \"app\"".to_owned()));
    // gyre is outside the command's PID namespace: its memory and environment block
    // are not there to open.
    for (is_error, text) in [&results[3], &results[5]] {
        assert!(*is_error && text.contains("No such file"), "{text}");
        assert!(!text.contains(TEST_API_KEY), "{text}");
    }
    // Refused by the kernel, not by the permission check: every command ran.
    assert_eq!(denials(out), 0);
}

#[test]
fn in_plan_mode_the_kernel_refuses_reading_a_denied_file_a_rule_lets_bash_run() {
    let sandbox = Sandbox::new().unwrap();
    project_with_a_secret(&sandbox);
    let out = bash_session(
        &sandbox,
        READS,
        &[
            "--permission-mode",
            "plan",
            "--allowedTools",
            "Bash",
            "--disallowedTools",
            "Read(config/secret.env)",
        ],
        &[],
    );
    assert_kernel_refused_the_secret(&out);
}

#[test]
fn with_sandbox_enabled_a_denied_file_is_unreadable_while_the_project_stays_writable() {
    let sandbox = Sandbox::new().unwrap();
    project_with_a_secret(&sandbox);
    std::fs::write(
        sandbox.home().join("settings.json"),
        r#"{"sandbox":{"enabled":true},"permissions":{"deny":["Read(./config/secret.env)"]}}"#,
    )
    .unwrap();
    let out = bash_session(&sandbox, READS, &["--allowedTools", "Bash"], &[]);
    assert_kernel_refused_the_secret(&out);
    // Writing works; what a command creates next to a denied file is readable from the
    // next command on (its ruleset is built when it starts).
    let out = bash_session(
        &sandbox,
        &["echo made > config/new.txt", "cat config/new.txt data.txt"],
        &["--allowedTools", "Bash"],
        &[],
    );
    let results = bash_results(&out);
    assert_eq!(
        results,
        [
            (false, "(no output)".to_owned()),
            (false, "made\nb\na".to_owned())
        ],
        "{}",
        out.stderr
    );
}

const NO_LANDLOCK: (&str, &str) = ("GYRE_TEST_NO_LANDLOCK", "1");
const WARNING: &str = "this kernel has no Landlock";

#[test]
fn without_landlock_plan_mode_asks_before_every_bash_command_and_says_so_once() {
    let sandbox = Sandbox::new().unwrap();
    project_with_a_secret(&sandbox);
    let commands = ["cat data.txt", "touch made.txt", "ls"];
    let out = bash_session(
        &sandbox,
        &commands,
        &["--permission-mode", "plan", "--allowedTools", "Bash"],
        &[NO_LANDLOCK],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stderr.matches(WARNING).count(), 1, "{}", out.stderr);
    // Headless, asking means denying: nothing ran, not even the readers.
    assert_eq!(denials(&out), commands.len());
    for (is_error, text) in bash_results(&out) {
        assert!(is_error && text.contains("Landlock"), "{text}");
    }
    assert!(!sandbox.project().join("made.txt").exists());
}

#[test]
fn without_landlock_sandbox_enabled_asks_and_an_unsandboxed_session_is_unchanged() {
    let sandbox = Sandbox::new().unwrap();
    std::fs::write(
        sandbox.home().join("settings.json"),
        r#"{"sandbox":{"enabled":true}}"#,
    )
    .unwrap();
    for mode in ["default", "bypassPermissions"] {
        let out = bash_session(
            &sandbox,
            &["touch made.txt"],
            &["--permission-mode", mode, "--allowedTools", "Bash"],
            &[NO_LANDLOCK],
        );
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        assert_eq!(out.stderr.matches(WARNING).count(), 1, "{}", out.stderr);
        assert_eq!(denials(&out), 1, "{mode}");
        assert!(!sandbox.project().join("made.txt").exists(), "{mode}");
    }
    // Without the sandbox setting nothing would have been confined: no warning, and the
    // allow rule runs the command as before.
    std::fs::remove_file(sandbox.home().join("settings.json")).unwrap();
    let out = bash_session(
        &sandbox,
        &["touch made.txt"],
        &["--allowedTools", "Bash"],
        &[NO_LANDLOCK],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains(WARNING), "{}", out.stderr);
    assert_eq!(denials(&out), 0);
    assert!(sandbox.project().join("made.txt").exists());
}

/// `CAP_SYS_PTRACE` is bit 19 of the capability sets in `/proc/<pid>/status`.
const CAP_SYS_PTRACE: u64 = 1 << 19;

/// The capability sets a status file shows, by name (`CapEff`, …).
fn capability_sets(status: &str) -> Vec<(String, u64)> {
    status
        .lines()
        .filter_map(|line| {
            let (name, hex) = line.split_once(':')?;
            let name = name.trim();
            name.starts_with("Cap").then(|| {
                (
                    name.to_owned(),
                    u64::from_str_radix(hex.trim(), 16).unwrap(),
                )
            })
        })
        .collect()
}

/// Checked as root (as CI runs): gyre itself holds `CAP_SYS_PTRACE`; the command it
/// starts in the sandbox holds it in none of its sets, since the bit left the bounding
/// set before exec and exec recomputes the rest from it. gyre itself is outside the
/// command's PID namespace, so neither its memory nor its environment block is there to
/// open.
#[test]
fn a_sandboxed_command_holds_no_ptrace_capability_and_cannot_read_gyres_memory_or_key() {
    let sandbox = Sandbox::new().unwrap();
    let commands = [
        "cat /proc/self/status",
        "sh -c 'cat /proc/$$/status'",
        "head -c 16 /proc/$PPID/mem",
        "cat /proc/$PPID/environ",
    ];
    let out = bash_session(
        &sandbox,
        &commands,
        &["--permission-mode", "plan", "--allowedTools", "Bash"],
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(&out);
    assert_eq!(results.len(), commands.len(), "{}", out.stdout);
    for (is_error, status) in &results[..2] {
        assert!(!is_error, "{status}");
        let sets = capability_sets(status);
        assert_eq!(sets.len(), 5, "{status}");
        for (name, bits) in sets {
            assert_eq!(bits & CAP_SYS_PTRACE, 0, "{name} holds CAP_SYS_PTRACE");
        }
    }
    // gyre is outside the command's PID namespace ($PPID is 0 there): neither its
    // memory nor its environment block can be opened.
    for (is_error, text) in &results[2..] {
        assert!(*is_error && text.contains("No such file"), "{text}");
        assert!(!text.contains(TEST_API_KEY), "{text}");
    }
}
