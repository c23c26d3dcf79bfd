//! The tools without the loop: a registry with the built-in tools and one of your own,
//! calls run the way the model's are (schema check, permission, call), results printed.
//!
//! The custom tool's input schema is derived from the struct its `call` parses, so the
//! two cannot disagree; a call with a field the struct does not know is refused before
//! the tool runs.
//!
//! Run it with `cargo run -p gyre-tools --example custom_tool`.

use std::borrow::Cow;
use std::sync::Arc;

use gyre_tools::{
    BoxFuture, PermissionDecision, Permissions, ProgressFn, Tool, ToolCall, ToolContext,
    ToolOutput, ToolRegistry, call_with_input, run_tool_call,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The input of `LineCount`: its schema is derived from this struct.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LineCountInput {
    /// The absolute path to the file to count the lines of
    file_path: String,
}

/// Counts the lines of a file.
#[derive(Debug)]
struct LineCount;

impl Tool for LineCount {
    fn name(&self) -> Cow<'static, str> {
        "LineCount".into()
    }
    fn description(&self) -> Cow<'static, str> {
        "Counts the lines of a text file.".into()
    }
    fn input_schema(&self) -> Value {
        gyre_tools::schema::input_schema::<LineCountInput>()
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
        1_000
    }
    fn path_field(&self) -> Option<&'static str> {
        // The runner resolves it (symlinks included) before the permission check.
        Some("file_path")
    }
    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        call_with_input(input, |input: LineCountInput| async move {
            match std::fs::read_to_string(&input.file_path) {
                Ok(text) => ToolOutput::ok(format!("{} lines", text.lines().count())),
                Err(e) => ToolOutput::error(format!("{}: {e}", input.file_path)),
            }
        })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let project = tempfile::tempdir()?;
    let main_rs = project.path().join("main.rs");
    std::fs::write(&main_rs, "fn main() {\n    parse();\n}\n\nfn parse() {}\n")?;

    let registry = ToolRegistry::with_default_tools().with(Arc::new(LineCount));
    let ctx = ToolContext::new(project.path());
    // Default mode: reads inside the working directory are allowed; what needs a
    // question is refused, since no prompt is plugged in.
    let permissions = Permissions::default();
    let no_progress = |_| {};

    println!(
        "LineCount's schema: {}",
        registry
            .get("LineCount")
            .map(|t| t.input_schema())
            .unwrap_or_default()
    );

    let calls = [
        ToolCall::new(
            "toolu_1",
            "Grep",
            json!({"pattern": "fn \\w+", "output_mode": "content"}),
        ),
        ToolCall::new("toolu_2", "LineCount", json!({"file_path": "main.rs"})),
        ToolCall::new(
            "toolu_3",
            "LineCount",
            json!({"file_path": "main.rs", "encoding": "utf-8"}),
        ),
        ToolCall::new("toolu_4", "Bash", json!({"command": "rm main.rs"})),
    ];
    let mut outcomes = Vec::new();
    for call in &calls {
        let outcome = run_tool_call(&registry, call, &ctx, &permissions, &no_progress).await;
        let verdict = if outcome.output.is_error {
            "error"
        } else {
            "ok"
        };
        println!(
            "{} {}: {verdict}\n{}\n",
            call.name, call.input, outcome.output.content
        );
        outcomes.push(outcome);
    }

    assert!(outcomes[0].output.content.contains("fn parse() {}"));
    assert_eq!(outcomes[1].output.content, "5 lines");
    assert!(outcomes[2].output.content.contains("`encoding`"));
    assert!(
        outcomes[3].denial.is_some(),
        "Bash asks, and no one can answer"
    );
    assert!(main_rs.exists());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
