//! gyre-term's [`Palette`] as ratatui styles: the REPL builds its lines from spans in
//! the [`Tone`]s the headless text mode writes as ANSI codes, so both show the same
//! colours (and none without them).

use std::borrow::Cow;

pub use gyre_term::style::Palette;
use gyre_term::style::{Piece, Tone};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// Spans in a palette's tones.
pub trait PaletteSpans: Copy {
    /// The style of `tone` (none without colors).
    fn style(self, tone: Tone) -> Style;

    fn span(self, tone: Tone, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        Span::styled(text, self.style(tone))
    }

    /// gyre-term's pieces of a line (a tool line) as one line of spans.
    fn line(self, pieces: Vec<Piece>) -> Line<'static> {
        let spans: Vec<Span<'static>> = pieces
            .into_iter()
            .map(|piece| match piece.tone {
                Some(tone) => self.span(tone, piece.text),
                None => Span::raw(piece.text),
            })
            .collect();
        Line::from(spans)
    }

    fn bold(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Bold, text)
    }

    fn dim(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Dim, text)
    }

    fn italic(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Italic, text)
    }

    fn red(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Red, text)
    }

    fn green(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Green, text)
    }

    fn yellow(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Yellow, text)
    }

    fn cyan(self, text: impl Into<Cow<'static, str>>) -> Span<'static> {
        self.span(Tone::Cyan, text)
    }
}

impl PaletteSpans for Palette {
    fn style(self, tone: Tone) -> Style {
        let style = Style::default();
        if !self.color() {
            return style;
        }
        match tone {
            Tone::Bold => style.add_modifier(Modifier::BOLD),
            Tone::Dim => style.add_modifier(Modifier::DIM),
            Tone::Italic => style.add_modifier(Modifier::ITALIC),
            Tone::Underline => style.add_modifier(Modifier::UNDERLINED),
            Tone::Red => style.fg(Color::Red),
            Tone::Green => style.fg(Color::Green),
            Tone::Yellow => style.fg(Color::Yellow),
            Tone::Cyan => style.fg(Color::Cyan),
        }
    }
}

/// `line` as the ANSI text gyre-term's palette writes for its spans, each span's tones
/// nested as the REPL's old ANSI strings nested them (bold outermost, colours
/// innermost): tests compare it with the escape codes the REPL used to build.
#[cfg(test)]
#[must_use]
pub fn ansi(line: &Line<'_>) -> String {
    let colors = Palette::new(true);
    line.spans
        .iter()
        .map(|span| {
            let tones: Vec<Tone> = Tone::ALL
                .into_iter()
                .filter(|&tone| {
                    let style = colors.style(tone);
                    span.style.add_modifier.contains(style.add_modifier)
                        && style.fg.is_none_or(|fg| span.style.fg == Some(fg))
                })
                .collect();
            let covered = tones.iter().fold(Style::default(), |style, &tone| {
                style.patch(colors.style(tone))
            });
            assert_eq!(
                (covered.fg, covered.bg, covered.add_modifier),
                (span.style.fg, span.style.bg, span.style.add_modifier),
                "{span:?} is not in gyre-term's tones"
            );
            tones
                .iter()
                .rev()
                .fold(span.content.to_string(), |text, &tone| {
                    colors.paint(tone, &text)
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tone_is_the_style_of_its_ansi_code() {
        let p = Palette::new(true);
        assert!(p.bold("b").style.add_modifier.contains(Modifier::BOLD));
        assert_eq!(p.red("r").style.fg, Some(Color::Red));
        for tone in Tone::ALL {
            let line = Line::from(p.span(tone, "x"));
            assert_eq!(ansi(&line), p.paint(tone, "x"), "{tone:?}");
        }
    }

    #[test]
    fn without_colors_every_span_is_plain() {
        let p = Palette::new(false);
        for tone in Tone::ALL {
            assert_eq!(p.span(tone, "x"), Span::raw("x"));
        }
        let line = p.line(gyre_term::tool_line::call_pieces("Read a.rs"));
        assert!(line.spans.iter().all(|s| s.style == Style::default()));
        assert_eq!(line.to_string(), "● Read a.rs");
    }

    #[test]
    fn a_tool_line_has_the_styles_of_its_ansi_codes() {
        let p = Palette::new(true);
        let call = p.line(gyre_term::tool_line::call_pieces("Read a.rs"));
        assert_eq!(
            call.spans,
            [
                Span::styled("●", Style::default().fg(Color::Green)),
                Span::raw(" "),
                Span::styled("Read", Style::default().add_modifier(Modifier::BOLD)),
                Span::raw(" a.rs"),
            ]
        );
        assert_eq!(
            ansi(&call),
            gyre_term::tool_line::render_call(p, "Read a.rs")
        );
    }
}
