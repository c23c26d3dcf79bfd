//! Terminal text that both front-ends print: the headless text mode's `--verbose` tool
//! lines (gyre-exec) and the interactive UI's (gyre-tui) come from the same
//! [`tool_line`] summaries in the same [`style::Tone`]s, so a call reads alike in both:
//! gyre-exec writes them as ANSI codes ([`style::Palette`]), gyre-tui as ratatui styles.

pub mod style;
pub mod tool_line;
