//! Permission questions: the [`PermissionPrompt`] the REPL plugs into the session hands
//! each question to the UI loop, which shows it in the viewport and answers on one key;
//! "always" can also write the rule to `.gyre/settings.local.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gyre_tools::{BoxFuture, PermissionPrompt, PromptAnswer, Tool, ToolCall};
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::markdown::MarkdownRenderer;
use super::style::Palette;
use super::tool_line::call_summary;
use super::view::{PlanQuestion, QuestionView};

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

    fn view(&self, tool: &dyn Tool, call: &ToolCall, reason: &str) -> QuestionView {
        let name = tool.name();
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
            rule: rule_for(name, &call.input),
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

/// The rule that allows this call again: the exact command for Bash, the tool for the
/// others.
#[must_use]
pub fn rule_for(name: &str, input: &Value) -> String {
    match input.get("command").and_then(Value::as_str) {
        Some(command) if name == "Bash" => format!("Bash({})", command.trim()),
        _ => name.to_owned(),
    }
}

impl PermissionPrompt for UiPrompt {
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
    ) -> BoxFuture<'a, PromptAnswer> {
        Box::pin(async move {
            let _one_at_a_time = self.asking.lock().await;
            let (reply, answer) = oneshot::channel();
            let question = Question {
                view: self.view(tool, call, reason),
                reply,
            };
            if self.questions.send(question).is_err() {
                return PromptAnswer::Deny;
            }
            answer.await.unwrap_or(PromptAnswer::Deny)
        })
    }
}

/// Adds `rule` to `permissions.allow` in `<project>/.gyre/settings.local.json`,
/// keeping everything else the file has. Returns the file's path.
///
/// # Errors
/// When the file is not a JSON object (it is then left as it was) or cannot be written.
pub fn save_allow_rule(project: &Path, rule: &str) -> Result<PathBuf> {
    let path = project.join(".gyre").join("settings.local.json");
    let mut settings = match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str::<Value>(&text)
            .with_context(|| format!("{} is not valid JSON; left unchanged", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => json!({}),
        Err(e) => return Err(e).with_context(|| format!("could not read {}", path.display())),
    };
    let Some(root) = settings.as_object_mut() else {
        anyhow::bail!("{} is not a JSON object; left unchanged", path.display());
    };
    let permissions = root
        .entry("permissions")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .with_context(|| format!("`permissions` in {} is not an object", path.display()))?;
    let allow = permissions
        .entry("allow")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .with_context(|| format!("`permissions.allow` in {} is not a list", path.display()))?;
    if !allow.iter().any(|r| r.as_str() == Some(rule)) {
        allow.push(Value::String(rule.to_owned()));
    }
    let dir = project.join(".gyre");
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(&settings)?;
    text.push('\n');
    // Written whole then renamed, so a crash never leaves half a settings file.
    let tmp = dir.join(".settings.local.json.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("could not write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("could not write {}", path.display()))?;
    Ok(path)
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

    #[test]
    fn bash_rules_name_the_command_other_tools_themselves() {
        assert_eq!(
            rule_for("Bash", &json!({"command": " cargo test "})),
            "Bash(cargo test)"
        );
        assert_eq!(rule_for("Edit", &json!({"file_path": "a.rs"})), "Edit");
    }

    #[test]
    fn saving_a_rule_keeps_what_the_file_had_and_adds_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let gyre = dir.path().join(".gyre");
        std::fs::create_dir_all(&gyre).unwrap();
        std::fs::write(
            gyre.join("settings.local.json"),
            r#"{"model": "m", "permissions": {"deny": ["Bash(rm:*)"]}}"#,
        )
        .unwrap();
        save_allow_rule(dir.path(), "Bash(ls)").unwrap();
        let path = save_allow_rule(dir.path(), "Bash(ls)").unwrap();
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(
            saved,
            json!({"model": "m", "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(ls)"]}})
        );
    }

    #[test]
    fn a_settings_file_that_is_not_json_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let gyre = dir.path().join(".gyre");
        std::fs::create_dir_all(&gyre).unwrap();
        std::fs::write(gyre.join("settings.local.json"), "{oops").unwrap();
        let err = save_allow_rule(dir.path(), "Read").unwrap_err();
        assert!(format!("{err:#}").contains("not valid JSON"), "{err:#}");
        assert_eq!(
            std::fs::read_to_string(gyre.join("settings.local.json")).unwrap(),
            "{oops"
        );
    }
}
