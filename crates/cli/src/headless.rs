//! `gyre -p`: run turns without a terminal and print text, json or stream-json.

use std::io::Write;

use anyhow::{Context, Result};
use futures::StreamExt;
use gyre_loop::{EngineEvent, LoopEvent, QueryEngine, TurnResult};
use gyre_protocol::ContentBlock;
use serde_json::Value;

use crate::args::OutputFormat;
use crate::stream_json::{self, ResponseMeta, ResultExtras, SessionFacts};

/// Where headless output goes; every line is flushed as it is written, so a driver
/// reading our stdout sees each event when it happens.
pub struct Output<W: Write> {
    out: W,
    format: OutputFormat,
    partial: bool,
}

impl<W: Write> Output<W> {
    pub fn new(out: W, format: OutputFormat, partial: bool) -> Self {
        Self {
            out,
            format,
            partial,
        }
    }

    fn line(&mut self, v: &Value) -> Result<()> {
        let mut s = serde_json::to_string(v)?;
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
pub fn print_init<W: Write>(output: &mut Output<W>, facts: &SessionFacts) -> Result<()> {
    if output.streaming() {
        output.line(&stream_json::init(facts, &uuid()))?;
    }
    Ok(())
}

/// Runs one turn and prints what the format asks for. Returns the turn's result.
/// `started` runs once the turn is under way (its interrupt handle armed).
pub async fn run_turn<W: Write>(
    engine: &mut QueryEngine,
    content: Vec<ContentBlock>,
    facts: &mut SessionFacts,
    output: &mut Output<W>,
    started: impl FnOnce(),
) -> Result<TurnResult> {
    let mut started = Some(started);
    let session_id = facts.session_id.clone();
    let events = engine.submit_message(content);
    futures::pin_mut!(events);
    let mut first_user = true;
    let mut meta = ResponseMeta {
        model: facts.model.clone(),
        ..ResponseMeta::default()
    };
    let mut result: Option<TurnResult> = None;
    let mut last_stop_reason = None;
    while let Some(event) = events.next().await {
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
                    if output.streaming() {
                        output.line(&stream_json::api_retry(&status, &session_id, &uuid()))?;
                    }
                }
                LoopEvent::Fallback { original, fallback } => {
                    facts.model.clone_from(&fallback);
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
                    if output.streaming() {
                        output.line(&stream_json::compact_boundary(
                            &outcome,
                            &session_id,
                            &uuid(),
                        ))?;
                    }
                }
                LoopEvent::PermissionDenied { denial, message } => {
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
                LoopEvent::RequestStart { .. }
                | LoopEvent::ToolStarted { .. }
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
                } => {
                    facts
                        .model_usage
                        .entry(model.clone())
                        .or_default()
                        .add(&model, &usage);
                    last_stop_reason.clone_from(&stop_reason);
                    facts.last_usage = usage;
                    meta = ResponseMeta {
                        id,
                        model,
                        stop_reason,
                        usage,
                    };
                }
            },
            EngineEvent::Result(r) => result = Some(r),
        }
    }
    let result = result.context("the turn ended without a result")?;
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
                model_usage: facts.model_usage.clone(),
                structured_output: facts.structured.as_ref().and_then(crate::structured::take),
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
