//! Proxies and extra CAs for gyre's other HTTP clients, through the `gyre` binary:
//! WebFetch and MCP's streamable HTTP transport reach a local TLS server whose CA the
//! test made, through a local CONNECT proxy, trusting the CA from `NODE_EXTRA_CA_CERTS`
//! or a directory `SSL_CERT_DIR` names; without the CA each fails at once, saying which
//! variable adds one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gyre_e2e::{Run, Sandbox, run, test_mcp_binary};
use gyre_testkit::{ConnectProxy, Script, TestServer, TlsFront, Turn};
use serde_json::{Value, json};

use crate::cloud_mock::CloudMock;

const PAGE: &str =
    "<html><body><h1>Behind the corporate proxy</h1><p>The code is <b>7</b>.</p></body></html>";

/// A TLS web server whose CA only the test knows: `/page` is [`PAGE`].
fn tls_page_server() -> (CloudMock, TlsFront) {
    let page = CloudMock::spawn(|r| match r.path.as_str() {
        "/page" => (200, "text/html; charset=utf-8", PAGE.to_owned()),
        _ => (404, "text/plain", String::new()),
    });
    let addr: SocketAddr = page.host().parse().unwrap();
    let front = TlsFront::spawn(addr).unwrap();
    (page, front)
}

/// The last request's tool results' text.
fn tool_result_text(server: &TestServer) -> String {
    let last = server.requests().pop().expect("a request");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| match &b["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn web_fetch_script(url: &str) -> Script {
    Script::new([
        Turn::tool_use(
            "WebFetch",
            json!({"url": url, "prompt": "what is the code?"}),
        ),
        Turn::text("The code is 7."),
        Turn::text("done"),
    ])
}

#[test]
fn web_fetch_reaches_a_tls_server_through_the_proxy_trusting_a_ca_from_ssl_cert_dir() {
    let (page, front) = tls_page_server();
    let proxy = ConnectProxy::spawn().unwrap();
    let sandbox = Sandbox::new().unwrap();
    let cas = sandbox.home().join("corp-cas");
    std::fs::create_dir_all(&cas).unwrap();
    std::fs::write(cas.join("README"), "not a certificate\n").unwrap();
    std::fs::write(cas.join("corp-ca.pem"), front.ca_pem()).unwrap();
    let url = format!("{}/page", front.url());
    let server = TestServer::spawn(web_fetch_script(&url)).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("HTTPS_PROXY", proxy.url())
        .env("SSL_CERT_DIR", &cas)
        .args([
            "-p",
            "fetch it",
            "--allowedTools",
            "WebFetch(domain:localhost)",
            "--verbose",
        ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("extra CAs: SSL_CERT_DIR={}", cas.display())),
        "{}",
        out.stderr
    );
    // The side request carried the page as Markdown; the fetch went through the proxy.
    let requests = server.requests();
    let side = requests[1].body.to_string();
    assert!(side.contains("Behind the corporate proxy"), "{side}");
    assert_eq!(page.received().len(), 1);
    let port = front.url().rsplit(':').next().unwrap().to_owned();
    assert_eq!(proxy.targets(), [format!("localhost:{port}")]);
}

#[test]
fn web_fetch_without_the_ca_fails_at_once_saying_which_variable_adds_it() {
    let (page, front) = tls_page_server();
    let sandbox = Sandbox::new().unwrap();
    let url = format!("{}/page", front.url());
    let server = TestServer::spawn(web_fetch_script(&url)).unwrap();
    let started = Instant::now();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "fetch it",
        "--allowedTools",
        "WebFetch(domain:localhost)",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let told = tool_result_text(&server);
    assert!(told.contains("unknown CA"), "{told}");
    assert!(told.contains("NODE_EXTRA_CA_CERTS"), "{told}");
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(page.received().is_empty());
}

/// The testkit's MCP server over streamable HTTP, behind a TLS front; killed when dropped.
struct TlsMcp {
    child: Child,
    front: TlsFront,
    /// `https://localhost:PORT/…`.
    url: String,
}

impl TlsMcp {
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
        let plain = url.trim().strip_prefix("http://").unwrap().to_owned();
        let (host, path) = plain.split_once('/').unwrap();
        let front = TlsFront::spawn(host.parse().unwrap()).unwrap();
        let url = format!("{}/{path}", front.url());
        Self { child, front, url }
    }
}

impl Drop for TlsMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mcp_gyre(sandbox: &Sandbox, server: &TestServer, mcp: &TlsMcp) -> Command {
    let config = json!({"mcpServers": {"corp": {"type": "http", "url": mcp.url}}});
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.args([
        "-p",
        "use the tool",
        "--output-format",
        "stream-json",
        "--verbose",
        "--allowedTools",
        "mcp__corp",
        "--mcp-config",
        &config.to_string(),
    ]);
    cmd
}

fn mcp_status(out: &Run) -> Value {
    out.lines()
        .unwrap()
        .into_iter()
        .find(|l| l["subtype"] == "init")
        .expect("an init line")["mcp_servers"]
        .clone()
}

#[test]
fn an_mcp_http_server_over_tls_is_reached_through_the_proxy_with_the_extra_ca() {
    let mcp = TlsMcp::start();
    let proxy = ConnectProxy::spawn().unwrap();
    let sandbox = Sandbox::new().unwrap();
    let ca = sandbox.home().join("corp-ca.pem");
    std::fs::write(&ca, mcp.front.ca_pem()).unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("mcp__corp__echo", json!({"text": "over tls"})),
        Turn::text("Done."),
    ]))
    .unwrap();
    let out = run(mcp_gyre(&sandbox, &server, &mcp)
        .env("HTTPS_PROXY", proxy.url())
        .env("NODE_EXTRA_CA_CERTS", &ca))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        mcp_status(&out),
        json!([{"name": "corp", "status": "connected"}])
    );
    assert_eq!(tool_result_text(&server), "over tls");
    assert!(!proxy.targets().is_empty());
    let port = mcp.front.url().rsplit(':').next().unwrap().to_owned();
    assert!(
        proxy
            .targets()
            .iter()
            .all(|t| *t == format!("localhost:{port}")),
        "{:?}",
        proxy.targets()
    );
}

#[test]
fn an_mcp_http_server_over_tls_without_the_ca_fails_at_once_saying_which_variable_adds_it() {
    let mcp = TlsMcp::start();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("no tools today")])).unwrap();
    let started = Instant::now();
    let out = run(&mut mcp_gyre(&sandbox, &server, &mcp)).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        mcp_status(&out),
        json!([{"name": "corp", "status": "failed"}])
    );
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("MCP server \"corp\""))
        .unwrap_or_else(|| panic!("no MCP failure line in {}", out.stderr));
    assert!(line.contains("NODE_EXTRA_CA_CERTS"), "{line}");
    assert!(started.elapsed() < Duration::from_secs(20));
}
