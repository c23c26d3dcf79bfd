//! Anthropic Messages API data types, shared by every gyre crate.
//!
//! This crate is serde only: it does no I/O and knows nothing of HTTP, tools or the
//! loop. Every type round-trips through `serde_json` without losing what gyre reads,
//! and tolerates what it does not know: unknown fields are ignored, unknown content
//! block types are kept verbatim as [`ContentBlock::Unknown`], unknown stream events
//! become [`StreamEvent::Unknown`], and unknown stop reasons are kept as strings.
//!
//! ```
//! use gyre_protocol::{ContentBlock, Message, Role};
//!
//! let msg: Message = serde_json::from_str(r#"{"role":"user","content":"hello"}"#).unwrap();
//! assert_eq!(msg.role, Role::User);
//! assert_eq!(msg.content, vec![ContentBlock::text("hello")]);
//! ```

mod content;
mod event;
mod message;
mod request;
mod usage;

pub use content::{
    CacheControl, ContentBlock, ExtraFields, ImageSource, ToolResultContent, ToolResultPart,
};
pub use event::{
    ContentDelta, ErrorDetail, ErrorResponse, MessageDeltaBody, MessageStart, StreamEvent,
};
pub use message::{AssistantResponse, Message, Role, StopReason};
pub use request::{MessagesRequest, Metadata, SystemBlock, ThinkingConfig, ToolDefinition};
pub use usage::{ServerToolUsage, Usage, UsageDelta};
