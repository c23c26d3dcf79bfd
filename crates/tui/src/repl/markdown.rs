//! Light markdown for streamed assistant text, one completed line at a time: headings,
//! bold, italic, inline code, code fences, bullet lists, quotes and rules. Without
//! colors the text is left exactly as the model wrote it.

use gyre_term::style::Palette;

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
    pub fn render_line(&mut self, line: &str) -> String {
        let p = self.palette;
        let trimmed = line.trim_start();
        if let Some(marker) = self.fence {
            if trimmed.starts_with(marker) && trimmed.trim_end() == marker {
                self.fence = None;
                return if p.color() {
                    p.dim(line)
                } else {
                    line.to_owned()
                };
            }
            return code_line(p, line);
        }
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                self.fence = Some(marker);
                return if p.color() {
                    p.dim(line)
                } else {
                    line.to_owned()
                };
            }
        }
        if !p.color() {
            return line.to_owned();
        }
        let indent = &line[..line.len() - trimmed.len()];
        if let Some((level, text)) = heading(trimmed) {
            let text = inline(p, text);
            return if level == 1 {
                p.bold(&p.underline(&text))
            } else {
                p.bold(&text)
            };
        }
        if is_rule(trimmed) {
            return p.dim(&"─".repeat(40));
        }
        if let Some(rest) = trimmed
            .strip_prefix("> ")
            .or(trimmed.strip_prefix('>').filter(|r| r.is_empty()))
        {
            return format!("{indent}{} {}", p.dim("│"), p.italic(&inline(p, rest)));
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = trimmed.strip_prefix(bullet) {
                return format!("{indent}• {}", inline(p, rest));
            }
        }
        format!("{indent}{}", inline(p, trimmed))
    }
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
fn code_line(p: Palette, line: &str) -> String {
    if !p.color() {
        return line.to_owned();
    }
    let trimmed = line.trim_start();
    if ["//", "#", "--"].iter().any(|c| trimmed.starts_with(c)) {
        return p.dim(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if KEYWORDS.contains(&word.as_str()) {
            out.push_str(&p.bold(word));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut out);
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
            out.push_str(&p.green(&string));
        } else {
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn is_rule(line: &str) -> bool {
    let marks: Vec<char> = line.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3 && ['-', '*', '_'].iter().any(|m| marks.iter().all(|c| c == m))
}

/// Inline spans: `code`, **bold**, *italic* / _italic_. An opener without a closer on
/// the same line is left as it is; `snake_case_names` stay whole.
fn inline(p: Palette, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    let mut prev: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        if c == '`'
            && let Some(end) = rest[1..].find('`')
        {
            out.push_str(&p.cyan(&rest[1..=end]));
            rest = &rest[end + 2..];
            prev = Some('`');
            continue;
        }
        if let Some(after) = rest.strip_prefix("**")
            && let Some(end) = after.find("**")
            && end > 0
        {
            out.push_str(&p.bold(&inline(p, &after[..end])));
            rest = &after[end + 2..];
            prev = Some('*');
            continue;
        }
        if (c == '*' || c == '_') && !prev.is_some_and(char::is_alphanumeric) {
            let after = &rest[1..];
            if after.starts_with(|n: char| !n.is_whitespace() && n != c)
                && let Some(end) = closing_emphasis(after, c)
            {
                out.push_str(&p.italic(&after[..end]));
                rest = &after[end + 1..];
                prev = Some(c);
                continue;
            }
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
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
    use super::*;

    /// Escape codes made visible for snapshots.
    fn visible(s: &str) -> String {
        s.replace('\x1b', "␛")
    }

    fn render_all(color: bool, text: &str) -> String {
        let mut r = MarkdownRenderer::new(Palette::new(color));
        text.lines()
            .map(|l| visible(&r.render_line(l)))
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
        assert_eq!(r.render_line("**x**"), "**x**");
        r.render_line("```");
        assert_eq!(r.render_line("**x**"), "\x1b[1mx\x1b[22m");
    }

    #[test]
    fn code_lines_colour_strings_comments_and_keywords() {
        let p = Palette::new(true);
        assert_eq!(
            code_line(p, r#"let s = "a \" b";"#),
            "\x1b[1mlet\x1b[22m s = \x1b[32m\"a \\\" b\"\x1b[39m;"
        );
        assert_eq!(code_line(p, "  // note"), "\x1b[2m  // note\x1b[22m");
        assert_eq!(code_line(Palette::new(false), "let x"), "let x");
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
}
