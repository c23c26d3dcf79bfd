//! Lines styled by [`Palette`](super::style::Palette) (ANSI SGR codes) as ratatui
//! [`Line`]s, so the markdown and tool-line renderers serve the terminal UI unchanged;
//! and wrapping to the terminal's width, so what is pushed into the scrollback takes
//! exactly the rows counted for it.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Parses the SGR codes [`Palette`](super::style::Palette) writes; other escape
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

/// Cuts a line into rows of at most `width` columns (as a terminal wraps it).
#[must_use]
pub fn wrap(line: Line<'static>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    let mut rows = vec![Line::default()];
    let mut used = 0usize;
    for span in line.spans {
        let mut piece = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width {
                if !piece.is_empty() {
                    push(
                        &mut rows,
                        Span::styled(std::mem::take(&mut piece), span.style),
                    );
                }
                rows.push(Line::default());
                used = 0;
            }
            piece.push(c);
            used += w;
        }
        if !piece.is_empty() {
            push(&mut rows, Span::styled(piece, span.style));
        }
    }
    rows
}

fn push(rows: &mut [Line<'static>], span: Span<'static>) {
    if let Some(row) = rows.last_mut() {
        row.spans.push(span);
    }
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
    fn wrapping_counts_columns_not_bytes() {
        let rows = wrap(Line::from("héllo wörld"), 4);
        let text: Vec<String> = rows.iter().map(plain_text).collect();
        assert_eq!(text, ["héll", "o wö", "rld"]);
        assert_eq!(wrap(Line::default(), 10).len(), 1);
    }
}
