//! One line per tool call and one per outcome: `● Read src/main.rs` then `  ⎿ 120 lines`,
//! as [`Piece`]s (the interactive UI styles them itself) or as ANSI text.

use std::path::Path;

use serde_json::Value;

use crate::style::{Palette, Piece, Tone};

/// How much of a command or pattern a call line shows.
const MAX_ARG_CHARS: usize = 80;
/// How much of an error or output line an outcome line shows.
const MAX_OUTCOME_CHARS: usize = 100;

/// What a call does, in a few words: `Read src/main.rs`, `Bash cargo test`.
#[must_use]
pub fn call_summary(name: &str, input: &Value, cwd: &Path) -> String {
    let field = |key: &str| input.get(key).and_then(Value::as_str);
    let path = |key: &str| field(key).map(|p| display_path(p, cwd));
    let arg = match name {
        "Read" | "Edit" | "Write" => path("file_path"),
        "Bash" => field("command").map(|c| {
            let c = shorten(c, MAX_ARG_CHARS);
            if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
                format!("{c} (in the background)")
            } else {
                c
            }
        }),
        "WebFetch" => field("url").map(|u| shorten(u, MAX_ARG_CHARS)),
        "BashOutput" => field("bash_id").map(str::to_owned),
        "KillShell" => field("shell_id").map(str::to_owned),
        "Grep" | "Glob" => field("pattern").map(|pattern| {
            let pattern = shorten(pattern, MAX_ARG_CHARS);
            match path("path") {
                Some(dir) => format!("{pattern} in {dir}"),
                None => pattern,
            }
        }),
        // `Agent find the parser` (`· reviewer` for an agent type of its own).
        "Agent" | "Task" => field("description").map(|d| {
            let d = shorten(d, MAX_ARG_CHARS);
            match field("subagent_type").filter(|t| *t != "general-purpose") {
                Some(kind) => format!("{d} · {kind}"),
                None => d,
            }
        }),
        // The plan itself is shown whole with its question, the list as a checklist
        // under the call line.
        "ExitPlanMode" | "TodoWrite" => Some(String::new()),
        _ => None,
    };
    let arg = arg.unwrap_or_else(|| match input {
        Value::Object(map) if map.is_empty() => String::new(),
        Value::Null => String::new(),
        other => shorten(&other.to_string(), MAX_ARG_CHARS),
    });
    if arg.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {arg}")
    }
}

/// How Bash's result for `run_in_background` starts (gyre-tools' background shells).
const BACKGROUND_STARTED: &str = "Command running in background with ID: ";

/// A call's result, in a few words. `ok` is false for errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    pub text: String,
}

/// Summarizes a tool_result for the tool that produced it.
#[must_use]
pub fn outcome_summary(name: &str, content: &str, is_error: bool) -> Outcome {
    let content = content
        .replace("<tool_use_error>", "")
        .replace("</tool_use_error>", "");
    let content = content.trim();
    if is_error {
        return Outcome {
            ok: false,
            text: error_summary(name, content),
        };
    }
    let lines: Vec<&str> = content.lines().collect();
    let text = match name {
        "ExitPlanMode" => "plan approved".to_owned(),
        // The checklist under the call line says it all.
        "TodoWrite" => "updated".to_owned(),
        "Bash" if content.starts_with(BACKGROUND_STARTED) => {
            let id = content[BACKGROUND_STARTED.len()..]
                .split(|c: char| c == '.' || c.is_whitespace())
                .next()
                .unwrap_or_default();
            format!("running as {id} · /bashes lists it")
        }
        "Bash" => match lines.as_slice() {
            [] | ["(no output)"] => "exit 0".to_owned(),
            [one] => format!("exit 0 · {}", shorten(one, MAX_OUTCOME_CHARS)),
            many => format!("exit 0 · {}", count(many.len(), "line")),
        },
        "Read" if content.starts_with("<system-reminder>") => {
            shorten(&strip_reminder(content), MAX_OUTCOME_CHARS)
        }
        // An image has no text (an empty file gets a reminder).
        "Read" if content.is_empty() => "image".to_owned(),
        "Read" => count(lines.len(), "line"),
        "Edit" | "Write" if content.starts_with("File created") => "created".to_owned(),
        "Edit" | "Write" => {
            let (added, removed) = diff_stats(content);
            if added + removed == 0 {
                "updated".to_owned()
            } else {
                format!("updated · +{added} −{removed}")
            }
        }
        "Glob" if content == "No files found" => content.to_owned(),
        "Glob" => count(lines.iter().filter(|l| !l.starts_with('(')).count(), "file"),
        "Grep" => match lines.first() {
            Some(first) if first.starts_with("Found ") || first.starts_with("No ") => {
                (*first).to_owned()
            }
            _ => count(lines.len(), "line"),
        },
        _ => lines
            .first()
            .map_or_else(|| "done".to_owned(), |l| shorten(l, MAX_OUTCOME_CHARS)),
    };
    Outcome { ok: true, text }
}

fn error_summary(name: &str, content: &str) -> String {
    let mut lines = content.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("failed");
    if name == "Bash"
        && let Some(code) = first.strip_prefix("Exit code ")
    {
        return match lines.next() {
            Some(output) => format!("exit {code} · {}", shorten(output, MAX_OUTCOME_CHARS)),
            None => format!("exit {code}"),
        };
    }
    if first.starts_with("Command was interrupted") || first == "Interrupted by user" {
        return "interrupted".to_owned();
    }
    if first.starts_with("The user denied permission") {
        return "denied".to_owned();
    }
    if first.starts_with("The user doesn't want to proceed") {
        return "rejected".to_owned();
    }
    shorten(first, MAX_OUTCOME_CHARS)
}

fn strip_reminder(s: &str) -> String {
    s.replace("<system-reminder>", "")
        .replace("</system-reminder>", "")
        .trim()
        .to_owned()
}

/// Added and removed lines of a unified diff.
fn diff_stats(text: &str) -> (usize, usize) {
    text.lines().fold((0, 0), |(a, r), l| {
        if l.starts_with('+') && !l.starts_with("+++") {
            (a + 1, r)
        } else if l.starts_with('-') && !l.starts_with("---") {
            (a, r + 1)
        } else {
            (a, r)
        }
    })
}

pub fn count(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// The first line, cut to `max` characters; `…` marks anything left out.
pub fn shorten(s: &str, max: usize) -> String {
    let mut lines = s.trim().lines();
    let first = lines.next().unwrap_or_default();
    let more_lines = lines.next().is_some();
    match first.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None if more_lines => format!("{first} …"),
        None => first.to_owned(),
    }
}

/// A path relative to the working directory when it is inside it.
fn display_path(path: &str, cwd: &Path) -> String {
    Path::new(path).strip_prefix(cwd).map_or_else(
        |_| path.to_owned(),
        |rel| {
            if rel.as_os_str().is_empty() {
                ".".to_owned()
            } else {
                rel.display().to_string()
            }
        },
    )
}

/// `● Read src/main.rs`, the tool name in bold.
#[must_use]
pub fn call_pieces(summary: &str) -> Vec<Piece> {
    let (name, rest) = summary.split_once(' ').unwrap_or((summary, ""));
    let mut pieces = vec![
        Piece::new(Tone::Green, "●"),
        Piece::plain(" "),
        Piece::new(Tone::Bold, name),
    ];
    if !rest.is_empty() {
        pieces.push(Piece::plain(format!(" {rest}")));
    }
    pieces
}

/// `  ⎿ 120 lines` or `  ⎿ ✗ exit 1 · error text`.
#[must_use]
pub fn outcome_pieces(outcome: &Outcome) -> Vec<Piece> {
    let text = if outcome.ok {
        Piece::new(Tone::Dim, outcome.text.clone())
    } else {
        Piece::new(Tone::Red, format!("✗ {}", outcome.text))
    };
    vec![
        Piece::plain("  "),
        Piece::new(Tone::Dim, "⎿"),
        Piece::plain(" "),
        text,
    ]
}

/// [`call_pieces`] as ANSI text.
#[must_use]
pub fn render_call(p: Palette, summary: &str) -> String {
    p.ansi(&call_pieces(summary))
}

/// [`outcome_pieces`] as ANSI text.
#[must_use]
pub fn render_outcome(p: Palette, outcome: &Outcome) -> String {
    p.ansi(&outcome_pieces(outcome))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(name: &str, input: &Value) -> String {
        render_call(
            Palette::new(false),
            &call_summary(name, input, Path::new("/work/proj")),
        )
    }

    fn outcome(name: &str, content: &str, is_error: bool) -> String {
        render_outcome(
            Palette::new(false),
            &outcome_summary(name, content, is_error),
        )
    }

    #[test]
    fn tool_lines() {
        let long = "x".repeat(120);
        let lines = [
            call("Read", &json!({"file_path": "/work/proj/src/main.rs"})),
            outcome("Read", "1\tfn main() {\n2\t}\n3\t", false),
            call("Read", &json!({"file_path": "/etc/hosts"})),
            outcome(
                "Read",
                "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
                false,
            ),
            call("Bash", &json!({"command": "cargo test"})),
            outcome("Bash", "running 3 tests\nok\nok\nok", false),
            call("Bash", &json!({"command": "echo hi"})),
            outcome("Bash", "hi", false),
            call("Bash", &json!({"command": "true"})),
            outcome("Bash", "(no output)", false),
            call("Bash", &json!({"command": "cargo build\n&& cargo test"})),
            outcome(
                "Bash",
                "Exit code 101\nerror[E0425]: cannot find value `x`",
                true,
            ),
            call("Bash", &json!({"command": "sleep 30"})),
            outcome("Bash", "Interrupted by user", true),
            call("Bash", &json!({ "command": long })),
            outcome(
                "Bash",
                "The user denied permission to use Bash. Do not retry it; ask the user how to proceed.",
                true,
            ),
            call(
                "Edit",
                &json!({"file_path": "/work/proj/a.rs", "old_string": "a", "new_string": "b"}),
            ),
            outcome(
                "Edit",
                "The file /work/proj/a.rs has been updated. Here's the diff:\n--- a\n+++ b\n@@ -1 +1 @@\n-a\n+b\n+c",
                false,
            ),
            call(
                "Write",
                &json!({"file_path": "/work/proj/new.txt", "content": "x"}),
            ),
            outcome(
                "Write",
                "File created successfully at: /work/proj/new.txt",
                false,
            ),
            call(
                "Grep",
                &json!({"pattern": "fn main", "path": "/work/proj/src"}),
            ),
            outcome("Grep", "Found 2 files\nsrc/main.rs\nsrc/lib.rs", false),
            call("Glob", &json!({"pattern": "**/*.rs"})),
            outcome("Glob", "/work/proj/a.rs\n/work/proj/b.rs", false),
            call("Glob", &json!({"pattern": "*.zig"})),
            outcome("Glob", "No files found", false),
            call("Read", &json!({})),
            outcome(
                "Read",
                "<tool_use_error>InputValidationError: file_path is required</tool_use_error>",
                true,
            ),
            call("WebFetch", &json!({"url": "https://example.com"})),
            outcome("WebFetch", "", false),
            call(
                "Bash",
                &json!({"command": "npm run dev", "run_in_background": true}),
            ),
            outcome(
                "Bash",
                "Command running in background with ID: bash_1. Read its output with BashOutput, stop it with KillShell.",
                false,
            ),
            call("BashOutput", &json!({"bash_id": "bash_1"})),
            call("KillShell", &json!({"shell_id": "bash_1"})),
            call(
                "Agent",
                &json!({"description": "find the parser", "prompt": "…"}),
            ),
            call(
                "Task",
                &json!({"description": "review", "prompt": "…", "subagent_type": "reviewer"}),
            ),
            call(
                "TodoWrite",
                &json!({"todos": [{"content": "a", "status": "pending", "activeForm": "a"}]}),
            ),
            outcome(
                "TodoWrite",
                "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.",
                false,
            ),
            call("ExitPlanMode", &json!({"plan": "1. edit"})),
            outcome(
                "ExitPlanMode",
                "User has approved your plan. You can now start coding.\n\n## Approved Plan:\n1. edit",
                false,
            ),
            outcome(
                "ExitPlanMode",
                "The user doesn't want to proceed with this ExitPlanMode call: it was rejected. To tell you how to proceed, the user said:\nsplit step 2",
                true,
            ),
        ];
        insta::assert_snapshot!(lines.join("\n"));
    }

    #[test]
    fn a_read_image_is_shown_as_an_image() {
        assert_eq!(outcome_summary("Read", "", false).text, "image");
        assert_eq!(outcome_summary("Read", "1\tx", false).text, "1 line");
    }

    #[test]
    fn colored_lines_mark_errors_red() {
        let p = Palette::new(true);
        let failed = render_outcome(p, &outcome_summary("Bash", "Exit code 1", true));
        assert_eq!(failed, "  \x1b[2m⎿\x1b[22m \x1b[31m✗ exit 1\x1b[39m");
        assert_eq!(
            render_call(p, "Read a.rs"),
            "\x1b[32m●\x1b[39m \x1b[1mRead\x1b[22m a.rs"
        );
    }

    #[test]
    fn lines_are_pieces_in_tones() {
        assert_eq!(
            call_pieces("Read a.rs"),
            [
                Piece::new(Tone::Green, "●"),
                Piece::plain(" "),
                Piece::new(Tone::Bold, "Read"),
                Piece::plain(" a.rs"),
            ]
        );
        assert_eq!(call_pieces("TodoWrite").len(), 3);
        let failed = outcome_pieces(&outcome_summary("Bash", "Exit code 1", true));
        assert_eq!(failed[3], Piece::new(Tone::Red, "✗ exit 1"));
        let ok = outcome_pieces(&outcome_summary("Read", "1\tx", false));
        assert_eq!(ok[1], Piece::new(Tone::Dim, "⎿"));
        assert_eq!(ok[3], Piece::new(Tone::Dim, "1 line"));
    }
}
