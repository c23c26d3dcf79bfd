//! `QueryEngine`: one conversation, turn after turn.
//!
//! The engine owns the [`Conversation`] (messages, model, fallback, usage anchor) and
//! lends it to each turn's query, which keeps it up to date. The rest is split by
//! concern, so that what plugs in next (the SDK control protocol, hooks, sub-agents)
//! finds one place to go:
//!
//! - `turn`: driving one user turn (`submit_message`): the query, what each loop event
//!   does to the session (transcript, usage, denials), and the turn's result;
//! - `record`: the transcript, written before each API call, with parent links;
//! - `usage`: usage and cost totals, and the `--max-budget-usd` check;
//! - `denials`: the permission denials of the session.

mod denials;
pub(crate) mod record;
mod turn;
mod usage;

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};

use gyre_compact::Trigger;
use gyre_protocol::{Message, SystemBlock, Usage};
use gyre_tools::{CanUseTool, PermissionDenial, ToolContext, ToolRegistry};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactionError, CompactionOutcome, ContextCompactor};
use crate::conversation::Conversation;
use crate::deps::QueryDeps;
use crate::event::SubagentEvents;
use crate::hooks::{StopHook, ToolHook};
use crate::transcript::TranscriptStore;
use denials::Denials;
use record::Recorder;
pub use turn::{EngineEvent, TurnResult};
pub use usage::{ModelTotals, UsageMeter};

/// What a conversation is configured with.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The session's id (transcript file name, `session_id` of output lines).
    pub session_id: String,
    /// The working directory, recorded in the transcript.
    pub cwd: PathBuf,
    /// The model asked first.
    pub model: String,
    /// The model to switch to after repeated overloads.
    pub fallback_model: Option<String>,
    /// The system prompt.
    pub system: Vec<SystemBlock>,
    /// The most model turns a `submit_message` may take (`--max-turns`).
    pub max_turns: Option<u32>,
    /// Spend after which the session stops (`--max-budget-usd`).
    pub max_budget_usd: Option<f64>,
    /// A fixed `max_tokens` that also disables escalation.
    pub max_output_tokens: Option<u32>,
    /// Output tokens the model is nudged to go on spending.
    pub token_budget: Option<u64>,
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

    /// Whether the turn in flight (or the last one) was interrupted.
    #[must_use]
    pub fn is_interrupted(&self) -> bool {
        self.current.lock().is_ok_and(|token| token.is_cancelled())
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
    /// Its `model` and `fallback_model` were moved into `conversation`, their one owner.
    config: EngineConfig,
    deps: Arc<dyn QueryDeps>,
    tools: Arc<ToolRegistry>,
    tool_context: ToolContext,
    can_use_tool: Arc<dyn CanUseTool>,
    compactor: Arc<Mutex<Box<dyn ContextCompactor>>>,
    recorder: Recorder,
    stop_hooks: Vec<Arc<dyn StopHook>>,
    tool_hooks: Vec<Arc<dyn ToolHook>>,
    conversation: Conversation,
    usage: UsageMeter,
    denials: Denials,
    interrupt: InterruptHandle,
    /// What the Agent tool's sub-agents report (messages, usage), drained during a turn.
    subagents: Option<SubagentEvents>,
}

impl std::fmt::Debug for QueryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEngine")
            .field("session_id", &self.config.session_id)
            .field("model", &self.conversation.model())
            .field("messages", &self.conversation.messages().len())
            .finish_non_exhaustive()
    }
}

impl QueryEngine {
    /// A conversation with an empty history.
    #[must_use]
    pub fn new(
        mut config: EngineConfig,
        deps: Arc<dyn QueryDeps>,
        tools: Arc<ToolRegistry>,
        tool_context: ToolContext,
        can_use_tool: Arc<dyn CanUseTool>,
        compactor: Box<dyn ContextCompactor>,
        transcript: Box<dyn TranscriptStore>,
    ) -> Self {
        let conversation = Conversation::new(
            Vec::new(),
            std::mem::take(&mut config.model),
            config.fallback_model.take(),
        );
        let usage = UsageMeter::new(conversation.model());
        Self {
            recorder: Recorder::new(transcript, &config.session_id, &config.cwd),
            config,
            deps,
            tools,
            tool_context,
            can_use_tool,
            compactor: Arc::new(Mutex::new(compactor)),
            stop_hooks: Vec::new(),
            tool_hooks: Vec::new(),
            conversation,
            usage,
            denials: Denials::default(),
            interrupt: InterruptHandle::default(),
            subagents: None,
        }
    }

    /// Starts from an earlier history (`--resume`), chaining new lines onto `last_uuid`.
    #[must_use]
    pub fn with_history(mut self, messages: Vec<Message>, last_uuid: Option<String>) -> Self {
        self.conversation.replace_history(messages);
        self.recorder.resume(last_uuid);
        self
    }

    /// Receives the Agent tool's sub-agent events: their messages are yielded as
    /// [`EngineEvent::Subagent`] and their usage adds to the session's.
    #[must_use]
    pub fn with_subagent_events(mut self, events: SubagentEvents) -> Self {
        self.subagents = Some(events);
        self
    }

    /// Adds a hook run when the model would end the turn.
    #[must_use]
    pub fn with_stop_hook(mut self, hook: Arc<dyn StopHook>) -> Self {
        self.stop_hooks.push(hook);
        self
    }

    /// Adds a hook run after each tool call.
    #[must_use]
    pub fn with_tool_hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.tool_hooks.push(hook);
        self
    }

    /// The conversation so far.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        self.conversation.messages()
    }

    /// The system prompt each request sends.
    #[must_use]
    pub fn system(&self) -> &[gyre_protocol::SystemBlock] {
        &self.config.system
    }

    /// Another directory the tools may work in from the next call on (`/add-dir`).
    pub fn add_working_dir(&mut self, dir: PathBuf) {
        if !self.tool_context.working_dirs.contains(&dir) {
            self.tool_context.working_dirs.push(dir);
        }
    }

    /// The directories the tools may work in: the cwd first.
    #[must_use]
    pub fn working_dirs(&self) -> &[PathBuf] {
        &self.tool_context.working_dirs
    }

    /// The session's id.
    #[must_use]
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    /// The model in use now (the fallback after a switch).
    #[must_use]
    pub fn model(&self) -> &str {
        self.conversation.model()
    }

    /// Switches the model for the following turns (`/model`).
    pub fn set_model(&mut self, model: String) {
        self.usage.set_model(&model);
        self.conversation.set_model(model);
    }

    /// The session's usage, cost and model, to read at any time (also during a turn).
    #[must_use]
    pub fn meter(&self) -> UsageMeter {
        self.usage.clone()
    }

    /// Tokens used by the session so far, sub-agents included.
    #[must_use]
    pub fn total_usage(&self) -> Usage {
        self.usage.usage()
    }

    /// What the session has cost so far, in US dollars.
    #[must_use]
    pub fn total_cost_usd(&self) -> f64 {
        self.usage.cost_usd()
    }

    /// Every call the permission policy refused this session.
    #[must_use]
    pub fn permission_denials(&self) -> &[PermissionDenial] {
        self.denials.all()
    }

    /// The tools on offer.
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
        self.conversation.clear();
    }

    /// Records the system prompt in the transcript (an Agent SDK's
    /// `systemPromptSnapshot`): a resume reads it back ([`crate::LoadedSession`]).
    pub fn record_system_prompt(&mut self, text: &str) {
        self.recorder.system_prompt(self.deps.as_ref(), text);
    }

    /// Takes the conversation back to its first `keep` messages, before the prompt
    /// `rewound_to` (`text`): a `rewind` line with the history left is written, and the
    /// next turn goes on from there. A `keep` past the end keeps everything.
    pub fn rewind_conversation(&mut self, keep: usize, rewound_to: &str, text: &str) {
        let history: Vec<Message> = self
            .conversation
            .messages()
            .iter()
            .take(keep)
            .cloned()
            .collect();
        self.conversation.replace_history(history);
        self.recorder.rewind(
            self.deps.as_ref(),
            rewound_to,
            text,
            self.conversation.messages(),
        );
    }

    /// Compacts the conversation now (`/compact`).
    ///
    /// # Errors
    /// The compactor's [`CompactionError`] (the summarizer's, say).
    pub async fn compact(&mut self) -> Result<Option<CompactionOutcome>, CompactionError> {
        self.compact_with(None).await
    }

    /// Compacts the conversation now with the user's instructions for the summary
    /// (`/compact <instructions>`).
    ///
    /// # Errors
    /// The compactor's [`CompactionError`] (the summarizer's, say).
    pub async fn compact_with(
        &mut self,
        instructions: Option<&str>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        let result = {
            let mut c = self.compactor.lock().await;
            c.compact_now_with(self.conversation.messages(), Trigger::Manual, instructions)
                .await?
        };
        Ok(result.map(|(history, outcome)| {
            self.conversation.replace_history(history);
            self.recorder
                .boundary(self.deps.as_ref(), &outcome, self.conversation.messages());
            outcome
        }))
    }
}
