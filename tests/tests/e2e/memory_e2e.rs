//! Memory files through the binary: `@path` imports of CLAUDE.md/AGENTS.md join the
//! system prompt, and a subfolder's memory files come with the model's first Read
//! there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run, tool_results_of_lines};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

#[test]
fn memory_imports_join_the_system_prompt_once_and_bounded() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(
            "CLAUDE.md",
            "Project rules. Also @docs/style.md and @~/personal.md\n`@docs/not-this.md`\n",
        )
        .unwrap();
    sandbox
        .write(
            "docs/style.md",
            "Indent with tabs. See @../CLAUDE.md again.",
        )
        .unwrap();
    sandbox.write("docs/not-this.md", "NOT IMPORTED").unwrap();
    std::fs::write(sandbox.home().join("personal.md"), "Answer tersely.").unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "hi"])).unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let system = server.requests()[0].body["system"].to_string();
    assert!(system.contains("Indent with tabs."), "{system}");
    assert!(system.contains("Answer tersely."), "{system}");
    assert!(!system.contains("NOT IMPORTED"), "{system}");
    assert_eq!(system.matches("Project rules.").count(), 1, "{system}");
}

#[test]
fn nested_memory_comes_with_the_first_read_in_a_subfolder() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("CLAUDE.md", "top rules").unwrap();
    sandbox
        .write("web/CLAUDE.md", "web folder: use pnpm")
        .unwrap();
    let a = sandbox.write("web/a.ts", "export const a = 1;").unwrap();
    let b = sandbox.write("web/b.ts", "export const b = 2;").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": a})),
        Turn::tool_use("Read", json!({"file_path": b})),
        Turn::text("read both"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read the web files",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let results = tool_results_of_lines(&out.lines().unwrap());
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].1.contains("export const a"), "{results:?}");
    assert!(results[0].1.contains("web folder: use pnpm"), "{results:?}");
    assert!(
        !results[1].1.contains("web folder"),
        "only once: {results:?}"
    );
    let system = server.requests()[0].body["system"].to_string();
    assert!(!system.contains("web folder"), "{system}");
}
