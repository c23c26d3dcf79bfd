//! The Agent tool (alias `Task`): a sub-agent is one more [`query`] with its own history,
//! system prompt, tools, model and max turns, the parent's permission policy and abort
//! signal. Its final text is the tool result; its messages and usage reach the session
//! through a [`SubagentEvent`] channel the engine drains; its transcript is a sidechain
//! file beside the session's.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use gyre_protocol::{ContentBlock, Message, Role, SystemBlock};
use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError,
    ToolOutput, ToolRegistry,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::agents::{
    AGENT_TOOL_ALIASES, AGENT_TOOL_NAME, AgentCatalog, AgentDefinition, is_agent_tool,
};
use crate::compaction::NoCompaction;
use crate::conversation::Conversation;
use crate::deps::QueryDeps;
use crate::engine::record::Recorder;
use crate::event::{LoopEvent, SubagentEvent, SubagentProgress, SubagentSender, SubagentState};
use crate::query::{QueryParams, query};
use crate::state::{Terminal, TerminalReason};
use crate::transcript::{JsonlTranscript, MemoryTranscript, ResponseInfo, TranscriptStore};

/// Turns a sub-agent may take unless its caller says otherwise.
pub const DEFAULT_SUBAGENT_MAX_TURNS: u32 = 50;
/// The longest result kept inline; longer ones are persisted by the result budget.
const MAX_RESULT_CHARS: usize = 100_000;

/// What every sub-agent of a session shares.
pub struct AgentSetup {
    /// The sub-agent types on offer (`subagent_type`).
    pub definitions: AgentCatalog,
    /// The session's tools; the Agent tool itself is never offered to a sub-agent.
    pub tools: ToolRegistry,
    /// How sub-agents call the model.
    pub deps: Arc<dyn QueryDeps>,
    /// The session's permission policy, which sub-agents' calls pass too.
    pub can_use_tool: Arc<dyn CanUseTool>,
    /// The session's model, for definitions that inherit it.
    pub model: String,
    /// The most turns a sub-agent may take.
    pub max_turns: u32,
    /// The session's id, recorded in sidechain transcripts.
    pub session_id: String,
    /// Where sidechain transcripts go (`<session dir>/subagents`); `None` keeps them in memory.
    pub sidechain_dir: Option<PathBuf>,
    /// SubagentStart and SubagentStop hooks.
    pub hook: Option<Arc<dyn crate::hooks::SubagentHook>>,
    /// Appended to every sub-agent's system prompt (an Agent SDK's
    /// `appendSubagentSystemPrompt`).
    pub append_system_prompt: Option<String>,
}

impl std::fmt::Debug for AgentSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentSetup")
            .field("definitions", &self.definitions)
            .field("tools", &self.tools)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// The Agent tool.
pub struct AgentTool {
    setup: AgentSetup,
    events: SubagentSender,
}

impl std::fmt::Debug for AgentTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentTool").finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AgentInput {
    /// A short (3-5 word) description of the task
    description: String,
    /// The task for the agent to perform
    prompt: String,
    /// The type of agent to use (default general-purpose)
    #[serde(default)]
    subagent_type: Option<String>,
}

impl AgentTool {
    /// The tool; its sub-agents report to `events` (the engine holds the receiver).
    #[must_use]
    pub fn new(mut setup: AgentSetup, events: SubagentSender) -> Self {
        // Sub-agents cannot start sub-agents.
        let names: Vec<_> = setup
            .tools
            .names()
            .into_iter()
            .filter(|n| !is_agent_tool(n))
            .collect();
        setup.tools = setup.tools.filtered(&names);
        Self { setup, events }
    }

    fn definition(&self, name: &str) -> Option<AgentDefinition> {
        self.setup.definitions.get(name)
    }

    fn unknown(&self, kind: &str) -> String {
        let known = self.setup.definitions.names();
        format!(
            "Agent type '{kind}' not found. Available agents: {}",
            known.join(", ")
        )
    }

    /// The sub-agent's transcript, `agent-<id>.jsonl`, and beside it (as the reference
    /// CLI writes it) `agent-<id>.meta.json` naming its type and the call that started
    /// it, so readers of the session link the two.
    fn sidechain(&self, id: &str, kind: &str, description: &str) -> Box<dyn TranscriptStore> {
        let Some(dir) = &self.setup.sidechain_dir else {
            return Box::new(MemoryTranscript::default());
        };
        let path = dir.join(format!("agent-{id}.jsonl"));
        let opened = JsonlTranscript::open(path.clone()).and_then(|t| {
            let meta = serde_json::json!({
                "agentType": kind,
                "description": description,
                "toolUseId": id,
            });
            std::fs::write(dir.join(format!("agent-{id}.meta.json")), meta.to_string())?;
            Ok(t)
        });
        match opened {
            Ok(t) => Box::new(t),
            Err(e) => {
                tracing::warn!("sub-agent transcript {}: {e}", path.display());
                Box::new(MemoryTranscript::default())
            }
        }
    }

    async fn run(&self, input: AgentInput, ctx: &ToolContext) -> ToolOutput {
        let kind = input.subagent_type.as_deref().unwrap_or("general-purpose");
        let Some(def) = self.definition(kind) else {
            return ToolOutput::tool_use_error(self.unknown(kind));
        };
        let tools = match &def.tools {
            Some(names) => self.setup.tools.filtered(names),
            None => self.setup.tools.clone(),
        };
        let model = def.model_or(&self.setup.model);
        let parent_id = ctx
            .tool_use_id
            .clone()
            .unwrap_or_else(|| self.setup.deps.uuid());
        let mut sidechain = Sidechain {
            recorder: Recorder::new(
                self.sidechain(&parent_id, kind, &input.description),
                &self.setup.session_id,
                &ctx.cwd,
            )
            .sidechain(&parent_id),
            deps: self.setup.deps.as_ref(),
            events: &self.events,
            parent_id: &parent_id,
            model: &model,
        };
        let mut blocks = vec![ContentBlock::text(input.prompt)];
        if let Some(hook) = &self.setup.hook {
            blocks.extend(
                hook.on_start(&parent_id, kind)
                    .await
                    .into_iter()
                    .map(ContentBlock::text),
            );
        }
        let prompt = Message::user(blocks);
        let stop_hooks: Vec<Arc<dyn crate::hooks::StopHook>> = match &self.setup.hook {
            Some(hook) => vec![Arc::new(crate::hooks::SubagentStop {
                hook: Arc::clone(hook),
                agent_id: parent_id.clone(),
                agent_type: kind.to_owned(),
                transcript: self
                    .setup
                    .sidechain_dir
                    .as_ref()
                    .map(|dir| dir.join(format!("agent-{parent_id}.jsonl"))),
            })],
            None => Vec::new(),
        };
        sidechain.message(prompt.clone(), false);
        let params = QueryParams {
            conversation: Conversation::new(vec![prompt], model.clone(), None),
            system: vec![SystemBlock::text(format!(
                "{}\n\nNotes:\n- Working directory: {}\n- Your final message is all the caller sees: make it a complete report, with absolute file paths.{}",
                def.prompt,
                ctx.cwd.display(),
                self.setup
                    .append_system_prompt
                    .as_deref()
                    .filter(|a| !a.trim().is_empty())
                    .map(|a| format!("\n\n{a}"))
                    .unwrap_or_default()
            ))],
            max_turns: Some(self.setup.max_turns),
            max_output_tokens: None,
            token_budget: None,
            // A conversation of its own, which leaves the session's request cache alone.
            deps: self
                .setup
                .deps
                .fork()
                .unwrap_or_else(|| Arc::clone(&self.setup.deps)),
            tools: Arc::new(tools),
            tool_context: ctx.clone(),
            can_use_tool: Arc::clone(&self.setup.can_use_tool),
            compactor: Arc::new(Mutex::new(Box::new(NoCompaction))),
            stop_hooks,
            tool_hooks: Vec::new(),
            // The parent's abort (Ctrl+C, a sibling's failure) stops the sub-agent too.
            cancel: ctx.cancel.clone(),
        };
        let mut last_text = String::new();
        let mut terminal: Option<Terminal> = None;
        let mut progress = SubagentProgress {
            parent_tool_use_id: parent_id.clone(),
            description: input.description.clone(),
            last_tool: None,
            tool_uses: 0,
            tokens: 0,
            state: SubagentState::Running,
        };
        let mut seen = HashSet::new();
        self.report(&progress);
        let events = query(params);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            match event {
                LoopEvent::Message { message, is_meta } => {
                    if message.role == Role::Assistant {
                        let text = message.text();
                        if !text.is_empty() {
                            last_text = text;
                        }
                        // Calls that did not start mid-stream count once they are known.
                        let mut new = false;
                        for (id, name, input) in message.tool_uses() {
                            if seen.insert(id.to_owned()) {
                                progress.tool_uses += 1;
                                progress.last_tool = Some((name.to_owned(), input.clone()));
                                new = true;
                            }
                        }
                        if new {
                            self.report(&progress);
                        }
                    }
                    sidechain.message(message, is_meta);
                }
                LoopEvent::Usage {
                    id,
                    request_id,
                    model,
                    stop_reason,
                    usage,
                } => {
                    sidechain.recorder.response(ResponseInfo {
                        id,
                        request_id,
                        model: model.clone(),
                        stop_reason,
                        usage,
                    });
                    progress.tokens = usage.input_tokens
                        + usage.cache_read_input_tokens
                        + usage.cache_creation_input_tokens
                        + usage.output_tokens;
                    self.report(&progress);
                    let _ = self.events.send(SubagentEvent::Usage { model, usage });
                }
                LoopEvent::ToolStarted { id, name, input } => {
                    if seen.insert(id) {
                        progress.tool_uses += 1;
                        progress.last_tool = Some((name, input));
                        self.report(&progress);
                    }
                }
                LoopEvent::Terminal(t) => terminal = Some(t),
                LoopEvent::RequestStart { .. }
                | LoopEvent::Stream(_)
                | LoopEvent::Retry(_)
                | LoopEvent::Tombstone
                | LoopEvent::Fallback { .. }
                | LoopEvent::HistoryReplaced(_)
                | LoopEvent::Compacted(_)
                | LoopEvent::PermissionDenied { .. }
                | LoopEvent::Transition(_) => {}
            }
        }
        let output = outcome(&input.description, terminal, last_text);
        progress.state = if output.is_error {
            SubagentState::Failed(output.content.clone())
        } else {
            SubagentState::Done
        };
        self.report(&progress);
        output
    }

    /// Tells the session (and so the UI) where the sub-agent stands.
    fn report(&self, progress: &SubagentProgress) {
        // The engine is gone only when the session is: nobody left to tell.
        let _ = self.events.send(SubagentEvent::Progress(progress.clone()));
    }
}

/// Where a sub-agent's messages go: its sidechain transcript, then the session.
struct Sidechain<'a> {
    recorder: Recorder,
    deps: &'a dyn QueryDeps,
    events: &'a SubagentSender,
    parent_id: &'a str,
    model: &'a str,
}

impl Sidechain<'_> {
    fn message(&mut self, message: Message, is_meta: bool) {
        let uuid = self
            .recorder
            .message(self.deps, &message, is_meta, self.model);
        // The engine is gone only when the session is: nobody left to tell.
        let _ = self.events.send(SubagentEvent::Message {
            parent_tool_use_id: self.parent_id.to_owned(),
            uuid,
            message,
        });
    }
}

/// The tool result of a finished sub-agent.
fn outcome(description: &str, terminal: Option<Terminal>, last_text: String) -> ToolOutput {
    let Some(terminal) = terminal else {
        return ToolOutput::error(format!("Agent \"{description}\" ended without a result"));
    };
    if terminal.reason.is_error() {
        let why = terminal
            .error
            .unwrap_or_else(|| format!("{:?}", terminal.reason));
        let what = if terminal.reason == TerminalReason::MaxTurns {
            "stopped at its turn limit"
        } else {
            "failed"
        };
        return ToolOutput::error(format!("Agent \"{description}\" {what}: {why}"));
    }
    if last_text.is_empty() {
        return ToolOutput::ok(format!(
            "Agent \"{description}\" finished without a text answer."
        ));
    }
    ToolOutput::ok(last_text)
}

/// The description the model reads, listing the agents on offer.
fn describe(definitions: &[AgentDefinition]) -> String {
    let mut text = String::from(
        "Launch a sub-agent to handle a complex, multi-step task on its own: it gets a fresh context, works with its own tools, and returns one final report as this tool's result (the user does not see it; relay what matters).\n\nAvailable agent types (subagent_type):\n",
    );
    for d in definitions {
        let tools = d
            .tools
            .as_ref()
            .map_or_else(|| "all tools".to_owned(), |t| t.join(", "));
        text.push_str(&format!(
            "- {}: {} (Tools: {tools})\n",
            d.name, d.description
        ));
    }
    text.push_str(
        "\nUsage:\n- Give a short description (3-5 words) and a self-contained prompt: the agent sees nothing of this conversation.\n- Launch several agents in one message to run them concurrently.\n- Each call is stateless; its result is the agent's final message.",
    );
    text
}

impl Tool for AgentTool {
    fn name(&self) -> Cow<'static, str> {
        AGENT_TOOL_NAME.into()
    }

    fn aliases(&self) -> &'static [&'static str] {
        AGENT_TOOL_ALIASES
    }

    fn description(&self) -> Cow<'static, str> {
        describe(&self.setup.definitions.definitions()).into()
    }

    fn input_schema(&self) -> Value {
        gyre_tools::schema::input_schema::<AgentInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        match input.get("subagent_type").and_then(Value::as_str) {
            Some(kind) if self.definition(kind).is_none() => Err(self.unknown(kind).into()),
            _ => Ok(()),
        }
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        // The agent's own tool calls are checked one by one under the session's policy.
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        MAX_RESULT_CHARS
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        gyre_tools::call_with_input(input, move |input: AgentInput| self.run(input, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_tools::schema::validate;
    use serde_json::json;

    fn parses(input: &Value) -> bool {
        serde_json::from_value::<AgentInput>(input.clone()).is_ok()
    }

    #[test]
    fn the_description_lists_every_agent_with_its_tools() {
        let mut tester = crate::agents::general_purpose();
        tester.name = "tester".to_owned();
        tester.description = "runs tests".to_owned();
        tester.tools = Some(vec!["Bash".to_owned(), "Read".to_owned()]);
        let text = describe(&[crate::agents::general_purpose(), tester]);
        assert!(
            text.contains("- general-purpose: General-purpose agent"),
            "{text}"
        );
        assert!(text.contains("(Tools: all tools)"), "{text}");
        assert!(
            text.contains("- tester: runs tests (Tools: Bash, Read)"),
            "{text}"
        );
    }

    #[test]
    fn the_published_schema_is_the_input_struct_with_its_field_docs() {
        assert_eq!(
            gyre_tools::schema::input_schema::<AgentInput>(),
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) description of the task"},
                    "prompt": {"type": "string", "description": "The task for the agent to perform"},
                    "subagent_type": {"type": "string", "description": "The type of agent to use (default general-purpose)"}
                },
                "required": ["description", "prompt"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn the_published_schema_accepts_exactly_what_the_parser_accepts() {
        let schema = gyre_tools::schema::input_schema::<AgentInput>();
        let valid = [
            json!({"description": "Find tests", "prompt": "List the tests"}),
            json!({"description": "d", "prompt": "p", "subagent_type": "Explore"}),
            json!({"description": "d", "prompt": "p", "subagent_type": null}),
        ];
        let invalid = [
            json!({"description": "d"}),
            json!({"prompt": "p"}),
            json!({"description": "d", "prompt": "p", "subagent_type": 1}),
            json!({"description": "d", "prompt": "p", "model": "opus"}),
            json!({"description": "d", "prompt": null}),
            json!("prompt"),
        ];
        for input in &valid {
            assert!(parses(input), "{input}");
            assert_eq!(validate(&schema, input), Ok(()), "{input}");
        }
        for input in &invalid {
            assert!(!parses(input), "{input}");
            assert!(validate(&schema, input).is_err(), "{input}");
        }
    }
}
