//! The terminal: raw mode, bracketed paste and a live area at the bottom of the normal
//! scrollback (no alternate screen, so the session stays in the terminal's history after
//! gyre exits). The live area takes only the rows its content fills, right under the
//! last finished line; finished lines are written where it was, and it is drawn again
//! under them. [`Screen`] does that on any ratatui backend (tests use `TestBackend`);
//! [`Ui`] is it on the real terminal.

use std::collections::VecDeque;
use std::io::{Stdout, Write};

use super::{Result, TuiError};
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use ratatui::backend::{Backend, ClearType, CrosstermBackend};
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Rect, Size};
use ratatui::style::{Color, Modifier};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::text::{plain_text, printable, wrap};
use super::view::{self, VIEWPORT_ROWS, View};

/// The scrollback and the live area under it, on a terminal `B`.
pub struct Screen<B: Backend> {
    terminal: Terminal<B>,
    color: bool,
    /// The screen row the live area starts at: under the last finished line.
    top: u16,
    /// Where the live area is now (empty when it has to be drawn afresh).
    area: Rect,
    /// The terminal's size when the screen was last written.
    size: Size,
    /// The newest printed lines, drawn again after a resize.
    recent: VecDeque<Line<'static>>,
}

/// How many printed lines [`Screen`] keeps to draw again after a resize: more than any
/// terminal shows at once.
const RECENT_LINES: usize = 500;

impl<B: Backend> Screen<B> {
    /// The live area starts at row `top` (where the cursor is).
    ///
    /// # Errors
    /// When the backend cannot report its size.
    pub fn new(backend: B, color: bool, top: u16) -> std::io::Result<Self> {
        let size = backend.size()?;
        let width = size.width;
        let terminal = Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, top, width, 1)),
            },
        )?;
        Ok(Self {
            terminal,
            color,
            top,
            area: Rect::default(),
            size,
            recent: VecDeque::new(),
        })
    }

    /// Puts lines into the scrollback where the live area was; the next
    /// [`Screen::draw`] puts it back under them.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn print(&mut self, lines: &[Line<'static>]) -> std::io::Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let size = self.terminal.backend().size()?;
        self.follow_resize(size, self.area.height)?;
        let width = size.width;
        let rows = scrollback_rows(lines, width, self.color);
        self.erase()?;
        self.write_rows(&rows)?;
        self.recent.extend(lines.iter().cloned());
        let over = self.recent.len().saturating_sub(RECENT_LINES);
        self.recent.drain(..over);
        Ok(())
    }

    /// Writes `rows` from the live area's top, scrolling the screen as they need; the
    /// live area then starts under them.
    fn write_rows(&mut self, rows: &[Line<'static>]) -> std::io::Result<()> {
        let Size { width, height } = self.size;
        let backend = self.terminal.backend_mut();
        for chunk in rows.chunks(usize::from(height.max(1))) {
            let count = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            self.top = make_room(backend, self.top, count, height)?;
            let mut buf = Buffer::empty(Rect::new(0, 0, width, count));
            Paragraph::new(chunk.to_vec()).render(buf.area, &mut buf);
            // Only up to each row's last mark: a row padded with spaces to the width
            // would wrap in two when the terminal is narrowed.
            let ends: Vec<u16> = (0..count)
                .map(|y| {
                    (0..width)
                        .rev()
                        .find(|&x| marks(&buf[(x, y)]))
                        .map_or(0, |x| x + 1)
                })
                .collect();
            let top = self.top;
            let cells = buf.content().iter().enumerate().filter_map(|(i, cell)| {
                let (x, y) = buf.pos_of(i);
                (x < ends[usize::from(y)]).then_some((x, top + y, cell))
            });
            backend.draw(cells)?;
            self.top = self.top.saturating_add(count);
        }
        // A line printed in the last row leaves the live area no room under it yet.
        self.top = self.top.min(height);
        self.area = Rect::default();
        Ok(())
    }

    /// When the terminal's `size` (as the caller just read it) differs from the last
    /// one, draws the screen afresh: the newest printed lines from the top, wrapped to
    /// the new width, leaving `live` rows under them.
    ///
    /// Terminals differ in what they do to the rows already shown when their width
    /// changes (some rewrap them, some cut them, some move the cursor), so where the
    /// old live area ended up cannot be known, and erasing from where it was leaves
    /// pieces of it on the screen. The lines kept above are those gyre printed; the
    /// terminal's history above the screen is left alone.
    fn follow_resize(&mut self, size: Size, live: u16) -> std::io::Result<()> {
        if size == self.size {
            return Ok(());
        }
        self.size = size;
        let backend = self.terminal.backend_mut();
        // Row by row: a terminal may keep a cleared screen in its history (tmux's
        // scroll-on-clear), which would then hold it twice.
        for y in 0..size.height {
            backend.set_cursor_position(Position::new(0, y))?;
            backend.clear_region(ClearType::UntilNewLine)?;
        }
        self.top = 0;
        self.area = Rect::default();
        let rows = scrollback_rows(self.recent.make_contiguous(), size.width, self.color);
        let room = usize::from(size.height.saturating_sub(live));
        self.write_rows(&rows[rows.len().saturating_sub(room)..])
    }

    /// Draws the live area under the scrollback, as many rows as it fills.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn draw(&mut self, view: &View<'_>) -> std::io::Result<()> {
        let size = self.terminal.backend().size()?;
        let (width, height) = (size.width, size.height);
        let most = Rect::new(0, 0, width, height.min(VIEWPORT_ROWS));
        let rows = view::render(view, most, &mut Buffer::empty(most))
            .rows
            .max(1);
        self.follow_resize(size, rows)?;
        self.top = make_room(
            self.terminal.backend_mut(),
            self.top.min(height),
            rows,
            height,
        )?;
        let area = Rect::new(0, self.top, width, rows.min(height));
        if area != self.area {
            // Rows it left (it shrank, or the screen scrolled) are blank again.
            self.erase()?;
            self.terminal.resize(area)?;
            self.area = area;
        }
        self.terminal.draw(|frame| {
            let area = frame.area();
            if let Some((x, y)) = view::render(view, area, frame.buffer_mut()).cursor {
                frame.set_cursor_position((x, y));
            }
        })?;
        Ok(())
    }

    /// Erases the live area; the cursor goes where it started.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn erase(&mut self) -> std::io::Result<()> {
        let backend = self.terminal.backend_mut();
        backend.set_cursor_position(Position::new(0, self.top))?;
        backend.clear_region(ClearType::AfterCursor)?;
        self.area = Rect::default();
        Ok(())
    }

    #[cfg(test)]
    pub fn backend(&self) -> &B {
        self.terminal.backend()
    }
}

/// Whether a cell shows something (a space only with a background, reverse or
/// underline).
fn marks(cell: &Cell) -> bool {
    cell.symbol() != " "
        || cell.bg != Color::Reset
        || cell
            .modifier
            .intersects(Modifier::REVERSED | Modifier::UNDERLINED)
}

/// Scrolls the screen up so that `rows` rows from `top` fit on it; where they start now.
fn make_room<B: Backend>(
    backend: &mut B,
    top: u16,
    rows: u16,
    height: u16,
) -> std::io::Result<u16> {
    let rows = rows.min(height);
    let over = (top + rows).saturating_sub(height);
    if over > 0 {
        // New lines at the last row scroll the screen.
        backend.set_cursor_position(Position::new(0, height.saturating_sub(1)))?;
        backend.append_lines(over)?;
    }
    Ok(top - over)
}

/// [`Screen`] on the terminal gyre runs in, in raw mode with bracketed paste.
pub struct Ui {
    screen: Screen<CrosstermBackend<Stdout>>,
    restored: bool,
}

impl Ui {
    /// Takes the terminal: raw mode, bracketed paste, the live area under the cursor.
    ///
    /// # Errors
    /// When the terminal cannot be set up (not a terminal, no size).
    pub fn start(color: bool) -> Result<Self> {
        enable_raw_mode().map_err(TuiError::terminal(
            "could not switch the terminal to raw mode",
        ))?;
        let started = (|| -> Result<Self> {
            let mut stdout = std::io::stdout();
            crossterm::execute!(stdout, EnableBracketedPaste)
                .map_err(TuiError::terminal("could not enable bracketed paste"))?;
            let (_, top) = crossterm::cursor::position()
                .map_err(TuiError::terminal("could not read the cursor position"))?;
            let screen = Screen::new(CrosstermBackend::new(stdout), color, top)
                .map_err(TuiError::terminal("could not set up the terminal UI"))?;
            Ok(Self {
                screen,
                restored: false,
            })
        })();
        if started.is_err() {
            restore();
        }
        started
    }

    /// See [`Screen::print`].
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn print(&mut self, lines: &[Line<'static>]) -> Result<()> {
        Ok(self.screen.print(lines)?)
    }

    /// See [`Screen::draw`].
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn draw(&mut self, view: &View<'_>) -> Result<()> {
        Ok(self.screen.draw(view)?)
    }

    /// Erases the live area and gives the terminal back, the cursor under the
    /// scrollback, as a shell expects it.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn finish(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        self.screen.erase()?;
        self.screen.terminal.show_cursor()?;
        self.restored = true;
        restore();
        std::io::stdout().flush()?;
        Ok(())
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.screen.terminal.show_cursor();
            restore();
        }
    }
}

/// Lines as the terminal rows they take in the scrollback, `width` columns wide
/// (styles dropped without `color`).
#[must_use]
pub fn scrollback_rows(lines: &[Line<'_>], width: u16, color: bool) -> Vec<Line<'static>> {
    lines
        .iter()
        .flat_map(|l| {
            let line = printable(l);
            let line = if color {
                line
            } else {
                Line::from(plain_text(&line))
            };
            wrap(&line, width)
        })
        .collect()
}

fn restore() {
    let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
    let _ = disable_raw_mode();
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use ratatui::backend::TestBackend;
    use ratatui::style::Style;
    use ratatui::text::Span;

    use super::*;
    use crate::repl::editor::Editor;
    use crate::repl::view::{QuestionView, StatusLine};

    /// A screen `width`×10 with the live area at the top (as on a cleared terminal).
    fn screen(width: u16) -> Screen<TestBackend> {
        Screen::new(TestBackend::new(width, 10), false, 0).unwrap()
    }

    /// Draws the input box (or `question`) and the status line.
    fn draw(screen: &mut Screen<TestBackend>, question: Option<&QuestionView>) {
        let editor = Editor::new(Vec::new());
        let status = StatusLine {
            model: "m".into(),
            mode: "default".into(),
            ..StatusLine::default()
        };
        let view = View {
            color: false,
            live: &[],
            subagents: &[],
            activity: None,
            question,
            shells: None,
            editor: &editor,
            status: &status,
            hint: None,
            now: Instant::now(),
            frame: 0,
        };
        screen.draw(&view).unwrap();
    }

    /// The screen, then what scrolled off it, one text row per line.
    fn shown(screen: &Screen<TestBackend>) -> String {
        let rows = |buf: &Buffer| -> Vec<String> {
            (0..buf.area.height)
                .map(|y| {
                    let row: String = (0..buf.area.width)
                        .map(|x| buf[(x, y)].symbol().to_owned())
                        .collect();
                    row.trim_end().to_owned()
                })
                .collect()
        };
        let backend = screen.backend();
        format!(
            "{}\n--- scrolled off:\n{}",
            rows(backend.buffer()).join("\n"),
            rows(backend.scrollback()).join("\n")
        )
    }

    #[test]
    fn the_live_area_sits_under_the_last_line_and_takes_only_its_rows() {
        let mut screen = screen(30);
        draw(&mut screen, None);
        screen.print(&["one".into(), "two".into()]).unwrap();
        draw(&mut screen, None);
        insta::assert_snapshot!(shown(&screen));
    }

    #[test]
    fn on_a_full_screen_the_live_area_keeps_the_bottom_rows_and_lines_scroll_off() {
        let mut screen = screen(30);
        draw(&mut screen, None);
        for n in 1..=9 {
            screen.print(&[format!("line {n}").into()]).unwrap();
            draw(&mut screen, None);
        }
        insta::assert_snapshot!(shown(&screen));
    }

    #[test]
    fn a_question_gives_its_rows_back_when_the_input_box_returns() {
        let mut screen = screen(60);
        screen.print(&["● Bash ls".into()]).unwrap();
        let question = QuestionView {
            summary: "Bash ls".into(),
            details: Vec::new(),
            reason: String::new(),
            rule: "Bash(ls)".into(),
            selected: 0,
            plan: None,
        };
        draw(&mut screen, Some(&question));
        let asking = shown(&screen);
        screen.print(&["  ? allowed once".into()]).unwrap();
        draw(&mut screen, None);
        insta::assert_snapshot!(format!("{asking}\n=== answered:\n{}", shown(&screen)));
    }

    #[test]
    fn after_a_resize_the_screen_is_drawn_afresh_at_the_new_width() {
        let mut screen = screen(30);
        draw(&mut screen, None);
        screen
            .print(&["a line long enough to wrap at twenty".into(), "two".into()])
            .unwrap();
        draw(&mut screen, None);
        // The terminal narrows (TestBackend keeps the old cells where they fit, as a
        // terminal that cuts rows does).
        screen.terminal.backend_mut().resize(20, 10);
        draw(&mut screen, None);
        let narrowed = shown(&screen);
        screen.print(&["three".into()]).unwrap();
        draw(&mut screen, None);
        insta::assert_snapshot!(format!("{narrowed}\n=== then a line:\n{}", shown(&screen)));
    }

    #[test]
    fn printed_rows_end_at_their_last_mark() {
        let mut screen = screen(30);
        screen.print(&["short".into()]).unwrap();
        let buf = screen.backend().buffer();
        // Cells past the text were never written (still the empty cell), so a
        // narrower terminal does not wrap the row.
        assert!(!marks(&buf[(5, 0)]));
        assert_eq!(buf[(4, 0)].symbol(), "t");
    }

    #[test]
    fn printed_lines_keep_their_styles_only_in_colour_and_a_tab_as_spaces() {
        let line = Line::from(vec![
            Span::raw("a\t"),
            Span::styled("red", Style::default().fg(Color::Red)),
        ]);
        let coloured = scrollback_rows(std::slice::from_ref(&line), 30, true);
        assert_eq!(
            coloured,
            [Line::from(vec![
                Span::raw("a    "),
                Span::styled("red", Style::default().fg(Color::Red)),
            ])]
        );
        let plain = scrollback_rows(&[line], 30, false);
        assert_eq!(plain, [Line::from("a    red")]);
    }
}
