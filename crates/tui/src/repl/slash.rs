//! Slash commands typed at the prompt: `/compact`, `/clear`, `/cost`, `/model [name]`,
//! `/mcp`, `/bashes [kill ID]`, `/context`, `/status`, `/doctor`, `/permissions …`,
//! `/agents`, `/add-dir PATH`, `/export [FILE]`, `/init`, `/memory`, `/resume [N]`,
//! `/rewind`, `/hooks`, `/todos`, `/help`, `/exit`.

use gyre_protocol::Usage;

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashCommand {
    /// `/compact [instructions]`: summarize now, the instructions guiding the summary.
    Compact(Option<String>),
    Clear,
    Cost,
    /// `/model` shows the model, `/model NAME` switches to it.
    Model(Option<String>),
    /// The MCP servers, their state and tools.
    Mcp,
    /// `/bashes` opens the list of background shells; `/bashes kill ID` stops one.
    Bashes(Option<String>),
    /// What fills the context window, as a grid and by category.
    Context,
    /// Version, model, backend, credentials, settings, memory, MCP servers.
    Status,
    /// Checks the installation and configuration and says what to fix.
    Doctor,
    /// `/permissions` lists the rules; `/permissions add|remove …` changes one.
    Permissions(Option<String>),
    /// The sub-agents and where each comes from.
    Agents,
    /// `/add-dir PATH`: another directory the tools may work in.
    AddDir(Option<String>),
    /// `/export [FILE]`: the conversation as text, to a file or the clipboard.
    Export(Option<String>),
    /// Asks the model to write the project's memory file (CLAUDE.md).
    Init,
    /// Opens a memory file in `$VISUAL`/`$EDITOR`.
    Memory,
    /// `/resume` lists this folder's sessions; `/resume N` (or an id) continues one.
    Resume(Option<String>),
    /// `/rewind` (also `/checkpoint`, and Esc Esc): go back to before a prompt.
    Rewind,
    /// `/hooks`: the hooks configured, by event.
    Hooks,
    /// `/todos`: TodoWrite's list as it stands.
    Todos,
    Help,
    Exit,
    /// Anything else that starts with `/`: the command name as typed.
    Unknown(String),
}

impl SlashCommand {
    /// `None` when the line is a message for the model, not a command.
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.trim().strip_prefix('/')?;
        let (name, arg) = rest
            .split_once(char::is_whitespace)
            .map_or((rest, ""), |(n, a)| (n, a.trim()));
        let arg = (!arg.is_empty()).then(|| arg.to_owned());
        Some(match name {
            "compact" => Self::Compact(arg),
            "clear" | "reset" | "new" => Self::Clear,
            "cost" => Self::Cost,
            "model" => Self::Model(arg),
            "mcp" => Self::Mcp,
            "bashes" => Self::Bashes(arg),
            "context" => Self::Context,
            "status" => Self::Status,
            "doctor" => Self::Doctor,
            "permissions" | "allowed-tools" => Self::Permissions(arg),
            "agents" => Self::Agents,
            "add-dir" => Self::AddDir(arg),
            "export" => Self::Export(arg),
            "init" => Self::Init,
            "memory" => Self::Memory,
            "resume" | "continue" => Self::Resume(arg),
            "rewind" | "checkpoint" => Self::Rewind,
            "hooks" => Self::Hooks,
            "todos" => Self::Todos,
            "help" | "?" => Self::Help,
            "exit" | "quit" => Self::Exit,
            other => Self::Unknown(other.to_owned()),
        })
    }
}

/// What `/help` prints.
pub const HELP: &str = "\
Commands
  /compact [how]  summarize the conversation to free context (how: what to keep)
  /clear          start a new conversation (the transcript keeps the old one)
  /cost           cost, tokens and time of this session
  /model [name]   show the model, or switch to another
  /mcp            the MCP servers, their state and tools
  /bashes         background shells: ↑/↓ and k kill one (or /bashes kill ID)
  /context        what fills the context window, as a grid and by category
  /status         version, model, backend, credentials, settings, MCP servers
  /doctor         check the installation and configuration
  /permissions    the rules; /permissions add|remove allow|ask|deny RULE [where]
  /agents         the sub-agents and where each comes from
  /add-dir PATH   let the tools work in another directory too
  /export [FILE]  the conversation as text, to FILE or the clipboard
  /init           have the model write this project's CLAUDE.md
  /memory         edit the project's CLAUDE.md in $VISUAL or $EDITOR
  /resume [N]     this folder's sessions; /resume N continues the Nth
  /rewind         go back to before a prompt: code, conversation or both (Esc Esc)
  /hooks          the hooks configured, by event
  /todos          the todo list as the model last wrote it
  /help           this list
  /exit           quit (also Ctrl+D)

Keys
  Enter              send
  Ctrl+J, Alt+Enter  new line (or end the line with \\ and press Enter)
  Up / Down          history (kept in $GYRE_HOME/history); Ctrl+R searches it
  Tab                complete a /command, or a file after @
  @path              attach the file (as Read reads it) to the message
  !command           run your own shell command; the model sees it and its output
  Esc or Ctrl+C      interrupt the running turn; Ctrl+C twice quits
  Ctrl+D             quit at an empty box (also `exit` or `quit`)
  Ctrl+O             show the newest folded Bash output whole (again: the one before)
  Shift+Tab          switch the permission mode: default, acceptEdits, plan
  y / a / s / n      answer a permission question (or arrows and Enter): once,
                     this session, always in this folder (saved in
                     $GYRE_HOME/folder-rules.json), no
  1 / 2 / 3          answer a plan (ExitPlanMode): yes with edits auto-accepted,
                     yes with edits asking first, no and type what to change";

/// The custom commands and skills `/help` lists after gyre's own (nothing without any).
#[must_use]
pub fn custom_help(commands: &[gyre_core::commands::CommandInfo]) -> String {
    use gyre_core::commands::CommandKind;
    let mut out = String::new();
    for (title, skills) in [("Custom commands", false), ("Skills", true)] {
        let rows: Vec<String> = commands
            .iter()
            .filter(|c| matches!(c.kind, CommandKind::Skill { .. }) == skills)
            .filter(|c| c.kind != CommandKind::Builtin)
            .map(|c| {
                let usage = format!("/{} {}", c.name, c.argument_hint);
                format!("\n  {:<15} {}", usage.trim_end(), c.description)
            })
            .collect();
        if !rows.is_empty() {
            out.push_str(&format!("\n\n{title}{}", rows.concat()));
        }
    }
    out
}

/// What `/bashes` says when the session started no background shell.
pub const NO_SHELLS: &str =
    "No background shells. (The model starts them with Bash run_in_background.)";

/// `bash_1   running     12.3s  npm run dev`.
#[must_use]
pub fn shell_row(shell: &gyre_tools::background::ShellInfo) -> String {
    use gyre_tools::background::ShellStatus;
    let status = match shell.status {
        ShellStatus::Completed {
            exit_code: Some(code),
        } => format!("exit {code}"),
        other => other.name().to_owned(),
    };
    let runtime = format_duration(u64::try_from(shell.runtime.as_millis()).unwrap_or(u64::MAX));
    let command = gyre_term::tool_line::shorten(&shell.command, 60);
    format!("{:<8} {status:<9} {runtime:>7}  {command}", shell.id)
}

/// What `/cost` prints (the names Claude Code's `/cost` uses).
#[must_use]
pub fn cost_report(cost_usd: f64, usage: &Usage, api_ms: u64, wall_ms: u64) -> String {
    format!(
        "Total cost:            ${cost_usd:.4}\n\
         Total duration (API):  {}\n\
         Total duration (wall): {}\n\
         Usage:                 {} input, {} output, {} cache read, {} cache write",
        format_duration(api_ms),
        format_duration(wall_ms),
        thousands(usage.input_tokens),
        thousands(usage.output_tokens),
        thousands(usage.cache_read_input_tokens),
        thousands(usage.cache_creation_input_tokens),
    )
}

/// `850ms`, `12.3s`, `4m 5s`, `1h 2m`.
#[must_use]
pub fn format_duration(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0 => format!("{ms}ms"),
        1..60 => format!("{}.{}s", secs, (ms % 1000) / 100),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_without_a_leading_slash_are_messages() {
        assert_eq!(SlashCommand::parse("hello /cost"), None);
        assert_eq!(SlashCommand::parse(""), None);
    }

    #[test]
    fn known_commands_parse_with_their_argument() {
        assert_eq!(SlashCommand::parse("/cost"), Some(SlashCommand::Cost));
        assert_eq!(SlashCommand::parse("  /clear  "), Some(SlashCommand::Clear));
        assert_eq!(
            SlashCommand::parse("/compact keep the plan"),
            Some(SlashCommand::Compact(Some("keep the plan".to_owned())))
        );
        assert_eq!(
            SlashCommand::parse("/model"),
            Some(SlashCommand::Model(None))
        );
        assert_eq!(
            SlashCommand::parse("/model   claude-opus-4-1 "),
            Some(SlashCommand::Model(Some("claude-opus-4-1".to_owned())))
        );
        assert_eq!(SlashCommand::parse("/quit"), Some(SlashCommand::Exit));
        assert_eq!(SlashCommand::parse("/help"), Some(SlashCommand::Help));
    }

    #[test]
    fn a_shell_row_has_its_id_status_runtime_and_command() {
        use std::time::Duration;

        use gyre_tools::background::{ShellInfo, ShellStatus};
        assert_eq!(
            SlashCommand::parse("/bashes kill bash_2"),
            Some(SlashCommand::Bashes(Some("kill bash_2".to_owned())))
        );
        let running = ShellInfo {
            id: "bash_1".into(),
            command: "npm run dev".into(),
            status: ShellStatus::Running,
            runtime: Duration::from_millis(12_300),
        };
        assert_eq!(
            shell_row(&running),
            "bash_1   running     12.3s  npm run dev"
        );
        let done = ShellInfo {
            id: "bash_12".into(),
            command: "make".into(),
            status: ShellStatus::Completed { exit_code: Some(2) },
            runtime: Duration::from_millis(850),
        };
        assert_eq!(shell_row(&done), "bash_12  exit 2      850ms  make");
    }

    #[test]
    fn unknown_commands_keep_their_name() {
        assert_eq!(
            SlashCommand::parse("/frobnicate now"),
            Some(SlashCommand::Unknown("frobnicate".to_owned()))
        );
        assert_eq!(
            SlashCommand::parse("/"),
            Some(SlashCommand::Unknown(String::new()))
        );
    }

    #[test]
    fn cost_report_names_cost_durations_and_tokens() {
        let usage = Usage {
            input_tokens: 1_234_567,
            output_tokens: 80,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1000,
            ..Usage::default()
        };
        insta::assert_snapshot!(cost_report(0.01234, &usage, 1250, 125_000));
    }

    #[test]
    fn help_lists_custom_commands_and_skills_apart() {
        use gyre_core::commands::{CommandInfo, CommandKind};
        let info = |name: &str, hint: &str, kind: CommandKind| CommandInfo {
            name: name.to_owned(),
            description: format!("{name} it"),
            argument_hint: hint.to_owned(),
            kind,
        };
        let text = custom_help(&[
            info("compact", "", CommandKind::Builtin),
            info("review", "<file>", CommandKind::Custom),
            info(
                "pdf",
                "",
                CommandKind::Skill {
                    dir: "/s/pdf".into(),
                },
            ),
        ]);
        assert_eq!(
            text,
            "\n\nCustom commands\n  /review <file>  review it\n\nSkills\n  /pdf            pdf it"
        );
        assert_eq!(custom_help(&[]), "");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(850), "850ms");
        assert_eq!(format_duration(12_345), "12.3s");
        assert_eq!(format_duration(245_000), "4m 5s");
        assert_eq!(format_duration(3_720_000), "1h 2m");
    }
}
