//! Terminal text that both front-ends print: the headless text mode's `--verbose` tool
//! lines (gyre-exec) and the interactive UI's (gyre-tui) come from the same
//! [`tool_line`] summaries in the same [`style::Palette`], so a call reads alike in both.

pub mod style;
pub mod tool_line;
