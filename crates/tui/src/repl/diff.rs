//! What an Edit or Write call will change, as coloured diff lines under its call line.

use std::path::Path;

use ratatui::text::Line;
use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::style::{Palette, PaletteSpans};

/// Lines of a diff shown; the rest is counted.
const MAX_DIFF_LINES: usize = 20;
/// Unchanged lines kept around each change.
const CONTEXT: usize = 1;

/// The diff an Edit or Write call makes, or nothing for other tools and inputs. `path`
/// is where the call's file is: a Write compares against it, an Edit is shown in it
/// (its lines numbered, a line of the file around the change) when the file holds
/// `old_string`, else as `old_string` → `new_string`.
#[must_use]
pub fn call_diff(p: Palette, name: &str, input: &Value, path: Option<&Path>) -> Vec<Line<'static>> {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    let file = || path.and_then(|p| std::fs::read_to_string(p).ok());
    match name {
        "Edit" => {
            let (Some(old), Some(new)) = (field("old_string"), field("new_string")) else {
                return Vec::new();
            };
            match file().filter(|text| !old.is_empty() && text.contains(old)) {
                Some(text) => {
                    let all = input.get("replace_all").and_then(Value::as_bool) == Some(true);
                    let edited = if all {
                        text.replace(old, new)
                    } else {
                        text.replacen(old, new, 1)
                    };
                    render(p, &text, &edited, true)
                }
                None => render(p, old, new, false),
            }
        }
        "Write" => match field("content") {
            Some(new) => render(p, &file().unwrap_or_default(), new, true),
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// `- old` in red, `+ new` in green, a little context, at most [`MAX_DIFF_LINES`];
/// `numbered`: each line with its number in the file (the old one for a removed line).
#[must_use]
pub fn render(p: Palette, old: &str, new: &str, numbered: bool) -> Vec<Line<'static>> {
    let diff = TextDiff::from_lines(old, new);
    let width = if numbered {
        old.lines()
            .count()
            .max(new.lines().count())
            .to_string()
            .len()
    } else {
        0
    };
    let mut out = Vec::new();
    let mut hidden = 0usize;
    for (i, group) in diff.grouped_ops(CONTEXT).iter().enumerate() {
        if i > 0 {
            out.push(Line::from(p.dim("    ⋮")));
        }
        for op in group {
            for change in diff.iter_changes(op) {
                if out.len() >= MAX_DIFF_LINES {
                    hidden += 1;
                    continue;
                }
                let text = change.value().trim_end_matches(['\n', '\r']);
                let number = match (numbered, change.tag()) {
                    (false, _) => String::new(),
                    (true, ChangeTag::Delete) => number(change.old_index(), width),
                    (true, _) => number(change.new_index(), width),
                };
                let line = match change.tag() {
                    ChangeTag::Delete => p.red(format!("    {number}- {text}")),
                    ChangeTag::Insert => p.green(format!("    {number}+ {text}")),
                    ChangeTag::Equal => p.dim(format!("    {number}  {text}")),
                };
                out.push(Line::from(line));
            }
        }
    }
    if hidden > 0 {
        out.push(Line::from(p.dim(format!("    … {hidden} more diff lines"))));
    }
    out
}

/// `12 ` for the line at index 11, right-aligned to `width` digits.
fn number(index: Option<usize>, width: usize) -> String {
    index.map_or_else(|| " ".repeat(width + 1), |i| format!("{:>width$} ", i + 1))
}

#[cfg(test)]
mod tests {
    use ratatui::style::{Color, Style};
    use serde_json::json;

    use super::*;
    use crate::repl::style::ansi;
    use crate::repl::text::texts;

    #[test]
    fn an_edit_shows_removed_and_added_lines_with_context() {
        let lines = texts(&call_diff(
            Palette::new(false),
            "Edit",
            &json!({"file_path": "a.rs", "old_string": "a\nb\nc\n", "new_string": "a\nB\nc\n"}),
            None,
        ));
        assert_eq!(lines, ["      a", "    - b", "    + B", "      c"]);
    }

    #[test]
    fn an_edit_of_a_file_that_holds_the_text_is_numbered_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.rs");
        let text: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        std::fs::write(&path, text).unwrap();
        let input =
            json!({"file_path": "a.rs", "old_string": "line 10\n", "new_string": "ten\nTEN\n"});
        assert_eq!(
            texts(&call_diff(Palette::new(false), "Edit", &input, Some(&path))),
            [
                "     9   line 9",
                "    10 - line 10",
                "    10 + ten",
                "    11 + TEN",
                "    12   line 11",
            ]
        );
    }

    #[test]
    fn a_write_of_a_new_file_shows_every_line_added_up_to_the_limit() {
        let content: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        let lines = texts(&call_diff(
            Palette::new(false),
            "Write",
            &json!({"file_path": "new.txt", "content": content}),
            Some(Path::new("/nonexistent/new.txt")),
        ));
        assert_eq!(lines.len(), MAX_DIFF_LINES + 1);
        assert_eq!(lines[0], "     1 + line 1");
        assert_eq!(lines[MAX_DIFF_LINES], "    … 10 more diff lines");
    }

    #[test]
    fn colours_mark_the_change() {
        let lines = render(Palette::new(true), "x\n", "y\n", false);
        assert_eq!(lines[0].spans[0].style, Style::default().fg(Color::Red));
        assert_eq!(lines[1].spans[0].style, Style::default().fg(Color::Green));
        let lines: Vec<String> = lines.iter().map(ansi).collect();
        assert_eq!(
            lines,
            ["\x1b[31m    - x\x1b[39m", "\x1b[32m    + y\x1b[39m"]
        );
    }
}
