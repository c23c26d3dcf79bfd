//! One turn's events as lines for the scrollback (finished answer lines, tool calls and
//! their outcomes, notices) plus what stays live in the viewport: the answer line still
//! streaming and what gyre is waiting for.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use gyre_loop::{EngineEvent, LoopEvent, TerminalReason, TurnResult};
use gyre_protocol::{ContentBlock, ContentDelta, Message, Role, StreamEvent, Usage};
use ratatui::text::Line;
use serde_json::Value;

use super::diff::call_diff;
use super::markdown::{LineBuffer, MarkdownRenderer};
use super::spinner::Status;
use super::style::{Palette, PaletteSpans};
use super::subagent::{Subagents, is_agent};
use gyre_term::tool_line::{Outcome, call_pieces, call_summary, outcome_pieces, outcome_summary};

/// Lines of Bash output shown under its outcome; Ctrl+O shows the rest.
pub const FOLDED_LINES: usize = 3;

/// A Bash output shown folded: the call it came from and all of it, for Ctrl+O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The call's summary (`Bash cargo test`).
    pub call: String,
    pub output: String,
}

/// A call shown and waiting for its result.
#[derive(Debug, Clone)]
struct Call {
    id: String,
    name: String,
    summary: String,
}

/// Renders one turn's events.
#[derive(Debug)]
pub struct TurnView {
    p: Palette,
    cwd: PathBuf,
    markdown: MarkdownRenderer,
    text: LineBuffer,
    /// Lines ready for the scrollback.
    out: Vec<Line<'static>>,
    activity: Option<Status>,
    /// Text of the current response was shown from its stream.
    streamed: bool,
    calls: Vec<Call>,
    /// How many calls the current batch has (outcomes name their call when > 1).
    batch: usize,
    /// The last line pushed was empty (so a new section needs no separator).
    last_blank: bool,
    /// The Bash outputs folded this turn, oldest first, for Ctrl+O.
    pub folded: Vec<Folded>,
    /// Tokens of the newest request (input, cache and output), for the context gauge.
    pub context_tokens: Option<u64>,
    /// The Agent calls running, each with a live line.
    subagents: Subagents,
}

impl TurnView {
    #[must_use]
    pub fn new(p: Palette, cwd: PathBuf) -> Self {
        Self {
            p,
            cwd,
            markdown: MarkdownRenderer::new(p),
            text: LineBuffer::default(),
            out: Vec::new(),
            activity: Some(Status::working("Thinking")),
            streamed: false,
            calls: Vec::new(),
            batch: 0,
            last_blank: false,
            folded: Vec::new(),
            context_tokens: None,
            subagents: Subagents::default(),
        }
    }

    /// The lines finished since the last call.
    pub fn take_lines(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.out)
    }

    /// The answer line still streaming, rendered.
    #[must_use]
    pub fn live(&self) -> Vec<Line<'static>> {
        let partial = self.text.partial();
        if partial.is_empty() {
            return Vec::new();
        }
        // Rendered on a copy: the fence state changes only when the line is complete.
        let mut markdown = self.markdown.clone();
        vec![markdown.render_line(partial)]
    }

    /// One live line per running sub-agent.
    #[must_use]
    pub fn subagent_lines(&self) -> Vec<Line<'static>> {
        self.subagents.lines(self.p, &self.cwd, Instant::now())
    }

    #[must_use]
    pub fn activity(&self) -> Option<&Status> {
        self.activity.as_ref()
    }

    pub fn set_activity(&mut self, status: Option<Status>) {
        self.activity = status;
    }

    fn line(&mut self, line: impl Into<Line<'static>>) {
        let line = line.into();
        self.last_blank = line.width() == 0;
        self.out.push(line);
    }

    /// An empty line before a new part of the answer, unless there is one already.
    fn section(&mut self) {
        if !self.last_blank {
            self.line(Line::default());
        }
    }

    fn text_line(&mut self, raw: &str) {
        if !self.streamed {
            self.streamed = true;
            self.section();
        }
        let rendered = self.markdown.render_line(raw);
        self.line(rendered);
        // Only an empty line of the answer is a blank line (an empty `#` heading is not).
        self.last_blank = raw.is_empty();
    }

    fn flush_text(&mut self) {
        if let Some(rest) = self.text.finish() {
            self.text_line(&rest);
        }
    }

    fn notice(&mut self, text: &str) {
        self.flush_text();
        self.section();
        let text = self.p.yellow(text.to_owned());
        self.line(text);
    }

    pub fn on_event(&mut self, event: EngineEvent) {
        match event {
            EngineEvent::Loop(event) => self.on_loop_event(event),
            EngineEvent::Message { message, .. } => match message.role {
                Role::Assistant => self.on_assistant(&message),
                Role::User => self.on_tool_results(&message),
            },
            // A sub-agent's messages show through its progress.
            EngineEvent::Subagent { .. } => {}
            EngineEvent::SubagentProgress(progress) => {
                self.subagents.update(progress, Instant::now());
            }
            EngineEvent::Result(result) => self.on_result(&result),
        }
    }

    fn show_call(&mut self, id: &str, name: &str, input: &Value) {
        let summary = call_summary(name, input, &self.cwd);
        let text = self.p.line(call_pieces(&summary));
        self.line(text);
        let path = input
            .get("file_path")
            .and_then(Value::as_str)
            .map(|p| self.cwd.join(p));
        for line in call_diff(self.p, name, input, path.as_deref()) {
            self.line(line);
        }
        for line in todo_checklist(self.p, name, input) {
            self.line(line);
        }
        if is_agent(name) {
            let description = input
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or(name);
            self.subagents.started(id, description, Instant::now());
        }
        self.calls.push(Call {
            id: id.to_owned(),
            name: name.to_owned(),
            summary,
        });
    }

    fn on_loop_event(&mut self, event: LoopEvent) {
        match event {
            LoopEvent::RequestStart { .. } => {
                self.streamed = false;
                self.markdown.reset();
                self.activity = Some(Status::working("Thinking"));
            }
            LoopEvent::Stream(StreamEvent::ContentBlockDelta {
                delta: ContentDelta::TextDelta { text },
                ..
            }) => {
                if !self.streamed {
                    self.streamed = true;
                    self.section();
                }
                if !matches!(&self.activity, Some(Status::Working { label, .. }) if label == "Responding")
                {
                    self.activity = Some(Status::working("Responding"));
                }
                for line in self.text.push(&text) {
                    self.text_line(&line);
                }
            }
            LoopEvent::Stream(StreamEvent::ContentBlockStop { .. }) => {
                self.flush_text();
                // The next block (a tool call's input, say) may take a while to arrive.
                self.activity = Some(Status::working("Thinking"));
            }
            LoopEvent::Stream(_) => {}
            LoopEvent::ToolStarted { id, name, input } => {
                // Shown as it starts, so a permission question comes after its call line.
                self.flush_text();
                if self.calls.is_empty() {
                    self.section();
                }
                self.show_call(&id, &name, &input);
                self.batch = self.calls.len();
                self.activity = Some(Status::working(format!("Running {name}")));
            }
            LoopEvent::Retry(status) => {
                self.flush_text();
                let reason = if status.message.is_empty() {
                    status.error.clone()
                } else {
                    status.message.replace('\n', " ")
                };
                self.activity = Some(Status::Retry {
                    until: Instant::now() + Duration::from_millis(status.delay_ms),
                    attempt: status.attempt,
                    max_retries: status.max_retries,
                    reason,
                    stop_hint: status.is_unreachable(),
                });
            }
            LoopEvent::Tombstone => {
                // Calls announced by the void attempt will not get results.
                self.calls.clear();
                self.subagents.clear();
                self.text.discard();
                self.markdown.reset();
                if std::mem::take(&mut self.streamed) {
                    let text = self.p.dim("↻ the answer above was cut off; retrying");
                    self.line(text);
                }
            }
            LoopEvent::Fallback { original, fallback } => {
                self.notice(&format!(
                    "Switched to {fallback} due to high demand for {original}"
                ));
            }
            LoopEvent::Compacted(outcome) => {
                let text = format!(
                    "Context compacted ({} → {} tokens)",
                    outcome.pre_tokens, outcome.post_tokens
                );
                self.notice(&text);
            }
            LoopEvent::Usage { usage, .. } => {
                self.context_tokens = Some(context_tokens(&usage));
            }
            LoopEvent::Message { .. }
            | LoopEvent::HistoryReplaced(_)
            | LoopEvent::PermissionDenied { .. }
            | LoopEvent::Transition(_)
            | LoopEvent::Terminal(_) => {}
        }
    }

    fn on_assistant(&mut self, message: &Message) {
        self.flush_text();
        self.activity = None;
        if !self.streamed {
            // Nothing came through the stream (a non-streaming fallback): show it whole.
            for line in message.text().lines() {
                self.text_line(line);
            }
        }
        self.streamed = false;
        // Calls already announced as they started are not shown twice.
        let new: Vec<(String, String, Value)> = message
            .tool_uses()
            .filter(|(id, _, _)| !self.calls.iter().any(|c| c.id == *id))
            .map(|(id, name, input)| (id.to_owned(), name.to_owned(), input.clone()))
            .collect();
        if new.is_empty() && self.calls.is_empty() {
            return;
        }
        if self.calls.is_empty() {
            self.section();
        }
        for (id, name, input) in &new {
            self.show_call(id, name, input);
        }
        let running = match self.calls.as_slice() {
            [call] => format!("Running {}", call.name),
            many => format!("Running {} tools", many.len()),
        };
        self.batch = self.calls.len();
        self.activity = Some(Status::working(running));
    }

    fn on_tool_results(&mut self, message: &Message) {
        for block in &message.content {
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } = block
            else {
                continue;
            };
            let Some(at) = self.calls.iter().position(|c| c.id == *tool_use_id) else {
                continue;
            };
            let call = self.calls.remove(at);
            let text = content.text();
            let mut outcome = self
                .subagents
                .finish(&call.id, *is_error, &text, Instant::now())
                .unwrap_or_else(|| outcome_summary(&call.name, &text, *is_error));
            if self.batch > 1 {
                outcome = Outcome {
                    text: format!("{}: {}", call.summary, outcome.text),
                    ..outcome
                };
            }
            let rendered = self.p.line(outcome_pieces(&outcome));
            self.line(rendered);
            if call.name == "Bash" {
                self.fold_output(&call.summary, &text);
            }
        }
        if !self.calls.is_empty() {
            return;
        }
        self.activity = Some(Status::working("Thinking"));
    }

    /// Several lines of Bash output: the first few, and a key to see them all (an
    /// output only one line longer than the fold is shown whole instead).
    fn fold_output(&mut self, call: &str, output: &str) {
        let lines: Vec<&str> = output.trim_end().lines().collect();
        if lines.len() <= 1 {
            return;
        }
        let folds = lines.len() > FOLDED_LINES + 1;
        let shown = if folds { FOLDED_LINES } else { lines.len() };
        for line in lines.iter().take(shown) {
            let text = self.p.dim(format!("    {line}"));
            self.line(text);
        }
        if folds {
            let more = lines.len() - FOLDED_LINES;
            let text = self
                .p
                .dim(format!("    … +{more} lines (ctrl+o to expand)"));
            self.line(text);
            self.folded.push(Folded {
                call: call.to_owned(),
                output: output.trim_end().to_owned(),
            });
        }
    }

    fn on_result(&mut self, result: &TurnResult) {
        self.flush_text();
        self.activity = None;
        match result.terminal.reason {
            TerminalReason::AbortedStreaming | TerminalReason::AbortedTools => {
                self.section();
                let text = self.p.yellow("Interrupted · tell gyre what to do instead");
                self.line(text);
            }
            _ if result.is_error => {
                let error = result
                    .errors
                    .first()
                    .cloned()
                    .unwrap_or_else(|| result.result.clone());
                self.section();
                let text = self.p.red(format!("✗ {}", error.replace('\n', " ")));
                self.line(text);
            }
            _ => {}
        }
    }

    /// Closes the turn: the partial line, a blank line before the prompt.
    pub fn end(&mut self) {
        self.subagents.clear();
        self.flush_text();
        self.activity = None;
        self.section();
    }
}

/// What a request put in the context window.
fn context_tokens(usage: &Usage) -> u64 {
    usage.input_tokens
        + usage.cache_read_input_tokens
        + usage.cache_creation_input_tokens
        + usage.output_tokens
}

/// What Ctrl+O prints: the call the output came from, then every line of it.
#[must_use]
pub fn expanded(p: Palette, folded: &Folded) -> Vec<Line<'static>> {
    let count = folded.output.lines().count();
    let mut call = p.line(call_pieces(&folded.call));
    call.push_span(p.dim(format!(" · all {count} lines of its output")));
    let mut lines = vec![call];
    lines.extend(
        folded
            .output
            .lines()
            .map(|l| Line::from(p.dim(format!("    {l}")))),
    );
    lines.push(Line::default());
    lines
}

/// TodoWrite's list as a checklist under its call line: `☒` done (dim), `◼` the task
/// in progress (its `activeForm`, bold), `☐` pending.
pub(super) fn todo_checklist(p: Palette, name: &str, input: &Value) -> Vec<Line<'static>> {
    if name != "TodoWrite" {
        return Vec::new();
    }
    let Some(todos) = input.get("todos").and_then(Value::as_array) else {
        return Vec::new();
    };
    todos
        .iter()
        .map(|todo| {
            let field = |key: &str| todo.get(key).and_then(Value::as_str);
            let content = field("content").unwrap_or_default();
            Line::from(match field("status") {
                Some("completed") => p.dim(format!("    ☒ {content}")),
                Some("in_progress") => {
                    p.bold(format!("    ◼ {}", field("activeForm").unwrap_or(content)))
                }
                _ => format!("    ☐ {content}").into(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use ratatui::widgets::{Paragraph, Widget};
    use serde_json::json;

    use super::*;
    use crate::repl::style::ansi;
    use crate::repl::text::texts;
    use crate::repl::ui::scrollback_rows;

    /// One call and its result, as the engine reports them.
    fn call(view: &mut TurnView, id: &str, name: &str, input: Value, result: &str) {
        view.on_event(EngineEvent::Loop(LoopEvent::ToolStarted {
            id: id.into(),
            name: name.into(),
            input,
        }));
        view.on_event(EngineEvent::Message {
            uuid: format!("u-{id}"),
            message: Message::user(vec![ContentBlock::tool_result(id, result, false)]),
            is_meta: false,
        });
    }

    fn view(color: bool) -> TurnView {
        TurnView::new(Palette::new(color), PathBuf::from("/work/proj"))
    }

    /// `lines` put into the scrollback of a 60-column terminal, as the UI prints them.
    fn scrollback(lines: &[Line<'static>], color: bool) -> Terminal<TestBackend> {
        let rows = scrollback_rows(lines, 60, color);
        let height = u16::try_from(rows.len()).unwrap();
        let mut terminal = Terminal::new(TestBackend::new(60, height)).unwrap();
        terminal
            .draw(|f| {
                let area = f.area();
                Paragraph::new(rows).render(area, f.buffer_mut());
            })
            .unwrap();
        terminal
    }

    #[test]
    fn bash_output_folds_to_three_lines_and_ctrl_o_shows_it_whole() {
        let mut turn = view(false);
        let output: String = (1..=12).map(|n| format!("line {n}\n")).collect();
        call(
            &mut turn,
            "t1",
            "Bash",
            json!({"command": "seq 12"}),
            &output,
        );
        let mut lines = turn.take_lines();
        assert_eq!(turn.folded.len(), 1);
        lines.push(Line::default());
        lines.extend(expanded(Palette::new(false), &turn.folded[0]));
        insta::assert_snapshot!(scrollback(&lines, false).backend());
    }

    #[test]
    fn bash_output_one_line_longer_than_the_fold_is_shown_whole() {
        let mut turn = view(false);
        call(
            &mut turn,
            "t1",
            "Bash",
            json!({"command": "ls"}),
            "a\nb\nc\nd\n",
        );
        assert!(turn.folded.is_empty());
        let lines = texts(&turn.take_lines());
        assert_eq!(
            lines[lines.len() - 4..],
            ["    a", "    b", "    c", "    d"]
        );
    }

    #[test]
    fn an_edit_shows_its_diff_in_red_and_green() {
        let mut turn = view(true);
        call(
            &mut turn,
            "t1",
            "Edit",
            json!({
                "file_path": "/work/proj/src/lib.rs",
                "old_string": "fn a() {}\nfn b() {}\n",
                "new_string": "fn a() {}\nfn b() -> u8 { 1 }\n",
            }),
            "The file /work/proj/src/lib.rs has been updated. Here's the diff:\n-fn b() {}\n+fn b() -> u8 { 1 }",
        );
        let terminal = scrollback(&turn.take_lines(), true);
        insta::assert_debug_snapshot!(terminal.backend().buffer());
    }

    #[test]
    fn todo_write_renders_as_a_checklist_under_its_call() {
        let mut turn = view(false);
        call(
            &mut turn,
            "t1",
            "TodoWrite",
            json!({"todos": [
                {"content": "Read the parser", "status": "completed", "activeForm": "Reading the parser"},
                {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
                {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"}
            ]}),
            "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress.",
        );
        insta::assert_snapshot!(scrollback(&turn.take_lines(), false).backend());
    }

    #[test]
    fn ctrl_o_and_the_checklist_are_styled_as_tool_lines_are() {
        let p = Palette::new(true);
        let folded = Folded {
            call: "Bash seq 2".into(),
            output: "1\n2".into(),
        };
        let lines: Vec<String> = expanded(p, &folded).iter().map(ansi).collect();
        assert_eq!(
            lines,
            [
                "\x1b[32m●\x1b[39m \x1b[1mBash\x1b[22m seq 2\x1b[2m · all 2 lines of its output\x1b[22m",
                "\x1b[2m    1\x1b[22m",
                "\x1b[2m    2\x1b[22m",
                "",
            ]
        );
        let input = json!({"todos": [
            {"content": "a", "status": "completed", "activeForm": "A"},
            {"content": "b", "status": "in_progress", "activeForm": "B"},
            {"content": "c", "status": "pending", "activeForm": "C"}
        ]});
        let lines: Vec<String> = todo_checklist(p, "TodoWrite", &input)
            .iter()
            .map(ansi)
            .collect();
        assert_eq!(
            lines,
            [
                "\x1b[2m    ☒ a\x1b[22m",
                "\x1b[1m    ◼ B\x1b[22m",
                "    ☐ c"
            ]
        );
    }

    #[test]
    fn todo_write_shows_as_a_checklist_and_other_calls_do_not() {
        let input = serde_json::json!({"todos": [
            {"content": "Read the parser", "status": "completed", "activeForm": "Reading the parser"},
            {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
            {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"}
        ]});
        let plain = Palette::new(false);
        assert_eq!(
            texts(&todo_checklist(plain, "TodoWrite", &input)),
            vec![
                "    ☒ Read the parser",
                "    ◼ Fixing the bug",
                "    ☐ Run the tests"
            ]
        );
        assert!(todo_checklist(plain, "Bash", &input).is_empty());
    }
}
