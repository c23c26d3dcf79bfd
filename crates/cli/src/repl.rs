//! The interactive session: a prompt with line editing and history, the assistant's
//! answer streamed as light markdown, a spinner while waiting, one line per tool call
//! with its outcome, permission questions, Ctrl+C to interrupt and slash commands.
//!
//! Output goes to stdout; the spinner alone goes to stderr, so `gyre 2>/dev/null` still
//! shows everything but the status line.

mod input;
mod markdown;
mod permission_prompt;
mod screen;
mod slash;
mod spinner;
mod style;
mod tool_line;

use std::io::{IsTerminal, Stdout, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;
use gyre_loop::{EngineEvent, LoopEvent, TerminalReason, TurnResult};
use gyre_protocol::{ContentBlock, ContentDelta, Message, Role, StreamEvent};
use tokio::sync::mpsc;

use self::input::{LineReader, ReadResult};
use self::markdown::{LineBuffer, MarkdownRenderer};
use self::permission_prompt::TerminalPrompt;
use self::screen::Screen;
use self::slash::{HELP, SlashCommand, cost_report};
use self::spinner::{Spinner, Status};
use self::style::Palette;
use self::tool_line::{Outcome, call_summary, outcome_summary, render_call, render_outcome};
use crate::args::Cli;
use crate::session::{self, Session};
use crate::settings::Settings;
use crate::stream_json::SessionFacts;

/// A second Ctrl+C within this long quits.
const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);
const PROMPT: &str = "> ";

/// Runs the REPL until `/exit`, Ctrl+D or a double Ctrl+C. A prompt given on the
/// command line is sent first.
///
/// # Errors
/// When the session cannot be built or the terminal cannot be used.
pub async fn run(cli: &Cli, cwd: &Path, settings: &Settings) -> Result<ExitCode> {
    let palette = Palette::detect();
    let spinner = Spinner::new(std::io::stderr().is_terminal());
    let screen = Screen::new(spinner.clone());
    let reader = LineReader::spawn(Some(session::gyre_home().join("history")))?;
    let (interrupt_tx, interrupts) = mpsc::unbounded_channel();
    {
        // While a turn runs the terminal is in cooked mode, so Ctrl+C arrives as SIGINT.
        let tx = interrupt_tx.clone();
        tokio::spawn(async move {
            while tokio::signal::ctrl_c().await.is_ok() {
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
    }
    let prompt = Arc::new(TerminalPrompt::new(
        reader.clone(),
        screen.clone(),
        palette,
        cwd.to_path_buf(),
        interrupt_tx,
    ));
    let session = session::build(cli, cwd, settings, true, Some(prompt))?;
    let mut repl = Repl {
        session,
        palette,
        spinner,
        screen,
        reader,
        interrupts,
        cwd: cwd.to_path_buf(),
        started: Instant::now(),
        api_ms: 0,
        last_ctrl_c: None,
        out: std::io::stdout(),
    };
    repl.banner()?;
    repl.run(cli.prompt.clone()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Whether the REPL goes on after a command or turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

struct Repl {
    session: Session,
    palette: Palette,
    spinner: Spinner,
    screen: Screen,
    reader: LineReader,
    /// Ctrl+C presses: SIGINT during a turn, or typed at a permission question.
    interrupts: mpsc::UnboundedReceiver<()>,
    cwd: PathBuf,
    started: Instant,
    /// Time spent waiting for the API, summed over turns (for `/cost`).
    api_ms: u64,
    last_ctrl_c: Option<Instant>,
    out: Stdout,
}

/// Records a Ctrl+C; true when it is the second within [`DOUBLE_CTRL_C`].
fn second_ctrl_c(last: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    let quit = last.is_some_and(|t| now.duration_since(t) < DOUBLE_CTRL_C);
    *last = Some(now);
    quit
}

impl Repl {
    fn banner(&mut self) -> Result<()> {
        let p = self.palette;
        let facts = &self.session.facts;
        let mut details = vec![facts.model.clone(), display_dir(&self.cwd)];
        if facts.permission_mode != "default" {
            details.push(format!("{} mode", facts.permission_mode));
        }
        writeln!(
            self.out,
            "{} {}",
            p.bold(&format!("gyre {}", env!("CARGO_PKG_VERSION"))),
            p.dim(&format!("· {}", details.join(" · ")))
        )?;
        let earlier = self.session.engine.messages().len();
        if earlier > 0 {
            writeln!(
                self.out,
                "{}",
                p.dim(&format!(
                    "Resumed session {} ({earlier} messages)",
                    facts.session_id
                ))
            )?;
        }
        writeln!(
            self.out,
            "{}\n",
            p.dim("/help for commands · Ctrl+C interrupts · Ctrl+D quits")
        )?;
        self.out.flush()?;
        Ok(())
    }

    async fn run(&mut self, first: Option<String>) -> Result<()> {
        let mut pending = first.filter(|p| !p.trim().is_empty());
        if let Some(p) = &pending {
            self.reader.add_history(p);
            writeln!(self.out, "{PROMPT}{p}")?;
        }
        loop {
            let line = match pending.take() {
                Some(line) => line,
                None => match self.reader.read(PROMPT, true).await? {
                    ReadResult::Line(line) => line,
                    ReadResult::Eof => {
                        // Ctrl+D leaves the cursor after the prompt.
                        writeln!(self.out)?;
                        break;
                    }
                    ReadResult::Interrupted => {
                        if second_ctrl_c(&mut self.last_ctrl_c) {
                            break;
                        }
                        let hint = self.palette.dim("Press Ctrl+C again to exit");
                        writeln!(self.out, "{hint}")?;
                        continue;
                    }
                },
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let flow = match SlashCommand::parse(line) {
                Some(command) => self.command(command).await?,
                None => self.turn(line).await?,
            };
            if flow == Flow::Quit {
                break;
            }
        }
        self.spinner.clear();
        Ok(())
    }

    async fn command(&mut self, command: SlashCommand) -> Result<Flow> {
        let p = self.palette;
        let engine = &mut self.session.engine;
        let text = match command {
            SlashCommand::Exit => return Ok(Flow::Quit),
            SlashCommand::Help => HELP.to_owned(),
            SlashCommand::Clear => {
                engine.clear();
                p.dim("Conversation cleared; the next message starts afresh.")
            }
            SlashCommand::Cost => {
                let wall = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
                cost_report(
                    engine.total_cost_usd(),
                    &engine.total_usage(),
                    self.api_ms,
                    wall,
                )
            }
            SlashCommand::Model(None) => format!(
                "Model: {}\n{}",
                p.bold(engine.model()),
                p.dim("/model NAME switches for the next messages")
            ),
            SlashCommand::Model(Some(name)) => {
                engine.set_model(name.clone());
                self.session.facts.model.clone_from(&name);
                format!("Model set to {}", p.bold(&name))
            }
            SlashCommand::Compact => {
                while self.interrupts.try_recv().is_ok() {}
                self.spinner.show(Status::working("Compacting"));
                let result = tokio::select! {
                    result = engine.compact() => Some(result),
                    Some(()) = self.interrupts.recv() => None,
                };
                self.spinner.clear();
                match result {
                    None => p.dim("Compaction interrupted."),
                    Some(Ok(Some(outcome))) => format!(
                        "Compacted: {} → {} tokens",
                        outcome.pre_tokens, outcome.post_tokens
                    ),
                    Some(Ok(None)) => p.dim("Nothing to compact."),
                    Some(Err(e)) => p.red(&format!("✗ Compaction failed: {e}")),
                }
            }
            SlashCommand::Unknown(name) => p.red(&format!(
                "Unknown command /{name} · /help lists the commands"
            )),
        };
        writeln!(self.out, "{text}\n")?;
        self.out.flush()?;
        Ok(Flow::Continue)
    }

    /// Sends one message and shows the turn as it happens.
    async fn turn(&mut self, line: &str) -> Result<Flow> {
        while self.interrupts.try_recv().is_ok() {}
        let interrupt = self.session.engine.interrupt_handle();
        let mut view = TurnView::new(self.palette, self.screen.clone(), self.cwd.clone());
        let events = self
            .session
            .engine
            .submit_message(vec![ContentBlock::text(line)]);
        futures::pin_mut!(events);
        loop {
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { break };
                    if let EngineEvent::Result(result) = &event {
                        self.api_ms += result.duration_api_ms;
                    }
                    view.on_event(event, &mut self.session.facts)?;
                }
                Some(()) = self.interrupts.recv() => {
                    if second_ctrl_c(&mut self.last_ctrl_c) {
                        view.end()?;
                        return Ok(Flow::Quit);
                    }
                    interrupt.interrupt();
                    self.spinner.show(Status::working("Interrupting"));
                }
            }
        }
        view.end()?;
        Ok(Flow::Continue)
    }
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

/// Renders one turn's events.
struct TurnView {
    p: Palette,
    screen: Screen,
    spinner: Spinner,
    cwd: PathBuf,
    markdown: MarkdownRenderer,
    text: LineBuffer,
    /// Text of the current response was printed from its stream.
    streamed: bool,
    /// Calls shown and waiting for their results: id, tool name, summary.
    calls: Vec<(String, String, String)>,
    /// How many calls the current batch has (outcomes name their call when > 1).
    batch: usize,
    /// The last line written was empty (so a new section needs no separator).
    last_blank: bool,
}

impl TurnView {
    fn new(p: Palette, screen: Screen, cwd: PathBuf) -> Self {
        Self {
            p,
            spinner: screen.spinner().clone(),
            screen,
            cwd,
            markdown: MarkdownRenderer::new(p),
            text: LineBuffer::default(),
            streamed: false,
            calls: Vec::new(),
            batch: 0,
            last_blank: false,
        }
    }

    fn line(&mut self, text: &str) -> Result<()> {
        self.screen.line(text)?;
        self.last_blank = text.is_empty();
        Ok(())
    }

    /// An empty line before a new part of the answer, unless there is one already.
    fn section(&mut self) -> Result<()> {
        if self.last_blank {
            return Ok(());
        }
        self.line("")
    }

    fn text_line(&mut self, raw: &str) -> Result<()> {
        if !self.streamed {
            self.streamed = true;
            self.section()?;
        }
        let rendered = self.markdown.render_line(raw);
        self.line(&rendered)
    }

    fn flush_text(&mut self) -> Result<()> {
        if let Some(rest) = self.text.finish() {
            self.text_line(&rest)?;
        }
        Ok(())
    }

    fn notice(&mut self, text: &str) -> Result<()> {
        self.flush_text()?;
        self.section()?;
        let text = self.p.yellow(text);
        self.line(&text)
    }

    fn on_event(&mut self, event: EngineEvent, facts: &mut SessionFacts) -> Result<()> {
        match event {
            EngineEvent::Loop(event) => self.on_loop_event(event, facts),
            EngineEvent::Message { message, .. } => match message.role {
                Role::Assistant => self.on_assistant(&message),
                Role::User => self.on_tool_results(&message),
            },
            // A sub-agent's work shows as its Agent call's result.
            EngineEvent::Subagent { .. } => Ok(()),
            EngineEvent::Result(result) => self.on_result(&result),
        }
    }

    fn on_loop_event(&mut self, event: LoopEvent, facts: &mut SessionFacts) -> Result<()> {
        match event {
            LoopEvent::RequestStart { .. } => {
                self.streamed = false;
                self.markdown.reset();
                self.spinner.show(Status::working("Thinking"));
            }
            LoopEvent::Stream(StreamEvent::ContentBlockDelta {
                delta: ContentDelta::TextDelta { text },
                ..
            }) => {
                for line in self.text.push(&text) {
                    self.text_line(&line)?;
                }
            }
            LoopEvent::Stream(StreamEvent::ContentBlockStop { .. }) => {
                self.flush_text()?;
                // The next block (a tool call's input, say) may take a while to arrive.
                self.spinner.show(Status::working("Thinking"));
            }
            LoopEvent::Stream(_) => {}
            LoopEvent::ToolStarted { id, name, input } => {
                // Shown as it starts, so a permission question comes after its call line.
                self.flush_text()?;
                self.spinner.clear();
                if self.calls.is_empty() {
                    self.section()?;
                }
                let summary = call_summary(&name, &input, &self.cwd);
                let text = render_call(self.p, &summary);
                self.line(&text)?;
                self.calls.push((id, name, summary));
                self.batch = self.calls.len();
                self.spinner.show(Status::working(format!(
                    "Running {}",
                    self.calls[self.batch - 1].1
                )));
            }
            LoopEvent::Retry(status) => {
                self.flush_text()?;
                let reason = if status.message.is_empty() {
                    status.error.clone()
                } else {
                    status.message.clone()
                };
                if self.spinner.enabled() {
                    self.spinner.show(Status::Retry {
                        until: Instant::now() + Duration::from_millis(status.delay_ms),
                        attempt: status.attempt,
                        max_retries: status.max_retries,
                        reason,
                    });
                } else {
                    let secs = status.delay_ms.div_ceil(1000);
                    let text = self.p.dim(&format!(
                        "{reason} · retrying in {secs} s (attempt {}/{})",
                        status.attempt, status.max_retries
                    ));
                    self.line(&text)?;
                }
            }
            LoopEvent::Tombstone => {
                // Calls announced by the void attempt will not get results.
                self.calls.clear();
                self.text.discard();
                self.markdown.reset();
                if std::mem::take(&mut self.streamed) {
                    let text = self.p.dim("↻ the answer above was cut off; retrying");
                    self.line(&text)?;
                }
            }
            LoopEvent::Fallback { original, fallback } => {
                facts.model.clone_from(&fallback);
                self.notice(&format!(
                    "Switched to {fallback} due to high demand for {original}"
                ))?;
            }
            LoopEvent::Compacted(outcome) => {
                let text = format!(
                    "Context compacted ({} → {} tokens)",
                    outcome.pre_tokens, outcome.post_tokens
                );
                self.notice(&text)?;
            }
            LoopEvent::Message { .. }
            | LoopEvent::HistoryReplaced(_)
            | LoopEvent::PermissionDenied { .. }
            | LoopEvent::Transition(_)
            | LoopEvent::Usage { .. }
            | LoopEvent::Terminal(_) => {}
        }
        Ok(())
    }

    fn on_assistant(&mut self, message: &Message) -> Result<()> {
        self.flush_text()?;
        self.spinner.clear();
        if !self.streamed {
            // Nothing came through the stream (a non-streaming fallback): show it whole.
            for line in message.text().lines() {
                self.text_line(line)?;
            }
        }
        self.streamed = false;
        // Calls already announced as they started are not shown twice.
        let calls: Vec<(String, String, String)> = message
            .tool_uses()
            .filter(|(id, _, _)| !self.calls.iter().any(|(known, ..)| known == id))
            .map(|(id, name, input)| {
                (
                    id.to_owned(),
                    name.to_owned(),
                    call_summary(name, input, &self.cwd),
                )
            })
            .collect();
        if calls.is_empty() && self.calls.is_empty() {
            return Ok(());
        }
        if self.calls.is_empty() {
            self.section()?;
        }
        for (_, _, summary) in &calls {
            let text = render_call(self.p, summary);
            self.line(&text)?;
        }
        self.calls.extend(calls);
        let running = match self.calls.as_slice() {
            [(_, name, _)] => format!("Running {name}"),
            many => format!("Running {} tools", many.len()),
        };
        self.batch = self.calls.len();
        self.spinner.show(Status::working(running));
        Ok(())
    }

    fn on_tool_results(&mut self, message: &Message) -> Result<()> {
        for block in &message.content {
            let ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } = block
            else {
                continue;
            };
            let Some(at) = self.calls.iter().position(|(id, ..)| id == tool_use_id) else {
                continue;
            };
            let (_, name, summary) = self.calls.remove(at);
            let mut outcome = outcome_summary(&name, &content.text(), *is_error);
            if self.batch > 1 {
                outcome = Outcome {
                    text: format!("{summary}: {}", outcome.text),
                    ..outcome
                };
            }
            let text = render_outcome(self.p, &outcome);
            self.line(&text)?;
        }
        Ok(())
    }

    fn on_result(&mut self, result: &TurnResult) -> Result<()> {
        self.flush_text()?;
        self.spinner.clear();
        match result.terminal.reason {
            TerminalReason::AbortedStreaming | TerminalReason::AbortedTools => {
                self.section()?;
                let text = self.p.yellow("Interrupted · tell gyre what to do instead");
                self.line(&text)?;
            }
            _ if result.is_error => {
                let error = result
                    .errors
                    .first()
                    .cloned()
                    .unwrap_or_else(|| result.result.clone());
                self.section()?;
                let text = self.p.red(&format!("✗ {}", error.replace('\n', " ")));
                self.line(&text)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Closes the turn: the partial line, the spinner, a blank line before the prompt.
    fn end(&mut self) -> Result<()> {
        self.flush_text()?;
        self.spinner.clear();
        self.section()
    }
}
