//! The conversation as plain text (`/export`): the user's messages after `> `, the
//! model's text as it wrote it, each tool call as `⏺ Tool(input)` with the first lines
//! of its result under it. Thinking is left out, as the terminal folds it.

use gyre_protocol::{ContentBlock, Message, Role};

/// Lines of a tool result kept in the export.
const RESULT_LINES: usize = 5;

/// The key argument of a tool call (`command`, `file_path`, `pattern`, …), or its
/// whole input as JSON.
fn call_summary(input: &serde_json::Value) -> String {
    [
        "command",
        "file_path",
        "pattern",
        "path",
        "url",
        "description",
    ]
    .iter()
    .find_map(|key| input.get(key).and_then(|v| v.as_str()))
    .map_or_else(|| input.to_string(), str::to_owned)
}

/// See the module docs.
#[must_use]
pub fn conversation_text(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        for block in &message.content {
            match (message.role, block) {
                (Role::User, ContentBlock::Text { text, .. }) => {
                    for (i, line) in text.lines().enumerate() {
                        out.push_str(if i == 0 { "> " } else { "  " });
                        out.push_str(line);
                        out.push('\n');
                    }
                    out.push('\n');
                }
                (Role::Assistant, ContentBlock::Text { text, .. }) => {
                    out.push_str(text.trim_end());
                    out.push_str("\n\n");
                }
                (_, ContentBlock::ToolUse { name, input, .. }) => {
                    out.push_str(&format!("⏺ {name}({})\n", call_summary(input)));
                }
                (
                    _,
                    ContentBlock::ToolResult {
                        content, is_error, ..
                    },
                ) => {
                    let text = content.text();
                    let lines: Vec<&str> = text.lines().collect();
                    let mark = if *is_error { "✗" } else { "⎿" };
                    for (i, line) in lines.iter().take(RESULT_LINES).enumerate() {
                        let lead = if i == 0 {
                            format!("  {mark} ")
                        } else {
                            "    ".to_owned()
                        };
                        out.push_str(&format!("{lead}{line}\n"));
                    }
                    if lines.len() > RESULT_LINES {
                        out.push_str(&format!(
                            "    … {} more lines\n",
                            lines.len() - RESULT_LINES
                        ));
                    }
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn messages_tool_calls_and_results_read_as_the_terminal_shows_them() {
        let output = (1..=8).map(|i| format!("line {i}")).collect::<Vec<_>>();
        let messages = [
            Message::user_text("list the files\nplease"),
            Message::assistant(vec![
                ContentBlock::text("Listing them."),
                ContentBlock::tool_use("toolu_1", "Bash", serde_json::json!({"command": "ls"})),
            ]),
            Message::user(vec![ContentBlock::tool_result(
                "toolu_1",
                output.join("\n"),
                false,
            )]),
            Message::assistant(vec![ContentBlock::text("Eight files.")]),
        ];
        let text = conversation_text(&messages);
        assert_eq!(
            text,
            "> list the files\n  please\n\nListing them.\n\n⏺ Bash(ls)\n  ⎿ line 1\n    line 2\n    line 3\n    line 4\n    line 5\n    … 3 more lines\n\nEight files.\n\n"
        );
    }
}
