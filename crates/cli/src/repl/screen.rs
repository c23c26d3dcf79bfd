//! Where the REPL's lines go: stdout, after erasing the spinner. While a permission
//! question waits for its answer, lines are held back and printed after it, so the
//! question stays the last thing on screen.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use super::spinner::Spinner;

/// Shared by the turn's renderer and the permission prompt; cheap to clone.
#[derive(Debug, Clone)]
pub struct Screen {
    spinner: Spinner,
    /// `Some` while a question is on screen: the lines to print once it is answered.
    held: Arc<Mutex<Option<Vec<String>>>>,
}

impl Screen {
    #[must_use]
    pub fn new(spinner: Spinner) -> Self {
        Self {
            spinner,
            held: Arc::new(Mutex::new(None)),
        }
    }

    #[must_use]
    pub fn spinner(&self) -> &Spinner {
        &self.spinner
    }

    /// Prints one line (or holds it while a question is asked).
    ///
    /// # Errors
    /// When stdout cannot be written.
    pub fn line(&self, text: &str) -> std::io::Result<()> {
        if let Some(held) = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            held.push(text.to_owned());
            return Ok(());
        }
        self.spinner.clear();
        let mut out = std::io::stdout().lock();
        writeln!(out, "{text}")?;
        out.flush()
    }

    /// Holds every line from now on, and the spinner, until [`Screen::release`].
    pub fn hold(&self) {
        self.spinner.suspend();
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.get_or_insert_with(Vec::new);
    }

    /// Prints what was held and goes back to printing directly.
    ///
    /// # Errors
    /// When stdout cannot be written.
    pub fn release(&self) -> std::io::Result<()> {
        let held = self
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.spinner.resume();
        for line in held.unwrap_or_default() {
            self.line(&line)?;
        }
        Ok(())
    }
}
