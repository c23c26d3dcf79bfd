//! Token accounting and context compaction for agent conversations.
//!
//! A conversation with a coding agent grows by a tool round at a time until it no longer
//! fits the model's context window. This crate keeps it in budget before each API call
//! with five stages, run in this order by a [`Pipeline`]:
//!
//! 1. **Tool result budget** ([`apply_tool_result_budget`]): a result over its tool's cap
//!    (Bash 30000 chars, Grep 20000, others 50000), or the largest results of a message
//!    holding more than 200000 chars of results, are written to
//!    `<session dir>/tool-results/<tool_use_id>.txt` and replaced by a
//!    `<persisted-output>` block with the size, the path and a 2000-byte preview.
//! 2. **Snip** ([`snip`], off by default): the oldest whole rounds after the first
//!    request are dropped, leaving `[N earlier messages snipped]`.
//! 3. **Microcompact** ([`microcompact`]): above the warning level, or after an hour
//!    idle, older Read/Bash/Grep/Glob/Edit/Write results become
//!    `[Old tool result content cleared]`, the 5 most recent kept. Below it, from 40k
//!    tokens, [`microcompact_batch`] clears them (the 3 most recent kept) only in a batch
//!    that frees twice what it makes the prompt cache write again.
//! 4. **Context collapse** ([`ContextCollapse`]): a projection. From 90% of the
//!    effective window spans of older tool rounds are staged; when needed they are
//!    committed and shown to the model as one digest each (tool, target, outcome),
//!    while the stored history keeps every message.
//! 5. **Autocompact** ([`compact`]): above the threshold a [`Summarizer`] writes a
//!    nine-section summary; the history becomes a boundary marker, the summary, up to 5
//!    recently read files and the most recent rounds. After 3 consecutive failures it
//!    stops trying for the session.
//!
//! Every stage keeps the invariants the Messages API and the user rely on: no
//! `tool_use` separated from its `tool_result` and no orphan result (see
//! [`check_pairing`]), the first request never lost without a summary, no change to a
//! history that is already in budget (but for a batch of clears worth its rewrite of the
//! prompt cache), and never more tokens out than in.
//!
//! # Token accounting
//!
//! The count is the usage of the last API response (input, cache read, cache creation
//! and output tokens, see [`UsageAnchor`]) plus an estimate of the messages after it,
//! cached per message, so a turn costs O(new content). The counter is injected: gyre's
//! sessions use [`EstimateCounter`] (3 bytes a token, no tables); [`TiktokenCounter`]
//! counts with tiktoken's BPE, whose tables are built only when a bound of one token
//! per byte reaches a threshold.
//!
//! # Windows ([`Thresholds`])
//!
//! effective window = context window − min(max output tokens, 20000); autocompact
//! threshold = effective − 13000; warning = threshold − 20000; blocking limit =
//! effective − 3000. The context window is 200k, 1M for models named with `[1m]`
//! ([`context_window_for_model`]), or [`CompactConfig::context_window`].
//!
//! # Knobs
//!
//! Every knob is a field of [`CompactConfig`] and its stage configs
//! ([`ToolResultBudgetConfig`], [`SnipConfig`], [`MicrocompactConfig`],
//! [`CollapseConfig`], [`AutocompactConfig`]), each documented with its default.
//! [`CompactConfig::from_env`] reads, once, `GYRE_AUTOCOMPACT_PCT_OVERRIDE` (threshold
//! as a percentage of the effective window, never above the default),
//! `GYRE_DISABLE_AUTOCOMPACT` and `GYRE_CONTEXT_WINDOW`.
//!
//! # Architecture invariants
//!
//! No HTTP and no async runtime: the summarizer is a trait returning a boxed `Send`
//! future that the caller backs with its model client. The only I/O is writing
//! persisted tool results through a [`ResultStore`] in the session directory given by
//! the caller. Time (idle duration) is passed in, never read from a clock.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::future::BoxFuture;
//! use gyre_compact::{
//!     check_pairing, CompactConfig, Pipeline, PrepareContext, SummarizeError, Summarizer,
//!     SummaryRequest, TiktokenCounter, COMPACT_SUMMARY_PREFIX,
//! };
//! use gyre_protocol::{ContentBlock, Message};
//!
//! /// A summarizer that does not call a model.
//! struct Fake;
//! impl Summarizer for Fake {
//!     fn summarize<'a>(
//!         &'a self,
//!         request: &'a SummaryRequest,
//!     ) -> BoxFuture<'a, Result<String, SummarizeError>> {
//!         let n = request.messages.len();
//!         Box::pin(async move {
//!             Ok(format!("<analysis>…</analysis><summary>{n} messages about the parser.</summary>"))
//!         })
//!     }
//! }
//!
//! // A long explanation: 30 answers of about 1600 tokens each.
//! let mut history = vec![Message::user_text("Explain the parser, module by module.")];
//! for i in 0..30 {
//!     history.push(Message::assistant(vec![ContentBlock::text(
//!         format!("Module {i} parses tokens. ").repeat(300),
//!     )]));
//!     history.push(Message::user_text(format!("Thanks. Now module {}.", i + 1)));
//! }
//!
//! // A small window so that this history crosses the autocompact threshold.
//! let mut config = CompactConfig::new("claude-sonnet-4-5", 8_000);
//! config.context_window = Some(40_000);
//! let mut pipeline = Pipeline::new(config, Arc::new(Fake), Arc::new(TiktokenCounter));
//!
//! let prepared =
//!     futures::executor::block_on(pipeline.prepare(&history, &PrepareContext::default()))?;
//! let boundary = prepared.boundary.expect("compacted");
//! assert!(boundary.post_tokens < boundary.pre_tokens);
//! assert!(prepared.messages[0].text().starts_with(COMPACT_SUMMARY_PREFIX));
//! check_pairing(&prepared.messages)?;
//! // The loop swaps its stored history for this one.
//! let history = prepared.history.expect("history replaced");
//! assert!(gyre_compact::is_compact_boundary(&history[0]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

mod autocompact;
mod boundary;
mod budget;
mod collapse;
mod config;
mod microcompact;
mod pairing;
mod pipeline;
mod snip;
mod stage;
mod tokens;

pub use autocompact::{
    CircuitBreaker, CompactError, CompactInputs, Compaction, RecentFile, SUMMARY_SECTIONS,
    SummarizeError, Summarizer, SummaryRequest, choose_cut, compact, compaction_prompt,
    format_summary,
};
pub use boundary::{
    COMPACT_BOUNDARY_PREFIX, COMPACT_SUMMARY_PREFIX, CompactBoundary, RESTORED_FILE_PREFIX,
    Trigger, boundary_message, is_compact_boundary, is_compact_summary, last_boundary_index,
    parse_compact_boundary,
};
pub use budget::{
    DirResultStore, PERSISTED_OUTPUT_CLOSING_TAG, PERSISTED_OUTPUT_TAG, ResultStore,
    TOOL_RESULTS_DIR, apply_tool_result_budget, format_size, persisted_output_message, preview,
};
pub use collapse::{COLLAPSE_PREFIX, ContextCollapse};
pub use config::{
    ASSUMED_MAX_OUTPUT_TOKENS, AUTOCOMPACT_BUFFER_TOKENS, AutocompactConfig,
    BLOCKING_BUFFER_TOKENS, CollapseConfig, CompactConfig, DEFAULT_CONTEXT_WINDOW,
    ENV_AUTOCOMPACT_PCT_OVERRIDE, ENV_CONTEXT_WINDOW, ENV_DISABLE_AUTOCOMPACT,
    LARGE_CONTEXT_WINDOW, MAX_OUTPUT_RESERVE, MicrocompactConfig, SnipConfig, Thresholds,
    ToolResultBudgetConfig, WARNING_BUFFER_TOKENS, context_window_for_model,
};
pub use microcompact::{CLEARED_PLACEHOLDER, microcompact, microcompact_batch};
pub use pairing::{PairingError, check_pairing};
pub use pipeline::{Pipeline, PrepareContext, Prepared, TokenState};
pub use snip::{parse_snip_marker, snip, snip_marker};
pub use stage::{Stage, StageReport, StageResult};
#[cfg(feature = "tiktoken")]
pub use tokens::TiktokenCounter;
pub use tokens::{
    BLOCK_OVERHEAD_TOKENS, BytesPerTokenCounter, CachedCounter, ESTIMATE_BYTES_PER_TOKEN,
    EstimateCounter, IMAGE_TOKENS, MESSAGE_OVERHEAD_TOKENS, Measure, TokenCounter, UsageAnchor,
    measure, tokenizer_loaded,
};
