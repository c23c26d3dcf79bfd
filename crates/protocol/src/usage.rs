//! Token usage as the API reports it.

use serde::{Deserialize, Deserializer, Serialize};

/// Token usage of one response. In a stream, `message_start` carries the input side
/// and `message_delta` carries cumulative totals; [`Usage::merge_delta`] combines them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens not read from or written to the prompt cache.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub input_tokens: u64,
    /// Tokens the model wrote.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub output_tokens: u64,
    /// Input tokens written to the prompt cache.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the prompt cache.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub cache_read_input_tokens: u64,
    /// Requests made by server tools (web search, web fetch); left out when none were.
    #[serde(
        default,
        deserialize_with = "default_if_null",
        skip_serializing_if = "ServerToolUsage::is_zero"
    )]
    pub server_tool_use: ServerToolUsage,
    /// `cache_creation_input_tokens` by cache lifetime (5-minute and 1-hour writes are
    /// priced apart); left out when the API did not break them down.
    #[serde(
        default,
        deserialize_with = "default_if_null",
        skip_serializing_if = "CacheCreation::is_zero"
    )]
    pub cache_creation: CacheCreation,
}

/// The `cache_creation` breakdown of a usage: prompt-cache writes by lifetime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCreation {
    /// Tokens written to the 5-minute cache.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub ephemeral_5m_input_tokens: u64,
    /// Tokens written to the 1-hour cache.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub ephemeral_1h_input_tokens: u64,
}

impl CacheCreation {
    /// Whether no write was broken down.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    fn add(&mut self, other: &Self) {
        self.ephemeral_5m_input_tokens += other.ephemeral_5m_input_tokens;
        self.ephemeral_1h_input_tokens += other.ephemeral_1h_input_tokens;
    }
}

/// The `server_tool_use` counters of a usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerToolUsage {
    /// Web searches the API ran for this request.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub web_search_requests: u64,
    /// Web fetches the API ran for this request.
    #[serde(default, deserialize_with = "zero_if_null")]
    pub web_fetch_requests: u64,
}

impl ServerToolUsage {
    /// Whether no server tool was used.
    #[must_use]
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    fn add(&mut self, other: &Self) {
        self.web_search_requests += other.web_search_requests;
        self.web_fetch_requests += other.web_fetch_requests;
    }
}

/// The `usage` of a `message_delta` event: cumulative totals of the fields it carries.
/// `output_tokens` is always there; the API may add the input side and the server-tool
/// counters. A field that is absent (or `null`) leaves the running value alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageDelta {
    /// The new input token count, if it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// The output token count so far, if sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The new cache-write count, if sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// The new cache-read count, if sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// The new server tool counters, if sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_tool_use: Option<ServerToolUsage>,
    /// The new cache-write breakdown, if sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation: Option<CacheCreation>,
}

fn default_if_null<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    d: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn zero_if_null<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(0))
}

impl Usage {
    /// Every token the context held for this response: input, both cache kinds and output.
    #[must_use]
    pub fn context_tokens(&self) -> u64 {
        self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
    }

    /// Applies a `message_delta` usage, field by field: each field the delta carries is a
    /// cumulative total and replaces ours (the later value wins, zero included); the
    /// fields it leaves out keep their value.
    pub fn merge_delta(&mut self, delta: &UsageDelta) {
        let UsageDelta {
            input_tokens,
            output_tokens,
            cache_creation_input_tokens,
            cache_read_input_tokens,
            server_tool_use,
            cache_creation,
        } = *delta;
        if let Some(n) = input_tokens {
            self.input_tokens = n;
        }
        if let Some(n) = output_tokens {
            self.output_tokens = n;
        }
        if let Some(n) = cache_creation_input_tokens {
            self.cache_creation_input_tokens = n;
        }
        if let Some(n) = cache_read_input_tokens {
            self.cache_read_input_tokens = n;
        }
        if let Some(counters) = server_tool_use {
            self.server_tool_use = counters;
        }
        if let Some(breakdown) = cache_creation {
            self.cache_creation = breakdown;
        }
    }

    /// Adds another response's usage to a running total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.server_tool_use.add(&other.server_tool_use);
        self.cache_creation.add(&other.cache_creation);
    }
}
