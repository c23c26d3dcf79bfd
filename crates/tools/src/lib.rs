//! The tools of the gyre agent and the machinery that runs them.
//!
//! - [`Tool`]: one capability offered to the model (name, description, JSON input schema,
//!   validation, concurrency safety, permissions, async `call`).
//! - Built-in tools with Claude Code's names, fields and messages: [`read::ReadTool`],
//!   [`edit::EditTool`], [`write::WriteTool`], [`grep::GrepTool`], [`glob::GlobTool`],
//!   [`bash::BashTool`].
//! - [`ToolRegistry`]: the tools on offer, filtered by an allow-list.
//! - [`run_tool_call`]: one call, start to finish: lookup, schema and input validation,
//!   path resolution, permission, call. Every failure becomes an `is_error` result.
//! - [`partition`]: consecutive concurrency-safe calls form one parallel batch.
//! - [`StreamingToolExecutor`]: starts tools while the model is still streaming, at most
//!   10 at once, and yields results in call order.
//! - [`Permissions`]: modes and allow / ask / deny rules, implementing [`CanUseTool`].
//!
//! Architecture invariant: this crate depends on no gyre crate but `gyre-protocol`; it
//! knows nothing of HTTP, the model or the loop.
//!
//! ```no_run
//! use std::sync::Arc;
//! use gyre_tools::{Permissions, ToolCall, ToolContext, ToolRegistry, run_tool_call};
//!
//! # async fn demo() {
//! let registry = ToolRegistry::with_default_tools();
//! let ctx = ToolContext::new("/tmp/project");
//! let permissions = Permissions::default();
//! let call = ToolCall::new("toolu_1", "Read", serde_json::json!({"file_path": "/tmp/project/README.md"}));
//! let outcome = run_tool_call(&registry, &call, &ctx, &permissions, &|_| {}).await;
//! println!("{}", outcome.output.content);
//! # }
//! ```

#![warn(missing_docs)]

pub mod accept_edits;
pub mod background;
pub mod bash;
mod bash_rules;
#[cfg(feature = "bench-support")]
pub mod bench_support;
mod call;
pub mod domain;
pub mod edit;
pub mod editor;
mod executor;
pub mod file_history;
pub mod file_state;
pub mod glob;
pub mod grep;
mod mode;
mod partition;
mod paths;
pub mod permissions;
pub mod plan;
pub mod process_tree;
mod program_age;
pub mod protected;
pub mod read;
pub mod read_only;
mod registry;
pub mod sandbox;
pub mod schema;
#[cfg(test)]
mod schema_conformance;
pub mod shell;
pub mod todo;
mod tool;
mod walk;
pub mod write;

pub use call::{PermissionDenial, ToolCallOutcome, run_tool_call};
pub use executor::{ExecutorOptions, StreamingToolExecutor, ToolStatus, max_concurrency_from};
pub use file_state::{FileState, FileStateCache};
pub use mode::{ModeHandle, PermissionMode};
pub use partition::{ToolBatch, partition};
pub use paths::{CONFIG_FILE_LIMIT, PathChanged, PathFilter, read_config_file, resolve_path};
pub use permissions::{
    AllowAll, PermissionPrompt, PermissionRule, Permissions, PromptAnswer, RuleError, always_rule,
};
pub use registry::ToolRegistry;
pub use tool::{
    BoxFuture, CanUseTool, ExecutorProgressFn, InputDecision, PermissionDecision, ProgressFn,
    ProgressSink, Tool, ToolCall, ToolContext, ToolInputError, ToolOutput, ToolProgress,
    call_with_input,
};

/// The message of every call cut short by an abort (Ctrl+C).
pub const INTERRUPTED_MESSAGE: &str = "Interrupted by user";
/// The result of a call cancelled because a sibling Bash call failed.
pub const SIBLING_CANCELLED_MESSAGE: &str = "cancelled: a sibling tool call failed";
