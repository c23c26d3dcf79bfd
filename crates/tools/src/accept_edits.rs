//! The filesystem commands `acceptEdits` runs without asking, as it runs Edit and Write:
//! `mkdir`, `touch`, `rm`, `rmdir`, `mv`, `cp` and `sed`, decided on the parsed command.
//!
//! [`file_command_paths`] vouches for a command line only when it is plain (see
//! [`crate::shell`]), every simple command in it is one of these programs with literal
//! words (no globs or expansions, whose words are unknown), and every `sed` script can
//! neither run programs nor touch other files: no `e`, `w`, `W`, `r` or `R` command, no
//! `e` or `w` flag of `s`, no script file. The caller still checks each path it returns
//! (inside the working directories, not protected, not denied).

use crate::shell::{self, Word};

/// The programs acceptEdits runs.
const FILE_COMMANDS: [&str; 7] = ["mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"];

/// The words of `command` that may name files (every argument but options and `sed`'s
/// script, option values included, and `< file` inputs), when the whole command line is
/// made of the filesystem commands acceptEdits runs; `None` when it is not.
#[must_use]
pub fn file_command_paths(command: &str) -> Option<Vec<String>> {
    let script = shell::parse(command);
    if !script.plain || script.unknown || script.commands.is_empty() {
        return None;
    }
    let mut paths = script.inputs.clone();
    for c in &script.commands {
        if c.assigns {
            return None;
        }
        let words = c
            .argv
            .iter()
            .map(|w| match w {
                Word::Literal(s) => Some(s.as_str()),
                Word::Pattern(_) | Word::Opaque => None,
            })
            .collect::<Option<Vec<&str>>>()?;
        let (program, args) = words.split_first()?;
        if !FILE_COMMANDS.contains(program) {
            return None;
        }
        if *program == "sed" {
            paths.extend(sed_files(args)?);
            continue;
        }
        for arg in args {
            match arg.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => paths.push((*value).to_owned()),
                _ if arg.starts_with('-') => {}
                _ => paths.push((*arg).to_owned()),
            }
        }
    }
    Some(paths.into_iter().filter(|p| !p.is_empty()).collect())
}

/// Whether a `sed` invocation (its arguments) can do more than edit its files: run a
/// command (`e`, `s///e`), write or read other files, or read its script from a file.
pub(crate) fn sed_runs_or_reaches_out(args: &[&str]) -> bool {
    sed_files(args).is_none()
}

/// The files a `sed` invocation reads and (with `-i`) rewrites, when its options and
/// script are ones that touch nothing else; `None` otherwise.
fn sed_files(args: &[&str]) -> Option<Vec<String>> {
    let mut scripts = Vec::new();
    let mut files = Vec::new();
    let mut rest = args.iter();
    let mut only_files = false;
    while let Some(arg) = rest.next() {
        if only_files || !arg.starts_with('-') || *arg == "-" {
            files.push((*arg).to_owned());
            continue;
        }
        if *arg == "--" {
            only_files = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = long.split_once('=').unwrap_or((long, ""));
            match name {
                "expression" => scripts.push(value.to_owned()),
                "in-place" if !value.contains('/') => {}
                "quiet" | "silent" | "regexp-extended" | "separate" | "null-data"
                | "unbuffered" | "posix" | "sandbox" | "debug" => {}
                _ => return None,
            }
            continue;
        }
        let flags = &arg[1..];
        for (i, flag) in flags.char_indices() {
            match flag {
                'n' | 'E' | 'r' | 's' | 'z' | 'u' => {}
                // `-i.bak`: a suffix with a `/` puts the backup in another directory.
                'i' if flags[i + 1..].contains('/') => return None,
                'i' => break,
                'e' => {
                    let attached = &flags[i + 1..];
                    scripts.push(if attached.is_empty() {
                        (*rest.next()?).to_owned()
                    } else {
                        attached.to_owned()
                    });
                    break;
                }
                _ => return None,
            }
        }
    }
    if scripts.is_empty() {
        // The first operand is the script.
        if files.is_empty() {
            return None;
        }
        scripts.push(files.remove(0));
    }
    scripts
        .iter()
        .all(|s| script_is_contained(s))
        .then_some(files)
}

/// Whether a sed script only edits the stream: every command is one of the editing
/// commands, and no `s` has the `e` or `w` flag.
fn script_is_contained(script: &str) -> bool {
    let mut s = Scanner {
        chars: script.chars().collect(),
        at: 0,
    };
    loop {
        s.skip(|c| c.is_whitespace() || c == ';');
        let Some(c) = s.next() else {
            return true;
        };
        let command = if s.address_start(c) {
            s.at -= 1;
            if !s.addresses() {
                return false;
            }
            s.skip(char::is_whitespace);
            match s.next() {
                Some(c) => c,
                None => return false,
            }
        } else {
            c
        };
        let ok = match command {
            's' => s.substitution(),
            'y' => s.substitution_parts(),
            // Labels and branches: the rest of the command is a name.
            ':' | 'b' | 't' | 'T' => {
                s.skip(|c| c != ';' && c != '\n');
                true
            }
            // Text to add: the rest of the line.
            'a' | 'i' | 'c' => {
                s.skip(|c| c != '\n');
                true
            }
            'q' | 'Q' | 'l' | 'L' => {
                s.skip(|c| c.is_ascii_digit() || c == ' ');
                true
            }
            'd' | 'D' | 'p' | 'P' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | '=' | '{' | '}'
            | 'z' => true,
            // `e`, `w`, `W`, `r`, `R`, `F`, `v` and anything unknown.
            _ => false,
        };
        if !ok {
            return false;
        }
    }
}

struct Scanner {
    chars: Vec<char>,
    at: usize,
}

impl Scanner {
    fn next(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        self.at += usize::from(c.is_some());
        c
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip(&mut self, mut while_: impl FnMut(char) -> bool) {
        while self.peek().is_some_and(&mut while_) {
            self.at += 1;
        }
    }

    fn address_start(&self, c: char) -> bool {
        c.is_ascii_digit() || c == '$' || c == '/' || c == '\\'
    }

    /// `addr[,addr][!]`, where an address is a line, `$`, `first~step`, `/re/` or
    /// `\cREc` with `I`/`M`, and the second may be `+N` or `~N`.
    fn addresses(&mut self) -> bool {
        if !self.address() {
            return false;
        }
        if self.peek() == Some(',') {
            self.at += 1;
            if matches!(self.peek(), Some('+' | '~')) {
                self.at += 1;
                self.skip(|c| c.is_ascii_digit());
            } else if !self.address() {
                return false;
            }
        }
        self.skip(char::is_whitespace);
        if self.peek() == Some('!') {
            self.at += 1;
        }
        true
    }

    fn address(&mut self) -> bool {
        match self.next() {
            Some(c) if c.is_ascii_digit() => {
                self.skip(|c| c.is_ascii_digit());
                if self.peek() == Some('~') {
                    self.at += 1;
                    self.skip(|c| c.is_ascii_digit());
                }
                true
            }
            Some('$') => true,
            Some('/') => {
                self.at -= 1;
                self.delimited(true).is_some() && self.regex_flags()
            }
            Some('\\') => self.delimited(true).is_some() && self.regex_flags(),
            _ => false,
        }
    }

    fn regex_flags(&mut self) -> bool {
        self.skip(|c| c == 'I' || c == 'M');
        true
    }

    /// Reads a delimiter and the text up to its next unescaped occurrence; in a regex,
    /// a bracket expression may hold the delimiter.
    fn delimited(&mut self, regex: bool) -> Option<()> {
        let delimiter = self.next()?;
        if delimiter == '\n' || delimiter == '\\' {
            return None;
        }
        self.body(delimiter, regex)
    }

    /// The text up to the next unescaped `delimiter`, consumed with it.
    fn body(&mut self, delimiter: char, regex: bool) -> Option<()> {
        loop {
            match self.next()? {
                '\\' => {
                    self.next()?;
                }
                '[' if regex => {
                    // `[]…]` and `[^]…]` hold a `]` first.
                    if self.peek() == Some('^') {
                        self.at += 1;
                    }
                    if self.peek() == Some(']') {
                        self.at += 1;
                    }
                    loop {
                        if self.next()? == ']' {
                            break;
                        }
                    }
                }
                c if c == delimiter => return Some(()),
                _ => {}
            }
        }
    }

    /// `/one/two/` after `s` or `y`.
    fn substitution_parts(&mut self) -> bool {
        let Some(delimiter) = self.next() else {
            return false;
        };
        delimiter != '\n'
            && delimiter != '\\'
            && self.body(delimiter, true).is_some()
            && self.body(delimiter, false).is_some()
    }

    /// `s` after its name: `/re/replacement/flags`, where no flag runs or writes.
    fn substitution(&mut self) -> bool {
        if !self.substitution_parts() {
            return false;
        }
        while let Some(c) = self.peek() {
            match c {
                'g' | 'p' | 'i' | 'I' | 'm' | 'M' => self.at += 1,
                c if c.is_ascii_digit() => self.at += 1,
                ';' | '\n' | '}' | ' ' | '\t' => return true,
                // `e` runs the pattern space; `w file` writes it.
                _ => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(command: &str) -> Option<Vec<String>> {
        file_command_paths(command)
    }

    #[test]
    fn file_commands_give_their_paths() {
        assert_eq!(
            paths("mkdir -p src/a && touch src/a/b.rs"),
            Some(vec!["src/a".into(), "src/a/b.rs".into()])
        );
        assert_eq!(
            paths("rm -rf target/x; rmdir empty"),
            Some(vec!["target/x".into(), "empty".into()])
        );
        assert_eq!(
            paths("cp --target-directory=out a.txt"),
            Some(vec!["out".into(), "a.txt".into()])
        );
        assert_eq!(
            paths("mv 'old name' new"),
            Some(vec!["old name".into(), "new".into()])
        );
        assert_eq!(
            paths("sed -i 's/foo/bar/g' src/lib.rs"),
            Some(vec!["src/lib.rs".into()])
        );
        assert_eq!(
            paths("sed -n -e '1,/^$/p' -e '$d' notes.md"),
            Some(vec!["notes.md".into()])
        );
        assert_eq!(
            paths("sed -E 's|a/b|c|2; /x/I!d; y/ab/cd/' f < in.txt"),
            Some(vec!["in.txt".into(), "f".into()])
        );
    }

    #[test]
    fn anything_else_is_not_vouched_for() {
        for command in [
            "rm -rf *",
            "rm $HOME/x",
            "rm {a,b}",
            "cat a",
            "mkdir a && cat /etc/passwd",
            "cp a b > out",
            "X=1 rm a",
            "/bin/rm a",
            "rm a $(whoami)",
            "sed -f script.sed a",
            "sed 's/a/b/e' f",
            "sed 's/a/b/w /tmp/x' f",
            "sed 's/[/]/x/w /tmp/x' f",
            "sed '1e id' f",
            "sed 'r /etc/passwd' f",
            "sed 'w out' f",
            "sed -i.bak/x 's/a/b/' f",
            "sed --in-place=bak/ 's/a/b/' f",
            "sed -l 5 p f",
            "sed",
        ] {
            assert_eq!(paths(command), None, "{command}");
        }
    }
}
