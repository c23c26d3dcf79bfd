//! A one-line status on stderr while the REPL waits: `⠹ Thinking… 3s`, or a retry
//! countdown. Redrawn in place with `\r` by a small task; erased before anything else
//! is printed. Off when stderr is not a terminal.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(100);
/// Longest retry reason shown, so the status stays on one terminal line.
const MAX_REASON_CHARS: usize = 40;

/// What the status line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Waiting for the model or a tool since `since`: `Thinking…`, `Running Bash…`.
    Working { label: String, since: Instant },
    /// Waiting to retry a failed request.
    Retry {
        until: Instant,
        attempt: u32,
        max_retries: u32,
        reason: String,
    },
}

impl Status {
    #[must_use]
    pub fn working(label: impl Into<String>) -> Self {
        Self::Working {
            label: label.into(),
            since: Instant::now(),
        }
    }

    /// The line for `frame` at `now`.
    #[must_use]
    pub fn line(&self, now: Instant, frame: usize) -> String {
        let spin = FRAMES[frame % FRAMES.len()];
        match self {
            Self::Working { label, since } => {
                let secs = now.saturating_duration_since(*since).as_secs();
                format!("{spin} {label}… {secs}s · Ctrl+C to interrupt")
            }
            Self::Retry {
                until,
                attempt,
                max_retries,
                reason,
            } => {
                let left = until.saturating_duration_since(now);
                // Round up: "retrying in 1 s" until the wait is really over.
                let secs = left.as_millis().div_ceil(1000);
                let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
                format!("{spin} {reason} · retrying in {secs} s (attempt {attempt}/{max_retries})")
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    status: Option<Status>,
    /// A line is on screen and must be erased before other output.
    drawn: bool,
    frame: usize,
    /// While a question is asked on the terminal nothing is drawn.
    suspended: bool,
}

/// The REPL's status line; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Spinner {
    state: Option<Arc<Mutex<State>>>,
}

impl Spinner {
    /// A spinner drawn on stderr when `enabled`; starts its redraw task on the current
    /// tokio runtime.
    #[must_use]
    pub fn new(enabled: bool) -> Self {
        if !enabled {
            return Self { state: None };
        }
        let state = Arc::new(Mutex::new(State::default()));
        let weak = Arc::downgrade(&state);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            loop {
                tick.tick().await;
                let Some(state) = weak.upgrade() else { return };
                let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
                s.frame = s.frame.wrapping_add(1);
                if s.suspended {
                    continue;
                }
                if let Some(status) = &s.status {
                    let line = status.line(Instant::now(), s.frame);
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                    s.drawn = true;
                }
            }
        });
        Self { state: Some(state) }
    }

    /// Whether anything is drawn at all (stderr is a terminal).
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.state.is_some()
    }

    /// Shows `status` from the next tick on.
    pub fn show(&self, status: Status) {
        if let Some(state) = &self.state {
            state.lock().unwrap_or_else(PoisonError::into_inner).status = Some(status);
        }
    }

    /// Stops showing anything and erases the line.
    pub fn clear(&self) {
        if let Some(state) = &self.state {
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            s.status = None;
            erase(&mut s);
        }
    }

    /// Erases the line and draws nothing until [`Spinner::resume`] (a question is on
    /// the terminal).
    pub fn suspend(&self) {
        if let Some(state) = &self.state {
            let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
            s.suspended = true;
            erase(&mut s);
        }
    }

    pub fn resume(&self) {
        if let Some(state) = &self.state {
            state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .suspended = false;
        }
    }
}

fn erase(s: &mut State) {
    if std::mem::take(&mut s.drawn) {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_status_shows_elapsed_seconds() {
        let since = Instant::now();
        let status = Status::Working {
            label: "Thinking".to_owned(),
            since,
        };
        assert_eq!(
            status.line(since + Duration::from_millis(3400), 2),
            "⠹ Thinking… 3s · Ctrl+C to interrupt"
        );
    }

    #[test]
    fn retry_status_counts_down_whole_seconds() {
        let now = Instant::now();
        let status = Status::Retry {
            until: now + Duration::from_millis(1500),
            attempt: 2,
            max_retries: 10,
            reason: "API overloaded (529)".to_owned(),
        };
        assert_eq!(
            status.line(now, 0),
            "⠋ API overloaded (529) · retrying in 2 s (attempt 2/10)"
        );
        assert_eq!(
            status.line(now + Duration::from_millis(600), 0),
            "⠋ API overloaded (529) · retrying in 1 s (attempt 2/10)"
        );
    }
}
