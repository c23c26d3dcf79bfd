#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

mod support;

use serde_json::json;
use support::{ctx, p, run};

#[tokio::test]
async fn read_numbers_lines_from_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "a.txt")}),
    )
    .await;
    assert!(!out.is_error);
    assert_eq!(out.content, "1\talpha\n2\tbeta");
}

#[tokio::test]
async fn read_of_missing_file_says_it_does_not_exist_with_the_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let out = run(&c, "Read", json!({"file_path": p(dir.path(), "nope.txt")})).await;
    assert!(out.is_error);
    assert!(
        out.content.starts_with("File does not exist."),
        "{}",
        out.content
    );
    assert!(out.content.contains(&c.cwd.display().to_string()));
}

#[tokio::test]
async fn read_of_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "sub")}),
    )
    .await;
    assert!(out.is_error);
    assert!(out.content.contains("is a directory"), "{}", out.content);
}

#[tokio::test]
async fn read_of_binary_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blob"), b"abc\0def").unwrap();
    std::fs::write(dir.path().join("img.png"), b"not really").unwrap();
    for name in ["blob", "img.png"] {
        let out = run(
            &ctx(dir.path()),
            "Read",
            json!({"file_path": p(dir.path(), name)}),
        )
        .await;
        assert!(out.is_error);
        assert!(
            out.content
                .starts_with("This tool cannot read binary files."),
            "{}",
            out.content
        );
    }
}

#[tokio::test]
async fn read_of_300kb_file_without_offset_asks_for_offset_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let line = "x".repeat(99) + "\n";
    std::fs::write(dir.path().join("big.txt"), line.repeat(3000)).unwrap();
    let c = ctx(dir.path());
    let out = run(&c, "Read", json!({"file_path": p(dir.path(), "big.txt")})).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("exceeds maximum allowed size (256KB)"),
        "{}",
        out.content
    );
    assert!(out.content.contains("offset and limit"));

    let paged = run(
        &c,
        "Read",
        json!({"file_path": p(dir.path(), "big.txt"), "offset": 2990, "limit": 5}),
    )
    .await;
    assert!(!paged.is_error, "{}", paged.content);
    assert_eq!(paged.content.lines().count(), 5);
    assert!(paged.content.starts_with("2990\t"));
}

#[tokio::test]
async fn read_pages_with_offset_and_limit() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "a.txt"), "offset": 4, "limit": 3}),
    )
    .await;
    assert_eq!(out.content, "4\tline 4\n5\tline 5\n6\tline 6");
    let past = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "a.txt"), "offset": 50}),
    )
    .await;
    assert!(
        past.content
            .contains("shorter than the provided offset (50). The file has 10 lines.")
    );
}

#[tokio::test]
async fn read_returns_at_most_2000_lines_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
    std::fs::write(dir.path().join("a.txt"), text).unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "a.txt")}),
    )
    .await;
    assert_eq!(out.content.lines().count(), 2000);
    assert!(out.content.ends_with("2000\t2000"));
}

#[tokio::test]
async fn read_cuts_lines_over_2000_chars_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "y".repeat(5000)).unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "a.txt")}),
    )
    .await;
    let line = out.content.strip_prefix("1\t").unwrap();
    assert!(line.starts_with(&"y".repeat(2000)));
    assert!(!line.starts_with(&"y".repeat(2001)));
    assert!(line.contains("[line truncated, 5000 chars total]"));
}

#[tokio::test]
async fn read_of_empty_file_warns() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("e.txt"), "").unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "e.txt")}),
    )
    .await;
    assert!(!out.is_error);
    assert!(
        out.content
            .contains("the file exists but the contents are empty")
    );
}

#[tokio::test]
async fn read_records_the_file_in_the_file_state_cache() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "hi").unwrap();
    let c = ctx(dir.path());
    let _ = run(&c, "Read", json!({"file_path": p(dir.path(), "a.txt")})).await;
    let state = c.file_state.get(&c.cwd.join("a.txt")).unwrap();
    assert_eq!(state.len, 2);
    assert_eq!(
        state.content_hash,
        gyre_tools::file_state::content_hash(b"hi")
    );
}

#[tokio::test]
async fn unknown_tool_and_schema_errors_are_tool_use_errors_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let out = run(&c, "Reed", json!({})).await;
    assert!(out.is_error);
    assert!(out.content.contains("No such tool available: Reed"));

    let out = run(&c, "Read", json!({})).await;
    assert!(out.is_error);
    assert!(out.content.starts_with("<tool_use_error>"));
    assert!(
        out.content.contains("`file_path` is missing"),
        "{}",
        out.content
    );

    let out = run(&c, "Read", json!({"file_path": "/x", "limit": "ten"})).await;
    assert!(
        out.content
            .contains("`limit` type is expected as `integer`"),
        "{}",
        out.content
    );

    let out = run(&c, "Read", json!({"file_path": "/x", "limit": 0})).await;
    assert!(
        out.content.starts_with("<tool_use_error>limit"),
        "{}",
        out.content
    );
}
