#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use std::os::unix::fs::PermissionsExt;

use crate::support::{ctx, p, run};
use serde_json::json;

async fn read(c: &gyre_tools::ToolContext, path: &str) {
    let out = run(c, "Read", json!({"file_path": path})).await;
    assert!(!out.is_error, "{}", out.content);
}

#[tokio::test]
async fn edit_of_unread_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\n").unwrap();
    let out = run(
        &ctx(dir.path()),
        "Edit",
        json!({"file_path": p(dir.path(), "a.txt"), "old_string": "one", "new_string": "two"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("File has not been read yet. Read it first before writing to it.")
    );
}

#[tokio::test]
async fn edit_of_file_changed_since_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a.txt");
    std::fs::write(&path, "one\n").unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    std::fs::write(&path, "one changed\n").unwrap();
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "one", "new_string": "two"}),
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("File has been modified since read, either by the user or by a linter. Read it again before attempting to write it."));
}

#[tokio::test]
async fn edit_replaces_a_unique_string_and_returns_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a.txt");
    std::fs::write(&path, "fn main() {\n    old();\n}\n").unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "old()", "new_string": "new()"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("-    old();"));
    assert!(out.content.contains("+    new();"));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "fn main() {\n    new();\n}\n"
    );
    // The cache follows the write: a second edit needs no new read.
    let again = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "new()", "new_string": "newer()"}),
    )
    .await;
    assert!(!again.is_error, "{}", again.content);
}

#[tokio::test]
async fn straight_quotes_in_old_string_match_curly_ones_and_keep_their_style() {
    // Models type straight quotes; prose and docs often hold typographic ones.
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "notes.md");
    std::fs::write(
        &path,
        "It\u{2019}s the \u{201C}fast\u{201D} path.\nKeep \"this\" as is.\n",
    )
    .unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "It's the \"fast\" path.", "new_string": "It's the \"slow\" path, isn't it?"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "It\u{2019}s the \u{201C}slow\u{201D} path, isn\u{2019}t it?\nKeep \"this\" as is.\n"
    );
    // Straight quotes in the file are matched as they are, and stay straight.
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "Keep \"this\"", "new_string": "Keep \"that\""}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .ends_with("Keep \"that\" as is.\n")
    );
}

#[tokio::test]
async fn edit_reports_a_missing_string() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a.txt");
    std::fs::write(&path, "abc\n").unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "xyz", "new_string": "q"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("String to replace not found in file.\nString: xyz")
    );
}

#[tokio::test]
async fn edit_with_several_matches_needs_replace_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a.txt");
    std::fs::write(&path, "foo foo\nfoo\n").unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "foo", "new_string": "bar"}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .contains("Found 3 matches of the string to replace, but replace_all is false."),
        "{}",
        out.content
    );
    let all = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "foo", "new_string": "bar", "replace_all": true}),
    )
    .await;
    assert!(!all.is_error, "{}", all.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "bar bar\nbar\n");
}

#[tokio::test]
async fn edit_with_identical_strings_is_a_validation_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &ctx(dir.path()),
        "Edit",
        json!({"file_path": p(dir.path(), "a"), "old_string": "x", "new_string": "x"}),
    )
    .await;
    assert_eq!(
        out.content,
        "<tool_use_error>No changes to make: old_string and new_string are exactly the same.</tool_use_error>"
    );
}

#[tokio::test]
async fn edit_keeps_crlf_line_endings() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "win.txt");
    std::fs::write(&path, "one\r\ntwo\r\nthree\r\n").unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "one\ntwo", "new_string": "uno\ndos"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "uno\r\ndos\r\nthree\r\n"
    );
}

#[tokio::test]
async fn edit_keeps_file_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "run.sh");
    std::fs::write(&path, "echo hi\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
    let c = ctx(dir.path());
    read(&c, &path).await;
    let out = run(
        &c,
        "Edit",
        json!({"file_path": path, "old_string": "hi", "new_string": "ho"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o751);
    // No temp file left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[tokio::test]
async fn edit_with_empty_old_string_creates_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "new/b.txt");
    let out = run(
        &ctx(dir.path()),
        "Edit",
        json!({"file_path": path, "old_string": "", "new_string": "hello"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello");
}

#[tokio::test]
async fn write_creates_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a/b/c.txt");
    let out = run(
        &ctx(dir.path()),
        "Write",
        json!({"file_path": path, "content": "x\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.starts_with("File created successfully at:"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

#[tokio::test]
async fn write_over_an_existing_file_needs_a_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = p(dir.path(), "a.txt");
    std::fs::write(&path, "old").unwrap();
    let c = ctx(dir.path());
    let out = run(&c, "Write", json!({"file_path": path, "content": "new"})).await;
    assert!(out.is_error);
    assert!(out.content.contains("File has not been read yet."));
    read(&c, &path).await;
    let out = run(&c, "Write", json!({"file_path": path, "content": "new"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
}

#[tokio::test]
async fn write_through_a_symlink_changes_the_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let target = p(dir.path(), "target.txt");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("link.txt")).unwrap();
    let c = ctx(dir.path());
    read(&c, &p(dir.path(), "link.txt")).await;
    let out = run(
        &c,
        "Write",
        json!({"file_path": p(dir.path(), "link.txt"), "content": "new"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    assert!(
        std::fs::symlink_metadata(dir.path().join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn a_write_removes_temp_files_a_killed_gyre_left_in_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    // pid_max is at most 4194304: this pid never runs.
    let stale = dir.path().join(".gyre-write-99999999-0123456789abcdef.tmp");
    let ours = dir.path().join(format!(
        ".gyre-write-{}-0123456789abcdef.tmp",
        std::process::id()
    ));
    let unrelated = dir.path().join(".gyre-writer-notes");
    for f in [&stale, &ours, &unrelated] {
        std::fs::write(f, "half").unwrap();
    }
    let out = run(
        &ctx(dir.path()),
        "Write",
        json!({"file_path": p(dir.path(), "new.txt"), "content": "x"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(!stale.exists(), "a dead gyre's temp file stayed");
    assert!(ours.exists(), "a live gyre's temp file was removed");
    assert!(unrelated.exists());
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".gyre-write-".to_owned() + &format!("{}-0123456789abcdef.tmp", std::process::id()),
            ".gyre-writer-notes".to_owned(),
            "new.txt".to_owned()
        ]
    );
}
