//! Sub-agents end to end: the Agent tool runs one more query per call, in parallel, with
//! its own prompt and tools; a failing or interrupted one is an error result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

const REVIEWER_PROMPT: &str = "You review code and answer in one line.";

fn system_text(request: &Value) -> String {
    request["system"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn three_parallel_sub_agents_return_their_answers_and_one_failure_as_results() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(
            ".claude/agents/reviewer.md",
            &format!(
                "---\nname: reviewer\ndescription: Reviews code\ntools: Read\n---\n{REVIEWER_PROMPT}\n"
            ),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "find a", "prompt": "look for a", "subagent_type": "general-purpose"}),
        )
        .and_tool_use(
            "Agent",
            json!({"description": "find b", "prompt": "look for b"}),
        )
        .and_tool_use(
            "Task",
            json!({"description": "review", "prompt": "review it", "subagent_type": "reviewer"}),
        )
        .with_tokens(100, 10),
        // The three sub-agents ask at once; whichever comes third gets the error.
        Turn::text("answer one").with_tokens(1000, 100),
        Turn::text("answer two").with_tokens(1000, 100),
        Turn::http_error(400),
        Turn::text("all done").with_tokens(200, 10),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "investigate",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let result = out.result().unwrap();
    assert_eq!(result["result"], "all done");
    // The sub-agents' usage adds to the session's.
    assert_eq!(result["usage"]["input_tokens"], 2300, "{result}");

    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let parent_tools = tool_names(&requests[0].body);
    assert!(
        parent_tools.contains(&"Agent".to_owned()),
        "{parent_tools:?}"
    );
    let description = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap()["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        description.contains("- reviewer: Reviews code (Tools: Read)"),
        "{description}"
    );
    assert!(description.contains("- general-purpose:"), "{description}");

    // Each sub-agent has its own one-message history, its prompt and never the Agent tool.
    let mut prompts = BTreeSet::new();
    for sub in &requests[1..4] {
        let messages = sub.body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1, "{messages:?}");
        prompts.insert(
            messages[0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        let tools = tool_names(&sub.body);
        assert!(!tools.contains(&"Agent".to_owned()), "{tools:?}");
        let system = system_text(&sub.body);
        assert!(
            system.contains(&sandbox.project().display().to_string()),
            "{system}"
        );
        if system.starts_with(REVIEWER_PROMPT) {
            assert_eq!(tools, ["Read"]);
        } else {
            assert!(tools.contains(&"Bash".to_owned()), "{tools:?}");
        }
    }
    assert_eq!(
        prompts,
        BTreeSet::from(["look for a", "look for b", "review it"].map(str::to_owned))
    );

    // The parent's next request carries the three results, one of them an error.
    let messages = requests[4].body["messages"].as_array().unwrap();
    let results = messages.last().unwrap()["content"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    let errors: Vec<&Value> = results.iter().filter(|r| r["is_error"] == true).collect();
    assert_eq!(errors.len(), 1, "{results:?}");
    assert!(
        errors[0]["content"].to_string().contains("failed"),
        "{results:?}"
    );
    let answers: BTreeSet<String> = results
        .iter()
        .filter(|r| r["is_error"] != true)
        .map(|r| r["content"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        answers,
        BTreeSet::from(["answer one".to_owned(), "answer two".to_owned()])
    );

    // Sub-agent lines carry the id of the Agent call that ran them.
    let lines = out.lines().unwrap();
    let call_ids: BTreeSet<String> = lines[1]["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap().to_owned())
        .collect();
    let tagged: BTreeSet<String> = lines
        .iter()
        .filter_map(|l| l["parent_tool_use_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(tagged, call_ids);

    // Each sub-agent's transcript is a sidechain beside the session's.
    let session = sandbox.transcripts();
    assert_eq!(session.len(), 1);
    let dir = session[0].with_extension("").join("subagents");
    for id in &call_ids {
        let side = std::fs::read_to_string(dir.join(format!("agent-{id}.jsonl"))).unwrap();
        assert!(side.lines().count() >= 1, "{side}");
    }
}

#[test]
fn an_interrupted_sub_agent_is_an_error_result_and_the_session_ends() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "slow", "prompt": "take your time"}),
        ),
        Turn::text("never seen").delay(Duration::from_secs(60)),
    ]))
    .unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "go"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.request_count() < 2 {
        assert!(Instant::now() < deadline, "the sub-agent never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("gyre did not end after the interrupt");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(130));
    assert_eq!(server.request_count(), 2);

    // The transcript pairs the Agent call with an error result.
    let transcript = std::fs::read_to_string(&sandbox.transcripts()[0]).unwrap();
    let result = transcript
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|l| l["message"]["content"].as_array().cloned())
        .flatten()
        .find(|b| b["type"] == "tool_result")
        .expect("no tool_result in the transcript");
    assert_eq!(result["is_error"], true, "{result}");
}

/// The session's cost is priced in one place: a sub-agent on another model shows in
/// `modelUsage`, and `total_cost_usd` is the sum of its `costUSD`s.
#[test]
fn a_sub_agents_model_is_in_model_usage_and_the_total_is_their_sum() {
    let sandbox = Sandbox::new().unwrap();
    let agents = json!({"quick": {"description": "Answers quickly", "prompt": "Be quick.", "model": "haiku"}});
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "ask", "prompt": "what is 2+2", "subagent_type": "quick"}),
        )
        .with_tokens(1000, 100),
        Turn::text("4").with_tokens(50_000, 2_000),
        Turn::text("It is 4.").with_tokens(1200, 20),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--agents",
        &agents.to_string(),
        "--output-format",
        "json",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let result = out.result().unwrap();
    let usage = result["modelUsage"].as_object().unwrap();
    assert!(usage.contains_key("claude-haiku-4-5"), "{usage:?}");
    assert!(usage.contains_key("claude-sonnet-4-5"), "{usage:?}");
    assert_eq!(usage["claude-haiku-4-5"]["inputTokens"], 50_000);
    let sum: f64 = usage.values().map(|m| m["costUSD"].as_f64().unwrap()).sum();
    let total = result["total_cost_usd"].as_f64().unwrap();
    assert!((sum - total).abs() < 1e-9, "{sum} vs {total}");
    assert!(total > 0.0);
}
