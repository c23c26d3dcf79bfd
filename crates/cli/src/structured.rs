//! `--json-schema`: structured output. The model gets a `StructuredOutput` tool whose
//! input schema is the caller's schema; a call with input that does not match is an
//! error result (the tool runner checks the schema), a matching one is kept and printed
//! as the result line's `structured_output`.

use std::sync::{Arc, Mutex, PoisonError};

use gyre_tools::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};
use serde_json::Value;

/// The tool's name, as Claude Code names it.
pub const NAME: &str = "StructuredOutput";

/// What the model reads in the system prompt when a schema is given.
pub const INSTRUCTION: &str = "When you have the final answer, call the StructuredOutput tool exactly once with it; its input must match the tool's schema.";

/// What the model is told when it ends a turn without the structured answer.
pub const MISSING: &str = "You ended without calling the StructuredOutput tool. Call it now with your final answer; its input must match the tool's schema.";

/// The last accepted structured output of the turn.
pub type Slot = Arc<Mutex<Option<Value>>>;

/// Takes the structured output out of `slot`.
#[must_use]
pub fn take(slot: &Slot) -> Option<Value> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

pub struct StructuredOutput {
    schema: Value,
    slot: Slot,
}

impl StructuredOutput {
    /// # Errors
    /// A schema that is not JSON, or not an object schema.
    pub fn from_flag(text: &str, slot: Slot) -> Result<Self, String> {
        let schema: Value = serde_json::from_str(text)
            .map_err(|e| format!("--json-schema is not valid JSON: {e}"))?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(
                "--json-schema must be an object schema ({\"type\":\"object\",\"properties\":…}): tool input is always an object"
                    .to_owned(),
            );
        }
        Ok(Self { schema, slot })
    }
}

impl Tool for StructuredOutput {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "Return the final answer as structured output matching the required schema. Call it once, at the end."
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        10_000
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            *self.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(input);
            ToolOutput::ok("Structured output provided successfully")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_must_be_an_object_schema() {
        let slot = Slot::default();
        assert!(StructuredOutput::from_flag(r#"{"type":"object"}"#, slot.clone()).is_ok());
        let err = StructuredOutput::from_flag(r#"{"type":"string"}"#, slot.clone())
            .err()
            .unwrap();
        assert!(err.contains("object schema"), "{err}");
        assert!(
            StructuredOutput::from_flag("{", slot)
                .err()
                .unwrap()
                .contains("not valid JSON")
        );
    }
}
