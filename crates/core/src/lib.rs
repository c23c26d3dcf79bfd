//! gyre's session, for every front-end: the terminal UI (gyre-tui), the headless modes
//! and the Agent SDK protocol (gyre-exec), and whatever comes next.
//!
//! A front-end turns what it was told into [`SessionOptions`], loads the
//! [`settings::Settings`], and calls [`session::build`]; the [`session::Session`] it gets
//! holds the engine (the agent loop of gyre-loop), the [`gate::Gate`] every tool call
//! passes (permission rules and mode, hooks, the session's "always" answers), the MCP
//! servers and the [`facts::SessionFacts`] every front-end renders. Nothing here knows
//! of a terminal or a wire format: what the session asks of an SDK client goes through
//! [`client::ClientRequests`].

pub mod agents;
pub mod approvals;
pub mod auto_mode;
pub mod backend;
pub mod checkpoint;
pub mod client;
pub mod commands;
pub mod context;
pub mod env;
pub mod error;
pub mod expansion;
pub mod export;
pub mod facts;
pub mod folder_rules;
pub mod gate;
pub mod hooks;
pub mod mcp_config;
pub mod memory;
pub mod ops;
pub mod options;
pub mod plugins;
pub mod rule_files;
pub mod session;
pub mod sessions;
pub mod settings;
pub mod skills;
pub mod status;
pub mod structured;
pub mod system_prompt;
pub mod thinking;
pub mod todos;
pub mod trust;
pub mod web_fetch;
pub mod web_search;

pub use client::{ClientChannel, ClientError, ClientRequests};
pub use env::Environment;
pub use error::CoreError;
pub use ops::{Control, Event, Op};
pub use options::{Editor, InitializeOptions, Resume, SessionOptions};
