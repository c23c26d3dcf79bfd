//! What the REPL is waiting for, as one spinner line in the viewport: `⠹ Thinking… 3s`,
//! or a retry countdown with the whole reason.

use std::time::{Duration, Instant};

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// How often the spinner and countdowns move.
pub const TICK: Duration = Duration::from_millis(100);

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
        /// One of the few waits before giving up on an unreachable API: the line says
        /// that stopping loses nothing.
        stop_hint: bool,
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
                format!("{spin} {label}… {secs}s · esc to interrupt")
            }
            Self::Retry {
                until,
                attempt,
                max_retries,
                reason,
                stop_hint,
            } => {
                let left = until.saturating_duration_since(now);
                // Round up: "retrying in 1 s" until the wait is really over.
                let secs = left.as_millis().div_ceil(1000);
                let hint = if *stop_hint {
                    " · Ctrl+C stops, nothing is lost"
                } else {
                    ""
                };
                format!(
                    "{spin} {reason} · retrying in {secs} s (attempt {attempt}/{max_retries}){hint}"
                )
            }
        }
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
            "⠹ Thinking… 3s · esc to interrupt"
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
            stop_hint: false,
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

    #[test]
    fn an_unreachable_api_says_stopping_is_safe() {
        let now = Instant::now();
        let status = Status::Retry {
            until: now + Duration::from_millis(600),
            attempt: 1,
            max_retries: 2,
            reason: "Could not reach the API (connection refused): tcp connect error".to_owned(),
            stop_hint: true,
        };
        assert_eq!(
            status.line(now, 0),
            "⠋ Could not reach the API (connection refused): tcp connect error · retrying in 1 s \
             (attempt 1/2) · Ctrl+C stops, nothing is lost"
        );
    }
}
