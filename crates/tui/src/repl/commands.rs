//! The slash commands that report on or change the session around the conversation:
//! `/context`, `/status`, `/doctor`, `/permissions`, `/agents`, `/add-dir`, `/export`,
//! `/init` and `/memory`. The facts and changes are gyre-core's; this is the terminal
//! side.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use gyre_core::Resume;
use gyre_core::approvals::{PermissionUpdate, RuleBehavior};
use gyre_core::rule_files::{self, Destination};
use gyre_core::sessions::SessionSummary;
use gyre_tools::PermissionRule;
use ratatui::text::{Line, Span};

use super::reports::{self, PERMISSIONS_USAGE};
use super::style::PaletteSpans;
use super::ui::Ui;
use super::{Flow, Repl, Result};

/// What `/init` asks the model.
pub const INIT_PROMPT: &str = "Please analyze this codebase and create a CLAUDE.md file in the working directory: it is read at the start of every session, so it should hold what a new contributor (or coding agent) needs and cannot see at a glance. Include the commands to build, test (all and a single test) and lint; the architecture in broad strokes (the parts and how they fit, not a list of every file); and the conventions the code follows. Read the README, the build files and any existing CLAUDE.md, AGENTS.md, .cursorrules or .github/copilot-instructions.md first; if a CLAUDE.md exists, improve it rather than replace it. Keep it short and concrete; do not invent anything you did not find.";

/// The memory file `/memory` edits: the project's CLAUDE.md.
const MEMORY_FILE: &str = "CLAUDE.md";

impl Repl {
    /// `/context`.
    pub(super) fn context_report(&self) -> Vec<Line<'static>> {
        reports::context(&self.session.context_breakdown(), self.front.palette)
    }

    /// `/status`.
    pub(super) fn status_report(&self) -> Vec<Line<'static>> {
        let rows = gyre_core::status::status(&self.session, &self.front.home);
        reports::rows("Status", &rows, self.front.palette)
    }

    /// `/doctor`.
    pub(super) fn doctor_report(&self) -> Vec<Line<'static>> {
        let checks = gyre_core::status::doctor(&self.session, &self.env);
        reports::doctor(&checks, self.front.palette)
    }

    /// `/agents`.
    pub(super) fn agents_report(&self) -> Vec<Line<'static>> {
        let home = self.env.home();
        let list: Vec<(String, &'static str, String)> = self
            .session
            .agents
            .definitions()
            .into_iter()
            .map(|def| {
                let source =
                    gyre_core::agents::source_of(&def.name, home.as_deref(), &self.front.cwd);
                (def.name, source, def.description)
            })
            .collect();
        reports::agents(&list, self.front.palette)
    }

    /// `/permissions [add|remove allow|ask|deny RULE [session|local|project|user]]`.
    pub(super) fn permissions(&self, arg: Option<&str>) -> Vec<Line<'static>> {
        let p = self.front.palette;
        let Some(arg) = arg else {
            return reports::permissions(
                &self.session.gate.mode_name(),
                &self.session.gate.rules(),
                p,
            );
        };
        match self.change_rule(arg) {
            Ok(done) => vec![Line::from(done)],
            Err(e) => vec![
                Line::from(p.red(e)),
                Line::from(p.dim(PERMISSIONS_USAGE.trim_start().to_owned())),
            ],
        }
    }

    /// Applies `/permissions add|remove …` to the session and, when asked, to a
    /// settings file; what was done, or what is wrong with the command.
    fn change_rule(&self, arg: &str) -> std::result::Result<String, String> {
        let (verb, rest) = arg.split_once(char::is_whitespace).unwrap_or((arg, ""));
        let add = match verb {
            "add" => true,
            "remove" | "rm" => false,
            other => return Err(format!("/permissions {other}: expected add or remove")),
        };
        let rest = rest.trim();
        let (kind, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let behavior = match kind {
            "allow" => RuleBehavior::Allow,
            "ask" => RuleBehavior::Ask,
            "deny" => RuleBehavior::Deny,
            other => return Err(format!("{other:?} is not allow, ask or deny")),
        };
        let rest = rest.trim();
        let (rule_text, destination) = match rest.rsplit_once(char::is_whitespace) {
            Some((rule, last)) if Destination::parse(last).is_some() => {
                (rule.trim(), Destination::parse(last))
            }
            _ => (rest, None),
        };
        let destination = destination.unwrap_or(Destination::Session);
        if rule_text.is_empty() {
            return Err("no rule given (e.g. Bash(npm test), Edit(src/**), WebFetch)".into());
        }
        let rule: PermissionRule = rule_text.parse().map_err(|e| format!("{rule_text}: {e}"))?;
        let update = if add {
            PermissionUpdate::AddRules {
                behavior,
                rules: vec![rule.clone()],
            }
        } else {
            PermissionUpdate::RemoveRules {
                behavior,
                rules: vec![rule.clone()],
            }
        };
        self.session
            .gate
            .apply_updates(&[update])
            .map_err(|e| e.to_string())?;
        let kind = rule_files::key(behavior);
        let verb = if add { "Added" } else { "Removed" };
        match destination.file(&self.front.home, &self.front.cwd) {
            None => Ok(format!("{verb} {kind} rule {rule} for this session")),
            Some(path) => {
                let changed = rule_files::edit_rule(&path, behavior, &rule.to_string(), add)
                    .map_err(|e| e.to_string())?;
                let note = if changed {
                    ""
                } else {
                    " (the file had it so already)"
                };
                Ok(format!(
                    "{verb} {kind} rule {rule}: this session and {}{note}",
                    path.display()
                ))
            }
        }
    }

    /// `/add-dir PATH`.
    pub(super) fn add_dir(&mut self, arg: Option<&str>) -> Span<'static> {
        let p = self.front.palette;
        let Some(arg) = arg else {
            return p.red("Usage: /add-dir PATH (a directory the tools may also work in)");
        };
        let path = expand_home(arg, self.env.home().as_deref());
        let path = if path.is_absolute() {
            path
        } else {
            self.front.cwd.join(path)
        };
        match path.canonicalize() {
            Ok(dir) if dir.is_dir() => {
                self.session.engine.add_working_dir(dir.clone());
                format!(
                    "Added {} as a working directory for this session",
                    dir.display()
                )
                .into()
            }
            Ok(_) => p.red(format!("{arg}: not a directory")),
            Err(e) => p.red(format!("{arg}: {e}")),
        }
    }

    /// `/export [FILE]`: the conversation to FILE, or to the clipboard through OSC 52.
    pub(super) fn export(&mut self, arg: Option<&str>) -> Result<Span<'static>> {
        let p = self.front.palette;
        let text = gyre_core::export::conversation_text(self.session.engine.messages());
        if text.is_empty() {
            return Ok(p.dim("Nothing to export yet."));
        }
        if let Some(file) = arg {
            let path = expand_home(file, self.env.home().as_deref());
            let path = if path.is_absolute() {
                path
            } else {
                self.front.cwd.join(path)
            };
            return Ok(match std::fs::write(&path, &text) {
                Ok(()) => format!("Conversation exported to {}", path.display()).into(),
                Err(e) => p.red(format!("Could not write {}: {e}", path.display())),
            });
        }
        // OSC 52: the terminal (and tmux with set-clipboard) puts it on the clipboard.
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
        let mut stdout = std::io::stdout();
        write!(stdout, "\x1b]52;c;{encoded}\x07")?;
        stdout.flush()?;
        Ok(format!(
            "Conversation copied to the clipboard ({} lines; terminals without OSC 52 ignore it: /export FILE writes a file)",
            text.lines().count()
        )
        .into())
    }

    /// `/init`: the model writes the project's memory file.
    pub(super) async fn init(&mut self) -> Result<Flow> {
        self.turn(INIT_PROMPT).await
    }

    /// `/memory`: opens the project's CLAUDE.md in `$VISUAL` or `$EDITOR` (else `vi`),
    /// the UI handing the terminal over until the editor exits.
    pub(super) fn memory(&mut self) -> Result<Span<'static>> {
        let p = self.front.palette;
        let path = self.front.cwd.join(MEMORY_FILE);
        let editor = self
            .env
            .var("VISUAL")
            .or_else(|| self.env.var("EDITOR"))
            .filter(|e| !e.trim().is_empty())
            .unwrap_or_else(|| "vi".to_owned());
        let color = self.front.palette.color();
        let frame_log = self.front.ui.frame_log();
        self.front.ui.finish()?;
        // The editor's name may carry flags (`code --wait`): the shell splits it.
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{editor} \"$1\""))
            .arg("sh")
            .arg(&path)
            .current_dir(&self.front.cwd)
            .status();
        self.front.ui = Ui::start(color, frame_log)?;
        Ok(match status {
            Ok(s) if s.success() => {
                let note = if path.is_file() {
                    "; the next session reads it (this one keeps its system prompt)"
                } else {
                    " (not saved)"
                };
                format!("Edited {}{note}", path.display()).into()
            }
            Ok(s) => p.red(format!(
                "{editor} exited with {s}; {} unchanged?",
                path.display()
            )),
            Err(e) => p.red(format!("Could not run {editor}: {e}; set $EDITOR")),
        })
    }
}

impl Repl {
    /// `/resume`: this folder's other sessions, numbered, newest first; `/resume N` (or
    /// an id, or the start of one) continues that session in place of this one.
    pub(super) async fn resume(&mut self, arg: Option<&str>) -> Result<Vec<Line<'static>>> {
        let p = self.front.palette;
        let current = self.session.facts.session_id.clone();
        let sessions: Vec<SessionSummary> =
            gyre_core::sessions::list(&self.front.home, &self.front.cwd)
                .into_iter()
                .filter(|s| s.id != current && s.turns > 0)
                .collect();
        let Some(arg) = arg else {
            if sessions.is_empty() {
                return Ok(vec![Line::from(
                    p.dim("No other sessions in this folder yet."),
                )]);
            }
            let mut lines = vec![Line::from(p.bold("Sessions of this folder"))];
            for (n, s) in sessions.iter().enumerate() {
                let when = s
                    .timestamp
                    .get(..16)
                    .unwrap_or(&s.timestamp)
                    .replace('T', " ");
                let prompt: String = s.first_prompt.replace('\n', " ").chars().take(50).collect();
                lines.push(Line::from(vec![
                    Span::raw(format!("  {:>2}. ", n + 1)),
                    Span::raw(prompt),
                    p.dim(format!(
                        "  · {when} · {} turn{} · {}",
                        s.turns,
                        if s.turns == 1 { "" } else { "s" },
                        s.id
                    )),
                ]));
            }
            lines.push(Line::from(p.dim("/resume N continues the Nth")));
            return Ok(lines);
        };
        let chosen = match arg.parse::<usize>() {
            Ok(n) if (1..=sessions.len()).contains(&n) => Some(&sessions[n - 1]),
            Ok(_) => None,
            Err(_) => sessions.iter().find(|s| s.id.starts_with(arg)),
        };
        let Some(chosen) = chosen else {
            return Ok(vec![Line::from(
                p.red(format!("No session {arg} here · /resume lists them")),
            )]);
        };
        let mut options = self.options.clone();
        options.resume = Resume::Id(chosen.id.clone());
        options.session_id = None;
        options.fork_session = false;
        let session = match super::open_session(
            &options,
            &self.front.cwd,
            &self.settings,
            &self.env,
            &self.verdicts_tx,
        )
        .await
        {
            Ok(session) => session,
            Err(e) => return Ok(vec![Line::from(p.red(format!("Could not resume: {e}")))]),
        };
        if !self.sent {
            super::discard_empty_transcript(&self.front.home, &self.front.cwd, &self.session.facts);
        }
        self.session = session;
        self.sent = true;
        self.front.control = self.session.control();
        self.front.shells = self.session.engine.tools().background_shells().cloned();
        self.front.status.model = self.session.facts.model();
        self.front.status.mode = self.session.facts.permission_mode.clone();
        self.front.status.context = None;
        let text = gyre_core::export::conversation_text(self.session.engine.messages());
        let tail: Vec<&str> = text.lines().collect();
        let mut lines = vec![Line::from(vec![
            Span::raw("Resumed "),
            p.bold(chosen.id.clone()),
            p.dim(format!(
                " · {} messages",
                self.session.engine.messages().len()
            )),
        ])];
        lines.extend(
            tail[tail.len().saturating_sub(RESUME_TAIL_LINES)..]
                .iter()
                .map(|l| Line::from(p.dim((*l).to_owned()))),
        );
        Ok(lines)
    }
}

/// Lines of the resumed conversation `/resume` shows.
const RESUME_TAIL_LINES: usize = 12;

/// `~/x` under `home`; any other path as it is.
fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}
