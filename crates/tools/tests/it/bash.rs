#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use std::time::{Duration, Instant};

use crate::support::{ctx, run};
use serde_json::json;

#[tokio::test]
async fn bash_runs_in_the_cwd_and_captures_stdout_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let out = run(&c, "Bash", json!({"command": "pwd; echo err >&2"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains(&c.cwd.display().to_string()));
    assert!(out.content.contains("err"));
}

#[tokio::test]
async fn bash_nonzero_exit_is_an_error_starting_with_the_code() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &ctx(dir.path()),
        "Bash",
        json!({"command": "echo partial; exit 3"}),
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.content, "Exit code 3\npartial");
    let silent = run(&ctx(dir.path()), "Bash", json!({"command": "false"})).await;
    assert_eq!(silent.content, "Exit code 1");
}

#[tokio::test]
async fn bash_stdin_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &ctx(dir.path()),
        "Bash",
        json!({"command": "cat; echo done", "timeout": 5000}),
    )
    .await;
    assert_eq!(out.content, "done");
}

fn process_alive(marker: &str) -> bool {
    let out = std::process::Command::new("pgrep")
        .arg("-f")
        .arg(marker)
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

#[tokio::test]
async fn bash_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    // A unique sleep length marks our processes for pgrep.
    let marker = "sleep 987.654";
    let started = Instant::now();
    let out = run(
        &ctx(dir.path()),
        "Bash",
        json!({"command": format!("echo before; {marker} & {marker}; echo never"), "timeout": 500}),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(out.content.starts_with("before"), "{}", out.content);
    assert!(
        out.content.contains("Command timed out after 500 ms"),
        "{}",
        out.content
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !process_alive(marker),
        "a backgrounded sleep survived the timeout"
    );
}

#[tokio::test]
async fn bash_cancel_kills_the_group_and_returns_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let marker = "sleep 876.543";
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let out = gyre_tools::Tool::call(
        &gyre_tools::bash::BashTool,
        json!({"command": format!("echo started; {marker} & {marker}")}),
        &c,
        &|_| {},
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(out.is_error);
    assert!(out.content.starts_with("started"));
    assert!(out.content.contains("interrupted"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!process_alive(marker));
}

#[tokio::test]
async fn bash_dropped_mid_run_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    let marker = "sleep 765.432";
    let command = json!({"command": format!("{marker} & {marker}")});
    let call = gyre_tools::Tool::call(&gyre_tools::bash::BashTool, command, &c, &|_| {});
    let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!process_alive(marker));
}

#[tokio::test]
async fn bash_output_over_30000_chars_keeps_head_and_tail_and_saves_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let c = ctx(dir.path());
    // 1 MB: 16384 lines of 64 bytes.
    let out = run(&c, "Bash", json!({"command": "for i in $(seq 1 16384); do printf 'line %05d %s\\n' $i 0123456789012345678901234567890123456789012345678901; done"})).await;
    assert!(!out.is_error);
    assert!(out.content.len() < 31_000, "{}", out.content.len());
    assert!(out.content.starts_with("line 00001 "));
    assert!(
        out.content
            .trim_end()
            .ends_with("line 16384 0123456789012345678901234567890123456789012345678901")
    );
    let saved = out
        .content
        .split("full output saved to ")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    assert!(saved.starts_with(&c.output_dir.display().to_string()));
    let full = std::fs::read_to_string(saved).unwrap();
    assert_eq!(full.lines().count(), 16384);
    assert_eq!(full.len(), 16384 * 64 - 1);
}

#[tokio::test]
async fn bash_timeout_over_the_maximum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &ctx(dir.path()),
        "Bash",
        json!({"command": "true", "timeout": 600001}),
    )
    .await;
    assert!(out.is_error);
    assert!(
        out.content
            .starts_with("<tool_use_error>timeout must be at most 600000"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn bash_returns_when_a_background_child_keeps_the_pipe_open() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = run(
        &ctx(dir.path()),
        "Bash",
        json!({"command": "(sleep 3 &) ; echo quick"}),
    )
    .await;
    assert_eq!(out.content, "quick");
    assert!(started.elapsed() < Duration::from_secs(2));
}
