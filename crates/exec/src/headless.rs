//! `gyre -p`: run turns without a terminal and print text, json or stream-json.

use std::io::Write;

use futures::StreamExt;
use gyre_core::approvals::ApprovalRequest;
use gyre_core::session::Session;
use gyre_core::{Event as SessionEvent, Op};
use gyre_loop::{CompactionOutcome, EngineEvent, LoopEvent, TurnResult};
use gyre_protocol::{ContentBlock, Message};

use std::path::Path;

use gyre_api::RetryStatus;
use gyre_tools::PermissionDenial;

use gyre_term::style::Palette;
use gyre_term::tool_line::{call_summary, outcome_summary, render_call, render_outcome};

use crate::stream_json::{self, ResponseMeta, ResultExtras};
use crate::{ExecError, OutputFormat};

/// Where headless output goes; every line is flushed as it is written, so a driver
/// reading our stdout sees each event when it happens.
pub struct Output<W: Write> {
    out: W,
    format: OutputFormat,
    partial: bool,
    /// Text mode: retries and permission denials as one stderr line each.
    progress: bool,
    /// Text mode with `--verbose`: each tool call and its outcome on stderr too.
    tool_lines: bool,
}

impl<W: Write> Output<W> {
    pub fn new(out: W, format: OutputFormat, partial: bool) -> Self {
        Self {
            out,
            format,
            partial,
            progress: false,
            tool_lines: false,
        }
    }

    /// In text mode, also say on stderr which tools run and how they ended.
    #[must_use]
    pub fn with_tool_lines(mut self, tool_lines: bool) -> Self {
        self.tool_lines = tool_lines && self.format == OutputFormat::Text;
        self
    }

    /// In text mode, say on stderr what the session waits for or was refused
    /// (`--quiet` turns this off); stdout stays the answer alone.
    #[must_use]
    pub fn with_progress(mut self, progress: bool) -> Self {
        self.progress = progress && self.format == OutputFormat::Text;
        self
    }

    /// One progress line on stderr, when progress lines are on.
    fn progress(&self, line: impl FnOnce() -> String) {
        if self.progress {
            eprintln!("gyre: {}", line());
        }
    }

    /// Tool lines on stderr, when they are on (nothing for an empty string).
    fn tool_line(&self, lines: impl FnOnce() -> String) {
        if self.tool_lines {
            let lines = lines();
            if !lines.is_empty() {
                eprintln!("{lines}");
            }
        }
    }

    fn line(&mut self, v: &impl serde::Serialize) -> Result<(), ExecError> {
        let mut s = serde_json::to_string(v).map_err(std::io::Error::from)?;
        s.push('\n');
        self.out.write_all(s.as_bytes())?;
        self.out.flush()?;
        Ok(())
    }

    fn streaming(&self) -> bool {
        self.format == OutputFormat::StreamJson
    }
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Prints the `init` line (stream-json only).
pub fn print_init<W: Write>(output: &mut Output<W>, session: &Session) -> Result<(), ExecError> {
    if output.streaming() {
        // Custom commands and skills are read only for a line that names them.
        let custom = session.commands(&[]).into_iter().map(|c| c.name).collect();
        output.line(&stream_json::init(&session.facts, &uuid(), custom))?;
    }
    Ok(())
}

/// Runs one turn and prints what the format asks for. Returns the turn's result.
/// `prompt_uuid` names the prompt (an SDK's id of it, which it may rewind to). `started` runs once the turn is under way (its interrupt handle armed); `ask` gets
/// the turn's permission questions (when the session asks them).
///
/// # Errors
/// [`ExecError::PromptBlocked`] when a UserPromptSubmit hook refused `content`; stdout
/// failing.
pub async fn run_turn<W: Write>(
    session: &mut Session,
    content: Vec<ContentBlock>,
    prompt_uuid: Option<String>,
    output: &mut Output<W>,
    started: impl FnOnce(),
    mut ask: impl FnMut(ApprovalRequest),
) -> Result<TurnResult, ExecError> {
    let mut started = Some(started);
    let facts = session.facts.clone();
    let session_id = facts.session_id.clone();
    let op = match prompt_uuid {
        Some(uuid) => Op::UserMessageWithId { content, uuid },
        None => Op::UserMessage(content),
    };
    let events = session.submit(op);
    futures::pin_mut!(events);
    let mut first_user = true;
    let mut meta = ResponseMeta {
        model: facts.model(),
        ..ResponseMeta::default()
    };
    let mut result: Option<TurnResult> = None;
    // Calls by id (name, summary), for the outcome lines of `--verbose` text mode.
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut last_stop_reason = None;
    while let Some(event) = events.next().await {
        let event = match event {
            SessionEvent::Engine(event) => event,
            SessionEvent::Question(request) => {
                ask(request);
                continue;
            }
            SessionEvent::PromptBlocked(reason) => return Err(ExecError::PromptBlocked(reason)),
            _ => continue,
        };
        match event {
            EngineEvent::Message {
                uuid,
                message,
                is_meta: _,
            } => {
                // The prompt itself is the driver's own input: not echoed back.
                if std::mem::take(&mut first_user) {
                    if let Some(started) = started.take() {
                        started();
                    }
                    continue;
                }
                output.tool_line(|| outcome_lines(&message, &calls));
                if output.streaming() {
                    output.line(&stream_json::message(&message, &meta, &session_id, &uuid))?;
                }
                if message.role == gyre_protocol::Role::Assistant {
                    // The next assistant message belongs to another response.
                    meta = ResponseMeta {
                        model: std::mem::take(&mut meta.model),
                        ..ResponseMeta::default()
                    };
                }
            }
            EngineEvent::Loop(event) => match event {
                LoopEvent::Retry(status) => {
                    output.progress(|| progress_line(&ProgressEvent::Retry(&status)));
                    if output.streaming() {
                        output.line(&stream_json::api_retry(&status, &session_id, &uuid()))?;
                    }
                }
                LoopEvent::Fallback { original, fallback } => {
                    output.progress(|| {
                        progress_line(&ProgressEvent::Fallback {
                            original: &original,
                            fallback: &fallback,
                        })
                    });
                    if output.streaming() {
                        output.line(&stream_json::model_fallback(
                            &original,
                            &fallback,
                            &session_id,
                            &uuid(),
                        ))?;
                    }
                }
                LoopEvent::Compacted(outcome) => {
                    output.progress(|| progress_line(&ProgressEvent::Compacted(&outcome)));
                    if output.streaming() {
                        output.line(&stream_json::compact_boundary(
                            &outcome,
                            &session_id,
                            &uuid(),
                        ))?;
                    }
                }
                LoopEvent::PermissionDenied { denial, message } => {
                    output.progress(|| {
                        progress_line(&ProgressEvent::Denied {
                            denial: &denial,
                            message: &message,
                            cwd: Path::new(&facts.cwd),
                        })
                    });
                    if output.streaming() {
                        output.line(&stream_json::permission_denied(
                            &denial,
                            &message,
                            &session_id,
                            &uuid(),
                        ))?;
                    }
                }
                LoopEvent::Stream(raw) => {
                    if output.streaming() && output.partial {
                        output.line(&stream_json::stream_event(&raw, &session_id, &uuid()))?;
                    }
                }
                LoopEvent::ToolStarted { id, name, input } => {
                    let summary = call_summary(&name, &input, Path::new(&facts.cwd));
                    output.tool_line(|| render_call(PLAIN, &summary));
                    calls.push((id, name, summary));
                }
                LoopEvent::RequestStart { .. }
                | LoopEvent::Message { .. }
                | LoopEvent::Tombstone
                | LoopEvent::HistoryReplaced(_)
                | LoopEvent::Transition(_)
                | LoopEvent::Terminal(_) => {}
                LoopEvent::Usage {
                    id,
                    model,
                    stop_reason,
                    usage,
                    ..
                } => {
                    last_stop_reason.clone_from(&stop_reason);
                    meta = ResponseMeta {
                        id,
                        model,
                        stop_reason,
                        usage,
                    };
                }
            },
            EngineEvent::Subagent {
                parent_tool_use_id,
                uuid,
                message,
            } => {
                if output.streaming() {
                    let line = stream_json::message(
                        &message,
                        &ResponseMeta::default(),
                        &session_id,
                        &uuid,
                    );
                    output.line(&line.under(parent_tool_use_id))?;
                }
            }
            // Stream-json carries the sub-agent's own messages instead.
            EngineEvent::SubagentProgress(_) => {}
            EngineEvent::Result(r) => result = Some(r),
        }
    }
    let result = result.ok_or(ExecError::NoResult)?;
    if output.tool_lines && !calls.is_empty() {
        // The answer on stdout stands apart from the tool lines above it.
        eprintln!();
    }
    match output.format {
        OutputFormat::Text => {
            if !result.is_error {
                writeln!(output.out, "{}", result.result)?;
                output.out.flush()?;
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let extras = ResultExtras {
                stop_reason: last_stop_reason,
                model_usage: facts.model_usage(),
                structured_output: facts
                    .structured
                    .as_ref()
                    .and_then(gyre_core::structured::take),
            };
            output.line(&stream_json::result(&result, &extras, &session_id, &uuid()))?;
        }
    }
    if result.is_error {
        let text = result
            .errors
            .first()
            .cloned()
            .unwrap_or_else(|| result.result.clone());
        eprintln!("gyre: {}", text.replace('\n', " "));
    }
    Ok(result)
}

/// What a text-mode progress line reports.
enum ProgressEvent<'a> {
    Retry(&'a RetryStatus),
    Fallback {
        original: &'a str,
        fallback: &'a str,
    },
    Compacted(&'a CompactionOutcome),
    Denied {
        denial: &'a PermissionDenial,
        message: &'a str,
        cwd: &'a Path,
    },
}

/// Appended to the retry line of an unreachable API (refused, DNS, TLS): Ctrl+C ends the
/// turn as an interruption, the session saved.
const STOP_HINT: &str = " · Ctrl+C stops, nothing is lost";

/// One stderr line for a retry wait, a switch of model, a compaction or a refused tool
/// call: `API overloaded · retrying in 2 s (attempt 1/10)`,
/// `Could not reach the API (connection refused): … · retrying in 1 s (attempt 1/2) · Ctrl+C
/// stops, nothing is lost`,
/// `big-model is overloaded: switched to small-model for the rest of the session`,
/// `compacted the conversation (auto): 190000 → 2100 tokens`,
/// `denied Bash rm -rf build: <why>`.
fn progress_line(event: &ProgressEvent<'_>) -> String {
    match event {
        ProgressEvent::Retry(status) => {
            let reason = if status.message.is_empty() {
                &status.error
            } else {
                &status.message
            };
            // Below a second the server asked for a precise wait: show it as such.
            let wait = if status.delay_ms < 1000 {
                format!("{} ms", status.delay_ms)
            } else {
                format!("{} s", status.delay_ms.div_ceil(1000))
            };
            // The few waits before giving up on an unreachable API: stopping loses nothing.
            let hint = if status.is_unreachable() {
                STOP_HINT
            } else {
                ""
            };
            format!(
                "{} · retrying in {wait} (attempt {}/{}){hint}",
                reason.replace('\n', " "),
                status.attempt,
                status.max_retries
            )
        }
        ProgressEvent::Fallback { original, fallback } => {
            format!("{original} is overloaded: switched to {fallback} for the rest of the session")
        }
        ProgressEvent::Compacted(outcome) => format!(
            "compacted the conversation ({}): {} → {} tokens",
            outcome.trigger.as_str(),
            outcome.pre_tokens,
            outcome.post_tokens
        ),
        ProgressEvent::Denied {
            denial,
            message,
            cwd,
        } => {
            let summary = call_summary(&denial.tool_name, &denial.tool_input, cwd);
            let why = message.lines().next().unwrap_or_default();
            format!("denied {summary}: {why}")
        }
    }
}

/// Tool lines on stderr are plain: they may be read by a program or a log.
const PLAIN: Palette = Palette::new(false);

/// `  ⎿ 12 lines` for each tool result in `message` (a user message); with several
/// results each names its call.
fn outcome_lines(message: &Message, calls: &[(String, String, String)]) -> String {
    let mut outcomes = Vec::new();
    for block in &message.content {
        if let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            ..
        } = block
            && let Some((_, name, summary)) = calls.iter().find(|(id, ..)| id == tool_use_id)
        {
            outcomes.push((summary, outcome_summary(name, &content.text(), *is_error)));
        }
    }
    let several = outcomes.len() > 1;
    let lines: Vec<String> = outcomes
        .into_iter()
        .map(|(summary, mut outcome)| {
            if several {
                outcome.text = format!("{summary}: {}", outcome.text);
            }
            render_outcome(PLAIN, &outcome)
        })
        .collect();
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_name_the_reason_the_wait_and_the_refused_call() {
        let status = RetryStatus {
            attempt: 2,
            max_retries: 10,
            delay_ms: 2_500,
            status: Some(529),
            error: "overloaded".into(),
            message: "The API is overloaded\n(HTTP 529)".into(),
        };
        assert_eq!(
            progress_line(&ProgressEvent::Retry(&status)),
            "The API is overloaded (HTTP 529) · retrying in 3 s (attempt 2/10)"
        );
        let quick = RetryStatus {
            delay_ms: 20,
            message: String::new(),
            ..status
        };
        assert_eq!(
            progress_line(&ProgressEvent::Retry(&quick)),
            "overloaded · retrying in 20 ms (attempt 2/10)"
        );
        let unreachable = RetryStatus {
            attempt: 1,
            max_retries: 2,
            delay_ms: 560,
            status: None,
            error: "unreachable".into(),
            message: "Could not reach the API (connection refused): tcp connect error".into(),
        };
        assert_eq!(
            progress_line(&ProgressEvent::Retry(&unreachable)),
            "Could not reach the API (connection refused): tcp connect error · retrying in \
             560 ms (attempt 1/2) · Ctrl+C stops, nothing is lost"
        );
        let denial = PermissionDenial {
            tool_name: "Bash".into(),
            tool_use_id: "toolu_1".into(),
            tool_input: serde_json::json!({"command": "rm -rf build"}),
        };
        assert_eq!(
            progress_line(&ProgressEvent::Denied {
                denial: &denial,
                message: "Permission to run `rm -rf build` was denied.\nAsk the user.",
                cwd: Path::new("/p"),
            }),
            "denied Bash rm -rf build: Permission to run `rm -rf build` was denied."
        );
        assert_eq!(
            progress_line(&ProgressEvent::Fallback {
                original: "big-model",
                fallback: "small-model",
            }),
            "big-model is overloaded: switched to small-model for the rest of the session"
        );
        assert_eq!(
            progress_line(&ProgressEvent::Compacted(&CompactionOutcome {
                trigger: gyre_compact::Trigger::Auto,
                pre_tokens: 190_000,
                post_tokens: 2_100,
            })),
            "compacted the conversation (auto): 190000 → 2100 tokens"
        );
    }
}
