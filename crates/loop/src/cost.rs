//! USD cost of API usage, from a per-model price table.

use gyre_protocol::Usage;

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// US dollars per million input tokens.
    pub input: f64,
    /// US dollars per million output tokens.
    pub output: f64,
    /// US dollars per million tokens written to the prompt cache.
    pub cache_write: f64,
    /// US dollars per million tokens read from the prompt cache.
    pub cache_read: f64,
}

/// One family's prices, as Anthropic's pricing page lists them: the model ids it covers
/// (matched as substrings, first row first, so Bedrock's and Vertex's forms of an id
/// match too), its price, and its price for a request of more than
/// [`LONG_CONTEXT_TOKENS`] input tokens where the family has a 1M-token window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PriceRow {
    /// Substrings of the model ids of the family.
    pub ids: &'static [&'static str],
    /// Its prices.
    pub price: ModelPrice,
    /// Its prices above [`LONG_CONTEXT_TOKENS`], where it has them.
    pub long_context: Option<ModelPrice>,
}

const fn price(input: f64, output: f64, cache_write: f64, cache_read: f64) -> ModelPrice {
    ModelPrice {
        input,
        output,
        cache_write,
        cache_read,
    }
}

/// A request with more input tokens than this (uncached, written and read together) is
/// priced at the family's long-context rates.
pub const LONG_CONTEXT_TOKENS: u64 = 200_000;

/// The price table: the one place gyre's prices are written. Unknown models are priced
/// as the last row (Sonnet), so a budget still bites.
pub const PRICES: [PriceRow; 7] = [
    PriceRow {
        ids: &["opus-4-5", "opus-4-6"],
        price: price(5.0, 25.0, 6.25, 0.5),
        long_context: None,
    },
    PriceRow {
        ids: &["opus"],
        price: price(15.0, 75.0, 18.75, 1.5),
        long_context: None,
    },
    PriceRow {
        ids: &["3-5-haiku", "haiku-3-5"],
        price: price(0.8, 4.0, 1.0, 0.08),
        long_context: None,
    },
    PriceRow {
        ids: &["3-haiku", "haiku-3"],
        price: price(0.25, 1.25, 0.3, 0.03),
        long_context: None,
    },
    PriceRow {
        ids: &["haiku"],
        price: price(1.0, 5.0, 1.25, 0.1),
        long_context: None,
    },
    PriceRow {
        ids: &["sonnet-4"],
        price: price(3.0, 15.0, 3.75, 0.3),
        long_context: Some(price(6.0, 22.5, 7.5, 0.6)),
    },
    PriceRow {
        ids: &[""],
        price: price(3.0, 15.0, 3.75, 0.3),
        long_context: None,
    },
];

/// The row of `model`'s family.
#[must_use]
pub fn price_row(model: &str) -> &'static PriceRow {
    let m = model.to_ascii_lowercase();
    PRICES
        .iter()
        .find(|row| row.ids.iter().any(|id| m.contains(id)))
        .unwrap_or(&PRICES[PRICES.len() - 1])
}

/// The price of a model (for a request within [`LONG_CONTEXT_TOKENS`]).
#[must_use]
pub fn price_for_model(model: &str) -> ModelPrice {
    price_row(model).price
}

/// The price of one request of `model` that sent `input_tokens` in all.
#[must_use]
pub fn price_for_request(model: &str, input_tokens: u64) -> ModelPrice {
    let row = price_row(model);
    match row.long_context {
        Some(long) if input_tokens > LONG_CONTEXT_TOKENS => long,
        _ => row.price,
    }
}

/// USD per web search a server tool made, on top of tokens ($10 per 1,000 searches on
/// Anthropic's pricing page; web fetches cost only their tokens).
pub const WEB_SEARCH_USD: f64 = 0.01;

/// A write to the 1-hour prompt cache costs this many times the input price (a 5-minute
/// write costs [`ModelPrice::cache_write`]).
pub const ONE_HOUR_WRITE_FACTOR: f64 = 2.0;

/// Cost in USD of one response's usage, server-tool requests included.
#[must_use]
pub fn usage_cost_usd(model: &str, usage: &Usage) -> f64 {
    let sent =
        usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
    let p = price_for_request(model, sent);
    // `cache_creation_input_tokens` counts writes of both lifetimes; those to the 1-hour
    // cache cost twice the input price instead of 1.25 times.
    let one_hour = usage
        .cache_creation
        .ephemeral_1h_input_tokens
        .min(usage.cache_creation_input_tokens);
    let five_minutes = usage.cache_creation_input_tokens - one_hour;
    #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
    let cost = usage.input_tokens as f64 * p.input
        + usage.output_tokens as f64 * p.output
        + five_minutes as f64 * p.cache_write
        + one_hour as f64 * p.input * ONE_HOUR_WRITE_FACTOR
        + usage.cache_read_input_tokens as f64 * p.cache_read;
    #[allow(clippy::cast_precision_loss)]
    let searches = usage.server_tool_use.web_search_requests as f64 * WEB_SEARCH_USD;
    cost / 1_000_000.0 + searches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn web_searches_cost_a_cent_each_on_top_of_tokens() {
        let mut usage = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        usage.server_tool_use.web_search_requests = 3;
        usage.server_tool_use.web_fetch_requests = 5;
        let cost = usage_cost_usd("claude-3-7-sonnet", &usage);
        assert!((cost - 3.03).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn sonnet_million_input_tokens_cost_three_dollars() {
        let usage = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        // Claude 3.7 Sonnet has no long-context rates (Sonnet 4's would apply here).
        assert!((usage_cost_usd("claude-3-7-sonnet", &usage) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn one_hour_cache_writes_cost_twice_the_input_price() {
        let mut usage = Usage {
            cache_creation_input_tokens: 3_000_000,
            ..Usage::default()
        };
        // All 5-minute writes: 3 × $3.75.
        assert!((usage_cost_usd("claude-3-7-sonnet", &usage) - 11.25).abs() < 1e-9);
        // One million of them to the 1-hour cache: 2 × $3.75 + 1 × $6.
        usage.cache_creation.ephemeral_1h_input_tokens = 1_000_000;
        assert!((usage_cost_usd("claude-3-7-sonnet", &usage) - 13.5).abs() < 1e-9);
        // A breakdown larger than the total is held to it.
        usage.cache_creation.ephemeral_1h_input_tokens = 9_000_000;
        assert!((usage_cost_usd("claude-3-7-sonnet", &usage) - 18.0).abs() < 1e-9);
        // Sonnet 4's long-context 1-hour write is twice its long-context input price.
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - 36.0).abs() < 1e-9);
    }

    #[test]
    fn families_are_priced_apart_in_every_form_of_their_ids() {
        let input = |model: &str| price_for_model(model).input;
        assert!((input("claude-3-haiku-20240307") - 0.25).abs() < 1e-9);
        assert!((input("claude-3-5-haiku-20241022") - 0.8).abs() < 1e-9);
        assert!((input("claude-haiku-4-5") - 1.0).abs() < 1e-9);
        assert!((input("claude-opus-4-1") - 15.0).abs() < 1e-9);
        assert!((input("claude-opus-4-5") - 5.0).abs() < 1e-9);
        assert!((input("claude-sonnet-4-5[1m]") - 3.0).abs() < 1e-9);
        assert!((input("claude-3-7-sonnet-latest") - 3.0).abs() < 1e-9);
        assert!((input("something-else") - 3.0).abs() < 1e-9);
        // Bedrock's inference profiles and Vertex's `@date` name the same families.
        assert!((input("us.anthropic.claude-opus-4-5-20251101-v1:0") - 5.0).abs() < 1e-9);
        assert!((input("claude-3-5-haiku@20241022") - 0.8).abs() < 1e-9);
    }

    #[test]
    fn a_sonnet_4_request_over_200k_input_tokens_is_priced_at_long_context_rates() {
        // 150k uncached + 60k read from the cache: 210k sent in all.
        let usage = Usage {
            input_tokens: 150_000,
            cache_read_input_tokens: 60_000,
            output_tokens: 1_000,
            ..Usage::default()
        };
        let long = 0.150 * 6.0 + 0.060 * 0.6 + 0.001 * 22.5;
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - long).abs() < 1e-9);
        // At 200k exactly the standard rates apply; Opus has no long-context rates.
        let at_limit = Usage {
            input_tokens: 200_000,
            ..Usage::default()
        };
        assert!((usage_cost_usd("claude-sonnet-4-5", &at_limit) - 0.6).abs() < 1e-9);
        assert!((usage_cost_usd("claude-opus-4-5", &usage) - (0.75 + 0.03 + 0.025)).abs() < 1e-9);
    }
}
