//! The result every stage returns.

use gyre_protocol::Message;

/// The five stages, in the order the pipeline runs them: tool result budget, snip,
/// microcompact, context collapse, autocompact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Stage 1: large tool results persisted to disk, a preview kept.
    ToolResultBudget,
    /// Stage 2: the oldest rounds dropped.
    Snip,
    /// Stage 3: old tool results cleared.
    Microcompact,
    /// Stage 4: old spans sent as digests.
    ContextCollapse,
    /// Stage 5: the history summarised.
    Autocompact,
}

impl Stage {
    /// The stage's name in reports and logs.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::ToolResultBudget => "tool_result_budget",
            Self::Snip => "snip",
            Self::Microcompact => "microcompact",
            Self::ContextCollapse => "context_collapse",
            Self::Autocompact => "autocompact",
        }
    }
}

/// What a stage did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StageReport {
    /// Which stage this is.
    pub stage: Stage,
    /// Tokens the stage removed from what is sent (never negative: a stage that would
    /// grow the context does nothing).
    pub tokens_freed: u64,
    /// Whether the messages changed.
    pub changed: bool,
    /// One line for humans: what happened, or why nothing did.
    pub detail: String,
}

impl StageReport {
    /// A report of a stage that changed nothing, saying why.
    #[must_use]
    pub fn unchanged(stage: Stage, detail: impl Into<String>) -> Self {
        Self {
            stage,
            tokens_freed: 0,
            changed: false,
            detail: detail.into(),
        }
    }

    /// A report of a stage that freed `tokens_freed`.
    #[must_use]
    pub fn changed(stage: Stage, tokens_freed: u64, detail: impl Into<String>) -> Self {
        Self {
            stage,
            tokens_freed,
            changed: true,
            detail: detail.into(),
        }
    }
}

/// The common result of a stage: the messages after it and its report.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct StageResult {
    /// The messages after the stage.
    pub messages: Vec<Message>,
    /// What the stage did.
    pub report: StageReport,
}

impl StageResult {
    /// Tokens the stage removed.
    pub fn tokens_freed(&self) -> u64 {
        self.report.tokens_freed
    }

    pub(crate) fn unchanged(messages: Vec<Message>, stage: Stage, detail: &str) -> Self {
        Self {
            messages,
            report: StageReport::unchanged(stage, detail),
        }
    }
}
