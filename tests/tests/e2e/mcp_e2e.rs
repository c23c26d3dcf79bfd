//! MCP servers end to end: the real `gyre` binary with the testkit's MCP server
//! (`gyre-test-mcp`) over stdio and streamable HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyre_e2e::{Run, Sandbox, run, test_mcp_binary};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// A stdio server entry running the test server with `args`.
fn stdio(args: &[&str]) -> Value {
    json!({"command": test_mcp_binary().unwrap(), "args": args})
}

fn config(servers: Value) -> String {
    let mut root = serde_json::Map::new();
    root.insert("mcpServers".to_owned(), servers);
    Value::Object(root).to_string()
}

/// The test server serving streamable HTTP; killed when dropped.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> Self {
        let mut child = Command::new(test_mcp_binary().unwrap())
            .arg("--http")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut url = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut url)
            .unwrap();
        Self {
            child,
            url: url.trim().to_owned(),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless stream-json `gyre` with `mcp_config` and extra flags.
fn gyre_command(
    sandbox: &Sandbox,
    server: &TestServer,
    mcp_config: &str,
    extra: &[&str],
) -> Command {
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.args([
        "-p",
        "use the tools",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        mcp_config,
    ])
    .args(extra);
    cmd
}

/// Runs one headless stream-json turn with `mcp_config` and extra flags.
fn gyre(sandbox: &Sandbox, server: &TestServer, mcp_config: &str, extra: &[&str]) -> Run {
    run(&mut gyre_command(sandbox, server, mcp_config, extra)).unwrap()
}

/// Runs `script` with the test server as "test", its tools allowed, `env` set; the run
/// must succeed.
fn with_test_server(sandbox: &Sandbox, script: Script, env: &[(&str, &str)]) -> (TestServer, Run) {
    let server = TestServer::spawn(script).unwrap();
    let mut cmd = gyre_command(
        sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &["--allowedTools", "mcp__test"],
    );
    cmd.envs(env.iter().copied());
    let out = run(&mut cmd).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    (server, out)
}

/// The tool_result blocks the model was sent, in call order.
fn tool_results(server: &TestServer) -> Vec<Value> {
    let last = server.requests().pop().expect("a request");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

fn text_of(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn init_line(out: &Run) -> Value {
    out.lines()
        .unwrap()
        .into_iter()
        .find(|l| l["subtype"] == "init")
        .expect("an init line")
}

#[test]
fn stdio_server_tools_are_offered_and_called_with_every_kind_of_result() {
    let sandbox = Sandbox::new().unwrap();
    let script = Script::new([
        Turn::tool_use("mcp__test__echo", json!({"text": "hi there"}))
            .and_tool_use("mcp__test__add", json!({"a": 2, "b": 3})),
        Turn::tool_use("mcp__test__image", json!({}))
            .and_tool_use("mcp__test__resource", json!({})),
        Turn::tool_use("ListMcpResourcesTool", json!({})).and_tool_use(
            "ReadMcpResourceTool",
            json!({"server": "test", "uri": "test://greeting"}),
        ),
        Turn::text("Done."),
    ]);
    let (server, out) = with_test_server(&sandbox, script, &[]);

    let init = init_line(&out);
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "test", "status": "connected"}])
    );
    let tools = init["tools"].as_array().unwrap();
    for name in [
        "mcp__test__echo",
        "mcp__test__add",
        "mcp__test__crash",
        "Read",
    ] {
        assert!(tools.contains(&json!(name)), "{name} in {tools:?}");
    }

    // The model sees the server's description and schema.
    let first = &server.requests()[0].body;
    let echo = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__test__echo")
        .unwrap();
    assert_eq!(echo["description"], "Returns its text.");
    assert_eq!(echo["input_schema"]["required"], json!(["text"]));

    let results = tool_results(&server);
    assert_eq!(results.len(), 6, "{results:#?}");
    assert_eq!(results[0]["content"], "hi there");
    assert_eq!(results[1]["content"], "5");
    assert!(
        results.iter().all(|r| r["is_error"] != true),
        "{results:#?}"
    );
    let image = &results[2]["content"];
    assert_eq!(image[0], json!({"type": "text", "text": "a red pixel"}));
    assert_eq!(image[1]["type"], "image");
    assert_eq!(image[1]["source"]["media_type"], "image/png");
    assert_eq!(
        results[3]["content"],
        "[Resource test://greeting]\nhello from a resource"
    );
    // The resources themselves, through the two resource tools.
    let listed: Value = serde_json::from_str(results[4]["content"].as_str().unwrap()).unwrap();
    assert_eq!(listed[0]["uri"], "test://greeting");
    assert_eq!(listed[0]["server"], "test");
    assert_eq!(results[5]["content"], results[3]["content"]);
    assert_eq!(results[5]["is_error"], json!(null));
}

#[test]
fn http_server_tools_work_like_stdio_ones() {
    let http = HttpServer::start();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__web__echo", json!({"text": "over http"})),
        Turn::tool_use("mcp__web__fail", json!({"message": "it broke"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({"web": {"type": "http", "url": http.url, "headers": {"X-Test": "1"}}})),
        &["--allowedTools", "mcp__web"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "web", "status": "connected"}])
    );
    let results = tool_results(&server);
    assert_eq!(results[0]["content"], "over http");
    assert_eq!(results[0]["is_error"], json!(null));
    assert_eq!(results[1]["content"], "it broke");
    assert_eq!(results[1]["is_error"], true);
}

#[test]
fn a_server_that_crashes_mid_call_gives_error_results_naming_it() {
    let sandbox = Sandbox::new().unwrap();
    let script = Script::new([
        Turn::tool_use("mcp__test__crash", json!({})),
        Turn::tool_use("mcp__test__echo", json!({"text": "still there?"})),
        Turn::text("The server is gone."),
    ]);
    let (server, out) = with_test_server(&sandbox, script, &[]);
    let results = tool_results(&server);
    assert_eq!(results.len(), 2);
    for result in &results {
        assert_eq!(result["is_error"], true, "{result}");
        let text = text_of(result);
        assert!(text.contains("MCP server \"test\""), "{text}");
    }
    // The second call is refused at once, saying why.
    let text = text_of(&results[1]);
    assert!(text.contains("is not running"), "{text}");
    assert!(text.contains("crashing on purpose"), "{text}");
    assert_eq!(out.result().unwrap()["result"], "The server is gone.");
}

#[test]
fn a_slow_call_is_cancelled_at_the_tool_timeout() {
    let sandbox = Sandbox::new().unwrap();
    let script = Script::new([
        Turn::tool_use("mcp__test__sleep", json!({"ms": 600_000})),
        Turn::tool_use("mcp__test__echo", json!({"text": "after the timeout"})),
        Turn::text("Done."),
    ]);
    let (server, _) = with_test_server(&sandbox, script, &[("MCP_TOOL_TIMEOUT", "500")]);
    let results = tool_results(&server);
    let text = text_of(&results[0]);
    assert_eq!(results[0]["is_error"], true);
    assert!(
        text.contains("MCP server \"test\" did not answer sleep"),
        "{text}"
    );
    // The server is still usable after a cancelled call.
    assert_eq!(results[1]["content"], "after the timeout");
}

#[test]
fn ctrl_c_aborts_a_running_call() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__test__sleep", json!({"ms": 600_000})),
        Turn::text("never reached"),
    ]))
    .unwrap();
    let mut child = gyre_command(
        &sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &["--allowedTools", "mcp__test"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Wait for the tool call to be announced, then interrupt.
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("\"tool_use\"") && line.contains("mcp__test__sleep") {
            break;
        }
    }
    // The call starts right after the assistant line; give it a moment to reach the server.
    std::thread::sleep(Duration::from_millis(300));
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = wait_or_kill(&mut child, Duration::from_secs(30));
    assert_eq!(status, Some(130), "{rest:#?}");
    let result = rest
        .iter()
        .find(|l| l.contains("\"tool_result\""))
        .expect("a tool_result line");
    assert!(result.contains("Interrupted by user"), "{result}");
}

/// The exit code, or `None` (after killing it) when it did not end in time: a hang.
fn wait_or_kill(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    None
}

#[test]
fn permission_rules_match_servers_and_tools() {
    let sandbox = Sandbox::new().unwrap();
    let script = || {
        Script::new([
            Turn::tool_use("mcp__test__echo", json!({"text": "a"}))
                .and_tool_use("mcp__test__add", json!({"a": 1, "b": 1})),
            Turn::text("Done."),
        ])
    };
    // No rule: MCP tools ask, and headless asking is a refusal.
    let server = TestServer::spawn(script()).unwrap();
    let out = gyre(&sandbox, &server, &config(json!({"test": stdio(&[])})), &[]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let results = tool_results(&server);
    assert!(
        results.iter().all(|r| r["is_error"] == true),
        "{results:#?}"
    );
    assert!(text_of(&results[0]).contains("--allowedTools \"mcp__test__echo\""));
    let denials = out.result().unwrap()["permission_denials"].clone();
    assert_eq!(denials.as_array().unwrap().len(), 2);

    // The server allowed, one tool denied by a settings rule.
    sandbox
        .write(
            ".gyre/settings.json",
            r#"{"permissions": {"deny": ["mcp__test__echo"]}}"#,
        )
        .unwrap();
    let server = TestServer::spawn(script()).unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &["--allowedTools", "mcp__test"],
    );
    let results = tool_results(&server);
    assert_eq!(results[0]["is_error"], true);
    assert!(
        text_of(&results[0]).contains("denied by the deny rule `mcp__test__echo`"),
        "{results:#?}"
    );
    assert_eq!(results[1]["content"], "2");
    assert_eq!(
        out.result().unwrap()["permission_denials"][0]["tool_name"],
        "mcp__test__echo"
    );

    // A bare name in --disallowedTools takes the tool out of the request altogether.
    let server = TestServer::spawn(script()).unwrap();
    gyre(
        &sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &["--disallowedTools", "mcp__test__echo"],
    );
    let offered: Vec<String> = server.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        offered.contains(&"mcp__test__add".to_owned()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"mcp__test__echo".to_owned()),
        "{offered:?}"
    );
}

#[test]
fn three_servers_start_together_and_failing_ones_are_reported() {
    let http = HttpServer::start();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__one__echo", json!({"text": "1"}))
            .and_tool_use("mcp__two__echo", json!({"text": "2"}))
            .and_tool_use("mcp__three__echo", json!({"text": "3"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({
            "one": stdio(&[]),
            "two": stdio(&[]),
            "three": {"type": "http", "url": http.url},
            "broken": stdio(&["--exit-at-start"]),
            "missing": {"command": "/nonexistent/mcp-server"},
            "probe": {"type": "sdk", "name": "probe"}
        })),
        &["--allowedTools", "mcp__one,mcp__two,mcp__three"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mut statuses: Vec<(String, String)> = init_line(&out)["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    statuses.sort();
    let expected = [
        ("broken", "failed"),
        ("missing", "failed"),
        ("one", "connected"),
        ("probe", "failed"),
        ("three", "connected"),
        ("two", "connected"),
    ];
    assert_eq!(
        statuses,
        expected.map(|(n, s)| (n.to_owned(), s.to_owned()))
    );
    assert!(
        out.stderr
            .contains("MCP server \"broken\" (stdio) failed: the MCP handshake failed"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("refusing to start"),
        "the server's own stderr explains: {}",
        out.stderr
    );
    assert!(
        out.stderr.contains(
            "MCP server \"missing\" (stdio) failed: could not start `/nonexistent/mcp-server`"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("MCP server \"probe\" (sdk) failed: needs the SDK control protocol"),
        "{}",
        out.stderr
    );
    let texts: Vec<String> = tool_results(&server).iter().map(text_of).collect();
    assert_eq!(texts, ["1", "2", "3"]);
}

fn pids(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Whether a process runs (a zombie waiting for a reaper does not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|s| !s.trim_start().starts_with('Z'))
    })
}

#[test]
fn server_processes_and_their_children_end_with_gyre() {
    let sandbox = Sandbox::new().unwrap();
    let pid_file = sandbox.project().join("pids");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__test__echo", json!({"text": "hi"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let pid_path = pid_file.to_str().unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({
            "test": stdio(&["--pid-file", pid_path, "--spawn-grandchild"]),
            "other": stdio(&["--pid-file", pid_path]),
        })),
        &["--allowedTools", "mcp__test"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(tool_results(&server)[0]["content"], "hi");
    let started = pids(&pid_file);
    assert_eq!(
        started.len(),
        3,
        "two servers and a grandchild: {started:?}"
    );
    // Ending takes a signal's delivery; wait for it, without timing anything.
    let deadline = Instant::now() + Duration::from_secs(10);
    while started.iter().any(|p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<&String> = started.iter().filter(|p| alive(p)).collect();
    assert!(left.is_empty(), "still running after gyre ended: {left:?}");
}

#[test]
fn project_mcp_json_servers_start_only_when_approved() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(".mcp.json", &config(json!({"proj": stdio(&[])})))
        .unwrap();
    let script = || Script::new([Turn::text("Done.")]);
    let run_plain = |extra: &[&str]| {
        let server = TestServer::spawn(script()).unwrap();
        let out = run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "hi", "--output-format", "stream-json", "--verbose"])
            .args(extra))
        .unwrap();
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        out
    };
    let out = run_plain(&[]);
    assert_eq!(init_line(&out)["mcp_servers"], json!([]));
    assert!(
        out.stderr
            .contains("MCP server \"proj\" in .mcp.json was not started: approve it"),
        "{}",
        out.stderr
    );

    sandbox
        .write(
            ".gyre/settings.local.json",
            r#"{"enabledMcpjsonServers": ["proj"]}"#,
        )
        .unwrap();
    let out = run_plain(&[]);
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "proj", "status": "connected"}])
    );

    // --strict-mcp-config: only --mcp-config servers.
    let out = run_plain(&[
        "--strict-mcp-config",
        "--mcp-config",
        &config(json!({"flag": stdio(&[])})),
    ]);
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "flag", "status": "connected"}])
    );
}

#[test]
fn an_invalid_mcp_config_is_a_clear_error() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Done.")])).unwrap();
    let out = gyre(
        &sandbox,
        &server,
        r#"{"mcpServers": {"x": {"args": ["a"]}}}"#,
        &[],
    );
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains(
            "--mcp-config: inline JSON: invalid MCP config: server \"x\": needs \"command\""
        ),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}

// Servers no one here wrote: the reference `@modelcontextprotocol/server-everything`
// (npm, run by node) and `mcp-server-time` (PyPI, in a venv). Each test installs its
// server into `target/mcp-published/` on first use (npm and PyPI are reached for the
// install only; the servers themselves work offline) and fails, saying what to
// install, when it cannot.

fn scratch(name: &str) -> PathBuf {
    gyre_e2e::target_dir().join("mcp-published").join(name)
}

use gyre_e2e::install;

/// The published versions the tests were written against: a new release may change
/// the tools' texts, so updating is a deliberate edit here.
const SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
const MCP_SERVER_TIME: &str = "mcp-server-time==2026.10.19";

/// `dist/index.js` of `@modelcontextprotocol/server-everything`, installed with npm.
fn server_everything() -> PathBuf {
    let dir = scratch(&SERVER_EVERYTHING.replace(['/', '@'], "_"));
    let entry = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.is_file() {
        install(
            "server-everything needs node and npm (apt-get install nodejs npm)",
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&dir)
                .arg(SERVER_EVERYTHING),
        );
    }
    assert!(entry.is_file(), "npm installed no {}", entry.display());
    entry
}

/// The `mcp-server-time` command, installed with pip into a venv.
fn mcp_server_time() -> PathBuf {
    let venv = scratch(&MCP_SERVER_TIME.replace('=', "_"));
    let bin = venv.join("bin/mcp-server-time");
    if !bin.is_file() {
        install(
            "mcp-server-time needs python3 with venv (apt-get install python3-venv)",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        );
        install(
            "mcp-server-time",
            Command::new(venv.join("bin/pip")).args(["install", "--quiet", MCP_SERVER_TIME]),
        );
    }
    assert!(bin.is_file(), "pip installed no {}", bin.display());
    bin
}

/// Runs `script` with one published server, its tools allowed; the run must succeed.
fn run_with(server_name: &str, server: Value, script: Script) -> (TestServer, Run) {
    let sandbox = Sandbox::new().unwrap();
    let api = TestServer::spawn(script).unwrap();
    let mut servers = serde_json::Map::new();
    servers.insert(server_name.to_owned(), server);
    let out = gyre(
        &sandbox,
        &api,
        &config(Value::Object(servers)),
        &["--allowedTools", &format!("mcp__{server_name}")],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    (api, out)
}

#[test]
fn server_everything_tools_are_listed_and_called() {
    let entry = server_everything();
    let (api, out) = run_with(
        "everything",
        json!({"command": "node", "args": [entry, "stdio"]}),
        Script::new([
            Turn::tool_use("mcp__everything__echo", json!({"message": "hello gyre"}))
                .and_tool_use("mcp__everything__get-sum", json!({"a": 2, "b": 3}))
                .and_tool_use("mcp__everything__get-tiny-image", json!({})),
            Turn::tool_use(
                "mcp__everything__get-structured-content",
                json!({"location": "Chicago"}),
            )
            .and_tool_use(
                "mcp__everything__get-resource-reference",
                json!({"resourceType": "Text", "resourceId": 1}),
            )
            .and_tool_use("mcp__everything__get-resource-links", json!({"count": 2})),
            Turn::tool_use("ListMcpResourcesTool", json!({"server": "everything"})).and_tool_use(
                "ReadMcpResourceTool",
                json!({"server": "everything", "uri": "demo://resource/static/document/features.md"}),
            ),
            Turn::text("Done."),
        ]),
    );
    let init = init_line(&out);
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "everything", "status": "connected"}])
    );
    let tools = init["tools"].as_array().unwrap();
    for name in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
        "mcp__everything__trigger-long-running-operation",
    ] {
        assert!(tools.contains(&json!(name)), "{name} in {tools:?}");
    }

    let results = tool_results(&api);
    assert_eq!(results.len(), 8, "{results:#?}");
    assert!(
        results.iter().all(|r| r["is_error"] != true),
        "{results:#?}"
    );
    assert!(
        text_of(&results[0]).contains("hello gyre"),
        "{}",
        results[0]
    );
    assert!(text_of(&results[1]).contains('5'), "{}", results[1]);
    let image = results[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == "image")
        .expect("an image part");
    assert_eq!(image["source"]["media_type"], "image/png");
    assert!(!image["source"]["data"].as_str().unwrap().is_empty());
    assert!(
        text_of(&results[3]).contains("\"temperature\""),
        "{}",
        results[3]
    );
    assert!(
        text_of(&results[4]).contains("[Resource "),
        "{}",
        results[4]
    );
    assert!(
        text_of(&results[5]).contains("[Resource link "),
        "{}",
        results[5]
    );
    assert!(
        text_of(&results[6]).contains("demo://resource/static/document/features.md"),
        "{}",
        results[6]
    );
    assert!(
        text_of(&results[7])
            .starts_with("[Resource demo://resource/static/document/features.md]\n"),
        "{}",
        results[7]
    );
}

#[test]
fn mcp_server_time_from_pypi_answers_and_reports_errors() {
    let bin = mcp_server_time();
    let (api, out) = run_with(
        "time",
        json!({"command": bin}),
        Script::new([
            Turn::tool_use("mcp__time__get_current_time", json!({"timezone": "Etc/UTC"}))
                .and_tool_use(
                    "mcp__time__convert_time",
                    json!({"source_timezone": "Europe/London", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
                )
                .and_tool_use(
                    "mcp__time__get_current_time",
                    json!({"timezone": "Mars/Olympus_Mons"}),
                ),
            Turn::text("Done."),
        ]),
    );
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "time", "status": "connected"}])
    );
    let results = tool_results(&api);
    assert_eq!(results.len(), 3, "{results:#?}");
    assert_eq!(results[0]["is_error"], json!(null), "{}", results[0]);
    assert!(
        text_of(&results[0]).contains("\"timezone\": \"Etc/UTC\""),
        "{}",
        results[0]
    );
    assert_eq!(results[1]["is_error"], json!(null), "{}", results[1]);
    assert!(
        text_of(&results[1]).contains("Asia/Tokyo"),
        "{}",
        results[1]
    );
    assert_eq!(results[2]["is_error"], true, "{}", results[2]);
    assert!(
        text_of(&results[2]).contains("Mars/Olympus_Mons"),
        "{}",
        results[2]
    );
}

/// `server-everything` serving the legacy HTTP+SSE transport on a free port; killed
/// when dropped.
struct SseEverything {
    child: Child,
    url: String,
}

impl SseEverything {
    fn start() -> Self {
        let entry = server_everything();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("node")
            .arg(entry)
            .arg("sse")
            .env("PORT", port.to_string())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        for line in stderr.by_ref() {
            let line = line.unwrap();
            let listening = line.contains("Server is running on port");
            said.push(line);
            if listening {
                break;
            }
        }
        // Node dies of EPIPE when its stderr is closed: keep reading it.
        std::thread::spawn(move || stderr.for_each(drop));
        assert!(
            said.last().is_some_and(|l| l.contains("running")),
            "server-everything sse did not start: {said:?}"
        );
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/sse"),
        }
    }
}

impl Drop for SseEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn server_everything_over_legacy_sse_lists_and_calls_tools() {
    let server = SseEverything::start();
    let (api, out) = run_with(
        "everything",
        json!({"type": "sse", "url": server.url, "headers": {"X-Gyre-Test": "1"}}),
        Script::new([
            Turn::tool_use(
                "mcp__everything__echo",
                json!({"message": "hello over sse"}),
            )
            .and_tool_use("mcp__everything__get-sum", json!({"a": 20, "b": 22})),
            Turn::text("Done."),
        ]),
    );
    let init = init_line(&out);
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "everything", "status": "connected"}]),
        "{}",
        out.stderr
    );
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__everything__echo"))
    );
    let results = tool_results(&api);
    assert_eq!(results.len(), 2, "{results:#?}");
    assert!(
        results.iter().all(|r| r["is_error"] != true),
        "{results:#?}"
    );
    assert!(
        text_of(&results[0]).contains("hello over sse"),
        "{}",
        results[0]
    );
    assert!(text_of(&results[1]).contains("42"), "{}", results[1]);
}

#[test]
fn an_sse_server_that_is_not_listening_is_reported_failed() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sandbox = Sandbox::new().unwrap();
    let api = TestServer::spawn(Script::new([Turn::text("Done.")])).unwrap();
    let out = gyre(
        &sandbox,
        &api,
        &config(json!({"gone": {"type": "sse", "url": format!("http://127.0.0.1:{port}/sse")}})),
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "gone", "status": "failed"}])
    );
    assert!(
        out.stderr
            .contains("MCP server \"gone\" (sse) failed: the SSE connection failed"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_sse_server_that_goes_away_mid_call_gives_error_results_naming_it() {
    let mut sse = SseEverything::start();
    let sandbox = Sandbox::new().unwrap();
    let api = TestServer::spawn(Script::new([
        Turn::tool_use(
            "mcp__everything__trigger-long-running-operation",
            json!({"duration": 600, "steps": 600}),
        ),
        Turn::tool_use("mcp__everything__echo", json!({"message": "still there?"})),
        Turn::text("The server is gone."),
    ]))
    .unwrap();
    let mut child = gyre_command(
        &sandbox,
        &api,
        &config(json!({"everything": {"type": "sse", "url": sse.url}})),
        &["--allowedTools", "mcp__everything"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("\"tool_use\"") && line.contains("trigger-long-running-operation") {
            break;
        }
    }
    // The server ends while the call runs (or just before it is posted): either way
    // the call fails naming the server, and the next one is refused at once.
    sse.child.kill().unwrap();
    sse.child.wait().unwrap();
    // A hang is killed, then fails the test.
    let status = wait_or_kill(&mut child, Duration::from_secs(60));
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert_eq!(status, Some(0), "{rest:#?}");
    let results = tool_results(&api);
    assert_eq!(results.len(), 2, "{results:#?}");
    for result in &results {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            text_of(result).contains("MCP server \"everything\""),
            "{result}"
        );
    }
    assert!(
        text_of(&results[1]).contains("is not running"),
        "{}",
        results[1]
    );
}

/// Issue #29 class 14: `readOnlyHint` is the server's word; plan mode asks unless a rule
/// allows the tool.
#[test]
fn plan_mode_asks_before_an_mcp_tool_its_server_calls_read_only() {
    let sandbox = Sandbox::new().unwrap();
    let script = || {
        Script::new([
            Turn::tool_use("mcp__test__echo", json!({"text": "a"})),
            Turn::text("Done."),
        ])
    };
    let server = TestServer::spawn(script()).unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &["--permission-mode", "plan"],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(tool_results(&server)[0]["is_error"], true);
    let server = TestServer::spawn(script()).unwrap();
    let out = gyre(
        &sandbox,
        &server,
        &config(json!({"test": stdio(&[])})),
        &[
            "--permission-mode",
            "plan",
            "--allowedTools",
            "mcp__test__echo",
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(tool_results(&server)[0]["content"], "a");
}
