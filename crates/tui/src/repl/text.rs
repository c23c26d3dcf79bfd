//! Lines as the terminal shows them: their text made printable (a tab as spaces, no
//! control characters or escape sequences a tool's output or the model's text may hold),
//! and wrapped to the terminal's width, so what is pushed into the scrollback takes
//! exactly the rows counted for it.

use std::borrow::Cow;

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// `line` with only what a terminal prints as text: a tab becomes four spaces (a tab
/// would move the terminal's cursor past what the width count says), escape sequences
/// and other control characters are dropped. Styles stay as they are.
#[must_use]
pub fn printable(line: &Line<'_>) -> Line<'static> {
    let spans = line
        .spans
        .iter()
        .filter_map(|span| {
            let text = printable_text(&span.content);
            (!text.is_empty()).then(|| Span::styled(text.into_owned(), span.style))
        })
        .collect();
    Line {
        spans,
        style: line.style,
        alignment: line.alignment,
    }
}

fn printable_text(text: &str) -> Cow<'_, str> {
    if !text.contains(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\t' => out.push_str("    "),
            '\x1b' => {
                // A control sequence: its parameters, then the character that ends it.
                if chars.next_if_eq(&'[').is_some() {
                    while chars.next_if(|c| c.is_ascii_digit() || *c == ';').is_some() {}
                    chars.next();
                }
            }
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Cuts a line into rows of at most `width` columns, between words where it can (a
/// word longer than a row is cut where the row ends).
#[must_use]
pub fn wrap(line: &Line<'_>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    let cells: Vec<(char, Style, usize)> = line
        .spans
        .iter()
        .flat_map(|span| {
            // A style set on the whole line belongs to each of its characters.
            let style = line.style.patch(span.style);
            span.content
                .chars()
                .map(move |c| (c, style, c.width().unwrap_or(0)))
        })
        .collect();
    let mut rows = Vec::new();
    let mut start = 0;
    while start < cells.len() {
        let mut used = 0;
        let mut end = start;
        while end < cells.len() && used + cells[end].2 <= width {
            used += cells[end].2;
            end += 1;
        }
        if end < cells.len()
            && let Some(space) = cells[start..end].iter().rposition(|(c, ..)| *c == ' ')
            && space > 0
        {
            // Break after the last space of the row; the next row starts at a word.
            end = start + space + 1;
        }
        if end == start {
            // A cell wider than the row: give it a row of its own.
            end = start + 1;
        }
        rows.push(spans_of(&cells[start..end]));
        start = end;
    }
    if rows.is_empty() {
        rows.push(Line::default());
    }
    rows
}

/// Groups styled characters back into spans.
fn spans_of(cells: &[(char, Style, usize)]) -> Line<'static> {
    let mut spans: Vec<Span<'static>> = Vec::new();
    for &(c, style, _) in cells {
        match spans.last_mut() {
            Some(last) if last.style == style => last.content.to_mut().push(c),
            _ => spans.push(Span::styled(c.to_string(), style)),
        }
    }
    Line::from(spans)
}

/// The text of a line without its styles.
#[must_use]
pub fn plain_text(line: &Line<'_>) -> String {
    line.spans.iter().map(|s| s.content.as_ref()).collect()
}

/// The text of each line, for tests that read what is shown.
#[cfg(test)]
#[must_use]
pub fn texts(lines: &[Line<'_>]) -> Vec<String> {
    lines.iter().map(plain_text).collect()
}

#[cfg(test)]
mod tests {
    use gyre_term::style::Tone;
    use ratatui::style::{Color, Modifier};

    use super::*;
    use crate::repl::style::{Palette, PaletteSpans};

    #[test]
    fn escape_sequences_and_control_characters_are_not_printed() {
        let dim = Palette::new(true).style(Tone::Dim);
        let line = Line::from(vec![
            Span::styled("    \x1b[31merror\x1b[0m: a\tb\r", dim),
            Span::raw("\x1b]8;;x\x07\x1b[2K"),
        ]);
        let shown = printable(&line);
        assert_eq!(shown.spans.len(), 2);
        assert_eq!(shown.spans[0].content, "    error: a    b");
        assert_eq!(shown.spans[0].style, dim);
        assert_eq!(shown.spans[1].content, "]8;;x");
        let plain = Line::from("plain text");
        assert_eq!(printable(&plain), plain);
    }

    #[test]
    fn wrapping_breaks_between_words_and_counts_columns_not_bytes() {
        let text = |line: &str, width| -> Vec<String> {
            wrap(&Line::from(line.to_owned()), width)
                .iter()
                .map(plain_text)
                .collect()
        };
        assert_eq!(text("héllo wörld", 8), ["héllo ", "wörld"]);
        assert_eq!(text("héllowörld", 4), ["héll", "owör", "ld"]);
        assert_eq!(text("日本語", 4), ["日本", "語"]);
        assert_eq!(wrap(&Line::default(), 10).len(), 1);
    }

    #[test]
    fn wrapping_keeps_each_character_s_style() {
        let line = Line::from(vec![
            Span::raw("plain "),
            Palette::new(true).bold("bold words"),
        ]);
        let rows = wrap(&line, 8);
        let text: Vec<String> = rows.iter().map(plain_text).collect();
        assert_eq!(text, ["plain ", "bold ", "words"]);
        assert!(rows[2].spans[0].style.add_modifier.contains(Modifier::BOLD));
        let yellow = Line::styled("a line that is yellow", Style::default().fg(Color::Yellow));
        for row in wrap(&yellow, 8) {
            assert_eq!(row.spans[0].style.fg, Some(Color::Yellow), "{row:?}");
        }
    }
}
