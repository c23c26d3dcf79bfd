//! `QueryEngine`: one conversation (seed 002 §2.3).

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Instant;

use futures::{Stream, StreamExt};
use gyre_protocol::{ContentBlock, Message, Role, SystemBlock, Usage};
use gyre_tools::{CanUseTool, PermissionDenial, ToolContext, ToolRegistry};
use serde::Serialize;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use gyre_compact::{Trigger, UsageAnchor};

use crate::compaction::{CompactionOutcome, ContextCompactor};
use crate::cost::usage_cost_usd;
use crate::deps::QueryDeps;
use crate::event::LoopEvent;
use crate::hooks::{StopHook, ToolHook};
use crate::query::{QueryParams, query};
use crate::state::{Terminal, TerminalReason};
use crate::transcript::{TranscriptEntry, TranscriptStore, timestamp};

/// What a conversation is configured with.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub session_id: String,
    pub cwd: PathBuf,
    pub model: String,
    pub fallback_model: Option<String>,
    pub system: Vec<SystemBlock>,
    pub max_turns: Option<u32>,
    pub max_budget_usd: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub token_budget: Option<u64>,
}

/// What a turn yields: loop events, with each message given its uuid.
#[derive(Debug, Clone)]
pub enum EngineEvent {
    /// A message joined the conversation (and the transcript).
    Message {
        uuid: String,
        message: Message,
        is_meta: bool,
    },
    /// Any other loop event (retries, fallback, compaction, denials, raw stream events…).
    Loop(LoopEvent),
    /// The end of the turn.
    Result(TurnResult),
}

/// The outcome of one `submit_message`, with the session's running totals.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    /// `success`, `error_max_turns`, `error_during_execution` or `error_max_budget_usd`.
    pub subtype: &'static str,
    pub is_error: bool,
    /// The final assistant text (or the error text).
    pub result: String,
    pub num_turns: u32,
    pub duration_ms: u64,
    pub duration_api_ms: u64,
    pub total_cost_usd: f64,
    pub usage: Usage,
    pub permission_denials: Vec<PermissionDenial>,
    pub terminal: Terminal,
    pub errors: Vec<String>,
}

/// Interrupts the turn in flight; cheap to clone, usable from a signal handler task.
#[derive(Debug, Clone, Default)]
pub struct InterruptHandle {
    current: Arc<StdMutex<CancellationToken>>,
}

impl InterruptHandle {
    /// Cancels the running turn (a no-op between turns).
    pub fn interrupt(&self) {
        if let Ok(token) = self.current.lock() {
            token.cancel();
        }
    }

    fn fresh(&self) -> CancellationToken {
        let token = CancellationToken::new();
        if let Ok(mut current) = self.current.lock() {
            *current = token.clone();
        }
        token
    }
}

/// One conversation: messages, usage, cost and denials persist across turns.
pub struct QueryEngine {
    config: EngineConfig,
    deps: Arc<dyn QueryDeps>,
    tools: Arc<ToolRegistry>,
    tool_context: ToolContext,
    can_use_tool: Arc<dyn CanUseTool>,
    compactor: Arc<Mutex<Box<dyn ContextCompactor>>>,
    transcript: Box<dyn TranscriptStore>,
    stop_hooks: Vec<Arc<dyn StopHook>>,
    tool_hooks: Vec<Arc<dyn ToolHook>>,
    messages: Vec<Message>,
    last_uuid: Option<String>,
    anchor: Option<UsageAnchor>,
    total_usage: Usage,
    total_cost_usd: f64,
    permission_denials: Vec<PermissionDenial>,
    interrupt: InterruptHandle,
    wrote_header: bool,
}

impl std::fmt::Debug for QueryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEngine")
            .field("session_id", &self.config.session_id)
            .field("model", &self.config.model)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl QueryEngine {
    #[must_use]
    pub fn new(
        config: EngineConfig,
        deps: Arc<dyn QueryDeps>,
        tools: Arc<ToolRegistry>,
        tool_context: ToolContext,
        can_use_tool: Arc<dyn CanUseTool>,
        compactor: Box<dyn ContextCompactor>,
        transcript: Box<dyn TranscriptStore>,
    ) -> Self {
        Self {
            config,
            deps,
            tools,
            tool_context,
            can_use_tool,
            compactor: Arc::new(Mutex::new(compactor)),
            transcript,
            stop_hooks: Vec::new(),
            tool_hooks: Vec::new(),
            messages: Vec::new(),
            last_uuid: None,
            anchor: None,
            total_usage: Usage::default(),
            total_cost_usd: 0.0,
            permission_denials: Vec::new(),
            interrupt: InterruptHandle::default(),
            wrote_header: false,
        }
    }

    /// Starts from an earlier history (`--resume`), chaining new lines onto `last_uuid`.
    #[must_use]
    pub fn with_history(mut self, messages: Vec<Message>, last_uuid: Option<String>) -> Self {
        self.messages = messages;
        self.last_uuid = last_uuid;
        self.wrote_header = true;
        self
    }

    #[must_use]
    pub fn with_stop_hook(mut self, hook: Arc<dyn StopHook>) -> Self {
        self.stop_hooks.push(hook);
        self
    }

    #[must_use]
    pub fn with_tool_hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.tool_hooks.push(hook);
        self
    }

    #[must_use]
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    #[must_use]
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    #[must_use]
    pub fn model(&self) -> &str {
        &self.config.model
    }

    /// Switches the model for the following turns (`/model`).
    pub fn set_model(&mut self, model: String) {
        self.config.model = model;
    }

    #[must_use]
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    #[must_use]
    pub fn total_cost_usd(&self) -> f64 {
        self.total_cost_usd
    }

    #[must_use]
    pub fn permission_denials(&self) -> &[PermissionDenial] {
        &self.permission_denials
    }

    #[must_use]
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// A handle that interrupts the turn in flight.
    #[must_use]
    pub fn interrupt_handle(&self) -> InterruptHandle {
        self.interrupt.clone()
    }

    /// Interrupts the turn in flight.
    pub fn interrupt(&self) {
        self.interrupt.interrupt();
    }

    /// Forgets the conversation (`/clear`); the transcript keeps what was written.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.anchor = None;
    }

    fn record(&mut self, kind: &str, message: Option<Message>, is_meta: bool) -> String {
        let uuid = self.deps.uuid();
        let entry = TranscriptEntry {
            kind: kind.to_owned(),
            subtype: None,
            uuid: uuid.clone(),
            parent_uuid: self.last_uuid.clone(),
            session_id: self.config.session_id.clone(),
            timestamp: timestamp(self.deps.now()),
            cwd: Some(self.config.cwd.to_string_lossy().into_owned()),
            is_meta,
            message,
            compact_metadata: None,
            history: None,
            model: (!self.wrote_header).then(|| self.config.model.clone()),
        };
        self.wrote_header = true;
        if let Err(e) = self.transcript.append(&entry) {
            tracing::error!(error = %e, "could not write the transcript");
        }
        self.last_uuid = Some(uuid.clone());
        uuid
    }

    fn record_boundary(&mut self, outcome: &CompactionOutcome) {
        let uuid = self.deps.uuid();
        let entry = TranscriptEntry {
            kind: "system".to_owned(),
            subtype: Some("compact_boundary".to_owned()),
            uuid: uuid.clone(),
            parent_uuid: self.last_uuid.clone(),
            session_id: self.config.session_id.clone(),
            timestamp: timestamp(self.deps.now()),
            cwd: None,
            is_meta: false,
            message: None,
            compact_metadata: Some(outcome.clone()),
            history: Some(self.messages.clone()),
            model: None,
        };
        if let Err(e) = self.transcript.append(&entry) {
            tracing::error!(error = %e, "could not write the transcript");
        }
        self.last_uuid = Some(uuid);
    }

    /// Compacts the conversation now (`/compact`).
    ///
    /// # Errors
    /// The summarizer's error text.
    pub async fn compact(&mut self) -> Result<Option<CompactionOutcome>, String> {
        let result = {
            let mut c = self.compactor.lock().await;
            c.compact_now(&self.messages, Trigger::Manual).await?
        };
        Ok(result.map(|(history, outcome)| {
            self.messages = history;
            self.anchor = None;
            self.record_boundary(&outcome);
            outcome
        }))
    }

    /// Runs one user turn. The user message is on disk before the first API call; the
    /// stream ends with [`EngineEvent::Result`].
    pub fn submit_message(
        &mut self,
        content: Vec<ContentBlock>,
    ) -> impl Stream<Item = EngineEvent> + '_ {
        async_stream::stream! {
            let started = Instant::now();
            let cancel = self.interrupt.fresh();
            let prompt = Message::user(content);
            let uuid = self.record("user", Some(prompt.clone()), false);
            self.messages.push(prompt.clone());
            yield EngineEvent::Message { uuid, message: prompt, is_meta: false };

            let mut tool_context = self.tool_context.clone();
            tool_context.cancel = cancel.clone();
            let params = QueryParams {
                messages: self.messages.clone(),
                system: self.config.system.clone(),
                model: self.config.model.clone(),
                fallback_model: self.config.fallback_model.clone(),
                max_turns: self.config.max_turns,
                max_output_tokens: self.config.max_output_tokens,
                token_budget: self.config.token_budget,
                deps: Arc::clone(&self.deps),
                tools: Arc::clone(&self.tools),
                tool_context,
                can_use_tool: Arc::clone(&self.can_use_tool),
                compactor: Arc::clone(&self.compactor),
                stop_hooks: self.stop_hooks.clone(),
                tool_hooks: self.tool_hooks.clone(),
                anchor: self.anchor,
                cancel: cancel.clone(),
            };
            let events = query(params);
            futures::pin_mut!(events);
            let mut api_ms: u64 = 0;
            let mut request_started: Option<Instant> = None;
            let mut last_text = String::new();
            let mut budget_exceeded = false;
            let mut terminal: Option<Terminal> = None;
            while let Some(event) = events.next().await {
                match event {
                    LoopEvent::Message { message, is_meta } => {
                        if message.role == Role::Assistant {
                            let text = message.text();
                            if !text.is_empty() {
                                last_text = text;
                            }
                        }
                        let kind = match message.role { Role::User => "user", Role::Assistant => "assistant" };
                        let uuid = self.record(kind, Some(message.clone()), is_meta);
                        self.messages.push(message.clone());
                        yield EngineEvent::Message { uuid, message, is_meta };
                    }
                    LoopEvent::RequestStart { .. } => {
                        request_started = Some(Instant::now());
                        yield EngineEvent::Loop(event);
                    }
                    LoopEvent::Usage { ref model, usage, .. } => {
                        if let Some(t) = request_started.take() {
                            api_ms += u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
                        }
                        self.total_usage.add(&usage);
                        self.total_cost_usd += usage_cost_usd(model, &usage);
                        // The response's message is the next one in the history.
                        self.anchor = Some(UsageAnchor { usage, message_index: self.messages.len() });
                        if let Some(max) = self.config.max_budget_usd
                            && self.total_cost_usd >= max
                            && !budget_exceeded
                        {
                            budget_exceeded = true;
                            cancel.cancel();
                        }
                        yield EngineEvent::Loop(event);
                    }
                    LoopEvent::Fallback { ref fallback, .. } => {
                        self.config.model.clone_from(fallback);
                        self.config.fallback_model = None;
                        yield EngineEvent::Loop(event);
                    }
                    LoopEvent::HistoryReplaced(history) => {
                        // Everything before the boundary is released here.
                        self.messages = history;
                        self.anchor = None;
                    }
                    LoopEvent::Compacted(ref outcome) => {
                        self.record_boundary(outcome);
                        yield EngineEvent::Loop(event);
                    }
                    LoopEvent::PermissionDenied { ref denial, .. } => {
                        self.permission_denials.push(denial.clone());
                        yield EngineEvent::Loop(event);
                    }
                    LoopEvent::Terminal(t) => {
                        terminal = Some(t);
                    }
                    LoopEvent::Stream(_)
                    | LoopEvent::ToolStarted { .. }
                    | LoopEvent::Retry(_)
                    | LoopEvent::Tombstone
                    | LoopEvent::Transition(_) => yield EngineEvent::Loop(event),
                }
            }
            let terminal = terminal.unwrap_or(Terminal {
                reason: TerminalReason::ModelError,
                turn_count: 0,
                transitions: Vec::new(),
                error: Some("the query ended without a result".to_owned()),
            });
            let (subtype, is_error, errors) = if budget_exceeded {
                let max = self.config.max_budget_usd.unwrap_or_default();
                ("error_max_budget_usd", true, vec![format!("Reached maximum budget (${max:.2})")])
            } else {
                match terminal.reason {
                    TerminalReason::MaxTurns => ("error_max_turns", true, terminal.error.clone().into_iter().collect()),
                    r if r.is_error() => ("error_during_execution", true, terminal.error.clone().into_iter().collect()),
                    _ => ("success", false, Vec::new()),
                }
            };
            let result = if is_error && subtype != "error_max_turns" {
                errors.first().cloned().unwrap_or_default()
            } else {
                last_text
            };
            yield EngineEvent::Result(TurnResult {
                subtype,
                is_error,
                result,
                num_turns: terminal.turn_count,
                duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                duration_api_ms: api_ms,
                total_cost_usd: self.total_cost_usd,
                usage: self.total_usage,
                permission_denials: self.permission_denials.clone(),
                terminal,
                errors,
            });
        }
    }
}
