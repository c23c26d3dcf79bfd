//! Plan mode through the real binary (issue #19): writer commands leave the tree as it
//! was — refused by the classifier, and when a rule lets them run, stopped by the
//! kernel (Landlock) — while ordinary read-only commands still run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use gyre_e2e::{Run, Sandbox, TEST_API_KEY, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

/// Commands that write, delete, or run something that writes. `hostname NAME` and the
/// like are left out: Landlock guards files, and the tests run as root.
const WRITERS: &[&str] = &[
    "touch new.txt",
    "echo x > new.txt",
    "echo x >> data.txt",
    "printf x > new.txt",
    ": > data.txt",
    "> data.txt",
    "tee new.txt < data.txt",
    "cp data.txt new.txt",
    "cp -r src src2",
    "mv data.txt moved.txt",
    "rm data.txt",
    "rm -rf src",
    "mkdir d",
    "mkdir -p d/e",
    "ln -s data.txt link",
    "ln data.txt hard",
    "truncate -s 0 data.txt",
    "dd if=/dev/zero of=new.txt count=1",
    "sed -i s/a/b/ data.txt",
    "perl -pi -e s/a/b/ data.txt",
    "perl -e 'open F, \">new.txt\"'",
    "python3 -c \"open('new.txt','w')\"",
    "python3 -c \"import os; os.mkdir('d')\"",
    "sort -o data.txt data.txt",
    "sort --output=new.txt data.txt",
    "uniq data.txt new.txt",
    "file -C -m data.txt",
    "find . -delete",
    "find . -name data.txt -exec rm {} ';'",
    "find . '-delete'",
    "find . '-exec' touch new.txt ';'",
    "sort --compress-program=./compress -S 1 data.txt",
    "find . -fprint new.txt",
    "find . -fprint0 new.txt",
    "find . -fls new.txt",
    "find . -fprintf new.txt %p",
    "awk '{print > \"new.txt\"}' data.txt",
    "awk 'BEGIN{system(\"touch new.txt\")}'",
    "bash -c 'touch new.txt'",
    "sh -c 'echo > new.txt'",
    "eval 'touch new.txt'",
    "echo new.txt | xargs touch",
    "(touch new.txt)",
    "{ touch new.txt; }",
    "echo $(touch new.txt)",
    "echo `touch new.txt`",
    "cat <(touch new.txt)",
    "exec 3>new.txt",
    "env touch new.txt",
    "timeout 5 touch new.txt",
    "nice touch new.txt",
    "setsid touch new.txt",
    "tar cf new.tar src",
    "gzip data.txt",
    "zip -q new.zip data.txt",
    "split -l 1 data.txt",
    "install -m 644 data.txt new.txt",
    "mkfifo fifo",
    "curl -s -o new.txt file:///etc/hostname",
    "git init -q again",
    "git add data.txt",
    "git commit -q --allow-empty -m x",
    "git tag t",
    "git branch b",
    "git config core.x y",
    "git log --output=new.txt",
    "git diff --output=new.txt",
    "git show --output=new.txt HEAD",
    "git grep -Otouch a",
    "git reflog expire --all --expire=now",
    "git gc -q",
    "git update-ref refs/heads/z HEAD",
];

/// Writers of metadata only: Landlock does not govern modes, owners or timestamps, so
/// only the classifier stops these (docs/security.md); and writers that need a program
/// the test machine may lack.
const METADATA_WRITERS: &[&str] = &[
    "chmod 000 data.txt",
    "chmod -R 777 src",
    "touch -d 2000-01-01 data.txt",
    "chown nobody data.txt",
    // Refused by the classifier (rg may not be installed here).
    "rg --pre ./evil a",
    "rg --pre=./evil a",
];

const READERS: &[&str] = &[
    "ls",
    "ls -la src",
    "cat data.txt",
    "grep -rn a .",
    "git log --oneline",
    "git status --short",
    "find . -name '*.rs'",
    "sort data.txt",
    "awk '{print $1}' data.txt",
    "wc -l data.txt && head -1 data.txt | tr a-z A-Z",
];

/// A project with a file, a source dir and a git repository with one commit.
fn project(sandbox: &Sandbox) {
    sandbox.write("data.txt", "b\na\nc\n").unwrap();
    sandbox.write("src/lib.rs", "fn main() {}\n").unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(sandbox.project())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "init"]);
}

/// Every file under `dir` with its content and mode, directories included.
fn snapshot(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    use std::os::unix::fs::MetadataExt as _;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(Result::unwrap) {
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let key = path.strip_prefix(dir).unwrap().display().to_string();
            if meta.is_dir() {
                stack.push(path);
                out.insert(format!("{key}/"), (meta.mode(), Vec::new()));
            } else {
                let content = if meta.is_file() {
                    std::fs::read(&path).unwrap()
                } else {
                    Vec::new()
                };
                out.insert(key, (meta.mode(), content));
            }
        }
    }
    out
}

/// The paths whose content, mode or existence differ.
fn changes(
    before: &BTreeMap<String, (u32, Vec<u8>)>,
    after: &BTreeMap<String, (u32, Vec<u8>)>,
) -> Vec<String> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .cloned()
        .collect()
}

/// Runs one Bash call per turn, headless, in `mode`.
fn bash_session(sandbox: &Sandbox, mode: &str, commands: &[&str], extra: &[&str]) -> Run {
    let turns = commands
        .iter()
        .map(|c| Turn::tool_use("Bash", json!({"command": c})))
        .chain([Turn::text("done")]);
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    run(sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "go",
            "--permission-mode",
            mode,
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(extra))
    .unwrap()
}

fn plan_session(sandbox: &Sandbox, commands: &[&str], extra: &[&str]) -> Run {
    bash_session(sandbox, "plan", commands, extra)
}

/// The Bash results in call order: (is_error, text).
fn bash_results(out: &Run) -> Vec<(bool, String)> {
    gyre_e2e::tool_results_of_lines(&out.lines().unwrap())
}

#[test]
fn plan_mode_runs_readers_and_refuses_writers() {
    assert!(WRITERS.len() + METADATA_WRITERS.len() >= 60);
    let sandbox = Sandbox::new().unwrap();
    project(&sandbox);
    let before = snapshot(&sandbox.project());
    let commands: Vec<&str> = READERS
        .iter()
        .chain(WRITERS)
        .chain(METADATA_WRITERS)
        .copied()
        .collect();
    let out = plan_session(&sandbox, &commands, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(&out);
    assert_eq!(results.len(), commands.len());
    for (command, (is_error, text)) in commands.iter().zip(&results) {
        if READERS.contains(command) {
            assert!(!is_error, "reader `{command}` failed: {text}");
        } else {
            assert!(is_error, "writer `{command}` was run: {text}");
            assert!(text.contains("denied"), "`{command}`: {text}");
        }
    }
    let changed = changes(&before, &snapshot(&sandbox.project()));
    assert!(changed.is_empty(), "changed: {changed:?}");
}

#[test]
fn in_plan_mode_the_kernel_stops_writers_a_rule_lets_run() {
    let sandbox = Sandbox::new().unwrap();
    project(&sandbox);
    let before = snapshot(&sandbox.project());
    let outside = sandbox.home().join("outside.txt");
    let escape = format!("touch {}", outside.display());
    let commands: Vec<&str> = WRITERS.iter().copied().chain([escape.as_str()]).collect();
    let out = plan_session(&sandbox, &commands, &["--allowedTools", "Bash"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(bash_results(&out).len(), commands.len());
    let changed = changes(&before, &snapshot(&sandbox.project()));
    assert!(changed.is_empty(), "changed: {changed:?}");
    assert!(!outside.exists());
}

#[test]
fn bash_never_sees_the_api_key_not_even_in_gyres_own_environ() {
    let sandbox = Sandbox::new().unwrap();
    let commands = [
        "cat /proc/$PPID/environ | tr '\\0' '\\n'",
        "env",
        "cat /proc/$PPID/cmdline",
    ];
    let out = bash_session(&sandbox, "bypassPermissions", &commands, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(&out);
    assert!(
        results[0].1.contains("GYRE_HOME="),
        "the environ was read: {}",
        results[0].1
    );
    for (command, (_, text)) in commands.iter().zip(&results) {
        assert!(!text.contains(TEST_API_KEY), "`{command}` printed the key");
    }
    assert!(!out.stdout.contains(TEST_API_KEY));
}

#[test]
fn plan_mode_asks_before_reading_outside_the_working_directory() {
    let sandbox = Sandbox::new().unwrap();
    project(&sandbox);
    let outside = sandbox.home().join("secret.txt");
    std::fs::write(&outside, "top secret\n").unwrap();
    let commands = [
        "cat ../home/secret.txt".to_owned(),
        format!("cat {}", outside.display()),
        "cat /proc/$PPID/environ".to_owned(),
        "cat data.txt".to_owned(),
    ];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let out = plan_session(&sandbox, &refs, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = bash_results(&out);
    for (command, (is_error, text)) in commands.iter().zip(&results).take(3) {
        assert!(is_error, "`{command}` ran: {text}");
        assert!(!text.contains("top secret"), "`{command}`: {text}");
    }
    assert!(!results[3].0, "{}", results[3].1);
}

#[test]
fn with_sandbox_enabled_bash_writes_only_inside_the_project() {
    let sandbox = Sandbox::new().unwrap();
    std::fs::write(
        sandbox.home().join("settings.json"),
        r#"{"sandbox":{"enabled":true}}"#,
    )
    .unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            r#"{"sandbox":{"allowNetwork":true}}"#,
        )
        .unwrap();
    let outside = sandbox.home().join("escaped.txt");
    let commands = [
        "echo in > inside.txt".to_owned(),
        format!("echo out > {}", outside.display()),
    ];
    let refs: Vec<&str> = commands.iter().map(String::as_str).collect();
    let out = bash_session(&sandbox, "bypassPermissions", &refs, &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("ignored sandbox.allowNetwork"),
        "{}",
        out.stderr
    );
    assert!(sandbox.project().join("inside.txt").exists());
    assert!(!outside.exists());
    let results = bash_results(&out);
    // Outside the writable roots the sandbox's mount namespace is read-only.
    assert!(
        results[1].0 && results[1].1.contains("Read-only file system"),
        "{:?}",
        results[1]
    );
}
