//! Containment (issue #9): the file tools cannot reach outside the
//! working directories through `..`, symlinks (also one swapped in while the call runs)
//! or absolute paths; headless Bash runs only what rules allow; deny rules win in every
//! mode. All through the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Block, CapturedRequest, Script, TestServer, Turn};
use serde_json::{Value, json};

const SECRET: &str = "OUTSIDE-SECRET-5f0c2a";

/// A directory next to the project (outside every working directory) holding a secret.
fn outside_dir(sandbox: &Sandbox) -> PathBuf {
    let dir = sandbox.project().parent().unwrap().join("outside");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    dir
}

/// The text of every tool_result the model was sent.
fn tool_results(requests: &[CapturedRequest]) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for r in requests {
        for m in r.body["messages"].as_array().into_iter().flatten() {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "tool_result" {
                    out.push((
                        b["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                        b["content"].to_string(),
                        b["is_error"] == true,
                    ));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn listing(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn dot_dot_symlinks_and_absolute_paths_cannot_leave_the_working_directory() {
    let sandbox = Sandbox::new().unwrap();
    let outside = outside_dir(&sandbox);
    let before = listing(&outside);
    let project = sandbox.project();
    std::os::unix::fs::symlink(outside.join("secret.txt"), project.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, project.join("linkdir")).unwrap();
    let abs = outside.display().to_string();
    let calls: Vec<(&str, Value)> = vec![
        ("Read", json!({"file_path": "../outside/secret.txt"})),
        ("Read", json!({"file_path": format!("{abs}/secret.txt")})),
        ("Read", json!({"file_path": "link.txt"})),
        ("Read", json!({"file_path": "linkdir/secret.txt"})),
        (
            "Read",
            json!({"file_path": format!("{}/./../outside/secret.txt", project.display())}),
        ),
        ("Glob", json!({"pattern": "*", "path": "../outside"})),
        ("Glob", json!({"pattern": format!("{abs}/*.txt")})),
        ("Glob", json!({"pattern": "linkdir/*.txt"})),
        ("Grep", json!({"pattern": "OUTSIDE", "path": "../outside"})),
        ("Grep", json!({"pattern": "OUTSIDE", "path": "linkdir"})),
        (
            "Grep",
            json!({"pattern": "OUTSIDE", "path": format!("{abs}/secret.txt")}),
        ),
        (
            "Edit",
            json!({"file_path": "../outside/secret.txt", "old_string": "OUTSIDE", "new_string": "PWNED"}),
        ),
        (
            "Edit",
            json!({"file_path": "link.txt", "old_string": "OUTSIDE", "new_string": "PWNED"}),
        ),
        (
            "Write",
            json!({"file_path": "../outside/new.txt", "content": "x"}),
        ),
        (
            "Write",
            json!({"file_path": "linkdir/new.txt", "content": "x"}),
        ),
        (
            "Write",
            json!({"file_path": "link.txt", "content": "PWNED"}),
        ),
        (
            "Write",
            json!({"file_path": format!("{abs}/abs.txt"), "content": "x"}),
        ),
    ];
    let count = calls.len();
    let turn = Turn::response(calls.into_iter().map(|(n, i)| Block::tool_use(n, i)));
    // Also a search of the whole project: it must not follow the symlinks out.
    let search = Turn::tool_use(
        "Grep",
        json!({"pattern": "OUTSIDE", "output_mode": "content"}),
    )
    .and_tool_use("Glob", json!({"pattern": "**/*.txt"}));
    let server = TestServer::spawn(Script::new([turn, search, Turn::text("Done.")])).unwrap();
    // acceptEdits: edits inside the project need no rule, so only containment stops these.
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "escape",
        "--permission-mode",
        "acceptEdits",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let denials = out.result().unwrap()["permission_denials"]
        .as_array()
        .unwrap()
        .len();
    let results = tool_results(&server.requests());
    assert_eq!(results.len(), count + 2, "{results:#?}");
    for (id, text, is_error) in &results {
        assert!(!text.contains(SECRET), "{id} leaked the secret: {text}");
        assert!(
            !text.contains("secret.txt") || *is_error,
            "{id} listed outside files: {text}"
        );
    }
    // The two Edits name files the session never read: they are refused before the
    // permission check, as Claude Code's Edit is ("read it first"; nothing is looked at).
    let unread = results
        .iter()
        .filter(|(_, text, is_error)| *is_error && text.contains("File has not been read yet"))
        .count();
    assert_eq!(unread, 2, "{results:#?}");
    // Everything else but the two Globs whose pattern leads out (refused by the tool, not
    // by the policy) is a recorded denial.
    assert_eq!(denials, count - 4, "{results:#?}");
    assert_eq!(listing(&outside), before, "the outside directory changed");
}

#[test]
fn deny_rules_win_in_every_mode() {
    for mode in ["default", "acceptEdits", "plan", "bypassPermissions"] {
        let sandbox = Sandbox::new().unwrap();
        let key = sandbox.write("secret/key.txt", "hunter2\n").unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::tool_use("Read", json!({"file_path": key}))
                .and_tool_use("Grep", json!({"pattern": "hunter", "path": "secret"}))
                .and_tool_use("Bash", json!({"command": "touch made-it"}))
                .and_tool_use(
                    "Write",
                    json!({"file_path": "secret/new.txt", "content": "x"}),
                ),
            Turn::text("done"),
        ]))
        .unwrap();
        let out = run(sandbox.gyre(&server).unwrap().args([
            "-p",
            "try everything",
            "--permission-mode",
            mode,
            "--allowedTools",
            "Read Grep Bash Write",
            "--disallowedTools",
            // `Bash(touch:*)`, not bare `Bash`: a bare name takes the tool out of the
            // request, and this test is about calls the deny rules refuse.
            "Read(secret/**) Bash(touch:*) Edit(secret/**)",
            "--output-format",
            "json",
        ]))
        .unwrap();
        assert_eq!(out.code, Some(0), "{mode}: {}", out.stderr);
        let denied: Vec<String> = out.result().unwrap()["permission_denials"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["tool_name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(denied, ["Read", "Grep", "Bash", "Write"], "{mode}");
        assert!(!sandbox.project().join("made-it").exists(), "{mode}");
        assert!(!sandbox.project().join("secret/new.txt").exists(), "{mode}");
        let sent = server.requests()[1].body.to_string();
        assert!(!sent.contains("hunter2"), "{mode}: {sent}");
    }
}

#[test]
fn headless_bash_runs_only_what_the_rules_allow() {
    let sandbox = Sandbox::new().unwrap();
    let commands = [
        ("echo allowed > /dev/null", true),
        ("touch plain", false),
        ("echo ok && touch chained", false),
        ("echo ok; touch sequenced", false),
        ("echo ok || touch alternated", false),
        ("echo ok | tee piped", false),
        ("echo $(touch substituted)", false),
        ("echo `touch backticked`", false),
        ("echo ok > redirected", false),
        ("echo ok\ntouch newline", false),
        ("bash -c 'touch nested'", false),
    ];
    let turn = Turn::response(
        commands
            .iter()
            .map(|(c, _)| Block::tool_use("Bash", json!({"command": c}))),
    );
    let server = TestServer::spawn(Script::new([turn, Turn::text("done")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "run things",
        "--allowedTools",
        "Bash(echo:*)",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let denials: Vec<String> = out.result().unwrap()["permission_denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["tool_input"]["command"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<&str> = commands
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(denials, expected);
    let made: Vec<(String, String)> = listing(&sandbox.project());
    assert_eq!(
        made,
        Vec::<(String, String)>::new(),
        "a refused command ran"
    );
}

/// How long each state holds: short enough that swaps land inside calls, long enough
/// that both states are seen.
const HOLD: std::time::Duration = std::time::Duration::from_micros(150);

/// Swaps `path` between a file inside the project and a symlink to the secret outside,
/// as fast as it can, until stopped: each swap is one atomic rename.
fn swapper(path: PathBuf, target: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let dir = path.parent().unwrap().to_path_buf();
        let mut swaps = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let tmp = dir.join(".swap-link");
            let _ = std::fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&target, &tmp).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
            std::thread::sleep(HOLD);
            let tmp = dir.join(".swap-file");
            std::fs::write(&tmp, "inside\n").unwrap();
            std::fs::rename(&tmp, &path).unwrap();
            // The file stays longer than the link: writing it already kept the link in
            // place, and on a loaded machine a burst of Reads otherwise can meet only links.
            std::thread::sleep(HOLD * 3);
            swaps += 1;
        }
        swaps
    })
}

#[test]
fn a_symlink_swapped_in_during_the_call_does_not_leak_the_target() {
    const READS_PER_TURN: usize = 25;
    const TURNS: usize = 8;
    let sandbox = Sandbox::new().unwrap();
    let outside = outside_dir(&sandbox);
    let before = listing(&outside);
    let swapped = sandbox.write("swap.txt", "inside\n").unwrap();
    let mut turns: Vec<Turn> = (0..TURNS)
        .map(|t| {
            let mut blocks: Vec<Block> = (0..READS_PER_TURN)
                .map(|_| Block::tool_use("Read", json!({"file_path": "swap.txt"})))
                .collect();
            if t % 2 == 1 {
                blocks.push(Block::tool_use(
                    "Grep",
                    json!({"pattern": "OUTSIDE", "path": "swap.txt"}),
                ));
                blocks.push(Block::tool_use(
                    "Write",
                    json!({"file_path": "swap.txt", "content": "written\n"}),
                ));
            }
            Turn::response(blocks)
        })
        .collect();
    turns.push(Turn::text("done"));
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(
        swapped.clone(),
        outside.join("secret.txt"),
        Arc::clone(&stop),
    );
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read it many times",
        "--permission-mode",
        "acceptEdits",
        "--output-format",
        "json",
    ]))
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The run lasts a few hundred milliseconds; how many swaps fit in it depends on the
    // machine's load, so this only checks that the swapper was running throughout.
    assert!(swaps > 20, "the swapper barely ran ({swaps} swaps)");
    let results = tool_results(&server.requests());
    let read_inside = results
        .iter()
        .filter(|(_, t, _)| t.contains("inside"))
        .count();
    assert!(
        read_inside > 0,
        "no Read ever saw the inside file: {results:#?}"
    );
    for (id, text, _) in &results {
        assert!(
            !text.contains(SECRET),
            "{id} read through a swapped-in symlink: {text}"
        );
    }
    assert_eq!(
        listing(&outside),
        before,
        "the outside file was written through the link"
    );
}
