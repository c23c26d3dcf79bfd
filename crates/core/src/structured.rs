//! `--json-schema`: structured output. The model gets a `StructuredOutput` tool whose
//! input schema is the caller's schema; a call with input that does not match the whole
//! schema (checked with the `jsonschema` crate: every keyword of the schema's draft,
//! local `$ref`s; nothing is fetched) is an error result naming each problem, a matching
//! one is kept and printed as the result line's `structured_output`.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use gyre_tools::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};
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

/// A `--json-schema` that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SchemaFlagError {
    /// The text is not JSON.
    #[error("--json-schema is not valid JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// A schema whose `type` is not `object`: a tool's input always is one.
    #[error(
        "--json-schema must be an object schema ({{\"type\":\"object\",\"properties\":…}}): tool input is always an object"
    )]
    NotObjectSchema,
    /// Not a valid JSON Schema (a `$ref` to another document included).
    #[error("--json-schema is not a valid JSON Schema: {0}")]
    Invalid(#[source] Box<jsonschema::ValidationError<'static>>),
}

/// Problems listed in one error result; the rest are counted.
const MAX_LISTED_PROBLEMS: usize = 10;

pub struct StructuredOutput {
    schema: Value,
    validator: jsonschema::Validator,
    slot: Slot,
}

impl std::fmt::Debug for StructuredOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredOutput")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl StructuredOutput {
    /// # Errors
    /// A schema that is not JSON, not an object schema, or not a valid JSON Schema
    /// (a `$ref` to another document included: nothing is fetched).
    pub fn from_flag(text: &str, slot: Slot) -> Result<Self, SchemaFlagError> {
        let schema: Value = serde_json::from_str(text).map_err(SchemaFlagError::NotJson)?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaFlagError::NotObjectSchema);
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| SchemaFlagError::Invalid(Box::new(e)))?;
        Ok(Self {
            schema,
            validator,
            slot,
        })
    }

    /// Each way `input` fails the schema, as `<path>: <problem>` (the path is a JSON
    /// pointer into the input, `(root)` for the input itself).
    fn problems(&self, input: &Value) -> Vec<String> {
        self.validator
            .iter_errors(input)
            .map(|e| {
                let path = e.instance_path().as_str();
                let path = if path.is_empty() { "(root)" } else { path };
                format!("{path}: {e}")
            })
            .collect()
    }
}

impl Tool for StructuredOutput {
    fn name(&self) -> Cow<'static, str> {
        NAME.into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Return the final answer as structured output matching the required schema. Call it once, at the end.".into()
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    /// The whole schema, beyond the runner's own check of types and required fields.
    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        let problems = self.problems(input);
        if problems.is_empty() {
            return Ok(());
        }
        let listed = problems.len().min(MAX_LISTED_PROBLEMS);
        let mut message = format!(
            "InputValidationError: the {NAME} input does not match the required schema:\n- {}",
            problems[..listed].join("\n- ")
        );
        if problems.len() > listed {
            message.push_str(&format!("\n… and {} more", problems.len() - listed));
        }
        message.push_str(&format!(
            "\nCall {NAME} again with input that matches the schema."
        ));
        Err(message.into())
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

    fn tool(schema: &Value) -> StructuredOutput {
        StructuredOutput::from_flag(&schema.to_string(), Slot::default()).unwrap()
    }

    #[test]
    fn every_keyword_of_the_schema_is_checked_and_each_problem_named() {
        let t = tool(&serde_json::json!({
            "type": "object",
            "properties": {
                "answer": {"type": "integer", "minimum": 0, "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"},
                         "minItems": 1, "uniqueItems": true},
                "unit": {"$ref": "#/$defs/unit"}
            },
            "required": ["answer", "tags"],
            "additionalProperties": false,
            "$defs": {"unit": {"enum": ["cm", "m"]}}
        }));
        let ctx = ToolContext::new(".");
        let good = serde_json::json!({"answer": 42, "tags": ["ok"], "unit": "m"});
        assert_eq!(t.validate_input(&good, &ctx), Ok(()));
        let bad = serde_json::json!({"answer": 420, "tags": ["ok", "ok", "No"], "unit": "km"});
        let err = t.validate_input(&bad, &ctx).unwrap_err().to_string();
        assert!(err.starts_with("InputValidationError"), "{err}");
        for (path, what) in [
            ("/answer", "420 is greater than the maximum of 100"),
            ("/tags", "has non-unique elements"),
            ("/tags/2", "\"No\" does not match \"^[a-z]+$\""),
            ("/unit", "\"km\" is not one of"),
        ] {
            assert!(
                err.lines()
                    .any(|l| l.starts_with(&format!("- {path}: ")) && l.contains(what)),
                "{path} {what}: {err}"
            );
        }
        let extra = serde_json::json!({"answer": 1, "tags": ["a"], "note": "hi"});
        let err = t.validate_input(&extra, &ctx).unwrap_err().to_string();
        assert!(
            err.contains("- (root): ") && err.contains("'note'"),
            "{err}"
        );
    }

    #[test]
    fn a_schema_that_is_not_json_schema_or_refers_elsewhere_is_refused() {
        let refused = |schema: Value| {
            StructuredOutput::from_flag(&schema.to_string(), Slot::default())
                .err()
                .unwrap()
                .to_string()
        };
        let err =
            refused(serde_json::json!({"type": "object", "properties": {"a": {"type": "integr"}}}));
        assert!(err.contains("not a valid JSON Schema"), "{err}");
        let err = refused(serde_json::json!({"type": "object",
            "properties": {"a": {"$ref": "https://example.com/a.json"}}}));
        assert!(err.contains("not a valid JSON Schema"), "{err}");
    }

    #[test]
    fn the_schema_must_be_an_object_schema() {
        let slot = Slot::default();
        assert!(StructuredOutput::from_flag(r#"{"type":"object"}"#, slot.clone()).is_ok());
        let err = StructuredOutput::from_flag(r#"{"type":"string"}"#, slot.clone())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("object schema"), "{err}");
        assert!(
            StructuredOutput::from_flag("{", slot)
                .err()
                .unwrap()
                .to_string()
                .contains("not valid JSON")
        );
    }
}
