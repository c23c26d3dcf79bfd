//! Secrets (issue #9): the API key never appears in anything gyre writes — transcripts,
//! tool outputs, the `--debug-file`, `RUST_LOG=trace` logs, stdout, stderr, error
//! messages — however the session goes. Each test plants a unique key and greps every
//! byte gyre produced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

/// A key nobody else could have printed by accident.
fn planted_key(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("sk-ant-planted-{tag}-{}-{nanos:x}", std::process::id())
}

/// Every regular file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The places `key` was found: file paths, `stdout`, `stderr`. Also looks for the key's
/// distinctive tail, so a truncated or re-wrapped key is caught too.
fn leaks(key: &str, files: &[PathBuf], out: &Run) -> Vec<String> {
    let tail = &key[key.len() - 12..];
    let mut found = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        if text.contains(key) || text.contains(tail) {
            found.push(f.display().to_string());
        }
    }
    if out.stdout.contains(key) || out.stdout.contains(tail) {
        found.push("stdout".to_owned());
    }
    if out.stderr.contains(key) || out.stderr.contains(tail) {
        found.push("stderr".to_owned());
    }
    found
}

#[test]
fn a_planted_key_is_in_no_transcript_tool_output_debug_log_or_output() {
    let sandbox = Sandbox::new().unwrap();
    let key = planted_key("session");
    sandbox.write("notes.txt", "some notes\n").unwrap();
    let debug_file = sandbox.home().join("debug.log");
    let server = TestServer::spawn(
        Script::new([
            Turn::http_error(529).with_header("retry-after-ms", "1"),
            Turn::tool_use("Read", json!({"file_path": "notes.txt"})),
            // A model that goes looking for credentials.
            Turn::tool_use(
                "Bash",
                json!({"command": "env; echo \"key=$ANTHROPIC_API_KEY\"; seq 1 20000"}),
            ),
            Turn::text("done"),
        ])
        .require_api_key(key.clone()),
    )
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_API_KEY", &key)
        .env("RUST_LOG", "trace")
        .args([
            "-p",
            "look around",
            "--allowedTools",
            "Bash",
            "--debug-file",
            debug_file.to_str().unwrap(),
            "--output-format",
            "stream-json",
            "--verbose",
        ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    // The key did reach the API (so it was in memory), and the logs did get written.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests
            .iter()
            .all(|r| r.header("x-api-key") == Some(key.as_str()))
    );
    assert!(std::fs::metadata(&debug_file).unwrap().len() > 0);
    // The Bash call's long output was saved to a file: it is searched too.
    let written = files_under(&sandbox.home());
    assert!(written.len() >= 3, "{written:?}");
    let mut all = written;
    all.extend(files_under(&sandbox.project()));
    assert_eq!(leaks(&key, &all, &out), Vec::<String>::new());
    // Nor does the key go back to the model in a tool result.
    for (i, r) in requests.iter().enumerate() {
        assert!(
            !r.body.to_string().contains(&key),
            "request {i} carried the key in its body"
        );
    }
}

#[test]
fn a_planted_key_is_in_no_error_message_or_trace_log() {
    // Authentication failure: the key is wrong, and gyre says so without quoting it.
    let sandbox = Sandbox::new().unwrap();
    let key = planted_key("rejected");
    let server =
        TestServer::spawn(Script::new([]).require_api_key("sk-ant-the-right-one")).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_API_KEY", &key)
        .env("RUST_LOG", "trace")
        .args(["-p", "hi", "--output-format", "stream-json", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    assert_eq!(
        leaks(&key, &files_under(&sandbox.home()), &out),
        Vec::<String>::new()
    );

    // A server that is not there: connection errors, retried, then reported.
    let sandbox = Sandbox::new().unwrap();
    let key = planted_key("unreachable");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_API_KEY", &key)
        .env("ANTHROPIC_BASE_URL", &url)
        .env("GYRE_MAX_RETRIES", "1")
        .env("RUST_LOG", "trace")
        .args(["-p", "hi", "--output-format", "json"]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert_eq!(
        leaks(&key, &files_under(&sandbox.home()), &out),
        Vec::<String>::new()
    );
}

/// Issue 29, class 5: the programs gyre starts besides Bash — MCP servers and hook
/// commands — get no API key either, unless the user names it for them.
#[test]
fn mcp_servers_and_hooks_get_no_api_key_unless_named_for_them() {
    let sandbox = Sandbox::new().unwrap();
    let key = planted_key("children");
    let server_env = sandbox.home().join("server-env.txt");
    let named_env = sandbox.home().join("named-env.txt");
    let hook_env = sandbox.home().join("hook-env.txt");
    let mcp = gyre_e2e::test_mcp_binary().unwrap();
    let probe = |out: &Path| {
        json!({"command": "sh", "args": ["-c",
            format!("env > {}; exec {}", out.display(), mcp.display())]})
    };
    let mut named = probe(&named_env);
    named["env"] = json!({"ANTHROPIC_API_KEY": key});
    let config = json!({"mcpServers": {"probe": probe(&server_env), "named": named}});
    sandbox
        .write(
            ".gyre/settings.local.json",
            &json!({"hooks": {"UserPromptSubmit": [{"hooks": [
                {"type": "command", "command": format!("env > {}", hook_env.display())}]}]}})
            .to_string(),
        )
        .unwrap();
    let trust = TestServer::spawn(Script::new([Turn::text("unused")])).unwrap();
    assert_eq!(
        run(sandbox.gyre(&trust).unwrap().arg("trust"))
            .unwrap()
            .code,
        Some(0)
    );
    let server =
        TestServer::spawn(Script::new([Turn::text("done")]).require_api_key(key.clone())).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_API_KEY", &key)
        .args(["-p", "hi", "--mcp-config", &config.to_string()]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    for (what, file) in [("the MCP server", &server_env), ("the hook", &hook_env)] {
        let env = std::fs::read_to_string(file)
            .unwrap_or_else(|e| panic!("{what} did not run ({e}): {}", out.stderr));
        assert!(env.contains("PATH="), "{what}: {env}");
        assert!(!env.contains(&key), "{what} got the API key");
    }
    // The user named it for this server: it gets it.
    assert!(std::fs::read_to_string(&named_env).unwrap().contains(&key));
}
