//! What a prompt becomes before the model sees it: `/name args` of a custom command or
//! a skill as its instructions, `@path` mentions as the files' contents, and a shell
//! command the user ran (`!cmd` in the REPL) as its output.
//!
//! Files are read and commands run by gyre-tools' own Read and Bash, through
//! `run_tool_call`, so a file is bounded as Read bounds it and a command runs as Bash
//! runs one (its process group, timeout, sandbox). Who asked decides the permission:
//! what the user typed runs without a question (but a `Read(…)` deny rule still hides
//! a file), while a command file's `!` lines and `@` files are the file's words, not
//! the user's: they run under the rules the model's calls do, and what those would
//! ask about is refused unless the command's `allowed-tools` allow it.

use std::path::Path;
use std::sync::Arc;

use gyre_protocol::ContentBlock;
use gyre_tools::bash::BashTool;
use gyre_tools::read::ReadTool;
use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, PermissionMode, Permissions, Tool, ToolCall,
    ToolContext, ToolRegistry,
};
use serde_json::json;

use crate::commands::{CommandKind, CustomCommand};

/// Who wrote what is run or read.
#[derive(Debug, Clone)]
pub enum Author {
    /// The user, at the prompt.
    User,
    /// A command file, with its `allowed-tools`.
    Command { allowed_tools: Vec<String> },
}

/// A `CanUseTool` for what a prompt expands: [`Author`] decides.
struct ExpansionPolicy {
    permissions: Arc<Permissions>,
    author: Author,
}

impl CanUseTool for ExpansionPolicy {
    fn can_use_tool<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async move {
            match &self.author {
                // The user typed the command; a file they name is still behind the
                // deny rules.
                Author::User if tool.name() == "Bash" => PermissionDecision::Allow,
                Author::User => match self.permissions.evaluate(tool, call, ctx) {
                    deny @ PermissionDecision::Deny { .. } => deny,
                    PermissionDecision::Allow | PermissionDecision::Ask { .. } => {
                        PermissionDecision::Allow
                    }
                },
                Author::Command { allowed_tools } => {
                    match self.permissions.evaluate(tool, call, ctx) {
                        PermissionDecision::Ask { reason } => {
                            let own = Permissions::from_rules(
                                PermissionMode::Default,
                                allowed_tools,
                                &[] as &[String],
                                &[],
                            );
                            match own.map(|p| p.evaluate(tool, call, ctx)) {
                                Ok(PermissionDecision::Allow) => PermissionDecision::Allow,
                                _ => PermissionDecision::Deny {
                                    reason: format!(
                                        "not run: {reason}; allow it in the command's `allowed-tools` or in permissions.allow"
                                    ),
                                },
                            }
                        }
                        decision => decision,
                    }
                }
            }
        })
    }
}

/// Runs Bash and Read for a prompt's expansion.
#[derive(Clone)]
pub struct Expander {
    ctx: ToolContext,
    permissions: Arc<Permissions>,
}

impl std::fmt::Debug for Expander {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expander").finish_non_exhaustive()
    }
}

/// What a shell command gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutput {
    /// stdout and stderr, as Bash returns them (`Exit code N` first on failure).
    pub output: String,
    pub is_error: bool,
}

impl Expander {
    /// In the session's tool context, under the policy in force now.
    #[must_use]
    pub fn new(ctx: ToolContext, permissions: Arc<Permissions>) -> Self {
        Self { ctx, permissions }
    }

    async fn run(&self, author: Author, name: &str, input: serde_json::Value) -> ShellOutput {
        let registry = ToolRegistry::new()
            .with(Arc::new(BashTool))
            .with(Arc::new(ReadTool));
        let policy = ExpansionPolicy {
            permissions: Arc::clone(&self.permissions),
            author,
        };
        let call = ToolCall {
            id: format!("expansion_{}", uuid::Uuid::new_v4().simple()),
            name: name.to_owned(),
            input,
        };
        let outcome =
            gyre_tools::run_tool_call(&registry, &call, &self.ctx, &policy, &|_| {}).await;
        ShellOutput {
            output: outcome.output.content,
            is_error: outcome.output.is_error,
        }
    }

    /// Runs `command` with Bash.
    pub async fn shell(&self, author: Author, command: &str) -> ShellOutput {
        self.run(author, "Bash", json!({ "command": command }))
            .await
    }

    /// Reads `path` (relative to the working directory, or `~/…`) with Read; `None`
    /// when there is no such file (the `@` was not a mention).
    pub async fn read(&self, author: Author, path: &str) -> Option<(String, ShellOutput)> {
        let resolved = self.ctx.resolve(&expand_home(path));
        if !resolved.is_file() {
            return None;
        }
        let file = resolved.display().to_string();
        let out = self.run(author, "Read", json!({ "file_path": file })).await;
        Some((file, out))
    }

    /// `text`'s `@path` mentions of existing files as blocks of their contents.
    pub async fn mentions(&self, author: &Author, text: &str) -> Vec<ContentBlock> {
        let mut blocks = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for mention in mentions(text) {
            if seen.iter().any(|m| m == mention) {
                continue;
            }
            seen.push(mention.to_owned());
            if let Some((file, out)) = self.read(author.clone(), mention).await {
                blocks.push(ContentBlock::text(file_block(&file, &out)));
            }
        }
        blocks
    }

    /// `/name args` of `command`: its prompt (its `!` lines run, their output in
    /// their place), then the files its `@` mentions name. A skill's text is taken as
    /// it is.
    pub async fn command(&self, command: &CustomCommand, args: &str) -> Vec<ContentBlock> {
        let mut text = command.prompt(args);
        let mut attached = Vec::new();
        if command.kind == CommandKind::Custom {
            let author = Author::Command {
                allowed_tools: command.allowed_tools.clone(),
            };
            text = self.inline_shell(&author, &text).await;
            attached = self.mentions(&author, &text).await;
        }
        let mut blocks = vec![
            ContentBlock::text(format!(
                "<command-name>/{}</command-name>\n<command-args>{}</command-args>",
                command.name,
                args.trim()
            )),
            ContentBlock::text(text),
        ];
        blocks.extend(attached);
        blocks
    }

    /// Each !`cmd` of `text` replaced by what `cmd` printed.
    async fn inline_shell(&self, author: &Author, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find("!`") {
            let after = &rest[at + 2..];
            let Some(end) = after.find('`') else {
                break;
            };
            out.push_str(&rest[..at]);
            let command = &after[..end];
            let ran = self.shell(author.clone(), command).await;
            out.push_str(ran.output.trim_end());
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// `~/x` under the home folder.
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest).display().to_string(),
        _ => path.to_owned(),
    }
}

/// A file's contents as the model gets them.
fn file_block(file: &str, out: &ShellOutput) -> String {
    if out.is_error {
        format!(
            "<file path=\"{file}\" error=\"true\">\n{}\n</file>",
            out.output
        )
    } else {
        format!("<file path=\"{file}\">\n{}\n</file>", out.output)
    }
}

/// The `@path` words of `text`: an `@` at the start or after white space, up to the
/// next white space, trailing punctuation dropped. Mentions inside code spans and
/// code blocks are left alone.
#[must_use]
pub fn mentions(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut in_span = false;
        let mut previous = ' ';
        for (i, c) in line.char_indices() {
            if c == '`' {
                in_span = !in_span;
            } else if c == '@' && !in_span && previous.is_whitespace() {
                let word = line[i + 1..]
                    .split(char::is_whitespace)
                    .next()
                    .unwrap_or_default()
                    .trim_end_matches([',', '.', ';', ':', ')', '!', '?', '"', '\'', '`']);
                if !word.is_empty() {
                    found.push(word);
                }
            }
            previous = c;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_at_words_outside_code() {
        assert_eq!(
            mentions("look at @src/lib.rs, and @README.md. mail a@b.c"),
            ["src/lib.rs", "README.md"]
        );
        assert_eq!(mentions("`@not` this\n```\n@nor this\n```\n@yes"), ["yes"]);
        assert!(mentions("@").is_empty());
    }

    #[tokio::test]
    async fn a_user_mention_reads_the_file_unless_a_deny_rule_names_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "hidden").unwrap();
        let ctx = ToolContext::new(dir.path());
        let permissions = Permissions::from_rules(
            PermissionMode::Default,
            &[] as &[&str],
            &[],
            &["Read(./secret.txt)"],
        )
        .unwrap();
        let expander = Expander::new(ctx, Arc::new(permissions));
        let blocks = expander
            .mentions(&Author::User, "see @notes.txt and @secret.txt and @missing")
            .await;
        assert_eq!(blocks.len(), 2);
        let text: Vec<String> = blocks
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text, .. } => text.clone(),
                other => format!("{other:?}"),
            })
            .collect();
        assert!(text[0].contains("1\talpha"), "{}", text[0]);
        assert!(text[1].contains("error=\"true\""), "{}", text[1]);
        assert!(!text[1].contains("hidden"), "{}", text[1]);
    }

    #[tokio::test]
    async fn a_command_line_runs_only_where_the_rules_allow_it() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        let permissions =
            Permissions::from_rules(PermissionMode::Default, &[] as &[&str], &[], &[]).unwrap();
        let expander = Expander::new(ctx, Arc::new(permissions));
        let refused = expander
            .inline_shell(
                &Author::Command {
                    allowed_tools: Vec::new(),
                },
                "before !`echo ran-it` after",
            )
            .await;
        assert!(!refused.contains("ran-it\n"), "{refused}");
        assert!(refused.contains("not run"), "{refused}");
        let allowed = expander
            .inline_shell(
                &Author::Command {
                    allowed_tools: vec!["Bash(echo:*)".to_owned()],
                },
                "before !`echo ran-it` after",
            )
            .await;
        assert_eq!(allowed, "before ran-it after");
        let typed = expander.shell(Author::User, "echo typed").await;
        assert_eq!(typed.output.trim(), "typed");
    }
}
