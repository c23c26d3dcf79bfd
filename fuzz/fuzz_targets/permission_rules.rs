//! Permission rules as flags and settings files spell them: `PermissionRule::from_str`
//! and `parse_rule_list` never panic; a parsed rule prints back to a rule that parses to
//! itself; and a policy built from it can judge calls without panicking.
#![no_main]

use std::sync::OnceLock;

use gyre_tools::permissions::parse_rule_list;
use gyre_tools::{
    PermissionMode, PermissionRule, Permissions, ToolCall, ToolContext, ToolRegistry,
};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn registry() -> &'static ToolRegistry {
    static REGISTRY: OnceLock<ToolRegistry> = OnceLock::new();
    REGISTRY.get_or_init(ToolRegistry::with_default_tools)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(rule) = text.parse::<PermissionRule>() {
        let printed = rule.to_string();
        let again: PermissionRule = printed
            .parse()
            .unwrap_or_else(|e| panic!("{printed:?} (from {text:?}) does not parse: {e}"));
        assert_eq!(
            again, rule,
            "{text:?} does not round-trip through {printed:?}"
        );
    }
    let Ok(rules) = parse_rule_list(text) else {
        return;
    };
    let ctx = ToolContext::new("/nonexistent-gyre-fuzz/project");
    let calls = [
        ToolCall::new("t1", "Bash", json!({"command": text})),
        ToolCall::new("t2", "Read", json!({"file_path": text})),
        ToolCall::new(
            "t3",
            "Edit",
            json!({"file_path": "/nonexistent-gyre-fuzz/project/src/a.rs", "old_string": "a", "new_string": "b"}),
        ),
        ToolCall::new("t4", "Grep", json!({"pattern": "x", "path": text})),
    ];
    for mode in [PermissionMode::Default, PermissionMode::BypassPermissions] {
        let allow = Permissions::new(mode).with_allow(rules.iter().cloned());
        let deny = Permissions::new(mode).with_deny(rules.iter().cloned());
        for call in &calls {
            let Some(tool) = registry().get(&call.name) else {
                continue;
            };
            let _ = allow.evaluate(tool.as_ref(), call, &ctx);
            let _ = deny.evaluate(tool.as_ref(), call, &ctx);
        }
    }
});
