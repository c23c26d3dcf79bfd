//! Google Vertex AI's credentials through the `gyre` binary: the GCE metadata server
//! (a loopback mock) and gcloud's user credentials (a refresh token exchanged at a mock
//! token endpoint, refreshed before it expires), and a refused token told as Google
//! credentials.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

use crate::cloud_mock::CloudMock;

/// A `gyre` for Vertex AI at `server`, project `my-project` in `us-east5`.
fn vertex(sandbox: &Sandbox, server: &TestServer) -> Command {
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("CLAUDE_CODE_USE_VERTEX", "1")
        .env("ANTHROPIC_VERTEX_BASE_URL", server.url())
        .env("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
        .env("CLOUD_ML_REGION", "us-east5");
    cmd
}

/// A GCE metadata server whose token is `ya29.metadata-N` (N counting from 1).
fn metadata_server() -> CloudMock {
    let minted = std::sync::atomic::AtomicUsize::new(0);
    CloudMock::spawn(move |r| {
        if r.header("metadata-flavor") != Some("Google")
            || r.path != "/computeMetadata/v1/instance/service-accounts/default/token"
        {
            return (403, "text/plain", "missing Metadata-Flavor".to_owned());
        }
        let n = minted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        (
            200,
            "application/json",
            json!({"access_token": format!("ya29.metadata-{n}"), "expires_in": 3599,
                   "token_type": "Bearer"})
            .to_string(),
        )
    })
}

#[test]
fn on_gce_the_metadata_token_authorises_never_reaches_bash_and_the_model_gets_its_vertex_id() {
    let sandbox = Sandbox::new().unwrap();
    let metadata = metadata_server();
    let server = TestServer::spawn(
        Script::new([
            Turn::tool_use("Bash", json!({"command": "env"})),
            Turn::text("from the instance's account"),
        ])
        .require_api_key("ya29.metadata-1"),
    )
    .unwrap();
    let out = run(vertex(&sandbox, &server)
        .env("GCE_METADATA_HOST", metadata.host())
        .args(["-p", "hi", "--allowedTools", "Bash", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "from the instance's account");
    assert!(
        out.stderr.contains(&format!(
            "credentials: GCE metadata server {}",
            metadata.host()
        )),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("ya29."), "{}", out.stderr);
    assert_eq!(metadata.received().len(), 1);
    let requests = server.requests();
    assert_eq!(
        requests[0].path,
        "/projects/my-project/locations/us-east5/publishers/anthropic/models/\
         claude-sonnet-4-5@20250929:streamRawPredict"
    );
    assert_eq!(requests[0].body["anthropic_version"], "vertex-2023-10-16");
    // The second request carries Bash's `env`: the token is not in it.
    let bash_output = requests[1].body.to_string();
    assert!(bash_output.contains("GYRE_HOME"), "{bash_output}");
    assert!(!bash_output.contains("ya29."), "the token reached Bash");
}

#[test]
fn gcloud_user_credentials_are_refreshed_at_the_token_endpoint_before_they_expire() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "gcloud notes\n").unwrap();
    let minted = std::sync::atomic::AtomicUsize::new(0);
    let endpoint = CloudMock::spawn(move |r| {
        let form: Vec<&str> = r.body.split('&').collect();
        if !form.contains(&"grant_type=refresh_token")
            || !form.contains(&"refresh_token=1%2F%2Fgcloud-refresh")
            || !form.contains(&"client_id=gcloud-client.apps.googleusercontent.com")
        {
            return (
                400,
                "application/json",
                r#"{"error":"invalid_grant"}"#.to_owned(),
            );
        }
        let n = minted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        // 60 s is inside the 5-minute refresh margin: each request refreshes.
        (
            200,
            "application/json",
            json!({"access_token": format!("ya29.user-{n}"), "expires_in": 60}).to_string(),
        )
    });
    let gcloud = sandbox.home().join(".config/gcloud");
    std::fs::create_dir_all(&gcloud).unwrap();
    std::fs::write(
        gcloud.join("application_default_credentials.json"),
        json!({"type": "authorized_user", "client_id": "gcloud-client.apps.googleusercontent.com",
               "client_secret": "gcloud-secret", "refresh_token": "1//gcloud-refresh",
               "token_uri": format!("{}/token", endpoint.url())})
        .to_string(),
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": "notes.txt"})),
        Turn::text("read as the gcloud user"),
    ]))
    .unwrap();
    let out = run(vertex(&sandbox, &server)
        .env("ANTHROPIC_MODEL", "claude-opus-4-1")
        .args(["-p", "read the notes", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("application_default_credentials.json"),
        "{}",
        out.stderr
    );
    let auth: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(auth, ["Bearer ya29.user-1", "Bearer ya29.user-2"]);
    assert!(
        server.requests()[0]
            .path
            .ends_with("/models/claude-opus-4-1@20250805:streamRawPredict")
    );
    assert_eq!(endpoint.received().len(), 2);
}

#[test]
fn a_refused_vertex_token_is_told_as_google_credentials_not_an_anthropic_key() {
    let sandbox = Sandbox::new().unwrap();
    let metadata = metadata_server();
    let server =
        TestServer::spawn(Script::new([Turn::text("never")]).require_api_key("a-token-nobody-has"))
            .unwrap();
    let out = run(vertex(&sandbox, &server)
        .env("GCE_METADATA_HOST", metadata.host())
        .args(["-p", "hi"]))
    .unwrap();
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("GOOGLE_APPLICATION_CREDENTIALS"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    // The 401 made gyre fetch a new token for its one retry.
    assert_eq!(metadata.received().len(), 2);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn without_any_google_credentials_the_error_says_what_to_set_at_once() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    // GCE_METADATA_HOST is a closed loopback port (the sandbox's default).
    let out = run(vertex(&sandbox, &server).args(["-p", "hi"])).unwrap();
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("GOOGLE_APPLICATION_CREDENTIALS")
            && out.stderr.contains("gcloud auth application-default login"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    assert_eq!(server.request_count(), 0);
}
