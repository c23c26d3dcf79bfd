//! Flags the Agent SDKs pass for options their programs set (`--thinking-display`,
//! `--resume-session-at`, `--plugin-dir`, `--permission-prompts`), driven through the
//! binary against gyre-testkit. The `initialize` fields run in `ts_sdk.rs` with the
//! real TypeScript SDK.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

#[test]
fn thinking_display_goes_in_the_thinking_parameter_and_a_wrong_value_is_refused() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "omitted",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
    assert_eq!(
        server.requests()[0].body["thinking"],
        json!({"type": "adaptive", "display": "omitted"})
    );
    let wrong = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "think",
        "--thinking",
        "adaptive",
        "--thinking-display",
        "loud",
    ]))
    .unwrap();
    assert_ne!(wrong.code, Some(0));
    assert!(
        wrong
            .stderr
            .contains("--thinking-display \"loud\": use summarized or omitted"),
        "{}",
        wrong.stderr
    );
}
