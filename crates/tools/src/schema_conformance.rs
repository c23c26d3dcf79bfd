//! The published input schema of every built-in tool against its input parser.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::{ModeHandle, PermissionMode, ToolRegistry};

/// Every built-in tool of this crate: the default registry plus ExitPlanMode.
fn registry() -> ToolRegistry {
    ToolRegistry::with_default_tools().with(Arc::new(crate::plan::ExitPlanModeTool::new(
        ModeHandle::new(PermissionMode::Plan),
    )))
}

#[test]
fn published_schemas_are_unchanged() {
    let schemas: serde_json::Map<String, Value> = registry()
        .iter()
        .map(|tool| (tool.name().to_owned(), tool.input_schema()))
        .collect();
    insta::assert_json_snapshot!("tool_input_schemas", json!(schemas));
}
