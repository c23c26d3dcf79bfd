//! The Skill tool: the model sees each skill's name and description in the tool's
//! description and, when one fits the task, calls `Skill {skill, args?}`; the result
//! is the skill's instructions (its `SKILL.md` body, after the folder that holds the
//! files it mentions), which the model follows from then on. Skills are read by
//! [`crate::commands`]; the session offers the tool only when there is one.

use std::borrow::Cow;

use gyre_tools::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::commands::CustomCommand;

/// The tool's name, as the reference calls it.
pub const SKILL_TOOL: &str = "Skill";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SkillInput {
    /// The skill's name, as listed in this tool's description
    skill: String,
    /// What the skill is for this time (file names, options), if anything
    #[serde(default)]
    args: Option<String>,
}

/// Whether the skill `name` is one of `selected` (an Agent SDK's `skills`): the same
/// name, or the part after the plugin's `plugin:` prefix.
#[must_use]
pub fn selected(name: &str, selected: &[String]) -> bool {
    selected.iter().any(|s| {
        let s = s.trim();
        name == s
            || name
                .strip_suffix(s)
                .is_some_and(|prefix| prefix.ends_with(':') && !s.is_empty())
    })
}

/// `Skill`: loads one of the session's skills into the conversation.
#[derive(Debug, Clone)]
pub struct SkillTool {
    skills: Vec<CustomCommand>,
}

impl SkillTool {
    /// The tool over these skills (`None` when there are none: nothing to offer).
    #[must_use]
    pub fn new(skills: &[CustomCommand]) -> Option<Self> {
        (!skills.is_empty()).then(|| Self {
            skills: skills.to_vec(),
        })
    }

    fn run(&self, input: &SkillInput) -> ToolOutput {
        let name = input.skill.trim().trim_start_matches('/');
        match self.skills.iter().find(|s| s.name == name) {
            Some(skill) => ToolOutput::ok(format!(
                "Launching skill: {name}\n\n{}",
                skill.prompt(input.args.as_deref().unwrap_or_default())
            )),
            None => ToolOutput::tool_use_error(format_args!(
                "Unknown skill: {name}. The skills are: {}",
                self.skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl Tool for SkillTool {
    fn name(&self) -> Cow<'static, str> {
        SKILL_TOOL.into()
    }

    fn description(&self) -> Cow<'static, str> {
        let mut text = String::from(
            "Loads a skill: instructions (and files beside them) for a kind of task. When the user's request matches a skill's description below, call this tool with the skill's name before doing the work, then follow the instructions it returns. A user typing /<name> has already loaded that skill: do not load it again.\n\n<available_skills>",
        );
        for skill in &self.skills {
            text.push_str(&format!("\n- {}: {}", skill.name, skill.description));
        }
        text.push_str("\n</available_skills>");
        text.into()
    }

    fn input_schema(&self) -> Value {
        gyre_tools::schema::input_schema::<SkillInput>()
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        // Reading the user's own or a trusted project's instructions; a `Skill` deny
        // rule still wins.
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        100_000
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        gyre_tools::call_with_input(
            input,
            move |input: SkillInput| async move { self.run(&input) },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    #[test]
    fn a_selection_names_a_skill_whole_or_after_its_plugin() {
        let pick = ["pdf".to_owned(), "tools:lint".to_owned()];
        assert!(super::selected("pdf", &pick));
        assert!(super::selected("docs:pdf", &pick));
        assert!(super::selected("tools:lint", &pick));
        assert!(!super::selected("lint", &pick));
        assert!(!super::selected("xpdf", &pick));
        assert!(!super::selected("docx", &pick));
    }

    use super::*;
    use crate::commands::{CommandKind, Origin};

    fn skill() -> CustomCommand {
        CustomCommand {
            name: "pdf".into(),
            description: "Work with PDF files".into(),
            argument_hint: None,
            allowed_tools: Vec::new(),
            model: None,
            body: "Use pdftotext on $ARGUMENTS.".into(),
            path: PathBuf::from("/skills/pdf/SKILL.md"),
            origin: Origin::User,
            kind: CommandKind::Skill {
                dir: PathBuf::from("/skills/pdf"),
            },
        }
    }

    #[test]
    fn no_skills_no_tool() {
        assert!(SkillTool::new(&[]).is_none());
    }

    #[test]
    fn the_description_lists_the_skills_and_a_call_loads_one() {
        let tool = SkillTool::new(&[skill()]).unwrap();
        assert!(tool.description().contains("- pdf: Work with PDF files"));
        let out = tool.run(&SkillInput {
            skill: "pdf".into(),
            args: Some("a.pdf".into()),
        });
        assert!(!out.is_error);
        assert!(
            out.content
                .contains("Base directory for this skill: /skills/pdf")
        );
        assert!(out.content.contains("Use pdftotext on a.pdf."));
        let unknown = tool.run(&SkillInput {
            skill: "nope".into(),
            args: None,
        });
        assert!(unknown.is_error);
        assert!(unknown.content.contains("The skills are: pdf"));
    }
}
