//! The terminal: raw mode, bracketed paste and a live area at the bottom of the normal
//! scrollback (no alternate screen, so the session stays in the terminal's history after
//! gyre exits). The live area takes only the rows its content fills, right under the
//! last finished line; finished lines are written where it was, and it is drawn again
//! under them. [`Screen`] does that on any ratatui backend (tests use `TestBackend`);
//! [`Ui`] is it on the real terminal.
//!
//! With `GYRE_FRAME_LOG=FILE` each frame appends a line to `FILE` ([`FrameLog`]): what
//! `cargo xtask bench` reads to time frames and count full-screen redraws. Unset, the
//! screen does not read a clock.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Stdout, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// `GYRE_FRAME_LOG`'s file, when set.
    log: Option<FrameLog>,
}

/// How much of the screen a frame wrote afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Redraw {
    /// Only the cells that changed since the last frame.
    Diff,
    /// The whole live area (it moved or changed its height: lines were printed above
    /// it, or it grew or shrank).
    Area,
    /// The whole screen (the terminal was resized).
    Screen,
}

impl Redraw {
    fn name(self) -> &'static str {
        match self {
            Self::Diff => "diff",
            Self::Area => "area",
            Self::Screen => "screen",
        }
    }
}

/// `GYRE_FRAME_LOG`: one line per frame, `<unix µs> <µs> <redraw> <key µs or ->`: when
/// the frame was flushed, how long it took (drawing the live area and printing the
/// lines that went into the scrollback since the last frame), the most it wrote
/// afresh ([`Redraw`]), and, for the first frame after a key was read, the time from
/// reading the key to the frame flushed. Written line by line, unbuffered, so that a
/// reader sees each frame as soon as it is on screen.
struct FrameLog {
    file: File,
    /// Time spent printing since the last frame.
    printing: Duration,
    /// The most written afresh since the last frame.
    redraw: Redraw,
    /// When the first key not answered by a frame yet was read.
    key: Option<Instant>,
}

impl FrameLog {
    fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: File::options().create(true).append(true).open(path)?,
            printing: Duration::ZERO,
            redraw: Redraw::Diff,
            key: None,
        })
    }

    fn redrew(&mut self, redraw: Redraw) {
        self.redraw = self.redraw.max(redraw);
    }

    /// Ends a frame that took `drawing`; the counts start again.
    fn frame(&mut self, drawing: Duration) -> std::io::Result<()> {
        let now = Instant::now();
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let key = self.key.take().map_or_else(
            || "-".to_owned(),
            |k| now.duration_since(k).as_micros().to_string(),
        );
        let took = (drawing + self.printing).as_micros();
        let line = format!("{at} {took} {} {key}\n", self.redraw.name());
        self.printing = Duration::ZERO;
        self.redraw = Redraw::Diff;
        self.file.write_all(line.as_bytes())
    }
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
            log: None,
        })
    }

    /// Appends a line per frame to `path` from now on (see [`FrameLog`]).
    ///
    /// # Errors
    /// When `path` cannot be opened for appending.
    pub fn log_frames(&mut self, path: &Path) -> std::io::Result<()> {
        self.log = Some(FrameLog::open(path)?);
        Ok(())
    }

    /// A key was read: the next frame's log line says how long it took to answer.
    pub fn key_read(&mut self) {
        if let Some(log) = &mut self.log {
            log.key.get_or_insert_with(Instant::now);
        }
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
        let start = self.log.is_some().then(Instant::now);
        let size = self.terminal.backend().size()?;
        self.follow_resize(size, self.area.height)?;
        let width = size.width;
        let rows = scrollback_rows(lines, width, self.color);
        self.erase()?;
        self.write_rows(&rows)?;
        self.recent.extend(lines.iter().cloned());
        let over = self.recent.len().saturating_sub(RECENT_LINES);
        self.recent.drain(..over);
        if let (Some(log), Some(start)) = (&mut self.log, start) {
            log.printing += start.elapsed();
        }
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
        if let Some(log) = &mut self.log {
            log.redrew(Redraw::Screen);
        }
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
        let start = self.log.is_some().then(Instant::now);
        let size = self.terminal.backend().size()?;
        let (width, height) = (size.width, size.height);
        // Drawn once, at the top of the tallest area it may take: the view is laid out
        // from the top down, so its rows are the same in an area of just their height,
        // and they are copied into the live area below.
        let most = Rect::new(0, 0, width, height.min(VIEWPORT_ROWS));
        let mut drawn_buf = Buffer::empty(most);
        let drawn = view::render(view, most, &mut drawn_buf);
        let rows = drawn.rows.max(1);
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
            if let Some(log) = &mut self.log {
                log.redrew(Redraw::Area);
            }
        }
        self.terminal.draw(|frame| {
            let area = frame.area();
            let buf = frame.buffer_mut();
            for y in 0..area.height.min(most.height) {
                for x in 0..area.width.min(most.width) {
                    buf[(area.x + x, area.y + y)] = drawn_buf[(x, y)].clone();
                }
            }
            if let Some((x, y)) = drawn.cursor {
                frame.set_cursor_position((area.x + x, area.y + y));
            }
        })?;
        if let (Some(log), Some(start)) = (&mut self.log, start) {
            log.frame(start.elapsed())?;
        }
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
    /// `GYRE_FRAME_LOG`'s file, when set.
    frame_log: Option<PathBuf>,
}

impl Ui {
    /// Takes the terminal: raw mode, bracketed paste, the live area under the cursor;
    /// each frame logged to `frame_log` when given (`GYRE_FRAME_LOG`, see [`FrameLog`]).
    ///
    /// # Errors
    /// When the terminal cannot be set up (not a terminal, no size), or the frame log
    /// cannot be opened.
    pub fn start(color: bool, frame_log: Option<PathBuf>) -> Result<Self> {
        enable_raw_mode().map_err(TuiError::terminal(
            "could not switch the terminal to raw mode",
        ))?;
        let started = (|| -> Result<Self> {
            let mut stdout = std::io::stdout();
            crossterm::execute!(stdout, EnableBracketedPaste)
                .map_err(TuiError::terminal("could not enable bracketed paste"))?;
            let (_, top) = crossterm::cursor::position()
                .map_err(TuiError::terminal("could not read the cursor position"))?;
            let mut screen = Screen::new(CrosstermBackend::new(stdout), color, top)
                .map_err(TuiError::terminal("could not set up the terminal UI"))?;
            if let Some(path) = &frame_log {
                screen.log_frames(path).map_err(TuiError::terminal(
                    "could not open GYRE_FRAME_LOG's file for appending",
                ))?;
            }
            Ok(Self {
                screen,
                restored: false,
                frame_log,
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

    /// See [`Screen::key_read`].
    pub fn key_read(&mut self) {
        self.screen.key_read();
    }

    /// The frame log's file (`GYRE_FRAME_LOG`), for a [`Ui`] started again.
    #[must_use]
    pub fn frame_log(&self) -> Option<PathBuf> {
        self.frame_log.clone()
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
    fn the_frame_log_times_each_frame_and_says_what_it_wrote_afresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frames.log");
        let mut screen = screen(30);
        draw(&mut screen, None);
        // No log yet: nothing is written.
        assert!(!path.exists());
        screen.log_frames(&path).unwrap();
        // Unchanged: only the cells that changed (none).
        draw(&mut screen, None);
        // A key read, then its frame.
        screen.key_read();
        draw(&mut screen, None);
        // A line printed above moves the live area: drawn whole.
        screen.print(&["one".into()]).unwrap();
        draw(&mut screen, None);
        // A resize: the whole screen.
        screen.terminal.backend_mut().resize(20, 10);
        draw(&mut screen, None);
        let log = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
        let kinds: Vec<&str> = lines.iter().map(|l| l[2]).collect();
        assert_eq!(kinds, ["diff", "diff", "area", "screen"], "{log}");
        let keys: Vec<&str> = lines.iter().map(|l| l[3]).collect();
        assert_eq!(keys[0], "-");
        assert!(keys[1].parse::<u64>().is_ok(), "{log}");
        assert_eq!(keys[2..], ["-", "-"]);
        // Times: a clock reading (µs since 1970) that does not go back, and a duration.
        let at: Vec<u64> = lines.iter().map(|l| l[0].parse().unwrap()).collect();
        assert!(at[0] > 1_600_000_000_000_000 && at.is_sorted(), "{log}");
        assert!(lines.iter().all(|l| l[1].parse::<u64>().is_ok()), "{log}");
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
