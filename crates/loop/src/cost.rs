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

const OPUS: ModelPrice = ModelPrice {
    input: 15.0,
    output: 75.0,
    cache_write: 18.75,
    cache_read: 1.5,
};
const OPUS_4_5: ModelPrice = ModelPrice {
    input: 5.0,
    output: 25.0,
    cache_write: 6.25,
    cache_read: 0.5,
};
const SONNET: ModelPrice = ModelPrice {
    input: 3.0,
    output: 15.0,
    cache_write: 3.75,
    cache_read: 0.3,
};
const HAIKU: ModelPrice = ModelPrice {
    input: 1.0,
    output: 5.0,
    cache_write: 1.25,
    cache_read: 0.1,
};
const HAIKU_3: ModelPrice = ModelPrice {
    input: 0.25,
    output: 1.25,
    cache_write: 0.3,
    cache_read: 0.03,
};

/// The price of a model by family; unknown models are priced as Sonnet so a budget
/// still bites.
#[must_use]
pub fn price_for_model(model: &str) -> ModelPrice {
    let m = model.to_ascii_lowercase();
    if m.contains("opus-4-5") || m.contains("opus-4-6") {
        OPUS_4_5
    } else if m.contains("opus") {
        OPUS
    } else if m.contains("haiku-3") || m.contains("3-haiku") {
        HAIKU_3
    } else if m.contains("haiku") {
        HAIKU
    } else {
        SONNET
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
    let p = price_for_model(model);
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
        let cost = usage_cost_usd("claude-sonnet-4-5", &usage);
        assert!((cost - 3.03).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn sonnet_million_input_tokens_cost_three_dollars() {
        let usage = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn one_hour_cache_writes_cost_twice_the_input_price() {
        let mut usage = Usage {
            cache_creation_input_tokens: 3_000_000,
            ..Usage::default()
        };
        // All 5-minute writes: 3 × $3.75.
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - 11.25).abs() < 1e-9);
        // One million of them to the 1-hour cache: 2 × $3.75 + 1 × $6.
        usage.cache_creation.ephemeral_1h_input_tokens = 1_000_000;
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - 13.5).abs() < 1e-9);
        // A breakdown larger than the total is held to it.
        usage.cache_creation.ephemeral_1h_input_tokens = 9_000_000;
        assert!((usage_cost_usd("claude-sonnet-4-5", &usage) - 18.0).abs() < 1e-9);
    }

    #[test]
    fn families_are_priced_apart() {
        assert_eq!(price_for_model("claude-3-haiku-20240307"), HAIKU_3);
        assert_eq!(price_for_model("claude-haiku-4-5"), HAIKU);
        assert_eq!(price_for_model("claude-opus-4-1"), OPUS);
        assert_eq!(price_for_model("claude-opus-4-5"), OPUS_4_5);
        assert_eq!(price_for_model("something-else"), SONNET);
    }
}
