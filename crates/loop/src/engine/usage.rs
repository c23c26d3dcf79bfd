//! Usage and cost across the turns of a conversation: the one place a response is
//! priced, read by every front-end through a shared [`UsageMeter`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use gyre_protocol::Usage;

use crate::cost::usage_cost_usd;

/// One model's share of a session: its tokens and what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelTotals {
    /// The tokens the model's responses used.
    pub usage: Usage,
    /// What they cost, in US dollars.
    pub cost_usd: f64,
}

#[derive(Debug, Default)]
struct Totals {
    model: String,
    usage: Usage,
    cost_usd: f64,
    by_model: BTreeMap<String, ModelTotals>,
}

/// The session's usage and cost (every response: the conversation's, sub-agents' and
/// side requests'), by model, and the model the conversation uses now. The engine
/// keeps it; a front-end holds a clone ([`crate::QueryEngine::meter`]) and reads it at
/// any time, also while a turn runs, so the status line, `/cost`, the result line and
/// `modelUsage` say the same.
#[derive(Debug, Clone, Default)]
pub struct UsageMeter(Arc<Mutex<Totals>>);

impl UsageMeter {
    /// A meter of a session that starts with `model` and has spent nothing.
    #[must_use]
    pub fn new(model: &str) -> Self {
        let meter = Self::default();
        meter.set_model(model);
        meter
    }

    fn totals(&self) -> std::sync::MutexGuard<'_, Totals> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds one response's usage, priced for `model`.
    pub(crate) fn add(&self, model: &str, usage: &Usage) {
        let cost = usage_cost_usd(model, usage);
        let mut totals = self.totals();
        totals.usage.add(usage);
        totals.cost_usd += cost;
        let entry = totals.by_model.entry(model.to_owned()).or_default();
        entry.usage.add(usage);
        entry.cost_usd += cost;
    }

    /// The tokens used so far.
    #[must_use]
    pub fn usage(&self) -> Usage {
        self.totals().usage
    }

    /// What the session has cost so far, in US dollars.
    #[must_use]
    pub fn cost_usd(&self) -> f64 {
        self.totals().cost_usd
    }

    /// Usage and cost by the model that answered.
    #[must_use]
    pub fn by_model(&self) -> BTreeMap<String, ModelTotals> {
        self.totals().by_model.clone()
    }

    /// The model the conversation's requests go to now (the fallback after a switch).
    #[must_use]
    pub fn model(&self) -> String {
        self.totals().model.clone()
    }

    pub(crate) fn set_model(&self, model: &str) {
        model.clone_into(&mut self.totals().model);
    }

    /// Whether the session has spent `max_budget_usd` (`--max-budget-usd`).
    pub(super) fn over_budget(&self, max_budget_usd: Option<f64>) -> bool {
        max_budget_usd.is_some_and(|max| self.cost_usd() >= max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        }
    }

    #[test]
    fn totals_add_up_usage_and_the_price_of_each_response() {
        let totals = UsageMeter::default();
        totals.add("claude-sonnet-4-5", &usage(100_000, 0));
        totals.add("claude-sonnet-4-5", &usage(0, 100_000));
        assert_eq!(totals.usage(), usage(100_000, 100_000));
        let one_each = usage_cost_usd("claude-sonnet-4-5", &usage(100_000, 100_000));
        assert!((totals.cost_usd() - one_each).abs() < 1e-9);
        assert!(totals.cost_usd() > 0.0);
        totals.add("claude-haiku-4-5", &usage(1_000_000, 0));
        let by_model = totals.by_model();
        assert_eq!(by_model.len(), 2);
        let sum: f64 = by_model.values().map(|m| m.cost_usd).sum();
        assert!((totals.cost_usd() - sum).abs() < 1e-9);
        assert_eq!(by_model["claude-haiku-4-5"].usage, usage(1_000_000, 0));
    }

    #[test]
    fn the_budget_is_spent_at_the_limit_and_absent_without_one() {
        let totals = UsageMeter::default();
        totals.add("claude-sonnet-4-5", &usage(1_000_000, 0));
        let spent = totals.cost_usd();
        assert!(totals.over_budget(Some(spent)));
        assert!(!totals.over_budget(Some(spent * 2.0)));
        assert!(!totals.over_budget(None));
    }
}
