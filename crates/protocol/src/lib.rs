//! Anthropic Messages API data types, shared by every gyre crate.
//!
//! This crate is serde only: it does no I/O and knows nothing of HTTP, tools or the
//! loop. Content round-trips through `serde_json` without losing anything the API sent:
//! unknown content block types are kept verbatim as [`ContentBlock::Unknown`], fields of
//! the modelled blocks that gyre does not read (a text block's `citations`, …) in the
//! block's `extra`, and content deltas other than the typed ones whole as
//! [`ContentDelta::Other`]. Elsewhere what gyre does not know is tolerated: unknown
//! fields of messages and events are ignored, unknown stream events become
//! [`StreamEvent::Unknown`], and unknown stop reasons are kept as strings.
//!
//! ```
//! use gyre_protocol::{ContentBlock, Message, Role};
//!
//! let msg: Message = serde_json::from_str(r#"{"role":"user","content":"hello"}"#).unwrap();
//! assert_eq!(msg.role, Role::User);
//! assert_eq!(msg.content, vec![ContentBlock::text("hello")]);
//! ```

#![warn(missing_docs)]

mod content;
mod event;
mod message;
mod request;
mod usage;

pub use content::{
    CLEARED_TOOL_RESULT, CacheControl, ContentBlock, ExtraFields, ImageSource, ToolResultContent,
    ToolResultPart,
};
pub use event::{
    ContentDelta, ErrorDetail, ErrorResponse, MessageDeltaBody, MessageStart, StreamEvent,
};
pub use message::{AssistantResponse, Blocks, Message, Role, StopReason};
pub use request::{
    MessagesRequest, Metadata, OutputConfig, SystemBlock, TaskBudget, ThinkingConfig,
    ToolDefinition,
};
pub use usage::{CacheCreation, ServerToolUsage, Usage, UsageDelta};
