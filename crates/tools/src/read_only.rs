//! Which commands only read: a name list plus, per command, the options and operands
//! that write files or run other programs (`sort -o`, `rg --pre`, `find -exec`,
//! `git diff --output=`, …). The table is documented in docs/security.md.
//!
//! This decides only when plan mode may run a command without asking; what the command
//! can actually do there is held by the kernel sandbox (`sandbox`).

use crate::shell::{self, Script, Word};

/// How a command's arguments can make it write or execute.
struct Rule {
    name: &'static str,
    /// Short option letters that write or execute, alone or in a cluster (`-no` has `o`).
    short: &'static str,
    /// Long options that write or execute; unique prefixes count (`--out` = `--output`).
    long: &'static [&'static str],
    /// Words that are dangerous anywhere (find's actions, less's `+` commands).
    words: &'static [&'static str],
    /// Further checks on the arguments (operands that are outputs).
    extra: Option<fn(&[&str]) -> bool>,
}

const fn plain(name: &'static str) -> Rule {
    Rule {
        name,
        short: "",
        long: &[],
        words: &[],
        extra: None,
    }
}

const RULES: &[Rule] = &[
    plain("ls"),
    plain("cat"),
    plain("head"),
    plain("tail"),
    plain("wc"),
    plain("grep"),
    plain("egrep"),
    plain("fgrep"),
    plain("pwd"),
    plain("echo"),
    plain("which"),
    plain("stat"),
    plain("du"),
    plain("df"),
    plain("cut"),
    plain("uname"),
    plain("whoami"),
    plain("true"),
    plain("false"),
    plain("printenv"),
    plain("basename"),
    plain("dirname"),
    plain("realpath"),
    plain("readlink"),
    Rule {
        // `-l` pipes the output through `pr`.
        short: "l",
        long: &["paginate"],
        ..plain("diff")
    },
    plain("cmp"),
    plain("type"),
    plain("id"),
    plain("nl"),
    plain("tr"),
    plain("column"),
    Rule {
        // `-R` with `-H` writes an HTML file into every directory.
        short: "oR",
        ..plain("tree")
    },
    Rule {
        // A lesskey file binds keys to shell commands and sets LESSOPEN.
        short: "oOk",
        long: &[
            "log-file",
            "LOG-FILE",
            "lesskey-file",
            "lesskey-src",
            "lesskey-content",
        ],
        extra: Some(|args| args.iter().any(|a| a.starts_with('+'))),
        ..plain("less")
    },
    Rule {
        extra: Some(|args| args.iter().any(|a| a.starts_with('+'))),
        ..plain("more")
    },
    Rule {
        short: "s",
        long: &["set"],
        ..plain("date")
    },
    Rule {
        short: "Fb",
        long: &["file", "boot"],
        extra: Some(|args| !positionals(args, "").is_empty()),
        ..plain("hostname")
    },
    Rule {
        // `-z` may run decompressors (gzip, xz, …) as programs.
        short: "CzZ",
        long: &["compile", "uncompress", "uncompress-noreport"],
        ..plain("file")
    },
    Rule {
        short: "oT",
        long: &["output", "compress-program", "temporary-directory"],
        ..plain("sort")
    },
    Rule {
        extra: Some(|args| positionals(args, "fsw").len() > 1),
        ..plain("uniq")
    },
    Rule {
        // `-z` runs decompressors (gzip, xz, …) as programs.
        short: "z",
        long: &["pre", "pre-glob", "hostname-bin", "search-zip"],
        ..plain("rg")
    },
    Rule {
        words: &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
            "-fls",
        ],
        ..plain("find")
    },
    Rule {
        extra: Some(awk_writes),
        ..plain("awk")
    },
    Rule {
        extra: Some(awk_writes),
        ..plain("gawk")
    },
    Rule {
        extra: Some(awk_writes),
        ..plain("mawk")
    },
];

/// git subcommands that only read, with their writing or executing options.
const GIT_RULES: &[Rule] = &[
    plain("status"),
    plain("rev-parse"),
    plain("ls-files"),
    plain("ls-tree"),
    plain("describe"),
    Rule {
        long: &["output", "ext-diff", "textconv"],
        ..plain("diff")
    },
    Rule {
        long: &["output", "ext-diff", "textconv"],
        ..plain("log")
    },
    Rule {
        long: &["output", "ext-diff", "textconv"],
        ..plain("show")
    },
    Rule {
        long: &["output", "ext-diff", "textconv"],
        ..plain("shortlog")
    },
    Rule {
        long: &["textconv"],
        ..plain("blame")
    },
    Rule {
        long: &["textconv", "filters"],
        ..plain("cat-file")
    },
    Rule {
        short: "O",
        long: &["open-files-in-pager", "ext-grep", "textconv"],
        ..plain("grep")
    },
    Rule {
        extra: Some(|args| {
            !matches!(
                positionals(args, "").first().copied(),
                None | Some("show" | "exists")
            )
        }),
        ..plain("reflog")
    },
];

/// git's own options before the subcommand that load neither configuration nor code
/// from elsewhere: every other one (`-c`, `--config-env`, `--exec-path`, `--git-dir`,
/// `--attr-source`, `-p`, and the ones git adds later) may run programs.
const GIT_SAFE_GLOBAL: &[&str] = &[
    "-C",
    "--work-tree",
    "--namespace",
    "--no-pager",
    "-P",
    "--bare",
    "--no-replace-objects",
    "--no-lazy-fetch",
    "--no-optional-locks",
    "--no-advice",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--version",
    "--help",
    "-v",
    "-h",
];
/// git's options before the subcommand that take the next word as their value.
pub(crate) const GIT_GLOBAL_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--config-env",
    "--attr-source",
    "--super-prefix",
    "--list-cmds",
];

/// The positional operands of `args`: words not starting with `-` (every word after
/// `--`), skipping the value of each short option in `with_value` given apart (`-f 2`).
fn positionals<'a>(args: &[&'a str], with_value: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        if *a == "--" {
            out.extend(iter.by_ref().copied());
            break;
        }
        if let Some(letters) = a.strip_prefix('-')
            && !letters.is_empty()
            && !letters.starts_with('-')
        {
            if letters.len() == 1 && with_value.contains(letters) {
                iter.next();
            }
            continue;
        }
        if a.starts_with("--") {
            continue;
        }
        out.push(a);
    }
    out
}

/// An awk program that can write, run commands or be read from a file: `print > f`,
/// `| "sh"`, `system()`, `-f prog`, gawk's `-i inplace`, `-l`, `-E`.
fn awk_writes(args: &[&str]) -> bool {
    let mut program_seen = false;
    let mut iter = args.iter();
    while let Some(a) = iter.next() {
        match *a {
            "-F" | "-v" => {
                iter.next();
            }
            a if a.starts_with("-F") || a.starts_with("-v") => {}
            a if a.starts_with('-') && a != "-" => return true,
            program if !program_seen => {
                program_seen = true;
                if program.contains("system")
                    || program.contains('>')
                    || program.contains('|')
                    || program.contains("getline")
                    || program.contains("@load")
                    || program.contains("@include")
                {
                    return true;
                }
            }
            _ => {}
        }
    }
    !program_seen
}

impl Rule {
    /// Whether `args` (the words after the command name) use a writing or executing
    /// option or operand.
    fn flags(&self, args: &[&str]) -> bool {
        let mut options_done = false;
        for a in args {
            if self.words.contains(a) {
                return true;
            }
            if options_done || *a == "-" {
                continue;
            }
            if *a == "--" {
                options_done = true;
            } else if let Some(long) = a.strip_prefix("--") {
                let name = long.split('=').next().unwrap_or(long);
                if !name.is_empty() && self.long.iter().any(|l| l.starts_with(name)) {
                    return true;
                }
            } else if let Some(short) = a.strip_prefix('-')
                && short.chars().any(|c| self.short.contains(c))
            {
                return true;
            }
        }
        self.extra.is_some_and(|f| f(args))
    }
}

/// Whether a simple command (wrappers already looked through) only reads.
fn argv_only_reads(argv: &[Word]) -> bool {
    let Some(Word::Literal(program)) = argv.first() else {
        return false;
    };
    // A path (`./ls`) may be any program.
    if program.contains('/') {
        return false;
    }
    let args = &argv[1..];
    let Some(words) = args
        .iter()
        .map(|w| match w {
            Word::Literal(s) | Word::Pattern(s) => Some(s.as_str()),
            Word::Opaque => None,
        })
        .collect::<Option<Vec<&str>>>()
    else {
        return false;
    };
    let has_pattern = args.iter().any(|w| matches!(w, Word::Pattern(_)));
    if program == "git" {
        return git_only_reads(&words) && !has_pattern;
    }
    let Some(rule) = RULES.iter().find(|r| r.name == program) else {
        return false;
    };
    // A glob could expand to a file named like an option (`-o`).
    !(rule.flags(&words) || (has_pattern && has_option_table(program)))
}

/// Where git's subcommand is in `args`, and whether an option before it may run
/// programs (any but [`GIT_SAFE_GLOBAL`]).
fn git_subcommand(args: &[&str]) -> (usize, bool) {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        let name = args[i].split('=').next().unwrap_or(args[i]);
        if !GIT_SAFE_GLOBAL.contains(&name) {
            return (i, true);
        }
        i += if GIT_GLOBAL_WITH_VALUE.contains(&args[i]) {
            2
        } else {
            1
        };
    }
    (i, false)
}

fn git_only_reads(args: &[&str]) -> bool {
    let (i, unsafe_global) = git_subcommand(args);
    !unsafe_global
        && args
            .get(i)
            .and_then(|sub| GIT_RULES.iter().find(|r| r.name == *sub))
            .is_some_and(|r| !r.flags(&args[i + 1..]))
}

/// Whether a git subcommand (`rest`: the subcommand and its arguments) sets a
/// configuration value (an alias, a pager or a hook path runs later) or runs programs
/// its arguments or configuration name (`rebase -x`, `bisect run`, `submodule foreach`,
/// `difftool`, `filter-branch`).
pub(crate) fn git_subcommand_runs_programs(rest: &[&str]) -> bool {
    match rest {
        ["config", tail @ ..] => git_config_writes(tail),
        [
            "filter-branch" | "filter-repo" | "mergetool" | "difftool" | "send-email" | "bisect"
            | "submodule" | "instaweb" | "archimport" | "cvsimport" | "svn" | "p4",
            ..,
        ] => true,
        ["rebase", tail @ ..] => tail.iter().any(|w| {
            w.starts_with("-x")
                || w.starts_with("--exec")
                || *w == "-i"
                || w.starts_with("--interactive")
        }),
        _ => false,
    }
}

/// Whether `git config …` (its arguments) sets something: anything but a read
/// (`--get`, `--list`, `get`, `list`, one key alone). Without arguments it counts as
/// setting, so that a rule naming `git config` names its writes.
fn git_config_writes(args: &[&str]) -> bool {
    if args.is_empty() {
        return true;
    }
    let reading_option = |w: &&str| {
        matches!(
            *w,
            "--get"
                | "--get-all"
                | "--get-regexp"
                | "--get-urlmatch"
                | "--list"
                | "-l"
                | "--show-origin"
                | "--show-scope"
                | "--name-only"
                | "-z"
                | "--null"
                | "--global"
                | "--system"
                | "--local"
                | "--worktree"
                | "--includes"
                | "--no-includes"
                | "--bool"
                | "--int"
                | "--path"
        ) || w.starts_with("--type=")
    };
    let (options, operands): (Vec<&str>, Vec<&str>) = args.iter().partition(|w| w.starts_with('-'));
    if !options.iter().all(reading_option) {
        return true;
    }
    let reads = options
        .iter()
        .any(|w| w.starts_with("--get") || matches!(*w, "-l" | "--list"))
        || matches!(operands.first(), Some(&"get" | &"list"));
    !(reads || operands.len() <= 1)
}

/// Whether `args` of `program` hold an option or operand that writes or executes, by
/// the same table: an allow rule `Bash(git diff:*)` does not cover `git diff --output=x`.
#[must_use]
pub fn has_unsafe_option(program: &str, args: &[&str]) -> bool {
    let program = shell::basename(program);
    if program == "git" {
        let (i, unsafe_global) = git_subcommand(args);
        return unsafe_global
            || git_subcommand_runs_programs(&args[i.min(args.len())..])
            || args
                .get(i)
                .and_then(|sub| GIT_RULES.iter().find(|r| r.name == *sub))
                .is_some_and(|r| r.flags(&args[i + 1..]));
    }
    RULES
        .iter()
        .find(|r| r.name == program)
        .is_some_and(|r| r.flags(args))
}

/// The wrappers a read-only command may run under: they run the command they name
/// and nothing else. `xargs` adds arguments nobody read, `env` may change the
/// directory or the variables, `coproc` keeps it running.
const QUIET_WRAPPERS: &[&str] = &[
    "timeout", "nice", "time", "nohup", "command", "builtin", "exec", "setsid", "stdbuf", "ionice",
];

/// Whether a parsed command line only reads: plain (see [`shell::Script::plain`]), and
/// every simple command a known reader without writing or executing options.
#[must_use]
pub fn script_only_reads(script: &Script) -> bool {
    script.plain
        && script.commands.iter().all(|c| {
            !c.assigns
                && shell::unwrap_command(&c.argv, false).is_some_and(|u| {
                    !u.assigns
                        && u.wrappers.iter().all(|w| QUIET_WRAPPERS.contains(w))
                        && argv_only_reads(u.argv)
                })
        })
}

/// Whether `program` has options or operands that write or execute (its arguments are
/// then checked, and a glob that could expand to such an option is not vouched for).
#[must_use]
pub fn has_option_table(program: &str) -> bool {
    let program = shell::basename(program);
    program == "git"
        || RULES.iter().find(|r| r.name == program).is_some_and(|r| {
            !r.short.is_empty() || !r.long.is_empty() || !r.words.is_empty() || r.extra.is_some()
        })
}

/// Whether a shell command only reads (plan mode runs it without asking).
#[must_use]
pub fn is_read_only_command(command: &str) -> bool {
    script_only_reads(&shell::parse(command))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_are_recognised() {
        for c in [
            "ls -la && git status",
            "grep foo src | wc -l",
            "cat a.txt 2>/dev/null",
            "rg -n foo src",
            "find . -name '*.rs'",
            "sort -n data.txt",
            "uniq data.txt",
            "awk '{print $1}' data.txt",
            "git log --oneline -5",
            "git -C sub diff HEAD~1",
            "git reflog",
            "hostname",
            "timeout 5 ls",
            "file x",
        ] {
            assert!(is_read_only_command(c), "{c}");
        }
    }

    #[test]
    fn writers_and_executors_are_not() {
        for c in [
            "echo hi > file",
            "find . -delete",
            "find . '-delete'",
            "find . -fprint0 out",
            "find . \"-exec\" touch x ';'",
            "git push",
            "ls; rm x",
            "rg --pre ./evil foo",
            "rg --pre=./evil foo",
            "sort -o out data",
            "sort -no out data",
            "sort --output=out data",
            "sort --out=out data",
            "sort --compress-program=./evil data",
            "uniq data out",
            "file -C -m magic",
            "git log --output=/tmp/x",
            "git diff --output /tmp/x",
            "git show --out=/tmp/x",
            "git grep -Otouch x",
            "git grep --open-files-in-pager=touch x",
            "git reflog expire --all",
            "git -c core.pager=touch log",
            "hostname evil",
            "awk 'BEGIN{system(\"touch x\")}'",
            "awk '{print > \"out\"}' f",
            "awk -f prog.awk f",
            "gawk -i inplace '{print}' f",
            "less '+!touch x' f",
            "date -s 2020-01-01",
            "tree -o out",
            "./ls",
            "LD_PRELOAD=x ls",
            "env A=1 ls",
            "sort * ",
            "echo $(touch x)",
            "cat /proc/$PPID/environ",
        ] {
            assert!(!is_read_only_command(c), "{c}");
        }
    }

    /// Issue #29 class 1: commands that start other programs are not read-only, whatever
    /// program they start.
    #[test]
    fn commands_that_start_other_programs_are_not_read_only() {
        for c in [
            "xargs cat",
            "ls | xargs cat",
            "xargs -a list grep x",
            "find . -name x -print0 | xargs -0 ls",
            "sort --compress-program=gzip -S 1 data",
            "sort --compress-p=gzip data",
            "rg --pre-glob '*.gz' a",
            "rg -z a",
            "rg -nz a",
            "rg --search-zip a",
            "git grep -O a",
            "less --lesskey-src=keys f",
            "less --lesskey-file=keys f",
            "less --lesskey-content=x f",
            "less -k keys f",
            "less -Nk keys f",
            "LESSOPEN='|./x %s' less f",
            "LESSKEYIN=keys less f",
            "git --attr-source=HEAD status",
            "git --attr-source HEAD -c core.fsmonitor=./x status",
            "git --git-dir=/tmp/x/.git status",
            "git --exec-path=. status",
            "git --config-env=core.pager=X log",
            "git --some-new-option status",
            "diff -l a b",
            "diff --paginate a b",
            "file -z x",
            "file -Z x",
            "file --uncompress x",
            "env ls",
            "env -C /etc cat shadow",
            "env -u X ls",
            "coproc ls",
            "tree -R -H . -L 1",
        ] {
            assert!(!is_read_only_command(c), "{c}");
        }
        for c in [
            "git --no-pager log -1",
            "git -C sub status",
            "rg -n --pretty a",
            "less -N f",
        ] {
            assert!(is_read_only_command(c), "{c}");
        }
    }

    /// Issue #29 class 18: bash opens a connection for `< /dev/tcp/host/port`.
    #[test]
    fn dev_tcp_and_dev_udp_redirections_are_not_read_only() {
        for c in [
            "ls < /dev/tcp/127.0.0.1/80",
            "cat </dev/udp/127.0.0.1/53",
            "wc -l 0</dev/tcp/example.com/443",
            "cat < //dev/tcp/127.0.0.1/80",
        ] {
            assert!(!is_read_only_command(c), "{c}");
        }
    }

    #[test]
    fn allow_rules_do_not_cover_writing_options() {
        assert!(has_unsafe_option("git", &["diff", "--output=/x"]));
        assert!(has_unsafe_option("/usr/bin/sort", &["-o", "x"]));
        assert!(!has_unsafe_option("git", &["diff", "--stat"]));
        assert!(!has_unsafe_option("cargo", &["build", "-o"]));
    }
}
