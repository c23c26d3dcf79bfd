//! gyre's interactive front-end: the REPL as an inline terminal UI over a
//! [`gyre_core::session::Session`]. It reads the session's events (stream deltas, tool
//! calls and results, usage, compaction) and answers its permission questions.

pub mod repl;

pub use repl::{TuiError, run};
