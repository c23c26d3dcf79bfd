//! Amazon Bedrock's AWS credentials through the `gyre` binary, one test a source of the
//! chain: `credential_process`, web identity (STS at a loopback mock), the container
//! endpoint, IMDSv2 (refreshed as its keys near their expiry), and SSO's cached token.
//! Every request's SigV4 signature is checked by botocore with the keys the source
//! gave. No test reaches a link-local address: the metadata endpoints are mocks on
//! loopback or switched off.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, SigV4Check, TestServer, Turn};
use serde_json::json;

use crate::child_env::ChildEnvs;
use crate::cloud_mock::{CloudMock, rfc3339_in};

const REGION: &str = "eu-west-1";

/// A `gyre` for Bedrock at `server` in [`REGION`], with no AWS credentials of its own.
fn bedrock(sandbox: &Sandbox, server: &TestServer) -> Command {
    let mut cmd = sandbox.gyre(server).unwrap();
    cmd.env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env("CLAUDE_CODE_USE_BEDROCK", "1")
        .env("ANTHROPIC_BEDROCK_BASE_URL", server.url())
        .env("AWS_REGION", REGION)
        .env("AWS_CONFIG_FILE", sandbox.home().join("aws-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            sandbox.home().join("aws-credentials"),
        );
    cmd
}

fn backend_line(out: &Run) -> String {
    out.stderr
        .lines()
        .find(|l| l.starts_with("gyre: backend:"))
        .unwrap_or_else(|| panic!("no backend line in {}", out.stderr))
        .to_owned()
}

fn check<'a>(key: &'a str, secret: &'a str, token: &'a str) -> SigV4Check<'a> {
    SigV4Check {
        access_key_id: key,
        secret_access_key: secret,
        session_token: Some(token),
        region: REGION,
        service: "bedrock",
    }
}

#[test]
fn credential_process_keys_sign_the_requests_and_never_reach_bash_hooks_or_mcp_servers() {
    let sandbox = Sandbox::new().unwrap();
    let secret = format!("process-secret-{}", std::process::id());
    let token = format!("process-token-{}", std::process::id());
    let runs = sandbox.home().join("process-runs");
    let script = sandbox.home().join("print-keys.sh");
    std::fs::write(
        &script,
        format!(
            "echo run >> '{}'\nprintf '%s' '{}'\n",
            runs.display(),
            json!({"Version": 1, "AccessKeyId": "ASIAPROCESS", "SecretAccessKey": secret,
                   "SessionToken": token, "Expiration": rfc3339_in(3600)})
        ),
    )
    .unwrap();
    std::fs::write(
        sandbox.home().join("aws-config"),
        format!(
            "[profile work]\ncredential_process = sh {}\n",
            script.display()
        ),
    )
    .unwrap();
    let children = ChildEnvs::install(&sandbox, json!({}));
    let server = TestServer::spawn(Script::new([
        ChildEnvs::bash_turn(),
        Turn::text("signed by the process's keys"),
    ]))
    .unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_PROFILE", "work")
        .args(["-p", "look", "--allowedTools", "Bash", "--verbose"])
        .args(["--mcp-config", &children.mcp_config]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "signed by the process's keys");
    let line = backend_line(&out);
    assert!(
        line.contains("credentials: AWS profile work credential_process"),
        "{line}"
    );
    assert!(
        !line.contains("print-keys"),
        "the command is not shown: {line}"
    );
    // Run once, its keys kept for both requests.
    assert_eq!(std::fs::read_to_string(&runs).unwrap().lines().count(), 1);
    assert_eq!(check("ASIAPROCESS", &secret, &token).verify(&server), Ok(2));
    children.assert_none_saw(&server, 1, &[&secret, &token]);
    assert!(!out.stderr.contains(&secret) && !out.stderr.contains(&token));
}

#[test]
fn a_projects_settings_cannot_point_gyre_at_an_aws_config_whose_process_it_would_run() {
    let sandbox = Sandbox::new().unwrap();
    let marker = sandbox.home().join("process-ran");
    let config = sandbox
        .write(
            "aws-config",
            &format!(
                "[default]\ncredential_process = sh -c 'touch {}; exit 1'\n",
                marker.display()
            ),
        )
        .unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({"env": {"AWS_CONFIG_FILE": config, "AWS_PROFILE": "default"}}).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    let mut cmd = bedrock(&sandbox, &server);
    cmd.env_remove("AWS_CONFIG_FILE");
    let out = run(cmd.args(["-p", "hi"])).unwrap();
    assert!(!marker.exists(), "a project's credential_process ran");
    assert!(
        out.stderr.contains("ignored env.AWS_CONFIG_FILE"),
        "{}",
        out.stderr
    );
    assert_ne!(out.code, Some(0));
    assert_eq!(server.request_count(), 0);
}

/// STS's `AssumeRoleWithWebIdentity` answer.
fn sts_answer(key: &str, secret: &str, token: &str) -> String {
    format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>{key}</AccessKeyId>\
         <SecretAccessKey>{secret}</SecretAccessKey><SessionToken>{token}</SessionToken>\
         <Expiration>{}</Expiration></Credentials></AssumeRoleWithWebIdentityResult>\
         </AssumeRoleWithWebIdentityResponse>",
        rfc3339_in(3600)
    )
}

#[test]
fn web_identity_exchanges_the_token_file_at_sts_for_the_keys_that_sign() {
    let sandbox = Sandbox::new().unwrap();
    let token_file = sandbox.home().join("web-identity-token");
    std::fs::write(&token_file, "eyJ.oidc-token.sig\n").unwrap();
    let sts = CloudMock::spawn(|_| {
        (
            200,
            "text/xml",
            sts_answer("ASIASTS", "sts/secret+key", "sts-session-token"),
        )
    });
    let server = TestServer::spawn(Script::new([Turn::text("assumed")])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_WEB_IDENTITY_TOKEN_FILE", &token_file)
        .env("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/gyre-ci")
        .env("AWS_ROLE_SESSION_NAME", "ci-run")
        .env("AWS_ENDPOINT_URL_STS", sts.url())
        .args(["-p", "hi", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let line = backend_line(&out);
    assert!(
        line.contains("web identity AWS_WEB_IDENTITY_TOKEN_FILE for role arn:aws:iam::123456789012:role/gyre-ci"),
        "{line}"
    );
    let asked = sts.received();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].method, "POST");
    for field in [
        "Action=AssumeRoleWithWebIdentity",
        "Version=2011-06-15",
        "RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fgyre-ci",
        "RoleSessionName=ci-run",
        "WebIdentityToken=eyJ.oidc-token.sig",
    ] {
        assert!(
            asked[0].body.contains(field),
            "{field} in {}",
            asked[0].body
        );
    }
    assert_eq!(
        check("ASIASTS", "sts/secret+key", "sts-session-token").verify(&server),
        Ok(1)
    );
}

#[test]
fn container_credentials_are_asked_with_the_authorization_token() {
    let sandbox = Sandbox::new().unwrap();
    let endpoint = CloudMock::spawn(|r| {
        if r.header("authorization") != Some("container-auth-token") {
            return (401, "text/plain", "no token".to_owned());
        }
        (
            200,
            "application/json",
            json!({"AccessKeyId": "ASIACONTAINER", "SecretAccessKey": "container-secret",
                   "Token": "container-session", "Expiration": rfc3339_in(3600)})
            .to_string(),
        )
    });
    let server = TestServer::spawn(Script::new([Turn::text("from the task role")])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env(
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            format!("{}/v2/credentials/task", endpoint.url()),
        )
        .env("AWS_CONTAINER_AUTHORIZATION_TOKEN", "container-auth-token")
        .args(["-p", "hi", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        backend_line(&out).contains("container credentials AWS_CONTAINER_CREDENTIALS_FULL_URI="),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("container-auth-token"));
    let asked = endpoint.received();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].path, "/v2/credentials/task");
    assert_eq!(
        check("ASIACONTAINER", "container-secret", "container-session").verify(&server),
        Ok(1)
    );
}

/// An IMDSv2 mock whose keys expire in `expires_in` seconds.
fn imds(expires_in: u64) -> CloudMock {
    CloudMock::spawn(move |r| match (r.method.as_str(), r.path.as_str()) {
        ("PUT", "/latest/api/token")
            if r.header("x-aws-ec2-metadata-token-ttl-seconds").is_some() =>
        {
            (200, "text/plain", "imds-session-token".to_owned())
        }
        (_, _) if r.header("x-aws-ec2-metadata-token") != Some("imds-session-token") => {
            (401, "text/plain", String::new())
        }
        ("GET", "/latest/meta-data/iam/security-credentials/") => {
            (200, "text/plain", "gyre-instance-role".to_owned())
        }
        ("GET", "/latest/meta-data/iam/security-credentials/gyre-instance-role") => (
            200,
            "application/json",
            json!({"Code": "Success", "AccessKeyId": "ASIAIMDS", "SecretAccessKey": "imds-secret",
                   "Token": "imds-session", "Expiration": rfc3339_in(expires_in)})
            .to_string(),
        ),
        _ => (404, "text/plain", String::new()),
    })
}

#[test]
fn instance_metadata_keys_near_their_expiry_are_fetched_anew_for_each_request() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "imds notes\n").unwrap();
    // 60 s left is inside the 5-minute refresh margin.
    let metadata = imds(60);
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Read", json!({"file_path": "notes.txt"})),
        Turn::text("read with instance keys"),
    ]))
    .unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url())
        .args(["-p", "read the notes", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        backend_line(&out).contains(&format!(
            "EC2 instance metadata (IMDSv2) at {}",
            metadata.url()
        )),
        "{}",
        out.stderr
    );
    let paths: Vec<String> = metadata
        .received()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    let one_fetch = [
        "PUT /latest/api/token",
        "GET /latest/meta-data/iam/security-credentials/",
        "GET /latest/meta-data/iam/security-credentials/gyre-instance-role",
    ];
    assert_eq!(paths, [one_fetch, one_fetch].concat());
    assert_eq!(
        check("ASIAIMDS", "imds-secret", "imds-session").verify(&server),
        Ok(2)
    );
}

#[test]
fn fresh_instance_metadata_keys_are_fetched_once_and_a_disabled_service_is_never_asked() {
    let sandbox = Sandbox::new().unwrap();
    let metadata = imds(3600);
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "true"})),
        Turn::text("ok"),
    ]))
    .unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env_remove("AWS_EC2_METADATA_DISABLED")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url())
        .args(["-p", "hi", "--allowedTools", "Bash"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(metadata.received().len(), 3);

    // Switched off, with no other source: an error at once naming what to set.
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.url())
        .args(["-p", "hi"]))
    .unwrap();
    assert_ne!(out.code, Some(0));
    assert_eq!(metadata.received().len(), 3);
    assert_eq!(server.request_count(), 0);
    assert!(out.stderr.contains("AWS_ACCESS_KEY_ID"), "{}", out.stderr);
    assert!(!out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
}

#[test]
fn an_sso_profile_exchanges_the_cached_login_token_at_the_portal() {
    let sandbox = Sandbox::new().unwrap();
    std::fs::write(
        sandbox.home().join("aws-config"),
        "[profile dev]\nsso_session = corp\nsso_account_id = 111122223333\n\
         sso_role_name = Developer\n\n[sso-session corp]\n\
         sso_start_url = https://corp.awsapps.com/start\nsso_region = eu-central-1\n",
    )
    .unwrap();
    // `aws sso login` names the cache file for the SHA-1 of the session's name.
    let cache = sandbox.home().join(".aws/sso/cache");
    std::fs::create_dir_all(&cache).unwrap();
    // sha1("corp")
    let name = "ee0bfd2552fbd840c02cc48b6e823320543c450f";
    std::fs::write(
        cache.join(format!("{name}.json")),
        json!({"accessToken": "sso-access-token", "expiresAt": rfc3339_in(3600),
               "startUrl": "https://corp.awsapps.com/start", "region": "eu-central-1"})
        .to_string(),
    )
    .unwrap();
    let portal = CloudMock::spawn(|r| {
        if r.header("x-amz-sso_bearer_token") != Some("sso-access-token") {
            return (401, "application/json", "{}".to_owned());
        }
        let expiration = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 3_600_000;
        (
            200,
            "application/json",
            json!({"roleCredentials": {"accessKeyId": "ASIASSO", "secretAccessKey": "sso-secret",
                   "sessionToken": "sso-session", "expiration": expiration as u64}})
            .to_string(),
        )
    });
    let server = TestServer::spawn(Script::new([Turn::text("signed in via SSO")])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_PROFILE", "dev")
        .env("AWS_ENDPOINT_URL_SSO", portal.url())
        .args(["-p", "hi", "--verbose"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        backend_line(&out).contains("AWS profile dev SSO (account 111122223333, role Developer)"),
        "{}",
        out.stderr
    );
    let asked = portal.received();
    assert_eq!(asked.len(), 1);
    assert_eq!(
        asked[0].path,
        "/federation/credentials?account_id=111122223333&role_name=Developer"
    );
    assert_eq!(
        check("ASIASSO", "sso-secret", "sso-session").verify(&server),
        Ok(1)
    );

    // An expired login says to log in again, and nothing is sent.
    std::fs::write(
        cache.join(format!("{name}.json")),
        json!({"accessToken": "old", "expiresAt": "2020-01-01T00:00:00Z"}).to_string(),
    )
    .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_PROFILE", "dev")
        .env("AWS_ENDPOINT_URL_SSO", portal.url())
        .args(["-p", "hi"]))
    .unwrap();
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("aws sso login --profile dev"),
        "{}",
        out.stderr
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn refused_aws_keys_are_told_as_aws_credentials_not_an_anthropic_key() {
    let sandbox = Sandbox::new().unwrap();
    let server =
        TestServer::spawn(Script::new([Turn::http_error(401), Turn::http_error(401)])).unwrap();
    let out = run(bedrock(&sandbox, &server)
        .env("AWS_ACCESS_KEY_ID", "AKIDBAD")
        .env("AWS_SECRET_ACCESS_KEY", "bad")
        .args(["-p", "hi"]))
    .unwrap();
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("UnrecognizedClientException"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("AWS_PROFILE"), "{}", out.stderr);
    assert!(!out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    // Refused keys are retried once, as a 401 is.
    assert_eq!(server.request_count(), 2);
}
