//! `gyre -p`: run turns without a terminal and print text, json or stream-json.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use futures::StreamExt;
use gyre_loop::{EngineEvent, LoopEvent, QueryEngine, TurnResult};
use gyre_protocol::{ContentBlock, Message};
use serde_json::Value;

use crate::args::OutputFormat;
use crate::stream_json::{self, ResponseMeta, SessionFacts};

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
pub async fn run_turn<W: Write>(
    engine: &mut QueryEngine,
    content: Vec<ContentBlock>,
    facts: &mut SessionFacts,
    output: &mut Output<W>,
) -> Result<TurnResult> {
    let session_id = facts.session_id.clone();
    let events = engine.submit_message(content);
    futures::pin_mut!(events);
    let mut first_user = true;
    let mut meta = ResponseMeta {
        model: facts.model.clone(),
        ..ResponseMeta::default()
    };
    let mut result: Option<TurnResult> = None;
    while let Some(event) = events.next().await {
        match event {
            EngineEvent::Message {
                uuid,
                message,
                is_meta: _,
            } => {
                // The prompt itself is the driver's own input: not echoed back.
                if std::mem::take(&mut first_user) {
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
                    let mut line = stream_json::message(
                        &message,
                        &ResponseMeta::default(),
                        &session_id,
                        &uuid,
                    );
                    line["parent_tool_use_id"] = parent_tool_use_id.into();
                    output.line(&line)?;
                }
            }
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
            output.line(&stream_json::result(&result, &session_id, &uuid()))?;
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

/// Reads one `--input-format stream-json` line: `{"type":"user","message":{…}}`.
///
/// # Errors
/// A line that is not a user message, with what was expected.
pub fn parse_input_line(line: &str) -> Result<Vec<ContentBlock>> {
    let v: Value = serde_json::from_str(line)
        .with_context(|| format!("stdin line is not JSON: {}", truncate(line, 80)))?;
    if v.get("type").and_then(Value::as_str) != Some("user") {
        anyhow::bail!(
            "stdin line has type {}, expected {{\"type\":\"user\",\"message\":{{\"role\":\"user\",\"content\":…}}}}",
            v.get("type")
                .map_or_else(|| "(none)".to_owned(), Value::to_string)
        );
    }
    let message: Message = serde_json::from_value(v.get("message").cloned().unwrap_or(Value::Null))
        .context(
            "stdin line has no valid `message` (expected {\"role\":\"user\",\"content\":…})",
        )?;
    Ok(message.content)
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Reads user turns from stdin as JSON lines until EOF.
pub fn read_input_lines(stdin: impl BufRead) -> impl Iterator<Item = Result<Vec<ContentBlock>>> {
    stdin.lines().filter_map(|line| match line {
        Ok(l) if l.trim().is_empty() => None,
        Ok(l) => Some(parse_input_line(&l)),
        Err(e) => Some(Err(e.into())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_lines_accept_string_or_block_content() {
        let a = parse_input_line(r#"{"type":"user","message":{"role":"user","content":"hi"}}"#)
            .unwrap();
        assert_eq!(a, vec![ContentBlock::text("hi")]);
        let b = parse_input_line(
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"yo"}]},"session_id":"x"}"#,
        )
        .unwrap();
        assert_eq!(b, vec![ContentBlock::text("yo")]);
    }

    #[test]
    fn input_lines_that_are_not_user_messages_are_clear_errors() {
        let err = parse_input_line(r#"{"type":"assistant"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected"), "{err}");
        let err = parse_input_line("not json").unwrap_err().to_string();
        assert!(err.contains("not JSON"), "{err}");
    }
}
