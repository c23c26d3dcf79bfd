//! Token usage as the API reports it.

use serde::{Deserialize, Deserializer, Serialize};

/// Token usage of one response. In a stream, `message_start` carries the input side
/// and `message_delta` carries cumulative totals; [`Usage::merge_delta`] combines them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, deserialize_with = "zero_if_null")]
    pub input_tokens: u64,
    #[serde(default, deserialize_with = "zero_if_null")]
    pub output_tokens: u64,
    #[serde(default, deserialize_with = "zero_if_null")]
    pub cache_creation_input_tokens: u64,
    #[serde(default, deserialize_with = "zero_if_null")]
    pub cache_read_input_tokens: u64,
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

    /// Applies a `message_delta` usage: its non-zero fields are cumulative and replace ours.
    pub fn merge_delta(&mut self, delta: &Usage) {
        if delta.input_tokens > 0 {
            self.input_tokens = delta.input_tokens;
        }
        if delta.cache_creation_input_tokens > 0 {
            self.cache_creation_input_tokens = delta.cache_creation_input_tokens;
        }
        if delta.cache_read_input_tokens > 0 {
            self.cache_read_input_tokens = delta.cache_read_input_tokens;
        }
        if delta.output_tokens > 0 {
            self.output_tokens = delta.output_tokens;
        }
    }

    /// Adds another response's usage to a running total.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
    }
}
