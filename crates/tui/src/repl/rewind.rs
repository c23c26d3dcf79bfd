//! `/rewind` (and Esc Esc at an empty input box): a list of the conversation's prompts
//! in place of the input box; choosing one asks what to take back — the code and the
//! conversation, the conversation, or the code — saying how many files would change.
//! The rewind itself is the session's `Op::Rewind`.

use crossterm::event::{KeyCode, KeyEvent};
use gyre_core::checkpoint::FilesRewound;
use gyre_core::ops::{RewindMode, RewindPoint};

use super::view::ShellsView;

/// What a rewind never undoes, said wherever one is offered or done.
pub const BASH_NOTE: &str = "Changes made by Bash commands are not undone.";

/// The answers of the second step, in the order shown.
const MODES: [(RewindMode, &str); 3] = [
    (RewindMode::Both, "Restore code and conversation"),
    (RewindMode::Conversation, "Restore conversation"),
    (RewindMode::Code, "Restore code"),
];

/// Where the picker is.
#[derive(Debug)]
enum Step {
    /// Choosing the prompt.
    Prompt,
    /// Choosing what to take back to before `points[at]`; `files` what the code would
    /// need (a dry run), or why it cannot.
    Mode {
        at: usize,
        files: Result<FilesRewound, String>,
    },
}

/// What a key did.
#[derive(Debug, PartialEq, Eq)]
pub enum Picked {
    /// Nothing to act on yet.
    Nothing,
    /// A prompt was chosen: the front-end dry-runs its code rewind
    /// ([`RewindPicker::show_files`]).
    Prompt(String),
    /// Closed without a rewind.
    Closed,
    /// Rewind to before `uuid`.
    Rewind {
        uuid: String,
        text: String,
        mode: RewindMode,
    },
}

/// See the module docs.
#[derive(Debug)]
pub struct RewindPicker {
    points: Vec<RewindPoint>,
    step: Step,
    selected: usize,
}

impl RewindPicker {
    /// A picker over `points` (oldest first), the newest selected; `None` when there
    /// is no prompt to go back to.
    #[must_use]
    pub fn open(points: Vec<RewindPoint>) -> Option<Self> {
        let selected = points.len().checked_sub(1)?;
        Some(Self {
            points,
            step: Step::Prompt,
            selected,
        })
    }

    /// What the chosen prompt's code rewind would change (or why it cannot).
    pub fn show_files(&mut self, files: Result<FilesRewound, String>) {
        if let Step::Prompt = self.step {
            self.step = Step::Mode {
                at: self.selected,
                files,
            };
            self.selected = 0;
        }
    }

    /// ↑/↓ select, Enter chooses, Esc goes back a step (or closes).
    pub fn key(&mut self, key: &KeyEvent) -> Picked {
        let rows = match &self.step {
            Step::Prompt => self.points.len(),
            Step::Mode { .. } => MODES.len(),
        };
        match key.code {
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected = (self.selected + 1).min(rows.saturating_sub(1)),
            KeyCode::Esc => match self.step {
                Step::Prompt => return Picked::Closed,
                Step::Mode { at, .. } => {
                    self.step = Step::Prompt;
                    self.selected = at;
                }
            },
            KeyCode::Enter => {
                return match &self.step {
                    Step::Prompt => Picked::Prompt(self.points[self.selected].uuid.clone()),
                    Step::Mode { at, .. } => {
                        let point = &self.points[*at];
                        Picked::Rewind {
                            uuid: point.uuid.clone(),
                            text: point.text.clone(),
                            mode: MODES[self.selected].0,
                        }
                    }
                };
            }
            _ => {}
        }
        Picked::Nothing
    }

    /// The list as it is drawn in place of the input box.
    #[must_use]
    pub fn panel(&self) -> ShellsView {
        match &self.step {
            Step::Prompt => ShellsView {
                rows: self.points.iter().map(|p| one_line(&p.text, 70)).collect(),
                selected: self.selected,
                note: None,
                title: Some(" Rewind: go back to before which prompt? ".to_owned()),
                keys: Some("↑/↓ select · Enter chooses · Esc closes".to_owned()),
            },
            Step::Mode { at, files } => {
                let files = match files {
                    Ok(files) => files_summary(files, false),
                    Err(why) => format!("The code cannot go back: {why}"),
                };
                ShellsView {
                    rows: MODES.iter().map(|(_, label)| (*label).to_owned()).collect(),
                    selected: self.selected,
                    note: Some(format!("{files} {BASH_NOTE}")),
                    title: Some(format!(
                        " Rewind to before: {} ",
                        one_line(&self.points[*at].text, 50)
                    )),
                    keys: Some("↑/↓ select · Enter rewinds · Esc goes back".to_owned()),
                }
            }
        }
    }
}

/// `2 files would change (+3 -1).` / `2 files restored (+3 -1).`
#[must_use]
pub fn files_summary(files: &FilesRewound, done: bool) -> String {
    let n = files.files_changed.len();
    if n == 0 {
        return if done {
            "No file needed restoring.".to_owned()
        } else {
            "No file written since would change.".to_owned()
        };
    }
    let plural = if n == 1 { "" } else { "s" };
    let what = if done { "restored" } else { "would change" };
    format!(
        "{n} file{plural} {what} (+{} -{}).",
        files.insertions, files.deletions
    )
}

/// The first line of `text`, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    gyre_term::tool_line::shorten(first, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn point(uuid: &str, text: &str) -> RewindPoint {
        RewindPoint {
            uuid: uuid.into(),
            text: text.into(),
            code: true,
        }
    }

    #[test]
    fn choosing_a_prompt_then_what_to_take_back() {
        assert!(RewindPicker::open(Vec::new()).is_none());
        let mut picker =
            RewindPicker::open(vec![point("u1", "first"), point("u2", "second")]).unwrap();
        assert_eq!(picker.panel().selected, 1, "the newest prompt first");
        picker.key(&key(KeyCode::Up));
        assert_eq!(
            picker.key(&key(KeyCode::Enter)),
            Picked::Prompt("u1".into())
        );
        picker.show_files(Ok(FilesRewound::default()));
        let panel = picker.panel();
        assert_eq!(panel.rows.len(), 3);
        assert!(panel.note.unwrap().contains(BASH_NOTE));
        picker.key(&key(KeyCode::Down));
        picker.key(&key(KeyCode::Down));
        assert_eq!(
            picker.key(&key(KeyCode::Enter)),
            Picked::Rewind {
                uuid: "u1".into(),
                text: "first".into(),
                mode: RewindMode::Code
            }
        );
        picker.key(&key(KeyCode::Esc));
        assert_eq!(picker.panel().rows, ["first", "second"]);
        assert_eq!(picker.key(&key(KeyCode::Esc)), Picked::Closed);
    }
}
