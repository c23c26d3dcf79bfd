//! Light markdown for streamed assistant text, one completed line at a time: headings,
//! bold, italic, inline code, code fences, bullet lists, quotes and rules. Without
//! colors the text is left exactly as the model wrote it.

use gyre_term::style::Tone;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::style::{Palette, PaletteSpans};

/// Splits streamed text deltas into completed lines.
#[derive(Debug, Default)]
pub struct LineBuffer {
    partial: String,
}

impl LineBuffer {
    /// Adds a delta; returns the lines it completed (without their `\n`).
    pub fn push(&mut self, delta: &str) -> Vec<String> {
        self.partial.push_str(delta);
        let mut lines = Vec::new();
        while let Some(end) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=end).collect();
            lines.push(line.trim_end_matches(['\n', '\r']).to_owned());
        }
        lines
    }

    /// The unfinished last line, if any (at the end of a block).
    pub fn finish(&mut self) -> Option<String> {
        (!self.partial.is_empty()).then(|| std::mem::take(&mut self.partial))
    }

    /// The unfinished last line, still streaming.
    #[must_use]
    pub fn partial(&self) -> &str {
        &self.partial
    }

    /// Drops the unfinished line (the attempt that streamed it was abandoned).
    pub fn discard(&mut self) {
        self.partial.clear();
    }
}

/// Renders markdown line by line; remembers whether it is inside a code fence.
#[derive(Debug, Clone)]
pub struct MarkdownRenderer {
    palette: Palette,
    /// The fence marker (```` ``` ```` or `~~~`) of the open code block.
    fence: Option<&'static str>,
}

impl MarkdownRenderer {
    #[must_use]
    pub const fn new(palette: Palette) -> Self {
        Self {
            palette,
            fence: None,
        }
    }

    /// Forgets an open code fence (a new message starts).
    pub fn reset(&mut self) {
        self.fence = None;
    }

    /// One line of output for one line of markdown.
    pub fn render_line(&mut self, line: &str) -> Line<'static> {
        let p = self.palette;
        let trimmed = line.trim_start();
        if let Some(marker) = self.fence {
            if trimmed.starts_with(marker) && trimmed.trim_end() == marker {
                self.fence = None;
                return Line::from(p.dim(line.to_owned()));
            }
            return code_line(p, line);
        }
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                self.fence = Some(marker);
                return Line::from(p.dim(line.to_owned()));
            }
        }
        if !p.color() {
            return Line::from(Span::raw(line.to_owned()));
        }
        let indent = &line[..line.len() - trimmed.len()];
        if let Some((level, text)) = heading(trimmed) {
            let mut style = p.style(Tone::Bold);
            if level == 1 {
                style = style.patch(p.style(Tone::Underline));
            }
            return Line::from(within(style, inline(p, text)));
        }
        if is_rule(trimmed) {
            return Line::from(p.dim("─".repeat(40)));
        }
        let mut spans = Vec::new();
        push_plain(&mut spans, indent);
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or(trimmed.strip_prefix('>').filter(|r| r.is_empty()))
        {
            spans.push(p.dim("│"));
            push_plain(&mut spans, " ");
            for span in within(p.style(Tone::Italic), inline(p, rest)) {
                push(&mut spans, span);
            }
            return Line::from(spans);
        }
        let mut text = trimmed;
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = trimmed.strip_prefix(bullet) {
                push_plain(&mut spans, "• ");
                text = rest;
                break;
            }
        }
        for span in inline(p, text) {
            push(&mut spans, span);
        }
        Line::from(spans)
    }
}

/// Adds plain text to `spans`: to the plain span that ends them, if one does.
fn push_plain(spans: &mut Vec<Span<'static>>, text: &str) {
    push(spans, Span::raw(text.to_owned()));
}

/// Adds `span` to `spans`, joined to the last one when they share a style.
fn push(spans: &mut Vec<Span<'static>>, span: Span<'static>) {
    if span.content.is_empty() {
        return;
    }
    match spans.last_mut() {
        Some(last) if last.style == span.style => last.content.to_mut().push_str(&span.content),
        _ => spans.push(span),
    }
}

/// `spans` inside `outer`: each keeps its own style on top of it. As with the ANSI
/// codes this renderer used to write, an inner span's end also ends what it shares
/// with `outer` (bold and dim end together, as SGR 22 ends both).
fn within(outer: Style, spans: Vec<Span<'static>>) -> Vec<Span<'static>> {
    let mut outer = outer;
    spans.into_iter().fold(Vec::new(), |mut out, span| {
        let own = span.style;
        push(&mut out, span.style(outer.patch(own)));
        let mut ends = own.add_modifier;
        if ends.intersects(Modifier::BOLD | Modifier::DIM) {
            ends |= Modifier::BOLD | Modifier::DIM;
        }
        outer.add_modifier.remove(ends);
        if own.fg.is_some() {
            outer.fg = None;
        }
        out
    })
}

/// `## Title` → `(2, "Title")`.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if rest.is_empty() {
        return Some((level, ""));
    }
    rest.strip_prefix(' ')
        .map(|t| (level, t.trim().trim_end_matches('#').trim_end()))
}

/// Words most languages reserve, shown bold inside code blocks.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "class", "const", "continue", "def", "else", "enum", "export",
    "fn", "for", "from", "func", "function", "if", "impl", "import", "in", "let", "match", "mod",
    "mut", "pub", "return", "self", "static", "struct", "trait", "type", "use", "var", "while",
];

/// One line inside a code block: strings green, comments dim, keywords bold. Light on
/// purpose: it must not mislead on a language it does not know.
fn code_line(p: Palette, line: &str) -> Line<'static> {
    if !p.color() {
        return Line::from(Span::raw(line.to_owned()));
    }
    let trimmed = line.trim_start();
    if ["//", "#", "--"].iter().any(|c| trimmed.starts_with(c)) {
        return Line::from(p.dim(line.to_owned()));
    }
    let mut spans = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, spans: &mut Vec<Span<'static>>| {
        if KEYWORDS.contains(&word.as_str()) {
            spans.push(p.bold(std::mem::take(word)));
        } else {
            push_plain(spans, word);
            word.clear();
        }
    };
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut spans);
        if c == '"' || c == '\'' {
            let mut string = String::from(c);
            let mut escaped = false;
            for d in chars.by_ref() {
                string.push(d);
                if d == c && !escaped {
                    break;
                }
                escaped = d == '\\' && !escaped;
            }
            spans.push(p.green(string));
        } else {
            push_plain(&mut spans, c.encode_utf8(&mut [0; 4]));
        }
    }
    flush(&mut word, &mut spans);
    Line::from(spans)
}

fn is_rule(line: &str) -> bool {
    let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m))
}

/// Inline spans: `code`, **bold**, *italic* / _italic_. An opener without a closer on
/// the same line is left as it is; `snake_case_names` stay whole.
fn inline(p: Palette, text: &str) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut rest = text;
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if c == '`'
            && let Some(end) = rest[1..].find('`')
        {
            spans.push(p.cyan(rest[1..=end].to_owned()));
            rest = &rest[end + 2..];
            prev = Some('`');
            continue;
        }
        if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**")
            && end > 0
        {
            spans.extend(within(p.style(Tone::Bold), inline(p, &after[..end])));
            rest = &after[end + 2..];
            prev = Some('*');
            continue;
        }
        if (c == '*' || c == '_') && !prev.is_some_and(char::is_alphanumeric) {
            let after = &rest[1..];
            if after.starts_with(|n: char| !n.is_whitespace() && n != c)
                && let Some(end) = closing_emphasis(after, c)
            {
                spans.push(p.italic(after[..end].to_owned()));
                rest = &after[end + 1..];
                prev = Some(c);
                continue;
            }
        }
        push_plain(&mut spans, &rest[..c.len_utf8()]);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    spans
}

/// Where the emphasis opened just before `after` closes: a `marker` right after a
/// non-space and not followed by a letter or digit.
fn closing_emphasis(after: &str, marker: char) -> Option<usize> {
    let chars: Vec<(usize, char)> = after.char_indices().collect();
    chars.iter().enumerate().find_map(|(i, &(pos, ch))| {
        let closes = ch == marker
            && i > 0
            && !chars[i - 1].1.is_whitespace()
            && !chars.get(i + 1).is_some_and(|&(_, n)| n.is_alphanumeric());
        closes.then_some(pos)
    })
}

#[cfg(test)]
mod tests {
    use ratatui::style::Color;

    use super::*;
    use crate::repl::style::ansi;

    /// Escape codes made visible for snapshots.
    fn visible(s: &str) -> String {
        s.replace('\x1b', "␛")
    }

    fn render_all(color: bool, text: &str) -> String {
        let mut r = MarkdownRenderer::new(Palette::new(color));
        text.lines()
            .map(|l| visible(&ansi(&r.render_line(l))))
            .collect::<Vec<_>>()
            .join("\n")
    }

    const SAMPLE: &str = concat!(
        "# Plan\n",
        "Some **bold** text, `code`, *emphasis* and a_snake_case_name.\n",
        "## Steps\n",
        "- first `step`\n",
        "  * nested item\n",
        "1. numbered **one**\n",
        "> a quote\n",
        "---\n",
        "```rust\n",
        "let x = **not bold** * 2;\n",
        "```\n",
        "2 * 3 * 4 and an unclosed `tick",
    );

    #[test]
    fn markdown_with_colors_is_styled() {
        insta::assert_snapshot!(render_all(true, SAMPLE));
    }

    #[test]
    fn markdown_without_colors_is_left_as_written() {
        assert_eq!(render_all(false, SAMPLE), SAMPLE);
    }

    #[test]
    fn code_fences_switch_inline_styling_off_until_closed() {
        let mut r = MarkdownRenderer::new(Palette::new(true));
        r.render_line("```");
        assert_eq!(ansi(&r.render_line("**x**")), "**x**");
        r.render_line("```");
        assert_eq!(ansi(&r.render_line("**x**")), "\x1b[1mx\x1b[22m");
    }

    #[test]
    fn code_lines_colour_strings_comments_and_keywords() {
        let p = Palette::new(true);
        assert_eq!(
            ansi(&code_line(p, r#"let s = "a \" b";"#)),
            "\x1b[1mlet\x1b[22m s = \x1b[32m\"a \\\" b\"\x1b[39m;"
        );
        assert_eq!(ansi(&code_line(p, "  // note")), "\x1b[2m  // note\x1b[22m");
        assert_eq!(ansi(&code_line(Palette::new(false), "let x")), "let x");
    }

    #[test]
    fn line_buffer_yields_completed_lines_and_keeps_the_partial_one() {
        let mut b = LineBuffer::default();
        assert!(b.push("Hel").is_empty());
        assert_eq!(b.push("lo\nwor"), ["Hello"]);
        assert_eq!(b.push("ld\r\n\nend"), ["world", ""]);
        assert_eq!(b.finish().as_deref(), Some("end"));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn headings_need_a_space_after_the_hashes() {
        assert_eq!(heading("## Two ##"), Some((2, "Two")));
        assert_eq!(heading("#hashtag"), None);
        assert_eq!(heading("####### seven"), None);
    }

    #[test]
    fn lines_are_spans_styled_as_they_read() {
        let mut r = MarkdownRenderer::new(Palette::new(true));
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let cyan = Style::default().fg(Color::Cyan);
        assert_eq!(
            r.render_line("- a `b` **c**").spans,
            [
                Span::raw("• a "),
                Span::styled("b", cyan),
                Span::raw(" "),
                Span::styled("c", bold),
            ]
        );
        let heading = bold.add_modifier(Modifier::UNDERLINED);
        assert_eq!(
            r.render_line("# Step `x` of it").spans,
            [
                Span::styled("Step ", heading),
                Span::styled("x", heading.fg(Color::Cyan)),
                Span::styled(" of it", heading),
            ]
        );
        let italic = Style::default().add_modifier(Modifier::ITALIC);
        assert_eq!(
            r.render_line("  > quoted **words** here").spans,
            [
                Span::raw("  "),
                Span::styled("│", Style::default().add_modifier(Modifier::DIM)),
                Span::raw(" "),
                Span::styled("quoted ", italic),
                Span::styled("words", italic.add_modifier(Modifier::BOLD)),
                Span::styled(" here", italic),
            ]
        );
        let code = code_line(Palette::new(true), "fn f() { \"s\" }");
        assert_eq!(
            code.spans,
            [
                Span::styled("fn", bold),
                Span::raw(" f() { "),
                Span::styled("\"s\"", Style::default().fg(Color::Green)),
                Span::raw(" }"),
            ]
        );
    }
}
