//! What the reporting slash commands print: `/context` (a grid of the window and a
//! table by category), `/status`, `/doctor`, `/permissions` and `/agents`. The facts
//! come from gyre-core; this is only how they look.

use gyre_core::context::ContextBreakdown;
use gyre_core::gate::Rules;
use gyre_core::status::{Check, StatusRow, Verdict};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

use super::style::{Palette, PaletteSpans};

/// The grid's size: each cell is 1 % of the window.
const GRID_SIDE: usize = 10;

/// A category's mark in the grid (distinct without colours too) and its colour.
fn mark(category: &str) -> (&'static str, Color) {
    match category {
        "System prompt" => ("◆", Color::Gray),
        "System tools" => ("▲", Color::Cyan),
        "MCP tools" => ("●", Color::Blue),
        "Memory files" => ("◼", Color::Yellow),
        "Messages" => ("■", Color::Magenta),
        "Autocompact buffer" => ("▒", Color::Red),
        _ => ("·", Color::DarkGray),
    }
}

fn short(tokens: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    match tokens {
        0..1_000 => tokens.to_string(),
        1_000..1_000_000 => format!("{:.1}k", tokens as f64 / 1_000.0),
        _ => format!("{:.1}M", tokens as f64 / 1_000_000.0),
    }
}

/// `/context`: a 10×10 grid (one cell a percent of the window), and beside it the
/// model, the total, and each category with its tokens and share; memory files and
/// MCP tools under it.
#[must_use]
pub fn context(breakdown: &ContextBreakdown, palette: Palette) -> Vec<Line<'static>> {
    let colored = |category: &str| {
        let (glyph, color) = mark(category);
        let style = if palette.color() {
            Style::default().fg(color)
        } else {
            Style::default()
        };
        Span::styled(glyph, style)
    };
    let window = breakdown.window.max(1);
    #[allow(clippy::cast_precision_loss)]
    let share = |tokens: u64| tokens as f64 * 100.0 / window as f64;
    let mut legend: Vec<Vec<Span<'static>>> = vec![
        vec![palette.bold(format!(
            "{} · {}/{} tokens ({:.1}%)",
            breakdown.model,
            short(breakdown.used()),
            short(breakdown.window),
            breakdown.percent()
        ))],
        Vec::new(),
    ];
    for category in &breakdown.categories {
        legend.push(vec![
            colored(category.name),
            Span::raw(format!(
                " {}: {} tokens ({:.1}%)",
                category.name,
                short(category.tokens),
                share(category.tokens)
            )),
        ]);
    }
    let grid = breakdown.grid(GRID_SIDE * GRID_SIDE);
    let mut lines = vec![Line::from(palette.bold("Context usage"))];
    let rows = GRID_SIDE.max(legend.len());
    for row in 0..rows {
        let mut spans = Vec::new();
        if row < GRID_SIDE {
            for cell in &grid[row * GRID_SIDE..((row + 1) * GRID_SIDE).min(grid.len())] {
                let name = breakdown.categories.get(*cell).map_or("", |c| c.name);
                spans.push(colored(name));
                spans.push(Span::raw(" "));
            }
        } else {
            spans.push(Span::raw(" ".repeat(GRID_SIDE * 2)));
        }
        spans.push(Span::raw("  "));
        if let Some(text) = legend.get(row) {
            spans.extend(text.iter().cloned());
        }
        lines.push(Line::from(spans));
    }
    if !breakdown.memory_files.is_empty() {
        lines.push(Line::default());
        lines.push(Line::from(palette.bold("Memory files")));
        for file in &breakdown.memory_files {
            lines.push(Line::from(format!(
                "  {}: {} tokens",
                file.path.display(),
                short(file.tokens)
            )));
        }
    }
    if !breakdown.mcp_tools.is_empty() {
        lines.push(Line::default());
        lines.push(Line::from(palette.bold("MCP tools")));
        for tool in &breakdown.mcp_tools {
            lines.push(Line::from(format!(
                "  {} ({}): {} tokens",
                tool.name,
                tool.server,
                short(tool.tokens)
            )));
        }
    }
    lines
}

/// Rows of `label  value`, the labels padded to one width.
#[must_use]
pub fn rows(title: &str, rows: &[StatusRow], palette: Palette) -> Vec<Line<'static>> {
    let width = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines = vec![Line::from(palette.bold(title.to_owned()))];
    for (label, value) in rows {
        lines.push(Line::from(vec![
            palette.dim(format!("  {label:<width$}  ")),
            Span::raw(value.clone()),
        ]));
    }
    lines
}

/// `/doctor`: each check with ✓, ! or ✗, and what to do for those that are not ✓.
#[must_use]
pub fn doctor(checks: &[Check], palette: Palette) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(palette.bold("Doctor"))];
    for check in checks {
        let verdict = match check.verdict {
            Verdict::Ok => palette.green("✓"),
            Verdict::Warn => palette.yellow("!"),
            Verdict::Fail => palette.red("✗"),
        };
        lines.push(Line::from(vec![
            Span::raw("  "),
            verdict,
            Span::raw(format!(" {}: {}", check.name, check.detail)),
        ]));
        if !check.fix.is_empty() {
            lines.push(Line::from(palette.dim(format!("      → {}", check.fix))));
        }
    }
    let failed = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    let warned = checks.iter().filter(|c| c.verdict == Verdict::Warn).count();
    lines.push(Line::from(if failed + warned == 0 {
        palette.green("All checks passed.")
    } else {
        Span::raw(format!("{failed} failed, {warned} to look at."))
    }));
    lines
}

/// `/permissions` with no argument: the mode and the rules in force by kind.
#[must_use]
pub fn permissions(mode: &str, rules: &Rules, palette: Palette) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(vec![
        palette.bold("Permissions"),
        Span::raw(format!(" · mode {mode}")),
    ])];
    for (kind, list) in [
        ("Allow", &rules.allow),
        ("Ask", &rules.ask),
        ("Deny", &rules.deny),
    ] {
        let shown = if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        };
        lines.push(Line::from(vec![
            palette.dim(format!("  {kind:<5}  ")),
            Span::raw(shown),
        ]));
    }
    lines.push(Line::from(palette.dim(PERMISSIONS_USAGE)));
    lines
}

/// How `/permissions` changes rules.
pub const PERMISSIONS_USAGE: &str =
    "  /permissions add|remove allow|ask|deny RULE [session|local|project|user] (default: session)";

/// `/agents`: each sub-agent with its source, model and tools.
#[must_use]
pub fn agents(list: &[(String, &'static str, String)], palette: Palette) -> Vec<Line<'static>> {
    let mut lines = vec![Line::from(palette.bold("Agents"))];
    let width = list
        .iter()
        .map(|(n, ..)| n.chars().count())
        .max()
        .unwrap_or(0);
    for (name, source, description) in list {
        lines.push(Line::from(vec![
            Span::raw(format!("  {name:<width$}  ")),
            palette.dim(format!("{source:<9} ")),
            Span::raw(description.lines().next().unwrap_or_default().to_owned()),
        ]));
    }
    lines
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use gyre_core::context::ContextParts;
    use gyre_protocol::{ContentBlock, Message, SystemBlock};

    fn text(lines: &[Line<'_>]) -> String {
        lines
            .iter()
            .map(|l| {
                l.spans
                    .iter()
                    .map(|s| s.content.as_ref())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn context_shows_a_ten_by_ten_grid_beside_each_categorys_share() {
        let breakdown = ContextBreakdown::of(&ContextParts {
            model: "claude-sonnet-4-5",
            window: 10_000,
            autocompact: false,
            system: &[SystemBlock::text("s".repeat(3_000))],
            tools: &[],
            memory_files: &[],
            messages: &[Message::user(vec![ContentBlock::text("x".repeat(6_000))])],
        });
        let shown = text(&context(&breakdown, Palette::new(false)));
        assert!(
            shown.contains("claude-sonnet-4-5 · 3.0k/10.0k tokens (30.1%)"),
            "{shown}"
        );
        assert!(
            shown.contains("◆ System prompt: 1.0k tokens (10.0%)"),
            "{shown}"
        );
        assert!(shown.contains("■ Messages: 2.0k tokens (20.1%)"), "{shown}");
        assert!(
            shown.contains("· Free space: 7.0k tokens (69.9%)"),
            "{shown}"
        );
        assert_eq!(shown.matches('◆').count(), 10 + 1, "{shown}");
        let grid_row = shown.lines().nth(1).unwrap();
        assert!(grid_row.starts_with("◆ ◆ ◆ ◆ ◆ ◆ ◆ ◆ ◆ ◆"), "{shown}");
    }
}
