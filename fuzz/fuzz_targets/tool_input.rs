//! Arbitrary JSON as the input of every built-in tool: `validate_input` and the whole of
//! `run_tool_call` (schema check, path resolution, permission) in a scratch directory,
//! with a `CanUseTool` that refuses everything, so no tool ever runs. Nothing may panic,
//! and every refusal must be an error result.
#![no_main]

use std::sync::OnceLock;

use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, Tool, ToolCall, ToolContext, ToolRegistry,
    run_tool_call,
};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

struct DenyAll;

impl CanUseTool for DenyAll {
    fn can_use_tool<'a>(
        &'a self,
        _tool: &'a dyn Tool,
        _call: &'a ToolCall,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async {
            PermissionDecision::Deny {
                reason: "fuzzing: nothing runs".to_owned(),
            }
        })
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    registry: ToolRegistry,
    runtime: tokio::runtime::Runtime,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").expect("seed file");
        let ctx = ToolContext::new(dir.path().canonicalize().expect("canonical temp dir"));
        Fixture {
            _dir: dir,
            ctx,
            registry: ToolRegistry::with_default_tools(),
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("runtime"),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, json)) = data.split_first() else {
        return;
    };
    let Ok(input) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let f = fixture();
    let tools: Vec<_> = f.registry.iter().cloned().collect();
    let tool = &tools[usize::from(selector) % tools.len()];
    let _ = tool.validate_input(&input, &f.ctx);
    let _ = tool.is_concurrency_safe(&input);
    let _ = tool.is_read_only(&input);
    let call = ToolCall::new("toolu_fuzz", tool.name(), input);
    let outcome = f
        .runtime
        .block_on(run_tool_call(&f.registry, &call, &f.ctx, &DenyAll, &|_| {}));
    assert!(outcome.output.is_error, "a call ran past a deny-all policy");
    assert_eq!(outcome.tool_use_id, "toolu_fuzz");
});
