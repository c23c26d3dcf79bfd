//! What the sandbox's namespaces, mounts and seccomp filter hold (issue #29), through
//! the real binary: a sandboxed command cannot plant code for later, read other
//! processes, make or read devices, read outside the allowed roots, carry a denied file
//! out of reach of the deny rule, write to inherited descriptors, open sockets the mode
//! forbids, or change file modes outside the workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::Path;

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

fn bash_session(sandbox: &Sandbox, commands: &[&str], args: &[&str], env: &[(&str, &str)]) -> Run {
    gyre_e2e::bash_session(sandbox, commands, args, env).unwrap()
}

/// The Bash results in call order: (is_error, text).
fn bash_results(out: &Run) -> Vec<(bool, String)> {
    gyre_e2e::tool_results_of_lines(&out.lines().unwrap())
}

const PLAN: &[&str] = &["--permission-mode", "plan", "--allowedTools", "Bash"];
const ALLOWED: &[&str] = &["--allowedTools", "Bash"];

fn enable_sandbox(sandbox: &Sandbox, extra: &str) {
    std::fs::write(
        sandbox.home().join("settings.json"),
        format!(r#"{{"sandbox":{{"enabled":true}}{extra}}}"#),
    )
    .unwrap();
}

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
fn a_sandboxed_command_cannot_write_config_hooks_or_mcp_files_existing_or_not() {
    let sandbox = Sandbox::new().unwrap();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(sandbox.project())
        .status()
        .unwrap();
    assert!(git.success());
    sandbox.write(".gyre/settings.json", "{}").unwrap();
    std::fs::remove_dir_all(sandbox.project().join(".git/hooks")).unwrap();
    let config_before = read(&sandbox.project().join(".git/config"));
    enable_sandbox(&sandbox, "");
    let commands = [
        "echo '[core] fsmonitor = touch /tmp/pwned' >> .git/config",
        "mkdir -p .git/hooks && echo 'touch /tmp/pwned' > .git/hooks/pre-commit",
        "echo '{\"hooks\":{}}' > .gyre/settings.local.json",
        "mv .gyre .gyre-old; mkdir -p .gyre && echo '{}' > .gyre/settings.json",
        "mkdir -p .claude && echo '{}' > .claude/settings.json",
        "echo '{\"mcpServers\":{}}' > .mcp.json",
        "ln -s /tmp/x .mcp.json; mv .git/config .git/config.old",
        "mv .git .git-old; echo /tmp/elsewhere > .git/commondir",
        "echo fine > notes.txt && cat notes.txt",
    ];
    let out = bash_session(&sandbox, &commands, ALLOWED, &[]);
    let results = ran(&out, commands.len());
    let project = sandbox.project();
    assert_eq!(read(&project.join(".git/config")), config_before);
    assert!(!project.join(".git/config.old").exists());
    assert!(!project.join(".git/hooks").exists(), "{results:?}");
    assert!(!project.join(".gyre/settings.local.json").exists());
    assert!(!project.join(".gyre-old").exists());
    assert_eq!(read(&project.join(".gyre/settings.json")), "{}");
    assert!(!project.join(".claude").exists(), "{results:?}");
    assert!(project.join(".mcp.json").symlink_metadata().is_err());
    assert!(!project.join(".git-old").exists());
    assert!(!project.join(".git/commondir").exists());
    assert_eq!(results[8], (false, "fine".to_owned()));
}

#[test]
fn a_sandboxed_command_sees_only_its_own_processes() {
    let sandbox = Sandbox::new().unwrap();
    // A process of the same user holding a secret, as an MCP server would.
    let holder = Holder(
        std::process::Command::new("sleep")
            .arg("60")
            .env("SERVER_SECRET", "s3cr3t-of-the-server")
            .spawn()
            .unwrap(),
    );
    let pid = holder.0.id();
    let commands = [
        "cat /proc/*/environ | tr '\\0' '\\n' | grep -c SERVER_SECRET".to_owned(),
        format!("head -c 16 /proc/{pid}/mem > /dev/null"),
        format!("ls /proc/{pid}/fd"),
        "ls /proc | grep -c '^[0-9]'".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    for args in [PLAN, ALLOWED] {
        if args == ALLOWED {
            enable_sandbox(&sandbox, "");
        }
        let out = bash_session(&sandbox, &commands, args, &[]);
        let results = ran(&out, commands.len());
        for (_, text) in &results {
            assert!(!text.contains("s3cr3t"), "{text}");
        }
        assert_eq!(results[0], (true, "Exit code 1\n0".to_owned()), "{args:?}");
        assert!(
            results[1].0 && results[1].1.contains("No such file"),
            "{results:?}"
        );
        assert!(
            results[2].0 && results[2].1.contains("No such file"),
            "{results:?}"
        );
        // bash, the pipeline's ls and grep: nothing else.
        let count: u32 = results[3].1.trim().parse().unwrap();
        assert!(count <= 3, "{results:?}");
    }
    drop(holder);
}

/// A process killed when the test ends, passed or not.
struct Holder(std::process::Child);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_sandboxed_command_can_neither_make_nor_read_devices() {
    let sandbox = Sandbox::new().unwrap();
    let disk = std::fs::read_dir("/sys/block")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_to_string(e.path().join("size"))
                .is_ok_and(|s| s.trim().parse::<u64>().is_ok_and(|n| n > 0))
        })
        .map(|e| Path::new("/dev").join(e.file_name()))
        .find(|p| p.exists())
        .expect("a block device");
    let read_disk = format!(
        "head -c 512 {} > \"$TMPDIR/disk\" && wc -c < \"$TMPDIR/disk\"",
        disk.display()
    );
    let commands = [
        read_disk.as_str(),
        "mknod blk b 8 0",
        "mknod chr c 1 3",
        "mkfifo fifo && echo fifo-ok",
        "ls /dev",
        "echo x > /dev/null && head -c 4 /dev/zero | wc -c && head -c 4 /dev/urandom | wc -c",
    ];
    enable_sandbox(&sandbox, "");
    for args in [PLAN, ALLOWED] {
        let out = bash_session(&sandbox, &commands, args, &[]);
        let results = ran(&out, commands.len());
        assert!(results[0].0, "{} read: {:?}", disk.display(), results[0]);
        assert!(results[1].0 && results[2].0, "{results:?}");
        assert!(!sandbox.project().join("blk").exists());
        assert!(!sandbox.project().join("chr").exists());
        let listed: Vec<&str> = results[4].1.split_whitespace().collect();
        for name in &listed {
            assert!(
                [
                    "null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "fd",
                    "stdin", "stdout", "stderr", "shm"
                ]
                .contains(name),
                "/dev shows {name}: {listed:?}"
            );
        }
        assert_eq!(results[5], (false, "4\n4".to_owned()), "{results:?}");
    }
    // Under sandbox.enabled, a fifo is an ordinary file to make.
    assert!(sandbox.project().join("fifo").exists());
}

#[test]
fn plan_mode_reads_nothing_outside_the_allowed_roots() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("mine.txt", "mine").unwrap();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE-KEY").unwrap();
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(home.join(".aws/credentials"), "AWS-KEY").unwrap();
    std::fs::create_dir_all(home.join(".cargo")).unwrap();
    std::fs::write(home.join(".cargo/env"), "cargo-env").unwrap();
    std::fs::write(home.join(".cargo/credentials.toml"), "CARGO-TOKEN").unwrap();
    std::fs::write(home.join("notes.txt"), "HOME-NOTES").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("other.txt"), "OTHER-PROJECT").unwrap();
    std::fs::write(sandbox.home().join("credentials.json"), "GYRE-CRED").unwrap();
    let commands = [
        format!("cat {}/.ssh/id_ed25519", home.display()),
        format!("cat < {}/.aws/credentials", home.display()),
        format!("cat {}/.cargo/credentials.toml", home.display()),
        format!("cat {}/notes.txt", home.display()),
        format!("cat {}/other.txt", elsewhere.path().display()),
        format!("cat {}/credentials.json", sandbox.home().display()),
        "cat /etc/shadow".to_owned(),
        format!("cat {}/.cargo/env", home.display()),
        "cat mine.txt && head -c 4 /etc/passwd && echo".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    let home_env = home.to_str().unwrap();
    let out = bash_session(&sandbox, &commands, PLAN, &[("HOME", home_env)]);
    let results = ran(&out, commands.len());
    for (command, (is_error, text)) in commands.iter().zip(&results).take(7) {
        assert!(
            *is_error && text.contains("Permission denied"),
            "`{command}` read: {text}"
        );
    }
    assert_eq!(results[7], (false, "cargo-env".to_owned()));
    assert_eq!(results[8], (false, "mineroot".to_owned()));
}

#[test]
fn a_sandboxed_mv_or_ln_cannot_carry_a_denied_file_out_of_its_rule() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("config/secret.env", "TOKEN=hunter2\n")
        .unwrap();
    enable_sandbox(
        &sandbox,
        r#","permissions":{"deny":["Read(./config/secret.env)"]}"#,
    );
    let commands = [
        "mv config/secret.env config/moved.env",
        "ln config/secret.env linked.env",
        "mv config cfg2",
        "cp -r config copied",
        "cat config/moved.env linked.env cfg2/secret.env copied/secret.env config/secret.env",
    ];
    let out = bash_session(&sandbox, &commands, ALLOWED, &[]);
    let results = ran(&out, commands.len());
    for (command, (_, text)) in commands.iter().zip(&results) {
        assert!(!text.contains("hunter2"), "`{command}`: {text}");
    }
    assert_eq!(
        read(&sandbox.project().join("config/secret.env")),
        "TOKEN=hunter2\n"
    );
    assert!(!sandbox.project().join("linked.env").exists());
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

#[test]
fn sandboxed_commands_open_no_network_or_unix_sockets_and_change_no_modes_outside() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("mine.sh", "echo\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.sh");
    std::fs::write(&victim, "echo\n").unwrap();
    let commands = [
        "echo hi > /dev/udp/127.0.0.1/9".to_owned(),
        "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX)'".to_owned(),
        "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)'"
            .to_owned(),
        format!("chmod 4777 {}", victim.display()),
        format!("touch -d 2001-01-01 {}", victim.display()),
        "/usr/bin/python3 -c 'import socket; socket.socketpair(); print(1)'".to_owned(),
    ];
    let commands: Vec<&str> = commands.iter().map(String::as_str).collect();
    enable_sandbox(&sandbox, "");
    let mode = || {
        let meta = std::fs::metadata(&victim).unwrap();
        (
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()),
            meta.modified().unwrap(),
        )
    };
    let before = mode();
    for args in [PLAN, ALLOWED] {
        let out = bash_session(&sandbox, &commands, args, &[]);
        let results = ran(&out, commands.len());
        for (command, (is_error, text)) in commands.iter().zip(&results).take(5) {
            assert!(is_error, "`{command}` ran: {text}");
        }
        assert_eq!(results[5], (false, "1".to_owned()));
        assert_eq!(mode(), before, "{args:?}");
    }
    let out = bash_session(&sandbox, &["chmod 700 mine.sh"], ALLOWED, &[]);
    assert_eq!(ran(&out, 1)[0], (false, "(no output)".to_owned()));
}

/// The user the unprivileged test runs gyre as (made by the test when missing).
const UNPRIVILEGED_USER: &str = "gyre-sandbox-test";

/// The uid and gid of [`UNPRIVILEGED_USER`], made with `useradd` if need be.
fn unprivileged_ids() -> (String, String) {
    let exists = std::process::Command::new("id")
        .args(["-u", UNPRIVILEGED_USER])
        .output()
        .unwrap();
    if !exists.status.success() {
        let made = std::process::Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                UNPRIVILEGED_USER,
            ])
            .status()
            .unwrap();
        assert!(made.success(), "useradd {UNPRIVILEGED_USER} failed");
    }
    let id = |flag: &str| {
        let out = std::process::Command::new("id")
            .args([flag, UNPRIVILEGED_USER])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    (id("-u"), id("-g"))
}

/// The sandbox holds for a user who is not root: gyre then creates a user namespace
/// (mapping the user to itself) to own the mount and PID namespaces. The same attempts
/// as root's: protected paths existing or not, devices, other processes, reads and
/// writes outside, sockets, modes. Run as root, the test makes the user (`useradd`);
/// run as another user, it is skipped, saying so.
#[test]
fn an_unprivileged_user_gets_the_same_sandbox_through_a_user_namespace() {
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "SKIPPED: this test makes an unprivileged user with useradd and runs gyre as it, which needs root; the tests run as uid {} (run them as root, as CI does, to cover the user-namespace sandbox)",
            rustix::process::geteuid().as_raw()
        );
        return;
    }
    let (uid, gid) = unprivileged_ids();
    let sandbox = Sandbox::new().unwrap();
    sandbox.write(".gyre/settings.json", "{}").unwrap();
    enable_sandbox(&sandbox, "");
    let outside = tempfile::tempdir().unwrap();
    let open_file = outside.path().join("open.txt");
    std::fs::write(&open_file, "READABLE-TO-ALL").unwrap();
    for path in [outside.path(), open_file.as_path()] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
    }
    let owned = std::process::Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}")])
        .arg(sandbox.project().parent().unwrap())
        .status()
        .unwrap();
    assert!(owned.success());
    let commands = [
        "id -u".to_owned(),
        "echo ok > inside.txt && cat inside.txt".to_owned(),
        "echo '{\"hooks\":{}}' > .gyre/settings.json".to_owned(),
        format!("cat {}", open_file.display()),
        format!("echo x > {}/new.txt", outside.path().display()),
        "ls /proc | grep -c '^[0-9]'".to_owned(),
        "echo '{\"mcpServers\":{}}' > .mcp.json".to_owned(),
        "mkdir -p .claude/agents".to_owned(),
        "mknod disk b 8 0".to_owned(),
        "exec 3<>/dev/tcp/127.0.0.1/9".to_owned(),
        format!("chmod 700 {}", outside.path().display()),
        // This test's own process: outside the command's PID namespace.
        format!(
            "cat /proc/{}/environ >/dev/null && echo readable",
            std::process::id()
        ),
    ];
    let turns = commands
        .iter()
        .map(|c| Turn::tool_use("Bash", json!({"command": c})))
        .chain([Turn::text("done")]);
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    let gyre = sandbox.gyre(&server).unwrap();
    let mut as_user = std::process::Command::new("setpriv");
    as_user
        .args(["--reuid", &uid, "--regid", &gid, "--clear-groups", "--"])
        .arg(gyre.get_program())
        .args(gyre.get_args())
        .args(["-p", "go", "--output-format", "stream-json", "--verbose"])
        .args(ALLOWED)
        .env_clear()
        .envs(gyre.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("PATH", "/usr/bin:/bin")
        .current_dir(sandbox.project())
        .stdin(std::process::Stdio::null());
    let out = run(&mut as_user).unwrap();
    let results = ran(&out, commands.len());
    assert_eq!(results[0], (false, uid.clone()), "{results:?}");
    assert_eq!(results[1], (false, "ok".to_owned()));
    assert!(results[2].0, "{results:?}");
    assert_eq!(read(&sandbox.project().join(".gyre/settings.json")), "{}");
    assert!(
        results[3].0 && results[3].1.contains("Permission denied"),
        "{results:?}"
    );
    assert!(results[4].0, "{results:?}");
    assert!(!outside.path().join("new.txt").exists());
    let count: u32 = results[5].1.trim().parse().unwrap();
    assert!(count <= 3, "{results:?}");
    for (i, what) in [
        (6, "a missing .mcp.json was created"),
        (7, "a missing .claude/ was created"),
        (8, "a block device was made"),
        (9, "a TCP socket was opened"),
        (10, "a mode outside the workspace was changed"),
    ] {
        assert!(results[i].0, "{what}: {results:?}");
    }
    assert!(!results[11].1.contains("readable"), "{results:?}");
    for name in [".mcp.json", ".claude", "disk"] {
        assert!(
            sandbox.project().join(name).symlink_metadata().is_err(),
            "{name}: {results:?}"
        );
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(outside.path()).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o777);
}

/// Where gyre may not create namespaces (not root, unprivileged user namespaces off),
/// the sandbox cannot be enforced: as without Landlock, gyre says so once and asks
/// before every command the sandbox would confine (headless: denies).
#[test]
fn without_user_namespaces_plan_mode_asks_before_every_command_and_says_so_once() {
    let sandbox = Sandbox::new().unwrap();
    let commands = ["cat /etc/hostname", "touch made.txt"];
    let out = bash_session(
        &sandbox,
        &commands,
        PLAN,
        &[("GYRE_TEST_NO_NAMESPACES", "1")],
    );
    let results = ran(&out, commands.len());
    assert_eq!(
        out.stderr
            .matches("does not let gyre create user namespaces")
            .count(),
        1,
        "{}",
        out.stderr
    );
    for (is_error, text) in &results {
        assert!(is_error, "{text}");
    }
    assert_eq!(
        out.result().unwrap()["permission_denials"]
            .as_array()
            .unwrap()
            .len(),
        commands.len()
    );
    assert!(!sandbox.project().join("made.txt").exists());
}

/// Read deny rules hold in the kernel for commands that run unsandboxed too: in a
/// private mount namespace the denied paths are covered by empty read-only files, so
/// neither a command the string checks cannot see through nor a copy or move reads
/// them.
#[test]
fn an_unsandboxed_command_reads_nothing_a_read_deny_rule_names() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("config/secret.env", "TOKEN=hunter2\n")
        .unwrap();
    sandbox.write("config/app.toml", "name = 1\n").unwrap();
    let commands = [
        "cat $(echo config/secret.env)",
        "f=config/secret; cp \"$f.env\" copy.env; cat copy.env",
        "f=config/secret; mv \"$f.env\" moved.env; cat moved.env",
        "cat config/app.toml",
    ];
    let args = [
        "--allowedTools",
        "Bash",
        "--disallowedTools",
        "Read(config/secret.env)",
    ];
    let out = bash_session(&sandbox, &commands, &args, &[]);
    let results = ran(&out, commands.len());
    for (command, (_, text)) in commands.iter().zip(&results) {
        assert!(!text.contains("hunter2"), "`{command}`: {text}");
    }
    assert_eq!(results[3], (false, "name = 1".to_owned()));
    assert_eq!(
        read(&sandbox.project().join("config/secret.env")),
        "TOKEN=hunter2\n"
    );
    // Where the namespace cannot be made, each such command is asked about instead
    // (one whose file only the kernel can see: the parser refuses the first outright).
    let out = bash_session(
        &sandbox,
        &commands[1..2],
        &args,
        &[("GYRE_TEST_NO_NAMESPACES", "1")],
    );
    let results = ran(&out, 1);
    assert!(
        results[0].0 && !results[0].1.contains("hunter2"),
        "{results:?}"
    );
    assert!(
        out.stderr
            .contains("does not let gyre create user namespaces"),
        "{}",
        out.stderr
    );
    // Without deny rules an unsandboxed command needs no namespace.
    let out = bash_session(
        &sandbox,
        &["cat config/app.toml"],
        ALLOWED,
        &[("GYRE_TEST_NO_NAMESPACES", "1")],
    );
    assert_eq!(ran(&out, 1)[0], (false, "name = 1".to_owned()));
}
