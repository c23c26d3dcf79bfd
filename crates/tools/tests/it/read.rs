#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use crate::support::{ctx, p, run};
use serde_json::json;

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

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

#[tokio::test]
async fn read_of_an_image_sends_it_as_an_image_part() {
    let dir = tempfile::tempdir().unwrap();
    // The media type comes from the bytes, not the name.
    std::fs::write(dir.path().join("shot.jpg"), PNG).unwrap();
    let c = ctx(dir.path());
    let call = gyre_tools::ToolCall::new(
        "toolu_img",
        "Read",
        json!({"file_path": p(dir.path(), "shot.jpg")}),
    );
    let outcome = gyre_tools::run_tool_call(
        &gyre_tools::ToolRegistry::with_default_tools(),
        &call,
        &c,
        &gyre_tools::AllowAll,
        &|_| {},
    )
    .await;
    assert!(!outcome.output.is_error, "{}", outcome.output.content);
    let gyre_protocol::ContentBlock::ToolResult { content, .. } = outcome.to_block() else {
        panic!("not a tool result");
    };
    let gyre_protocol::ToolResultContent::Parts(parts) = content else {
        panic!("not parts: {content:?}");
    };
    let [gyre_protocol::ToolResultPart::Image { source }] = parts.as_slice() else {
        panic!("not one image: {parts:?}");
    };
    assert_eq!(
        serde_json::to_value(source).unwrap(),
        json!({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg=="})
    );
}

#[tokio::test]
async fn an_image_too_large_for_the_api_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut big = PNG.to_vec();
    big.resize(4 * 1024 * 1024, 0);
    std::fs::write(dir.path().join("big.png"), big).unwrap();
    let out = run(
        &ctx(dir.path()),
        "Read",
        json!({"file_path": p(dir.path(), "big.png")}),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(
        out.content,
        "Image is 4.0MB but at most 3.75MB can be sent to the model. Make a smaller copy (e.g. `convert in.png -resize 50% small.png`) and read that."
    );
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
        Some(gyre_tools::file_state::content_hash(b"hi"))
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
