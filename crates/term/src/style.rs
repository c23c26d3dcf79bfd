//! ANSI styles for the REPL, or none: `NO_COLOR` and a stdout that is not a terminal
//! get plain text.

use std::io::IsTerminal;

/// Which styles the REPL may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    color: bool,
}

impl Palette {
    /// Colors when stdout is a terminal and `NO_COLOR` is unset or empty
    /// (<https://no-color.org>).
    #[must_use]
    pub fn detect() -> Self {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self::new(std::io::stdout().is_terminal() && !no_color)
    }

    #[must_use]
    pub const fn new(color: bool) -> Self {
        Self { color }
    }

    #[must_use]
    pub const fn color(self) -> bool {
        self.color
    }

    fn wrap(self, on: &str, off: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{on}m{text}\x1b[{off}m")
        } else {
            text.to_owned()
        }
    }

    #[must_use]
    pub fn bold(self, text: &str) -> String {
        self.wrap("1", "22", text)
    }

    #[must_use]
    pub fn dim(self, text: &str) -> String {
        self.wrap("2", "22", text)
    }

    #[must_use]
    pub fn italic(self, text: &str) -> String {
        self.wrap("3", "23", text)
    }

    #[must_use]
    pub fn underline(self, text: &str) -> String {
        self.wrap("4", "24", text)
    }

    #[must_use]
    pub fn red(self, text: &str) -> String {
        self.wrap("31", "39", text)
    }

    #[must_use]
    pub fn green(self, text: &str) -> String {
        self.wrap("32", "39", text)
    }

    #[must_use]
    pub fn yellow(self, text: &str) -> String {
        self.wrap("33", "39", text)
    }

    #[must_use]
    pub fn cyan(self, text: &str) -> String {
        self.wrap("36", "39", text)
    }
}
