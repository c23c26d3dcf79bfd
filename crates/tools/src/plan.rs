//! ExitPlanMode: in plan mode the model presents its plan with this tool. The call goes
//! through the permission path like any other (plan mode asks for every tool that is not
//! read-only: the REPL asks the user, the SDK its `can_use_tool`, headless refuses unless
//! a rule allows `ExitPlanMode`); once approved, the session leaves plan mode.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use std::borrow::Cow;

use crate::{
    BoxFuture, ModeHandle, PermissionDecision, PermissionMode, ProgressFn, Tool, ToolContext,
    ToolInputError, ToolOutput,
};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExitPlanInput {
    /// The plan to run by the user for approval (Markdown)
    plan: String,
}

/// The ExitPlanMode tool, switching the session's shared mode when it runs.
#[derive(Debug, Clone)]
pub struct ExitPlanModeTool {
    mode: ModeHandle,
}

impl ExitPlanModeTool {
    /// A tool that switches `mode` (the session's [`crate::Permissions::mode_handle`]).
    #[must_use]
    pub fn new(mode: ModeHandle) -> Self {
        Self { mode }
    }
}

impl Tool for ExitPlanModeTool {
    fn name(&self) -> Cow<'static, str> {
        "ExitPlanMode".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Use this tool when you are in plan mode and have finished planning an implementation: it presents the plan (Markdown, concise) to the user for approval. Only use it for tasks that need writing code, not for research. If the plan is approved, plan mode ends and you may start making changes; if not, stay in plan mode and revise the plan with the feedback.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<ExitPlanInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        if self.mode.get() != PermissionMode::Plan {
            return Err(
                "You are not in plan mode: go ahead with the task without ExitPlanMode.".into(),
            );
        }
        match input.get("plan").and_then(Value::as_str) {
            Some(plan) if plan.trim().is_empty() => Err("plan must not be empty".into()),
            _ => Ok(()),
        }
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        // Leaving plan mode is what the user approves: plan mode asks for it.
        false
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: "the plan needs approval before plan mode ends".to_owned(),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        100_000
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        crate::call_with_input(input, move |input: ExitPlanInput| async move {
            // An approval that chose the next mode (the REPL's "auto-accept edits") has
            // set it already; otherwise approving leaves plan mode for the default.
            if self.mode.get() == PermissionMode::Plan {
                self.mode.set(PermissionMode::Default);
            }
            ToolOutput::ok(format!(
                "User has approved your plan. You can now start coding. Start with updating your todo list if applicable\n\n## Approved Plan:\n{}",
                input.plan
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{Permissions, ToolCall, ToolRegistry, run_tool_call};
    use serde_json::json;

    async fn exit(permissions: &Permissions) -> ToolOutput {
        let tool = ExitPlanModeTool::new(permissions.mode_handle());
        let registry = ToolRegistry::new().with(Arc::new(tool));
        let call = ToolCall::new("t1", "ExitPlanMode", json!({"plan": "1. edit\n2. test"}));
        let ctx = ToolContext::new(std::env::temp_dir());
        run_tool_call(&registry, &call, &ctx, permissions, &|_| {})
            .await
            .output
    }

    #[tokio::test]
    async fn unapproved_it_is_refused_and_plan_mode_stays() {
        let permissions = Permissions::new(PermissionMode::Plan);
        let out = exit(&permissions).await;
        assert!(out.is_error, "{out:?}");
        assert_eq!(permissions.mode(), PermissionMode::Plan);
    }

    #[tokio::test]
    async fn approved_by_a_rule_it_ends_plan_mode_and_returns_the_plan() {
        let permissions = Permissions::from_rules(
            PermissionMode::Plan,
            &["ExitPlanMode"],
            &[] as &[&str],
            &[] as &[&str],
        )
        .unwrap();
        let out = exit(&permissions).await;
        assert!(!out.is_error, "{out:?}");
        assert!(out.content.contains("1. edit\n2. test"), "{out:?}");
        assert_eq!(permissions.mode(), PermissionMode::Default);
        // Out of plan mode, the tool has nothing to do.
        let again = exit(&permissions).await;
        assert!(again.content.contains("not in plan mode"), "{again:?}");
    }

    /// Answers yes after switching the mode, as the REPL's "auto-accept edits" does.
    struct SwitchThenAllow(ModeHandle);

    impl crate::PermissionPrompt for SwitchThenAllow {
        fn ask<'a>(
            &'a self,
            _tool: &'a dyn Tool,
            _call: &'a ToolCall,
            _reason: &'a str,
            _always: &'a crate::PermissionRule,
        ) -> BoxFuture<'a, crate::PromptAnswer> {
            self.0.set(PermissionMode::AcceptEdits);
            Box::pin(async { crate::PromptAnswer::AllowOnce })
        }
    }

    #[tokio::test]
    async fn a_mode_chosen_with_the_approval_is_kept() {
        let permissions = Permissions::new(PermissionMode::Plan);
        let handle = permissions.mode_handle();
        let permissions = permissions.with_prompt(Arc::new(SwitchThenAllow(handle.clone())));
        let out = exit(&permissions).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(handle.get(), PermissionMode::AcceptEdits);
    }
}
