//! The Agent tool through the loop's public API, with the shared fakes: sub-agents run
//! at once, each in its own context, report to the session's channel, and end as an
//! error result when aborted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use gyre_loop::testing as support;
use gyre_loop::testing::{FakeModel, Reply, collect, params, response, text, tool};
use gyre_loop::{
    AgentCatalog, AgentSetup, AgentTool, LoopEvent, SubagentEvent, SubagentState, general_purpose,
    subagent_channel,
};
use gyre_protocol::{ContentBlock, StopReason};
use gyre_tools::{
    AllowAll, BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput,
    ToolRegistry,
};
use serde_json::{Value, json};

/// Returns once `n` calls are inside it at the same time: sub-agents that ran one
/// after another would never get past it.
struct Barrier(tokio::sync::Barrier);

impl Tool for Barrier {
    fn name(&self) -> Cow<'static, str> {
        "Barrier".into()
    }
    fn description(&self) -> Cow<'static, str> {
        "waits for the others".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn validate_input(&self, _: &Value, _: &ToolContext) -> Result<(), gyre_tools::ToolInputError> {
        Ok(())
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        true
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn check_permissions(&self, _: &Value, _: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        100
    }
    fn call<'a>(
        &'a self,
        _: Value,
        _: &'a ToolContext,
        _: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            self.0.wait().await;
            ToolOutput::ok("all here")
        })
    }
}

fn agent_call(id: &str, prompt: &str) -> ContentBlock {
    ContentBlock::tool_use(
        id,
        "Agent",
        json!({"description": prompt, "prompt": prompt}),
    )
}

fn setup(model: Arc<FakeModel>, tools: ToolRegistry, definitions: AgentCatalog) -> AgentSetup {
    AgentSetup {
        definitions,
        tools,
        deps: model,
        can_use_tool: Arc::new(AllowAll),
        model: "fake-model".into(),
        max_turns: 10,
        session_id: "s".into(),
        sidechain_dir: None,
        hook: None,
        append_system_prompt: None,
    }
}

fn with_agents(
    model: Arc<FakeModel>,
    tools: ToolRegistry,
) -> (gyre_loop::QueryParams, gyre_loop::SubagentEvents) {
    let (tx, rx) = subagent_channel();
    let catalog = AgentCatalog::new(vec![general_purpose()]);
    let setup = setup(Arc::clone(&model), tools.clone(), catalog);
    let mut p = params(model);
    p.tools = Arc::new(tools.with(Arc::new(AgentTool::new(setup, tx))));
    (p, rx)
}

fn tool_results(events: &[LoopEvent]) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for event in events {
        let LoopEvent::Message { message, .. } = event else {
            continue;
        };
        for block in &message.content {
            if let ContentBlock::ToolResult {
                content, is_error, ..
            } = block
            {
                out.push((format!("{content:?}"), *is_error));
            }
        }
    }
    out
}

#[tokio::test]
async fn three_sub_agents_run_at_once_each_in_its_own_context() {
    let model = FakeModel::new([
        response(
            vec![
                agent_call("a1", "one"),
                agent_call("a2", "two"),
                agent_call("a3", "three"),
            ],
            StopReason::ToolUse,
        ),
        tool("b", "Barrier", json!({})),
        tool("b", "Barrier", json!({})),
        tool("b", "Barrier", json!({})),
        text("done x"),
        text("done y"),
        text("done z"),
        text("all done"),
    ]);
    let tools = ToolRegistry::new().with(Arc::new(Barrier(tokio::sync::Barrier::new(3))));
    let (p, mut rx) = with_agents(Arc::clone(&model), tools);
    // Only a broken run waits here: sequential sub-agents never pass the barrier.
    let events = tokio::time::timeout(Duration::from_secs(60), collect(p))
        .await
        .expect("the sub-agents did not run at once");
    let results = tool_results(&events);
    let agent_results: Vec<&(String, bool)> = results
        .iter()
        .filter(|(c, _)| c.contains("done "))
        .collect();
    assert_eq!(agent_results.len(), 3, "{results:?}");
    assert!(agent_results.iter().all(|(_, is_error)| !is_error));

    // Each sub-agent's first request holds only its own prompt, and no Agent tool.
    let requests = model.requests();
    for sub in &requests[1..4] {
        assert_eq!(sub.messages.len(), 1);
        assert!(sub.tools.iter().all(|t| t.name != "Agent"));
    }
    let mut parents = std::collections::BTreeSet::new();
    let mut usage_events = 0;
    let mut newest = std::collections::BTreeMap::new();
    while let Ok(event) = rx.try_recv() {
        match event {
            SubagentEvent::Message {
                parent_tool_use_id, ..
            } => {
                parents.insert(parent_tool_use_id);
            }
            SubagentEvent::Usage { .. } => usage_events += 1,
            SubagentEvent::Progress(progress) => {
                newest.insert(progress.parent_tool_use_id.clone(), progress);
            }
        }
    }
    assert_eq!(parents, ["a1", "a2", "a3"].map(String::from).into());
    assert_eq!(usage_events, 6);
    // Each sub-agent's newest progress: done, after its one Barrier call.
    assert_eq!(newest.len(), 3);
    for progress in newest.values() {
        assert_eq!(progress.state, SubagentState::Done, "{progress:?}");
        assert_eq!(progress.tool_uses, 1, "{progress:?}");
        assert_eq!(
            progress.last_tool.as_ref().map(|(name, _)| name.as_str()),
            Some("Barrier")
        );
    }
}

#[tokio::test]
async fn an_aborted_sub_agent_ends_as_an_error_and_the_parent_ends() {
    let model = FakeModel::new([
        response(vec![agent_call("a1", "slow")], StopReason::ToolUse),
        Reply::HangAfter(Vec::new()),
    ]);
    let (p, mut rx) = with_agents(Arc::clone(&model), ToolRegistry::new());
    let cancel = p.cancel.clone();
    let watcher = Arc::clone(&model);
    tokio::spawn(async move {
        while watcher.requests().len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        cancel.cancel();
    });
    let events = tokio::time::timeout(Duration::from_secs(60), collect(p))
        .await
        .expect("the parent is stuck");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].1, "{results:?}");
    assert!(support::terminal(&events).reason.is_error());
    // The UI hears that it failed, not that it still runs.
    let mut newest = None;
    while let Ok(event) = rx.try_recv() {
        if let SubagentEvent::Progress(progress) = event {
            newest = Some(progress.state);
        }
    }
    assert!(
        matches!(newest, Some(SubagentState::Failed(_))),
        "{newest:?}"
    );
}

#[test]
fn the_description_lists_agents_added_after_the_tool_was_made() {
    let (tx, _rx) = subagent_channel();
    let catalog = AgentCatalog::new(vec![general_purpose()]);
    let agent = AgentTool::new(
        setup(FakeModel::new([]), ToolRegistry::new(), catalog.clone()),
        tx,
    );
    assert!(!agent.description().contains("- tester:"));
    catalog.add(
        gyre_loop::parse_agents_json(r#"{"tester": {"description": "runs tests", "prompt": "p"}}"#)
            .unwrap(),
    );
    assert!(agent.description().contains("- tester: runs tests"));
}
