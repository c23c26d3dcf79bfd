//! The terminal: raw mode, bracketed paste and a live area at the bottom of the normal
//! scrollback (no alternate screen, so the session stays in the terminal's history after
//! gyre exits). The live area takes only the rows its content fills, right under the
//! last finished line; finished lines are written where it was, and it is drawn again
//! under them.

use std::io::{Stdout, Write};

use anyhow::{Context, Result};
use crossterm::cursor::MoveTo;
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{Clear, ClearType, disable_raw_mode, enable_raw_mode};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::ansi;
use super::view::{self, VIEWPORT_ROWS, View};

pub struct Ui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    color: bool,
    /// The screen row the live area starts at: under the last finished line.
    top: u16,
    /// Where the live area is now (empty when it has to be drawn afresh).
    area: Rect,
    restored: bool,
}

impl Ui {
    /// Takes the terminal: raw mode, bracketed paste, the live area under the cursor.
    ///
    /// # Errors
    /// When the terminal cannot be set up (not a terminal, no size).
    pub fn start(color: bool) -> Result<Self> {
        enable_raw_mode().context("could not switch the terminal to raw mode")?;
        let started = (|| -> Result<Self> {
            let mut stdout = std::io::stdout();
            crossterm::execute!(stdout, EnableBracketedPaste)
                .context("could not enable bracketed paste")?;
            let (_, top) =
                crossterm::cursor::position().context("could not read the cursor position")?;
            let (width, _) = crossterm::terminal::size().context("could not read the size")?;
            let area = Rect::new(0, top, width, 1);
            let terminal = Terminal::with_options(
                CrosstermBackend::new(stdout),
                TerminalOptions {
                    viewport: Viewport::Fixed(area),
                },
            )
            .context("could not set up the terminal UI")?;
            Ok(Self {
                terminal,
                color,
                top,
                area: Rect::default(),
                restored: false,
            })
        })();
        if started.is_err() {
            restore();
        }
        started
    }

    /// Puts Palette-styled lines into the scrollback where the live area was; the next
    /// [`Ui::draw`] puts it back under them.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn print(&mut self, lines: &[String]) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let (width, height) = crossterm::terminal::size()?;
        let rows = scrollback_rows(lines, width, self.color);
        let backend = self.terminal.backend_mut();
        crossterm::queue!(
            backend,
            MoveTo(0, self.top),
            Clear(ClearType::FromCursorDown)
        )?;
        for chunk in rows.chunks(usize::from(height.max(1))) {
            let count = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            self.top = make_room(backend, self.top, count, height)?;
            let mut buf = Buffer::empty(Rect::new(0, 0, width, count));
            Paragraph::new(chunk.to_vec()).render(buf.area, &mut buf);
            // Only up to each row's last mark: a row padded with spaces to the width
            // would wrap in two when the terminal is narrowed.
            let top = self.top;
            let marks = |cell: &ratatui::buffer::Cell| {
                cell.symbol() != " "
                    || cell.bg != ratatui::style::Color::Reset
                    || cell
                        .modifier
                        .intersects(Modifier::REVERSED | Modifier::UNDERLINED)
            };
            let ends: Vec<u16> = (0..count)
                .map(|y| {
                    (0..width)
                        .rev()
                        .find(|&x| marks(&buf[(x, y)]))
                        .map_or(0, |x| x + 1)
                })
                .collect();
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

    /// Draws the live area under the scrollback, as many rows as it fills.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn draw(&mut self, view: &View<'_>) -> Result<()> {
        let (width, height) = crossterm::terminal::size()?;
        let most = Rect::new(0, 0, width, height.min(VIEWPORT_ROWS));
        let rows = view::render(view, most, &mut Buffer::empty(most))
            .rows
            .max(1);
        let backend = self.terminal.backend_mut();
        self.top = make_room(backend, self.top.min(height), rows, height)?;
        let area = Rect::new(0, self.top, width, rows.min(height));
        if area != self.area {
            // Rows it left (it shrank, or the screen scrolled) are blank again.
            crossterm::queue!(
                backend,
                MoveTo(0, self.top),
                Clear(ClearType::FromCursorDown)
            )?;
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

    /// Erases the live area and gives the terminal back, the cursor under the
    /// scrollback, as a shell expects it.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn finish(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        let backend = self.terminal.backend_mut();
        crossterm::queue!(
            backend,
            MoveTo(0, self.top),
            Clear(ClearType::FromCursorDown)
        )?;
        self.terminal.show_cursor()?;
        self.restored = true;
        restore();
        std::io::stdout().flush()?;
        Ok(())
    }
}

/// Scrolls the screen up so that `rows` rows from `top` fit on it; where they start now.
fn make_room(out: &mut impl Write, top: u16, rows: u16, height: u16) -> std::io::Result<u16> {
    let rows = rows.min(height);
    let over = (top + rows).saturating_sub(height);
    if over > 0 {
        // A line feed on the last row scrolls the screen (raw mode: no carriage return).
        crossterm::queue!(out, MoveTo(0, height.saturating_sub(1)))?;
        out.write_all("\n".repeat(usize::from(over)).as_bytes())?;
    }
    Ok(top - over)
}

impl Drop for Ui {
    fn drop(&mut self) {
        if !self.restored {
            let _ = self.terminal.show_cursor();
            restore();
        }
    }
}

/// Palette-styled lines as the terminal rows they take in the scrollback, `width`
/// columns wide (styles dropped without `color`).
#[must_use]
pub fn scrollback_rows(lines: &[String], width: u16, color: bool) -> Vec<Line<'static>> {
    lines
        .iter()
        .flat_map(|l| {
            let line = ansi::to_line(l);
            let line = if color {
                line
            } else {
                Line::from(ansi::plain_text(&line))
            };
            ansi::wrap(&line, width)
        })
        .collect()
}

fn restore() {
    let _ = crossterm::execute!(std::io::stdout(), DisableBracketedPaste);
    let _ = disable_raw_mode();
}
