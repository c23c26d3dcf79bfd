//! Permission questions: the session sends each one as an event
//! ([`gyre_core::approvals`]); the UI loop shows it in the viewport, answers it on one
//! key with an operation, and "always" also saves the rule for this folder in the
//! user's config (`folder_rules`).

use std::path::Path;

use gyre_core::approvals::ApprovalRequest;
use ratatui::text::{Line, Span};
use serde_json::Value;

use super::markdown::MarkdownRenderer;
use super::style::{Palette, PaletteSpans};
use super::view::{PlanQuestion, QuestionView};
use gyre_term::tool_line::call_summary;

/// A question on screen, and the id its answer goes back under.
#[derive(Debug)]
pub struct Question {
    pub view: QuestionView,
    /// What is asked; the answer goes back under its id.
    pub request: ApprovalRequest,
}

impl Question {
    /// The question `request` asks, as the viewport shows it.
    #[must_use]
    pub fn of(request: &ApprovalRequest, palette: Palette, cwd: &Path) -> Self {
        Self {
            view: view(request, palette, cwd),
            request: request.clone(),
        }
    }
}

fn view(request: &ApprovalRequest, palette: Palette, cwd: &Path) -> QuestionView {
    let gyre_core::approvals::Question {
        tool: name,
        input,
        reason,
        always,
        ..
    } = &request.question;
    let name = name.as_str();
    if name == "ExitPlanMode" {
        let plan = input
            .get("plan")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return QuestionView {
            summary: name.to_owned(),
            details: Vec::new(),
            reason: String::new(),
            rule: name.to_owned(),
            selected: 0,
            plan: Some(PlanQuestion {
                lines: plan_lines(palette, plan),
                feedback: None,
            }),
        };
    }
    let summary = call_summary(name, input, cwd);
    let command = input.get("command").and_then(Value::as_str);
    let mut details = Vec::new();
    // The whole command, when the summary had to shorten it.
    if let Some(command) = command
        && !summary.ends_with(command)
    {
        details.extend(command.lines().map(|l| Line::from(format!("    {l}"))));
    }
    // "running `cmd` needs permission" says nothing the summary does not.
    let reason = if command.is_some_and(|c| reason.contains(c)) {
        String::new()
    } else {
        reason.clone()
    };
    QuestionView {
        summary,
        details,
        reason,
        rule: always.to_string(),
        selected: 0,
        plan: None,
    }
}

/// The plan as it goes into the scrollback: a heading, then the Markdown rendered and
/// indented under a bar.
#[must_use]
pub fn plan_lines(p: Palette, plan: &str) -> Vec<Line<'static>> {
    let mut markdown = MarkdownRenderer::new(p);
    let mut lines = vec![Line::default(), Line::from(p.bold("Here is gyre's plan:"))];
    lines.extend(plan.trim_end().lines().map(|l| {
        let mut spans = vec![p.dim("│"), Span::raw(" ")];
        spans.extend(markdown.render_line(l).spans);
        Line::from(spans)
    }));
    lines.push(Line::default());
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repl::style::ansi;
    use crate::repl::text::texts;

    #[test]
    fn a_plan_is_rendered_markdown_under_a_bar() {
        let lines = texts(&plan_lines(
            Palette::new(false),
            "## Steps\n\n1. Edit **a.rs**\n",
        ));
        assert_eq!(
            lines,
            vec![
                "",
                "Here is gyre's plan:",
                "│ ## Steps",
                "│ ",
                "│ 1. Edit **a.rs**",
                ""
            ]
        );
    }

    #[test]
    fn the_plan_s_bar_is_dim_and_its_markdown_styled() {
        let lines: Vec<String> = plan_lines(Palette::new(true), "1. Edit **a.rs**")
            .iter()
            .map(ansi)
            .collect();
        assert_eq!(
            lines,
            [
                "",
                "\x1b[1mHere is gyre's plan:\x1b[22m",
                "\x1b[2m│\x1b[22m 1. Edit \x1b[1ma.rs\x1b[22m",
                "",
            ]
        );
    }
}
