//! One tool call, start to finish.

use gyre_protocol::{ContentBlock, ToolResultContent, ToolResultPart};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::InputCheck;
use crate::{
    CanUseTool, INTERRUPTED_MESSAGE, PermissionDecision, ProgressFn, Tool, ToolCall, ToolContext,
    ToolOutput, ToolRegistry,
};

/// A call the permission policy refused, as reported in the result's
/// `permission_denials`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionDenial {
    /// The tool that was refused.
    pub tool_name: String,
    /// The id of the refused call.
    pub tool_use_id: String,
    /// The input it would have run with.
    pub tool_input: Value,
}

/// The finished call: its result and, when refused, the denial.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOutcome {
    /// The id of the call this answers.
    pub tool_use_id: String,
    /// The tool that was called.
    pub tool_name: String,
    /// The input as the model wrote it.
    pub input: Value,
    /// The `tool_result` to send back.
    pub output: ToolOutput,
    /// `Some` when the permission policy refused the call.
    pub denial: Option<PermissionDenial>,
}

impl ToolCallOutcome {
    /// An outcome for `call` with `output` and no denial.
    #[must_use]
    pub fn new(call: &ToolCall, output: ToolOutput) -> Self {
        Self {
            tool_use_id: call.id.clone(),
            tool_name: call.name.clone(),
            input: call.input.clone(),
            output,
            denial: None,
        }
    }

    /// The `tool_result` block answering the call: its text, or its text and images
    /// as parts.
    #[must_use]
    pub fn to_block(&self) -> ContentBlock {
        let output = &self.output;
        let content = if output.images.is_empty() {
            ToolResultContent::from(output.content.as_str())
        } else {
            let text = (!output.content.is_empty()).then(|| ToolResultPart::Text {
                text: output.content.clone(),
            });
            let images = output.images.iter().map(|source| ToolResultPart::Image {
                source: source.clone(),
            });
            ToolResultContent::Parts(text.into_iter().chain(images).collect())
        };
        ContentBlock::tool_result(self.tool_use_id.clone(), content, output.is_error)
    }
}

/// Runs one call: unknown tool, schema and input validation, path resolution,
/// permission, then the tool. Every failure is an `is_error` outcome.
pub async fn run_tool_call(
    registry: &ToolRegistry,
    call: &ToolCall,
    ctx: &ToolContext,
    can_use: &dyn CanUseTool,
    progress: &ProgressFn,
) -> ToolCallOutcome {
    let Some((tool, check)) = registry.get_checked(&call.name) else {
        return ToolCallOutcome::new(
            call,
            ToolOutput::tool_use_error(format_args!(
                "Error: No such tool available: {}",
                call.name
            )),
        );
    };
    let input = match checked_input(tool.as_ref(), check, &call.name, &call.input, ctx) {
        Ok(input) => input,
        Err(output) => return ToolCallOutcome::new(call, output),
    };
    // A call by an alias (`toolAliases`) is judged and run as the tool it names.
    let resolved_call = ToolCall {
        id: call.id.clone(),
        name: registry.resolve_alias(&call.name).to_owned(),
        input,
    };

    let verdict = can_use
        .can_use_tool_with_input(tool.as_ref(), &resolved_call, ctx)
        .await;
    match verdict.decision {
        PermissionDecision::Allow => {}
        PermissionDecision::Deny { reason } | PermissionDecision::Ask { reason } => {
            // Nobody to ask at this point: an unanswered question is a refusal.
            return ToolCallOutcome {
                denial: Some(PermissionDenial {
                    tool_name: call.name.clone(),
                    tool_use_id: call.id.clone(),
                    tool_input: call.input.clone(),
                }),
                ..ToolCallOutcome::new(call, ToolOutput::error(reason))
            };
        }
    }
    // The permission's own input (an SDK's or a hook's `updatedInput`) passes the same
    // checks as the model's.
    let input = match verdict.updated_input {
        Some(updated) => match checked_input(tool.as_ref(), check, &call.name, &updated, ctx) {
            Ok(input) => input,
            Err(output) => return ToolCallOutcome::new(call, output),
        },
        None => resolved_call.input,
    };
    if ctx.cancel.is_cancelled() {
        return ToolCallOutcome::new(call, ToolOutput::error(INTERRUPTED_MESSAGE));
    }
    let ctx = ToolContext {
        tool_use_id: Some(call.id.clone()),
        ..ctx.clone()
    };
    let output = tool.call(input, &ctx, progress).await;
    ToolCallOutcome::new(call, output)
}

/// The schema and the tool's own checks, then the path field resolved: the input the
/// permission check sees and the tool runs with. A failure is the `<tool_use_error>`.
fn checked_input(
    tool: &dyn Tool,
    check: &InputCheck,
    name: &str,
    input: &Value,
    ctx: &ToolContext,
) -> Result<Value, ToolOutput> {
    let issues = check.issues(input);
    if !issues.is_empty() {
        let plural = if issues.len() == 1 { "issue" } else { "issues" };
        return Err(ToolOutput::tool_use_error(format_args!(
            "InputValidationError: {name} failed due to the following {plural}:\n{}",
            issues.join("\n")
        )));
    }
    tool.validate_input(input, ctx)
        .map_err(ToolOutput::tool_use_error)?;
    let mut input = input.clone();
    if let Some(field) = tool.path_field() {
        let raw = input.get(field).and_then(Value::as_str).unwrap_or(".");
        let resolved = ctx.resolve(raw).display().to_string();
        if let Some(object) = input.as_object_mut() {
            object.insert(field.to_owned(), Value::String(resolved));
        }
    }
    Ok(input)
}
