//! The Anthropic API's recoveries over Amazon Bedrock and Google Vertex AI, through the
//! `gyre` binary: overloads and throttling retried then the fallback model, a cut
//! stream retried, and a prompt too long answered by reactive compaction. The testkit
//! answers in each backend's own framing (event-stream frames and AWS exceptions for
//! Bedrock), and gyre's model names reach each in its own model ids.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use gyre_e2e::{Run, Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy)]
enum Cloud {
    Bedrock,
    Vertex,
}

impl Cloud {
    fn gyre(self, sandbox: &Sandbox, server: &TestServer) -> Command {
        let mut cmd = sandbox.gyre(server).unwrap();
        cmd.env_remove("ANTHROPIC_API_KEY")
            .env_remove("ANTHROPIC_BASE_URL");
        match self {
            Self::Bedrock => cmd
                .env("CLAUDE_CODE_USE_BEDROCK", "1")
                .env("ANTHROPIC_BEDROCK_BASE_URL", server.url())
                .env("AWS_REGION", "eu-central-1")
                .env("AWS_ACCESS_KEY_ID", "AKIDRECOVERY")
                .env("AWS_SECRET_ACCESS_KEY", "recovery-secret"),
            Self::Vertex => cmd
                .env("CLAUDE_CODE_USE_VERTEX", "1")
                .env("ANTHROPIC_VERTEX_BASE_URL", server.url())
                .env("ANTHROPIC_VERTEX_PROJECT_ID", "my-project")
                .env("CLOUD_ML_REGION", "europe-west1")
                .env("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1"),
        };
        cmd
    }

    /// A successful headless stream-json run with `args`, and its lines.
    fn stream_json(
        self,
        sandbox: &Sandbox,
        server: &TestServer,
        args: &[&str],
    ) -> (Run, Vec<Value>) {
        let out = run(self
            .gyre(sandbox, server)
            .args(["-p", "go", "--output-format", "stream-json", "--verbose"])
            .args(args))
        .unwrap();
        assert_eq!(out.code, Some(0), "{self:?}: {}", out.stderr);
        let lines = out.lines().unwrap();
        (out, lines)
    }

    /// The model id a request of `model` reaches this backend with.
    fn model_id(self, model: &str) -> String {
        let dated = match model {
            "claude-opus-4-1" => "claude-opus-4-1-20250805",
            "claude-sonnet-4-5" => "claude-sonnet-4-5-20250929",
            "claude-haiku-4-5" => "claude-haiku-4-5-20251001",
            other => panic!("no id for {other}"),
        };
        match self {
            Self::Bedrock => format!("eu.anthropic.{dated}-v1:0"),
            Self::Vertex => {
                let (base, date) = dated.rsplit_once('-').unwrap();
                format!("{base}@{date}")
            }
        }
    }

    /// The model id a recorded request went to (the path names it on both).
    fn model_of(self, path: &str) -> String {
        match self {
            Self::Bedrock => path
                .strip_prefix("/model/")
                .and_then(|p| p.strip_suffix("/invoke-with-response-stream"))
                .unwrap()
                .replace("%3A", ":"),
            Self::Vertex => path
                .rsplit_once("/models/")
                .and_then(|(_, m)| m.strip_suffix(":streamRawPredict"))
                .unwrap()
                .to_owned(),
        }
    }
}

fn overloads_and_throttling_then_the_fallback_model_answers(cloud: Cloud) {
    let sandbox = Sandbox::new().unwrap();
    let fast = |status| Turn::http_error(status).with_header("retry-after-ms", "1");
    let server = TestServer::spawn(Script::new([
        fast(429),
        fast(529),
        fast(529),
        fast(529),
        Turn::text("a partial answer that gets cut").cut_after(3),
        Turn::text("answered by the fallback"),
    ]))
    .unwrap();
    let (out, lines) = cloud.stream_json(
        &sandbox,
        &server,
        &[
            "--model",
            "claude-opus-4-1",
            "--fallback-model",
            "claude-sonnet-4-5",
        ],
    );
    let kinds = gyre_e2e::kinds(&lines);
    assert!(
        kinds.contains(&"system/model_fallback".to_owned()),
        "{cloud:?}: {kinds:?}"
    );
    let fallback = lines
        .iter()
        .find(|l| l["subtype"] == "model_fallback")
        .unwrap();
    assert_eq!(fallback["original_model"], "claude-opus-4-1");
    assert_eq!(fallback["fallback_model"], "claude-sonnet-4-5");
    assert_eq!(out.result().unwrap()["result"], "answered by the fallback");
    let models: Vec<String> = server
        .requests()
        .iter()
        .map(|r| cloud.model_of(&r.path))
        .collect();
    let opus = cloud.model_id("claude-opus-4-1");
    let sonnet = cloud.model_id("claude-sonnet-4-5");
    assert_eq!(
        models,
        [opus.as_str(), &opus, &opus, &opus, &sonnet, &sonnet],
        "{cloud:?}"
    );
}

#[test]
fn bedrock_overloads_and_throttling_then_the_fallback_model_answers_after_a_cut_stream() {
    overloads_and_throttling_then_the_fallback_model_answers(Cloud::Bedrock);
}

#[test]
fn vertex_overloads_and_throttling_then_the_fallback_model_answers_after_a_cut_stream() {
    overloads_and_throttling_then_the_fallback_model_answers(Cloud::Vertex);
}

fn prompt_too_long_compacts_and_succeeds(cloud: Cloud) {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(gyre_e2e::prompt_too_long_after_three_reads(&sandbox)).unwrap();
    let (out, lines) = cloud.stream_json(&sandbox, &server, &["--model", "claude-sonnet-4-5"]);
    let boundary = lines
        .iter()
        .find(|l| l["subtype"] == "compact_boundary")
        .unwrap_or_else(|| panic!("{cloud:?}: no compaction in {lines:?}"));
    assert_eq!(boundary["compact_metadata"]["trigger"], "reactive");
    assert_eq!(out.result().unwrap()["result"], "Done, after compacting.");
    let requests = server.requests();
    assert_eq!(requests.len(), 6, "{cloud:?}");
    let last = requests[5].body.to_string();
    assert!(last.contains("The user asked to read log.txt three times."));
    assert!(last.len() < requests[3].body.to_string().len() / 2);
    for r in &requests {
        // Neither backend takes the model in the body.
        assert!(r.body.get("model").is_none(), "{cloud:?}");
        assert_eq!(cloud.model_of(&r.path), cloud.model_id("claude-sonnet-4-5"));
    }
}

#[test]
fn bedrock_prompt_too_long_compacts_reactively_and_succeeds() {
    prompt_too_long_compacts_and_succeeds(Cloud::Bedrock);
}

#[test]
fn vertex_prompt_too_long_compacts_reactively_and_succeeds() {
    prompt_too_long_compacts_and_succeeds(Cloud::Vertex);
}

#[test]
fn a_bedrock_inference_profile_arn_in_anthropic_model_passes_through_to_the_path() {
    let sandbox = Sandbox::new().unwrap();
    let arn = "arn:aws:bedrock:eu-central-1:123456789012:application-inference-profile/abc123";
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(Cloud::Bedrock
        .gyre(&sandbox, &server)
        .env("ANTHROPIC_MODEL", arn)
        .args(["-p", "hi"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        server.requests()[0].path,
        "/model/arn%3Aaws%3Abedrock%3Aeu-central-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/invoke-with-response-stream"
    );
    assert_eq!(
        server.requests()[0].body["anthropic_version"],
        "bedrock-2023-05-31"
    );
}

#[test]
fn the_small_fast_models_side_requests_get_each_backends_id_too() {
    let page = crate::cloud_mock::CloudMock::spawn(|_| {
        (200, "text/html", "<p>The code is <b>7</b>.</p>".to_owned())
    });
    for cloud in [Cloud::Bedrock, Cloud::Vertex] {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::tool_use(
                "WebFetch",
                json!({"url": format!("{}/page", page.url()), "prompt": "the code?"}),
            ),
            Turn::text("The code is 7."),
            Turn::text("done"),
        ]))
        .unwrap();
        let (_, _) = cloud.stream_json(
            &sandbox,
            &server,
            &[
                "--model",
                "claude-sonnet-4-5",
                "--allowedTools",
                "WebFetch(domain:127.0.0.1)",
            ],
        );
        let models: Vec<String> = server
            .requests()
            .iter()
            .map(|r| cloud.model_of(&r.path))
            .collect();
        let (main, small) = (
            cloud.model_id("claude-sonnet-4-5"),
            cloud.model_id("claude-haiku-4-5"),
        );
        assert_eq!(models, [main.as_str(), &small, &main], "{cloud:?}");
    }
}

#[test]
fn an_unreachable_backend_names_its_own_base_url_variable_and_no_anthropic_key() {
    for (cloud, var) in [
        (Cloud::Bedrock, "ANTHROPIC_BEDROCK_BASE_URL"),
        (Cloud::Vertex, "ANTHROPIC_VERTEX_BASE_URL"),
    ] {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("never")])).unwrap();
        // Nothing listens on port 1 of loopback.
        let out = run(cloud
            .gyre(&sandbox, &server)
            .env(var, "http://127.0.0.1:1")
            .args(["-p", "hi"]))
        .unwrap();
        assert_ne!(out.code, Some(0), "{cloud:?}");
        assert!(out.stderr.contains("connection refused"), "{}", out.stderr);
        assert!(out.stderr.contains(var), "{cloud:?}: {}", out.stderr);
        assert!(
            !out.stderr.contains("ANTHROPIC_API_KEY") && !out.stderr.contains("ANTHROPIC_BASE_URL"),
            "{cloud:?}: {}",
            out.stderr
        );
    }
}
