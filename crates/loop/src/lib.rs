//! The gyre query loop and the `QueryEngine` session.
//!
//! [`query`] is the agent loop: a [`futures::Stream`] of [`LoopEvent`]s
//! that prepares the context, streams a model response while tools start as their blocks
//! complete, recovers from the errors it can recover from, runs the remaining tools and
//! goes round again until it reaches a [`Terminal`]. Every continue replaces the whole
//! [`State`] and records why in its [`Transition`], so tests can assert the path taken.
//!
//! [`QueryEngine`] owns one conversation: it keeps the messages, usage, cost and
//! permission denials across turns and writes the transcript before each API call.
//!
//! Everything the loop touches comes through a seam: the model through [`QueryDeps`],
//! compaction through [`ContextCompactor`], tools through `gyre_tools`' `Tool` and
//! `CanUseTool`, hooks through [`StopHook`] and [`ToolHook`], the transcript through
//! [`TranscriptStore`].

#![warn(missing_docs)]

mod agent_tool;
mod agents;
mod compaction;
mod conversation;
mod cost;
mod deps;
mod engine;
mod event;
mod hooks;
mod pipeline_compactor;
mod query;
mod side_query;
mod state;
/// Fakes for the loop's seams (a scripted model, tools, a compactor, hooks), for tests
/// here and in other crates (the `testing` feature).
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod transcript;

pub use agent_tool::{AgentSetup, AgentTool, DEFAULT_SUBAGENT_MAX_TURNS};
pub use agents::{
    AGENT_TOOL_NAME, AgentCatalog, AgentDefinition, AgentDefinitionError, general_purpose,
    is_agent_tool, load_agent_dirs, merge, parse_agent_file, parse_agents_json,
};
pub use compaction::{
    CompactNowResult, CompactionError, CompactionOutcome, ContextCompactor, NoCompaction,
    PreparedContext,
};
pub use conversation::Conversation;
pub use cost::{
    LONG_CONTEXT_TOKENS, ModelPrice, PRICES, PriceRow, price_for_model, price_for_request,
    price_row, usage_cost_usd,
};
pub use deps::{ApiDeps, ModelStream, QueryDeps};
pub use engine::{
    EngineConfig, EngineEvent, InterruptHandle, ModelTotals, QueryEngine, TurnResult, UsageMeter,
};
pub use event::{
    LoopEvent, SubagentEvent, SubagentEvents, SubagentProgress, SubagentSender, SubagentState,
    subagent_channel,
};
/// The compaction types that cross the seam, owned by `gyre-compact`.
pub use gyre_compact::{Trigger, UsageAnchor};
pub use hooks::{
    AfterToolOutcome, CompactHook, PreCompactOutcome, StopHook, StopHookOutcome, SubagentHook,
    ToolHook,
};
pub use pipeline_compactor::PipelineCompactor;
pub use query::{
    DEFAULT_MAX_OUTPUT_TOKENS, INTERRUPT_MESSAGE, INTERRUPT_MESSAGE_FOR_TOOL_USE,
    MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE, QueryParams, REFUSAL_MESSAGE, query,
};
pub use side_query::{SideAnswer, SideQueryError, side_query};
pub use state::{State, Terminal, TerminalReason, Transition};
pub use transcript::{
    CompactMetadata, FILE_HISTORY_SNAPSHOT, FileBackup, FileHistoryLine, FileHistorySnapshot,
    JsonlTranscript, LoadedSession, MemoryTranscript, PromptMark, REWIND_SUBTYPE, ResponseInfo,
    SYSTEM_PROMPT_SUBTYPE, SharedTranscript, TranscriptEntry, TranscriptHealth, TranscriptMessage,
    TranscriptStore, USER_TYPE, VERSION, copy_files, git_branch, import_transcript, left_out_note,
    load_transcript, load_transcript_until, project_dir_name, repair_pairing, starts_turn,
    summarize_entry_value, timestamp, unknown_marks,
};
