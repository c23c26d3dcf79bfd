//! What fills the context window, by category: the REPL's `/context` and the SDK's
//! `get_context_usage` both read one [`ContextBreakdown`].
//!
//! The categories are estimated at 3 bytes a token (gyre-compact's `EstimateCounter`),
//! each from what the next request sends: the system prompt less the memory files in
//! it, the tool definitions (gyre's own and MCP servers', apart), the memory files, the
//! messages. With autocompaction on, the last 13,000 tokens of the window are the
//! buffer compaction keeps free; what is left is free space.

use std::path::PathBuf;

use gyre_compact::{AUTOCOMPACT_BUFFER_TOKENS, EstimateCounter, TokenCounter};
use gyre_protocol::{Message, SystemBlock, ToolDefinition};

/// The prefix of an MCP server's tool names (`mcp__server__tool`).
const MCP_PREFIX: &str = "mcp__";

/// One category's share of the window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Category {
    /// `System prompt`, `System tools`, `MCP tools`, `Memory files`, `Messages`,
    /// `Autocompact buffer` or `Free space`.
    pub name: &'static str,
    pub tokens: u64,
}

/// A memory file and the tokens it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFile {
    pub path: PathBuf,
    pub tokens: u64,
}

/// An MCP tool and the tokens its definition takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpTool {
    pub name: String,
    pub server: String,
    pub tokens: u64,
}

/// See the module docs.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextBreakdown {
    pub model: String,
    /// The model's window (or `GYRE_CONTEXT_WINDOW`).
    pub window: u64,
    /// Every category, the used ones first, `Free space` last; they sum to the window
    /// (or more, when the context has overflowed it).
    pub categories: Vec<Category>,
    pub memory_files: Vec<MemoryFile>,
    pub mcp_tools: Vec<McpTool>,
    pub autocompact: bool,
}

/// What a breakdown is computed from.
#[derive(Debug, Clone, Copy)]
pub struct ContextParts<'a> {
    pub model: &'a str,
    pub window: u64,
    pub autocompact: bool,
    pub system: &'a [SystemBlock],
    pub tools: &'a [ToolDefinition],
    pub memory_files: &'a [(PathBuf, String)],
    pub messages: &'a [Message],
}

/// The colour a category is drawn in (the names are the SDK's `color` values too).
#[must_use]
pub fn color(category: &str) -> &'static str {
    match category {
        "System prompt" => "gray",
        "System tools" => "cyan",
        "MCP tools" => "blue",
        "Memory files" => "yellow",
        "Messages" => "magenta",
        "Autocompact buffer" => "red",
        _ => "white",
    }
}

impl ContextBreakdown {
    /// The breakdown of `parts`.
    #[must_use]
    pub fn of(parts: &ContextParts<'_>) -> Self {
        let counter = EstimateCounter;
        let memory_files: Vec<MemoryFile> = parts
            .memory_files
            .iter()
            .map(|(path, text)| MemoryFile {
                path: path.clone(),
                tokens: counter.count_text(text),
            })
            .collect();
        let memory: u64 = memory_files.iter().map(|m| m.tokens).sum();
        let system: u64 = parts
            .system
            .iter()
            .map(|b| counter.count_text(&b.text))
            .sum();
        let definition_tokens =
            |t: &ToolDefinition| counter.count_text(&serde_json::to_string(t).unwrap_or_default());
        let (mcp, builtin): (Vec<&ToolDefinition>, Vec<&ToolDefinition>) = parts
            .tools
            .iter()
            .partition(|t| t.name.starts_with(MCP_PREFIX));
        let mcp_tools: Vec<McpTool> = mcp
            .into_iter()
            .map(|t| McpTool {
                server: t
                    .name
                    .strip_prefix(MCP_PREFIX)
                    .and_then(|rest| rest.split("__").next())
                    .unwrap_or_default()
                    .to_owned(),
                name: t.name.clone(),
                tokens: definition_tokens(t),
            })
            .collect();
        let used = [
            ("System prompt", system.saturating_sub(memory)),
            (
                "System tools",
                builtin.into_iter().map(definition_tokens).sum(),
            ),
            ("MCP tools", mcp_tools.iter().map(|t| t.tokens).sum()),
            ("Memory files", memory),
            (
                "Messages",
                parts
                    .messages
                    .iter()
                    .map(|m| counter.count_message(m))
                    .sum(),
            ),
        ];
        let mut categories: Vec<Category> = used
            .into_iter()
            .filter(|(_, tokens)| *tokens > 0)
            .map(|(name, tokens)| Category { name, tokens })
            .collect();
        let mut left = parts
            .window
            .saturating_sub(categories.iter().map(|c| c.tokens).sum());
        if parts.autocompact {
            let buffer = AUTOCOMPACT_BUFFER_TOKENS.min(left);
            left -= buffer;
            categories.push(Category {
                name: "Autocompact buffer",
                tokens: buffer,
            });
        }
        categories.push(Category {
            name: "Free space",
            tokens: left,
        });
        Self {
            model: parts.model.to_owned(),
            window: parts.window,
            categories,
            memory_files,
            mcp_tools,
            autocompact: parts.autocompact,
        }
    }

    /// Tokens in use: every category but the buffer and free space.
    #[must_use]
    pub fn used(&self) -> u64 {
        self.categories
            .iter()
            .filter(|c| !matches!(c.name, "Free space" | "Autocompact buffer"))
            .map(|c| c.tokens)
            .sum()
    }

    /// `used` as a percentage of the window.
    #[must_use]
    pub fn percent(&self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let share = self.used() as f64 * 100.0 / self.window.max(1) as f64;
        share
    }

    /// The window as `cells` cells, each the index of the category that fills it
    /// (largest remainders, so every category with tokens gets at least one cell while
    /// any is left).
    #[must_use]
    pub fn grid(&self, cells: usize) -> Vec<usize> {
        let total: u64 = self.categories.iter().map(|c| c.tokens).sum::<u64>().max(1);
        let cells_u64 = cells as u64;
        let mut counts: Vec<u64> = self
            .categories
            .iter()
            .map(|c| {
                let exact = c.tokens.saturating_mul(cells_u64) / total;
                if exact == 0 && c.tokens > 0 { 1 } else { exact }
            })
            .collect();
        // Rounding and the one-cell minimum may miss or overshoot: free space absorbs it.
        let sum: u64 = counts.iter().sum();
        if let Some(free) = counts.last_mut() {
            *free = (*free + cells_u64).saturating_sub(sum);
        }
        let mut grid = Vec::with_capacity(cells);
        for (index, count) in counts.into_iter().enumerate() {
            for _ in 0..count {
                grid.push(index);
            }
        }
        grid.truncate(cells);
        grid
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use gyre_protocol::ContentBlock;

    fn tool(name: &str, description: &str) -> ToolDefinition {
        ToolDefinition {
            kind: None,
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: serde_json::json!({"type": "object"}),
            cache_control: None,
            options: serde_json::Map::new(),
        }
    }

    #[test]
    fn categories_split_system_tools_memory_and_messages_and_sum_to_the_window() {
        let memory = "m".repeat(300);
        let system = [SystemBlock::text(format!("{}{memory}", "s".repeat(600)))];
        let tools = [
            tool("Read", &"r".repeat(900)),
            tool("mcp__docs__search", &"d".repeat(90)),
        ];
        let messages = [Message::user(vec![ContentBlock::text("x".repeat(3_000))])];
        let files = [(PathBuf::from("/p/CLAUDE.md"), memory)];
        let breakdown = ContextBreakdown::of(&ContextParts {
            model: "claude-sonnet-4-5",
            window: 200_000,
            autocompact: true,
            system: &system,
            tools: &tools,
            memory_files: &files,
            messages: &messages,
        });
        let by_name = |n: &str| {
            breakdown
                .categories
                .iter()
                .find(|c| c.name == n)
                .map(|c| c.tokens)
        };
        assert_eq!(by_name("System prompt"), Some(200));
        assert_eq!(by_name("Memory files"), Some(100));
        assert!(by_name("System tools").unwrap() > 300);
        assert!(by_name("MCP tools").unwrap() > 30);
        assert!(by_name("Messages").unwrap() >= 1_000);
        assert_eq!(by_name("Autocompact buffer"), Some(13_000));
        let sum: u64 = breakdown.categories.iter().map(|c| c.tokens).sum();
        assert_eq!(sum, 200_000);
        assert_eq!(breakdown.mcp_tools[0].server, "docs");
        assert_eq!(breakdown.categories.last().unwrap().name, "Free space");
        assert!(breakdown.used() < 2_000 && breakdown.percent() < 1.0);
    }

    #[test]
    fn the_grid_gives_every_used_category_a_cell_and_fills_exactly() {
        let breakdown = ContextBreakdown::of(&ContextParts {
            model: "m",
            window: 1_000,
            autocompact: false,
            system: &[SystemBlock::text("s".repeat(30))],
            tools: &[],
            memory_files: &[],
            messages: &[Message::user(vec![ContentBlock::text("x".repeat(1_500))])],
        });
        let grid = breakdown.grid(100);
        assert_eq!(grid.len(), 100);
        // 10 tokens of system prompt are 1 % of the window: one cell, first.
        assert_eq!(grid[0], 0);
        assert_eq!(grid.iter().filter(|&&i| i == 1).count(), 50);
        assert_eq!(*grid.last().unwrap(), breakdown.categories.len() - 1);
        assert!(!breakdown.autocompact);
    }
}
