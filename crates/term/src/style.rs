//! The styles gyre's terminal text uses, as [`Tone`]s: the headless text mode writes
//! them as ANSI codes ([`Palette`]), the interactive UI as ratatui styles (gyre-tui's
//! palette maps the same tones), so both show a line in the same colours. `NO_COLOR`
//! and a stdout that is not a terminal get plain text.

use std::io::IsTerminal;

/// One style of gyre's terminal text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tone {
    Bold,
    Dim,
    Italic,
    Underline,
    Red,
    Green,
    Yellow,
    Cyan,
}

impl Tone {
    pub const ALL: [Self; 8] = [
        Self::Bold,
        Self::Dim,
        Self::Italic,
        Self::Underline,
        Self::Red,
        Self::Green,
        Self::Yellow,
        Self::Cyan,
    ];

    /// The SGR codes that turn it on and off.
    const fn sgr(self) -> (&'static str, &'static str) {
        match self {
            Self::Bold => ("1", "22"),
            Self::Dim => ("2", "22"),
            Self::Italic => ("3", "23"),
            Self::Underline => ("4", "24"),
            Self::Red => ("31", "39"),
            Self::Green => ("32", "39"),
            Self::Yellow => ("33", "39"),
            Self::Cyan => ("36", "39"),
        }
    }
}

/// A piece of a line: text in one tone, or plain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub tone: Option<Tone>,
    pub text: String,
}

impl Piece {
    #[must_use]
    pub fn new(tone: Tone, text: impl Into<String>) -> Self {
        Self {
            tone: Some(tone),
            text: text.into(),
        }
    }

    #[must_use]
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            tone: None,
            text: text.into(),
        }
    }
}

/// Which styles the terminal text may use, written as ANSI codes.
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

    /// `text` in `tone` (as it is without colors).
    #[must_use]
    pub fn paint(self, tone: Tone, text: &str) -> String {
        if self.color {
            let (on, off) = tone.sgr();
            format!("\x1b[{on}m{text}\x1b[{off}m")
        } else {
            text.to_owned()
        }
    }

    /// The pieces of a line as ANSI text.
    #[must_use]
    pub fn ansi(self, pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|piece| match piece.tone {
                Some(tone) => self.paint(tone, &piece.text),
                None => piece.text.clone(),
            })
            .collect()
    }
}
