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
