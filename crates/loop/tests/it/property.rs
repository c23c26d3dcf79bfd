//! Random model behaviours, random aborts: the loop always ends in a documented
//! terminal, every request it sends is correctly paired, and the transcript on disk
//! holds every message that was yielded.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::ApiError;
use gyre_loop::testing::*;
use gyre_loop::{EngineConfig, EngineEvent, JsonlTranscript, NoCompaction, QueryEngine};
use gyre_protocol::{ContentBlock, Message, StopReason};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Behaviour {
    Text,
    Tools(u8),
    MaxTokens,
    PromptTooLong,
    Overloaded,
    StreamCut,
    Thinking,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        2 => Just(Behaviour::Text),
        4 => (1u8..4).prop_map(Behaviour::Tools),
        1 => Just(Behaviour::MaxTokens),
        1 => Just(Behaviour::PromptTooLong),
        1 => Just(Behaviour::Overloaded),
        1 => Just(Behaviour::StreamCut),
        1 => Just(Behaviour::Thinking),
    ]
}

fn reply(b: &Behaviour, n: usize) -> Reply {
    match b {
        Behaviour::Text => text("done"),
        Behaviour::Tools(k) => response(
            (0..*k)
                .map(|i| {
                    ContentBlock::tool_use(format!("t{n}_{i}"), "Echo", json!({"n": n, "i": i}))
                })
                .collect(),
            StopReason::ToolUse,
        ),
        Behaviour::MaxTokens => max_tokens("cut off"),
        Behaviour::PromptTooLong => prompt_too_long(),
        Behaviour::Overloaded => {
            Reply::RetryThen(Box::new(tool(&format!("o{n}"), "Echo", json!({}))))
        }
        Behaviour::StreamCut => Reply::Error(ApiError::StreamCut { events: 3 }),
        Behaviour::Thinking => response(
            vec![
                ContentBlock::thinking("hmm", "sig"),
                ContentBlock::tool_use(format!("th{n}"), "Echo", json!({})),
            ],
            StopReason::ToolUse,
        ),
    }
}

fn run_case(behaviours: &[Behaviour], abort_after: Option<usize>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let model = FakeModel::new(behaviours.iter().enumerate().map(|(n, b)| reply(b, n)));
        let path = dir.path().join("s.jsonl");
        let mut engine = QueryEngine::new(
            EngineConfig {
                session_id: "prop".into(),
                cwd: dir.path().to_path_buf(),
                model: "fake-model".into(),
                fallback_model: None,
                system: Vec::new(),
                max_turns: Some(12),
                max_budget_usd: None,
                max_output_tokens: None,
                token_budget: None,
            },
            Arc::clone(&model) as Arc<dyn gyre_loop::QueryDeps>,
            registry(),
            gyre_tools::ToolContext::new(dir.path()),
            Arc::new(AllowAll),
            Box::new(NoCompaction),
            Box::new(JsonlTranscript::open(path.clone()).unwrap()),
        );
        let interrupt = engine.interrupt_handle();
        let mut yielded: Vec<Message> = Vec::new();
        let mut result = None;
        {
            let events = engine.submit_message(vec![ContentBlock::text("go")]);
            futures::pin_mut!(events);
            let mut count = 0;
            while let Some(event) = events.next().await {
                count += 1;
                if Some(count) == abort_after {
                    interrupt.interrupt();
                }
                match event {
                    EngineEvent::Message { message, .. } => yielded.push(message),
                    EngineEvent::Result(r) => result = Some(r),
                    EngineEvent::Loop(_)
                    | EngineEvent::Subagent { .. }
                    | EngineEvent::SubagentProgress(_) => {}
                }
            }
        }
        let result = result.expect("a result");
        // A documented terminal, reported once.
        let name = result.terminal.reason.name();
        assert!(
            [
                "completed",
                "aborted_streaming",
                "aborted_tools",
                "max_turns",
                "model_error",
                "prompt_too_long",
            ]
            .contains(&name),
            "{name}"
        );
        // Every request is paired.
        assert_paired(&model.requests());
        // The transcript holds every yielded message, in order.
        let on_disk: Vec<Message> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<gyre_loop::TranscriptEntry>(l).unwrap())
            .filter_map(|e| e.message.map(|m| m.message))
            .collect();
        assert_eq!(on_disk, yielded);
        // And the history it leaves is one the API accepts.
        let mut repaired = engine.messages().to_vec();
        assert_eq!(
            gyre_loop::repair_pairing(&mut repaired),
            0,
            "engine history needed repair"
        );
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn any_fault_sequence_ends_documented_paired_and_persisted(
        behaviours in prop::collection::vec(behaviour(), 1..10),
        abort_after in prop::option::weighted(0.3, 1usize..40),
    ) {
        run_case(&behaviours, abort_after);
    }
}
