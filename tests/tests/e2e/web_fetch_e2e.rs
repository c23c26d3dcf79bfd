//! WebFetch end to end against a local HTTP server (never the internet): the page goes
//! to the small model as Markdown, same-host redirects are followed, another host's
//! are reported, pages are cached, and a domain rule allows the fetch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

const PAGE: &str = "<html><head><title>T</title></head><body><h1>Hello gyre</h1><p>The answer is <b>42</b>.</p></body></html>";

/// A tiny HTTP/1.1 server: `/page` is HTML, `/hop` redirects to `/page` on the same
/// host, `/moved` to `localhost` (another host). Returns its port and the paths asked.
fn web_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                    break;
                }
            }
            let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
            seen.lock().unwrap().push(path.clone());
            let response = match path.as_str() {
                "/page" => format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PAGE}",
                    PAGE.len()
                ),
                "/hop" => "HTTP/1.1 302 Found\r\nlocation: /page\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
                "/moved" => format!(
                    "HTTP/1.1 301 Moved Permanently\r\nlocation: http://localhost:{port}/page\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                ),
                _ => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned(),
            };
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (port, hits)
}

#[test]
fn web_fetch_answers_from_the_page_follows_same_host_redirects_and_reports_others() {
    let (port, hits) = web_server();
    let base = format!("http://127.0.0.1:{port}");
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "WebFetch",
            json!({"url": format!("{base}/hop"), "prompt": "what is the answer?"}),
        )
        .with_tokens(10, 1),
        Turn::text("The answer is 42.").with_tokens(500, 5),
        Turn::tool_use(
            "WebFetch",
            json!({"url": format!("{base}/hop"), "prompt": "and again?"}),
        )
        .with_tokens(10, 1),
        Turn::text("Still 42.").with_tokens(500, 5),
        Turn::tool_use(
            "WebFetch",
            json!({"url": format!("{base}/moved"), "prompt": "what now?"}),
        )
        .with_tokens(10, 1),
        Turn::text("done").with_tokens(10, 1),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read the page",
        "--allowedTools",
        "WebFetch(domain:127.0.0.1)",
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let requests = server.requests();
    assert_eq!(requests.len(), 6);
    // The side requests' usage adds to the session's.
    assert_eq!(out.result().unwrap()["usage"]["input_tokens"], 1040);

    // The side request: the small model, the page as Markdown, the prompt.
    let side = &requests[1].body;
    assert_eq!(side["model"], "claude-haiku-4-5");
    let asked = side["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(asked.contains("# Hello gyre"), "{asked}");
    assert!(asked.contains("**42**"), "{asked}");
    assert!(asked.contains("what is the answer?"), "{asked}");
    assert!(side["tools"].as_array().is_none_or(Vec::is_empty), "{side}");

    let result = |i: usize| {
        requests[i].body["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()["content"][0]
            .clone()
    };
    assert_eq!(result(2)["content"], "The answer is 42.");
    assert_eq!(result(4)["content"], "Still 42.");
    let redirect = result(5)["content"].as_str().unwrap().to_owned();
    assert!(redirect.contains("REDIRECT DETECTED"), "{redirect}");
    assert!(
        redirect.contains(&format!("http://localhost:{port}/page")),
        "{redirect}"
    );
    // The second fetch of /hop came from the cache; localhost was never asked.
    assert_eq!(*hits.lock().unwrap(), ["/hop", "/page", "/moved"]);
}

/// Asks for one fetch of the URL `url(port)` names, headless with `--allowedTools rules`,
/// and checks that it was refused and the web server saw no request.
fn assert_fetch_refused(url: impl Fn(u16) -> String, rules: &str) {
    let (port, hits) = web_server();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("WebFetch", json!({"url": url(port), "prompt": "?"})),
        Turn::text("refused"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "read",
        "--allowedTools",
        rules,
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let denials = out.result().unwrap()["permission_denials"].clone();
    assert_eq!(denials[0]["tool_name"], "WebFetch", "{denials}");
    assert!(hits.lock().unwrap().is_empty());
}

#[test]
fn without_a_rule_headless_refuses_the_fetch() {
    assert_fetch_refused(
        |port| format!("http://127.0.0.1:{port}/page"),
        "WebFetch(domain:example.com)",
    );
}

#[test]
fn web_search_is_offered_as_the_api_s_server_tool_only_when_a_rule_allows_it() {
    let tools_sent = |args: &[&str]| {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
        let out = run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "search"])
            .args(args))
        .unwrap();
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
        server.requests()[0].body["tools"].clone()
    };
    let search = |tools: &serde_json::Value| {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "web_search")
            .cloned()
    };
    assert_eq!(search(&tools_sent(&[])), None);
    let offered = search(&tools_sent(&[
        "--allowedTools",
        "WebSearch(domain:docs.rs)",
    ]))
    .unwrap();
    assert_eq!(offered["type"], "web_search_20250305");
    assert_eq!(offered["allowed_domains"], json!(["docs.rs"]));
    assert!(offered.get("input_schema").is_none(), "{offered}");
}

/// Issue #29 class 11: a backslash ends the authority for reqwest (WHATWG), so this URL
/// fetches 127.0.0.1; the rule is judged on that host, and a local address asks even
/// when every fetch is allowed.
#[test]
fn a_domain_rule_is_judged_on_the_host_the_fetch_connects_to() {
    assert_fetch_refused(
        |port| format!("http://127.0.0.1:{port}\\@example.com/page"),
        "WebFetch(domain:example.com) WebFetch",
    );
}
