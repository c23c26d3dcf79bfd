//! What a session's events look like to an editor: `session/update` notifications.
//!
//! Pure functions from gyre's tool calls, messages and stream events to ACP's
//! [`acp::SessionUpdate`]s, so the same text is used live (a turn) and when a session is
//! loaded (its history replayed).

use std::path::PathBuf;

use agent_client_protocol as acp;
use gyre_protocol::{ContentBlock, ContentDelta, Message, Role, StreamEvent, ToolResultContent};
use gyre_tools::todo::{Todo, TodoStatus};
use serde::Deserialize;
use serde_json::Value;

/// The tool TodoWrite: its list is the session's plan, not a tool call.
pub const TODO_WRITE: &str = "TodoWrite";

/// What kind of work a gyre tool does, as ACP names it (editors pick icons by it).
#[must_use]
pub fn tool_kind(tool: &str) -> acp::ToolKind {
    match tool {
        "Read" | "NotebookRead" => acp::ToolKind::Read,
        "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => acp::ToolKind::Edit,
        "Bash" | "BashOutput" | "KillShell" => acp::ToolKind::Execute,
        "Grep" | "Glob" | "LS" => acp::ToolKind::Search,
        "WebFetch" | "WebSearch" => acp::ToolKind::Fetch,
        "Agent" | "Task" => acp::ToolKind::Think,
        "ExitPlanMode" => acp::ToolKind::SwitchMode,
        _ => acp::ToolKind::Other,
    }
}

fn str_field<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// A one-line title for a call: the tool and what it works on.
#[must_use]
pub fn tool_title(tool: &str, input: &Value) -> String {
    let subject = match tool {
        "Read" | "Edit" | "MultiEdit" | "Write" => str_field(input, "file_path"),
        "Bash" => str_field(input, "description").or_else(|| str_field(input, "command")),
        "Grep" | "Glob" => str_field(input, "pattern"),
        "WebFetch" => str_field(input, "url"),
        "WebSearch" => str_field(input, "query"),
        "Agent" | "Task" => str_field(input, "description"),
        _ => None,
    };
    match subject {
        Some(s) => format!("{tool} {s}"),
        None => tool.to_owned(),
    }
}

/// The files a call touches, so an editor can follow along.
#[must_use]
pub fn tool_locations(tool: &str, input: &Value) -> Vec<acp::ToolCallLocation> {
    let path = match tool {
        "Read" | "Edit" | "MultiEdit" | "Write" | "NotebookEdit" => str_field(input, "file_path"),
        "Grep" | "Glob" => str_field(input, "path"),
        _ => None,
    };
    let Some(path) = path else {
        return Vec::new();
    };
    let mut location = acp::ToolCallLocation::new(PathBuf::from(path));
    if tool == "Read"
        && let Some(offset) = input.get("offset").and_then(Value::as_u64)
    {
        location = location.line(u32::try_from(offset).ok());
    }
    vec![location]
}

/// The change an edit makes, as a diff the editor shows: Edit's old and new strings,
/// Write's whole new text.
#[must_use]
pub fn tool_diff(tool: &str, input: &Value) -> Vec<acp::ToolCallContent> {
    let Some(path) = str_field(input, "file_path") else {
        return Vec::new();
    };
    let diff = match tool {
        "Edit" => match (
            str_field(input, "old_string"),
            str_field(input, "new_string"),
        ) {
            (Some(old), Some(new)) => {
                acp::Diff::new(PathBuf::from(path), new).old_text(old.to_owned())
            }
            _ => return Vec::new(),
        },
        "Write" => match str_field(input, "content") {
            Some(content) => acp::Diff::new(PathBuf::from(path), content),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    vec![acp::ToolCallContent::Diff(diff)]
}

/// A call as it starts: kind, title, locations, its input, and the diff of an edit.
#[must_use]
pub fn tool_call(
    id: &str,
    tool: &str,
    input: &Value,
    status: acp::ToolCallStatus,
) -> acp::ToolCall {
    acp::ToolCall::new(id.to_owned(), tool_title(tool, input))
        .kind(tool_kind(tool))
        .status(status)
        .locations(tool_locations(tool, input))
        .content(tool_diff(tool, input))
        .raw_input(input.clone())
}

/// The fields of a call's update that describe the call itself (for a permission
/// question about it).
#[must_use]
pub fn tool_call_fields(tool: &str, input: &Value) -> acp::ToolCallUpdateFields {
    acp::ToolCallUpdateFields::new()
        .kind(tool_kind(tool))
        .title(tool_title(tool, input))
        .locations(tool_locations(tool, input))
        .content(tool_diff(tool, input))
        .raw_input(input.clone())
}

/// A call's end: completed with its output, or failed with why.
#[must_use]
pub fn tool_result(
    tool_use_id: &str,
    content: &ToolResultContent,
    is_error: bool,
) -> acp::ToolCallUpdate {
    let status = if is_error {
        acp::ToolCallStatus::Failed
    } else {
        acp::ToolCallStatus::Completed
    };
    let text = content.text();
    acp::ToolCallUpdate::new(
        tool_use_id.to_owned(),
        acp::ToolCallUpdateFields::new()
            .status(status)
            .content(vec![acp::ToolCallContent::from(text.clone())])
            .raw_output(Value::String(text)),
    )
}

/// A running call's output so far (a command's, as it grows).
#[must_use]
pub fn tool_output(tool_use_id: &str, so_far: &str) -> acp::ToolCallUpdate {
    acp::ToolCallUpdate::new(
        tool_use_id.to_owned(),
        acp::ToolCallUpdateFields::new()
            .status(acp::ToolCallStatus::InProgress)
            .content(vec![acp::ToolCallContent::from(so_far.to_owned())]),
    )
}

#[derive(Deserialize)]
struct TodoInput {
    todos: Vec<Todo>,
}

/// TodoWrite's list as the session's plan; `None` when the input is not a list (the
/// tool reports that to the model).
#[must_use]
pub fn plan(input: &Value) -> Option<acp::Plan> {
    let todos = TodoInput::deserialize(input).ok()?.todos;
    let entries = todos
        .into_iter()
        .map(|todo| {
            let status = match todo.status {
                TodoStatus::Pending => acp::PlanEntryStatus::Pending,
                TodoStatus::InProgress => acp::PlanEntryStatus::InProgress,
                TodoStatus::Completed => acp::PlanEntryStatus::Completed,
            };
            acp::PlanEntry::new(todo.content, acp::PlanEntryPriority::Medium, status)
        })
        .collect();
    Some(acp::Plan::new(entries))
}

fn text_chunk(text: &str) -> acp::ContentChunk {
    acp::ContentChunk::new(acp::ContentBlock::from(text.to_owned()))
}

/// A live stream event as a chunk of the answer or of the thinking; other events carry
/// nothing an editor shows.
#[must_use]
pub fn stream_chunk(event: &StreamEvent) -> Option<acp::SessionUpdate> {
    let StreamEvent::ContentBlockDelta { delta, .. } = event else {
        return None;
    };
    match delta {
        ContentDelta::TextDelta { text } => {
            Some(acp::SessionUpdate::AgentMessageChunk(text_chunk(text)))
        }
        ContentDelta::ThinkingDelta { thinking } => {
            Some(acp::SessionUpdate::AgentThoughtChunk(text_chunk(thinking)))
        }
        // A call's input shows whole when the call starts; signatures and citations
        // are not shown.
        ContentDelta::InputJsonDelta { .. }
        | ContentDelta::SignatureDelta { .. }
        | ContentDelta::CitationsDelta { .. }
        | ContentDelta::Other(_) => None,
    }
}

/// A message of the history, replayed as the updates it caused when it was live: the
/// user's text, the answer and its thinking, each call and its result.
#[must_use]
pub fn replay(message: &Message) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    for block in message.content.iter() {
        match (message.role, block) {
            (Role::User, ContentBlock::Text { text, .. }) => {
                updates.push(acp::SessionUpdate::UserMessageChunk(text_chunk(text)));
            }
            (Role::Assistant, ContentBlock::Text { text, .. }) => {
                updates.push(acp::SessionUpdate::AgentMessageChunk(text_chunk(text)));
            }
            (Role::Assistant, ContentBlock::Thinking { thinking, .. }) => {
                updates.push(acp::SessionUpdate::AgentThoughtChunk(text_chunk(thinking)));
            }
            (
                Role::Assistant,
                ContentBlock::ToolUse {
                    id, name, input, ..
                },
            ) => {
                if name == TODO_WRITE {
                    if let Some(plan) = plan(input) {
                        updates.push(acp::SessionUpdate::Plan(plan));
                    }
                } else {
                    updates.push(acp::SessionUpdate::ToolCall(tool_call(
                        id,
                        name,
                        input,
                        acp::ToolCallStatus::Pending,
                    )));
                }
            }
            (
                Role::User,
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    ..
                },
            ) => {
                updates.push(acp::SessionUpdate::ToolCallUpdate(tool_result(
                    tool_use_id,
                    content,
                    *is_error,
                )));
            }
            _ => {}
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tools_have_the_kinds_editors_draw() {
        assert_eq!(tool_kind("Read"), acp::ToolKind::Read);
        assert_eq!(tool_kind("Edit"), acp::ToolKind::Edit);
        assert_eq!(tool_kind("Write"), acp::ToolKind::Edit);
        assert_eq!(tool_kind("Bash"), acp::ToolKind::Execute);
        assert_eq!(tool_kind("Grep"), acp::ToolKind::Search);
        assert_eq!(tool_kind("WebFetch"), acp::ToolKind::Fetch);
        assert_eq!(tool_kind("Agent"), acp::ToolKind::Think);
        assert_eq!(tool_kind("mcp__x__y"), acp::ToolKind::Other);
    }

    #[test]
    fn an_edit_carries_its_file_and_its_diff() {
        let input = json!({"file_path": "/p/a.rs", "old_string": "a", "new_string": "b"});
        let call = tool_call("t1", "Edit", &input, acp::ToolCallStatus::Pending);
        assert_eq!(call.title, "Edit /p/a.rs");
        assert_eq!(call.locations.len(), 1);
        assert_eq!(call.locations[0].path, PathBuf::from("/p/a.rs"));
        let [acp::ToolCallContent::Diff(diff)] = call.content.as_slice() else {
            panic!("one diff: {:?}", call.content);
        };
        assert_eq!(diff.old_text.as_deref(), Some("a"));
        assert_eq!(diff.new_text, "b");
    }

    #[test]
    fn a_todo_list_is_a_plan() {
        let input = json!({"todos": [
            {"content": "Run tests", "status": "in_progress", "activeForm": "Running tests"},
            {"content": "Fix lint", "status": "pending", "activeForm": "Fixing lint"}
        ]});
        let plan = plan(&input).unwrap();
        assert_eq!(plan.entries.len(), 2);
        assert_eq!(plan.entries[0].content, "Run tests");
        assert_eq!(plan.entries[0].status, acp::PlanEntryStatus::InProgress);
        assert_eq!(plan.entries[1].status, acp::PlanEntryStatus::Pending);
        assert!(super::plan(&json!({"todos": "no"})).is_none());
    }

    #[test]
    fn a_failed_result_is_a_failed_call_with_its_text() {
        let update = tool_result("t1", &ToolResultContent::from("Exit code 1"), true);
        assert_eq!(update.fields.status, Some(acp::ToolCallStatus::Failed));
        assert_eq!(
            update.fields.content,
            Some(vec![acp::ToolCallContent::from("Exit code 1".to_owned())])
        );
    }
}
