//! gyre's transcripts read by the tools people use on the reference CLI's (issue 34):
//! `ccusage` (npm) reports a session's tokens and cost, `claude-code-log` (PyPI) renders
//! it as HTML. Each test runs gyre against gyre-testkit, then the real tool on gyre's
//! home, and compares with what gyre said itself; the same tools run on a transcript in
//! the reference CLI's 2.1 format (`tests/fixtures/transcripts/claude-code-2.1`) show
//! what they show for the reference.
//!
//! The tools are installed on first use under the target dir and reused after that
//! (npm into a prefix, pip into a venv; one install at a time across test processes).
//! When that cannot be done the test fails: it never passes without running the tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use gyre_e2e::{Sandbox, copy_tree, run, transcript_fixture};
use gyre_testkit::{Script, TestServer, Turn, Usage};
use serde_json::{Value, json};

/// The last ccusage whose package runs on node alone: from 19 on it needs node 22, and
/// 20.x is a launcher for a native binary.
const CCUSAGE: &str = "18.0.11";
/// The claude-code-log release these tests were written against.
const CLAUDE_CODE_LOG: &str = "1.7.0";
/// The reference CLI's session in the fixture.
const REFERENCE_SESSION: &str = "7d3c1a52-9b8e-4f61-a0d2-5e4b3c2a1f90";

/// ccusage's script, installing it when missing.
fn ccusage() -> PathBuf {
    gyre_e2e::npm_package(
        &format!("transcript-tools/ccusage-{CCUSAGE}"),
        &format!("ccusage@{CCUSAGE}"),
    )
    .join("node_modules/ccusage/dist/index.js")
}

/// claude-code-log's command, installing it into a venv when missing.
fn claude_code_log() -> PathBuf {
    gyre_e2e::pip_venv(
        &format!("transcript-tools/claude-code-log-{CLAUDE_CODE_LOG}"),
        &format!("claude-code-log=={CLAUDE_CODE_LOG}"),
    )
    .with_file_name("claude-code-log")
}

/// `ccusage session --json --offline` over the transcripts under `config_dir` (its
/// `projects/`), as a user runs it with `CLAUDE_CONFIG_DIR`.
fn ccusage_sessions(config_dir: &Path) -> Value {
    let out = Command::new("node")
        .arg(ccusage())
        .args(["session", "--json", "--offline"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", config_dir)
        .env("TZ", "UTC")
        .env("CLAUDE_CONFIG_DIR", config_dir)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ccusage failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("ccusage printed {stdout}: {e}"))
}

/// What claude-code-log renders of a project folder: the text of its combined page
/// (tags, styles and scripts left out) and the names of the pages it wrote.
fn rendered(project_dir: &Path, home: &Path) -> (String, Vec<String>) {
    let out = Command::new(claude_code_log())
        .arg(project_dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TZ", "UTC")
        .output()
        .expect("run claude-code-log");
    assert!(
        out.status.success(),
        "claude-code-log failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(project_dir.join("combined_transcripts.html")).unwrap();
    let pages = std::fs::read_dir(project_dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".html"))
        .collect();
    (page_text(&page), pages)
}

/// The visible text of an HTML page, whitespace collapsed.
fn page_text(html: &str) -> String {
    let mut page = html.to_owned();
    // Styles and scripts hold no conversation.
    for tag in ["style", "script"] {
        let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
        while let Some(start) = page.find(&open) {
            let end = page[start..]
                .find(&close)
                .map_or(page.len(), |e| start + e + close.len());
            page.replace_range(start..end, " ");
        }
    }
    let mut text = String::new();
    let mut in_tag = false;
    for c in page.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Usage with every kind of token, cache writes to the 5-minute cache only (the one
/// price ccusage's table and gyre's share).
fn usage(input: u64, cache_write: u64, cache_read: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_creation_input_tokens: cache_write,
        cache_read_input_tokens: cache_read,
        cache_creation: gyre_protocol::CacheCreation {
            ephemeral_5m_input_tokens: cache_write,
            ephemeral_1h_input_tokens: 0,
        },
        ..Usage::default()
    }
}

/// Runs `prompt` in `sandbox` against `turns`; gyre's own result line.
fn gyre_session(sandbox: &Sandbox, turns: Vec<Turn>, prompt: &str) -> Value {
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", prompt, "--output-format", "json"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    out.result().unwrap()
}

/// ccusage's totals over every session it found, next to gyre's result's usage and cost.
fn assert_same_usage(ccusage: &Value, result: &Value) {
    let totals = &ccusage["totals"];
    let usage = &result["usage"];
    for (theirs, ours) in [
        ("inputTokens", "input_tokens"),
        ("outputTokens", "output_tokens"),
        ("cacheCreationTokens", "cache_creation_input_tokens"),
        ("cacheReadTokens", "cache_read_input_tokens"),
    ] {
        assert_eq!(
            totals[theirs], usage[ours],
            "{theirs} in {ccusage:#} vs {result:#}"
        );
    }
    let theirs = totals["totalCost"].as_f64().unwrap();
    let ours = result["total_cost_usd"].as_f64().unwrap();
    assert!(ours > 0.0, "{result:#}");
    assert!(
        (theirs - ours).abs() < 1e-9,
        "ccusage says ${theirs}, gyre ${ours}"
    );
}

/// Four reads, the last with usage near the context window, then the summary the
/// compaction asks for and the answer after it.
fn compacting_turns(file: &Path, usage: impl Fn(u64) -> Usage) -> Vec<Turn> {
    let read = |input| Turn::tool_use("Read", json!({"file_path": file})).with_usage(usage(input));
    vec![
        read(5_000),
        read(9_000),
        read(13_000),
        read(190_000),
        Turn::text("<summary>1. Primary request: read big.txt repeatedly.</summary>")
            .with_usage(usage(20_000)),
        Turn::text("All done after compaction.").with_usage(usage(900)),
    ]
}

/// The session's transcript holds a compaction boundary.
fn assert_compacted(sandbox: &Sandbox) {
    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    assert!(
        transcript.contains("\"subtype\":\"compact_boundary\""),
        "{transcript}"
    );
}

fn one_tool_session(sandbox: &Sandbox) -> Value {
    // The project is a git checkout on `main`.
    sandbox
        .write(".git/HEAD", "ref: refs/heads/main\n")
        .unwrap();
    let file = sandbox.write("notes.txt", "alpha\nbeta\n").unwrap();
    gyre_session(
        sandbox,
        vec![
            Turn::text("Reading it.")
                .and_tool_use("Read", json!({"file_path": file}))
                .with_usage(usage(1_200, 3_000, 9_000, 40)),
            Turn::text("notes.txt has two lines: alpha and beta.")
                .with_usage(usage(60, 250, 12_000, 18)),
        ],
        "How many lines does notes.txt have?",
    )
}

#[test]
fn ccusage_reports_a_gyre_session_with_the_tokens_and_cost_gyre_reports() {
    let sandbox = Sandbox::new().unwrap();
    let result = one_tool_session(&sandbox);
    let report = ccusage_sessions(&sandbox.home());
    assert_eq!(
        report["sessions"].as_array().unwrap().len(),
        1,
        "{report:#}"
    );
    let session = &report["sessions"][0];
    // ccusage names a session by the folder its file is in: the project's.
    assert_eq!(
        session["sessionId"],
        gyre_loop::project_dir_name(&sandbox.project())
    );
    assert_eq!(session["modelsUsed"], json!(["claude-sonnet-4-5"]));
    assert_same_usage(&report, &result);
}

#[test]
fn ccusage_counts_a_sub_agents_tokens_as_gyre_does() {
    let sandbox = Sandbox::new().unwrap();
    let result = gyre_session(
        &sandbox,
        vec![
            Turn::tool_use(
                "Agent",
                json!({"description": "count words", "prompt": "Count the words in notes.txt."}),
            )
            .with_usage(usage(900, 2_000, 0, 30)),
            Turn::text("notes.txt has 2 words.").with_usage(usage(400, 1_000, 500, 12)),
            Turn::text("The sub-agent says 2 words.").with_usage(usage(80, 0, 3_000, 9)),
        ],
        "Have an agent count the words in notes.txt.",
    );
    let report = ccusage_sessions(&sandbox.home());
    // The sub-agent's own transcript is a file of its own (`<session>/subagents/`), as
    // the reference CLI's is: ccusage lists it as a session beside the main one.
    let sessions = report["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2, "{report:#}");
    assert!(sessions.iter().any(|s| s["sessionId"] == "subagents"));
    assert_same_usage(&report, &result);
}

#[test]
fn ccusage_counts_a_compacted_session_as_gyre_does() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write("big.txt", &"a line long enough to count\n".repeat(200))
        .unwrap();
    let result = gyre_session(
        &sandbox,
        compacting_turns(&file, |i| usage(i, 100, 0, 50)),
        "read big.txt a few times",
    );
    assert_compacted(&sandbox);
    let report = ccusage_sessions(&sandbox.home());
    assert_same_usage(&report, &result);
}

#[test]
fn ccusage_reads_gyres_copy_of_a_reference_session_as_it_reads_the_original() {
    let sandbox = Sandbox::new().unwrap();
    let reference_home = sandbox.home().join(".claude");
    install_reference_fixture(&sandbox, &reference_home);
    let theirs = ccusage_sessions(&reference_home);
    // gyre imports the session at --resume and goes on in its own copy.
    let server = TestServer::spawn(Script::new([
        Turn::text("Still 2 TODOs.").with_usage(usage(10, 0, 12_000, 6))
    ]))
    .unwrap();
    let out = sandbox
        .resume(&server, REFERENCE_SESSION, "How many TODOs again?")
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let ours = ccusage_sessions(&sandbox.home());
    let sum = |report: &Value, key: &str| report["totals"][key].as_u64().unwrap();
    let added = &out.result().unwrap()["usage"];
    for (key, field) in [
        ("inputTokens", "input_tokens"),
        ("outputTokens", "output_tokens"),
        ("cacheReadTokens", "cache_read_input_tokens"),
    ] {
        assert_eq!(
            sum(&ours, key),
            sum(&theirs, key) + added[field].as_u64().unwrap(),
            "{key}: {theirs:#} then {ours:#}"
        );
    }
    let models = |report: &Value| -> Vec<Value> {
        report["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["modelsUsed"].as_array().unwrap().clone())
            .collect()
    };
    assert!(models(&ours).contains(&json!("claude-sonnet-4-5-20250929")));
    assert!(models(&ours).contains(&json!("claude-haiku-4-5-20251001")));
}

/// Copies the reference CLI's fixture session into `reference_home`'s projects, in the
/// folder of the sandbox's project (the lines keep the fixture's own `cwd`).
fn install_reference_fixture(sandbox: &Sandbox, reference_home: &Path) {
    copy_tree(
        &transcript_fixture("claude-code-2.1"),
        &sandbox.transcript_folder(reference_home),
    )
    .unwrap();
}

#[test]
fn claude_code_log_renders_a_gyre_sessions_prompt_answer_tool_call_and_result() {
    let sandbox = Sandbox::new().unwrap();
    let result = one_tool_session(&sandbox);
    let folder = sandbox.transcript_folder(&sandbox.home());
    let (text, pages) = rendered(&folder, &sandbox.home());
    for shown in [
        "How many lines does notes.txt have?",
        "Reading it.",
        // The Read call, with the file it read, and the lines it returned.
        "notes.txt",
        "alpha",
        "beta",
        "notes.txt has two lines: alpha and beta.",
        // The response's usage, as for the reference's.
        "Input: 1200 | Output: 40 | Cache Creation: 3000 | Cache Read: 9000",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text}");
    }
    let session = result["session_id"].as_str().unwrap();
    assert!(
        pages.contains(&format!("session-{session}.html")),
        "{pages:?}"
    );
    // The fields the renderer keys on, as the reference writes them.
    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    let (checkpoints, lines): (Vec<Value>, Vec<Value>) = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .partition(|l| l["type"] == "file-history-snapshot");
    // The prompt's checkpoint, as the reference writes one (the renderer reads past it).
    assert_eq!(checkpoints.len(), 1, "{checkpoints:?}");
    assert_eq!(checkpoints[0]["messageId"], lines[0]["uuid"]);
    assert_eq!(lines.len(), 4);
    for line in &lines {
        assert_eq!(line["gitBranch"], "main", "{line}");
        assert_eq!(line["userType"], "external", "{line}");
        assert_eq!(line["isSidechain"], false, "{line}");
        assert!(line["version"].is_string(), "{line}");
    }
    assert_eq!(lines[1]["requestId"], "req_testkit_0");
    assert_eq!(lines[1]["message"]["stop_reason"], "tool_use");
    assert_eq!(lines[2]["toolUseResult"], "1\talpha\n2\tbeta");
    assert_eq!(lines[3]["requestId"], "req_testkit_1");
}

#[test]
fn claude_code_log_renders_a_gyre_sub_agent_inside_its_call() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "alpha beta\n").unwrap();
    gyre_session(
        &sandbox,
        vec![
            Turn::tool_use(
                "Agent",
                json!({"description": "count words", "prompt": "Count the words in notes.txt."}),
            ),
            Turn::tool_use(
                "Grep",
                json!({"pattern": "alpha", "output_mode": "content"}),
            ),
            Turn::text("notes.txt has 2 words."),
            Turn::text("The sub-agent says 2 words."),
        ],
        "Have an agent count the words in notes.txt.",
    );
    let folder = sandbox.transcript_folder(&sandbox.home());
    let (text, _) = rendered(&folder, &sandbox.home());
    // As for the reference's: the call, its result, then the sub-agent's own messages
    // under it, then the answer.
    let order = [
        "Have an agent count the words in notes.txt.",
        "Count the words in notes.txt.",
        "notes.txt has 2 words.",
        "Grep alpha",
        "notes.txt:1:alpha beta",
        "The sub-agent says 2 words.",
    ];
    let mut at = 0;
    for shown in order {
        let found = text[at..]
            .find(shown)
            .unwrap_or_else(|| panic!("{shown:?} not after {at} in {text}"));
        at += found + shown.len();
    }
}

#[test]
fn claude_code_log_renders_a_compacted_gyre_session_before_and_after_the_boundary() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox
        .write("big.txt", &"a line long enough to count\n".repeat(200))
        .unwrap();
    gyre_session(
        &sandbox,
        compacting_turns(&file, |i| usage(i, 0, 0, 50)),
        "read big.txt a few times",
    );
    assert_compacted(&sandbox);
    let folder = sandbox.transcript_folder(&sandbox.home());
    let (text, _) = rendered(&folder, &sandbox.home());
    for shown in [
        "read big.txt a few times",
        "a line long enough to count",
        "All done after compaction.",
    ] {
        assert!(text.contains(shown), "{shown:?} not in {text}");
    }
}

#[test]
fn claude_code_log_renders_gyres_copy_of_a_reference_session_with_what_gyre_added() {
    let sandbox = Sandbox::new().unwrap();
    let reference_home = sandbox.home().join(".claude");
    install_reference_fixture(&sandbox, &reference_home);
    let (theirs, _) = rendered(&sandbox.transcript_folder(&reference_home), &sandbox.home());
    let server = TestServer::spawn(Script::new([Turn::text("Still 2 TODOs.")])).unwrap();
    let out = sandbox
        .resume(&server, REFERENCE_SESSION, "How many TODOs again?")
        .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let (ours, pages) = rendered(&sandbox.transcript_folder(&sandbox.home()), &sandbox.home());
    for shown in [
        "How many lines does notes.txt have?",
        "wc -l notes.txt",
        "42 notes.txt",
        "Found 2 TODOs",
        "TODO: tag v2",
    ] {
        assert!(
            theirs.contains(shown),
            "{shown:?} not in the reference's {theirs}"
        );
        assert!(ours.contains(shown), "{shown:?} not in gyre's {ours}");
    }
    assert!(ours.contains("How many TODOs again?"), "{ours}");
    assert!(ours.contains("Still 2 TODOs."), "{ours}");
    assert!(
        pages.contains(&format!("session-{REFERENCE_SESSION}.html")),
        "{pages:?}"
    );
}
