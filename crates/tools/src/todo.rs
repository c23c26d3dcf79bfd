//! TodoWrite: the model's task list for the session. Each call replaces the whole list;
//! the list lives in the tool (one per session) and, as the call's input, in the
//! transcript.

use std::borrow::Cow;
use std::sync::{Mutex, PoisonError};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// The state of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(transform = crate::schema::undocumented)]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (one task at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One task of the list. Its schema carries no descriptions (the tool's description
/// explains the fields): these docs are for readers of the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::schema::undocumented)]
pub struct Todo {
    /// What to do, imperative ("Run the tests").
    #[serde(deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub content: String,
    /// Where the task stands.
    pub status: TodoStatus,
    /// The same, as it is being done ("Running the tests").
    #[serde(rename = "activeForm", deserialize_with = "non_empty")]
    #[schemars(length(min = 1))]
    pub active_form: String,
}

/// A task's text: at least one character, as the schema's `minLength` says.
fn non_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let text = String::deserialize(deserializer)?;
    if text.is_empty() {
        return Err(serde::de::Error::invalid_length(
            0,
            &"at least one character",
        ));
    }
    Ok(text)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TodoInput {
    /// The updated todo list
    todos: Vec<Todo>,
}

/// The result the model reads after each update (Claude Code's wording).
const UPDATED: &str = "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable";

/// The TodoWrite tool, holding the session's current list.
#[derive(Debug, Default)]
pub struct TodoWriteTool {
    todos: Mutex<Vec<Todo>>,
}

impl TodoWriteTool {
    /// The list as last written.
    #[must_use]
    pub fn todos(&self) -> Vec<Todo> {
        self.todos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Tool for TodoWriteTool {
    fn name(&self) -> Cow<'static, str> {
        "TodoWrite".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Create and update a structured task list for the current session: it tracks progress on multi-step work and shows the user what is being done.\n\nUse it for tasks of three or more steps, or when the user gives several tasks. Each call sends the whole list. Mark a task in_progress before starting it (one at a time) and completed as soon as it is done; add tasks found along the way. Skip it for a single trivial step.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<TodoInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        let todos = input.get("todos").and_then(Value::as_array);
        for (i, todo) in todos.into_iter().flatten().enumerate() {
            for field in ["content", "activeForm"] {
                if todo
                    .get(field)
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.trim().is_empty())
                {
                    return Err(format!("todos[{i}].{field} must not be empty").into());
                }
            }
        }
        Ok(())
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        // Each call replaces the list: two at once would race.
        false
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        // Changes nothing outside the session (plan mode keeps it).
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
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
        crate::call_with_input(input, move |input: TodoInput| async move {
            *self.todos.lock().unwrap_or_else(PoisonError::into_inner) = input.todos;
            ToolOutput::ok(UPDATED)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Permissions, ToolCall, ToolRegistry, run_tool_call};
    use serde_json::json;
    use std::sync::Arc;

    async fn write(tool: &Arc<TodoWriteTool>, input: Value) -> ToolOutput {
        let registry = ToolRegistry::new().with(Arc::clone(tool) as Arc<dyn Tool>);
        let call = ToolCall::new("t1", "TodoWrite", input);
        let ctx = ToolContext::new(std::env::temp_dir());
        run_tool_call(&registry, &call, &ctx, &Permissions::default(), &|_| {})
            .await
            .output
    }

    #[tokio::test]
    async fn each_call_replaces_the_list() {
        let tool = Arc::new(TodoWriteTool::default());
        let first = json!({"todos": [
            {"content": "Run tests", "status": "in_progress", "activeForm": "Running tests"},
            {"content": "Fix lint", "status": "pending", "activeForm": "Fixing lint"}
        ]});
        let out = write(&tool, first).await;
        assert!(!out.is_error, "{out:?}");
        assert_eq!(out.content, UPDATED);
        assert_eq!(tool.todos().len(), 2);
        assert_eq!(tool.todos()[0].status, TodoStatus::InProgress);
        let second = json!({"todos": [
            {"content": "Run tests", "status": "completed", "activeForm": "Running tests"}
        ]});
        let _ = write(&tool, second).await;
        assert_eq!(
            tool.todos(),
            [Todo {
                content: "Run tests".to_owned(),
                status: TodoStatus::Completed,
                active_form: "Running tests".to_owned()
            }]
        );
    }

    #[tokio::test]
    async fn a_bad_status_or_an_empty_content_is_an_input_error_and_keeps_the_list() {
        let tool = Arc::new(TodoWriteTool::default());
        let bad = write(
            &tool,
            json!({"todos": [{"content": "x", "status": "done", "activeForm": "x"}]}),
        )
        .await;
        assert!(bad.is_error && bad.content.contains("`done`"), "{bad:?}");
        let empty = write(
            &tool,
            json!({"todos": [{"content": " ", "status": "pending", "activeForm": "x"}]}),
        )
        .await;
        assert!(empty.content.contains("todos[0].content"), "{empty:?}");
        assert!(tool.todos().is_empty());
    }
}
