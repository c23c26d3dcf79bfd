//! Lines styled by [`Palette`](gyre_term::style::Palette) (ANSI SGR codes) as ratatui
//! [`Line`]s, so the markdown and tool-line renderers serve the terminal UI unchanged;
//! and wrapping to the terminal's width, so what is pushed into the scrollback takes
//! exactly the rows counted for it.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Parses the SGR codes [`Palette`](gyre_term::style::Palette) writes; other escape
/// sequences are dropped.
#[must_use]
pub fn to_line(text: &str) -> Line<'static> {
    let mut spans = Vec::new();
    let mut style = Style::default();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            // A tab would move the terminal's cursor past what the width count says.
            if c == '\t' {
                current.push_str("    ");
            } else if !c.is_control() {
                current.push(c);
            }
            continue;
        }
        if chars.peek() != Some(&'[') {
            continue;
        }
        chars.next();
        let mut params = String::new();
        let mut end = None;
        for c in chars.by_ref() {
            if c.is_ascii_digit() || c == ';' {
                params.push(c);
            } else {
                end = Some(c);
                break;
            }
        }
        if end != Some('m') {
            continue;
        }
        if !current.is_empty() {
            spans.push(Span::styled(std::mem::take(&mut current), style));
        }
        for code in params.split(';') {
            style = apply(style, code.parse().unwrap_or(0));
        }
    }
    if !current.is_empty() {
        spans.push(Span::styled(current, style));
    }
    Line::from(spans)
}

fn apply(style: Style, code: u8) -> Style {
    match code {
        0 => Style::default(),
        1 => style.add_modifier(Modifier::BOLD),
        2 => style.add_modifier(Modifier::DIM),
        3 => style.add_modifier(Modifier::ITALIC),
        4 => style.add_modifier(Modifier::UNDERLINED),
        22 => style.remove_modifier(Modifier::BOLD | Modifier::DIM),
        23 => style.remove_modifier(Modifier::ITALIC),
        24 => style.remove_modifier(Modifier::UNDERLINED),
        31 => style.fg(Color::Red),
        32 => style.fg(Color::Green),
        33 => style.fg(Color::Yellow),
        34 => style.fg(Color::Blue),
        35 => style.fg(Color::Magenta),
        36 => style.fg(Color::Cyan),
        39 => Style { fg: None, ..style },
        41 => style.bg(Color::Red),
        42 => style.bg(Color::Green),
        49 => Style { bg: None, ..style },
        _ => style,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palette_codes_become_styles() {
        let line = to_line("\x1b[1mbold\x1b[22m and \x1b[31mred\x1b[39m");
        assert_eq!(line.spans.len(), 3);
        assert_eq!(line.spans[0].content, "bold");
        assert!(line.spans[0].style.add_modifier.contains(Modifier::BOLD));
        assert_eq!(line.spans[1].content, " and ");
        assert_eq!(
            line.spans[1].style,
            Style::default().remove_modifier(Modifier::BOLD | Modifier::DIM)
        );
        assert_eq!(line.spans[2].style.fg, Some(Color::Red));
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
        let line = to_line("plain \x1b[1mbold words\x1b[22m");
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
