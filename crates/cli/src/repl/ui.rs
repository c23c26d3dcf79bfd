//! The terminal: raw mode, bracketed paste and ratatui's inline viewport at the
//! bottom of the normal scrollback (no alternate screen, so the session stays in the
//! terminal's history after gyre exits). Finished lines go above the viewport with
//! `insert_before`; the viewport is redrawn in place.

use std::io::{Stdout, Write};

use anyhow::{Context, Result};
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{disable_raw_mode, enable_raw_mode};
use ratatui::backend::CrosstermBackend;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::ansi;
use super::view::{self, VIEWPORT_ROWS, View};

/// Rows pushed into the scrollback at once (insert_before draws them in one buffer).
const INSERT_CHUNK: usize = 16;

pub struct Ui {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    color: bool,
    restored: bool,
}

impl Ui {
    /// Takes the terminal: raw mode, bracketed paste, a viewport under the cursor.
    ///
    /// # Errors
    /// When the terminal cannot be set up (not a terminal, no size).
    pub fn start(color: bool) -> Result<Self> {
        enable_raw_mode().context("could not switch the terminal to raw mode")?;
        let mut stdout = std::io::stdout();
        crossterm::execute!(stdout, EnableBracketedPaste)
            .context("could not enable bracketed paste")?;
        let rows = crossterm::terminal::size().map_or(VIEWPORT_ROWS, |(_, h)| h.min(VIEWPORT_ROWS));
        let terminal = Terminal::with_options(
            CrosstermBackend::new(stdout),
            TerminalOptions {
                viewport: Viewport::Inline(rows),
            },
        );
        match terminal {
            Ok(terminal) => Ok(Self {
                terminal,
                color,
                restored: false,
            }),
            Err(e) => {
                restore();
                Err(e).context("could not set up the terminal UI")
            }
        }
    }

    /// Puts Palette-styled lines into the scrollback above the viewport.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn print(&mut self, lines: &[String]) -> Result<()> {
        if lines.is_empty() {
            return Ok(());
        }
        let width = self.terminal.size()?.width;
        let rows = scrollback_rows(lines, width, self.color);
        for chunk in rows.chunks(INSERT_CHUNK) {
            let height = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            let chunk = chunk.to_vec();
            self.terminal.insert_before(height, move |buf| {
                Paragraph::new(chunk).render(buf.area, buf);
            })?;
        }
        Ok(())
    }

    /// Redraws the viewport.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn draw(&mut self, view: &View<'_>) -> Result<()> {
        self.terminal.draw(|frame| {
            let area = frame.area();
            if let Some((x, y)) = view::render(view, area, frame.buffer_mut()) {
                frame.set_cursor_position((x, y));
            }
        })?;
        Ok(())
    }

    /// Erases the viewport and gives the terminal back, the cursor under the
    /// scrollback, as a shell expects it.
    ///
    /// # Errors
    /// When the terminal cannot be written.
    pub fn finish(&mut self) -> Result<()> {
        if self.restored {
            return Ok(());
        }
        self.terminal.clear()?;
        self.terminal.show_cursor()?;
        self.restored = true;
        restore();
        std::io::stdout().flush()?;
        Ok(())
    }
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
