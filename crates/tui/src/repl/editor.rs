//! The input box's text: several lines, a cursor, history (↑/↓ and a Ctrl+R search),
//! slash-command completion (gyre's commands, then the session's custom commands and
//! skills) and `@path` completion. Pure data but for the folder listing of `@path`;
//! the REPL maps keys onto these methods.

use std::path::{Path, PathBuf};

/// Entries kept in the history file.
const MAX_HISTORY: usize = 1000;

/// The slash commands Tab completes, in the order `/help` lists them.
pub const COMMANDS: [&str; 22] = [
    "/compact",
    "/clear",
    "/cost",
    "/model",
    "/mcp",
    "/bashes",
    "/context",
    "/status",
    "/doctor",
    "/permissions",
    "/agents",
    "/add-dir",
    "/export",
    "/init",
    "/memory",
    "/resume",
    "/rewind",
    "/hooks",
    "/todos",
    "/help",
    "/exit",
    "/quit",
];

/// A multi-line text with a cursor (line, char index).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    lines: Vec<String>,
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Where ↑/↓ is in the history; `None` while editing a new entry.
    browsing: Option<usize>,
    /// What was typed before ↑ was pressed, given back by ↓ past the newest entry.
    draft: String,
    /// `Some(query)` during a Ctrl+R search.
    search: Option<String>,
    /// The session's custom commands and skills, `/name`, completed after [`COMMANDS`].
    custom: Vec<String>,
}

impl Editor {
    #[must_use]
    pub fn new(history: Vec<String>) -> Self {
        Self {
            lines: vec![String::new()],
            history,
            ..Self::default()
        }
    }

    /// Tab completes these too (`/name`): the session's custom commands and skills.
    pub fn add_commands(&mut self, names: impl IntoIterator<Item = String>) {
        for name in names {
            let command = format!("/{name}");
            if !COMMANDS.contains(&command.as_str()) && !self.custom.contains(&command) {
                self.custom.push(command);
            }
        }
    }

    /// Every command Tab completes, gyre's first.
    fn all_commands(&self) -> impl Iterator<Item = &str> {
        COMMANDS
            .iter()
            .copied()
            .chain(self.custom.iter().map(String::as_str))
    }

    /// Tab after `@partial`: completes the path of a file or folder under `cwd` (or an
    /// absolute or `~/` one); `true` when the text changed.
    pub fn complete_mention(&mut self, cwd: &Path, home: Option<&Path>) -> bool {
        let line = &self.lines[self.row];
        let end = Self::byte_at(line, self.col);
        let start = line[..end].rfind(char::is_whitespace).map_or(0, |i| {
            i + line[i..].chars().next().map_or(1, char::len_utf8)
        });
        let Some(partial) = line[start..end].strip_prefix('@') else {
            return false;
        };
        let (dir_part, prefix) = partial
            .rsplit_once('/')
            .map_or(("", partial), |(d, f)| (d, f));
        let dir = match (dir_part, partial.starts_with('/')) {
            ("", true) => PathBuf::from("/"),
            (d, true) => PathBuf::from(d),
            (d, false) => match (d.strip_prefix('~'), home) {
                (Some(rest), Some(home)) => home.join(rest.trim_start_matches('/')),
                _ => cwd.join(d),
            },
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return false;
        };
        let mut names: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let hidden = name.starts_with('.') && !prefix.starts_with('.');
                (name.starts_with(prefix) && !hidden).then(|| {
                    let folder = e.path().is_dir();
                    if folder { format!("{name}/") } else { name }
                })
            })
            .collect();
        names.sort();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let completed = match refs.as_slice() {
            [] => return false,
            [one] if one.ends_with('/') => (*one).to_owned(),
            [one] => format!("{one} "),
            many => common_prefix(many),
        };
        let head = if partial.contains('/') {
            format!("{dir_part}/")
        } else {
            String::new()
        };
        let word = format!("@{head}{completed}");
        if word.trim_end() == &line[start..end] && !word.ends_with(' ') {
            return false;
        }
        let line = &mut self.lines[self.row];
        line.replace_range(start..end, &word);
        self.col = line[..start + word.len()].chars().count();
        true
    }

    #[must_use]
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    #[must_use]
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// The cursor as (line, column in chars).
    #[must_use]
    pub const fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    /// Replaces the whole text; the cursor goes to its end.
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_owned).collect();
        self.row = self.lines.len() - 1;
        self.col = self.lines[self.row].chars().count();
    }

    pub fn clear(&mut self) {
        self.set_text("");
        self.browsing = None;
        self.search = None;
    }

    fn byte_at(line: &str, col: usize) -> usize {
        line.char_indices().nth(col).map_or(line.len(), |(i, _)| i)
    }

    pub fn insert_char(&mut self, c: char) {
        if c == '\n' {
            self.newline();
            return;
        }
        let line = &mut self.lines[self.row];
        let at = Self::byte_at(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    /// Inserts pasted text as it is, newlines included (`\r\n` and `\r` become `\n`).
    pub fn insert_str(&mut self, text: &str) {
        let text = text.replace("\r\n", "\n").replace('\r', "\n");
        for c in text.chars() {
            self.insert_char(c);
        }
    }

    /// Splits the line at the cursor.
    pub fn newline(&mut self) {
        let line = &mut self.lines[self.row];
        let at = Self::byte_at(line, self.col);
        let rest = line.split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let line = &mut self.lines[self.row];
            let at = Self::byte_at(line, self.col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        let len = self.lines[self.row].chars().count();
        if self.col < len {
            let line = &mut self.lines[self.row];
            let at = Self::byte_at(line, self.col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = self.lines[self.row].chars().count();
        }
    }

    pub fn right(&mut self) {
        if self.col < self.lines[self.row].chars().count() {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = self.lines[self.row].chars().count();
    }

    /// Ctrl+U: deletes from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let line = &mut self.lines[self.row];
        let at = Self::byte_at(line, self.col);
        line.drain(..at);
        self.col = 0;
    }

    /// ↑: the line above, or on the first line the previous history entry.
    pub fn up(&mut self) {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let next = match self.browsing {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
            Some(0) => return,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        let entry = self.history[next].clone();
        self.set_text(&entry);
    }

    /// ↓: the line below, or on the last line the next history entry (then the draft).
    pub fn down(&mut self) {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(self.lines[self.row].chars().count());
            return;
        }
        let Some(i) = self.browsing else { return };
        if i + 1 < self.history.len() {
            self.browsing = Some(i + 1);
            let entry = self.history[i + 1].clone();
            self.set_text(&entry);
        } else {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set_text(&draft);
        }
    }

    /// Takes the text for sending and remembers it in the history.
    pub fn submit(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.clear();
        text
    }

    /// Adds an entry that was not typed (a prompt given on the command line).
    pub fn remember(&mut self, entry: &str) {
        if self.history.last().map(String::as_str) != Some(entry) {
            self.history.push(entry.to_owned());
        }
    }

    #[must_use]
    pub fn history(&self) -> &[String] {
        &self.history
    }

    /// Tab: completes a slash command the text starts; `true` when it changed.
    pub fn complete(&mut self) -> bool {
        let text = self.text();
        if !text.starts_with('/') || text.contains(char::is_whitespace) {
            return false;
        }
        let matches: Vec<&str> = self
            .all_commands()
            .filter(|c| c.starts_with(&text))
            .collect();
        let completed = match matches.as_slice() {
            [] => return false,
            [one] => format!("{one} "),
            many => common_prefix(many),
        };
        if completed == text {
            return false;
        }
        self.set_text(&completed);
        true
    }

    /// The commands that the text could still become (shown under the box).
    #[must_use]
    pub fn completions(&self) -> Vec<&str> {
        let text = self.text();
        if !text.starts_with('/') || text.contains(char::is_whitespace) {
            return Vec::new();
        }
        self.all_commands()
            .filter(|c| c.starts_with(&text))
            .collect()
    }

    /// Ctrl+R: starts a history search, or during one looks further back.
    pub fn start_search(&mut self) {
        match &self.search {
            None => self.search = Some(String::new()),
            Some(query) => {
                // Further back: the newest match older than the one shown.
                let shown = self.text();
                let older = self
                    .history
                    .iter()
                    .rposition(|h| *h == shown)
                    .and_then(|at| {
                        self.history[..at]
                            .iter()
                            .rposition(|h| h.contains(query.as_str()))
                    });
                if let Some(at) = older {
                    let entry = self.history[at].clone();
                    self.set_text(&entry);
                }
            }
        }
    }

    /// The query while a search runs.
    #[must_use]
    pub fn search(&self) -> Option<&str> {
        self.search.as_deref()
    }

    /// Types into the search query and shows the newest entry that matches.
    pub fn search_push(&mut self, c: char) {
        let Some(query) = &mut self.search else {
            return;
        };
        query.push(c);
        let query = query.clone();
        if let Some(entry) = self.history.iter().rev().find(|h| h.contains(&query)) {
            let entry = entry.clone();
            self.set_text(&entry);
        }
    }

    pub fn search_pop(&mut self) {
        if let Some(query) = &mut self.search {
            query.pop();
        }
    }

    /// Ends the search, keeping the entry found (Enter) or not (Esc).
    pub fn end_search(&mut self, keep: bool) {
        if self.search.take().is_some() && !keep {
            self.set_text("");
        }
    }
}

fn common_prefix(words: &[&str]) -> String {
    let first = words[0];
    let mut len = first.len();
    for w in &words[1..] {
        len = first
            .char_indices()
            .zip(w.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((i, a), _)| i + a.len_utf8())
            .min(len);
    }
    first[..len].to_owned()
}

/// The history file, one entry per line (a newline inside an entry is written `\n`,
/// a backslash `\\`).
#[derive(Debug, Clone)]
pub struct HistoryFile {
    path: PathBuf,
}

impl HistoryFile {
    #[must_use]
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }

    /// The entries, oldest first; a missing or unreadable file is an empty history.
    #[must_use]
    pub fn load(&self) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        // `#V2` is the header rustyline wrote; older histories still load.
        text.lines()
            .filter(|l| !l.is_empty() && *l != "#V2")
            .map(unescape)
            .collect()
    }

    /// Writes the newest [`MAX_HISTORY`] entries.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, entries: &[String]) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let start = entries.len().saturating_sub(MAX_HISTORY);
        let mut text = String::new();
        for entry in &entries[start..] {
            text.push_str(&escape(entry));
            text.push('\n');
        }
        std::fs::write(&self.path, text)
    }
}

fn escape(entry: &str) -> String {
    entry.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(text: &str) -> Editor {
        let mut e = Editor::new(Vec::new());
        e.insert_str(text);
        e
    }

    #[test]
    fn typing_newlines_and_backspace_edit_several_lines() {
        let mut e = typed("fix the\nparser");
        assert_eq!(e.lines(), ["fix the", "parser"]);
        assert_eq!(e.cursor(), (1, 6));
        e.home();
        e.backspace();
        assert_eq!(e.text(), "fix theparser");
        e.insert_char(' ');
        assert_eq!(e.text(), "fix the parser");
        e.left();
        e.left();
        e.delete();
        assert_eq!(e.text(), "fix th parser");
    }

    #[test]
    fn pasted_text_keeps_its_lines_and_multibyte_chars() {
        let e = typed("héllo\r\nwörld");
        assert_eq!(e.lines(), ["héllo", "wörld"]);
        assert_eq!(e.cursor(), (1, 5));
    }

    #[test]
    fn up_and_down_browse_history_and_give_the_draft_back() {
        let mut e = Editor::new(vec!["first".into(), "second".into()]);
        e.insert_str("draft");
        e.up();
        assert_eq!(e.text(), "second");
        e.up();
        assert_eq!(e.text(), "first");
        e.up();
        assert_eq!(e.text(), "first");
        e.down();
        assert_eq!(e.text(), "second");
        e.down();
        assert_eq!(e.text(), "draft");
    }

    #[test]
    fn submit_remembers_the_entry_once() {
        let mut e = typed("hello");
        assert_eq!(e.submit(), "hello");
        assert!(e.is_empty());
        e.insert_str("hello");
        e.submit();
        assert_eq!(e.history(), ["hello"]);
    }

    #[test]
    fn ctrl_r_finds_the_newest_match_then_older_ones() {
        let mut e = Editor::new(vec!["cargo test".into(), "ls".into(), "cargo build".into()]);
        e.start_search();
        for c in "cargo".chars() {
            e.search_push(c);
        }
        assert_eq!(e.text(), "cargo build");
        e.start_search();
        assert_eq!(e.text(), "cargo test");
        e.end_search(true);
        assert_eq!(e.search(), None);
        assert_eq!(e.text(), "cargo test");
    }

    #[test]
    fn tab_completes_a_slash_command() {
        let mut e = typed("/co");
        assert_eq!(e.completions(), ["/compact", "/cost", "/context"]);
        assert!(!e.complete(), "three commands start with /co");
        assert_eq!(e.text(), "/co");
        e.insert_char('s');
        assert!(e.complete());
        assert_eq!(e.text(), "/cost ");
        let mut e = typed("/he");
        assert!(e.complete());
        assert_eq!(e.text(), "/help ");
        let mut e = typed("hello");
        assert!(!e.complete());
    }

    #[test]
    fn tab_completes_custom_commands_after_gyres_own() {
        let mut e = typed("/re");
        e.add_commands([
            "review".to_owned(),
            "release:notes".to_owned(),
            "help".to_owned(),
        ]);
        assert_eq!(
            e.completions(),
            ["/resume", "/rewind", "/review", "/release:notes"]
        );
        assert!(!e.complete(), "four start with /re");
        assert_eq!(e.text(), "/re");
        e.insert_char('v');
        assert!(e.complete());
        assert_eq!(e.text(), "/review ");
    }

    #[test]
    fn tab_completes_a_mentioned_path() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/nested")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "").unwrap();
        std::fs::write(dir.path().join("README.md"), "").unwrap();
        let mut e = typed("look at @RE");
        assert!(e.complete_mention(dir.path(), None));
        assert_eq!(e.text(), "look at @README.md ");
        let mut e = typed("@sr");
        assert!(e.complete_mention(dir.path(), None));
        assert_eq!(e.text(), "@src/");
        assert!(!e.complete_mention(dir.path(), None), "lib.rs or nested/");
        assert_eq!(e.text(), "@src/");
        e.insert_char('l');
        assert!(e.complete_mention(dir.path(), None));
        assert_eq!(e.text(), "@src/lib.rs ");
        let mut e = typed("no mention");
        assert!(!e.complete_mention(dir.path(), None));
    }

    #[test]
    fn history_entries_with_newlines_survive_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = HistoryFile::new(dir.path().join("history"));
        let entries = vec!["one\ntwo".to_owned(), r"a \ b".to_owned()];
        file.save(&entries).unwrap();
        assert_eq!(file.load(), entries);
    }
}
