//! The live part of the terminal UI, drawn under the scrollback (as many rows as it
//! fills): the answer line being streamed, what gyre is waiting for, the permission
//! question or the input box, and the status line. A pure function of [`View`], so
//! frames are snapshot-tested with ratatui's `TestBackend`.

use std::time::Instant;

use gyre_term::style::Tone;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Widget};
use unicode_width::UnicodeWidthChar;

use super::editor::Editor;
use super::spinner::Status;
use super::style::{Palette, PaletteSpans};
use super::text::{plain_text, printable, wrap};

/// The most rows the live part takes (fewer on a smaller terminal); it takes only the
/// rows it fills.
pub const VIEWPORT_ROWS: u16 = 20;

/// The answers a permission question offers, in the order shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Once,
    Session,
    /// Allow, and save the rule for this folder in the user's config (`folder_rules`).
    Save,
    Deny,
}

impl Choice {
    pub const ALL: [Self; 4] = [Self::Once, Self::Session, Self::Save, Self::Deny];

    /// The one key that picks this answer.
    #[must_use]
    pub const fn key(self) -> char {
        match self {
            Self::Once => 'y',
            Self::Session => 'a',
            Self::Save => 's',
            Self::Deny => 'n',
        }
    }

    #[must_use]
    pub fn label(self, rule: &str) -> String {
        match self {
            Self::Once => "Yes".to_owned(),
            Self::Session => "Yes, and don't ask again this session".to_owned(),
            Self::Save => format!("Yes, and always in this folder: {rule}"),
            Self::Deny => "No, tell gyre what to do instead".to_owned(),
        }
    }

    #[must_use]
    pub fn from_key(c: char) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|choice| choice.key() == c.to_ascii_lowercase())
    }
}

/// The answers to ExitPlanMode's question, in the order shown (Claude Code's three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanChoice {
    /// Approve, and switch to acceptEdits.
    AutoAccept,
    /// Approve, and switch to default (edits ask).
    Manual,
    /// Reject, with feedback typed next.
    KeepPlanning,
}

impl PlanChoice {
    pub const ALL: [Self; 3] = [Self::AutoAccept, Self::Manual, Self::KeepPlanning];

    #[must_use]
    pub const fn key(self) -> char {
        match self {
            Self::AutoAccept => '1',
            Self::Manual => '2',
            Self::KeepPlanning => '3',
        }
    }

    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::AutoAccept => "Yes, and auto-accept edits",
            Self::Manual => "Yes, and manually approve edits",
            Self::KeepPlanning => "No, keep planning",
        }
    }

    #[must_use]
    pub fn from_key(c: char) -> Option<Self> {
        Self::ALL.into_iter().find(|choice| choice.key() == c)
    }
}

/// ExitPlanMode's question: the plan (printed above the box when it comes) and the
/// feedback being typed once "No, keep planning" was picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanQuestion {
    /// The plan as Markdown rendered for the scrollback.
    pub lines: Vec<Line<'static>>,
    /// `Some` while the user types what to change.
    pub feedback: Option<String>,
}

/// A permission question on screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionView {
    /// `Bash echo hello`.
    pub summary: String,
    /// The whole command, a diff: lines under the summary.
    pub details: Vec<Line<'static>>,
    pub reason: String,
    /// The rule "always" saves: `Bash(echo hello)`.
    pub rule: String,
    pub selected: usize,
    /// Set for ExitPlanMode, which offers [`PlanChoice`]s instead of [`Choice`]s.
    pub plan: Option<PlanQuestion>,
}

impl QuestionView {
    /// How many answers the question offers.
    #[must_use]
    pub fn choices(&self) -> usize {
        if self.plan.is_some() {
            PlanChoice::ALL.len()
        } else {
            Choice::ALL.len()
        }
    }
}

/// A list open in place of the input box: `/bashes`' (a row per shell: id, status,
/// runtime, command) or `/rewind`'s, the row selected, and what the last key did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellsView {
    pub rows: Vec<String>,
    pub selected: usize,
    pub note: Option<String>,
    /// The box's title and the keys line; `None`: `/bashes`'.
    pub title: Option<String>,
    pub keys: Option<String>,
}

/// What the status line reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatusLine {
    pub model: String,
    pub mode: String,
    /// Tokens the last request used, of the model's context window.
    pub context: Option<(u64, u64)>,
    pub cost_usd: f64,
    /// Background shells still running (`/bashes` lists them).
    pub shells: usize,
}

impl StatusLine {
    #[must_use]
    pub fn text(&self) -> String {
        let mut parts = vec![self.model.clone(), format!("{} mode", self.mode)];
        // Before context and cost: a narrow terminal cuts the line's end.
        match self.shells {
            0 => {}
            1 => parts.push("1 background shell (/bashes)".to_owned()),
            n => parts.push(format!("{n} background shells (/bashes)")),
        }
        if let Some((used, window)) = self.context
            && window > 0
        {
            parts.push(format!("context {}%", used.saturating_mul(100) / window));
        }
        if self.cost_usd > 0.0 {
            parts.push(format!("${:.4}", self.cost_usd));
        }
        parts.join(" · ")
    }
}

/// Everything the viewport shows.
#[derive(Debug, Clone)]
pub struct View<'a> {
    pub color: bool,
    /// Lines of the answer still streaming.
    pub live: &'a [Line<'static>],
    /// One line per running sub-agent, each kept to one row.
    pub subagents: &'a [Line<'static>],
    pub activity: Option<&'a Status>,
    pub question: Option<&'a QuestionView>,
    /// `/bashes`' list, shown instead of the input box while open.
    pub shells: Option<&'a ShellsView>,
    pub editor: &'a Editor,
    pub status: &'a StatusLine,
    /// A passing word in place of the status line ("Press Ctrl+C again to exit").
    pub hint: Option<&'a str>,
    pub now: Instant,
    pub frame: usize,
}

impl View<'_> {
    /// The style of `tone` (none without colors).
    fn style(&self, tone: Tone) -> Style {
        Palette::new(self.color).style(tone)
    }

    fn dim(&self) -> Style {
        self.style(Tone::Dim)
    }
}

/// What [`render`] drew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// Where the terminal's cursor goes (in the input box).
    pub cursor: Option<(u16, u16)>,
    /// The rows filled, from the top of the area.
    pub rows: u16,
}

/// Draws `view` into `area`, top-aligned.
pub fn render(view: &View<'_>, area: Rect, buf: &mut Buffer) -> Drawn {
    let width = area.width;
    // Bottom up: status line, then the box (input or question), then the activity,
    // and the streamed answer gets what is left.
    let status: Vec<Line<'static>> = match view.hint {
        Some(hint) => vec![Line::styled(hint.to_owned(), view.dim())],
        None => {
            let mut lines = vec![Line::styled(view.status.text(), view.dim())];
            let completions = view.editor.completions();
            if !completions.is_empty() && view.question.is_none() {
                lines.insert(
                    0,
                    Line::styled(format!("  {}", completions.join("  ")), view.dim()),
                );
            }
            lines
        }
    };
    let (boxed, cursor) = match (view.question, view.shells) {
        (None, Some(shells)) => (
            shells_lines(view, shells)
                .into_iter()
                .flat_map(|l| wrap(&l, width.saturating_sub(2)))
                .collect(),
            None,
        ),
        (Some(q), _) => {
            // A long command gives up its lines before the answers lose theirs.
            let room = area.height.saturating_sub(rows(&status));
            let fit = |shown: usize| -> Vec<Line<'static>> {
                question_lines(view, q, shown)
                    .into_iter()
                    .flat_map(|l| hanging(&l, width.saturating_sub(2), ANSWER_INDENT))
                    .collect()
            };
            let mut shown = q.details.len();
            let mut lines = fit(shown);
            while rows(&lines) > room && shown > 0 {
                shown -= 1;
                lines = fit(shown);
            }
            // Typing plan feedback: the cursor ends its row (the last before the border).
            let cursor = q.plan.as_ref().and_then(|p| p.feedback.as_ref()).map(|_| {
                let row = lines.len().saturating_sub(3);
                let col = lines.get(row + 1).map_or(0, |l| {
                    plain_text(l)
                        .chars()
                        .map(|c| c.width().unwrap_or(0))
                        .sum::<usize>()
                });
                (
                    u16::try_from(row).unwrap_or(u16::MAX),
                    u16::try_from(col).unwrap_or(u16::MAX),
                )
            });
            (lines, cursor)
        }
        (None, None) => input_lines(view, width),
    };
    let activity: Vec<Line<'static>> = view
        .activity
        .map(|status| {
            let line = Line::styled(status.line(view.now, view.frame), view.style(Tone::Yellow));
            wrap(&line, width)
        })
        .unwrap_or_default();
    let subagents: Vec<Line<'static>> = view
        .subagents
        .iter()
        .map(|l| one_row(&as_shown(view, l), width))
        .collect();
    let (boxed, cursor) = if view.question.is_none() && view.shells.is_none() {
        let room = area
            .height
            .saturating_sub(rows(&subagents) + rows(&activity) + rows(&status));
        scroll_to_cursor(boxed, cursor, room)
    } else {
        (boxed, cursor)
    };
    let fixed = rows(&boxed) + rows(&subagents) + rows(&activity) + rows(&status);
    let room = area.height.saturating_sub(fixed);
    let mut live: Vec<Line<'static>> = view
        .live
        .iter()
        .flat_map(|l| wrap(&as_shown(view, l), width))
        .collect();
    if live.len() > usize::from(room) {
        live.drain(..live.len() - usize::from(room));
    }
    let mut y = area.y;
    place(live, area, &mut y, buf);
    place(subagents, area, &mut y, buf);
    place(activity, area, &mut y, buf);
    let (border, title) = match (view.question, view.shells) {
        (Some(_), _) => (view.style(Tone::Yellow), None),
        (None, Some(list)) => (
            view.dim(),
            Some(
                list.title
                    .clone()
                    .unwrap_or_else(|| " Background shells ".to_owned()),
            ),
        ),
        (None, None) => (
            view.dim(),
            view.editor
                .search()
                .map(|q| format!(" search history: {q} ")),
        ),
    };
    let box_top = y;
    let height = rows(&boxed).min(area.bottom().saturating_sub(y));
    let outer = Rect::new(area.x, box_top, width, height);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(border);
    if let Some(title) = title {
        block = block.title(title);
    }
    let inner = block.inner(outer);
    block.render(outer, buf);
    // The first and last of `boxed` stand for the borders.
    Paragraph::new(boxed.into_iter().skip(1).collect::<Vec<_>>()).render(inner, buf);
    y += height;
    place(status, area, &mut y, buf);
    Drawn {
        cursor: cursor.map(|(row, col)| (area.x + 1 + col, box_top + 1 + row)),
        rows: y - area.y,
    }
}

/// The input box's lines cut to `room` rows (borders included) around the cursor's
/// row, so what is typed stays in sight however long the text is.
fn scroll_to_cursor(
    lines: Vec<Line<'static>>,
    cursor: Option<(u16, u16)>,
    room: u16,
) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
    let inner = lines.len().saturating_sub(2);
    let fits = usize::from(room.saturating_sub(2)).max(1);
    if inner <= fits {
        return (lines, cursor);
    }
    let row = cursor.map_or(inner - 1, |(row, _)| usize::from(row));
    let start = (row + 1).saturating_sub(fits);
    let mut shown = vec![Line::default()];
    shown.extend(lines.into_iter().skip(1 + start).take(fits));
    shown.push(Line::default());
    let start = u16::try_from(start).unwrap_or(u16::MAX);
    (shown, cursor.map(|(row, col)| (row - start, col)))
}

/// Where a wrapped answer of a question goes on: under its text, past ` › y) `.
const ANSWER_INDENT: u16 = 6;

/// `line` cut to one row of `width`, `…` marking the cut.
fn one_row(line: &Line<'_>, width: u16) -> Line<'static> {
    let rows = wrap(line, width);
    if rows.len() <= 1 {
        return rows.into_iter().next().unwrap_or_default();
    }
    let cut: Vec<Span<'static>> = wrap(line, width.saturating_sub(1))
        .into_iter()
        .next()
        .map(|row| row.spans)
        .unwrap_or_default();
    let mut spans = cut;
    spans.push(Span::raw("…"));
    Line::from(spans)
}

/// Wraps `line` to `width`, its continuation rows indented by `indent`.
fn hanging(line: &Line<'_>, width: u16, indent: u16) -> Vec<Line<'static>> {
    let rows = wrap(line, width);
    if rows.len() == 1 {
        return rows;
    }
    let mut first = wrap(line, width.saturating_sub(indent)).into_iter();
    let head = first.next().unwrap_or_default();
    let rest: Vec<Span<'static>> = first.flat_map(|row| row.spans).collect();
    let mut out = vec![head];
    for row in wrap(&Line::from(rest), width.saturating_sub(indent)) {
        let mut spans = vec![Span::raw(" ".repeat(usize::from(indent)))];
        spans.extend(row.spans);
        out.push(Line::from(spans));
    }
    out
}

/// Draws `lines` at row `y` of `area` and moves `y` under them.
fn place(lines: Vec<Line<'static>>, area: Rect, y: &mut u16, buf: &mut Buffer) {
    let height = rows(&lines).min(area.bottom().saturating_sub(*y));
    Paragraph::new(lines).render(Rect::new(area.x, *y, area.width, height), buf);
    *y += height;
}

/// Rows a list of lines takes (each is one row: they are wrapped already).
fn rows(lines: &[Line<'_>]) -> u16 {
    u16::try_from(lines.len()).unwrap_or(u16::MAX)
}

/// `line` as the viewport shows it: printable, its styles dropped without colors.
fn as_shown(view: &View<'_>, line: &Line<'_>) -> Line<'static> {
    let line = printable(line);
    if view.color {
        line
    } else {
        Line::from(plain_text(&line))
    }
}

/// The input box's lines (a first placeholder row for the top border, then the
/// text rows) and the cursor inside it (row, column).
fn input_lines(view: &View<'_>, width: u16) -> (Vec<Line<'static>>, Option<(u16, u16)>) {
    let inner = usize::from(width.saturating_sub(2)).max(4);
    let editor = view.editor;
    let (cursor_row, cursor_col) = editor.cursor();
    let mut lines = vec![Line::default()];
    let mut cursor = None;
    for (i, text) in editor.lines().iter().enumerate() {
        let prefix = if i == 0 { "> " } else { "  " };
        let mut row = String::from(prefix);
        let mut used = 2usize;
        let mut col = 0usize;
        let mut chars = text.chars().peekable();
        loop {
            if i == cursor_row && col == cursor_col && cursor.is_none() {
                cursor = Some((lines.len() - 1, used));
            }
            let Some(c) = chars.next() else { break };
            let w = c.width().unwrap_or(0);
            if used + w > inner {
                lines.push(Line::from(std::mem::take(&mut row)));
                row.push_str("  ");
                used = 2;
                if i == cursor_row && col == cursor_col {
                    cursor = Some((lines.len() - 1, used));
                }
            }
            row.push(c);
            used += w;
            col += 1;
        }
        lines.push(Line::from(row));
    }
    // The bottom border.
    lines.push(Line::default());
    let cursor = cursor.map(|(row, col)| {
        (
            u16::try_from(row).unwrap_or(u16::MAX),
            u16::try_from(col).unwrap_or(u16::MAX),
        )
    });
    (lines, cursor)
}

/// `/bashes`' list inside its box (first and last rows stand for the borders).
fn shells_lines(view: &View<'_>, shells: &ShellsView) -> Vec<Line<'static>> {
    let mut lines = vec![Line::default()];
    for (i, row) in shells.rows.iter().enumerate() {
        if i == shells.selected {
            lines.push(Line::styled(format!(" › {row}"), view.style(Tone::Cyan)));
        } else {
            lines.push(Line::from(format!("   {row}")));
        }
    }
    if let Some(note) = &shells.note {
        lines.push(Line::from(format!("   {note}")));
    }
    let keys = shells.keys.as_deref();
    lines.push(Line::styled(
        format!(
            "   {}",
            keys.unwrap_or("↑/↓ select · k kills the selected shell · Esc closes")
        ),
        view.dim(),
    ));
    lines.push(Line::default());
    lines
}

/// ExitPlanMode's question inside its box: the three answers, or the feedback being
/// typed (and where the cursor goes in it).
fn plan_lines(view: &View<'_>, plan: &PlanQuestion, selected: usize) -> Vec<Line<'static>> {
    let bold = view.style(Tone::Bold);
    let mut lines = vec![
        Line::default(),
        Line::from(vec![
            Span::styled("? ", view.style(Tone::Yellow)),
            Span::styled("Ready to code? The plan is above.".to_owned(), bold),
        ]),
    ];
    if let Some(feedback) = &plan.feedback {
        lines.push(Line::styled(
            "  What should gyre change in the plan? (Enter sends, Esc goes back)".to_owned(),
            view.dim(),
        ));
        lines.push(Line::from(format!("  > {feedback}")));
        lines.push(Line::default());
        return lines;
    }
    for (i, choice) in PlanChoice::ALL.into_iter().enumerate() {
        let marker = if i == selected { "›" } else { " " };
        let text = format!(" {marker} {}) {}", choice.key(), choice.label());
        let style = if i == selected {
            view.style(Tone::Cyan)
        } else {
            Style::default()
        };
        lines.push(Line::styled(text, style));
    }
    lines.push(Line::default());
    lines
}

/// A question's lines inside its box (first and last rows stand for the borders), the
/// first `shown` of its details.
fn question_lines(view: &View<'_>, q: &QuestionView, shown: usize) -> Vec<Line<'static>> {
    if let Some(plan) = &q.plan {
        return plan_lines(view, plan, q.selected);
    }
    let bold = view.style(Tone::Bold);
    let mut lines = vec![
        Line::default(),
        Line::from(vec![
            Span::styled("? ", view.style(Tone::Yellow)),
            Span::styled(q.summary.clone(), bold),
        ]),
    ];
    lines.extend(q.details.iter().take(shown).map(|d| as_shown(view, d)));
    let hidden = q.details.len().saturating_sub(shown);
    if hidden > 0 {
        lines.push(Line::styled(
            format!("    … +{hidden} more lines (too many for this terminal)"),
            view.dim(),
        ));
    }
    if !q.reason.is_empty() {
        lines.push(Line::styled(format!("  {}", q.reason), view.dim()));
    }
    for (i, choice) in Choice::ALL.into_iter().enumerate() {
        let marker = if i == q.selected { "›" } else { " " };
        let text = format!(" {marker} {}) {}", choice.key(), choice.label(&q.rule));
        let style = if i == q.selected {
            view.style(Tone::Cyan)
        } else {
            Style::default()
        };
        lines.push(Line::styled(text, style));
    }
    lines.push(Line::default());
    lines
}

#[cfg(test)]
mod tests {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    /// The frame (60×12, no colours) for this state, one text row per line.
    fn frame(
        editor: &Editor,
        live: &[Line<'static>],
        activity: Option<&Status>,
        question: Option<&QuestionView>,
        now: Instant,
    ) -> String {
        let status = StatusLine {
            model: "claude-sonnet-4-5".into(),
            mode: "default".into(),
            context: Some((24_000, 200_000)),
            cost_usd: 0.0123,
            shells: 0,
        };
        let view = View {
            color: false,
            live,
            subagents: &[],
            activity,
            question,
            shells: None,
            editor,
            status: &status,
            hint: None,
            now,
            frame: 0,
        };
        let mut terminal = Terminal::new(TestBackend::new(60, 12)).unwrap();
        terminal
            .draw(|f| {
                let area = f.area();
                if let Some((x, y)) = render(&view, area, f.buffer_mut()).cursor {
                    f.set_cursor_position((x, y));
                }
            })
            .unwrap();
        let buffer = terminal.backend().buffer();
        let mut out = String::new();
        for y in 0..buffer.area.height {
            let row: String = (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol().to_owned())
                .collect();
            out.push_str(row.trim_end());
            out.push('\n');
        }
        out
    }

    #[test]
    fn idle_frame_has_the_input_box_and_the_status_line() {
        let mut editor = Editor::new(Vec::new());
        editor.insert_str("fix the parser\nand its tests");
        insta::assert_snapshot!(frame(&editor, &[], None, None, Instant::now()));
    }

    #[test]
    fn streaming_frame_shows_the_partial_answer_and_the_retry_reason_whole() {
        let now = Instant::now();
        let retry = Status::Retry {
            until: now + std::time::Duration::from_millis(2_500),
            attempt: 2,
            max_retries: 10,
            reason: "The API is overloaded (HTTP 529): the servers are busy; gyre waits as the server asked".into(),
            stop_hint: false,
        };
        let live = vec![Line::from("The answer so far, streamed as it arrives")];
        let editor = Editor::new(Vec::new());
        insta::assert_snapshot!(frame(&editor, &live, Some(&retry), None, now));
    }

    #[test]
    fn question_frame_offers_four_answers_on_one_key_each() {
        let question = QuestionView {
            summary: "Bash echo hello | tee greeting.txt".into(),
            details: Vec::new(),
            reason: "running this command needs permission".into(),
            rule: "Bash(echo hello | tee greeting.txt)".into(),
            selected: 1,
            plan: None,
        };
        let editor = Editor::new(Vec::new());
        insta::assert_snapshot!(frame(&editor, &[], None, Some(&question), Instant::now()));
    }

    #[test]
    fn a_long_command_gives_up_its_lines_so_the_answers_stay_on_screen() {
        let question = QuestionView {
            summary: "Bash python3 - <<'EOF' …".into(),
            details: (1..=20)
                .map(|n| Line::from(format!("    print({n})")))
                .collect(),
            reason: String::new(),
            rule: "Bash(python3 - <<'EOF' …)".into(),
            selected: 0,
            plan: None,
        };
        let editor = Editor::new(Vec::new());
        insta::assert_snapshot!(frame(&editor, &[], None, Some(&question), Instant::now()));
    }

    #[test]
    fn a_long_text_in_the_box_scrolls_to_keep_the_cursor_in_sight() {
        let mut editor = Editor::new(Vec::new());
        let text: Vec<String> = (1..=30).map(|n| format!("pasted line {n}")).collect();
        editor.insert_str(&text.join("\n"));
        insta::assert_snapshot!(frame(&editor, &[], None, None, Instant::now()));
        // The cursor ends the last row of the box: after "pasted line 30".
        let status = StatusLine::default();
        let view = View {
            color: false,
            live: &[],
            subagents: &[],
            activity: None,
            question: None,
            shells: None,
            editor: &editor,
            status: &status,
            hint: None,
            now: Instant::now(),
            frame: 0,
        };
        let area = Rect::new(0, 0, 60, 12);
        let drawn = render(&view, area, &mut Buffer::empty(area));
        assert_eq!(drawn.cursor, Some((17, 9)));
        assert_eq!(drawn.rows, 12);
    }

    #[test]
    fn a_slash_prefix_lists_the_commands_it_can_become() {
        let mut editor = Editor::new(Vec::new());
        editor.insert_str("/c");
        insta::assert_snapshot!(frame(&editor, &[], None, None, Instant::now()));
    }

    fn plan_question(feedback: Option<&str>) -> QuestionView {
        QuestionView {
            summary: "ExitPlanMode".into(),
            details: Vec::new(),
            reason: String::new(),
            rule: "ExitPlanMode".into(),
            selected: 0,
            plan: Some(PlanQuestion {
                lines: vec!["1. Edit a.rs".into()],
                feedback: feedback.map(str::to_owned),
            }),
        }
    }

    #[test]
    fn a_plan_offers_auto_accept_manual_approval_or_more_planning() {
        let editor = Editor::new(Vec::new());
        let question = plan_question(None);
        insta::assert_snapshot!(frame(&editor, &[], None, Some(&question), Instant::now()));
    }

    #[test]
    fn keeping_on_planning_takes_typed_feedback_in_the_box() {
        let editor = Editor::new(Vec::new());
        let question = plan_question(Some("split step 2"));
        insta::assert_snapshot!(frame(&editor, &[], None, Some(&question), Instant::now()));
    }

    #[test]
    fn the_status_line_counts_running_background_shells() {
        let mut status = StatusLine {
            model: "m".into(),
            mode: "default".into(),
            context: None,
            cost_usd: 0.0,
            shells: 0,
        };
        assert_eq!(status.text(), "m · default mode");
        status.shells = 1;
        assert_eq!(
            status.text(),
            "m · default mode · 1 background shell (/bashes)"
        );
        status.shells = 3;
        status.context = Some((24_000, 200_000));
        status.cost_usd = 0.01;
        assert_eq!(
            status.text(),
            "m · default mode · 3 background shells (/bashes) · context 12% · $0.0100"
        );
    }

    #[test]
    fn each_sub_agent_keeps_to_one_row() {
        let subagents = [
            Line::from("  ⎿ find a · Grep fn parse · 2 tool uses · 12.4k tokens"),
            Line::from("  ⎿ find b · Done (1 tool use · 850 tokens · 8.2s)"),
            Line::from(
                "  ⎿ find c · ✗ Failed after 1 tool use: The API rejected the request (400 invalid_request_error)",
            ),
        ];
        let status = StatusLine::default();
        let editor = Editor::new(Vec::new());
        let view = View {
            color: false,
            live: &[],
            subagents: &subagents,
            activity: None,
            question: None,
            shells: None,
            editor: &editor,
            status: &status,
            hint: None,
            now: Instant::now(),
            frame: 0,
        };
        let mut terminal = Terminal::new(TestBackend::new(60, 8)).unwrap();
        terminal
            .draw(|f| {
                let area = f.area();
                render(&view, area, f.buffer_mut());
            })
            .unwrap();
        insta::assert_snapshot!(terminal.backend());
    }

    #[test]
    fn bashes_lists_the_shells_in_place_of_the_input_box() {
        let shells = ShellsView {
            rows: vec![
                "bash_1   running     12.3s  npm run dev".into(),
                "bash_2   killed       4.0s  sleep 300".into(),
            ],
            selected: 1,
            note: Some("Killed bash_2 (sleep 300)".into()),
            ..ShellsView::default()
        };
        let status = StatusLine::default();
        let editor = Editor::new(Vec::new());
        let view = View {
            color: false,
            live: &[],
            subagents: &[],
            activity: None,
            question: None,
            shells: Some(&shells),
            editor: &editor,
            status: &status,
            hint: None,
            now: Instant::now(),
            frame: 0,
        };
        let mut terminal = Terminal::new(TestBackend::new(60, 8)).unwrap();
        terminal
            .draw(|f| {
                let area = f.area();
                assert_eq!(render(&view, area, f.buffer_mut()).cursor, None);
            })
            .unwrap();
        insta::assert_snapshot!(terminal.backend());
    }
}
