//! Races (issue #19): a directory swapped for a symlink while Grep and Glob walk it, or
//! while Write puts a file in it, leads nothing outside the working directory — no
//! outside content or name in a result, no file (temp or final) written outside.
//! Through the real binary, with a thread swapping as fast as it can.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use gyre_e2e::{Sandbox, run_racing};
use gyre_testkit::{Block, Script, TestServer, Turn};
use serde_json::{Value, json};

const SECRET: &str = "OUTSIDE-SECRET-9d41";
const TURNS: usize = 8;
const CALLS_PER_TURN: usize = 20;

/// Swaps what `a` and `b` name, in one step (renameat2 with RENAME_EXCHANGE).
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

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn walks_and_writes_racing_a_directory_swap_stay_inside() {
    let sandbox = Sandbox::new().unwrap();
    let project = sandbox.project();
    let outside = project.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for i in 0..10 {
        sandbox
            .write(&format!("sub/inside{i}.txt"), "inside\n")
            .unwrap();
        std::fs::write(outside.join(format!("leak{i}.txt")), format!("{SECRET}\n")).unwrap();
    }
    let before = names(&outside);
    std::os::unix::fs::symlink(&outside, project.join("sub-link")).unwrap();

    let mut turns: Vec<Turn> = (0..TURNS)
        .map(|t| {
            Turn::response((0..CALLS_PER_TURN).map(|c| match c % 3 {
                0 => Block::tool_use(
                    "Grep",
                    json!({"pattern": "SECRET|inside", "output_mode": "content"}),
                ),
                1 => Block::tool_use("Glob", json!({"pattern": "**/*.txt"})),
                _ => Block::tool_use(
                    "Write",
                    json!({"file_path": format!("sub/new{t}-{c}/f.txt"), "content": "x"}),
                ),
            }))
        })
        .collect();
    turns.push(Turn::text("done"));
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    let (dir, link) = (project.join("sub"), project.join("sub-link"));
    let (out, swaps) = run_racing(
        sandbox.gyre(&server).unwrap().args([
            "-p",
            "search and write",
            "--permission-mode",
            "acceptEdits",
            "--output-format",
            "json",
        ]),
        move || exchange(&dir, &link),
    )
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(swaps > 20, "the swapper barely ran ({swaps} swaps)");

    let mut saw_inside = false;
    for request in server.requests() {
        for message in request.body["messages"].as_array().unwrap() {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] != "tool_result" {
                    continue;
                }
                let text = match &block["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                assert!(
                    !text.contains(SECRET) && !text.contains("leak"),
                    "a result reached outside: {text}"
                );
                saw_inside |= text.contains("inside3");
            }
        }
    }
    assert!(saw_inside, "no walk ever saw the inside directory");
    assert_eq!(names(&outside), before, "something was written outside");
}
