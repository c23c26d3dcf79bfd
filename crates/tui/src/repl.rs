//! The interactive session as an inline terminal UI (ratatui + crossterm, in the
//! normal scrollback): finished output goes into the terminal's history, and a small
//! viewport under it shows the answer line being streamed, what gyre waits for, the
//! input box (or a permission question) and a status line.
//!
//! Keys: Enter sends, Ctrl+J / Alt+Enter (or `\` then Enter) start a new line, ↑/↓
//! browse the history, Ctrl+R searches it, Tab completes a slash command, Esc or Ctrl+C
//! interrupt a turn, a second Ctrl+C quits, Ctrl+D at an empty box quits, Ctrl+O shows
//! a folded Bash output whole.

mod commands;
mod diff;
mod editor;
mod markdown;
mod question;
mod reports;
mod rewind;
mod slash;
mod spinner;
mod style;
mod subagent;
mod text;
mod turn;
mod ui;
mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use futures::StreamExt;
use gyre_loop::{EngineEvent, JsonlTranscript, LoopEvent};
use gyre_protocol::ContentBlock;
use gyre_tools::background::ShellTable;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use tokio::sync::mpsc;

use self::editor::{Editor, HistoryFile};
use self::question::Question;
use self::slash::{HELP, NO_SHELLS, SlashCommand, cost_report, shell_row};
use self::spinner::{Status, TICK};
use self::style::{Palette, PaletteSpans};
use self::turn::{Folded, TurnView, expanded};
use self::ui::Ui;
use self::view::{Choice, PlanChoice, QuestionView, ShellsView, StatusLine, View};
use gyre_core::approvals::Approval;
use gyre_core::facts::SessionFacts;
use gyre_core::session::{self, Session};
use gyre_core::settings::Settings;
use gyre_core::{Control, Event as SessionEvent, Op};
use gyre_core::{CoreError, Environment, SessionOptions};

/// Lines of a command shown in its question; a longer one goes above the question.
const MAX_QUESTION_DETAILS: usize = 6;

/// Folded Bash outputs Ctrl+O can still show.
const MAX_FOLDED: usize = 20;

/// How often an open `/bashes` list is drawn again, so its runtimes count.
const SHELLS_REFRESH: Duration = Duration::from_secs(1);

/// A second Ctrl+C within this long quits.
const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);

/// How long an answer waits for the user before Notification hooks hear `idle_prompt`
/// (the reference's 60 s).
const IDLE_NOTIFICATION: Duration = Duration::from_secs(60);

/// Why the interactive session stopped before its user ended it.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    /// stdout is not a terminal.
    #[error("the interactive UI needs a terminal on stdout; for scripts use gyre -p \"<prompt>\"")]
    NotATerminal,
    /// The terminal could not be set up, read or drawn on.
    #[error("{what}: {source}")]
    Terminal {
        what: &'static str,
        source: std::io::Error,
    },
    /// The terminal could not be written.
    #[error("could not draw on the terminal: {0}")]
    Draw(#[from] std::io::Error),
    /// The session could not be built.
    #[error(transparent)]
    Session(#[from] CoreError),
}

impl TuiError {
    pub(crate) fn terminal(what: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Terminal { what, source }
    }
}

type Result<T, E = TuiError> = std::result::Result<T, E>;

/// Runs the REPL until `/exit`, `exit`, Ctrl+D or a double Ctrl+C. `first`, a prompt
/// given on the command line, is sent first.
///
/// # Errors
/// When the session cannot be built or the terminal cannot be used.
pub async fn run(
    options: &SessionOptions,
    first: Option<String>,
    cwd: &Path,
    settings: &Settings,
    env: &Environment,
) -> Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        return Err(TuiError::NotATerminal);
    }
    let palette = Palette::detect();
    let home = env.gyre_home();
    let history = HistoryFile::new(home.join("history"));
    let (verdicts_tx, verdicts) = mpsc::unbounded_channel();
    let session = open_session(options, cwd, settings, env, &verdicts_tx).await?;
    let resumed = !session.engine.messages().is_empty();
    let status = StatusLine {
        model: session.facts.model(),
        mode: session.facts.permission_mode.clone(),
        context: None,
        cost_usd: session.facts.meter.cost_usd(),
        shells: 0,
    };
    let front = Front {
        ui: Ui::start(
            palette.color(),
            env.var("GYRE_FRAME_LOG")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        )?,
        editor: {
            let mut editor = Editor::new(history.load());
            editor.add_commands(session.commands(&[]).into_iter().map(|c| c.name));
            editor
        },
        keys: EventStream::new(),
        verdicts,
        palette,
        cwd: cwd.to_path_buf(),
        home: home.clone(),
        question: None,
        status,
        hint: None,
        last_ctrl_c: None,
        folded: Vec::new(),
        queued: None,
        frame: 0,
        control: session.control(),
        shells: session.engine.tools().background_shells().cloned(),
        shells_view: None,
        rewind: None,
        last_esc: None,
        stop_on_denial: false,
    };
    let mut repl = Repl {
        session,
        front,
        env: env.clone(),
        options: options.clone(),
        settings: settings.clone(),
        verdicts_tx,
        started: Instant::now(),
        api_ms: 0,
        sent: false,
        idle_after: env
            .var("GYRE_IDLE_NOTIFICATION_MS")
            .and_then(|ms| ms.parse().ok())
            .map_or(IDLE_NOTIFICATION, Duration::from_millis),
        idle_notified: false,
    };
    let outcome = repl.run(first).await;
    let finished = repl.front.ui.finish();
    // SessionEnd hooks: the user left the prompt.
    repl.session
        .submit(Op::End {
            reason: "prompt_input_exit".to_owned(),
        })
        .for_each(|_| async {})
        .await;
    // A history that cannot be saved is not worth failing the session for.
    let _ = history.save(repl.front.editor.history());
    if !repl.sent && !resumed {
        discard_empty_transcript(&home, cwd, &repl.session.facts);
    }
    outcome?;
    finished?;
    Ok(ExitCode::SUCCESS)
}

/// Starts the MCP servers and builds the session `options` ask for, its permission
/// questions coming as events the UI loop answers by id and auto mode's verdicts going
/// to `verdicts` (the scrollback, not stderr under the UI).
async fn open_session(
    options: &SessionOptions,
    cwd: &Path,
    settings: &Settings,
    env: &Environment,
    verdicts: &mpsc::UnboundedSender<String>,
) -> Result<Session> {
    let home = env.gyre_home();
    let mcp = gyre_core::mcp_config::start(options, cwd, &home, env).await?;
    let mut session = session::build(options, cwd, settings, true, env, mcp)?;
    session.ask_questions();
    let verdicts = verdicts.clone();
    session.gate.report_verdicts_to(Arc::new(move |line: &str| {
        let _ = verdicts.send(line.to_owned());
    }));
    Ok(session)
}

/// Quitting before anything was sent leaves no empty session behind.
fn discard_empty_transcript(home: &Path, cwd: &Path, facts: &SessionFacts) {
    let path = JsonlTranscript::path_for(home, cwd, &facts.session_id);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() == 0) {
        let _ = std::fs::remove_file(&path);
    }
}

/// Whether the REPL goes on after a command or turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// What a key typed at the input box asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Typed {
    Nothing,
    Submit(String),
    /// Shift+Tab: the next permission mode.
    CycleMode,
    /// Esc Esc at an empty box: `/rewind`'s picker.
    OpenRewind,
    /// The picker chose a rewind.
    Rewind {
        uuid: String,
        text: String,
        mode: gyre_core::ops::RewindMode,
    },
    Quit,
}

/// The permission mode Shift+Tab switches to from `mode` (Claude Code's cycle;
/// bypassPermissions is never entered this way).
fn next_mode(mode: &str) -> &'static str {
    match mode {
        "default" => "acceptEdits",
        "acceptEdits" => "plan",
        _ => "default",
    }
}

/// What a key typed during a turn asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    Nothing,
    Interrupt,
    Quit,
}

struct Repl {
    session: Session,
    front: Front,
    /// The environment the session was built from (`/doctor`, `/memory`'s editor).
    env: Environment,
    /// What the session was built from, for `/resume` to build another.
    options: SessionOptions,
    settings: Settings,
    verdicts_tx: mpsc::UnboundedSender<String>,
    started: Instant,
    /// Time spent waiting for the API, summed over turns (for `/cost`).
    api_ms: u64,
    /// A message went to the model (so the transcript is a session worth keeping).
    sent: bool,
    /// How long the box may wait for the user after an answer before Notification
    /// hooks hear `idle_prompt` (`GYRE_IDLE_NOTIFICATION_MS`, default 60 s, as the
    /// reference's), and whether they heard it since the last message.
    idle_after: Duration,
    idle_notified: bool,
}

/// The terminal side: what is on screen and the keys that change it.
struct Front {
    ui: Ui,
    editor: Editor,
    keys: EventStream,
    /// auto mode's verdicts (`auto mode allowed Bash: …`), shown as they come.
    verdicts: mpsc::UnboundedReceiver<String>,
    palette: Palette,
    cwd: PathBuf,
    /// gyre's folder of the user's own config (`folder_rules` saves "always" answers there).
    home: PathBuf,
    question: Option<Question>,
    status: StatusLine,
    hint: Option<String>,
    last_ctrl_c: Option<Instant>,
    /// The folded Bash outputs not shown whole yet, oldest first (Ctrl+O shows the
    /// newest, then the one before).
    folded: Vec<Folded>,
    /// A message sent with Enter while a turn ran: it goes when the turn ends.
    queued: Option<String>,
    frame: usize,
    /// The operations a running turn allows: the answers go here by question id, the
    /// status line shows the mode, and approving a plan may switch it.
    control: Control,
    /// Bash's background shells (`/bashes`, the status line's count).
    shells: Option<Arc<ShellTable>>,
    /// `/bashes`' list while it is open.
    shells_view: Option<ShellsView>,
    /// `/rewind`'s picker while it is open, and when Esc was last pressed at an empty
    /// box (a second Esc soon after opens it).
    rewind: Option<rewind::RewindPicker>,
    last_esc: Option<Instant>,
    /// The user answered a question "no, tell gyre what to do instead": the turn stops
    /// once the refusal is recorded (its PermissionDenied event).
    stop_on_denial: bool,
}

/// Records a Ctrl+C; true when it is the second within [`DOUBLE_CTRL_C`].
fn second_ctrl_c(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    let quit = last.is_some_and(|t| now.duration_since(t) < DOUBLE_CTRL_C);
    *last = Some(now);
    quit
}

fn ctrl(key: &KeyEvent, c: char) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char(c)
}

impl Front {
    fn draw(
        &mut self,
        live: &[Line<'static>],
        subagents: &[Line<'static>],
        activity: Option<&Status>,
    ) -> Result<()> {
        // ExitPlanMode (or an approval) may have switched the mode since the last frame.
        self.status.mode = self.control.mode_name();
        self.status.shells = self.shells.as_ref().map_or(0, |s| s.running());
        if let (Some(panel), Some(table)) = (&mut self.shells_view, &self.shells) {
            panel.rows = table.list().iter().map(shell_row).collect();
            panel.selected = panel.selected.min(panel.rows.len().saturating_sub(1));
        }
        let rewind_panel = self.rewind.as_ref().map(rewind::RewindPicker::panel);
        let view = View {
            color: self.palette.color(),
            live,
            subagents,
            // A question on screen is what gyre waits for.
            activity: activity.filter(|_| self.question.is_none()),
            question: self.question.as_ref().map(|q| &q.view),
            shells: rewind_panel.as_ref().or(self.shells_view.as_ref()),
            editor: &self.editor,
            status: &self.status,
            hint: self.hint.as_deref(),
            now: Instant::now(),
            frame: self.frame,
        };
        self.ui.draw(&view)
    }

    fn print(&mut self, lines: &[Line<'static>]) -> Result<()> {
        self.ui.print(lines)
    }

    /// Puts a question on screen; a plan, or a command longer than a few lines, goes
    /// into the scrollback first (the viewport is short).
    fn ask(&mut self, mut question: Question) -> Result<()> {
        if let Some(plan) = &question.view.plan {
            let lines = plan.lines.clone();
            self.print(&lines)?;
        }
        if question.view.details.len() > MAX_QUESTION_DETAILS {
            let details = std::mem::take(&mut question.view.details);
            self.print(&details)?;
            let above = self.palette.dim("    (the whole command is above)");
            question.view.details.push(above.into());
        }
        self.question = Some(question);
        Ok(())
    }

    /// A key while ExitPlanMode's question is on screen; true when it should also
    /// interrupt the turn.
    fn on_plan_key(&mut self, key: &KeyEvent) -> Result<bool> {
        let ctrl_c = ctrl(key, 'c');
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        let Some(question) = &mut self.question else {
            return Ok(false);
        };
        let Some(plan) = &mut question.view.plan else {
            return Ok(false);
        };
        let mut picked = None;
        match (&mut plan.feedback, key.code) {
            // Ctrl+C goes on to deny and interrupt, as at the answers.
            (Some(_), _) if ctrl_c => {}
            (Some(_), KeyCode::Esc) => {
                plan.feedback = None;
                return Ok(false);
            }
            (Some(feedback), KeyCode::Enter) => {
                let words = feedback.trim().to_owned();
                self.answer_plan(PlanChoice::KeepPlanning, words)?;
                return Ok(false);
            }
            (Some(feedback), KeyCode::Backspace) => {
                feedback.pop();
                return Ok(false);
            }
            (Some(feedback), KeyCode::Char(c)) if plain => {
                feedback.push(c);
                return Ok(false);
            }
            (Some(_), _) => return Ok(false),
            (None, _) if ctrl_c => {}
            (None, KeyCode::Char(c)) => picked = PlanChoice::from_key(c),
            (None, KeyCode::Up) => {
                question.view.selected = question.view.selected.saturating_sub(1);
            }
            (None, KeyCode::Down) => {
                question.view.selected =
                    (question.view.selected + 1).min(question.view.choices() - 1);
            }
            (None, KeyCode::Enter) => {
                picked = PlanChoice::ALL.get(question.view.selected).copied();
            }
            (None, _) => {}
        }
        match picked {
            // What to change is typed next, in the box.
            Some(PlanChoice::KeepPlanning) => {
                if let Some(plan) = &mut question.view.plan {
                    plan.feedback = Some(String::new());
                }
            }
            Some(choice) => self.answer_plan(choice, String::new())?,
            None if key.code == KeyCode::Esc || ctrl_c => {
                // As any question: no, and stop the turn to say what to do instead.
                self.answer(Choice::Deny)?;
                let _ = second_ctrl_c(&mut self.last_ctrl_c);
                return Ok(true);
            }
            None => {}
        }
        Ok(false)
    }

    /// Answers ExitPlanMode's question: approving may switch to acceptEdits first (the
    /// tool then keeps that mode); keeping on planning sends `feedback` to the model.
    fn answer_plan(&mut self, choice: PlanChoice, feedback: String) -> Result<()> {
        let Some(question) = self.question.take() else {
            return Ok(());
        };
        let p = self.palette;
        let (answer, note) = match choice {
            PlanChoice::AutoAccept => match self.control.set_mode("acceptEdits") {
                Ok(_) => (
                    Approval::once(),
                    p.dim("  ? plan approved · edits are auto-accepted (acceptEdits mode)"),
                ),
                Err(e) => (
                    Approval::once(),
                    p.red(format!("  ? plan approved; acceptEdits refused: {e}")),
                ),
            },
            PlanChoice::Manual => (
                Approval::once(),
                p.dim("  ? plan approved · edits ask first (default mode)"),
            ),
            PlanChoice::KeepPlanning => {
                let feedback = if feedback.is_empty() {
                    "No, keep planning.".to_owned()
                } else {
                    feedback
                };
                let note = p.dim(format!("  ? keep planning: {feedback}"));
                (
                    Approval::rejected(&question.request.question.tool, &feedback),
                    note,
                )
            }
        };
        // The tool waits on this; if it is gone (the turn ended) nobody is told.
        let _ = self.control.submit(Op::Answer {
            id: question.request.id,
            approval: answer,
        });
        self.print(&[note.into()])
    }

    /// Waits for the next terminal event; `None` when the terminal is gone.
    async fn next_event(&mut self) -> Result<Option<Event>> {
        match self.keys.next().await {
            None => Ok(None),
            Some(event) => {
                self.ui.key_read();
                event
                    .map(Some)
                    .map_err(TuiError::terminal("could not read the terminal"))
            }
        }
    }

    /// Ctrl+O: the newest folded output not shown yet, whole.
    fn expand(&mut self) -> Result<()> {
        match self.folded.pop() {
            Some(folded) => {
                let lines = expanded(self.palette, &folded);
                self.print(&lines)
            }
            None => {
                self.hint = Some("No folded Bash output left to expand".to_owned());
                Ok(())
            }
        }
    }

    /// Keys that edit the input box (idle, or typed ahead during a turn).
    fn edit(&mut self, key: &KeyEvent) {
        let e = &mut self.editor;
        let plain = !key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if e.search().is_some() {
            match key.code {
                KeyCode::Char('r') if !plain => e.start_search(),
                KeyCode::Char('g' | 'c') if !plain => e.end_search(false),
                KeyCode::Char(c) if plain => e.search_push(c),
                KeyCode::Backspace => e.search_pop(),
                KeyCode::Esc => e.end_search(false),
                _ => e.end_search(true),
            }
            return;
        }
        match key.code {
            KeyCode::Char('r') if !plain => e.start_search(),
            KeyCode::Char('j') if !plain => e.newline(),
            KeyCode::Char('u') if !plain => e.kill_to_start(),
            KeyCode::Char('a') if !plain => e.home(),
            KeyCode::Char('e') if !plain => e.end(),
            KeyCode::Char(c) if plain => e.insert_char(c),
            KeyCode::Enter if !plain || key.modifiers.contains(KeyModifiers::SHIFT) => {
                e.newline();
            }
            KeyCode::Backspace => e.backspace(),
            KeyCode::Delete => e.delete(),
            KeyCode::Left => e.left(),
            KeyCode::Right => e.right(),
            KeyCode::Up => e.up(),
            KeyCode::Down => e.down(),
            KeyCode::Home => e.home(),
            KeyCode::End => e.end(),
            // A slash command first, else an `@path`.
            KeyCode::Tab if !e.complete() => {
                let home = std::env::var_os("HOME").map(PathBuf::from);
                e.complete_mention(&self.cwd, home.as_deref());
            }
            _ => {}
        }
    }

    /// A terminal event while no turn runs.
    fn on_idle_event(&mut self, event: Event) -> Result<Typed> {
        let key = match event {
            Event::Paste(text) => {
                self.editor.insert_str(&text);
                return Ok(Typed::Nothing);
            }
            Event::Key(key) if key.kind != KeyEventKind::Release => key,
            _ => return Ok(Typed::Nothing),
        };
        if self.shells_view.is_some() {
            self.on_shells_key(&key)?;
            return Ok(Typed::Nothing);
        }
        if self.rewind.is_some() {
            return Ok(self.on_rewind_key(&key));
        }
        let was_ctrl_c = ctrl(&key, 'c');
        if !was_ctrl_c {
            self.hint = None;
        }
        if self.editor.search().is_some() {
            self.edit(&key);
            return Ok(Typed::Nothing);
        }
        if was_ctrl_c {
            if !self.editor.is_empty() {
                self.editor.clear();
                return Ok(Typed::Nothing);
            }
            if second_ctrl_c(&mut self.last_ctrl_c) {
                return Ok(Typed::Quit);
            }
            self.hint = Some("Press Ctrl+C again to exit".to_owned());
            return Ok(Typed::Nothing);
        }
        if ctrl(&key, 'd') {
            return Ok(if self.editor.is_empty() {
                Typed::Quit
            } else {
                self.editor.delete();
                Typed::Nothing
            });
        }
        if ctrl(&key, 'o') {
            self.expand()?;
            return Ok(Typed::Nothing);
        }
        if key.code == KeyCode::BackTab {
            return Ok(Typed::CycleMode);
        }
        if key.code == KeyCode::Esc && self.editor.is_empty() {
            let now = Instant::now();
            if self
                .last_esc
                .take()
                .is_some_and(|t| now.duration_since(t) < DOUBLE_CTRL_C)
            {
                return Ok(Typed::OpenRewind);
            }
            self.last_esc = Some(now);
            self.hint = Some("Press Esc again to rewind".to_owned());
            return Ok(Typed::Nothing);
        }
        if key.code == KeyCode::Enter && key.modifiers.is_empty() {
            // A line ending in `\` goes on at the next one (as in a shell).
            let (row, col) = self.editor.cursor();
            let line = &self.editor.lines()[row];
            if line.ends_with('\\') && col == line.chars().count() {
                self.editor.backspace();
                self.editor.newline();
                return Ok(Typed::Nothing);
            }
            return Ok(Typed::Submit(self.editor.submit()));
        }
        self.edit(&key);
        Ok(Typed::Nothing)
    }

    /// A key while `/rewind`'s picker is open. Choosing a prompt shows what its code
    /// rewind would change (a dry run of the session's `Op::Rewind`).
    fn on_rewind_key(&mut self, key: &KeyEvent) -> Typed {
        let Some(picker) = &mut self.rewind else {
            return Typed::Nothing;
        };
        match picker.key(key) {
            rewind::Picked::Nothing => {}
            rewind::Picked::Closed => self.rewind = None,
            rewind::Picked::Prompt(uuid) => {
                let dry_run = Op::Rewind {
                    to: uuid,
                    mode: gyre_core::ops::RewindMode::Code,
                    dry_run: true,
                };
                let files = match self.control.submit(dry_run) {
                    Ok(Some(SessionEvent::Rewound(Ok(rewound)))) => {
                        Ok(rewound.files.unwrap_or_default())
                    }
                    Ok(Some(SessionEvent::Rewound(Err(e)))) => Err(e.to_string()),
                    _ => Err("the session did not answer".to_owned()),
                };
                picker.show_files(files);
            }
            rewind::Picked::Rewind { uuid, text, mode } => {
                self.rewind = None;
                return Typed::Rewind { uuid, text, mode };
            }
        }
        Typed::Nothing
    }

    /// A key while `/bashes`' list is open: ↑/↓ select, `k` kills the selected shell
    /// (noted in the scrollback too), Esc, Enter, `q` or Ctrl+C close it.
    fn on_shells_key(&mut self, key: &KeyEvent) -> Result<()> {
        let (Some(panel), Some(table)) = (&mut self.shells_view, &self.shells) else {
            return Ok(());
        };
        match key.code {
            KeyCode::Up => panel.selected = panel.selected.saturating_sub(1),
            KeyCode::Down => {
                panel.selected = (panel.selected + 1).min(panel.rows.len().saturating_sub(1));
            }
            KeyCode::Char('k') if !ctrl(key, 'k') => {
                let Some(shell) = table.list().into_iter().nth(panel.selected) else {
                    return Ok(());
                };
                match table.kill(&shell.id) {
                    Ok(command) => {
                        let note = format!("Killed {} ({command})", shell.id);
                        panel.note = Some(note.clone());
                        self.print(&[note.into()])?;
                    }
                    Err(e) => panel.note = Some(e.to_string()),
                }
            }
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q' | 'c') => self.shells_view = None,
            _ => {}
        }
        Ok(())
    }

    /// A terminal event while a turn runs.
    fn on_busy_event(&mut self, event: Event) -> Result<Busy> {
        let key = match event {
            Event::Paste(text) => {
                match &mut self.question {
                    None => self.editor.insert_str(&text),
                    Some(q) => {
                        if let Some(feedback) =
                            q.view.plan.as_mut().and_then(|p| p.feedback.as_mut())
                        {
                            feedback.push_str(&text.replace(['\r', '\n'], " "));
                        }
                    }
                }
                return Ok(Busy::Nothing);
            }
            Event::Key(key) if key.kind != KeyEventKind::Release => key,
            _ => return Ok(Busy::Nothing),
        };
        let ctrl_c = ctrl(&key, 'c');
        if self
            .question
            .as_ref()
            .is_some_and(|q| q.view.plan.is_some())
        {
            return Ok(if self.on_plan_key(&key)? {
                Busy::Interrupt
            } else {
                Busy::Nothing
            });
        }
        if let Some(question) = &mut self.question {
            let choice = match key.code {
                KeyCode::Char(c) if !ctrl_c => Choice::from_key(c),
                KeyCode::Up => {
                    question.view.selected = question.view.selected.saturating_sub(1);
                    None
                }
                KeyCode::Down => {
                    question.view.selected =
                        (question.view.selected + 1).min(Choice::ALL.len() - 1);
                    None
                }
                KeyCode::Enter => Some(Choice::ALL[question.view.selected]),
                _ => None,
            };
            if let Some(choice) = choice {
                self.answer(choice)?;
                // "No, tell gyre what to do instead": the turn stops here, as in Claude
                // Code, and waits for the user's words instead of sending the refusal
                // straight back to the model.
                // The refusal is recorded first (the turn is interrupted when its
                // PermissionDenied event arrives), so the model reads it next time.
                self.stop_on_denial |= choice == Choice::Deny;
                return Ok(Busy::Nothing);
            }
            if key.code == KeyCode::Esc || ctrl_c {
                // As Claude Code: no, and stop the turn to say what to do instead.
                self.answer(Choice::Deny)?;
                let _ = second_ctrl_c(&mut self.last_ctrl_c);
                return Ok(Busy::Interrupt);
            }
            return Ok(Busy::Nothing);
        }
        if ctrl_c {
            return Ok(if second_ctrl_c(&mut self.last_ctrl_c) {
                Busy::Quit
            } else {
                Busy::Interrupt
            });
        }
        if key.code == KeyCode::Esc {
            return Ok(Busy::Interrupt);
        }
        if ctrl(&key, 'o') {
            self.expand()?;
            return Ok(Busy::Nothing);
        }
        // Typing ahead: the box edits; Enter queues the message for when the turn ends.
        if key.code == KeyCode::Enter && key.modifiers.is_empty() && self.editor.search().is_none()
        {
            if !self.editor.is_empty() && self.queued.is_none() {
                let text = self.editor.submit();
                let first = text.lines().next().unwrap_or_default().to_owned();
                self.hint = Some(format!("Queued, sent when this turn ends: {first}"));
                self.queued = Some(text);
            }
            return Ok(Busy::Nothing);
        }
        self.edit(&key);
        Ok(Busy::Nothing)
    }

    /// Answers the question on screen and notes the answer in the scrollback.
    fn answer(&mut self, choice: Choice) -> Result<()> {
        let Some(question) = self.question.take() else {
            return Ok(());
        };
        let p = self.palette;
        let QuestionView { rule, .. } = &question.view;
        let (answer, note) = match choice {
            Choice::Once => (Approval::once(), p.dim("  ? allowed once")),
            Choice::Session => (
                Approval::always(&question.request),
                p.dim(format!("  ? allowed for this session: {rule}")),
            ),
            Choice::Save => {
                match gyre_core::folder_rules::save_allow_rule(&self.home, &self.cwd, rule) {
                    Ok(path) => (
                        Approval::always(&question.request),
                        p.dim(format!(
                            "  ? always allowed in this folder: {rule} (saved in {})",
                            path.display()
                        )),
                    ),
                    Err(e) => (
                        Approval::always(&question.request),
                        p.red(format!("  ? allowed for this session; not saved: {e:#}")),
                    ),
                }
            }
            Choice::Deny => (Approval::deny(), p.dim("  ? denied")),
        };
        // The tool waits on this; if it is gone (the turn ended) nobody is told.
        let _ = self.control.submit(Op::Answer {
            id: question.request.id,
            approval: answer,
        });
        self.print(&[note.into()])
    }
}

impl Repl {
    fn banner(&mut self) -> Result<()> {
        let p = self.front.palette;
        let facts = &self.session.facts;
        let mut details = vec![facts.model(), display_dir(&self.front.cwd)];
        if facts.permission_mode != "default" {
            details.push(format!("{} mode", facts.permission_mode));
        }
        let mut lines = vec![Line::from(vec![
            p.bold(format!("gyre {}", env!("CARGO_PKG_VERSION"))),
            Span::raw(" "),
            p.dim(format!("· {}", details.join(" · "))),
        ])];
        let earlier = self.session.engine.messages().len();
        if earlier > 0 {
            lines.push(
                p.dim(format!(
                    "Resumed session {} ({earlier} messages)",
                    facts.session_id
                ))
                .into(),
            );
        }
        lines.push(
            p.dim("/help for commands · Esc or Ctrl+C interrupts · Ctrl+D quits")
                .into(),
        );
        lines.push(Line::default());
        self.front.print(&lines)
    }

    async fn run(&mut self, first: Option<String>) -> Result<()> {
        self.banner()?;
        if let Some(first) = first.filter(|p| !p.trim().is_empty()) {
            self.front.editor.remember(&first);
            if self.send(first).await? == Flow::Quit {
                return Ok(());
            }
        }
        loop {
            self.front.draw(&[], &[], None)?;
            // While /bashes is open its runtimes keep counting: drawn again each second.
            let event = if self.front.shells_view.is_some() {
                match tokio::time::timeout(SHELLS_REFRESH, self.front.next_event()).await {
                    Ok(event) => event?,
                    Err(_) => continue,
                }
            } else if self.sent && !self.idle_notified && self.notification_hooks() {
                match tokio::time::timeout(self.idle_after, self.front.next_event()).await {
                    Ok(event) => event?,
                    Err(_) => {
                        self.idle_notified = true;
                        self.session
                            .gate
                            .notify("idle_prompt", "gyre is waiting for your input")
                            .await;
                        continue;
                    }
                }
            } else {
                self.front.next_event().await?
            };
            let Some(event) = event else {
                return Ok(());
            };
            match self.front.on_idle_event(event)? {
                Typed::Nothing => {}
                Typed::CycleMode => self.cycle_mode(),
                Typed::OpenRewind => self.open_rewind()?,
                Typed::Rewind { uuid, text, mode } => self.rewind(uuid, &text, mode).await?,
                Typed::Quit => return Ok(()),
                Typed::Submit(text) => {
                    if self.send(text).await? == Flow::Quit {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// `/rewind`, Esc Esc: opens the picker over the conversation's prompts.
    fn open_rewind(&mut self) -> Result<()> {
        self.front.rewind = rewind::RewindPicker::open(self.session.rewind_points());
        if self.front.rewind.is_none() {
            let p = self.front.palette;
            self.front.print(&[p
                .dim("Nothing to rewind: no prompt in this conversation yet.")
                .into()])?;
        }
        Ok(())
    }

    /// Rewinds to before the prompt `uuid` (`text`) and says what it did; a
    /// conversation rewind puts the prompt back in the input box.
    async fn rewind(
        &mut self,
        uuid: String,
        text: &str,
        mode: gyre_core::ops::RewindMode,
    ) -> Result<()> {
        let p = self.front.palette;
        let mut outcome = None;
        {
            let events = self.session.submit(Op::Rewind {
                to: uuid,
                mode,
                dry_run: false,
            });
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                if let SessionEvent::Rewound(result) = event {
                    outcome = Some(result);
                }
            }
        }
        let quoted = gyre_term::tool_line::shorten(text.lines().next().unwrap_or_default(), 60);
        let mut lines: Vec<Line<'static>> = Vec::new();
        match outcome {
            Some(Ok(rewound)) => {
                if let Some(files) = &rewound.files {
                    lines.push(
                        format!(
                            "Rewound the code to before “{quoted}”: {} {}",
                            rewind::files_summary(files, true),
                            rewind::BASH_NOTE
                        )
                        .into(),
                    );
                }
                if let Some(prompt) = rewound.prompt {
                    lines.push(
                        format!("Rewound the conversation to before “{quoted}”; the prompt is back in the input box.")
                            .into(),
                    );
                    self.front.editor.clear();
                    self.front.editor.insert_str(&prompt);
                }
            }
            Some(Err(e)) => lines.push(p.red(format!("✗ Rewind failed: {e}")).into()),
            None => lines.push(p.red("✗ Rewind failed: the session did not answer").into()),
        }
        lines.push(Line::default());
        self.front.print(&lines)
    }

    /// Shift+Tab: switches the permission mode for the following calls and shows it.
    fn cycle_mode(&mut self) {
        let next = next_mode(&self.front.control.mode_name());
        match self.front.control.set_mode(next) {
            // The status line says the mode, beside the model, context and cost it keeps.
            Ok(mode) => {
                self.front.status.mode = mode;
                self.front.hint = None;
            }
            Err(e) => self.front.hint = Some(e.to_string()),
        }
    }

    /// Whether Notification hooks listen (the idle wait is timed only then).
    fn notification_hooks(&self) -> bool {
        self.session
            .gate
            .hooks()
            .has(gyre_core::hooks::HookEvent::Notification)
    }

    /// Submits `text`, then what was queued while it ran.
    async fn send(&mut self, text: String) -> Result<Flow> {
        self.idle_notified = false;
        let mut next = Some(text);
        while let Some(text) = next.take() {
            if self.submit(&text).await? == Flow::Quit {
                return Ok(Flow::Quit);
            }
            next = self.front.queued.take();
            self.front.hint = None;
        }
        Ok(Flow::Continue)
    }

    /// Echoes what was sent, then runs it as a command or a turn.
    async fn submit(&mut self, text: &str) -> Result<Flow> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(Flow::Continue);
        }
        let echo: Vec<Line<'static>> = text
            .lines()
            .enumerate()
            .map(|(i, l)| Line::from(format!("{}{l}", if i == 0 { "> " } else { "  " })))
            .collect();
        self.front.print(&echo)?;
        // `exit` or `quit` alone is what people type to leave, not a message.
        if trimmed == "exit" || trimmed == "quit" {
            return Ok(Flow::Quit);
        }
        // `!cmd`: the user's own shell command, run without a question.
        if let Some(command) = trimmed.strip_prefix('!') {
            return self.shell(command.trim()).await;
        }
        match SlashCommand::parse(trimmed) {
            // A custom command or skill: the session expands it into the turn's prompt.
            Some(SlashCommand::Unknown(name)) if self.session.has_command(&name) => {
                self.turn(text).await
            }
            Some(command) => self.command(command).await,
            None => self.turn(text).await,
        }
    }

    /// `!cmd`: runs it, shows its output; the model reads both with the next message.
    async fn shell(&mut self, command: &str) -> Result<Flow> {
        let p = self.front.palette;
        let ran = async {
            let events = self.session.submit(Op::Shell(command.to_owned()));
            futures::pin_mut!(events);
            let mut ran = None;
            while let Some(event) = events.next().await {
                if let SessionEvent::ShellRan { output, .. } = event {
                    ran = Some(output);
                }
            }
            ran
        };
        let mut lines = match until_interrupted(&mut self.front, "Running", ran).await? {
            None => vec![p.dim("Interrupted.").into()],
            Some(None) => Vec::new(),
            Some(Some(out)) if out.output.trim().is_empty() => vec![p.dim("(no output)").into()],
            Some(Some(out)) => out
                .output
                .trim_end()
                .lines()
                .map(|l| {
                    let line = format!("  {l}");
                    if out.is_error {
                        p.red(line)
                    } else {
                        Span::raw(line)
                    }
                    .into()
                })
                .collect(),
        };
        lines.push(Line::default());
        self.front.print(&lines)?;
        Ok(Flow::Continue)
    }

    async fn command(&mut self, command: SlashCommand) -> Result<Flow> {
        let p = self.front.palette;
        let facts = self.session.facts.clone();
        let text = match command {
            SlashCommand::Exit => return Ok(Flow::Quit),
            SlashCommand::Help => {
                format!("{HELP}{}", slash::custom_help(&self.session.commands(&[]))).into()
            }
            SlashCommand::Clear => {
                self.session.submit(Op::Clear).for_each(|_| async {}).await;
                self.front.status.context = None;
                p.dim("Conversation cleared; the next message starts afresh.")
            }
            SlashCommand::Cost => {
                let wall = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                cost_report(
                    facts.meter.cost_usd(),
                    &facts.meter.usage(),
                    self.api_ms,
                    wall,
                )
                .into()
            }
            SlashCommand::Model(None) => {
                let lines = [
                    Line::from(vec![Span::raw("Model: "), p.bold(facts.model())]),
                    p.dim("/model NAME switches for the next messages").into(),
                    Line::default(),
                ];
                self.front.print(&lines)?;
                return Ok(Flow::Continue);
            }
            SlashCommand::Model(Some(name)) => {
                let events = self.session.submit(Op::SetModel(Some(name.clone())));
                futures::pin_mut!(events);
                while let Some(event) = events.next().await {
                    if let SessionEvent::ModelChanged(model) = event {
                        self.front.status.model = model;
                    }
                }
                let line = Line::from(vec![Span::raw("Model set to "), p.bold(name)]);
                self.front.print(&[line, Line::default()])?;
                return Ok(Flow::Continue);
            }
            SlashCommand::Compact(instructions) => {
                let compacted = async {
                    let events = self.session.submit(Op::Compact { instructions });
                    futures::pin_mut!(events);
                    // Op::Compact always ends with its Compacted event.
                    let mut outcome = Ok(None);
                    while let Some(event) = events.next().await {
                        if let SessionEvent::Compacted(result) = event {
                            outcome = result;
                        }
                    }
                    outcome
                };
                let result = until_interrupted(&mut self.front, "Compacting", compacted).await?;
                match result {
                    None => p.dim("Compaction interrupted."),
                    Some(Ok(Some(outcome))) => format!(
                        "Compacted: {} → {} tokens",
                        outcome.pre_tokens, outcome.post_tokens
                    )
                    .into(),
                    Some(Ok(None)) => {
                        let used = match self.front.status.context {
                            Some((tokens, window)) if window > 0 => format!(
                                "{tokens} tokens in use, {}% of the {window}-token window",
                                tokens.saturating_mul(100) / window
                            ),
                            _ => "no request sent yet".to_owned(),
                        };
                        p.dim(format!(
                            "Nothing to compact: the conversation ({} messages, {used}) is all in \
                             the recent turns compaction keeps as they are; older turns are \
                             summarised once there are some.",
                            self.session.engine.messages().len()
                        ))
                    }
                    Some(Err(e)) => p.red(format!("✗ Compaction failed: {e}")),
                }
            }
            SlashCommand::Mcp => {
                gyre_core::mcp_config::status_report(&self.session.mcp.status()).into()
            }
            SlashCommand::Rewind => {
                self.open_rewind()?;
                return Ok(Flow::Continue);
            }
            SlashCommand::Hooks => self.session.gate.hooks().listing().into(),
            SlashCommand::Todos => {
                match gyre_core::todos::last_todo_list(self.session.engine.messages()) {
                    Some(todos) if !todos.is_empty() => {
                        let input = serde_json::json!({ "todos": todos });
                        let mut lines = vec![Line::from("Todos")];
                        lines.extend(turn::todo_checklist(p, "TodoWrite", &input));
                        lines.push(Line::default());
                        self.front.print(&lines)?;
                        return Ok(Flow::Continue);
                    }
                    _ => p.dim(
                        "No todos: the model has not written a todo list in this conversation.",
                    ),
                }
            }
            SlashCommand::Bashes(arg) => match self.bashes(arg.as_deref()) {
                Some(text) => text,
                None => return Ok(Flow::Continue),
            },
            SlashCommand::Context => return self.print_lines(self.context_report()),
            SlashCommand::Status => return self.print_lines(self.status_report()),
            SlashCommand::Doctor => return self.print_lines(self.doctor_report()),
            SlashCommand::Agents => return self.print_lines(self.agents_report()),
            SlashCommand::Permissions(arg) => {
                return self.print_lines(self.permissions(arg.as_deref()));
            }
            SlashCommand::AddDir(arg) => self.add_dir(arg.as_deref()),
            SlashCommand::Export(arg) => self.export(arg.as_deref())?,
            SlashCommand::Init => return self.init().await,
            SlashCommand::Resume(arg) => {
                let lines = self.resume(arg.as_deref()).await?;
                return self.print_lines(lines);
            }
            SlashCommand::Memory => self.memory()?,
            SlashCommand::Unknown(name) => p.red(format!(
                "Unknown command /{name} · /help lists the commands"
            )),
        };
        let mut lines = lines_of(&text);
        lines.push(Line::default());
        self.front.print(&lines)?;
        Ok(Flow::Continue)
    }

    /// Prints a command's lines and a blank line under them.
    fn print_lines(&mut self, mut lines: Vec<Line<'static>>) -> Result<Flow> {
        lines.push(Line::default());
        self.front.print(&lines)?;
        Ok(Flow::Continue)
    }

    /// `/bashes`: opens the list of background shells (or says there are none), or
    /// `/bashes kill ID`; `None` when the list opened (nothing to print).
    fn bashes(&mut self, arg: Option<&str>) -> Option<Span<'static>> {
        let p = self.front.palette;
        let Some(shells) = &self.front.shells else {
            return Some(p.dim("No background shells: this session has no Bash."));
        };
        let words: Vec<&str> = arg.unwrap_or_default().split_whitespace().collect();
        Some(match words.as_slice() {
            [] => {
                if shells.list().is_empty() {
                    return Some(NO_SHELLS.into());
                }
                self.front.shells_view = Some(ShellsView::default());
                return None;
            }
            ["kill", id] => match shells.kill(id) {
                Ok(command) => format!("Killed {id} ({command})").into(),
                Err(e) => p.red(e.to_string()),
            },
            _ => p.red("Usage: /bashes opens the background shells; /bashes kill ID stops one"),
        })
    }

    /// Sends one message and shows the turn as it happens.
    async fn turn(&mut self, text: &str) -> Result<Flow> {
        let front = &mut self.front;
        let facts = self.session.facts.clone();
        let control = self.session.control();
        let mut view = TurnView::new(front.palette, front.cwd.clone());
        let mut tick = tokio::time::interval(TICK);
        let mut flow = Flow::Continue;
        {
            let events = self
                .session
                .submit(Op::UserMessage(vec![ContentBlock::text(text)]));
            futures::pin_mut!(events);
            loop {
                front.print(&view.take_lines())?;
                front.draw(&view.live(), &view.subagent_lines(), view.activity())?;
                tokio::select! {
                    event = events.next() => {
                        let event = match event {
                            None => break,
                            Some(SessionEvent::Engine(event)) => event,
                            Some(SessionEvent::Question(request)) => {
                                let question = Question::of(&request, front.palette, &front.cwd);
                                front.ask(question)?;
                                continue;
                            }
                            Some(SessionEvent::PromptBlocked(reason)) => {
                                let p = front.palette;
                                front.print(&[p
                                    .red(format!(
                                        "✗ The prompt was blocked by a UserPromptSubmit hook: {reason}"
                                    ))
                                    .into()])?;
                                return Ok(Flow::Continue);
                            }
                            Some(_) => continue,
                        };
                        self.sent = true;
                        if let EngineEvent::Result(result) = &event {
                            self.api_ms += result.duration_api_ms;
                        }
                        if matches!(&event, EngineEvent::Loop(LoopEvent::PermissionDenied { .. }))
                            && std::mem::take(&mut front.stop_on_denial)
                        {
                            let _ = control.submit(Op::Interrupt);
                        }
                        view.on_event(event);
                        // Ctrl+O reaches an output folded in this turn while it runs.
                        front.folded.append(&mut view.folded);
                        // The status line follows each response, not just the turn.
                        if let Some(tokens) = view.context_tokens {
                            front.status.context = Some((tokens, facts.context.window(&facts.model())));
                        }
                        // The meter counts sub-agents and side requests too.
                        front.status.cost_usd = facts.meter.cost_usd();
                        front.status.model = facts.model();
                    }
                    Some(verdict) = front.verdicts.recv() => {
                        front.print(&[Line::from(front.palette.dim(format!("  ⎿ {verdict}")))])?;
                    }
                    event = front.keys.next() => {
                        let busy = match event {
                            Some(event) => {
                                front.ui.key_read();
                                let event = event.map_err(TuiError::terminal("could not read the terminal"))?;
                                front.on_busy_event(event)?
                            }
                            None => Busy::Quit,
                        };
                        match busy {
                            Busy::Nothing => {}
                            Busy::Interrupt => {
                                let _ = control.submit(Op::Interrupt);
                                view.set_activity(Some(Status::working("Interrupting")));
                            }
                            Busy::Quit => {
                                flow = Flow::Quit;
                                break;
                            }
                        }
                    }
                    _ = tick.tick() => front.frame = front.frame.wrapping_add(1),
                }
            }
        }
        // A question left on screen (the user quit) went with the turn.
        front.question = None;
        front.stop_on_denial = false;
        if let Some(tokens) = view.context_tokens {
            front.status.context = Some((tokens, facts.context.window(&facts.model())));
        }
        front.status.cost_usd = facts.meter.cost_usd();
        front.status.model = facts.model();
        // Only the newest are worth keeping a key for.
        let stale = front.folded.len().saturating_sub(MAX_FOLDED);
        front.folded.drain(..stale);
        view.end();
        front.print(&view.take_lines())?;
        Ok(flow)
    }
}

/// `/compact`'s or a `!` command's work, with the spinner running under `label`;
/// `None` when Esc or Ctrl+C gave up.
async fn until_interrupted<F: std::future::Future>(
    front: &mut Front,
    label: &'static str,
    work: F,
) -> Result<Option<F::Output>> {
    let status = Status::working(label);
    let mut tick = tokio::time::interval(TICK);
    futures::pin_mut!(work);
    loop {
        front.draw(&[], &[], Some(&status))?;
        tokio::select! {
            result = &mut work => return Ok(Some(result)),
            event = front.next_event() => {
                let Some(Event::Key(key)) = event? else { continue };
                if key.code == KeyCode::Esc || ctrl(&key, 'c') {
                    return Ok(None);
                }
            }
            _ = tick.tick() => front.frame = front.frame.wrapping_add(1),
        }
    }
}

/// Each line of `span`'s text. As with the ANSI codes the REPL used to write (their
/// end on the last line, each line read on its own), only the first keeps its style.
fn lines_of(span: &Span<'_>) -> Vec<Line<'static>> {
    span.content
        .lines()
        .enumerate()
        .map(|(i, l)| {
            let style = if i == 0 { span.style } else { Style::default() };
            Line::from(Span::styled(l.to_owned(), style))
        })
        .collect()
}

/// `~/src/x` for a directory under `$HOME`.
fn display_dir(dir: &Path) -> String {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .and_then(|home| dir.strip_prefix(home).ok().map(Path::to_path_buf))
        .map_or_else(
            || dir.display().to_string(),
            |rel| format!("~/{}", rel.display()),
        )
}

#[cfg(test)]
mod tests {
    use super::next_mode;

    #[test]
    fn shift_tab_cycles_default_accept_edits_plan_and_leaves_bypass() {
        assert_eq!(next_mode("default"), "acceptEdits");
        assert_eq!(next_mode("acceptEdits"), "plan");
        assert_eq!(next_mode("plan"), "default");
        assert_eq!(next_mode("bypassPermissions"), "default");
        assert_eq!(next_mode("dontAsk"), "default");
    }
}
