#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::support::{ctx, p, run};
use serde_json::json;

fn write(dir: &Path, rel: &str, text: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn set_mtime(dir: &Path, rel: &str, secs_ago: u64) {
    let file = std::fs::File::options()
        .write(true)
        .open(dir.join(rel))
        .unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(secs_ago))
        .unwrap();
}

fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "src/main.rs", "fn main() {\n    let needle = 1;\n}\n");
    write(d, "src/lib.rs", "// needle here\npub fn f() {}\n");
    write(d, "docs/guide.md", "A Needle in docs\n");
    write(d, ".hidden/conf.rs", "needle hidden\n");
    write(d, "target/out.rs", "needle ignored\n");
    write(d, ".gitignore", "target/\n");
    write(d, ".git/config", "needle in git\n");
    set_mtime(d, "src/main.rs", 300);
    set_mtime(d, "src/lib.rs", 100);
    set_mtime(d, ".hidden/conf.rs", 200);
    dir
}

#[tokio::test]
async fn grep_files_mode_lists_newest_first_respecting_gitignore_and_hidden() {
    let dir = tree();
    let out = run(&ctx(dir.path()), "Grep", json!({"pattern": "needle"})).await;
    assert!(!out.is_error, "{}", out.content);
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines[0], "Found 3 files");
    assert_eq!(
        lines[1..],
        [
            p(dir.path(), "src/lib.rs"),
            p(dir.path(), ".hidden/conf.rs"),
            p(dir.path(), "src/main.rs")
        ]
    );
}

#[tokio::test]
async fn grep_content_mode_prints_path_line_text() {
    let dir = tree();
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "needle", "output_mode": "content", "-i": true, "glob": "*.md"}),
    )
    .await;
    assert_eq!(out.content, "docs/guide.md:1:A Needle in docs");
    let no_numbers = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "let", "output_mode": "content", "-n": false}),
    )
    .await;
    assert_eq!(no_numbers.content, "src/main.rs:    let needle = 1;");
}

#[tokio::test]
async fn grep_content_mode_shows_context_lines() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.txt",
        "1\n2\n3\nhit\n5\n6\n7\n8\n9\nhit\n11\n",
    );
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "hit", "output_mode": "content", "-C": 1}),
    )
    .await;
    assert_eq!(
        out.content,
        "a.txt-3-3\na.txt:4:hit\na.txt-5-5\n--\na.txt-9-9\na.txt:10:hit\na.txt-11-11"
    );
    let after = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "hit", "output_mode": "content", "-A": 2, "-B": 0}),
    )
    .await;
    assert_eq!(
        after.content,
        "a.txt:4:hit\na.txt-5-5\na.txt-6-6\n--\na.txt:10:hit\na.txt-11-11"
    );
}

#[tokio::test]
async fn grep_count_mode_counts_per_file_with_a_total() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.txt", "x\nx\ny\n");
    write(dir.path(), "b.txt", "x\n");
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "x", "output_mode": "count"}),
    )
    .await;
    assert_eq!(
        out.content,
        "a.txt:2\nb.txt:1\n\nFound 3 total occurrences across 2 files."
    );
}

#[tokio::test]
async fn grep_type_filter_uses_ripgrep_types() {
    let dir = tree();
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "needle", "type": "md", "-i": true}),
    )
    .await;
    assert_eq!(
        out.content,
        format!("Found 1 file\n{}", p(dir.path(), "docs/guide.md"))
    );
    let bad = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "needle", "type": "nosuchtype"}),
    )
    .await;
    assert!(bad.is_error);
    assert!(bad.content.contains("type `nosuchtype`"), "{}", bad.content);
}

#[tokio::test]
async fn grep_head_limit_and_offset_page_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..300).map(|i| format!("m{i}\n")).collect();
    write(dir.path(), "a.txt", &text);
    let c = ctx(dir.path());
    let out = run(
        &c,
        "Grep",
        json!({"pattern": "m", "output_mode": "content"}),
    )
    .await;
    assert_eq!(
        out.content
            .lines()
            .filter(|l| l.starts_with("a.txt:"))
            .count(),
        250
    );
    assert!(
        out.content
            .ends_with("[Showing results with pagination = limit: 250, offset: 0]")
    );
    let page = run(
        &c,
        "Grep",
        json!({"pattern": "m", "output_mode": "content", "head_limit": 2, "offset": 10}),
    )
    .await;
    assert!(
        page.content
            .starts_with("a.txt:11:m10\na.txt:12:m11\n\n[Showing"),
        "{}",
        page.content
    );
    let all = run(
        &c,
        "Grep",
        json!({"pattern": "m", "output_mode": "content", "head_limit": 0}),
    )
    .await;
    assert_eq!(all.content.lines().count(), 300);
}

#[tokio::test]
async fn grep_cuts_long_lines_at_500_columns() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.txt",
        &format!("needle{}\n", "z".repeat(1000)),
    );
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "needle", "output_mode": "content"}),
    )
    .await;
    let text = out.content.strip_prefix("a.txt:1:").unwrap();
    assert!(text.starts_with(&format!("needle{}", "z".repeat(494))));
    assert!(text.contains("[line truncated"));
    assert!(text.len() < 600);
}

#[tokio::test]
async fn grep_invalid_regex_is_a_clear_error() {
    let dir = tree();
    let out = run(&ctx(dir.path()), "Grep", json!({"pattern": "foo(("})).await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("Invalid regex pattern `foo((`"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn grep_without_matches_says_so() {
    let dir = tree();
    let c = ctx(dir.path());
    assert_eq!(
        run(&c, "Grep", json!({"pattern": "zzzq"})).await.content,
        "No files found"
    );
    assert_eq!(
        run(
            &c,
            "Grep",
            json!({"pattern": "zzzq", "output_mode": "content"})
        )
        .await
        .content,
        "No matches found"
    );
}

#[tokio::test]
async fn grep_multiline_matches_across_lines() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.rs", "struct A {\n    x: u8,\n}\n");
    let out = run(
        &ctx(dir.path()),
        "Grep",
        json!({"pattern": "struct A \\{.*?x", "multiline": true, "output_mode": "content"}),
    )
    .await;
    assert_eq!(out.content, "a.rs:1:struct A {\na.rs:2:    x: u8,");
}

#[tokio::test]
async fn grep_of_a_single_file_and_a_missing_path() {
    let dir = tree();
    let c = ctx(dir.path());
    let out = run(
        &c,
        "Grep",
        json!({"pattern": "needle", "path": p(dir.path(), "src/lib.rs"), "output_mode": "content"}),
    )
    .await;
    assert_eq!(out.content, "src/lib.rs:1:// needle here");
    let missing = run(
        &c,
        "Grep",
        json!({"pattern": "x", "path": p(dir.path(), "nope")}),
    )
    .await;
    assert!(missing.is_error);
    assert!(missing.content.starts_with("Path does not exist:"));
}

#[tokio::test]
async fn glob_sorts_by_mtime_newest_first() {
    let dir = tree();
    let out = run(&ctx(dir.path()), "Glob", json!({"pattern": "**/*.rs"})).await;
    assert_eq!(
        out.content.lines().collect::<Vec<_>>(),
        [
            p(dir.path(), "src/lib.rs"),
            p(dir.path(), ".hidden/conf.rs"),
            p(dir.path(), "src/main.rs")
        ]
    );
    let scoped = run(
        &ctx(dir.path()),
        "Glob",
        json!({"pattern": "*.rs", "path": p(dir.path(), "src")}),
    )
    .await;
    assert_eq!(scoped.content.lines().count(), 2);
    let prefixed = run(&ctx(dir.path()), "Glob", json!({"pattern": "src/m*.rs"})).await;
    assert_eq!(prefixed.content, p(dir.path(), "src/main.rs"));
}

#[tokio::test]
async fn glob_caps_at_100_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..150 {
        write(dir.path(), &format!("d/f{i:03}.txt"), "");
    }
    let out = run(&ctx(dir.path()), "Glob", json!({"pattern": "**/*.txt"})).await;
    let lines: Vec<&str> = out.content.lines().collect();
    assert_eq!(lines.len(), 101);
    assert_eq!(
        lines[100],
        "(Results are truncated. Consider using a more specific path or pattern.)"
    );
}

#[tokio::test]
async fn glob_without_matches_says_so() {
    let dir = tree();
    let out = run(&ctx(dir.path()), "Glob", json!({"pattern": "**/*.zig"})).await;
    assert_eq!(out.content, "No files found");
    assert!(!out.is_error);
}

/// Regression (issue #9 containment): the permission check judges `path`; an absolute
/// pattern or a symlinked directory in the pattern must not walk outside it.
#[tokio::test]
async fn glob_patterns_cannot_walk_outside_the_search_path() {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s").unwrap();
    std::os::unix::fs::symlink(outside.path(), work.path().join("link")).unwrap();
    let root = work.path().canonicalize().unwrap();
    let ctx = gyre_tools::ToolContext::new(root.clone());
    let absolute = format!("{}/*.txt", outside.path().canonicalize().unwrap().display());
    for pattern in [absolute.as_str(), "link/*.txt"] {
        let found = gyre_tools::glob::find(&root, pattern, &ctx);
        assert!(found.is_err(), "{pattern}: {found:?}");
    }
    assert_eq!(
        gyre_tools::glob::find(&root, "**/*.txt", &ctx),
        Ok(Vec::new())
    );
}

/// A library user may give a relative directory; the tools must not then call every
/// path they check "changed after the permission check".
#[tokio::test]
async fn a_context_made_from_a_relative_directory_works() {
    let here = std::env::current_dir().unwrap();
    let ctx = gyre_tools::ToolContext::new(".");
    assert_eq!(ctx.cwd, here);
    let out = run(&ctx, "Glob", json!({"pattern": "Cargo.toml"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("Cargo.toml"), "{}", out.content);
    let out = run(
        &ctx,
        "Grep",
        json!({"pattern": "gyre-tools", "glob": "Cargo.toml"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
}
