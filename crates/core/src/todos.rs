//! The session's todo list as TodoWrite last wrote it (`/todos`): read from the
//! conversation, so a resumed session shows it too.

use gyre_protocol::{ContentBlock, Message};
use gyre_tools::todo::Todo;

/// The `todos` of the last TodoWrite call in `messages` that succeeded; `None` when
/// there is none (or a compaction summarised it away).
#[must_use]
pub fn last_todo_list(messages: &[Message]) -> Option<Vec<Todo>> {
    let failed = |id: &str| {
        messages.iter().any(|m| {
            m.content.iter().any(|b| {
                matches!(b, ContentBlock::ToolResult { tool_use_id, is_error: true, .. }
                    if tool_use_id == id)
            })
        })
    };
    messages
        .iter()
        .rev()
        .flat_map(|m| m.tool_uses().collect::<Vec<_>>().into_iter().rev())
        .filter(|(id, name, _)| *name == "TodoWrite" && !failed(id))
        .find_map(|(_, _, input)| serde_json::from_value(input.get("todos")?.clone()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_last_successful_list_counts() {
        let write = |id: &str, task: &str| {
            Message::assistant(vec![ContentBlock::tool_use(
                id,
                "TodoWrite",
                json!({"todos": [{"content": task, "status": "pending", "activeForm": task}]}),
            )])
        };
        let result =
            |id: &str, error: bool| Message::user(vec![ContentBlock::tool_result(id, "ok", error)]);
        assert_eq!(last_todo_list(&[]), None);
        let messages = [
            write("a", "first"),
            result("a", false),
            write("b", "broken"),
            result("b", true),
        ];
        let todos = last_todo_list(&messages).unwrap();
        assert_eq!(todos.len(), 1);
        assert_eq!(todos[0].content, "first");
    }
}
