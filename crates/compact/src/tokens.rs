//! Token accounting: the [`TokenCounter`] seam, the tiktoken default, a per-message
//! cache, and the usage-anchored measure of a history.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
#[cfg(feature = "tiktoken")]
use std::sync::OnceLock;
use std::sync::{Arc, Mutex, PoisonError};

use gyre_protocol::{ContentBlock, Message, ToolResultContent, ToolResultPart, Usage};
use serde_json::Value;
#[cfg(feature = "tiktoken")]
use tiktoken_rs::CoreBPE;

/// Tokens charged for an image: a full-size image costs about (1092·1092)/750 ≈ 1600.
pub const IMAGE_TOKENS: u64 = 1_600;
/// Per-message framing (role, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// Per-block framing (type, ids).
pub const BLOCK_OVERHEAD_TOKENS: u64 = 3;

/// Counts tokens. The pipeline only needs an estimate; implementations must keep
/// [`TokenCounter::text_upper_bound`] ≥ [`TokenCounter::count_text`] so the cheap bound
/// can stand in for exact counting while it is below every threshold.
pub trait TokenCounter: Send + Sync {
    /// Tokens of a piece of text.
    fn count_text(&self, text: &str) -> u64;

    /// A cheap upper bound of [`TokenCounter::count_text`]; default one token per byte
    /// (a byte-level BPE never produces more tokens than bytes).
    fn text_upper_bound(&self, text: &str) -> u64 {
        text.len() as u64
    }

    /// Tokens of a whole message: every block's text plus framing; images count
    /// [`IMAGE_TOKENS`].
    fn count_message(&self, message: &Message) -> u64 {
        message_tokens(message, &|t| self.count_text(t))
    }

    /// Upper bound of [`TokenCounter::count_message`], O(blocks) not O(bytes).
    fn message_upper_bound(&self, message: &Message) -> u64 {
        message_tokens(message, &|t| self.text_upper_bound(t))
    }
}

/// Walks a message, charging each piece of text with `text`.
pub(crate) fn message_tokens(message: &Message, text: &dyn Fn(&str) -> u64) -> u64 {
    let mut total = MESSAGE_OVERHEAD_TOKENS;
    for block in &message.content {
        total += BLOCK_OVERHEAD_TOKENS
            + match block {
                ContentBlock::Text { text: t, extra, .. } => text(t) + fields_tokens(extra, text),
                ContentBlock::ToolUse {
                    name, input, extra, ..
                } => text(name) + json_tokens(input, text) + fields_tokens(extra, text),
                ContentBlock::ToolResult { content, .. } => result_tokens(content, text),
                ContentBlock::Thinking {
                    thinking, extra, ..
                } => text(thinking) + fields_tokens(extra, text),
                // Opaque encrypted payload: charged by size in both count and bound.
                ContentBlock::RedactedThinking { data, .. } => (data.len() as u64).div_ceil(4),
                ContentBlock::Image { .. } => IMAGE_TOKENS,
                ContentBlock::Unknown(value) => json_tokens(value, text),
            };
    }
    total
}

pub(crate) fn result_tokens(content: &ToolResultContent, text: &dyn Fn(&str) -> u64) -> u64 {
    match content {
        ToolResultContent::Text(t) => text(t),
        ToolResultContent::Parts(parts) => parts
            .iter()
            .map(|p| match p {
                ToolResultPart::Text { text: t } => text(t),
                ToolResultPart::Image { .. } => IMAGE_TOKENS,
            })
            .sum(),
    }
}

/// The fields of a block gyre does not model (a text block's citations, …), sent with it.
fn fields_tokens(fields: &serde_json::Map<String, Value>, text: &dyn Fn(&str) -> u64) -> u64 {
    fields
        .iter()
        .map(|(k, v)| 1 + text(k) + json_tokens(v, text))
        .sum()
}

fn json_tokens(value: &Value, text: &dyn Fn(&str) -> u64) -> u64 {
    match value {
        Value::Null | Value::Bool(_) => 1,
        Value::Number(n) => text(&n.to_string()),
        Value::String(s) => 1 + text(s),
        Value::Array(items) => 1 + items.iter().map(|v| json_tokens(v, text)).sum::<u64>(),
        Value::Object(map) => 1 + fields_tokens(map, text),
    }
}

#[cfg(feature = "tiktoken")]
static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();

/// The BPE tables, built on first use only.
#[cfg(feature = "tiktoken")]
fn bpe() -> Option<&'static CoreBPE> {
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

/// Whether the tokenizer tables have been built in this process (never, without the
/// `tiktoken` feature).
#[must_use]
pub fn tokenizer_loaded() -> bool {
    #[cfg(feature = "tiktoken")]
    {
        BPE.get().is_some()
    }
    #[cfg(not(feature = "tiktoken"))]
    {
        false
    }
}

/// The default counter: tiktoken's `cl100k_base` BPE, a close stand-in for Claude's
/// tokenizer. Tables are built lazily the first time text is counted; if they cannot
/// be built, four bytes per token is used. Needs the `tiktoken` feature (on by default).
#[cfg(feature = "tiktoken")]
#[derive(Debug, Default, Clone, Copy)]
pub struct TiktokenCounter;

#[cfg(feature = "tiktoken")]
impl TokenCounter for TiktokenCounter {
    fn count_text(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        match bpe() {
            Some(bpe) => bpe.encode_ordinary(text).len() as u64,
            None => (text.len() as u64).div_ceil(4),
        }
    }
}

/// The default of a session: an estimate from the text's length, 3 bytes a token
/// (Claude's tokenizer gives about 3.5 for code and 4 for English, so this errs on the
/// side of compacting early). The thresholds are crossed on the API's own usage count
/// plus an estimate of the few messages sent since; tiktoken's tables (about 20 MB once
/// built, and not Claude's tokenizer either) would make that estimate no more exact.
#[derive(Debug, Default, Clone, Copy)]
pub struct EstimateCounter;

/// Bytes a token for [`EstimateCounter`].
pub const ESTIMATE_BYTES_PER_TOKEN: u64 = 3;

impl TokenCounter for EstimateCounter {
    fn count_text(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(ESTIMATE_BYTES_PER_TOKEN)
    }

    fn text_upper_bound(&self, text: &str) -> u64 {
        self.count_text(text)
    }
}

/// Four bytes per token: cheap, deterministic, good for tests and benchmarks.
#[derive(Debug, Default, Clone, Copy)]
pub struct BytesPerTokenCounter;

impl TokenCounter for BytesPerTokenCounter {
    fn count_text(&self, text: &str) -> u64 {
        (text.len() as u64).div_ceil(4)
    }
}

/// Wraps a counter with a per-message cache keyed by a fingerprint computed in
/// O(blocks) (lengths and short samples of each text), so a message is tokenized once.
pub struct CachedCounter {
    inner: Arc<dyn TokenCounter>,
    cache: Mutex<HashMap<u64, u64>>,
}

impl std::fmt::Debug for CachedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedCounter")
            .field("cached_messages", &self.cached_len())
            .finish_non_exhaustive()
    }
}

/// The cache is dropped wholesale past this many entries (a very long session).
const CACHE_LIMIT: usize = 200_000;

impl CachedCounter {
    /// A cache in front of `inner`.
    #[must_use]
    pub fn new(inner: Arc<dyn TokenCounter>) -> Self {
        Self {
            inner,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Messages whose count is cached.
    #[must_use]
    pub fn cached_len(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl TokenCounter for CachedCounter {
    fn count_text(&self, text: &str) -> u64 {
        self.inner.count_text(text)
    }

    fn text_upper_bound(&self, text: &str) -> u64 {
        self.inner.text_upper_bound(text)
    }

    fn count_message(&self, message: &Message) -> u64 {
        let key = fingerprint(message);
        if let Some(n) = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return *n;
        }
        let n = self.inner.count_message(message);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(key, n);
        n
    }

    fn message_upper_bound(&self, message: &Message) -> u64 {
        self.inner.message_upper_bound(message)
    }
}

fn sample(h: &mut DefaultHasher, s: &str) {
    const EDGE: usize = 48;
    let b = s.as_bytes();
    b.len().hash(h);
    if b.len() <= 2 * EDGE {
        b.hash(h);
    } else {
        b[..EDGE].hash(h);
        b[b.len() / 2..b.len() / 2 + 8].hash(h);
        b[b.len() - EDGE..].hash(h);
    }
}

fn sample_json(h: &mut DefaultHasher, v: &Value) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => b.hash(h),
        Value::Number(n) => n.to_string().hash(h),
        Value::String(s) => sample(h, s),
        Value::Array(items) => {
            items.len().hash(h);
            items.iter().for_each(|i| sample_json(h, i));
        }
        Value::Object(map) => {
            map.len().hash(h);
            for (k, v) in map {
                k.hash(h);
                sample_json(h, v);
            }
        }
    }
}

/// A position-independent key of a message, cheap to compute.
fn fingerprint(message: &Message) -> u64 {
    let mut h = DefaultHasher::new();
    message.role.hash(&mut h);
    message.content.len().hash(&mut h);
    for block in &message.content {
        block.kind().hash(&mut h);
        match block {
            ContentBlock::Text { text, .. } => sample(&mut h, text),
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                id.hash(&mut h);
                name.hash(&mut h);
                sample_json(&mut h, input);
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                tool_use_id.hash(&mut h);
                is_error.hash(&mut h);
                match content {
                    ToolResultContent::Text(t) => sample(&mut h, t),
                    ToolResultContent::Parts(parts) => {
                        parts.len().hash(&mut h);
                        for p in parts {
                            match p {
                                ToolResultPart::Text { text } => sample(&mut h, text),
                                ToolResultPart::Image { .. } => 1u8.hash(&mut h),
                            }
                        }
                    }
                }
            }
            ContentBlock::Thinking { thinking, .. } => sample(&mut h, thinking),
            ContentBlock::RedactedThinking { data, .. } => data.len().hash(&mut h),
            ContentBlock::Image { .. } => {}
            ContentBlock::Unknown(v) => sample_json(&mut h, v),
        }
    }
    h.finish()
}

/// Usage of the last API response and the index (in the history passed to the
/// pipeline) of the assistant message it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageAnchor {
    /// The position, in the history given to the pipeline, of the assistant message the usage came with.
    pub message_index: usize,
    /// The usage the API reported for that response.
    pub usage: Usage,
}

/// A token count of a history and whether it is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    /// The token count.
    pub tokens: u64,
    /// `false` when the cheap bound was below `floor` and a rough estimate (a quarter of
    /// the bound) was reported instead of tokenizing.
    pub exact: bool,
}

/// Tokens of `messages`: the anchor's usage (input + cache read + cache creation +
/// output) plus an estimate of the messages after it. While the one-token-per-byte
/// bound stays below `floor`, nothing is tokenized.
pub fn measure(
    counter: &dyn TokenCounter,
    messages: &[Message],
    anchor: Option<UsageAnchor>,
    floor: u64,
) -> Measure {
    let (base, rest) = match anchor {
        Some(a) if a.message_index < messages.len() => {
            (a.usage.context_tokens(), &messages[a.message_index + 1..])
        }
        _ => (0, messages),
    };
    let bound: u64 = rest.iter().map(|m| counter.message_upper_bound(m)).sum();
    if base + bound < floor {
        return Measure {
            tokens: base + bound.div_ceil(4),
            exact: false,
        };
    }
    Measure {
        tokens: base + rest.iter().map(|m| counter.count_message(m)).sum::<u64>(),
        exact: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Probe(AtomicUsize);
    impl TokenCounter for Probe {
        fn count_text(&self, text: &str) -> u64 {
            self.0.fetch_add(1, Ordering::SeqCst);
            (text.len() as u64).div_ceil(4)
        }
    }

    fn history() -> Vec<Message> {
        vec![
            Message::user_text("hello there"),
            Message::assistant(vec![ContentBlock::text("hi")]),
            Message::user_text("please do the thing"),
        ]
    }

    #[test]
    fn citations_of_a_text_block_are_counted() {
        let plain = Message::assistant(vec![ContentBlock::text("Rust is fast.")]);
        let cited: Message = serde_json::from_value(serde_json::json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "Rust is fast.", "citations": [
                {"type": "char_location", "cited_text": "Rust is a fast language for systems."}]}]
        }))
        .unwrap();
        let c = BytesPerTokenCounter;
        assert!(c.count_message(&cited) > c.count_message(&plain) + 8);
    }

    #[cfg(feature = "tiktoken")]
    #[test]
    fn tiktoken_counts_plain_text() {
        let c = TiktokenCounter;
        assert_eq!(c.count_text(""), 0);
        let n = c.count_text("hello world, this is a test");
        assert!((5..=10).contains(&n), "{n}");
        assert!(tokenizer_loaded());
        assert!(c.text_upper_bound("hello") >= c.count_text("hello"));
    }

    #[test]
    fn short_sessions_never_tokenize() {
        let probe = Arc::new(Probe::default());
        let m = measure(probe.as_ref(), &history(), None, 1_000);
        assert!(!m.exact);
        assert_eq!(probe.0.load(Ordering::SeqCst), 0);
        let m = measure(probe.as_ref(), &history(), None, 5);
        assert!(m.exact);
        assert!(probe.0.load(Ordering::SeqCst) > 0);
    }

    #[test]
    fn anchored_count_adds_usage_and_only_later_messages() {
        let usage = Usage {
            input_tokens: 100,
            output_tokens: 10,
            cache_creation_input_tokens: 1_000,
            cache_read_input_tokens: 50_000,
            ..Usage::default()
        };
        let h = history();
        let anchor = UsageAnchor {
            message_index: 1,
            usage,
        };
        let m = measure(&BytesPerTokenCounter, &h, Some(anchor), 0);
        assert_eq!(m.tokens, 51_110 + BytesPerTokenCounter.count_message(&h[2]));
        // An anchor past the end is ignored.
        let stale = UsageAnchor {
            message_index: 9,
            usage,
        };
        let m = measure(&BytesPerTokenCounter, &h, Some(stale), 0);
        let all: u64 = h
            .iter()
            .map(|x| BytesPerTokenCounter.count_message(x))
            .sum();
        assert_eq!(m.tokens, all);
    }

    #[test]
    fn cache_counts_each_message_once() {
        let probe = Arc::new(Probe::default());
        let cached = CachedCounter::new(probe.clone());
        let h = history();
        let first: u64 = h.iter().map(|m| cached.count_message(m)).sum();
        let calls = probe.0.load(Ordering::SeqCst);
        let second: u64 = h.iter().map(|m| cached.count_message(m)).sum();
        assert_eq!(first, second);
        assert_eq!(probe.0.load(Ordering::SeqCst), calls);
        assert_eq!(cached.cached_len(), 3);
        // A changed message is a new key.
        let _ = cached.count_message(&Message::user_text("hello there!"));
        assert!(probe.0.load(Ordering::SeqCst) > calls);
    }

    #[test]
    fn images_and_tool_blocks_are_charged() {
        let m = Message::user(vec![ContentBlock::Image {
            source: gyre_protocol::ImageSource::Url {
                url: "https://x".into(),
            },
            cache_control: None,
        }]);
        assert_eq!(
            BytesPerTokenCounter.count_message(&m),
            MESSAGE_OVERHEAD_TOKENS + BLOCK_OVERHEAD_TOKENS + IMAGE_TOKENS
        );
        let tu = Message::assistant(vec![ContentBlock::tool_use(
            "t1",
            "Read",
            serde_json::json!({"file_path": "/a/b.rs", "limit": 10}),
        )]);
        #[cfg(feature = "tiktoken")]
        assert!(TiktokenCounter.message_upper_bound(&tu) >= TiktokenCounter.count_message(&tu));
        assert!(
            BytesPerTokenCounter.message_upper_bound(&tu)
                >= BytesPerTokenCounter.count_message(&tu)
        );
    }
}
