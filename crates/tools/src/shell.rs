//! Bash commands parsed with the tree-sitter bash grammar, for permission rules and the
//! read-only classifier.
//!
//! Fail closed: a command is [`Script::plain`] only when every node of its tree is one
//! this module understands — lists, pipelines, `&&`/`||`, subshells, `{ …; }`, `if` and
//! `while`, simple commands whose words are literal (quoted or not), and redirections to
//! `/dev/null`, fd duplications (`2>&1`) or reads from a literal file. Anything else —
//! expansions, command and process substitution, arithmetic, ANSI-C strings, comments,
//! heredocs, functions, `for`/`case`, assignments, parse errors — makes it not plain, so
//! no allow rule covers it. Every simple command anywhere in the tree (inside
//! substitutions and functions too) is still listed, so deny rules see them; a word that
//! cannot be known is [`Word::Opaque`] and may be anything.

use tree_sitter::{Node, Parser};

/// One word of a simple command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Word {
    /// Known text: `rm`, `'rm'`, `"rm"`, `r''m` and `\rm` are all `rm`.
    Literal(String),
    /// Known text bash will still glob or brace-expand (`*.rs`, `{a,b}`, `~/x`): runs no
    /// code, but the words it becomes are unknown (a file may be named `-rf`).
    Pattern(String),
    /// Text only known when run: expansions, substitutions, ANSI-C and locale strings.
    Opaque,
}

impl Word {
    /// The text when it is known exactly.
    #[must_use]
    pub fn literal(&self) -> Option<&str> {
        match self {
            Self::Literal(s) => Some(s),
            Self::Pattern(_) | Self::Opaque => None,
        }
    }
}

/// A simple command: `VAR=x prog arg…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The program then its arguments.
    pub argv: Vec<Word>,
    /// It sets variables for itself (`LD_PRELOAD=x ls`).
    pub assigns: bool,
}

/// What a command line holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script {
    /// Every simple command in the tree, in source order, nested ones included.
    pub commands: Vec<SimpleCommand>,
    /// Only understood nodes: allow rules and the read-only classifier may vouch for it.
    pub plain: bool,
    /// The parser failed somewhere: commands may exist that are not listed.
    pub unknown: bool,
    /// Files read by `< file` redirections, which name no file in any argv.
    pub inputs: Vec<String>,
    /// The names of the variables it assigns anywhere (`X=1 cmd`, `export PATH=…`,
    /// `declare -x BASH_ENV`); `*` for a name reference (`declare -n`), which may
    /// assign any.
    pub assigned: Vec<String>,
    /// A redirection writes a file (`> out`, `>> log`, `3>f`).
    pub writes_files: bool,
    /// The files writing redirections name, `None` where the name is not known text
    /// (`> "$f"`).
    pub outputs: Vec<Option<String>>,
}

/// Parses `source` as bash.
#[must_use]
pub fn parse(source: &str) -> Script {
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        return Script {
            unknown: true,
            ..Script::default()
        };
    }
    let Some(tree) = parser.parse(source, None) else {
        return Script {
            unknown: true,
            ..Script::default()
        };
    };
    let mut script = Script {
        plain: true,
        ..Script::default()
    };
    let root = tree.root_node();
    // The grammar takes `\r`, form feeds and other controls for blanks; bash does not
    // (`echo;\rtouch x` runs a command named "\rtouch").
    if source
        .chars()
        .any(|c| c.is_control() && c != '\t' && c != '\n')
    {
        script.plain = false;
    }
    if root.has_error() {
        script.plain = false;
        script.unknown = true;
    }
    walk(root, source, &mut script);
    if script.commands.is_empty() {
        script.plain = false;
    }
    script
}

fn text<'s>(node: Node<'_>, source: &'s str) -> &'s str {
    source.get(node.byte_range()).unwrap_or("")
}

fn walk(node: Node<'_>, source: &str, script: &mut Script) {
    match node.kind() {
        "program"
        | "list"
        | "pipeline"
        | "subshell"
        | "compound_statement"
        | "if_statement"
        | "elif_clause"
        | "else_clause"
        | "while_statement"
        | "do_group"
        | "negated_command"
        | "redirected_statement" => {
            walk_children(node, source, script);
        }
        "command" => command(node, source, script),
        "variable_assignment" | "declaration_command" => {
            note_assignment(node, source, script);
            script.plain = false;
            walk_children(node, source, script);
        }
        "file_redirect" => {
            note_redirect(node, source, script);
            collect_nested(node, source, script);
        }
        "ERROR" => {
            script.plain = false;
            script.unknown = true;
            walk_children(node, source, script);
        }
        _ => {
            if node.is_named() || node.is_missing() {
                script.plain = false;
            }
            if node.is_missing() {
                script.unknown = true;
            }
            walk_children(node, source, script);
        }
    }
}

/// The children of `node` with their field names.
fn fields(node: Node<'_>) -> Vec<(Option<&'static str>, Node<'_>)> {
    let mut out = Vec::new();
    let mut cursor = node.walk();
    if cursor.goto_first_child() {
        loop {
            out.push((cursor.field_name(), cursor.node()));
            if !cursor.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

fn walk_children(node: Node<'_>, source: &str, script: &mut Script) {
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        walk(child, source, script);
    }
}

fn command(node: Node<'_>, source: &str, script: &mut Script) {
    let mut argv = Vec::new();
    let mut assigns = false;
    let mut previous_end: Option<usize> = None;
    for (field, child) in fields(node) {
        // Bash separates words by blanks; two words the grammar saw touching are one
        // word to bash (`\echo{!~`), so what runs is not what was read.
        let operator_first =
            child.kind() == "file_redirect" && text(child, source).starts_with(['>', '<', '&']);
        if let Some(end) = previous_end
            && !operator_first
            && !separated(source.get(end..child.start_byte()).unwrap_or(""))
        {
            script.plain = false;
        }
        previous_end = Some(child.end_byte());
        match field {
            Some("name") => {
                let word = child
                    .named_child(0)
                    .map_or(Word::Opaque, |w| word(w, source));
                argv.push(word);
            }
            Some("argument") => argv.push(word(child, source)),
            Some("redirect") => note_redirect(child, source, script),
            _ if child.kind() == "variable_assignment" => {
                assigns = true;
                script.plain = false;
                note_assignment(child, source, script);
            }
            _ if child.is_named() => script.plain = false,
            _ => {}
        }
        if argv.last() == Some(&Word::Opaque) {
            script.plain = false;
        }
    }
    // The grammar has no `coproc`, and reads `coproc { rm x; }` or `time { …; }` as a
    // command whose arguments are `{`, `rm`, `x`: what runs is not what it lists.
    let mut cursor = node.walk();
    if argv.first() == Some(&Word::Literal("coproc".to_owned()))
        || node
            .children_by_field_name("argument", &mut cursor)
            .any(|a| matches!(text(a, source), "{" | "}"))
    {
        script.plain = false;
        script.unknown = true;
    }
    if argv.is_empty() {
        script.plain = false;
    } else {
        script.commands.push(SimpleCommand { argv, assigns });
    }
    // Substitutions inside the words hold commands of their own.
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect_nested(child, source, script);
    }
}

/// Records the names a `variable_assignment` or a `declaration_command` (`export`,
/// `declare`, `local`, `readonly`, `typeset`) assigns.
fn note_assignment(node: Node<'_>, source: &str, script: &mut Script) {
    if node.kind() == "variable_assignment" {
        if let Some(name) = node.child_by_field_name("name") {
            let name = text(name, source);
            // `a[i]=x` assigns `a`.
            let name = name.split('[').next().unwrap_or(name);
            script.assigned.push(name.to_owned());
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "variable_name" => script.assigned.push(text(child, source).to_owned()),
            // `declare -n ref=PATH; ref=.` assigns PATH through another name: count it
            // as assigning every name.
            "word" if text(child, source).starts_with('-') && text(child, source).contains('n') => {
                script.assigned.push("*".to_owned());
            }
            _ => {}
        }
    }
}

/// Whether the text between two words of a command is a word separator: blanks and
/// line continuations only, at least one blank.
fn separated(gap: &str) -> bool {
    let rest = gap.replace("\\\n", "");
    !rest.is_empty() && rest.chars().all(|c| c == ' ' || c == '\t')
}

/// Finds commands nested inside words (`$(…)`, `<(…)`, `${x:-$(…)}`).
fn collect_nested(node: Node<'_>, source: &str, script: &mut Script) {
    match node.kind() {
        "command_substitution" | "process_substitution" => {
            script.plain = false;
            walk_children(node, source, script);
        }
        "ERROR" => {
            script.plain = false;
            script.unknown = true;
            walk_children(node, source, script);
        }
        _ => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                collect_nested(child, source, script);
            }
        }
    }
}

/// The word a node stands for after quote removal.
fn word(node: Node<'_>, source: &str) -> Word {
    match node.kind() {
        "word" | "number" if node.named_child_count() == 0 => unquoted(text(node, source)),
        "raw_string" => {
            let t = text(node, source);
            Word::Literal(t.get(1..t.len().saturating_sub(1)).unwrap_or("").to_owned())
        }
        "string" => {
            let mut cursor = node.walk();
            if node
                .named_children(&mut cursor)
                .any(|c| c.kind() != "string_content")
            {
                return Word::Opaque;
            }
            let t = text(node, source);
            Word::Literal(double_quoted(
                t.get(1..t.len().saturating_sub(1)).unwrap_or(""),
            ))
        }
        "concatenation" => {
            let mut out = String::new();
            let mut pattern = false;
            let mut cursor = node.walk();
            for part in node.named_children(&mut cursor) {
                match word(part, source) {
                    Word::Literal(s) => out.push_str(&s),
                    Word::Pattern(s) => {
                        pattern = true;
                        out.push_str(&s);
                    }
                    Word::Opaque => return Word::Opaque,
                }
            }
            // Unnamed pieces (a bare `$` or `{`) are text the grammar did not name.
            if node.child_count() != node.named_child_count() {
                return Word::Opaque;
            }
            // `{a,b}` and `{"a",b}` arrive as pieces; bash expands the braces of the
            // unquoted ones into several words.
            let raw = text(node, source);
            let mut cursor = node.walk();
            if (raw.contains(',') || raw.contains(".."))
                && node
                    .named_children(&mut cursor)
                    .any(|p| p.kind() == "word" && text(p, source).contains(['{', '}']))
            {
                pattern = true;
            }
            if pattern {
                Word::Pattern(out)
            } else {
                Word::Literal(out)
            }
        }
        _ => Word::Opaque,
    }
}

/// An unquoted word: backslashes removed; glob, brace and tilde characters make it a
/// pattern; `$` or a backquote anywhere (the grammar should have named it) make it opaque.
fn unquoted(raw: &str) -> Word {
    let mut out = String::new();
    let mut pattern = raw.starts_with('~');
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next()
                    && n != '\n'
                {
                    out.push(n);
                }
            }
            // Quotes, expansions and bash metacharacters cannot be in a word bash sees as
            // one unquoted word: the grammar split differently from bash.
            '$' | '`' | '\'' | '"' | ' ' | '\t' | '\n' | '\r' | ';' | '&' | '|' | '<' | '>'
            | '(' | ')' => return Word::Opaque,
            '*' | '?' | '[' => {
                pattern = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    if raw.contains('{') && (raw.contains(',') || raw.contains("..")) {
        pattern = true;
    }
    if pattern {
        Word::Pattern(out)
    } else {
        Word::Literal(out)
    }
}

/// The content of a double-quoted string without expansions: `\$ \` \" \\` and
/// line continuations are the only escapes.
fn double_quoted(inner: &str) -> String {
    let mut out = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                    continue;
                }
                Some('\n') => {
                    chars.next();
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// A redirection that is not safe makes the script not plain; a safe `< file` is
/// listed in [`Script::inputs`].
fn note_redirect(node: Node<'_>, source: &str, script: &mut Script) {
    match safe_redirect(node, source) {
        None => {
            script.plain = false;
            if text(node, source).contains('>') {
                script.writes_files = true;
                script.outputs.push(redirect_destination(node, source));
            }
        }
        Some(Some(input)) => script.inputs.push(input),
        Some(None) => {}
    }
}

/// The literal file a redirection names, if it names one.
fn redirect_destination(node: Node<'_>, source: &str) -> Option<String> {
    fields(node)
        .into_iter()
        .find(|(field, _)| *field == Some("destination"))
        .and_then(|(_, child)| word(child, source).literal().map(str::to_owned))
}

/// `>/dev/null`, `2>/dev/null`, `&>/dev/null`, `2>&1`, `>&2`, `<&-` and `< file` (a
/// literal file read, returned) are safe (`Some`); anything else may write where no
/// rule looked.
fn safe_redirect(node: Node<'_>, source: &str) -> Option<Option<String>> {
    if node.kind() != "file_redirect" {
        return None;
    }
    let mut operator = None;
    let mut destination = None;
    for (field, child) in fields(node) {
        match field {
            Some("destination") => {
                if destination.is_some() {
                    return None;
                }
                destination = Some(word(child, source));
            }
            Some("descriptor") => {}
            _ if !child.is_named() => operator = Some(child.kind()),
            _ => return None,
        }
    }
    let (Some(operator), Some(Word::Literal(destination))) = (operator, destination) else {
        return None;
    };
    // bash itself opens a connection for these names: network access, not a file.
    if destination.contains("/dev/tcp/") || destination.contains("/dev/udp/") {
        return None;
    }
    let safe = match operator {
        ">" | ">>" | "&>" | "&>>" | ">|" => destination == "/dev/null",
        ">&" | "<&" => {
            destination == "-"
                || (!destination.is_empty() && destination.chars().all(|c| c.is_ascii_digit()))
        }
        "<" if !destination.is_empty() => return Some(Some(destination)),
        _ => false,
    };
    safe.then_some(None)
}

/// A program name as rules compare it: `/bin/rm` → `rm`.
#[must_use]
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The command a wrapper runs: `timeout 5 nice -n 2 ls -l` → `ls -l`. Looks through
/// `command`, `builtin`, `coproc`, `env`, `nice`, `timeout`, `time`, `nohup`, `exec`,
/// `stdbuf`, `ionice`, `setsid` and `xargs`; with `privileged` also `sudo`, `doas` and
/// `busybox` (for deny rules, where seeing a command too many is the safe mistake).
/// Each wrapper's options are read as it reads them; an option it does not know, or a
/// word of unknown value where an option or the command goes, gives `None`: what runs
/// cannot be known (`env -S …`, `time -o f …`, `nice $n …`).
#[must_use]
pub fn unwrap_command(argv: &[Word], privileged: bool) -> Option<Unwrapped<'_>> {
    let mut out = Unwrapped {
        argv,
        extra_args: false,
        assigns: false,
        wrappers: Vec::new(),
    };
    loop {
        let Some(Word::Literal(program)) = out.argv.first() else {
            return Some(out);
        };
        let name = basename(program);
        let Some(options) = wrapper_options(name, privileged) else {
            return Some(out);
        };
        // `command -v x` says what x is; it runs nothing.
        if name == "command"
            && out
                .argv
                .iter()
                .any(|w| matches!(w.literal(), Some("-v" | "-V")))
        {
            return Some(out);
        }
        let Some(start) = wrapped_command_start(name, &options, out.argv, &mut out.assigns)? else {
            // The wrapper alone (`time`, `env`): it is the command.
            return Some(out);
        };
        out.extra_args |= name == "xargs";
        out.wrappers.push(name);
        out.argv = &out.argv[start..];
    }
}

/// Where the command a wrapper runs starts in `argv` (`Some(None)`: it runs none);
/// `None` when an option is not one the wrapper knows or a word is unknown.
fn wrapped_command_start(
    name: &str,
    options: &WrapperOptions,
    argv: &[Word],
    assigns: &mut bool,
) -> Option<Option<usize>> {
    let mut i = 1;
    let mut operands = options.operands;
    let mut options_done = false;
    while i < argv.len() {
        let w = argv[i].literal()?;
        i += 1;
        if !options_done && w == "--" {
            options_done = true;
            continue;
        }
        if !options_done && let Some(long) = w.strip_prefix("--") {
            let (given, value) = long
                .split_once('=')
                .map_or((long, None), |(n, v)| (n, Some(v)));
            let known = |list: &[&str]| list.iter().filter(|l| l.starts_with(given)).count();
            let exact = |list: &[&str]| list.contains(&given);
            let valued = if exact(options.long_valued) {
                true
            } else if exact(options.long_flags) {
                false
            } else {
                match (known(options.long_flags), known(options.long_valued)) {
                    (1, 0) if !given.is_empty() => false,
                    (0, 1) if !given.is_empty() => true,
                    _ => return None,
                }
            };
            if valued && value.is_none() {
                i += 1;
            }
            continue;
        }
        // `env -` is `env -i`.
        if !options_done && name == "env" && w == "-" {
            continue;
        }
        if !options_done && w.len() > 1 && w.starts_with('-') {
            let letters: Vec<char> = w.chars().skip(1).collect();
            for (k, c) in letters.iter().enumerate() {
                if options.flags.contains(*c) || (options.numeric && c.is_ascii_digit()) {
                    continue;
                }
                if options.valued.contains(*c) {
                    if k + 1 == letters.len() {
                        i += 1;
                    }
                    break;
                }
                if options.attached.contains(*c) {
                    break;
                }
                return None;
            }
            continue;
        }
        if name == "env" && w.contains('=') {
            *assigns = true;
            continue;
        }
        if operands > 0 {
            operands -= 1;
            continue;
        }
        return Some(Some(i - 1));
    }
    Some(None)
}

/// How a wrapper reads its own options before the command it runs.
struct WrapperOptions {
    /// Short option letters without a value.
    flags: &'static str,
    /// Short option letters whose value is the rest of the cluster or the next word.
    valued: &'static str,
    /// Short option letters whose optional value can only be attached (`xargs -i{}`).
    attached: &'static str,
    /// Long options without a value (unique prefixes count; `--x=v` is allowed).
    long_flags: &'static [&'static str],
    /// Long options whose value is after `=` or the next word.
    long_valued: &'static [&'static str],
    /// Operands before the command (`timeout`'s duration).
    operands: usize,
    /// `-5` is an option (`nice -5`).
    numeric: bool,
}

const NO_OPTIONS: WrapperOptions = WrapperOptions {
    flags: "",
    valued: "",
    attached: "",
    long_flags: &[],
    long_valued: &[],
    operands: 0,
    numeric: false,
};

/// The programs that run the command their arguments name, and how they read their
/// options. `privileged` adds `sudo`, `doas` and `busybox`.
fn wrapper_options(name: &str, privileged: bool) -> Option<WrapperOptions> {
    Some(match name {
        "command" => WrapperOptions {
            flags: "pvV",
            ..NO_OPTIONS
        },
        "builtin" | "coproc" | "nohup" => NO_OPTIONS,
        "env" => WrapperOptions {
            flags: "i0v",
            valued: "uCa",
            long_flags: &[
                "ignore-environment",
                "null",
                "debug",
                "list-signal-handling",
                "block-signal",
                "default-signal",
                "ignore-signal",
            ],
            long_valued: &["unset", "chdir", "argv0"],
            ..NO_OPTIONS
        },
        "nice" => WrapperOptions {
            valued: "n",
            long_valued: &["adjustment"],
            numeric: true,
            ..NO_OPTIONS
        },
        "timeout" => WrapperOptions {
            flags: "v",
            valued: "sk",
            long_flags: &["foreground", "preserve-status", "verbose"],
            long_valued: &["signal", "kill-after"],
            operands: 1,
            ..NO_OPTIONS
        },
        // bash's `time` keyword knows `-p` only; GNU time's `-o` writes a file.
        "time" => WrapperOptions {
            flags: "p",
            ..NO_OPTIONS
        },
        "setsid" => WrapperOptions {
            flags: "cfw",
            long_flags: &["ctty", "fork", "wait"],
            ..NO_OPTIONS
        },
        "exec" => WrapperOptions {
            flags: "cl",
            valued: "a",
            ..NO_OPTIONS
        },
        "stdbuf" => WrapperOptions {
            valued: "ioe",
            long_valued: &["input", "output", "error"],
            ..NO_OPTIONS
        },
        "ionice" => WrapperOptions {
            flags: "t",
            valued: "cnpPu",
            long_flags: &["ignore"],
            long_valued: &["class", "classdata", "pid", "pgid", "uid"],
            ..NO_OPTIONS
        },
        "xargs" => WrapperOptions {
            flags: "0oprtx",
            valued: "adEILnPs",
            attached: "eil",
            long_flags: &[
                "null",
                "open-tty",
                "interactive",
                "no-run-if-empty",
                "verbose",
                "exit",
                "show-limits",
            ],
            long_valued: &[
                "arg-file",
                "delimiter",
                "eof",
                "replace",
                "max-lines",
                "max-args",
                "max-procs",
                "max-chars",
                "process-slot-var",
            ],
            ..NO_OPTIONS
        },
        "sudo" | "doas" if privileged => WrapperOptions {
            flags: "AbBEHiKklnPSsVv",
            valued: "ugCDhprtUTR",
            long_flags: &[
                "askpass",
                "background",
                "bell",
                "preserve-env",
                "set-home",
                "login",
                "remove-timestamp",
                "reset-timestamp",
                "list",
                "non-interactive",
                "preserve-groups",
                "stdin",
                "shell",
                "validate",
            ],
            long_valued: &[
                "user",
                "group",
                "close-from",
                "chdir",
                "host",
                "prompt",
                "role",
                "type",
                "other-user",
                "command-timeout",
                "chroot",
            ],
            ..NO_OPTIONS
        },
        "busybox" | "toybox" if privileged => NO_OPTIONS,
        _ => return None,
    })
}

/// Whether `program` runs the command its arguments name (see [`unwrap_command`]).
#[must_use]
pub fn is_wrapper(program: &str, privileged: bool) -> bool {
    wrapper_options(basename(program), privileged).is_some()
}

/// What a wrapper runs (see [`unwrap_command`]).
#[derive(Debug, Clone)]
pub struct Unwrapped<'a> {
    /// The command's words, from the program on.
    pub argv: &'a [Word],
    /// Whether the wrapper adds arguments of unknown value (`xargs`).
    pub extra_args: bool,
    /// Whether the wrapper sets variables (`env X=1 cmd`).
    pub assigns: bool,
    /// The wrappers looked through, outermost first (`timeout`, `nice`).
    pub wrappers: Vec<&'a str>,
}

/// Programs that run a script given as an argument or on stdin.
#[must_use]
pub fn is_shell(program: &str) -> bool {
    matches!(
        basename(program),
        "bash"
            | "sh"
            | "dash"
            | "zsh"
            | "ksh"
            | "mksh"
            | "ash"
            | "fish"
            | "eval"
            | "source"
            | "."
            | "su"
            | "watch"
            | "script"
    )
}

/// The commands issue #19 found running arbitrary code under `Bash(echo:*)`.
#[cfg(test)]
pub(crate) const ISSUE_ECHO_BYPASSES: &[&str] = &[
    "echo hi #'\ntouch x #'",
    "echo hi $'\\'' ; touch x #'",
    "echo ${x:='$(touch x)'} ${x@P}",
    "echo ${x:='a[$(touch x)]'} ${HOME:x}",
    "echo hi >&2NAME",
    "echo hi >/dev/nullNAME",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(words: &[&str]) -> Vec<Word> {
        words
            .iter()
            .map(|w| Word::Literal((*w).to_owned()))
            .collect()
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        for src in ["rm x", "'rm' x", "\"rm\" x", "\\rm x", "r''m x", "r\"\"m x"] {
            let s = parse(src);
            assert!(s.plain, "{src}");
            assert_eq!(s.commands[0].argv, lit(&["rm", "x"]), "{src}");
        }
    }

    #[test]
    fn structure_is_seen_through() {
        let s = parse("{ rm x; } && if true; then rm y; fi | cat; (ls)");
        assert!(s.plain);
        let programs: Vec<&str> = s
            .commands
            .iter()
            .map(|c| c.argv[0].literal().unwrap())
            .collect();
        assert_eq!(programs, ["rm", "true", "rm", "cat", "ls"]);
    }

    #[test]
    fn what_is_not_understood_is_not_plain() {
        for src in ISSUE_ECHO_BYPASSES.iter().copied().chain([
            "echo $(touch x)",
            "echo `touch x`",
            "cat <(touch x)",
            "echo $((1+2))",
            "x=rm; $x y",
            "X=1 echo",
            "cat <<EOF\nhi\nEOF",
            "f() { rm x; }",
            "for i in a; do echo; done",
            "echo 'open",
            "echo *-\n\\echo{!~",
            "echo hi;\rtouch x",
            "echo \\n*={/dev/null=\n\\n",
        ]) {
            assert!(!parse(src).plain, "{src:?}");
        }
    }

    #[test]
    fn safe_redirections_stay_plain() {
        for src in [
            "make 2>&1",
            "ls >/dev/null",
            "ls 2>/dev/null",
            "ls &>/dev/null",
            "ls >&2",
            "wc -l < file",
            "echo hi>/dev/null",
        ] {
            assert!(parse(src).plain, "{src:?}");
        }
        for src in ["ls > out", "ls >> out", "ls 2>err", "cat <> f"] {
            assert!(!parse(src).plain, "{src:?}");
        }
    }

    #[test]
    fn nested_commands_are_listed() {
        let s = parse("echo $(rm -rf x) <(curl y)");
        let programs: Vec<Option<&str>> = s.commands.iter().map(|c| c.argv[0].literal()).collect();
        assert_eq!(programs, [Some("echo"), Some("rm"), Some("curl")]);
    }

    #[test]
    fn wrappers_are_looked_through() {
        let s = parse("timeout -s KILL 5 nice -n 3 env A=1 command rm -rf x");
        let u = unwrap_command(&s.commands[0].argv, false).unwrap();
        assert_eq!(u.argv, lit(&["rm", "-rf", "x"]).as_slice());
        assert!(u.assigns);
        let s = parse("xargs -0 -n 1 rm");
        let u = unwrap_command(&s.commands[0].argv, false).unwrap();
        assert_eq!(u.argv, lit(&["rm"]).as_slice());
        assert!(u.extra_args);
        assert!(unwrap_command(&parse("env -S 'rm x'").commands[0].argv, false).is_none());
        let s = parse("sudo -u root rm x");
        assert_eq!(
            unwrap_command(&s.commands[0].argv, true).unwrap().argv,
            lit(&["rm", "x"]).as_slice()
        );
        assert_eq!(
            unwrap_command(&s.commands[0].argv, false).unwrap().argv[0],
            Word::Literal("sudo".to_owned())
        );
    }
}
