//! Enterprise backends through the `gyre` binary: a session through a CONNECT proxy to a
//! TLS server whose CA only `NODE_EXTRA_CA_CERTS` names, the same server refused without
//! it, a bearer token, and a settings `apiKeyHelper` whose key never reaches a tool.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{ConnectProxy, Script, TestServer, TlsFront, Turn};
use serde_json::json;

#[test]
fn a_session_through_a_proxy_to_a_tls_inspecting_ca_runs_with_the_extra_ca() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("through the proxy")])).unwrap();
    let front = TlsFront::spawn(server.addr()).unwrap();
    let proxy = ConnectProxy::spawn().unwrap();
    let ca = sandbox.home().join("corp-ca.pem");
    std::fs::write(&ca, front.ca_pem()).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_BASE_URL", front.url())
        .env("HTTPS_PROXY", proxy.url())
        .env("NODE_EXTRA_CA_CERTS", &ca)
        .args(["-p", "hi", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "through the proxy");
    assert_eq!(proxy.targets().len(), 1);
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("gyre: backend:"))
        .unwrap_or_else(|| panic!("no backend line in {}", out.stderr));
    assert!(line.contains(&front.url()), "{line}");
    assert!(line.contains(&format!("proxy: {}", proxy.url())), "{line}");
    assert!(line.contains("credentials: ANTHROPIC_API_KEY"), "{line}");
    assert!(line.contains("NODE_EXTRA_CA_CERTS="), "{line}");
}

#[test]
fn without_the_extra_ca_the_session_fails_at_once_saying_what_to_set() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    let front = TlsFront::spawn(server.addr()).unwrap();
    let started = std::time::Instant::now();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env("ANTHROPIC_BASE_URL", front.url())
        .args(["-p", "hi"]))
    .unwrap();
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("NODE_EXTRA_CA_CERTS"), "{}", out.stderr);
    assert!(!out.stderr.contains("retrying"), "{}", out.stderr);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_bearer_token_session_sends_authorization_and_no_api_key() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .env("ANTHROPIC_AUTH_TOKEN", "gateway-token")
        .args(["-p", "hi"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer gateway-token")
    );
    assert_eq!(requests[0].header("x-api-key"), None);
}

#[test]
fn a_key_helper_session_runs_and_its_key_never_reaches_bash_a_hook_or_an_mcp_server() {
    let sandbox = Sandbox::new().unwrap();
    let key = format!("sk-helper-{}", std::process::id());
    let children = crate::child_env::ChildEnvs::install(
        &sandbox,
        json!({ "apiKeyHelper": format!("echo {key}") }),
    );
    let server = TestServer::spawn(
        Script::new([crate::child_env::ChildEnvs::bash_turn(), Turn::text("done")])
            .require_api_key(key.clone()),
    )
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .args(["-p", "look", "--allowedTools", "Bash", "--verbose"])
        .args(["--mcp-config", &children.mcp_config]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("credentials: apiKeyHelper (settings)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(&key), "{}", out.stderr);
    assert_eq!(server.request_count(), 2);
    // The second request carries Bash's `env` output.
    children.assert_none_saw(&server, 1, &[&key]);
}

#[test]
fn an_untrusted_projects_key_helper_is_not_run() {
    let sandbox = Sandbox::untrusted().unwrap();
    let marker = sandbox.home().join("helper-ran");
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({ "apiKeyHelper": format!("touch {}; echo k", marker.display()) }).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "hi"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!marker.exists(), "an untrusted project's apiKeyHelper ran");
    assert_eq!(
        server.requests()[0].header("x-api-key"),
        Some(gyre_e2e::TEST_API_KEY)
    );
}

const BEDROCK_MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

/// A `gyre` command for Bedrock at `server`, with the `work` profile of AWS files
/// written under the sandbox's home; no metadata endpoint is ever asked.
fn bedrock_gyre(sandbox: &Sandbox, server: &TestServer) -> std::process::Command {
    let aws = sandbox.home().join("aws");
    std::fs::create_dir_all(&aws).unwrap();
    std::fs::write(
        aws.join("credentials"),
        "[default]\naws_access_key_id = AKIDWRONG\naws_secret_access_key = wrong\n\
         [work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = work/secret+key\n",
    )
    .unwrap();
    std::fs::write(
        aws.join("config"),
        "[profile work]\nregion = ap-southeast-2\n",
    )
    .unwrap();
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("CLAUDE_CODE_USE_BEDROCK", "1")
        .env("ANTHROPIC_BEDROCK_BASE_URL", server.url())
        .env("ANTHROPIC_MODEL", BEDROCK_MODEL)
        .env("AWS_PROFILE", "work")
        .env("AWS_SHARED_CREDENTIALS_FILE", aws.join("credentials"))
        .env("AWS_CONFIG_FILE", aws.join("config"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("GCE_METADATA_HOST", "127.0.0.1:1");
    cmd
}

#[test]
fn a_bedrock_session_runs_end_to_end_through_overload_throttling_and_a_cut_stream() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "bedrock notes\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::http_error(529).with_header("retry-after-ms", "1"),
        Turn::tool_use("Read", json!({"file_path": "notes.txt"})),
        Turn::http_error(429).with_header("retry-after-ms", "1"),
        Turn::text("a partial answer that gets cut").cut_after(3),
        Turn::text("read it over Bedrock"),
    ]))
    .unwrap();
    let out =
        run(bedrock_gyre(&sandbox, &server).args(["-p", "read the notes", "--verbose"])).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "read it over Bedrock");
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("gyre: backend:"))
        .unwrap_or_else(|| panic!("no backend line in {}", out.stderr));
    assert!(line.contains("Amazon Bedrock"), "{line}");
    assert!(line.contains("AWS profile work"), "{line}");
    assert!(!line.contains("work/secret"), "{line}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for r in &requests {
        assert_eq!(
            r.path,
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/invoke-with-response-stream"
        );
    }
    // The tool result went back in the next request.
    assert!(requests[2].body.to_string().contains("bedrock notes"));
    let check = gyre_testkit::SigV4Check {
        access_key_id: "AKIDWORK",
        secret_access_key: "work/secret+key",
        session_token: None,
        region: "ap-southeast-2",
        service: "bedrock",
    };
    assert_eq!(check.verify(&server), Ok(5));
}

#[test]
fn a_bedrock_gateway_with_skip_auth_gets_unsigned_requests() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("via the gateway")])).unwrap();
    let out = run(bedrock_gyre(&sandbox, &server)
        .env("CLAUDE_CODE_SKIP_BEDROCK_AUTH", "1")
        .args(["-p", "hi"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "via the gateway");
    assert_eq!(server.requests()[0].header("authorization"), None);
}

#[test]
fn a_bedrock_profile_without_keys_fails_before_sending_and_says_what_to_set() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    let out = run(bedrock_gyre(&sandbox, &server)
        .env("AWS_PROFILE", "missing")
        .args(["-p", "hi"]))
    .unwrap();
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("AWS_ACCESS_KEY_ID"), "{}", out.stderr);
    assert!(out.stderr.contains("`missing`"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}

#[test]
fn a_vertex_session_runs_end_to_end_with_a_service_account_through_overload_and_a_cut_stream() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "vertex notes\n").unwrap();
    let tokens = gyre_testkit::GoogleTokenServer::spawn(3600).unwrap();
    let key = sandbox.home().join("service-account.json");
    tokens
        .write_service_account(&key, "gyre@test.iam.gserviceaccount.com")
        .unwrap();
    let server = TestServer::spawn(
        Script::new([
            Turn::http_error(529).with_header("retry-after-ms", "1"),
            Turn::tool_use("Read", json!({"file_path": "notes.txt"})),
            Turn::text("a partial answer that gets cut").cut_after(3),
            Turn::text("read it over Vertex"),
        ])
        .require_api_key("ya29.gyre-test-1"),
    )
    .unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("CLAUDE_CODE_USE_VERTEX", "1")
        .env("ANTHROPIC_VERTEX_BASE_URL", server.url())
        .env("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
        .env("CLOUD_ML_REGION", "us-east5")
        .env("ANTHROPIC_MODEL", "claude-sonnet-4-5@20250929")
        .env("GOOGLE_APPLICATION_CREDENTIALS", &key)
        .env("GCE_METADATA_HOST", "127.0.0.1:1")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .args(["-p", "read the notes", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "read it over Vertex");
    assert!(
        out.stderr.contains("gyre: backend: Google Vertex AI at"),
        "{}",
        out.stderr
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    for r in &requests {
        assert_eq!(
            r.path,
            "/projects/my-project/locations/us-east5/publishers/anthropic/models/\
             claude-sonnet-4-5@20250929:streamRawPredict"
        );
    }
    assert!(requests[2].body.to_string().contains("vertex notes"));
    assert_eq!(tokens.minted(), 1);
    assert_eq!(tokens.refused(), Vec::<String>::new());
}
