//! What an Edit or Write call will change, as coloured diff lines under its call line.

use std::path::Path;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::style::Palette;

/// Lines of a diff shown; the rest is counted.
const MAX_DIFF_LINES: usize = 20;
/// Unchanged lines kept around each change.
const CONTEXT: usize = 1;

/// The diff an Edit (`old_string` → `new_string`) or Write (the file now → `content`)
/// call makes, or nothing for other tools and inputs. `path` is where the call's file
/// is (a Write compares against it).
#[must_use]
pub fn call_diff(p: Palette, name: &str, input: &Value, path: Option<&Path>) -> Vec<String> {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    let (old, new) = match name {
        "Edit" => match (field("old_string"), field("new_string")) {
            (Some(old), Some(new)) => (old.to_owned(), new.to_owned()),
            _ => return Vec::new(),
        },
        "Write" => match field("content") {
            Some(new) => {
                let old = path
                    .and_then(|p| std::fs::read_to_string(p).ok())
                    .unwrap_or_default();
                (old, new.to_owned())
            }
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    render(p, &old, &new)
}

/// `- old` in red, `+ new` in green, a little context, at most [`MAX_DIFF_LINES`].
#[must_use]
pub fn render(p: Palette, old: &str, new: &str) -> Vec<String> {
    let diff = TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    let mut hidden = 0usize;
    for (i, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if i > 0 {
            out.push(p.dim("    ⋮"));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                if out.len() >= MAX_DIFF_LINES {
                    hidden += 1;
                    continue;
                }
                let text = change.value().trim_end_matches(['\n', '\r']);
                let line = match change.tag() {
                    ChangeTag::Delete => p.red(&format!("    - {text}")),
                    ChangeTag::Insert => p.green(&format!("    + {text}")),
                    ChangeTag::Equal => p.dim(&format!("      {text}")),
                };
                out.push(line);
            }
        }
    }
    if hidden > 0 {
        out.push(p.dim(&format!("    … {hidden} more diff lines")));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_edit_shows_removed_and_added_lines_with_context() {
        let lines = call_diff(
            Palette::new(false),
            "Edit",
            &json!({"file_path": "a.rs", "old_string": "a\nb\nc\n", "new_string": "a\nB\nc\n"}),
            None,
        );
        assert_eq!(lines, ["      a", "    - b", "    + B", "      c"]);
    }

    #[test]
    fn a_write_of_a_new_file_shows_every_line_added_up_to_the_limit() {
        let content: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let lines = call_diff(
            Palette::new(false),
            "Write",
            &json!({"file_path": "new.txt", "content": content}),
            Some(Path::new("/nonexistent/new.txt")),
        );
        assert_eq!(lines.len(), MAX_DIFF_LINES + 1);
        assert_eq!(lines[0], "    + line 1");
        assert_eq!(lines[MAX_DIFF_LINES], "    … 10 more diff lines");
    }

    #[test]
    fn colours_mark_the_change() {
        let lines = render(Palette::new(true), "x\n", "y\n");
        assert_eq!(
            lines,
            ["\x1b[31m    - x\x1b[39m", "\x1b[32m    + y\x1b[39m"]
        );
    }
}
