//! Usage and cost across the turns of a conversation.

use gyre_protocol::Usage;

use crate::cost::usage_cost_usd;

/// The session's running usage and cost.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct UsageTotals {
    usage: Usage,
    cost_usd: f64,
}

impl UsageTotals {
    /// Adds one response's usage, priced for `model`.
    pub(super) fn add(&mut self, model: &str, usage: &Usage) {
        self.usage.add(usage);
        self.cost_usd += usage_cost_usd(model, usage);
    }

    pub(super) fn usage(&self) -> Usage {
        self.usage
    }

    pub(super) fn cost_usd(&self) -> f64 {
        self.cost_usd
    }

    /// Whether the session has spent `max_budget_usd` (`--max-budget-usd`).
    pub(super) fn over_budget(&self, max_budget_usd: Option<f64>) -> bool {
        max_budget_usd.is_some_and(|max| self.cost_usd >= max)
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
        let mut totals = UsageTotals::default();
        totals.add("claude-sonnet-4-5", &usage(1_000_000, 0));
        totals.add("claude-sonnet-4-5", &usage(0, 1_000_000));
        assert_eq!(totals.usage(), usage(1_000_000, 1_000_000));
        let one_each = usage_cost_usd("claude-sonnet-4-5", &usage(1_000_000, 1_000_000));
        assert!((totals.cost_usd() - one_each).abs() < 1e-9);
        assert!(totals.cost_usd() > 0.0);
    }

    #[test]
    fn the_budget_is_spent_at_the_limit_and_absent_without_one() {
        let mut totals = UsageTotals::default();
        totals.add("claude-sonnet-4-5", &usage(1_000_000, 0));
        let spent = totals.cost_usd();
        assert!(totals.over_budget(Some(spent)));
        assert!(!totals.over_budget(Some(spent * 2.0)));
        assert!(!totals.over_budget(None));
    }
}
