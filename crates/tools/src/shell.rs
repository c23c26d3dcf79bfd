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
            }
            _ if child.is_named() => script.plain = false,
            _ => {}
        }
        if argv.last() == Some(&Word::Opaque) {
            script.plain = false;
        }
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
        None => script.plain = false,
        Some(Some(input)) => script.inputs.push(input),
        Some(None) => {}
    }
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
/// `command`, `env` (without `-S`), `nice`, `timeout`, `time`, `nohup`, `exec`,
/// `stdbuf`, `ionice`, `setsid` and `xargs`; with `privileged` also `sudo`, `doas` and
/// `busybox` (for deny rules, where seeing a command too many is the safe mistake).
/// Returns the argv from the program on, whether arguments of unknown value are added
/// (xargs), and whether the wrapper set variables (`env X=1 cmd`). `None` when what it
/// runs cannot be known (`env -S …`).
#[must_use]
pub fn unwrap_command(argv: &[Word], privileged: bool) -> Option<Unwrapped<'_>> {
    let mut rest = argv;
    let mut extra_args = false;
    let mut assigns = false;
    loop {
        let Some(Word::Literal(program)) = rest.first() else {
            return Some(Unwrapped {
                argv: rest,
                extra_args,
                assigns,
            });
        };
        let name = basename(program);
        // (options that take a value as the next word, option letters allowed)
        let (takes_value, positional_before): (&[&str], usize) = match name {
            "command" => {
                if rest
                    .iter()
                    .any(|w| matches!(w.literal(), Some("-v" | "-V")))
                {
                    return Some(Unwrapped {
                        argv: rest,
                        extra_args,
                        assigns,
                    });
                }
                (&[], 0)
            }
            "env" => (&["-u", "--unset", "-C", "--chdir"], 0),
            "nice" => (&["-n", "--adjustment"], 0),
            "timeout" => (&["-s", "--signal", "-k", "--kill-after"], 1),
            "time" | "nohup" | "setsid" => (&[], 0),
            "exec" => (&["-a"], 0),
            "stdbuf" => (&["-i", "-o", "-e"], 0),
            "ionice" => (&["-c", "-n", "-p", "-P", "-u"], 0),
            "xargs" => {
                extra_args = true;
                (
                    &[
                        "-a",
                        "-d",
                        "-E",
                        "-e",
                        "-I",
                        "-L",
                        "-l",
                        "-n",
                        "-P",
                        "-s",
                        "--arg-file",
                        "--delimiter",
                        "--max-args",
                        "--max-procs",
                        "--max-chars",
                        "--process-slot-var",
                    ],
                    0,
                )
            }
            "sudo" | "doas" if privileged => (
                &[
                    "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group",
                ],
                0,
            ),
            "busybox" if privileged => (&[], 0),
            _ => {
                return Some(Unwrapped {
                    argv: rest,
                    extra_args,
                    assigns,
                });
            }
        };
        let mut i = 1;
        let mut positionals = positional_before;
        while i < rest.len() {
            let Some(w) = rest[i].literal() else {
                // An unknown word where an option or the command goes.
                return None;
            };
            if w == "--" {
                i += 1;
                break;
            }
            if name == "env"
                && (w == "-S" || w.starts_with("--split-string") || w.starts_with("-S"))
            {
                return None;
            }
            if name == "env" && !w.starts_with('-') && w.contains('=') {
                assigns = true;
                i += 1;
                continue;
            }
            if w.starts_with('-') && w.len() > 1 {
                let takes = takes_value.contains(&w);
                i += if takes { 2 } else { 1 };
                continue;
            }
            if positionals > 0 {
                positionals -= 1;
                i += 1;
                continue;
            }
            break;
        }
        if i >= rest.len() {
            // The wrapper alone (`time`, `env`): it is the command.
            return Some(Unwrapped {
                argv: rest,
                extra_args,
                assigns,
            });
        }
        rest = &rest[i..];
    }
}

/// What a wrapper runs (see [`unwrap_command`]).
#[derive(Debug, Clone, Copy)]
pub struct Unwrapped<'a> {
    /// The command's words, from the program on.
    pub argv: &'a [Word],
    /// Whether the wrapper adds arguments of unknown value (`xargs`).
    pub extra_args: bool,
    /// Whether the wrapper sets variables (`env X=1 cmd`).
    pub assigns: bool,
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
