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
    plain("diff"),
    plain("cmp"),
    plain("type"),
    plain("id"),
    plain("nl"),
    plain("tr"),
    plain("column"),
    Rule {
        short: "o",
        ..plain("tree")
    },
    Rule {
        short: "oO",
        long: &["log-file", "LOG-FILE"],
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
        short: "C",
        long: &["compile"],
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
        long: &["pre", "hostname-bin"],
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

/// git's own options before the subcommand that run programs (`-c core.pager=…`).
const GIT_UNSAFE_GLOBAL: Rule = Rule {
    short: "cp",
    long: &["config-env", "exec-path", "paginate"],
    ..plain("git")
};
/// git's options before the subcommand that take the next word as their value.
pub(crate) const GIT_GLOBAL_WITH_VALUE: &[&str] =
    &["-C", "-c", "--git-dir", "--work-tree", "--namespace"];

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
    let can_flag = !rule.short.is_empty()
        || !rule.long.is_empty()
        || !rule.words.is_empty()
        || rule.extra.is_some();
    // A glob could expand to a file named like an option (`-o`).
    !(rule.flags(&words) || (can_flag && has_pattern))
}

/// Where git's subcommand is in `args`, and whether an option before it runs programs.
fn git_subcommand(args: &[&str]) -> (usize, bool) {
    let mut i = 0;
    while i < args.len() && args[i].starts_with('-') {
        if GIT_UNSAFE_GLOBAL.flags(&args[i..=i]) {
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

/// Whether `args` of `program` hold an option or operand that writes or executes, by
/// the same table: an allow rule `Bash(git diff:*)` does not cover `git diff --output=x`.
#[must_use]
pub fn has_unsafe_option(program: &str, args: &[&str]) -> bool {
    let program = shell::basename(program);
    if program == "git" {
        let (i, unsafe_global) = git_subcommand(args);
        return unsafe_global
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

/// Whether a parsed command line only reads: plain (see [`shell::Script::plain`]), and
/// every simple command a known reader without writing or executing options.
#[must_use]
pub fn script_only_reads(script: &Script) -> bool {
    script.plain
        && script.commands.iter().all(|c| {
            !c.assigns
                && shell::unwrap_command(&c.argv, false)
                    .is_some_and(|u| !u.assigns && argv_only_reads(u.argv))
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

    #[test]
    fn allow_rules_do_not_cover_writing_options() {
        assert!(has_unsafe_option("git", &["diff", "--output=/x"]));
        assert!(has_unsafe_option("/usr/bin/sort", &["-o", "x"]));
        assert!(!has_unsafe_option("git", &["diff", "--stat"]));
        assert!(!has_unsafe_option("cargo", &["build", "-o"]));
    }
}
