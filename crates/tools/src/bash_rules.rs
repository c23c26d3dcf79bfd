//! Bash permission rules matched on parsed bash (see [`crate::shell`]), not on text.
//!
//! A specifier is `prefix:*` (the command starts with these words), a pattern with `*`
//! (wildcards over the normalised command), or an exact command. Words are compared
//! after quote removal, the program by its basename (for deny rules), wrappers
//! (`timeout`, `env`, `xargs`, …) looked through, and options by meaning: `-rf`, `-fr`,
//! `-r -f` and `--recursive --force` are the same for `rm`.
//!
//! Fail closed both ways: an allow rule covers a command line only when it is plain and
//! every simple command in it is covered; a deny (or ask) rule matches when any simple
//! command anywhere in it — inside `$(…)`, `{ …; }`, `if`, a function, `bash -c '…'` —
//! matches, and a command whose program is not known (`$x`, `"$(…)"`) or a script
//! that could not be parsed matches every deny rule.

use std::collections::BTreeSet;

use crate::read_only::{GIT_GLOBAL_WITH_VALUE, has_option_table, has_unsafe_option};
use crate::shell::{self, Script, SimpleCommand, Word, basename};

/// How a specifier matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Spec {
    /// `git diff:*`: these words, then anything.
    Prefix(Vec<String>),
    /// `git * --stat`: wildcards over the normalised command.
    Pattern(String),
    /// `npm test`: exactly this command.
    Exact(Vec<String>),
}

fn parse_spec(spec: &str) -> Spec {
    let spec = spec.trim();
    let words = |s: &str| -> Vec<String> {
        let script = shell::parse(s);
        match script.commands.as_slice() {
            [only] if only.argv.iter().all(|w| w.literal().is_some()) => only
                .argv
                .iter()
                .filter_map(|w| w.literal().map(str::to_owned))
                .collect(),
            _ => s.split_whitespace().map(str::to_owned).collect(),
        }
    };
    if let Some(prefix) = spec.strip_suffix(":*") {
        return Spec::Prefix(words(prefix));
    }
    // `npm run *` is the newer spelling of `npm run:*`.
    if let Some(prefix) = spec.strip_suffix(" *")
        && !prefix.contains('*')
    {
        return Spec::Prefix(words(prefix));
    }
    if spec.contains('*') {
        return Spec::Pattern(spec.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    Spec::Exact(words(spec))
}

/// Whether the deny or ask rule `spec` matches some command of `command`.
#[must_use]
pub fn deny_matches(spec: &str, command: &str) -> bool {
    if command.trim() == spec.trim() {
        return true;
    }
    let spec = parse_spec(spec);
    script_matches_deny(&Matcher::Rule(&spec), &shell::parse(command), 0)
}

/// Whether some command word of `command` — wherever the deny rules look: wrappers,
/// nested scripts, `find -exec` — runs code those rules cannot read: an interpreter or
/// a build or package tool (`python3 -c`, `perl script.pl`, `make`, `npm run`, `npx`),
/// an editor or a program with an option that runs programs (`vim -c`, `rg --pre`,
/// `git -C dir`, `git config alias.x '!…'`), or a program given as a path outside the
/// system's directories (`./x`). `written` is asked about every other program word
/// (`ls`, `/usr/bin/ls`): whether it names a file the session may have written (a
/// copy of `rm` put on the `PATH` in an earlier call). A line the parser cannot judge
/// counts too.
#[must_use]
pub fn runs_unseen_code(command: &str, written: &dyn Fn(&str) -> bool) -> bool {
    script_matches_deny(&Matcher::Unseen(written), &shell::parse(command), 0)
}

/// What the deny walk looks for in each command it finds.
#[derive(Clone, Copy)]
enum Matcher<'a> {
    /// A deny or ask rule's specifier.
    Rule(&'a Spec),
    /// Code the rules cannot see (see [`runs_unseen_code`]).
    Unseen(&'a dyn Fn(&str) -> bool),
}

impl Matcher<'_> {
    fn matches(&self, argv: &[Word], extra_args: bool) -> bool {
        match self {
            Matcher::Rule(spec) => argv_matches(spec, argv, extra_args, Side::Deny),
            Matcher::Unseen(written) => argv_runs_unseen_code(argv, *written),
        }
    }
}

/// Interpreters: whatever they are handed (`-c`, `-e`, a script, stdin) is code the
/// deny rules do not read. Matched on the program's name without a version suffix
/// (`python3.12`, `perl5.36`).
const INTERPRETERS: &[&str] = &[
    "python",
    "pypy",
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "expect",
    "rscript",
    "r",
    "julia",
    "deno",
    "bun",
    "bunx",
    "osascript",
    "pwsh",
    "powershell",
    "guile",
    "racket",
    "sbcl",
    "clisp",
    "ghci",
    "runghc",
    "runhaskell",
    "scala",
    "groovy",
    "kotlin",
    "java",
    "jshell",
    "swift",
    "elixir",
    "erl",
    "escript",
    "dotnet",
];

/// Build, task and package tools: they run recipes and scripts from files (a Makefile
/// the previous command wrote, `package.json`'s scripts, `build.rs`, a test suite).
const SCRIPT_RUNNERS: &[&str] = &[
    "make",
    "gmake",
    "bmake",
    "just",
    "rake",
    "ninja",
    "scons",
    "cmake",
    "meson",
    "gradle",
    "gradlew",
    "mvn",
    "mvnw",
    "ant",
    "sbt",
    "lein",
    "bazel",
    "bazelisk",
    "buck",
    "buck2",
    "cargo",
    "go",
    "npm",
    "npx",
    "pnpm",
    "pnpx",
    "yarn",
    "corepack",
    "pip",
    "pip3",
    "pipx",
    "uv",
    "uvx",
    "poetry",
    "pdm",
    "hatch",
    "tox",
    "nox",
    "pytest",
    "py.test",
    "jest",
    "vitest",
    "mocha",
    "bundle",
    "bundler",
    "gem",
    "composer",
    "mix",
    "stack",
    "cabal",
    "rebar3",
    "swiftc",
    "run-parts",
    "watch",
    "script",
    "su",
    "ssh",
    "xdg-open",
    // Programs with a command of their own that runs a shell command (`!`, `.shell`,
    // `system`, `EXEC:`, `-e`), or that start one later (`at`, `crontab`, `tmux`).
    "gdb",
    "lldb",
    "m4",
    "dc",
    "sqlite3",
    "psql",
    "mysql",
    "gnuplot",
    "octave",
    "socat",
    "nc",
    "ncat",
    "netcat",
    "tmux",
    "screen",
    "at",
    "batch",
    "crontab",
    "nawk",
];

/// Editors and pagers whose commands run programs (`vim -c '!rm x'`, `ed` `!`).
const EDITORS: &[&str] = &[
    "vi",
    "vim",
    "nvim",
    "view",
    "ex",
    "rvim",
    "gvim",
    "emacs",
    "emacsclient",
    "ed",
    "red",
    "nano",
    "pico",
    "joe",
    "mg",
    "kak",
    "hx",
];

/// Whether one command runs code the deny rules cannot read (see [`runs_unseen_code`]).
fn argv_runs_unseen_code(argv: &[Word], written: &dyn Fn(&str) -> bool) -> bool {
    let Some(Word::Literal(program)) = argv.first() else {
        return true;
    };
    if program.contains('/') && !is_system_program(program) {
        return true;
    }
    let name = basename(program);
    let words: Vec<&str> = argv[1..].iter().filter_map(Word::literal).collect();
    let only_asks_version = matches!(
        words.as_slice(),
        ["--version" | "-V" | "-v" | "--help" | "-h"]
    );
    let bare = name
        .trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
        .to_ascii_lowercase();
    if !only_asks_version
        && (INTERPRETERS.contains(&bare.as_str())
            || SCRIPT_RUNNERS.contains(&name)
            || EDITORS.contains(&name))
    {
        return true;
    }
    let unseen_option = match name {
        "git" => git_runs_unseen_code(&argv[1..]),
        // The program of an `xargs` or `env` is looked at by the walk itself.
        "sed" | "gsed" => sed_runs_programs(&words),
        "tar" | "gtar" => words.iter().any(|w| {
            w.starts_with("--to-command")
                || w.starts_with("--use-compress-program")
                || w.starts_with("--checkpoint-action")
                || w.starts_with("--info-script")
                || w.starts_with("--new-volume-script")
                || (w.starts_with('-') && !w.starts_with("--") && w.contains(['I', 'F']))
        }),
        "rsync" => words.iter().any(|w| {
            w.starts_with("-e") || w.starts_with("--rsh") || w.starts_with("--rsync-path")
        }),
        "zip" => words
            .iter()
            .any(|w| w.starts_with("-TT") || w.starts_with("--unzip-command")),
        _ => has_option_table(name) && has_unsafe_option(name, &words) && name != "find",
    };
    unseen_option || written(program)
}

/// A sed script with `e`, `s///e` or a script file: it may run commands.
fn sed_runs_programs(words: &[&str]) -> bool {
    crate::accept_edits::sed_runs_or_reaches_out(words)
}

/// git run so that it reads configuration or code from elsewhere (`-C dir`, `--git-dir`,
/// `--exec-path`, `--config-env`), setting a configuration value (an alias, a pager, a
/// hook path that later runs), or a subcommand that runs programs its arguments or
/// configuration name (`rebase -x`, `bisect run`, `submodule foreach`, `difftool -x`).
fn git_runs_unseen_code(args: &[Word]) -> bool {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let Some(w) = w.literal() else {
            return true;
        };
        if !w.starts_with('-') {
            break;
        }
        let name = w.split('=').next().unwrap_or(w);
        if matches!(
            name,
            "-C" | "--git-dir" | "--work-tree" | "--exec-path" | "--config-env" | "--attr-source"
        ) {
            return true;
        }
        i += if GIT_GLOBAL_WITH_VALUE.contains(&w) {
            2
        } else {
            1
        };
    }
    let rest: Vec<&str> = args.iter().skip(i).filter_map(Word::literal).collect();
    crate::read_only::git_subcommand_runs_programs(&rest)
}

fn script_matches_deny(spec: &Matcher<'_>, script: &Script, depth: usize) -> bool {
    if script.unknown || depth > MAX_NESTING || changes_what_commands_mean(script) {
        return true;
    }
    script
        .commands
        .iter()
        .any(|c| command_matches_deny(spec, &c.argv, false, depth))
}

/// How deep scripts inside scripts (`bash -c "eval '…'"`) are followed; deeper ones
/// match every deny rule.
const MAX_NESTING: usize = 4;

/// Variables that change which program a command word runs, or make shells and common
/// programs run a command they hold (`PATH`, `BASH_ENV`, `LD_PRELOAD`, exported
/// functions, `GIT_CONFIG_*`, `PAGER`, `LESSOPEN`).
fn changes_commands(variable: &str) -> bool {
    matches!(
        variable,
        "PATH"
            | "BASH_ENV"
            | "ENV"
            | "PS4"
            | "PROMPT_COMMAND"
            | "SHELLOPTS"
            | "BASHOPTS"
            | "BASH_LOADABLES_PATH"
            | "EXECIGNORE"
            | "PAGER"
            | "MANPAGER"
            | "EDITOR"
            | "VISUAL"
            | "LESSOPEN"
            | "LESSCLOSE"
            | "LESSKEYIN"
            | "LESSKEY"
            // bash's alias and command hash tables as arrays; a name reference.
            | "BASH_ALIASES"
            | "BASH_CMDS"
            | "*"
    ) || ["LD_", "BASH_FUNC_", "GIT_"]
        .iter()
        .any(|prefix| variable.starts_with(prefix))
}

/// Programs that copy or create files a later command word may name (`cp /bin/rm ./x`).
const FILE_MAKERS: &[&str] = &[
    "cp", "mv", "ln", "install", "rsync", "dd", "tee", "tar", "cpio", "unzip", "gzip", "gunzip",
    "zcat", "curl", "wget", "base64", "xxd", "ditto", "patch", "git",
];

/// Whether the script makes a command word mean another program than its name says:
/// it assigns (or exports, declares, reads into) a variable that decides what runs, or
/// runs a program given as a path after copying or writing files in the same line.
fn changes_what_commands_mean(script: &Script) -> bool {
    if script.assigned.iter().any(|v| changes_commands(v)) {
        return true;
    }
    let names_variable = |w: &Word| {
        w.literal().is_some_and(|w| {
            let name = w.split('=').next().unwrap_or(w);
            changes_commands(name)
        })
    };
    if script
        .commands
        .iter()
        .any(|c| c.argv.iter().skip(1).any(names_variable))
    {
        return true;
    }
    let mut made_files = script.writes_files;
    for c in &script.commands {
        let argv = shell::unwrap_command(&c.argv, true).map_or(c.argv.as_slice(), |u| u.argv);
        let Some(Word::Literal(program)) = argv.first() else {
            continue;
        };
        if made_files && program.contains('/') && !is_system_program(program) {
            return true;
        }
        let name = basename(program);
        // A shell or an interpreter may copy anything.
        made_files |= FILE_MAKERS.contains(&name)
            || shell::is_shell(name)
            || ["python", "perl", "ruby", "node", "php"]
                .iter()
                .any(|i| name.starts_with(i));
    }
    false
}

/// A program in the system's own directories, which a command line cannot replace
/// without root.
fn is_system_program(path: &str) -> bool {
    [
        "/bin/",
        "/sbin/",
        "/usr/bin/",
        "/usr/sbin/",
        "/usr/local/bin/",
    ]
    .iter()
    .any(|dir| {
        path.strip_prefix(dir)
            .is_some_and(|rest| !rest.contains('/') && !rest.is_empty())
    })
}

/// Builtins that give a name a new meaning or run a string later: after them, what a
/// command word runs is not what it says.
fn redefines_commands(program: &str, args: &[Word]) -> bool {
    match program {
        "alias" | "hash" | "enable" | "compgen" | "complete" | "bind" | "fc" => true,
        // `mapfile -C callback` evaluates the callback.
        "mapfile" | "readarray" => args.iter().any(|w| {
            w.literal()
                .is_none_or(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('C'))
        }),
        // A shell on stdin.
        "sudo" | "doas" => args.iter().any(|w| {
            w.literal().is_none_or(|w| {
                (w.starts_with('-') && !w.starts_with("--") && w.contains(['s', 'i', 'e']))
                    || matches!(w, "--shell" | "--login" | "--edit")
            })
        }),
        _ => false,
    }
}

/// Programs that run a command their arguments name, with options too many to read
/// here: every later word may be the program.
fn runs_its_arguments(program: &str) -> bool {
    matches!(
        program,
        "strace"
            | "ltrace"
            | "chroot"
            | "unshare"
            | "nsenter"
            | "flock"
            | "chrt"
            | "taskset"
            | "prlimit"
            | "setpriv"
            | "runuser"
            | "systemd-run"
            | "valgrind"
            | "parallel"
            | "entr"
            | "faketime"
            | "numactl"
            | "sg"
            | "firejail"
            | "bwrap"
            | "proot"
            | "torsocks"
            | "proxychains"
            | "proxychains4"
            | "catchsegv"
            | "eatmydata"
            | "nocache"
            | "caffeinate"
            | "fakeroot"
            | "pkexec"
            | "setarch"
            | "linux32"
            | "linux64"
    )
}

/// Whether one simple command, or a command it runs, matches a deny rule.
fn command_matches_deny(spec: &Matcher<'_>, argv: &[Word], extra_args: bool, depth: usize) -> bool {
    if depth > MAX_NESTING {
        return true;
    }
    // A rule may name a wrapper (`Bash(timeout:*)`): each wrapper level is a command.
    for (i, w) in argv.iter().enumerate() {
        if let Word::Literal(p) = w
            && (i == 0 || shell::is_wrapper(p, true))
            && spec.matches(&argv[i..], extra_args)
        {
            return true;
        }
    }
    let Some(unwrapped) = shell::unwrap_command(argv, true) else {
        return true;
    };
    let extra_args = extra_args || unwrapped.extra_args;
    let inner = unwrapped.argv;
    if spec.matches(inner, extra_args) {
        return true;
    }
    let program = match inner.first() {
        Some(Word::Literal(p)) => basename(p),
        Some(Word::Pattern(_) | Word::Opaque) => return true,
        None => return false,
    };
    let args = &inner[1..];
    if redefines_commands(program, args) {
        return true;
    }
    // What a shell, eval or trap runs is a script of its own.
    if shell::is_shell(program) || program == "trap" {
        return match nested_scripts(inner, extra_args) {
            Some(scripts) => scripts
                .iter()
                .any(|s| script_matches_deny(spec, &shell::parse(s), depth + 1)),
            None => true,
        };
    }
    if program == "git" {
        return git_config_scripts(args).is_none_or(|scripts| {
            scripts
                .iter()
                .any(|s| script_matches_deny(spec, &shell::parse(s), depth + 1))
        });
    }
    if program == "find" {
        return find_exec_commands(args)
            .iter()
            .any(|argv| command_matches_deny(spec, argv, true, depth + 1));
    }
    if runs_its_arguments(program) {
        return args.iter().enumerate().any(|(i, w)| match w {
            Word::Literal(w) => {
                !w.starts_with('-') && command_matches_deny(spec, &args[i..], extra_args, depth + 1)
            }
            Word::Pattern(_) | Word::Opaque => true,
        });
    }
    false
}

/// The scripts a shell, `eval` or `trap` runs: every operand after `-c` (bash takes the
/// first; looking at more is the safe mistake), the words of `eval`, the action of
/// `trap`. `None` when the script comes from stdin, a file or words of unknown value.
fn nested_scripts(argv: &[Word], extra_args: bool) -> Option<Vec<String>> {
    let program = basename(argv[0].literal()?);
    let words: Vec<&str> = argv[1..].iter().map(Word::literal).collect::<Option<_>>()?;
    if extra_args {
        return None;
    }
    if program == "eval" {
        let words = words.strip_prefix(&["--"]).unwrap_or(&words);
        return Some(vec![words.join(" ")]);
    }
    if program == "trap" {
        let mut rest = words.as_slice();
        while let Some((first, tail)) = rest.split_first() {
            if *first == "--" {
                rest = tail;
                break;
            }
            if first.len() > 1 && first.starts_with('-') {
                rest = tail;
                continue;
            }
            break;
        }
        return Some(rest.first().map(|a| (*a).to_owned()).into_iter().collect());
    }
    let mut command_mode = false;
    let mut operands: Vec<&str> = Vec::new();
    let mut iter = words.iter();
    while let Some(w) = iter.next() {
        if *w == "--" || *w == "-" {
            operands.extend(iter.by_ref().copied());
            break;
        }
        if matches!(*w, "--rcfile" | "--init-file") {
            iter.next();
            continue;
        }
        if w.starts_with("--") {
            continue;
        }
        if w.len() > 1 && (w.starts_with('-') || w.starts_with('+')) {
            command_mode |= w.contains('c');
            if w.ends_with(['o', 'O']) {
                iter.next();
            }
            continue;
        }
        operands.push(w);
        operands.extend(iter.by_ref().copied());
        break;
    }
    command_mode.then(|| operands.iter().map(|s| (*s).to_owned()).collect())
}

/// The values of git's `-c key=value` options before the subcommand, each a script
/// git may run (`alias.x=!rm …`, `core.pager=…`, `core.fsmonitor=…`; a value that
/// runs nothing parses as a harmless word). `None` when a value is unknown or comes
/// from the environment (`--config-env`).
fn git_config_scripts(args: &[Word]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let w = w.literal()?;
        if !w.starts_with('-') {
            break;
        }
        if w.starts_with("--config-env") {
            return None;
        }
        if w == "-c" {
            let setting = args.get(i + 1)?.literal()?;
            let value = setting.split_once('=').map_or("", |(_, v)| v);
            out.push(value.strip_prefix('!').unwrap_or(value).to_owned());
        }
        i += if GIT_GLOBAL_WITH_VALUE.contains(&w) {
            2
        } else {
            1
        };
    }
    Some(out)
}

/// The commands of find's `-exec`, `-execdir`, `-ok`, `-okdir` actions.
fn find_exec_commands(args: &[Word]) -> Vec<Vec<Word>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(
            args[i].literal(),
            Some("-exec" | "-execdir" | "-ok" | "-okdir")
        ) {
            let start = i + 1;
            let mut end = start;
            while end < args.len() && !matches!(args[end].literal(), Some(";" | "+")) {
                end += 1;
            }
            out.push(args[start..end].to_vec());
            i = end;
        }
        i += 1;
    }
    out
}

/// Whether the allow rules (their specifiers) cover every command of `command`.
#[must_use]
pub fn allowed(specs: &[&str], command: &str) -> bool {
    if specs.iter().any(|s| s.trim() == command.trim()) {
        return true;
    }
    let script = shell::parse(command);
    if !script.plain {
        return false;
    }
    let specs: Vec<Spec> = specs.iter().map(|s| parse_spec(s)).collect();
    script.commands.iter().all(|c| covered(&specs, c))
}

/// Whether some allow specifier covers one simple command, directly or through the
/// wrappers it runs under (`timeout 5 npm test` under `npm test:*`).
fn covered(specs: &[Spec], c: &SimpleCommand) -> bool {
    // A rule for the program an `xargs` runs does not cover the arguments xargs adds
    // (`xargs -a list find .` under `Bash(find:*)`); a rule naming xargs does.
    !c.assigns
        && specs.iter().any(|spec| {
            argv_matches(spec, &c.argv, false, Side::Allow)
                || shell::unwrap_command(&c.argv, false).is_some_and(|u| {
                    !u.assigns && !u.extra_args && argv_matches(spec, u.argv, false, Side::Allow)
                })
        })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Allow,
    Deny,
}

/// Whether one simple command matches a specifier. On the deny side an unknown word can
/// be whatever the rule needs; on the allow side it never matches.
fn argv_matches(spec: &Spec, argv: &[Word], extra_args: bool, side: Side) -> bool {
    let Some(program) = argv.first() else {
        return false;
    };
    let rule_words = match spec {
        Spec::Prefix(w) | Spec::Exact(w) => w,
        Spec::Pattern(p) => {
            return pattern_matches(p, argv, side)
                && (side == Side::Deny || !pattern_allows_unsafe_option(p, argv));
        }
    };
    let Some(rule_program) = rule_words.first() else {
        return false;
    };
    match (program, side) {
        (Word::Literal(p), Side::Deny) => {
            if basename(p) != basename(rule_program) {
                return false;
            }
        }
        // `./ls` is not the `ls` an allow rule names.
        (Word::Literal(p), Side::Allow) => {
            if p != rule_program {
                return false;
            }
        }
        (Word::Pattern(_) | Word::Opaque, Side::Deny) => return true,
        (Word::Pattern(_) | Word::Opaque, Side::Allow) => return false,
    }
    let program = basename(rule_program);
    let args = skip_git_globals(program, &argv[1..]);
    let unknown = extra_args || args.iter().any(|w| !matches!(w, Word::Literal(_)));
    // An allow rule vouches for the words bash runs: not for a word whose expansion is
    // unknown, nor a brace that becomes several words (`{--output=x,HEAD}`), nor a glob
    // that could become an option of a program that has writing or executing ones.
    if side == Side::Allow
        && args.iter().any(|w| match w {
            Word::Opaque => true,
            Word::Pattern(p) => p.contains('{') || has_option_table(program),
            Word::Literal(_) => false,
        })
    {
        return false;
    }
    let rule = Parts::of(
        program,
        &rule_words[1..]
            .iter()
            .map(|w| Word::Literal(w.clone()))
            .collect::<Vec<_>>(),
    );
    let cmd = Parts::of(program, args);
    // The leading words (`git diff`, `npm run build`) in order.
    for (i, word) in rule.leading.iter().enumerate() {
        match cmd.positional.get(i) {
            Some(Some(w)) if w == word => {}
            Some(None) if side == Side::Deny => {}
            None if side == Side::Deny && unknown => {}
            _ => return false,
        }
    }
    let flags_ok = rule.flags.is_subset(&cmd.flags) || (side == Side::Deny && unknown);
    let rest: Vec<&Option<String>> = cmd.positional.iter().skip(rule.leading.len()).collect();
    let operands_ok = rule.trailing.iter().all(|t| {
        rest.iter().any(|p| p.as_deref() == Some(t.as_str())) || (side == Side::Deny && unknown)
    });
    if !(flags_ok && operands_ok) {
        return false;
    }
    match spec {
        Spec::Exact(_) => {
            side == Side::Deny
                || (!unknown
                    && cmd.flags == rule.flags
                    && cmd.positional.len() == rule.leading.len() + rule.trailing.len())
        }
        Spec::Prefix(_) => {
            // An allow rule for a reader does not cover the options that make it write.
            side == Side::Deny || {
                let words: Vec<&str> = argv[1..].iter().filter_map(Word::literal).collect();
                let named: Vec<&str> = rule_words[1..].iter().map(String::as_str).collect();
                !has_unsafe_option(program, &words) || has_unsafe_option(program, &named)
            }
        }
        Spec::Pattern(_) => false,
    }
}

/// Whether a wildcard allow rule would let through a writing option it does not name
/// (`Bash(git * --stat)` and `git diff --output=x --stat`).
fn pattern_allows_unsafe_option(pattern: &str, argv: &[Word]) -> bool {
    let Some(program) = argv.first().and_then(Word::literal) else {
        return true;
    };
    let words: Vec<&str> = argv[1..].iter().filter_map(Word::literal).collect();
    let named: Vec<&str> = pattern.split_whitespace().skip(1).collect();
    has_unsafe_option(program, &words) && !has_unsafe_option(program, &named)
}

fn pattern_matches(pattern: &str, argv: &[Word], side: Side) -> bool {
    let mut words = Vec::new();
    for w in argv {
        match w {
            Word::Literal(s) => words.push(s.clone()),
            Word::Pattern(_) | Word::Opaque => {
                if side == Side::Allow {
                    return false;
                }
                // Could be anything: compare the program only.
                let first = pattern.split_whitespace().next().unwrap_or("");
                return argv
                    .first()
                    .and_then(Word::literal)
                    .is_none_or(|p| basename(p) == first);
            }
        }
    }
    if side == Side::Deny
        && let Some(first) = words.first_mut()
    {
        *first = basename(first).to_owned();
    }
    wildcard_match(pattern, &words.join(" "))
}

/// `*` matches any run of characters.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let mut rest = text;
    for (i, piece) in pieces.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(piece) else {
                return false;
            };
            rest = r;
        } else if i == pieces.len() - 1 {
            return rest.ends_with(piece);
        } else {
            let Some(pos) = rest.find(piece) else {
                return false;
            };
            rest = &rest[pos + piece.len()..];
        }
    }
    rest.is_empty()
}

/// `git -C dir -c k=v push` → `push`: git's own options come before the subcommand.
fn skip_git_globals<'a>(program: &str, args: &'a [Word]) -> &'a [Word] {
    if program != "git" {
        return args;
    }
    let mut i = 0;
    while let Some(w) = args.get(i).and_then(Word::literal) {
        if !w.starts_with('-') {
            break;
        }
        i += if GIT_GLOBAL_WITH_VALUE.contains(&w) {
            2
        } else {
            1
        };
    }
    &args[i.min(args.len())..]
}

/// A command's arguments by meaning: leading words before the first option, the set of
/// options (normalised), and every positional word (`None` when unknown).
struct Parts {
    leading: Vec<String>,
    flags: BTreeSet<String>,
    positional: Vec<Option<String>>,
    trailing: Vec<String>,
}

impl Parts {
    fn of(program: &str, args: &[Word]) -> Self {
        let mut parts = Self {
            leading: Vec::new(),
            flags: BTreeSet::new(),
            positional: Vec::new(),
            trailing: Vec::new(),
        };
        let mut options_done = false;
        let mut seen_flag = false;
        for w in args {
            let Word::Literal(w) = w else {
                parts.positional.push(None);
                continue;
            };
            if !options_done && w == "--" {
                options_done = true;
                continue;
            }
            if !options_done && w.len() > 1 && w.starts_with('-') {
                seen_flag = true;
                parts.flags.extend(normalise_flag(program, w));
                continue;
            }
            parts.positional.push(Some(w.clone()));
            if seen_flag {
                parts.trailing.push(w.clone());
            } else {
                parts.leading.push(w.clone());
            }
        }
        parts
    }
}

/// Long options with a short equivalent, per program, so `--recursive` = `-r`.
fn long_aliases(program: &str) -> &'static [(&'static str, char)] {
    match program {
        "rm" => &[
            ("recursive", 'r'),
            ("force", 'f'),
            ("dir", 'd'),
            ("interactive", 'i'),
            ("verbose", 'v'),
        ],
        "cp" | "mv" => &[
            ("recursive", 'r'),
            ("force", 'f'),
            ("interactive", 'i'),
            ("verbose", 'v'),
            ("no-clobber", 'n'),
        ],
        "chmod" | "chown" | "chgrp" => &[("recursive", 'R'), ("verbose", 'v')],
        "git" => &[
            ("force", 'f'),
            ("all", 'a'),
            ("message", 'm'),
            ("verbose", 'v'),
        ],
        _ => &[],
    }
}

/// `-rf` → {`-f`, `-r`}; `--recursive` → {`-r`} for rm; `--rec` too (getopt accepts
/// unique prefixes); `-R` is `-r` where both mean recursive.
fn normalise_flag(program: &str, flag: &str) -> Vec<String> {
    let aliases = long_aliases(program);
    if let Some(long) = flag.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or(long);
        let candidates: Vec<char> = aliases
            .iter()
            .filter(|(l, _)| *l == name || (!name.is_empty() && l.starts_with(name)))
            .map(|(_, c)| *c)
            .collect();
        return match candidates.as_slice() {
            [c] => vec![format!("-{c}")],
            _ => vec![format!("--{name}")],
        };
    }
    flag.chars()
        .skip(1)
        .map(|c| {
            let c = if c == 'R' && matches!(program, "rm" | "cp") {
                'r'
            } else {
                c
            };
            format!("-{c}")
        })
        .collect()
}

/// The words of `command` that may name files, for the caller to resolve against the
/// cwd: every argument but options, the value of `--opt=value`, and the fixed prefix of
/// a glob (`../*` → `..`).
#[must_use]
pub fn path_arguments(command: &str) -> Vec<String> {
    let script = shell::parse(command);
    let mut out = Vec::new();
    for c in &script.commands {
        for w in c.argv.iter().skip(1) {
            let text = match w {
                Word::Literal(s) => s.as_str(),
                // `.*` may match `..` (bash before 5.2, or without globskipdots).
                Word::Pattern(s) if s.contains(".*") || s.contains(".?") || s.contains(".[") => "/",
                Word::Pattern(s) => s.split(['*', '?', '[', '{']).next().unwrap_or_default(),
                Word::Opaque => continue,
            };
            let value = match text.split_once('=') {
                Some((flag, value)) if flag.starts_with('-') => value,
                _ if text.starts_with('-') => continue,
                _ => text,
            };
            if value.is_empty() {
                continue;
            }
            // `~user/x` is another user's home: somewhere outside, whatever it is.
            if value.starts_with('~') && value != "~" && !value.starts_with("~/") {
                out.push("/".to_owned());
                continue;
            }
            out.push(value.to_owned());
        }
    }
    out
}

/// The files a command line that does not only read may write or change, for the
/// protected-path check under deny rules: every file word of [`file_arguments`] (the
/// operands of `cp`, `tee`, `mv`, of every command, nested scripts' too) and every
/// writing redirection's target; `None` when a target is not known text. Empty for a
/// line the read-only classifier vouches for.
#[must_use]
pub fn written_candidates(command: &str) -> Option<Vec<String>> {
    let script = shell::parse(command);
    if crate::read_only::script_only_reads(&script) {
        return Some(Vec::new());
    }
    let mut out: Vec<String> = file_arguments(command)
        .into_iter()
        .map(|a| match a {
            FileArgument::Path(p) | FileArgument::Glob(p) => p,
        })
        .collect();
    for target in script.outputs {
        out.push(target?);
    }
    Some(out)
}

/// A word of a command line that may name a file (see [`file_arguments`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileArgument {
    /// Known text: an operand, the value of `--opt=value`, a `< file` input.
    Path(String),
    /// A glob or brace bash expands against the filesystem (`s*/key`, `{a,b}/x`).
    Glob(String),
}

/// Every word of `command` that may name a file a command opens — in every simple
/// command, in `< file` inputs, and in the scripts handed to `bash -c`, `eval` and
/// `trap` — for the `Read(…)` deny rules: options are left out, `--opt=value` gives
/// its value, and words of unknown value are left to the sandbox.
#[must_use]
pub fn file_arguments(command: &str) -> Vec<FileArgument> {
    let mut out = Vec::new();
    collect_file_arguments(&shell::parse(command), 0, &mut out);
    out
}

fn collect_file_arguments(script: &Script, depth: usize, out: &mut Vec<FileArgument>) {
    out.extend(script.inputs.iter().cloned().map(FileArgument::Path));
    for c in &script.commands {
        for w in c.argv.iter().skip(1) {
            let (text, glob) = match w {
                Word::Literal(s) => (s.as_str(), false),
                Word::Pattern(s) => (s.as_str(), true),
                Word::Opaque => continue,
            };
            let value = match text.split_once('=') {
                Some((flag, value)) if flag.starts_with('-') => value,
                _ => text,
            };
            if value.is_empty() || value.starts_with('-') {
                continue;
            }
            out.push(if glob {
                FileArgument::Glob(value.to_owned())
            } else {
                FileArgument::Path(value.to_owned())
            });
        }
        if depth >= MAX_NESTING {
            continue;
        }
        let Some(u) = shell::unwrap_command(&c.argv, true) else {
            continue;
        };
        let Some(program) = u.argv.first().and_then(Word::literal) else {
            continue;
        };
        if shell::is_shell(program) || basename(program) == "trap" {
            for nested in nested_scripts(u.argv, u.extra_args).unwrap_or_default() {
                collect_file_arguments(&shell::parse(&nested), depth + 1, out);
            }
        }
    }
}

/// The rules to add to `existing` (allow specifiers) so that [`allowed`] covers
/// `command`: one per simple command not covered yet, in command order, without
/// repeats — `Bash(git diff:*)` for `git diff HEAD`, `Bash(ls:*)` for `ls -la`; the
/// command a wrapper runs for `timeout 5 npm test` (`Bash(npm test:*)`); the exact
/// command where a prefix rule would not cover it (`Bash(git diff --output=x)`). The
/// set is checked before it is returned: rules that would not allow the command are
/// never suggested.
pub fn suggested_rules(existing: &[&str], command: &str) -> Result<Vec<String>, Uncoverable> {
    let script = shell::parse(command);
    if !script.plain {
        return Err(Uncoverable::ShellFeatures);
    }
    if script.commands.iter().any(|c| c.assigns) {
        return Err(Uncoverable::SetsVariables);
    }
    let mut specs: Vec<Spec> = existing.iter().map(|s| parse_spec(s)).collect();
    let mut added: Vec<String> = Vec::new();
    for c in &script.commands {
        if covered(&specs, c) {
            continue;
        }
        let spec = prefix_suggestion(c)
            .filter(|s| covered(&[parse_spec(s)], c))
            .or_else(|| exact_suggestion(c).filter(|s| covered(&[parse_spec(s)], c)))
            .ok_or(Uncoverable::NoRule)?;
        specs.push(parse_spec(&spec));
        added.push(spec);
    }
    let all: Vec<&str> = existing
        .iter()
        .copied()
        .chain(added.iter().map(String::as_str))
        .collect();
    if !allowed(&all, command) {
        return Err(Uncoverable::NoRule);
    }
    Ok(added.iter().map(|s| format!("Bash({s})")).collect())
}

/// Why no `Bash(…)` rule can allow a command (see [`suggested_rules`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Uncoverable {
    /// Expansions, substitutions, redirections into files, functions, loops, …
    #[error(
        "it uses shell features no Bash(…) rule vouches for (such as $(…), variables, or redirection into files)"
    )]
    ShellFeatures,
    /// `X=1 cmd`.
    #[error("it sets variables for a command (X=1 cmd), which no Bash(…) rule vouches for")]
    SetsVariables,
    /// A word no rule can name.
    #[error("some of its commands cannot be named by a Bash(…) rule")]
    NoRule,
}

/// `git diff:*` for `git diff HEAD`, `ls:*` for `ls -la`: the program (what a wrapper
/// runs, for `timeout 5 git diff`) and its subcommand when the second word is one.
fn prefix_suggestion(c: &SimpleCommand) -> Option<String> {
    let argv = shell::unwrap_command(&c.argv, false)
        .filter(|u| !u.assigns)
        .map_or(c.argv.as_slice(), |u| u.argv);
    let words: Vec<&str> = argv.iter().map_while(Word::literal).take(2).collect();
    match words.as_slice() {
        [] => None,
        [cmd, sub, ..]
            if sub
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !sub.starts_with('-') =>
        {
            Some(format!("{cmd} {sub}:*"))
        }
        [cmd, ..] => Some(format!("{cmd}:*")),
    }
}

/// The command itself, when every word is plain text a rule can spell as it is.
fn exact_suggestion(c: &SimpleCommand) -> Option<String> {
    let words: Option<Vec<&str>> = c
        .argv
        .iter()
        .map(|w| {
            w.literal().filter(|w| {
                !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            })
        })
        .collect();
    Some(words?.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_rules_do_not_cover_hidden_commands() {
        for c in shell::ISSUE_ECHO_BYPASSES.iter().copied().chain([
            "echo hi; touch x",
            "echo $(touch x)",
            "echo `touch x`",
            "echo hi > out",
            "X=1 echo hi",
            "./echo hi",
            "echo hi | sh",
        ]) {
            assert!(!allowed(&["echo:*"], c), "{c:?}");
        }
        for c in [
            "echo hi",
            "echo 'a; b' \"c && d\"",
            "echo hi 2>&1",
            "echo a && echo b",
        ] {
            assert!(allowed(&["echo:*"], c), "{c:?}");
        }
    }

    #[test]
    fn deny_rules_see_through_quoting_paths_wrappers_and_structure() {
        for c in [
            "rm x",
            "\"rm\" x",
            "'rm' x",
            "\\rm x",
            "r''m x",
            "/bin/rm x",
            "command rm x",
            "env rm x",
            "env A=1 rm x",
            "timeout 5 rm x",
            "nice -n 5 rm x",
            "nohup rm x",
            "time rm x",
            "exec rm x",
            "sudo rm x",
            "{ rm x; }",
            "if true; then rm x; fi",
            "x=rm; $x y",
            "ls | xargs rm",
            "echo $(rm x)",
            "bash -c 'rm x'",
            "sh -c \"ls; rm x\"",
            "eval rm x",
            "find . -exec rm {} ';'",
            "f() { rm x; }; f",
            "\"$(echo rm)\" x",
        ] {
            assert!(deny_matches("rm:*", c), "{c:?}");
        }
        for c in ["ls", "echo rm", "git rm x", "rmdir x"] {
            assert!(!deny_matches("rm:*", c), "{c:?}");
        }
    }

    #[test]
    fn deny_rules_match_options_by_meaning() {
        for c in [
            "rm -rf /",
            "rm  -rf /",
            "rm\t-rf /",
            "rm '-rf' /",
            "rm -fr /",
            "rm -r -f /",
            "rm --recursive --force /",
            "rm --rec --for /",
            "rm -R -f /",
            "rm -v -rf x",
            "rm x -rf",
            "rm $FLAGS /",
            "rm * ",
            "ls | xargs rm",
        ] {
            assert!(deny_matches("rm -rf:*", c), "{c:?}");
        }
        for c in ["rm x", "rm -r x", "rm -f x", "rm -- -rf"] {
            assert!(!deny_matches("rm -rf:*", c), "{c:?}");
        }
    }

    #[test]
    fn allow_prefix_rules_do_not_cover_writing_options() {
        assert!(allowed(&["git diff:*"], "git diff HEAD~1 --stat"));
        assert!(!allowed(&["git diff:*"], "git diff --output=/tmp/x"));
        assert!(!allowed(&["git diff:*"], "git -c core.pager=sh diff"));
        assert!(allowed(&["sort -o:*"], "sort -o out in"));
        assert!(allowed(&["npm run test"], "npm run test"));
        assert!(!allowed(&["npm run test"], "npm run test --evil"));
        assert!(allowed(&["timeout:*", "npm test:*"], "timeout 5 npm test"));
        assert!(allowed(&["npm test:*"], "timeout 5 npm test"));
        assert!(!allowed(&["npm test:*"], "env LD_PRELOAD=x npm test"));
        assert!(allowed(&["git * --stat"], "git diff --stat"));
        assert!(!allowed(&["git * --stat"], "git diff --output=x --stat"));
    }

    /// Issue #29 class 3: a rule matches the argv bash runs, not the text.
    #[test]
    fn allow_rules_match_the_expanded_argv() {
        for (rule, c) in [
            ("git diff:*", "git diff {--output=../x,HEAD}"),
            ("git diff:*", "git diff HEAD{,}"),
            ("echo:*", "echo {a,b}"),
            (
                "git:*",
                "git --attr-source HEAD -c core.fsmonitor=./x status",
            ),
            ("git:*", "git --attr-source=HEAD status"),
            ("git status:*", "git --git-dir=/tmp/x/.git status"),
            ("find:*", "xargs -a file find ."),
            ("find:*", "echo -delete | xargs find ."),
            ("less:*", "less --lesskey-src=keys f"),
            ("less:*", "less -k keys f"),
            ("git diff:*", "git diff *"),
            ("ls:*", "/bin/l? x"),
            ("ls:*", "ls < /dev/tcp/127.0.0.1/80"),
            ("npm test:*", "time -o out npm test"),
        ] {
            assert!(!allowed(&[rule], c), "{rule} covered {c:?}");
        }
        for (rule, c) in [
            ("cat:*", "cat *.txt"),
            ("git status:*", "git -C sub status"),
            ("git log:*", "git --no-pager log -1"),
            ("xargs grep:*", "xargs grep -n foo"),
            ("npm test:*", "timeout --foreground 5 npm test"),
        ] {
            assert!(allowed(&[rule], c), "{rule} did not cover {c:?}");
        }
    }

    /// Issue #29 class 10: a deny rule applies wherever bash finds a command word.
    #[test]
    fn deny_rules_apply_wherever_a_command_word_appears() {
        for c in [
            "trap 'rm x' EXIT",
            "trap -- 'rm x' EXIT",
            "bash -c -- 'rm x'",
            "bash -x -c 'rm x'",
            "sh -c -- 'ls; rm x'",
            "eval -- rm x",
            "eval -- 'rm x'",
            "alias x=rm; x y",
            "alias x=ls; x y",
            "env -vS 'rm x'",
            "env -S'rm x'",
            "env --split-string='rm x'",
            "env --split='rm x'",
            "coproc rm x",
            "builtin command rm x",
            "builtin exec rm x",
            "nohup rm x",
            "timeout --foreground 5 rm x",
            "nice -5 rm x",
            "nice --adjustment=5 rm x",
            "find . -execdir bash -c 'rm x' ';'",
            "find . -exec env rm {} +",
            "cp /bin/rm ./x; ./x y",
            "ln -s /bin/rm x && ./x y",
            "cat /bin/rm > x; chmod +x x; ./x y",
            "PATH=.:$PATH ls",
            "export PATH=/tmp/p; ls",
            "export BASH_ENV=./evil; bash -c ls",
            "BASH_ENV=./evil bash -c ls",
            "env BASH_ENV=./evil bash -c ls",
            "hash -p /bin/rm ls; ls x",
            "enable -f ./x.so rm",
            "git -c alias.x='!rm x' x",
            "git -c core.pager='rm x' log",
            "git --config-env=alias.x=CMD x",
            "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=alias.x GIT_CONFIG_VALUE_0='!rm x' git x",
            "PAGER='rm x' git log",
            "env - rm x",
            "toybox rm x",
            "BASH_ALIASES[x]=rm; x y",
            "BASH_CMDS[ls]=/bin/rm; ls x",
            "declare -n p=PATH; p=.; ls",
            "coproc { rm x; }",
            "coproc NAME { rm x; }",
            "time { rm x; }",
            "bash -c 'cp /bin/rm x'; ./x y",
            "python3 -c 'import shutil; shutil.copy(\"/bin/rm\", \"x\")'; ./x y",
            "strace -f rm x",
            "flock /tmp/l rm x",
            "chroot / rm x",
            "echo 'rm x' | sudo -s",
            "mapfile -C 'rm x' -c 1 < f",
            "compgen -C 'rm x' y",
            "exec -a foo rm x",
            "cat <<EOF\n$(rm x)\nEOF",
            "[[ $(rm x) ]]",
            "for i in $(rm x); do :; done",
        ] {
            assert!(deny_matches("rm:*", c), "{c:?}");
        }
        for c in [
            "ls",
            "echo rm",
            "git rm x",
            "rmdir x",
            "X=1 cargo test",
            "trap -p",
            "./build.sh",
            "cargo build && ./target/debug/app",
            "bash -c 'ls'",
            "git -c user.name=me commit -m x",
        ] {
            assert!(!deny_matches("rm:*", c), "{c:?}");
        }
        // A deny rule naming a wrapper matches the wrapper.
        assert!(deny_matches("timeout:*", "timeout 5 ls"));
    }

    #[test]
    fn path_arguments_include_option_values_and_other_homes() {
        assert_eq!(
            path_arguments("cat ../a --file=/etc/x -n ~bob/.ssh/id ~/y src/*.rs 'q*' .*/x"),
            ["../a", "/etc/x", "/", "~/y", "src/", "q*", "/"]
        );
    }

    fn suggest(command: &str) -> Result<Vec<String>, Uncoverable> {
        suggested_rules(&[], command)
    }

    #[test]
    fn suggestion_uses_command_and_subcommand() {
        assert_eq!(suggest("git diff HEAD~1").unwrap(), ["Bash(git diff:*)"]);
        assert_eq!(suggest("ls -la").unwrap(), ["Bash(ls:*)"]);
        assert_eq!(suggest("timeout 5 npm test").unwrap(), ["Bash(npm test:*)"]);
    }

    #[test]
    fn suggestions_name_every_simple_command_once_in_order() {
        for (command, want) in [
            (
                "ls -la && wc -l notes.txt",
                &["Bash(ls:*)", "Bash(wc:*)"][..],
            ),
            ("ls; wc -l a; ls -l", &["Bash(ls:*)", "Bash(wc:*)"]),
            (
                "cat a | sort | uniq -c",
                &["Bash(cat a:*)", "Bash(sort:*)", "Bash(uniq:*)"],
            ),
            (
                "(cd sub && make) || echo failed",
                &["Bash(cd sub:*)", "Bash(make:*)", "Bash(echo failed:*)"],
            ),
            (
                "{ git status; git diff --stat; } 2>&1",
                &["Bash(git status:*)", "Bash(git diff:*)"],
            ),
            ("git diff && git diff HEAD", &["Bash(git diff:*)"]),
            ("if true; then ls; fi", &["Bash(true:*)", "Bash(ls:*)"]),
        ] {
            assert_eq!(suggest(command).unwrap(), want, "{command:?}");
        }
    }

    #[test]
    fn suggestions_leave_out_what_the_rules_already_cover() {
        assert_eq!(
            suggested_rules(&["ls:*"], "ls -la && wc -l notes.txt").unwrap(),
            ["Bash(wc:*)"]
        );
        assert_eq!(
            suggested_rules(&["ls:*", "wc:*"], "ls && wc -l x").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_command_a_prefix_rule_cannot_cover_gets_its_exact_rule() {
        // `git diff:*` does not cover the writing option.
        assert_eq!(
            suggest("git diff --output=x && ls").unwrap(),
            ["Bash(git diff --output=x)", "Bash(ls:*)"]
        );
    }

    #[test]
    fn commands_no_rule_covers_are_not_given_a_rule() {
        for c in [
            "echo $(date)",
            "echo $HOME",
            "$cmd x",
            "ls > out.txt",
            "for f in a b; do echo $f; done",
            "cat <<EOF\nx\nEOF",
        ] {
            assert_eq!(suggest(c), Err(Uncoverable::ShellFeatures), "{c:?}");
        }
        assert!(suggest("X=1 ls && wc x").is_err());
        assert_eq!(suggest("'my prog' x"), Err(Uncoverable::NoRule));
    }

    #[test]
    fn suggested_rules_allow_the_command() {
        for c in [
            "ls -la && wc -l notes.txt",
            "ls | wc -l",
            "a; b; c",
            "(cd x && ls) && pwd",
            "git -C sub status && git log --oneline -3",
            "rm -rf build && cargo build --release",
            "git diff --output=x",
            "timeout 5 npm test",
            "ls | xargs rm",
            "find . -name '*.rs' | xargs grep -n foo",
            "./run.sh --fast",
            "echo 'a; b' \"c && d\"",
            "cat *.txt | sort -u",
        ] {
            let rules = suggest(c).unwrap_or_else(|e| panic!("{c:?}: {e}"));
            let specs: Vec<&str> = rules
                .iter()
                .map(|r| &r["Bash(".len()..r.len() - 1])
                .collect();
            assert!(allowed(&specs, c), "{c:?}: {rules:?}");
        }
    }

    /// Issue 29, the gaps of class 10: code a deny rule cannot read — an interpreter's
    /// script, a Makefile or package script, an option that runs a program, a program
    /// given as a path — is found wherever a command word is; a program word the
    /// session may have written is asked about through `written`.
    #[test]
    fn code_the_deny_rules_cannot_read_is_found_wherever_a_command_word_is() {
        let nothing_written = |_: &str| false;
        for c in [
            "python3 -c 'import os; os.remove(\"x\")'",
            "python3 - <<'EOF'\nimport os\nos.remove('x')\nEOF",
            "python3.12 script.py",
            "/usr/bin/python3 -c pass",
            "perl -e 'unlink \"x\"'",
            "node -e 'require(\"fs\").rmSync(\"x\")'",
            "ruby -e 'File.delete(\"x\")'",
            "php -r 'unlink(\"x\");'",
            "make",
            "make -f Makefile clean",
            "npm run clean",
            "npm test",
            "npx rimraf x",
            "yarn clean",
            "cargo run",
            "timeout 5 python3 -c pass",
            "bash -c 'perl -e 1'",
            "find . -exec python3 -c pass {} +",
            "echo x | xargs node -e 1",
            "ls && vim -c '!rm x' -c q",
            "sed 's/a/rm x/e' f",
            "sed -f prog.sed f",
            "rg --pre rm x .",
            "less +'!rm x' f",
            "sort --compress-program=./x f",
            "tar -cf a.tar --to-command='rm x' .",
            "tar -I ./x -cf a.tar .",
            "rsync -e ./x a b:",
            "git -C planted status",
            "git --git-dir=planted log",
            "git --exec-path=. status",
            "git config alias.x '!rm y'",
            "git config core.fsmonitor ./x",
            "git config --add core.hooksPath h",
            "git rebase -x 'rm y' HEAD~1",
            "git bisect run rm y",
            "git submodule foreach rm y",
            "./x y",
            "../bin/x y",
            "x/rm y",
            "watch rm y",
            "ssh host rm y",
            "eval \"$(cat cmd)\"",
            "source ./evil.sh",
            ". ./evil.sh",
            "awk '{system($0)}' cmds",
            "ssh -o ProxyCommand='rm x' h",
            "exec -a ls /proc/self/exe",
            "cc x.c -o y && ./y",
            "xargs -a cmds sh",
            "busybox sh -c 'perl -e 1'",
            "echo '!rm x' | dc",
            "sqlite3 :memory: '.shell rm x'",
            "tmux new -d 'rm x'",
            "crontab jobs",
            "socat - EXEC:'rm x'",
            "gdb -batch -ex 'shell rm x'",
        ] {
            assert!(runs_unseen_code(c, &nothing_written), "{c}");
        }
        for c in [
            "ls -la",
            "cat a | grep b",
            "git status",
            "git config --get user.name",
            "git config user.name",
            "git config --list",
            "git log --oneline",
            "python3 --version",
            "/usr/bin/ls x",
            "sed -i 's/a/b/' f",
            "find . -name '*.rs' -delete",
            "echo python3 -c 'rm x'",
            "rm x",
        ] {
            assert!(!runs_unseen_code(c, &nothing_written), "{c}");
        }
        // A program word that names a file the session wrote (`ls` copied over on the
        // PATH, `/usr/bin/ls` overwritten), wherever it is.
        let ls_written = |w: &str| basename(w) == "ls";
        for c in [
            "ls y",
            "/usr/bin/ls y",
            "timeout 5 ls",
            "bash -c 'ls y'",
            "cat a | ls",
        ] {
            assert!(runs_unseen_code(c, &ls_written), "{c}");
        }
        assert!(!runs_unseen_code("cat y", &ls_written));
        // `Bash(git:*)` does not cover setting what git runs later.
        for c in [
            "git config alias.x '!rm y'",
            "git config core.fsmonitor ./x",
            "git rebase --exec 'rm y' HEAD~1",
        ] {
            assert!(!allowed(&["git:*"], c), "{c}");
        }
        assert!(allowed(&["git:*"], "git config --get user.name"));
        assert!(allowed(&["git config:*"], "git config alias.x '!rm y'"));
    }
}
