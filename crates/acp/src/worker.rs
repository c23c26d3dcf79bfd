//! One ACP session: a task that owns a gyre [`Session`] and runs the prompts its
//! [`Handle`] hands it, one at a time, turning the session's events into
//! `session/update` notifications. Cancel, mode changes and permission answers go
//! straight to the session's [`Control`], so they work while a turn runs.

use std::cell::Cell;
use std::collections::HashSet;
use std::rc::Rc;

use agent_client_protocol::{self as acp, Client as _};
use futures::StreamExt;
use gyre_core::approvals::{Approval, ApprovalRequest};
use gyre_core::gate::GateError;
use gyre_core::session::Session;
use gyre_core::{Control, Event, Op};
use gyre_loop::{EngineEvent, LoopEvent, TerminalReason, TurnResult};
use gyre_protocol::{ContentBlock, Message, Role, StopReason};
use tokio::sync::{mpsc, oneshot};

use crate::Connection;
use crate::editor::Shown;
use crate::permission;
use crate::prompt::Request;
use crate::updates::{self, TODO_WRITE};

/// What a session was started with, for the `session/new` or `session/load` answer.
#[derive(Debug)]
pub struct Started {
    pub session_id: String,
    /// The permission mode in force.
    pub mode: String,
    /// The model the turns use.
    pub model: String,
    /// The conversation so far (a loaded session's), to replay.
    pub history: Vec<Message>,
    /// The slash commands: gyre's own that a prompt may be, the custom commands and
    /// the skills.
    pub commands: Vec<gyre_core::commands::CommandInfo>,
}

enum Command {
    Prompt {
        request: Request,
        reply: oneshot::Sender<Result<acp::StopReason, acp::Error>>,
    },
    SetModel {
        model: String,
        reply: oneshot::Sender<String>,
    },
    /// What the session stands at now, for an editor that opens it again.
    State { reply: oneshot::Sender<Started> },
}

/// How the agent reaches a session's task.
#[derive(Clone)]
pub struct Handle {
    commands: mpsc::UnboundedSender<Command>,
    control: Control,
    /// Whether the editor cancelled the prompt in flight.
    cancelled: Rc<Cell<bool>>,
}

fn gone() -> acp::Error {
    acp::Error::internal_error().data(serde_json::Value::String(
        "the session's task has ended".to_owned(),
    ))
}

impl Handle {
    /// Runs a prompt; its answer is the turn's stop reason.
    pub async fn prompt(&self, request: Request) -> Result<acp::StopReason, acp::Error> {
        self.cancelled.set(false);
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Prompt { request, reply })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// `session/cancel`: the turn in flight stops and its prompt answers `cancelled`.
    pub fn cancel(&self) {
        self.cancelled.set(true);
        // Interrupt is applied at once; it never comes back.
        let _ = self.control.submit(Op::Interrupt);
    }

    /// Another permission mode, now (also while a turn runs).
    ///
    /// # Errors
    /// An unknown mode, or bypassPermissions when the session may not use it.
    pub fn set_mode(&self, mode: &str) -> Result<String, GateError> {
        self.control.set_mode(mode)
    }

    /// The session as it stands (between turns: a turn in flight finishes first).
    pub async fn state(&self) -> Result<Started, acp::Error> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::State { reply })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }

    /// Another model for the next turns; the model now in use.
    pub async fn set_model(&self, model: String) -> Result<String, acp::Error> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::SetModel { model, reply })
            .map_err(|_| gone())?;
        answer.await.map_err(|_| gone())
    }
}

/// New output of a running call: its id and the text.
type Progressed = mpsc::UnboundedReceiver<(String, String)>;

/// Where a session's tools report their calls' progress, and where the session's task
/// reads it: a command's new output, shown growing in the call.
pub fn progress_sink() -> (gyre_tools::ProgressSink, Progressed) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let sink = move |id: &str, progress: gyre_tools::ToolProgress| {
        if let gyre_tools::ToolProgress::Output { text } = progress {
            // The session's task has ended: nobody shows it.
            let _ = sender.send((id.to_owned(), text));
        }
    };
    (
        gyre_tools::ProgressSink(std::sync::Arc::new(sink)),
        receiver,
    )
}

/// Starts `session`'s task; permission questions go to the editor, and the output of
/// running calls, read from `progressed`, too.
pub fn spawn(
    mut session: Session,
    conn: Connection,
    shown: Shown,
    progressed: Progressed,
) -> (Handle, Started) {
    session.ask_questions();
    let control = session.control();
    let started = state(&session, &control);
    let (commands, receiver) = mpsc::unbounded_channel();
    let handle = Handle {
        commands,
        control: control.clone(),
        cancelled: Rc::new(Cell::new(false)),
    };
    let out = Out {
        conn,
        session_id: acp::SessionId::new(started.session_id.clone()),
        shown,
    };
    let cancelled = Rc::clone(&handle.cancelled);
    tokio::task::spawn_local(run(session, receiver, out, control, cancelled, progressed));
    (handle, started)
}

/// What `session` stands at.
fn state(session: &Session, control: &Control) -> Started {
    Started {
        session_id: session.facts.session_id.clone(),
        mode: control.mode_name(),
        model: session.engine.model().to_owned(),
        history: session.engine.messages().to_vec(),
        commands: session.commands(crate::prompt::BUILTIN_COMMANDS),
    }
}

/// Where a session's notifications go.
#[derive(Clone)]
struct Out {
    conn: Connection,
    session_id: acp::SessionId,
    /// The terminal each call ran in (the editor's), kept in its final update.
    shown: Shown,
}

impl Out {
    async fn send(&self, update: acp::SessionUpdate) {
        if let Some(conn) = self.conn.get() {
            // A client that went away ends the connection, and so the task.
            let _ = conn
                .session_notification(acp::SessionNotification::new(
                    self.session_id.clone(),
                    update,
                ))
                .await;
        }
    }

    async fn say(&self, text: &str) {
        self.send(acp::SessionUpdate::AgentMessageChunk(
            acp::ContentChunk::new(acp::ContentBlock::from(text.to_owned())),
        ))
        .await;
    }
}

async fn run(
    mut session: Session,
    mut commands: mpsc::UnboundedReceiver<Command>,
    out: Out,
    control: Control,
    cancelled: Rc<Cell<bool>>,
    mut progressed: Progressed,
) {
    while let Some(command) = commands.recv().await {
        match command {
            Command::Prompt { request, reply } => {
                let stop = turn(
                    &mut session,
                    request,
                    &out,
                    &control,
                    &cancelled,
                    &mut progressed,
                )
                .await;
                let _ = reply.send(stop);
            }
            Command::SetModel { model, reply } => {
                let mut now = session.engine.model().to_owned();
                let events = session.submit(Op::SetModel(Some(model)));
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if let Event::ModelChanged(model) = event {
                        now = model;
                    }
                }
                let _ = reply.send(now);
            }
            Command::State { reply } => {
                let _ = reply.send(state(&session, &control));
            }
        }
    }
}

/// What a turn has shown so far.
#[derive(Default)]
struct Tally {
    /// Calls shown as tool calls.
    announced: HashSet<String>,
    /// TodoWrite calls, shown as the plan instead.
    plans: HashSet<String>,
    /// Why the last model response ended.
    last_stop: Option<StopReason>,
    result: Option<TurnResult>,
    /// A compaction that failed: the prompt's error.
    failure: Option<String>,
    /// The output so far of the running calls that reported some.
    output: std::collections::HashMap<String, String>,
    /// Calls whose result was shown: output reported late is not shown over it.
    finished: HashSet<String>,
}

/// The most of a running call's output shown at once: its tail.
const SHOWN_OUTPUT: usize = 64 * 1024;

impl Tally {
    async fn tool_started(&mut self, out: &Out, id: &str, name: &str, input: &serde_json::Value) {
        if name == TODO_WRITE {
            self.plans.insert(id.to_owned());
            if let Some(plan) = updates::plan(input) {
                out.send(acp::SessionUpdate::Plan(plan)).await;
            }
            return;
        }
        if self.announced.insert(id.to_owned()) {
            out.send(acp::SessionUpdate::ToolCall(updates::tool_call(
                id,
                name,
                input,
                acp::ToolCallStatus::InProgress,
            )))
            .await;
        }
    }

    /// New output of running call `id`: the call shows all its output so far (ACP's
    /// update replaces the call's content).
    async fn progress(&mut self, out: &Out, id: String, text: &str) {
        if !self.announced.contains(&id) || self.finished.contains(&id) {
            return;
        }
        // A call in the editor's terminal shows there.
        if out.shown.borrow().contains_key(&id) {
            return;
        }
        let so_far = self.output.entry(id.clone()).or_default();
        so_far.push_str(text);
        if so_far.len() > SHOWN_OUTPUT {
            let mut cut = so_far.len() - SHOWN_OUTPUT;
            while !so_far.is_char_boundary(cut) {
                cut += 1;
            }
            so_far.drain(..cut);
        }
        let update = updates::tool_output(&id, so_far);
        out.send(acp::SessionUpdate::ToolCallUpdate(update)).await;
    }

    async fn message(&mut self, out: &Out, message: &Message) {
        for block in message.content.iter() {
            match (message.role, block) {
                // A call the loop never handed to the executor (its input did not
                // parse) still shows, then fails.
                (
                    Role::Assistant,
                    ContentBlock::ToolUse {
                        id, name, input, ..
                    },
                ) => {
                    self.tool_started(out, id, name, input).await;
                }
                (
                    Role::User,
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    },
                ) if !self.plans.contains(tool_use_id) => {
                    self.output.remove(tool_use_id);
                    self.finished.insert(tool_use_id.clone());
                    let mut update = updates::tool_result(tool_use_id, content, *is_error);
                    let terminal = out.shown.borrow_mut().remove(tool_use_id);
                    if let (Some(id), Some(content)) = (terminal, update.fields.content.as_mut()) {
                        content.insert(0, acp::ToolCallContent::Terminal(acp::Terminal::new(id)));
                    }
                    out.send(acp::SessionUpdate::ToolCallUpdate(update)).await;
                }
                _ => {}
            }
        }
    }

    async fn engine(&mut self, out: &Out, event: EngineEvent) {
        match event {
            EngineEvent::Loop(LoopEvent::Stream(event)) => {
                if let Some(update) = updates::stream_chunk(&event) {
                    out.send(update).await;
                }
            }
            EngineEvent::Loop(LoopEvent::ToolStarted { id, name, input }) => {
                self.tool_started(out, &id, &name, &input).await;
            }
            EngineEvent::Loop(LoopEvent::Usage { stop_reason, .. }) => {
                self.last_stop = stop_reason;
            }
            EngineEvent::Message { message, .. } => self.message(out, &message).await,
            EngineEvent::Result(result) => self.result = Some(result),
            // Retries, compaction, denials (the call's result says it) and sub-agents'
            // own messages are not shown.
            EngineEvent::Loop(_)
            | EngineEvent::Subagent { .. }
            | EngineEvent::SubagentProgress(_) => {}
        }
    }

    /// How the prompt ended, as ACP says it.
    fn stop_reason(self, cancelled: bool) -> Result<acp::StopReason, acp::Error> {
        if let Some(why) = self.failure {
            return Err(acp::Error::internal_error().data(serde_json::Value::String(why)));
        }
        if cancelled {
            return Ok(acp::StopReason::Cancelled);
        }
        let Some(result) = self.result else {
            return Ok(acp::StopReason::EndTurn);
        };
        match result.terminal.reason {
            TerminalReason::AbortedStreaming | TerminalReason::AbortedTools => {
                return Ok(acp::StopReason::Cancelled);
            }
            TerminalReason::MaxTurns => return Ok(acp::StopReason::MaxTurnRequests),
            _ => {}
        }
        match self.last_stop {
            Some(StopReason::Refusal) => return Ok(acp::StopReason::Refusal),
            Some(StopReason::MaxTokens) => return Ok(acp::StopReason::MaxTokens),
            _ => {}
        }
        if result.is_error {
            let why = if result.errors.is_empty() {
                result.result
            } else {
                result.errors.join("; ")
            };
            return Err(acp::Error::internal_error().data(serde_json::Value::String(why)));
        }
        Ok(acp::StopReason::EndTurn)
    }
}

/// Asks the editor about `question` beside the turn, and answers the session.
fn ask(question: ApprovalRequest, out: &Out, control: &Control) {
    let (out, control) = (out.clone(), control.clone());
    tokio::task::spawn_local(async move {
        let Some(conn) = out.conn.get() else {
            return;
        };
        let request = permission::request(&out.session_id, &question);
        let outcome = tokio::select! {
            outcome = conn.request_permission(request) => outcome,
            // The call stopped waiting (the turn was interrupted).
            () = question.withdrawn.cancelled() => return,
        };
        let approval = match outcome {
            Ok(response) => permission::approval(&question, &response.outcome),
            Err(_) => Approval::deny(),
        };
        let _ = control.submit(Op::Answer {
            id: question.id,
            approval,
        });
    });
}

async fn turn(
    session: &mut Session,
    request: Request,
    out: &Out,
    control: &Control,
    cancelled: &Cell<bool>,
    progressed: &mut Progressed,
) -> Result<acp::StopReason, acp::Error> {
    // What an earlier turn's calls reported after they ended is not shown.
    while progressed.try_recv().is_ok() {}
    let op = match request {
        Request::Turn(blocks) => Op::UserMessage(blocks),
        Request::Compact(instructions) => Op::Compact { instructions },
        Request::Clear => Op::Clear,
    };
    let mode_before = control.mode_name();
    let mut tally = Tally::default();
    {
        let events = session.submit(op);
        futures::pin_mut!(events);
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                Some((id, text)) = progressed.recv() => {
                    tally.progress(out, id, &text).await;
                    continue;
                }
            };
            let Some(event) = event else { break };
            match event {
                Event::Engine(event) => tally.engine(out, event).await,
                Event::Question(question) => ask(question, out, control),
                Event::PromptBlocked(reason) => {
                    out.say(&format!("The prompt was blocked by a hook: {reason}"))
                        .await;
                }
                Event::Compacted(Ok(Some(outcome))) => {
                    out.say(&format!(
                        "Compacted the conversation ({} tokens before).",
                        outcome.pre_tokens
                    ))
                    .await;
                }
                Event::Compacted(Ok(None)) => out.say("Nothing to compact yet.").await,
                Event::Compacted(Err(e)) => tally.failure = Some(e.to_string()),
                Event::Cleared => out.say("Started the conversation afresh.").await,
                // ACP prompts run no shell of the user's, and send no rewinds.
                Event::ShellRan { .. }
                | Event::ModeChanged(_)
                | Event::ModelChanged(_)
                | Event::Rewound(_)
                | Event::Ended => {}
            }
        }
    }
    // ExitPlanMode may have switched the mode.
    let mode_now = control.mode_name();
    if mode_now != mode_before {
        out.send(acp::SessionUpdate::CurrentModeUpdate(
            acp::CurrentModeUpdate::new(mode_now),
        ))
        .await;
    }
    tally.stop_reason(cancelled.get())
}
