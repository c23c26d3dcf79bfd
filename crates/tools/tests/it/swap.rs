//! Regression (issue #9 containment): a symlink swapped in between the permission check
//! and the tool's use of the path is refused, never followed. The swap happens inside the
//! permission check itself, so the race is won every time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, Tool, ToolCall, ToolContext, ToolRegistry,
    run_tool_call,
};
use serde_json::{Value, json};

/// Allows the call, but first replaces `victim` with a symlink to `target`.
struct SwapThenAllow {
    victim: PathBuf,
    target: PathBuf,
}

impl CanUseTool for SwapThenAllow {
    fn can_use_tool<'a>(
        &'a self,
        _tool: &'a dyn Tool,
        _call: &'a ToolCall,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async move {
            let tmp = self.victim.with_extension("swap-tmp");
            std::os::unix::fs::symlink(&self.target, &tmp).unwrap();
            if self.victim.is_dir() {
                std::fs::remove_dir_all(&self.victim).unwrap();
            }
            std::fs::rename(&tmp, &self.victim).unwrap();
            PermissionDecision::Allow
        })
    }
}

struct Setup {
    _work: tempfile::TempDir,
    _outside: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
}

fn setup() -> Setup {
    let work_dir = tempfile::tempdir().unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let work = work_dir.path().canonicalize().unwrap();
    let outside = outside_dir.path().canonicalize().unwrap();
    std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET\n").unwrap();
    std::fs::write(work.join("file.txt"), "inside\n").unwrap();
    std::fs::create_dir(work.join("sub")).unwrap();
    std::fs::write(work.join("sub/file.txt"), "inside\n").unwrap();
    Setup {
        _work: work_dir,
        _outside: outside_dir,
        work,
        outside,
    }
}

async fn call(s: &Setup, name: &str, input: Value, victim: &Path, target: &Path) -> String {
    let ctx = ToolContext::new(s.work.clone());
    // Edit and Write need a prior Read of the inside file.
    ctx.file_state.record(
        &s.work.join("sub/file.txt"),
        gyre_tools::FileState::of(b"inside\n", None),
    );
    let swap = SwapThenAllow {
        victim: victim.to_path_buf(),
        target: target.to_path_buf(),
    };
    let registry = ToolRegistry::with_default_tools();
    let out = run_tool_call(
        &registry,
        &ToolCall::new("t", name, input),
        &ctx,
        &swap,
        &|_| {},
    )
    .await;
    assert!(out.output.is_error, "{name}: {}", out.output.content);
    out.output.content
}

fn outside_untouched(s: &Setup) {
    let mut names: Vec<String> = std::fs::read_dir(&s.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["secret.txt"]);
    assert_eq!(
        std::fs::read_to_string(s.outside.join("secret.txt")).unwrap(),
        "OUTSIDE-SECRET\n"
    );
}

#[tokio::test]
async fn read_refuses_a_file_swapped_for_a_symlink_after_the_check() {
    let s = setup();
    let victim = s.work.join("file.txt");
    let out = call(
        &s,
        "Read",
        json!({"file_path": victim}),
        &victim,
        &s.outside.join("secret.txt"),
    )
    .await;
    assert!(!out.contains("OUTSIDE-SECRET"), "{out}");
    assert!(out.contains("changed after the permission check"), "{out}");
}

#[tokio::test]
async fn read_refuses_a_directory_swapped_for_a_symlink_after_the_check() {
    let s = setup();
    std::fs::write(s.outside.join("file.txt"), "OUTSIDE-SECRET\n").unwrap();
    let victim = s.work.join("sub");
    let out = call(
        &s,
        "Read",
        json!({"file_path": victim.join("file.txt")}),
        &victim,
        &s.outside,
    )
    .await;
    assert!(!out.contains("OUTSIDE-SECRET"), "{out}");
    std::fs::remove_file(s.outside.join("file.txt")).unwrap();
    outside_untouched(&s);
}

#[tokio::test]
async fn edit_and_write_refuse_a_directory_swapped_for_a_symlink_after_the_check() {
    for (name, input) in [
        (
            "Edit",
            json!({"old_string": "inside", "new_string": "PWNED"}),
        ),
        ("Write", json!({"content": "PWNED"})),
        ("Write", json!({"content": "PWNED", "new": true})),
    ] {
        let s = setup();
        std::fs::write(s.outside.join("file.txt"), "inside\n").unwrap();
        let victim = s.work.join("sub");
        let mut input = input;
        let file = if input.get("new").is_some() {
            "new.txt"
        } else {
            "file.txt"
        };
        input.as_object_mut().unwrap().remove("new");
        input["file_path"] = json!(victim.join(file));
        let out = call(&s, name, input, &victim, &s.outside).await;
        assert!(!out.contains("PWNED"), "{name}: {out}");
        assert_eq!(
            std::fs::read_to_string(s.outside.join("file.txt")).unwrap(),
            "inside\n",
            "{name} wrote through the link"
        );
        assert!(
            !s.outside.join("new.txt").exists(),
            "{name} created a file outside"
        );
    }
}

#[tokio::test]
async fn grep_and_glob_refuse_a_directory_swapped_for_a_symlink_after_the_check() {
    for (name, input) in [
        (
            "Grep",
            json!({"pattern": "OUTSIDE", "output_mode": "content"}),
        ),
        ("Glob", json!({"pattern": "*.txt"})),
    ] {
        let s = setup();
        let victim = s.work.join("sub");
        let mut input = input;
        input["path"] = json!(victim);
        let out = call(&s, name, input, &victim, &s.outside).await;
        assert!(
            !out.contains("OUTSIDE-SECRET") && !out.contains("secret.txt"),
            "{name}: {out}"
        );
    }
}

/// Swaps what `a` and `b` name, in one step (`renameat2` with `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) {
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        a,
        rustix::fs::CWD,
        b,
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
}

/// Exchanges `work/sub` (a directory of inside files) and `work/sub-link` (a symlink to
/// the outside directory) atomically, as fast as it can, until stopped.
struct Swapper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Swapper {
    fn start(s: &Setup) -> Self {
        use std::sync::atomic::Ordering;
        std::os::unix::fs::symlink(&s.outside, s.work.join("sub-link")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, b) = (s.work.join("sub"), s.work.join("sub-link"));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !flag.load(Ordering::Relaxed) {
                exchange(&a, &b);
                swaps += 1;
            }
            swaps
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops swapping (leaving `sub` a directory) and returns the number of swaps.
    fn stop(mut self, s: &Setup) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let swaps = self.thread.take().unwrap().join().unwrap();
        if s.work.join("sub").is_symlink() {
            exchange(&s.work.join("sub"), &s.work.join("sub-link"));
        }
        swaps
    }
}

/// Walks raced against the swapper (the old walk leaked in about one of five).
const RACING_WALKS: usize = 150;
/// Writes raced against it (the old one left a temp file outside in about one of 1000).
const RACING_WRITES: usize = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_and_glob_walks_never_enter_a_directory_swapped_for_a_symlink_while_they_run() {
    let s = setup();
    for i in 0..20 {
        std::fs::write(s.work.join(format!("sub/f{i}.txt")), "inside\n").unwrap();
        std::fs::write(s.outside.join(format!("o{i}.txt")), "OUTSIDE-SECRET\n").unwrap();
    }
    let registry = ToolRegistry::with_default_tools();
    let ctx = ToolContext::new(s.work.clone());
    let swapper = Swapper::start(&s);
    let mut saw_inside = 0;
    for i in 0..RACING_WALKS {
        let (name, input) = if i % 2 == 0 {
            (
                "Grep",
                json!({"pattern": "SECRET|inside", "output_mode": "content"}),
            )
        } else {
            ("Glob", json!({"pattern": "**/*.txt"}))
        };
        let out = run_tool_call(
            &registry,
            &ToolCall::new("t", name, input),
            &ctx,
            &gyre_tools::AllowAll,
            &|_| {},
        )
        .await;
        let text = &out.output.content;
        assert!(
            !text.contains("OUTSIDE-SECRET")
                && !text.contains("secret.txt")
                && !text.contains("/o1"),
            "{name} call {i} reached outside: {text}"
        );
        saw_inside += usize::from(text.contains("f1"));
    }
    let swaps = swapper.stop(&s);
    assert!(swaps > 20, "the swapper barely ran ({swaps} swaps)");
    assert!(saw_inside > 0, "no walk ever saw the inside directory");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_racing_a_directory_swap_leave_nothing_outside() {
    let s = setup();
    let registry = ToolRegistry::with_default_tools();
    let ctx = ToolContext::new(s.work.clone());
    // acceptEdits: writes inside the working directory need no rule; outside are denied.
    let permissions = gyre_tools::Permissions::from_rules::<&str>(
        gyre_tools::PermissionMode::AcceptEdits,
        &[],
        &[],
        &[],
    )
    .unwrap();
    let swapper = Swapper::start(&s);
    for i in 0..RACING_WRITES {
        // New files, and new files in new directories.
        let rel = if i % 2 == 0 {
            format!("sub/new{i}.txt")
        } else {
            format!("sub/d{i}/e/new.txt")
        };
        let input = json!({"file_path": s.work.join(rel), "content": "x"});
        let _ = run_tool_call(
            &registry,
            &ToolCall::new("t", "Write", input),
            &ctx,
            &permissions,
            &|_| {},
        )
        .await;
    }
    swapper.stop(&s);
    outside_untouched(&s);
    let leftovers: Vec<String> = std::fs::read_dir(s.work.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gyre-write-"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}
