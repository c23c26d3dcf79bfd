//! What the session knows about itself and every front-end repeats: its id, folder,
//! model, tools, mode, servers, usage per model, and the context window compaction acts
//! on. One copy, kept by the session; the front-ends render it.

use std::collections::BTreeMap;

use gyre_loop::{ModelTotals, UsageMeter};
use gyre_protocol::Usage;

use crate::structured;

/// Facts of the session that several lines repeat.
#[derive(Debug, Clone)]
pub struct SessionFacts {
    pub session_id: String,
    pub cwd: String,
    /// The session's model, usage and cost, as the engine keeps them (one owner, read
    /// here by every front-end).
    pub meter: UsageMeter,
    pub tools: Vec<String>,
    pub permission_mode: String,
    /// The session's MCP servers as they were at start.
    pub mcp_servers: Vec<gyre_mcp::ServerStatus>,
    /// Where `--json-schema`'s StructuredOutput tool leaves its answer.
    pub structured: Option<structured::Slot>,
    /// The usage of the last response: its input side is the context now in use.
    pub last_usage: Usage,
    /// The context window and compaction, as the session's compactor has them.
    pub context: ContextFacts,
    /// Which service answers, where, through which proxy, with which credentials.
    pub backend: crate::backend::BackendFacts,
}

impl SessionFacts {
    /// The model the conversation uses now (the fallback after a switch).
    #[must_use]
    pub fn model(&self) -> String {
        self.meter.model()
    }

    /// Usage and cost per model over the session, sub-agents and side requests
    /// included (`modelUsage`).
    #[must_use]
    pub fn model_usage(&self) -> BTreeMap<String, ModelUsage> {
        self.meter
            .by_model()
            .iter()
            .map(|(model, totals)| {
                let usage = ModelUsage::of(totals, self.context.window(model));
                (model.clone(), usage)
            })
            .collect()
    }
}

/// The context window and whether autocompaction runs, taken from the session's
/// compaction config, so the REPL's status line, the SDK's `get_context_usage` and the
/// result's `modelUsage` say what compaction acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextFacts {
    /// `GYRE_CONTEXT_WINDOW`, which replaces every model's window.
    pub window_override: Option<u64>,
    /// Whether autocompaction is on (`GYRE_DISABLE_AUTOCOMPACT` turns it off).
    pub autocompact: bool,
}

impl ContextFacts {
    #[must_use]
    pub fn of(config: &gyre_compact::CompactConfig) -> Self {
        Self {
            window_override: config.context_window,
            autocompact: config.autocompact.enabled,
        }
    }

    /// The context window of `model`.
    #[must_use]
    pub fn window(&self, model: &str) -> u64 {
        self.window_override
            .unwrap_or_else(|| gyre_compact::context_window_for_model(model))
    }
}

/// One model's share of the session, with Claude Code's `modelUsage` field names.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub web_search_requests: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: f64,
    pub context_window: u64,
}

impl ModelUsage {
    /// One model's totals, from a model with `context_window`.
    #[must_use]
    pub fn of(totals: &ModelTotals, context_window: u64) -> Self {
        let usage = &totals.usage;
        Self {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_input_tokens: usage.cache_read_input_tokens,
            cache_creation_input_tokens: usage.cache_creation_input_tokens,
            web_search_requests: usage.server_tool_use.web_search_requests,
            cost_usd: totals.cost_usd,
            context_window,
        }
    }
}
