//! An Edit or Write the model got wrong is told before anyone is asked to approve it:
//! the user is never asked to allow a change that then fails (Claude Code checks the
//! input the same way before its permission prompt).
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, Tool, ToolCall, ToolContext, ToolOutput,
    ToolRegistry, run_tool_call,
};
use serde_json::{Value, json};

/// Allows every call and remembers which tools it was asked about.
#[derive(Default)]
struct Asked(Mutex<Vec<String>>);

impl CanUseTool for Asked {
    fn can_use_tool<'a>(
        &'a self,
        tool: &'a dyn Tool,
        _: &'a ToolCall,
        _: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        self.0.lock().unwrap().push(tool.name().into_owned());
        Box::pin(async { PermissionDecision::Allow })
    }
}

struct Session {
    dir: tempfile::TempDir,
    ctx: ToolContext,
    asked: Asked,
}

impl Session {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        Self {
            dir,
            ctx,
            asked: Asked::default(),
        }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    async fn call(&self, name: &str, input: Value) -> ToolOutput {
        let call = ToolCall::new("toolu_1", name, input);
        run_tool_call(
            &ToolRegistry::with_default_tools(),
            &call,
            &self.ctx,
            &self.asked,
            &|_| {},
        )
        .await
        .output
    }

    fn asked(&self) -> Vec<String> {
        std::mem::take(&mut *self.asked.0.lock().unwrap())
    }
}

#[tokio::test]
async fn an_edit_of_a_file_not_read_is_refused_without_asking() {
    let s = Session::new();
    std::fs::write(s.dir.path().join("a.txt"), "hello\nworld\n").unwrap();
    let out = s
        .call(
            "Edit",
            json!({"file_path": s.path("a.txt"), "old_string": "world", "new_string": "gyre"}),
        )
        .await;
    assert!(out.is_error);
    assert!(
        out.content.contains("File has not been read yet"),
        "{}",
        out.content
    );
    assert!(
        s.asked().is_empty(),
        "asked to approve an edit that could not be made"
    );
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("a.txt")).unwrap(),
        "hello\nworld\n"
    );
}

#[tokio::test]
async fn an_edit_whose_string_is_missing_or_ambiguous_is_refused_without_asking() {
    let s = Session::new();
    std::fs::write(s.dir.path().join("a.txt"), "one two two\n").unwrap();
    let read = s.call("Read", json!({"file_path": s.path("a.txt")})).await;
    assert!(!read.is_error, "{}", read.content);
    assert_eq!(s.asked(), ["Read"]);
    for (old, expected) in [
        ("three", "String to replace not found in file."),
        ("two", "Found 2 matches of the string to replace"),
    ] {
        let out = s
            .call(
                "Edit",
                json!({"file_path": s.path("a.txt"), "old_string": old, "new_string": "x"}),
            )
            .await;
        assert!(out.content.contains(expected), "{}", out.content);
        assert!(s.asked().is_empty(), "asked about an edit of {old:?}");
    }
    // A good edit of the same file is asked about, then made.
    let out = s
        .call(
            "Edit",
            json!({"file_path": s.path("a.txt"), "old_string": "one", "new_string": "1"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(s.asked(), ["Edit"]);
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join("a.txt")).unwrap(),
        "1 two two\n"
    );
}

#[tokio::test]
async fn changes_on_disk_since_the_read_are_told_before_asking_about_edit_or_write() {
    let s = Session::new();
    let file = s.dir.path().join("a.txt");
    std::fs::write(&file, "before\n").unwrap();
    let read = s.call("Read", json!({"file_path": s.path("a.txt")})).await;
    assert!(!read.is_error, "{}", read.content);
    s.asked();
    // Someone else changes the file (a different length, so the mtime alone need not move).
    std::fs::write(&file, "changed by the user\n").unwrap();
    let edit = s
        .call(
            "Edit",
            json!({"file_path": s.path("a.txt"), "old_string": "changed", "new_string": "x"}),
        )
        .await;
    let write = s
        .call(
            "Write",
            json!({"file_path": s.path("a.txt"), "content": "overwritten\n"}),
        )
        .await;
    for out in [&edit, &write] {
        assert!(out.is_error);
        assert!(out.content.contains("modified"), "{}", out.content);
    }
    assert!(s.asked().is_empty());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "changed by the user\n"
    );
}

#[tokio::test]
async fn paths_the_session_never_read_are_not_looked_at_before_the_permission_check() {
    let s = Session::new();
    // A Write of a new file and an Edit creating one are asked about as before: whether
    // a path exists is learned only once the call is allowed.
    let write = s
        .call(
            "Write",
            json!({"file_path": s.path("new.txt"), "content": "fresh\n"}),
        )
        .await;
    assert!(!write.is_error, "{}", write.content);
    let create = s
        .call(
            "Edit",
            json!({"file_path": s.path("made.txt"), "old_string": "", "new_string": "made\n"}),
        )
        .await;
    assert!(!create.is_error, "{}", create.content);
    assert_eq!(s.asked(), ["Write", "Edit"]);
    // An Edit of a path never read says "read it first" whether or not it exists.
    let missing = s
        .call(
            "Edit",
            json!({"file_path": s.path("nowhere.txt"), "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(
        missing.content.contains("File has not been read yet"),
        "{}",
        missing.content
    );
    assert!(s.asked().is_empty());
}
