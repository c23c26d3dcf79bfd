//! The session's slash commands, as one list: gyre's own, the custom commands of
//! `commands/*.md` files and the skills of `skills/<name>/SKILL.md` folders.
//!
//! Custom commands and skills come from the user's folders (`~/.claude` and
//! `$GYRE_HOME`) and the project's (`.claude` and `.gyre` in the working directory,
//! only once the folder is trusted: a cloned repository ships them, and their words
//! become the model's instructions, their `!` lines commands). `--setting-sources`
//! (the SDK's `settingSources`) decides whether the user's and the project's load at
//! all. A command's file is Markdown with an optional front matter (`description`,
//! `argument-hint`, `allowed-tools`, `model`); its body is the prompt, with
//! `$ARGUMENTS` and `$1`…`$9` replaced by what followed `/name`. A file in a subfolder
//! is `/dir:name`. A skill's `SKILL.md` names and describes it (`name`,
//! `description`, optional `allowed-tools`); the model sees the descriptions and
//! loads a skill's instructions with the Skill tool (`crate::skills`), the user with
//! `/name args`.
//!
//! Nothing is read at start-up but whether the skill folders exist: the commands are
//! read the first time a prompt starts with `/` or a front-end lists them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where a custom command or skill came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `~/.claude` or `$GYRE_HOME`.
    User,
    /// The project's `.claude` or `.gyre` (a trusted folder only).
    Project,
}

/// What a command is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandKind {
    /// One of gyre's own (`/compact`, …), run by the front-end.
    Builtin,
    /// A `commands/*.md` file.
    Custom,
    /// A skill: its folder holds `SKILL.md` and the files it mentions.
    Skill { dir: PathBuf },
}

/// One entry of the list a front-end shows (`/help`, completion, the SDK's
/// `initialize`, ACP's available commands).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    /// Without the `/`.
    pub name: String,
    pub description: String,
    /// What the arguments are, e.g. `<file> [focus]`; empty when none is given.
    pub argument_hint: String,
    pub kind: CommandKind,
}

/// A custom command or a skill read from its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomCommand {
    /// Without the `/`; `dir:name` for a command in a subfolder.
    pub name: String,
    pub description: String,
    pub argument_hint: Option<String>,
    /// Rules (`Bash(git status:*)`, `Read`) under which the command's `!` lines run
    /// without a question.
    pub allowed_tools: Vec<String>,
    /// The model its turn runs with.
    pub model: Option<String>,
    /// The instructions (the file after its front matter).
    pub body: String,
    pub path: PathBuf,
    pub origin: Origin,
    /// [`CommandKind::Custom`] or [`CommandKind::Skill`].
    pub kind: CommandKind,
}

impl CustomCommand {
    /// The entry of the command list.
    #[must_use]
    pub fn info(&self) -> CommandInfo {
        CommandInfo {
            name: self.name.clone(),
            description: self.description.clone(),
            argument_hint: self.argument_hint.clone().unwrap_or_default(),
            kind: self.kind.clone(),
        }
    }

    /// Whether it is a skill.
    #[must_use]
    pub fn is_skill(&self) -> bool {
        matches!(self.kind, CommandKind::Skill { .. })
    }

    /// The prompt `/name args` sends: the body with `$ARGUMENTS` and `$1`…`$9`
    /// replaced; arguments the body has no place for follow it as `ARGUMENTS: …`, as
    /// the reference does. A skill's body starts with the folder its files are in.
    #[must_use]
    pub fn prompt(&self, args: &str) -> String {
        let (body, placed) = substitute_arguments(&self.body, args);
        let mut text = match &self.kind {
            CommandKind::Skill { dir } => {
                format!("Base directory for this skill: {}\n\n{body}", dir.display())
            }
            CommandKind::Builtin | CommandKind::Custom => body,
        };
        if !placed && !args.trim().is_empty() {
            text.push_str(&format!("\n\nARGUMENTS: {}", args.trim()));
        }
        text
    }
}

/// gyre's own commands: name, description, argument hint. Which a front-end runs is
/// its own business ([`Commands::list`] takes the names it offers).
pub const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "compact",
        "Summarise the conversation so far to free context",
        "<what to keep>",
    ),
    (
        "clear",
        "Start the conversation afresh (the transcript keeps the old one)",
        "",
    ),
    ("cost", "Cost, tokens and time of this session", ""),
    ("model", "Show the model, or switch to another", "[name]"),
    ("mcp", "The MCP servers, their state and tools", ""),
    (
        "bashes",
        "Background shells: list them, kill one",
        "[kill ID]",
    ),
    (
        "context",
        "What fills the context window, as a grid and by category",
        "",
    ),
    (
        "status",
        "Version, model, backend, credentials, settings, MCP servers",
        "",
    ),
    ("doctor", "Check the installation and configuration", ""),
    (
        "permissions",
        "The permission rules: list, add or remove one",
        "[add|remove allow|ask|deny RULE [where]]",
    ),
    ("agents", "The sub-agents and where each comes from", ""),
    (
        "add-dir",
        "Let the tools work in another directory too",
        "<path>",
    ),
    (
        "export",
        "The conversation as text, to a file or the clipboard",
        "[file]",
    ),
    ("init", "Have the model write this project's CLAUDE.md", ""),
    (
        "memory",
        "Edit the project's CLAUDE.md in $VISUAL or $EDITOR",
        "",
    ),
    (
        "resume",
        "This folder's sessions; continue the Nth",
        "[N|id]",
    ),
    (
        "rewind",
        "Go back to before a prompt: code, conversation or both",
        "",
    ),
    ("hooks", "The hooks configured, by event", ""),
    ("todos", "The todo list as the model last wrote it", ""),
    ("help", "The commands and keys", ""),
    ("exit", "Quit", ""),
];

/// The folders commands and skills are read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandRoots {
    /// Configuration folders, in order of precedence: each holds `commands/` and
    /// `skills/`.
    roots: Vec<(PathBuf, Origin)>,
}

impl CommandRoots {
    /// The user's folders (`~/.claude`, then `$GYRE_HOME`) when `user`, the project's
    /// (`.claude`, `.gyre` in `cwd`) when `project` — which the caller only asks for
    /// in a trusted folder.
    #[must_use]
    pub fn new(
        home: Option<&Path>,
        gyre_home: &Path,
        cwd: &Path,
        user: bool,
        project: bool,
    ) -> Self {
        let mut roots = Vec::new();
        if user {
            if let Some(home) = home {
                roots.push((home.join(".claude"), Origin::User));
            }
            roots.push((gyre_home.to_path_buf(), Origin::User));
        }
        if project {
            roots.push((cwd.join(".claude"), Origin::Project));
            roots.push((cwd.join(".gyre"), Origin::Project));
        }
        Self { roots }
    }

    /// These roots and then the plugin folders `dirs` (each holding `commands/` and
    /// `skills/`), last in precedence.
    #[must_use]
    pub fn with_plugins(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.roots
            .extend(dirs.into_iter().map(|dir| (dir, Origin::User)));
        self
    }

    /// Whether `--setting-sources` (`None`: every source) names `source`.
    #[must_use]
    pub fn source_enabled(setting_sources: Option<&str>, source: &str) -> bool {
        setting_sources.is_none_or(|list| list.split(',').any(|s| s.trim() == source))
    }

    /// Whether some root has a `skills/` folder (a stat each, at start-up).
    #[must_use]
    pub fn has_skills(&self) -> bool {
        self.roots.iter().any(|(r, _)| r.join("skills").is_dir())
    }

    /// Every skill, the first of a name winning; unreadable ones come back as errors.
    #[must_use]
    pub fn load_skills(&self) -> (Vec<CustomCommand>, Vec<String>) {
        let mut found = Vec::new();
        let mut errors = Vec::new();
        for (root, origin) in &self.roots {
            let Ok(entries) = std::fs::read_dir(root.join("skills")) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("SKILL.md").is_file())
                .collect();
            dirs.sort();
            for dir in dirs {
                match read_skill(&dir, *origin) {
                    Ok(skill) => push_new(&mut found, skill),
                    Err(e) => errors.push(e),
                }
            }
        }
        (found, errors)
    }

    /// Every custom command (`commands/**/*.md`), the first of a name winning.
    #[must_use]
    pub fn load_commands(&self) -> (Vec<CustomCommand>, Vec<String>) {
        let mut found = Vec::new();
        let mut errors = Vec::new();
        for (root, origin) in &self.roots {
            let base = root.join("commands");
            let mut files = Vec::new();
            markdown_files(&base, 0, &mut files);
            files.sort();
            for path in files {
                let Some(name) = command_name(&base, &path) else {
                    continue;
                };
                match read_command(&path, name, *origin) {
                    Ok(command) => push_new(&mut found, command),
                    Err(e) => errors.push(e),
                }
            }
        }
        (found, errors)
    }
}

/// What an untrusted project's `.claude`/`.gyre` folders would add (for the notice
/// that names what was not used): `skills "a", "b" and custom commands "c" in .claude,
/// .gyre`, or `None`.
#[must_use]
pub fn project_untrusted_item(cwd: &Path) -> Option<String> {
    let roots = CommandRoots::new(None, Path::new(""), cwd, false, true);
    let quoted = |found: Vec<CustomCommand>| -> String {
        found
            .iter()
            .map(|c| format!("\"{}\"", c.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (skills, _) = roots.load_skills();
    let (commands, _) = roots.load_commands();
    let parts: Vec<String> = [("skills", skills), ("custom commands", commands)]
        .into_iter()
        .filter(|(_, found)| !found.is_empty())
        .map(|(what, found)| format!("{what} {}", quoted(found)))
        .collect();
    (!parts.is_empty()).then(|| format!("{} in .claude, .gyre", parts.join(" and ")))
}

fn push_new(found: &mut Vec<CustomCommand>, command: CustomCommand) {
    if !found.iter().any(|c| c.name == command.name) {
        found.push(command);
    }
}

/// How deep subfolders of `commands/` are read.
const MAX_COMMAND_DEPTH: usize = 4;

fn markdown_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth < MAX_COMMAND_DEPTH {
            markdown_files(&path, depth + 1, out);
        } else if path.extension().is_some_and(|e| e == "md") && path.is_file() {
            out.push(path);
        }
    }
}

/// `commands/frontend/test.md` → `frontend:test`.
fn command_name(base: &Path, path: &Path) -> Option<String> {
    let relative = path.strip_prefix(base).ok()?.with_extension("");
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let name = parts.join(":");
    valid_name(&name).then_some(name)
}

/// A name `/name` can be typed as: no spaces, no further `/`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'))
}

/// The file's front matter and body, errors naming the file.
fn read_markdown(path: &Path) -> Result<(BTreeMap<String, String>, String), String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let text = gyre_tools::read_config_file(path).map_err(|e| at(&e))?;
    let (fields, body) = front_matter(&text).map_err(|e| at(&e))?;
    Ok((fields, body.to_owned()))
}

fn read_command(path: &Path, name: String, origin: Origin) -> Result<CustomCommand, String> {
    let (fields, body) = read_markdown(path)?;
    Ok(command_of(path, name, origin, &fields, &body))
}

fn command_of(
    path: &Path,
    name: String,
    origin: Origin,
    fields: &BTreeMap<String, String>,
    body: &str,
) -> CustomCommand {
    let description = fields
        .get("description")
        .cloned()
        .unwrap_or_else(|| first_line(body));
    CustomCommand {
        name,
        description,
        argument_hint: fields.get("argument-hint").cloned(),
        allowed_tools: fields
            .get("allowed-tools")
            .map(|t| split_list(t))
            .unwrap_or_default(),
        model: fields.get("model").cloned(),
        body: body.trim().to_owned(),
        path: path.to_path_buf(),
        origin,
        kind: CommandKind::Custom,
    }
}

fn read_skill(dir: &Path, origin: Origin) -> Result<CustomCommand, String> {
    let path = dir.join("SKILL.md");
    let (fields, body) = read_markdown(&path)?;
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = fields.get("name").cloned().unwrap_or(folder);
    if !valid_name(&name) {
        return Err(format!(
            "{}: the skill's name {name:?} is not a command name (letters, digits, `-`, `_`)",
            path.display()
        ));
    }
    if !fields.contains_key("description") {
        return Err(format!(
            "{}: the front matter has no `description`, which tells the model when to use the skill",
            path.display()
        ));
    }
    let mut command = command_of(&path, name, origin, &fields, &body);
    command.kind = CommandKind::Skill {
        dir: dir.to_path_buf(),
    };
    Ok(command)
}

fn first_line(body: &str) -> String {
    body.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.trim_start_matches('#').trim())
        .map(|l| shorten(l, 100))
        .unwrap_or_default()
}

fn shorten(line: &str, max: usize) -> String {
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max - 1).collect();
    format!("{cut}…")
}

/// A Markdown file's optional front matter (`---`, `key: value` lines, `---`) as its
/// fields, and the text after it. A file that does not start with `---` is all body.
///
/// # Errors
/// An opening `---` without a closing one, or a line that is not `key: value`.
pub(crate) fn front_matter(text: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let text = text.trim_start_matches('\u{feff}');
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok((BTreeMap::new(), text));
    };
    let (front, body) = match rest.find("\n---") {
        Some(end) => {
            let after = &rest[end + 4..];
            let body = after.split_once('\n').map_or("", |(_, b)| b);
            (&rest[..end], body)
        }
        None if rest.starts_with("---") => ("", rest.split_once('\n').map_or("", |(_, b)| b)),
        None => {
            return Err("the front matter has no closing `---` line".to_owned());
        }
    };
    let mut fields: BTreeMap<String, String> = BTreeMap::new();
    let mut list_key: Option<String> = None;
    for (i, line) in front.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let (Some(key), Some(item)) = (&list_key, trimmed.strip_prefix("- ")) {
            let entry = fields.entry(key.clone()).or_default();
            if !entry.is_empty() {
                entry.push_str(", ");
            }
            entry.push_str(unquote(item));
            continue;
        }
        let (key, value) = trimmed.split_once(':').ok_or_else(|| {
            format!(
                "front matter line {}: expected `key: value`, found {trimmed:?}",
                i + 2
            )
        })?;
        let key = key.trim().to_owned();
        let value = unquote(value.trim());
        list_key = value.is_empty().then(|| key.clone());
        if !value.is_empty() {
            fields.insert(key, value.to_owned());
        }
    }
    Ok((fields, body))
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
        .unwrap_or(s)
}

/// `Bash(git add:*), Read` or `[Read, Grep]` as rules; a comma inside parentheses
/// stays in its rule.
fn split_list(s: &str) -> Vec<String> {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c == ',' && depth == 0 {
            out.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    out.push(current);
    out.into_iter()
        .map(|r| unquote(&r).to_owned())
        .filter(|r| !r.is_empty())
        .collect()
}

/// Replaces `$ARGUMENTS` with `args` and `$1`…`$9` with its words (quotes group
/// words); says whether the text had a place for the arguments.
#[must_use]
pub fn substitute_arguments(body: &str, args: &str) -> (String, bool) {
    let words = split_words(args);
    let mut out = String::with_capacity(body.len() + args.len());
    let mut placed = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args.trim());
            placed = true;
            rest = tail;
        } else if let Some(d) = after.chars().next().and_then(|c| c.to_digit(10))
            && d >= 1
        {
            let index = usize::try_from(d - 1).unwrap_or(usize::MAX);
            out.push_str(words.get(index).map_or("", String::as_str));
            placed = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    (out, placed)
}

/// Words as a shell would split them, without expansions: quotes group.
fn split_words(args: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in args.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => current.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            (None, c) => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(current);
    }
    words
}

/// `/name args` split into the name and the rest; `None` when the text is not a
/// command line.
#[must_use]
pub fn split_command_line(text: &str) -> Option<(&str, &str)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(n, a)| (n, a));
    valid_name(name).then_some((name, args.trim()))
}

/// The session's custom commands and skills: the skills read when the session was
/// built (the Skill tool offers them), the commands when first asked for.
#[derive(Debug, Default)]
pub struct Commands {
    roots: CommandRoots,
    skills: Vec<CustomCommand>,
    commands: OnceLock<Vec<CustomCommand>>,
}

impl Commands {
    /// The commands of `roots`; the skills are read now when a `skills/` folder
    /// exists, and an unreadable one is reported on stderr.
    #[must_use]
    pub fn new(roots: CommandRoots) -> Self {
        let skills = if roots.has_skills() {
            let (skills, errors) = roots.load_skills();
            for e in errors {
                eprintln!("warning: skill skipped: {e}");
            }
            skills
        } else {
            Vec::new()
        };
        Self {
            roots,
            skills,
            commands: OnceLock::new(),
        }
    }

    /// The skills, for the Skill tool.
    #[must_use]
    pub fn skills(&self) -> &[CustomCommand] {
        &self.skills
    }

    fn custom(&self) -> &[CustomCommand] {
        self.commands.get_or_init(|| {
            let (commands, errors) = self.roots.load_commands();
            for e in errors {
                eprintln!("warning: command skipped: {e}");
            }
            commands
        })
    }

    /// The custom command or skill called `name` (a custom command wins over a skill
    /// of the same name, as the reference's do).
    #[must_use]
    pub fn find(&self, name: &str) -> Option<&CustomCommand> {
        self.custom()
            .iter()
            .chain(&self.skills)
            .find(|c| c.name == name)
    }

    /// The one list: the `builtins` a front-end runs (names from [`BUILTIN`], in its
    /// order), then the custom commands and skills that no built-in shadows.
    #[must_use]
    pub fn list(&self, builtins: &[&str]) -> Vec<CommandInfo> {
        let mut out: Vec<CommandInfo> = BUILTIN
            .iter()
            .filter(|(name, _, _)| builtins.contains(name))
            .map(|(name, description, hint)| CommandInfo {
                name: (*name).to_owned(),
                description: (*description).to_owned(),
                argument_hint: (*hint).to_owned(),
                kind: CommandKind::Builtin,
            })
            .collect();
        for command in self.custom().iter().chain(&self.skills) {
            if !out.iter().any(|c| c.name == command.name) {
                out.push(command.info());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_fields_and_body() {
        let (fields, body) = front_matter(
            "---\ndescription: Review a file\nallowed-tools: Bash(git diff:*), Read\nargument-hint: \"<file>\"\n---\nReview $1.\n",
        )
        .unwrap();
        assert_eq!(fields["description"], "Review a file");
        assert_eq!(fields["argument-hint"], "<file>");
        assert_eq!(
            split_list(&fields["allowed-tools"]),
            ["Bash(git diff:*)", "Read"]
        );
        assert_eq!(body, "Review $1.\n");
    }

    #[test]
    fn a_file_without_front_matter_is_all_body() {
        let (fields, body) = front_matter("Just do it\n").unwrap();
        assert!(fields.is_empty());
        assert_eq!(body, "Just do it\n");
        assert!(front_matter("---\ndescription: x\n").is_err());
        assert!(front_matter("---\nnot a field\n---\n").is_err());
    }

    #[test]
    fn front_matter_lists_become_one_value() {
        let (fields, _) = front_matter("---\nallowed-tools:\n  - Read\n  - Grep\n---\n").unwrap();
        assert_eq!(split_list(&fields["allowed-tools"]), ["Read", "Grep"]);
    }

    #[test]
    fn arguments_fill_their_places() {
        assert_eq!(
            substitute_arguments("Fix issue $ARGUMENTS now", " 123 high "),
            ("Fix issue 123 high now".to_owned(), true)
        );
        assert_eq!(
            substitute_arguments("$2 then $1, cost $5 and $0", "a 'b c'"),
            ("b c then a, cost  and $0".to_owned(), true)
        );
        assert_eq!(
            substitute_arguments("no place", "x"),
            ("no place".to_owned(), false)
        );
    }

    #[test]
    fn arguments_without_a_place_follow_the_prompt() {
        let command = CustomCommand {
            name: "review".into(),
            description: String::new(),
            argument_hint: None,
            allowed_tools: Vec::new(),
            model: None,
            body: "Review the code.".into(),
            path: PathBuf::from("/x/review.md"),
            origin: Origin::User,
            kind: CommandKind::Custom,
        };
        assert_eq!(
            command.prompt("src/lib.rs"),
            "Review the code.\n\nARGUMENTS: src/lib.rs"
        );
        assert_eq!(command.prompt(""), "Review the code.");
    }

    #[test]
    fn command_lines_split_into_name_and_arguments() {
        assert_eq!(
            split_command_line("/fix  123 now"),
            Some(("fix", "123 now"))
        );
        assert_eq!(
            split_command_line("/frontend:test"),
            Some(("frontend:test", ""))
        );
        assert_eq!(split_command_line("/usr/bin/ls"), None);
        assert_eq!(split_command_line("hello"), None);
    }

    #[test]
    fn commands_and_skills_load_from_their_folders_user_first() {
        let home = tempfile::tempdir().unwrap();
        let gyre_home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let write = |path: PathBuf, text: &str| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            home.path().join(".claude/commands/fix.md"),
            "# Fix an issue\nFix $ARGUMENTS",
        );
        write(
            cwd.path().join(".claude/commands/fix.md"),
            "project's fix, shadowed",
        );
        write(
            cwd.path().join(".gyre/commands/frontend/test.md"),
            "---\ndescription: Run the UI tests\n---\nrun them",
        );
        write(
            cwd.path().join(".claude/skills/pdf/SKILL.md"),
            "---\nname: pdf\ndescription: Work with PDF files\n---\nUse pdftotext.",
        );
        write(
            gyre_home.path().join("skills/broken/SKILL.md"),
            "---\nname: broken\n---\nno description",
        );
        let roots = CommandRoots::new(Some(home.path()), gyre_home.path(), cwd.path(), true, true);
        let commands = Commands::new(roots);
        assert_eq!(commands.skills().len(), 1);
        let fix = commands.find("fix").unwrap();
        assert_eq!(fix.description, "Fix an issue");
        assert_eq!(fix.origin, Origin::User);
        assert_eq!(
            commands.find("frontend:test").unwrap().description,
            "Run the UI tests"
        );
        let names: Vec<String> = commands
            .list(&["compact"])
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["compact", "fix", "frontend:test", "pdf"]);
        let pdf = commands.find("pdf").unwrap();
        assert!(
            pdf.prompt("a.pdf")
                .starts_with("Base directory for this skill: ")
        );

        let untrusted =
            CommandRoots::new(Some(home.path()), gyre_home.path(), cwd.path(), true, false);
        let commands = Commands::new(untrusted);
        assert!(commands.find("pdf").is_none());
        assert!(commands.find("frontend:test").is_none());
    }

    #[test]
    fn setting_sources_pick_user_and_project() {
        assert!(CommandRoots::source_enabled(None, "user"));
        assert!(CommandRoots::source_enabled(
            Some("user,project"),
            "project"
        ));
        assert!(!CommandRoots::source_enabled(Some(""), "project"));
        assert!(!CommandRoots::source_enabled(Some("project"), "user"));
    }
}
