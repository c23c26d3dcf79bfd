//! Permission questions: the [`PermissionPrompt`] the REPL plugs into the session hands
//! each question to the UI loop, which shows it in the viewport and answers on one key;
//! "always" also saves the rule for this folder in the user's config (`folder_rules`).

use std::path::PathBuf;

use gyre_tools::{BoxFuture, PermissionPrompt, PermissionRule, PromptAnswer, Tool, ToolCall};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::markdown::MarkdownRenderer;
use super::view::{PlanQuestion, QuestionView};
use gyre_term::style::Palette;
use gyre_term::tool_line::call_summary;

/// A question waiting for the user, and where the answer goes.
#[derive(Debug)]
pub struct Question {
    pub view: QuestionView,
    pub reply: oneshot::Sender<PromptAnswer>,
}

/// The REPL's [`PermissionPrompt`]. One question at a time, even when tools ask
/// concurrently; no UI to answer (the REPL has quit) means no.
#[derive(Debug)]
pub struct UiPrompt {
    questions: mpsc::UnboundedSender<Question>,
    palette: Palette,
    cwd: PathBuf,
    asking: Mutex<()>,
}

impl UiPrompt {
    #[must_use]
    pub fn new(questions: mpsc::UnboundedSender<Question>, palette: Palette, cwd: PathBuf) -> Self {
        Self {
            questions,
            palette,
            cwd,
            asking: Mutex::new(()),
        }
    }

    fn view(
        &self,
        tool: &dyn Tool,
        call: &ToolCall,
        reason: &str,
        always: &PermissionRule,
    ) -> QuestionView {
        let name = tool.name();
        let name = name.as_ref();
        if name == "ExitPlanMode" {
            let plan = call
                .input
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
                    lines: plan_lines(self.palette, plan),
                    feedback: None,
                }),
            };
        }
        let summary = call_summary(name, &call.input, &self.cwd);
        let command = call.input.get("command").and_then(Value::as_str);
        let mut details = Vec::new();
        // The whole command, when the summary had to shorten it.
        if let Some(command) = command
            && !summary.ends_with(command)
        {
            details.extend(command.lines().map(|l| format!("    {l}")));
        }
        // "running `cmd` needs permission" says nothing the summary does not.
        let reason = if command.is_some_and(|c| reason.contains(c)) {
            String::new()
        } else {
            reason.to_owned()
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
}

/// The plan as it goes into the scrollback: a heading, then the Markdown rendered and
/// indented under a bar.
#[must_use]
pub fn plan_lines(p: Palette, plan: &str) -> Vec<String> {
    let mut markdown = MarkdownRenderer::new(p);
    let mut lines = vec![String::new(), p.bold("Here is gyre's plan:")];
    lines.extend(
        plan.trim_end()
            .lines()
            .map(|l| format!("{} {}", p.dim("│"), markdown.render_line(l))),
    );
    lines.push(String::new());
    lines
}

impl PermissionPrompt for UiPrompt {
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
        always: &'a PermissionRule,
    ) -> BoxFuture<'a, PromptAnswer> {
        Box::pin(async move {
            let _one_at_a_time = self.asking.lock().await;
            let (reply, answer) = oneshot::channel();
            let question = Question {
                view: self.view(tool, call, reason, always),
                reply,
            };
            if self.questions.send(question).is_err() {
                return PromptAnswer::Deny;
            }
            answer.await.unwrap_or(PromptAnswer::Deny)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_rendered_markdown_under_a_bar() {
        let lines = plan_lines(Palette::new(false), "## Steps\n\n1. Edit **a.rs**\n");
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
}
