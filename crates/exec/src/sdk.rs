//! `--input-format stream-json`: the session an Agent SDK drives.
//!
//! A thread reads stdin for the whole session, from before the session is built
//! ([`SdkInput`]): answers to gyre's own control requests reach the [`ControlChannel`] at
//! once, so SDK MCP servers (`mcp_message`) can be connected while the session starts.
//! A dispatcher task answers the SDK's control requests at once — also while a turn
//! runs, so `interrupt` and `can_use_tool` answers get through — and queues user
//! messages for the turn loop, which runs them one after the other until stdin ends.

use std::io::BufRead;
use std::sync::{Arc, Mutex, PoisonError};

use gyre_loop::InterruptHandle;
use gyre_protocol::ContentBlock;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::ExecError;
use crate::control::{self, ControlChannel, Inbound, LineOut};
use crate::headless::{self, Output};
use crate::stream_json::{self, ContextFacts};
use gyre_core::gate::Gate;
use gyre_core::session::Session;

/// stdin of an SDK session, read from the start.
pub struct SdkInput {
    /// gyre's requests to the SDK and their answers.
    pub channel: ControlChannel,
    /// Every line but the answers, for the dispatcher.
    lines: mpsc::UnboundedReceiver<Inbound>,
}

impl SdkInput {
    /// Starts reading stdin. Answers (`control_response`) are handed to their waiting
    /// requests as they arrive; the rest waits for [`run`]. When stdin ends, requests
    /// still waiting fail.
    #[must_use]
    pub fn start(out: LineOut) -> Self {
        let (inbound_tx, mut inbound_rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let inbound = match line {
                    Ok(l) if l.trim().is_empty() => continue,
                    Ok(l) => control::parse_inbound(&l),
                    Err(e) => Inbound::Invalid(format!("could not read stdin: {e}")),
                };
                if inbound_tx.send(inbound).is_err() {
                    break;
                }
            }
        });
        let channel = ControlChannel::new(out);
        let (lines_tx, lines) = mpsc::unbounded_channel();
        let router = channel.clone();
        tokio::spawn(async move {
            while let Some(inbound) = inbound_rx.recv().await {
                match inbound {
                    Inbound::Response { request_id, result } => {
                        resolve(&router, &request_id, result);
                    }
                    other => {
                        if lines_tx.send(other).is_err() {
                            break;
                        }
                    }
                }
            }
            router.close();
        });
        Self { channel, lines }
    }
}

fn resolve(channel: &ControlChannel, request_id: &str, result: Result<Value, String>) {
    if !channel.resolve(request_id, result) {
        eprintln!("gyre: control_response for unknown request {request_id:?}; ignored");
    }
}

/// A user message waiting to run, with the `interrupt` count when it arrived.
struct Turn {
    content: Vec<ContentBlock>,
    interrupts: u64,
}

/// What the dispatcher shares with the turn loop.
#[derive(Default)]
struct Shared {
    /// `set_model`: the model for the next turn (`None` inside: back to the default).
    next_model: Option<Option<String>>,
    /// Counts `interrupt` requests: one that came after a message was sent but before
    /// its turn got under way still interrupts that turn.
    interrupts: u64,
    /// Tokens of the last request's context, for `get_context_usage`.
    context_tokens: u64,
    model: String,
}

struct Dispatcher {
    out: LineOut,
    channel: ControlChannel,
    gate: Arc<Gate>,
    interrupt: InterruptHandle,
    shared: Arc<Mutex<Shared>>,
    turns: mpsc::UnboundedSender<Turn>,
    default_model: String,
    context: ContextFacts,
    mcp: Arc<gyre_mcp::McpServers>,
    agents: gyre_loop::AgentCatalog,
}

impl Dispatcher {
    fn handle(&self, inbound: Inbound) {
        match inbound {
            Inbound::User(content) => {
                let interrupts = self
                    .shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .interrupts;
                let _ = self.turns.send(Turn {
                    content,
                    interrupts,
                });
            }
            Inbound::Request {
                request_id,
                request,
            } if matches!(
                request.get("subtype").and_then(Value::as_str),
                Some("mcp_reconnect" | "mcp_toggle")
            ) =>
            {
                // Starting a server takes a while: answered when it is done, while other
                // requests go on.
                let (out, mcp, channel) = (
                    self.out.clone(),
                    Arc::clone(&self.mcp),
                    self.channel.clone(),
                );
                tokio::spawn(async move {
                    let reply = match mcp_control(&mcp, &channel, &request).await {
                        Ok(()) => control::success(&request_id, &json!({})),
                        Err(e) => control::error(&request_id, &e),
                    };
                    if let Err(e) = out.line(&reply) {
                        eprintln!("gyre: could not write a control response: {e}");
                    }
                });
            }
            Inbound::Request {
                request_id,
                request,
            } => {
                let reply = match self.answer(&request) {
                    Ok(body) => control::success(&request_id, &body),
                    Err(e) => control::error(&request_id, &e),
                };
                if let Err(e) = self.out.line(&reply) {
                    eprintln!("gyre: could not write a control response: {e}");
                }
            }
            Inbound::Response { request_id, result } => {
                resolve(&self.channel, &request_id, result);
            }
            // gyre's answers to the SDK's requests are immediate: nothing to cancel.
            Inbound::Cancel { .. } => {}
            Inbound::Invalid(message) => eprintln!("gyre: {message}; line ignored"),
        }
    }

    fn answer(&self, request: &Value) -> Result<Value, String> {
        let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
        let text = |key: &str| request.get(key).and_then(Value::as_str);
        match subtype {
            "initialize" => {
                if let Some(hooks) = request.get("hooks").filter(|h| h.is_object()) {
                    self.gate.add_sdk_hooks(hooks, self.channel.client());
                }
                // The SDK's `agents={…}`: sub-agents the Agent tool offers from now on.
                if let Some(agents) = request.get("agents").filter(|a| a.is_object()) {
                    let definitions = gyre_loop::parse_agents_json(&agents.to_string())
                        .map_err(|e| format!("initialize: invalid `agents`: {e}"))?;
                    self.agents.add(definitions);
                }
                let model = self
                    .shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .model
                    .clone();
                Ok(json!({
                    "commands": [],
                    "agents": self.agents.names(),
                    "output_style": "default",
                    "available_output_styles": ["default"],
                    "models": [{ "value": model, "displayName": model, "description": "" }],
                    "account": {},
                    "pid": std::process::id(),
                }))
            }
            "interrupt" => {
                self.shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .interrupts += 1;
                self.interrupt.interrupt();
                Ok(json!({}))
            }
            "set_permission_mode" => {
                let mode = text("mode").ok_or("set_permission_mode needs a `mode`")?;
                self.gate.set_mode(mode).map_err(|e| e.to_string())?;
                Ok(json!({}))
            }
            "set_model" => {
                let model = text("model").map(str::to_owned);
                let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                shared.model = model.clone().unwrap_or_else(|| self.default_model.clone());
                shared.next_model = Some(model);
                Ok(json!({}))
            }
            "mcp_status" => Ok(json!({
                "mcpServers": gyre_core::mcp_config::sdk_status_entries(&self.mcp)
            })),
            "get_context_usage" => {
                let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                let window = self.context.window(&shared.model);
                #[allow(clippy::cast_precision_loss)]
                let percentage = shared.context_tokens as f64 * 100.0 / window as f64;
                Ok(json!({
                    "categories": [],
                    "totalTokens": shared.context_tokens,
                    "maxTokens": window,
                    "rawMaxTokens": window,
                    "percentage": percentage,
                    "model": shared.model,
                    "isAutoCompactEnabled": self.context.autocompact,
                    "memoryFiles": [],
                    "mcpTools": [],
                    "agents": [],
                    "gridRows": [],
                }))
            }
            "rewind_files" => Err(
                "rewind_files is not supported by gyre: it keeps no file checkpoints".to_owned(),
            ),
            "stop_task" => Err(format!(
                "no task {:?}: gyre runs no background tasks",
                text("task_id").unwrap_or("")
            )),
            other => Err(format!("unknown control request subtype {other:?}")),
        }
    }
}

/// `mcp_reconnect` (`serverName`) and `mcp_toggle` (`serverName`, `enabled`): restarts
/// the server, or disconnects it and withdraws its tools from the next request, or
/// starts it again.
async fn mcp_control(
    mcp: &gyre_mcp::McpServers,
    channel: &ControlChannel,
    request: &Value,
) -> Result<(), String> {
    let subtype = request.get("subtype").and_then(Value::as_str).unwrap_or("");
    let name = request
        .get("serverName")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{subtype} needs a `serverName`"))?;
    let sdk = (mcp.transport(name) == Some("sdk"))
        .then(|| gyre_core::mcp_config::sdk_channel(name, &channel.client()));
    let done = if subtype == "mcp_toggle" {
        let enabled = request
            .get("enabled")
            .and_then(Value::as_bool)
            .ok_or("mcp_toggle needs a boolean `enabled`")?;
        mcp.set_enabled(name, enabled, sdk).await
    } else {
        mcp.reconnect(name, sdk).await
    };
    done.map_err(|e| e.to_string())
}

/// Runs the session until stdin ends (or Ctrl+C). Returns whether the last turn was an
/// error.
pub async fn run(
    session: &mut Session,
    input: SdkInput,
    out: LineOut,
    ask_over_stdio: bool,
    partial: bool,
    hook_events: bool,
    ctrl_c: &CancellationToken,
) -> Result<bool, ExecError> {
    if hook_events {
        let out = out.clone();
        session.gate.report_hooks_to(Arc::new(move |line| {
            if let Err(e) = out.line(&line) {
                eprintln!("gyre: could not write a hook event: {e}");
            }
        }));
    }
    let SdkInput {
        channel,
        lines: mut inbound_rx,
    } = input;
    let shared = Arc::new(Mutex::new(Shared {
        model: session.engine.model().to_owned(),
        ..Shared::default()
    }));
    if ask_over_stdio {
        session.gate.ask_over(channel.client());
    }
    let (turns_tx, mut turns_rx) = mpsc::unbounded_channel();
    let dispatcher = Dispatcher {
        out: out.clone(),
        channel: channel.clone(),
        gate: Arc::clone(&session.gate),
        interrupt: session.engine.interrupt_handle(),
        shared: Arc::clone(&shared),
        turns: turns_tx,
        default_model: session.engine.model().to_owned(),
        context: session.facts.context,
        mcp: Arc::clone(&session.mcp),
        agents: session.agents.clone(),
    };
    tokio::spawn(async move {
        while let Some(inbound) = inbound_rx.recv().await {
            dispatcher.handle(inbound);
        }
    });

    let output_line = out.clone();
    let mut output = Output::new(out, crate::OutputFormat::StreamJson, partial);
    headless::print_init(&mut output, &session.facts)?;
    let mut last_error = false;
    loop {
        // Ctrl+C between turns ends the session too, not only during one.
        let Turn {
            content,
            interrupts: seen,
        } = tokio::select! {
            next = turns_rx.recv() => match next {
                Some(turn) => turn,
                None => break,
            },
            () = ctrl_c.cancelled() => break,
        };
        if let Err(e) = control::check_tool_results(session.engine.messages(), &content) {
            refuse(&output_line, session, &e)?;
            last_error = true;
            continue;
        }
        let next_model = shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_model
            .take();
        if let Some(model) = next_model {
            let model = model.unwrap_or_else(|| {
                shared
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .model
                    .clone()
            });
            session.facts.model.clone_from(&model);
            session.engine.set_model(model);
        }
        if let Some(instructions) = compact_command(&content) {
            last_error = compact(&output_line, session, instructions.as_deref()).await?;
            continue;
        }
        let content = match gyre_core::gate::prompt_hooks(&session.gate, &session.engine, content)
            .await
        {
            Ok(content) => content,
            Err(reason) => {
                let text = format!("the prompt was blocked by a UserPromptSubmit hook: {reason}");
                refuse(&output_line, session, &text)?;
                last_error = true;
                continue;
            }
        };
        let interrupt = session.engine.interrupt_handle();
        let started = || {
            // An interrupt sent after this message but before its turn was under way.
            if shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .interrupts
                != seen
            {
                interrupt.interrupt();
            }
        };
        let result = headless::run_turn(
            &mut session.engine,
            content,
            &mut session.facts,
            &mut output,
            started,
        )
        .await?;
        last_error = result.is_error;
        // A session that cannot be recorded stops: its failure was reported on stderr
        // when it happened.
        if session.transcript_health.failure().is_some() {
            last_error = true;
            break;
        }
        let used = session.facts.last_usage;
        shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .context_tokens =
            used.input_tokens + used.cache_read_input_tokens + used.cache_creation_input_tokens;
        if ctrl_c.is_cancelled() {
            break;
        }
    }
    Ok(last_error)
}

/// `/compact [instructions]`: a user message that is only that command.
fn compact_command(content: &[ContentBlock]) -> Option<Option<String>> {
    let [ContentBlock::Text { text, .. }] = content else {
        return None;
    };
    let rest = text.trim().strip_prefix("/compact")?;
    if !(rest.is_empty() || rest.starts_with(char::is_whitespace)) {
        return None;
    }
    let rest = rest.trim();
    Some((!rest.is_empty()).then(|| rest.to_owned()))
}

/// Runs `/compact`: a `compact_boundary` line and a result line, as Claude Code answers
/// the command from an SDK. Returns whether it failed.
async fn compact(
    out: &LineOut,
    session: &mut Session,
    instructions: Option<&str>,
) -> Result<bool, ExecError> {
    let text = match session.engine.compact_with(instructions).await {
        Ok(Some(outcome)) => {
            out.line(&stream_json::compact_boundary(
                &outcome,
                &session.facts.session_id,
                &uuid::Uuid::new_v4().to_string(),
            ))?;
            "Compacted."
        }
        Ok(None) => "Nothing to compact yet.",
        Err(e) => {
            refuse(out, session, &format!("/compact failed: {e}"))?;
            return Ok(true);
        }
    };
    out.line(&json!({
        "type": "result",
        "subtype": "success",
        "is_error": false,
        "duration_ms": 0,
        "duration_api_ms": 0,
        "num_turns": 0,
        "result": text,
        "stop_reason": null,
        "session_id": session.facts.session_id,
        "total_cost_usd": session.engine.total_cost_usd(),
        "usage": session.engine.total_usage(),
        "modelUsage": {},
        "permission_denials": [],
        "uuid": uuid::Uuid::new_v4().to_string(),
    }))?;
    Ok(false)
}

/// A stdin message that will not run: said on stderr, and answered with an error result
/// line so the driver is not left waiting.
fn refuse(out: &LineOut, session: &Session, reason: &str) -> Result<(), ExecError> {
    eprintln!("gyre: {reason}");
    out.line(&stream_json::refused(
        reason,
        &session.engine.total_usage(),
        session.engine.total_cost_usd(),
        &session.facts.session_id,
        &uuid::Uuid::new_v4().to_string(),
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_message_that_is_the_compact_command_compacts() {
        let text = |t: &str| vec![ContentBlock::text(t)];
        assert_eq!(compact_command(&text("/compact")), Some(None));
        assert_eq!(
            compact_command(&text(" /compact  keep the plan ")),
            Some(Some("keep the plan".into()))
        );
        assert_eq!(compact_command(&text("/compactify")), None);
        assert_eq!(compact_command(&text("please /compact")), None);
        let two = vec![ContentBlock::text("/compact"), ContentBlock::text("more")];
        assert_eq!(compact_command(&two), None);
    }
}
