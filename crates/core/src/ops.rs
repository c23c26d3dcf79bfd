//! The session's interface: operations in, events out.
//!
//! A front-end changes the session only by submitting an [`Op`], and hears back only
//! [`Event`]s. [`Session::submit`] takes every operation and streams the events it
//! causes: a user message streams its turn (the engine's events, with the permission
//! questions its tool calls ask merged in as [`Event::Question`]). While that stream
//! runs, the operations a turn allows — interrupt, set the mode, answer a question —
//! go through a [`Control`] ([`Session::control`]), which any task may hold; the
//! others wait for the turn to end ([`Control::submit`] hands them back).
//!
//! [`Session::submit`]: crate::session::Session::submit
//! [`Session::control`]: crate::session::Session::control

use std::sync::Arc;

use gyre_loop::{CompactionError, CompactionOutcome, EngineEvent, InterruptHandle};
use gyre_protocol::ContentBlock;

use crate::approvals::{Approval, ApprovalRequest, ApprovalRequests, Approvals};
use crate::checkpoint::{Checkpoints, FilesRewound, RewindError};
use crate::gate::{Gate, GateError};

/// What a front-end asks of the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A user turn: the UserPromptSubmit hooks, then the agent loop. The prompt is a
    /// checkpoint.
    UserMessage(Vec<ContentBlock>),
    /// [`Op::UserMessage`] whose transcript line and checkpoint take `uuid`: the id a
    /// client gave the message (the SDK's `uuid`), which it may rewind to later.
    UserMessageWithId {
        content: Vec<ContentBlock>,
        uuid: String,
    },
    /// Goes back to before the prompt `to` (a checkpoint's uuid): the files the session
    /// wrote since, the conversation, or both (`/rewind`, Esc Esc, the SDK's
    /// `rewind_files`). With `dry_run`, only says what the files would need. A rewind
    /// of the code alone is allowed while a turn runs.
    Rewind {
        to: String,
        mode: RewindMode,
        dry_run: bool,
    },
    /// Stops the turn in flight (Ctrl+C, Esc, the SDK's `interrupt`).
    Interrupt,
    /// Another permission mode, by its Claude Code name (Shift+Tab,
    /// `set_permission_mode`); the session's "always" answers are kept.
    SetMode(String),
    /// Another model for the following turns; `None` goes back to the session's own.
    SetModel(Option<String>),
    /// The answer to [`Event::Question`] `id`.
    Answer { id: u64, approval: Approval },
    /// Compacts the conversation now (`/compact [instructions]`).
    Compact { instructions: Option<String> },
    /// Starts the conversation afresh (`/clear`): SessionEnd hooks (`clear`), and the
    /// next prompt runs SessionStart hooks (`clear`).
    Clear,
    /// Runs the user's own shell command (`!cmd` at the prompt) without a question:
    /// its output is shown, and goes to the model with the next message.
    Shell(String),
    /// The session is over: its SessionEnd hooks run with `reason`
    /// (`prompt_input_exit` when the user quit the REPL, `other` otherwise).
    End { reason: String },
}

/// What the session tells a front-end.
#[derive(Debug)]
pub enum Event {
    /// The turn's events as the agent loop emits them: messages, raw stream events,
    /// tool calls, retries, compaction, sub-agents, the result.
    Engine(EngineEvent),
    /// A permission question; the call waits for [`Op::Answer`].
    Question(ApprovalRequest),
    /// A UserPromptSubmit hook refused the message (the reason); no turn ran.
    PromptBlocked(String),
    /// The permission mode now in force, or why it could not change.
    ModeChanged(Result<String, GateError>),
    /// The model the following turns use.
    ModelChanged(String),
    /// `Op::Compact`: what compaction did (`None`: nothing to compact), or why it failed.
    Compacted(Result<Option<CompactionOutcome>, CompactionError>),
    /// The conversation was cleared.
    Cleared,
    /// `Op::Shell`: the command and what it printed.
    ShellRan {
        command: String,
        output: crate::expansion::ShellOutput,
    },
    /// `Op::Rewind`: what it did, or why it could not.
    Rewound(Result<Rewound, RewindError>),
    /// `Op::End`: the SessionEnd hooks ran.
    Ended,
}

/// What a rewind takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RewindMode {
    /// The files Edit and Write changed since the prompt.
    Code,
    /// The conversation from the prompt on (the prompt comes back to the input).
    Conversation,
    /// Both.
    Both,
}

impl RewindMode {
    pub(crate) fn code(self) -> bool {
        matches!(self, Self::Code | Self::Both)
    }

    pub(crate) fn conversation(self) -> bool {
        matches!(self, Self::Conversation | Self::Both)
    }
}

/// What [`Op::Rewind`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rewound {
    /// The files put back (code rewinds; `None` for the conversation alone).
    pub files: Option<FilesRewound>,
    /// The prompt's text, taken out of the conversation (conversation rewinds), for the
    /// input box.
    pub prompt: Option<String>,
}

/// A prompt a rewind can go back to, oldest first ([`Session::rewind_points`]).
///
/// [`Session::rewind_points`]: crate::session::Session::rewind_points
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindPoint {
    /// The checkpoint's id: the prompt's uuid.
    pub uuid: String,
    /// What the user typed.
    pub text: String,
    /// Whether the files can go back (the session kept a checkpoint there).
    pub code: bool,
}

/// The operations a running turn allows, from any task.
#[derive(Debug, Clone)]
pub struct Control {
    gate: Arc<Gate>,
    approvals: Option<Arc<Approvals>>,
    interrupt: InterruptHandle,
    checkpoints: Checkpointing,
}

/// Whether the session keeps checkpoints: its store, or why not.
#[derive(Debug, Clone)]
pub(crate) enum Checkpointing {
    On(Arc<Checkpoints>),
    Off(String),
}

impl Checkpointing {
    /// Rewinds the files to checkpoint `to`.
    pub(crate) fn rewind_files(
        &self,
        to: &str,
        dry_run: bool,
    ) -> Result<FilesRewound, RewindError> {
        match self {
            Self::On(store) => store.rewind(to, dry_run),
            Self::Off(why) => Err(RewindError::Disabled(why.clone())),
        }
    }
}

impl Control {
    pub(crate) fn new(
        gate: Arc<Gate>,
        approvals: Option<Arc<Approvals>>,
        interrupt: InterruptHandle,
        checkpoints: Checkpointing,
    ) -> Self {
        Self {
            gate,
            approvals,
            interrupt,
            checkpoints,
        }
    }

    /// Applies `op` now if a turn allows it (interrupt, set the mode, answer, rewind the
    /// code) and
    /// returns the event it causes, if any; any other operation comes back as `Err` to
    /// be submitted to the session when the turn has ended.
    ///
    /// # Errors
    /// `op` itself, when it needs the turn to end first.
    pub fn submit(&self, op: Op) -> Result<Option<Event>, Op> {
        match op {
            Op::Interrupt => {
                self.interrupt.interrupt();
                Ok(None)
            }
            Op::SetMode(name) => Ok(Some(Event::ModeChanged(self.set_mode(&name)))),
            Op::Answer { id, approval } => {
                // A question no longer waiting (withdrawn, answered) takes no answer.
                if let Some(approvals) = &self.approvals {
                    approvals.answer(id, approval);
                }
                Ok(None)
            }
            Op::Rewind {
                to,
                mode: RewindMode::Code,
                dry_run,
            } => Ok(Some(Event::Rewound(
                self.checkpoints
                    .rewind_files(&to, dry_run)
                    .map(|files| Rewound {
                        files: Some(files),
                        prompt: None,
                    }),
            ))),
            other => Err(other),
        }
    }

    /// [`Op::SetMode`], with its outcome: the mode now in force.
    ///
    /// # Errors
    /// An unknown mode, or bypassPermissions in a session not started to allow it.
    pub fn set_mode(&self, name: &str) -> Result<String, GateError> {
        self.gate.set_mode(name)?;
        Ok(self.gate.mode_name())
    }

    /// The permission mode now in force (ExitPlanMode may have switched it).
    #[must_use]
    pub fn mode_name(&self) -> String {
        self.gate.mode_name()
    }
}

/// The parts of a session [`Session::submit`] works on.
#[derive(Debug)]
pub(crate) struct Asking {
    pub approvals: Option<Arc<Approvals>>,
    /// Where the gate's questions arrive; `None` until [`Session::ask_questions`].
    pub questions: Option<ApprovalRequests>,
    /// The model `Op::SetModel(None)` goes back to.
    pub default_model: String,
}

impl Asking {
    pub fn new(default_model: String) -> Self {
        Self {
            approvals: None,
            questions: None,
            default_model,
        }
    }
}

/// The next question, or never when the session does not ask.
pub(crate) async fn next_question(questions: &mut Option<ApprovalRequests>) -> ApprovalRequest {
    if let Some(rx) = questions
        && let Some(request) = rx.recv().await
    {
        return request;
    }
    std::future::pending().await
}
