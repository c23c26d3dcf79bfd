//! Every knob of the pipeline, and the token windows derived from the model.

use std::time::Duration;

/// Context window of models without a known larger one.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 200_000;
/// Context window of the 1M-token variants (model names containing `[1m]`).
pub const LARGE_CONTEXT_WINDOW: u64 = 1_000_000;
/// Output reserved for the summary is at most this much (as Claude Code's `autoCompact.ts`).
pub const MAX_OUTPUT_RESERVE: u64 = 20_000;
/// Autocompact fires this far below the effective window.
pub const AUTOCOMPACT_BUFFER_TOKENS: u64 = 13_000;
/// The warning level sits this far below the autocompact threshold.
pub const WARNING_BUFFER_TOKENS: u64 = 20_000;
/// Past `effective − 3000` a turn cannot go on without compacting.
pub const BLOCKING_BUFFER_TOKENS: u64 = 3_000;
/// The `max_tokens` that [`CompactConfig::default`] assumes requests are sent with. Only
/// `min(this, MAX_OUTPUT_RESERVE)` is reserved for output in the effective window. Not
/// gyre-loop's `DEFAULT_MAX_OUTPUT_TOKENS`, the `max_tokens` the loop actually sends.
pub const ASSUMED_MAX_OUTPUT_TOKENS: u64 = 32_000;

/// Environment variable: autocompact threshold as a percentage of the effective window.
pub const ENV_AUTOCOMPACT_PCT_OVERRIDE: &str = "GYRE_AUTOCOMPACT_PCT_OVERRIDE";
/// Environment variable: any value but empty, `0` or `false` turns autocompact off.
pub const ENV_DISABLE_AUTOCOMPACT: &str = "GYRE_DISABLE_AUTOCOMPACT";
/// Environment variable: overrides the model's context window (tokens).
pub const ENV_CONTEXT_WINDOW: &str = "GYRE_CONTEXT_WINDOW";

/// The context window of a model family: 1M for names containing `[1m]` (or ending in
/// `-1m`), 200k for everything else.
#[must_use]
pub fn context_window_for_model(model: &str) -> u64 {
    let model = model.to_ascii_lowercase();
    if model.contains("[1m]") || model.ends_with("-1m") {
        LARGE_CONTEXT_WINDOW
    } else {
        DEFAULT_CONTEXT_WINDOW
    }
}

/// Stage 1: tool results over their tool's cap are written to disk and replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResultBudgetConfig {
    /// Run the stage (default `true`). It also needs a session directory.
    pub enabled: bool,
    /// Cap in characters for tools not listed in `caps` (default 50000).
    pub default_cap: usize,
    /// Per-tool caps in characters (default `Bash` 30000, `Grep` 20000).
    pub caps: Vec<(String, usize)>,
    /// At most this many characters of tool results per message (default 200000);
    /// beyond it the largest results are persisted first.
    pub per_message_limit: usize,
    /// Bytes of the original kept as a preview (default 2000).
    pub preview_bytes: usize,
}

impl Default for ToolResultBudgetConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            default_cap: 50_000,
            caps: vec![("Bash".to_owned(), 30_000), ("Grep".to_owned(), 20_000)],
            per_message_limit: 200_000,
            preview_bytes: 2_000,
        }
    }
}

impl ToolResultBudgetConfig {
    /// The cap in characters for results of `tool`.
    #[must_use]
    pub fn cap_for(&self, tool: &str) -> usize {
        self.caps
            .iter()
            .find(|(name, _)| name == tool)
            .map_or(self.default_cap, |(_, cap)| *cap)
    }
}

/// Stage 2: drop the oldest whole rounds after the first user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnipConfig {
    /// Off unless enabled (default `false`). Runs above the warning level.
    pub enabled: bool,
    /// Never drop the most recent rounds (default 4).
    pub keep_recent_rounds: usize,
    /// Drop rounds until the context is under this percentage of the effective
    /// window (default 60).
    pub target_percent: u8,
}

impl Default for SnipConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            keep_recent_rounds: 4,
            target_percent: 60,
        }
    }
}

/// Stage 3: clear the content of older results of file and shell tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MicrocompactConfig {
    /// Run the stage (default `true`). Runs above the warning level or after `idle_after`.
    pub enabled: bool,
    /// Results of the most recent compactable tool calls kept intact (default 5).
    pub keep_recent: usize,
    /// Idle time after which the stage runs whatever the token count (default 60 min:
    /// the prompt cache has expired by then, so clearing costs nothing).
    pub idle_after: Duration,
    /// Tools whose results may be cleared (default Read, Bash, Grep, Glob, Edit, Write).
    pub tools: Vec<String>,
    /// Below the warning level, from this many tokens (default 40000; 0: never) older
    /// results are cleared in batches worth their rewrite of the prompt cache (see
    /// [`microcompact_batch`](crate::microcompact_batch)).
    pub batch_from_tokens: u64,
    /// Results of the most recent compactable calls a batch keeps (default 3).
    pub batch_keep_recent: usize,
    /// A batch must free this many times the tokens it rewrites (default 2): the cache
    /// writes them again at 1.25× where reads cost 0.1×, so the batch pays for itself
    /// within a handful of turns.
    pub batch_min_ratio: u64,
}

impl Default for MicrocompactConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            keep_recent: 5,
            idle_after: Duration::from_secs(60 * 60),
            tools: ["Read", "Bash", "Grep", "Glob", "Edit", "Write"]
                .into_iter()
                .map(str::to_owned)
                .collect(),
            batch_from_tokens: 40_000,
            batch_keep_recent: 3,
            batch_min_ratio: 2,
        }
    }
}

impl MicrocompactConfig {
    /// Whether a cache-friendly batch is tried: enabled, and from `batch_from_tokens`.
    #[must_use]
    pub fn should_batch(&self, tokens: u64) -> bool {
        self.enabled && self.batch_from_tokens > 0 && tokens >= self.batch_from_tokens
    }

    /// Whether the stage runs: enabled, and above the warning level or idle long enough.
    #[must_use]
    pub fn should_run(&self, tokens: u64, warning: u64, idle: Option<Duration>) -> bool {
        self.enabled && (tokens >= warning || idle.is_some_and(|d| d >= self.idle_after))
    }
}

/// Stage 4: show spans of older tool rounds as one digest each (a projection).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollapseConfig {
    /// Run the stage (default `true`).
    pub enabled: bool,
    /// Spans are staged from this percentage of the effective window (default 90).
    pub stage_at_percent: u8,
    /// The most recent units (rounds or user messages) are never collapsed (default 6).
    pub keep_recent_rounds: usize,
    /// A span holds at most this many rounds (default 12).
    pub max_span_rounds: usize,
}

impl Default for CollapseConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            stage_at_percent: 90,
            keep_recent_rounds: 6,
            max_span_rounds: 12,
        }
    }
}

/// Stage 5: summarise the history when it crosses the autocompact threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct AutocompactConfig {
    /// Run the stage (default `true`; `GYRE_DISABLE_AUTOCOMPACT` turns it off).
    pub enabled: bool,
    /// Threshold as a percentage of the effective window; the lower of this and
    /// `effective − 13000` wins (`GYRE_AUTOCOMPACT_PCT_OVERRIDE`).
    pub threshold_percent: Option<f64>,
    /// The most recent messages, up to this many tokens, are kept verbatim after the
    /// summary (default 8000). The last round is always kept.
    pub keep_recent_tokens: u64,
    /// Recently read files restored after the summary (default 5).
    pub max_files: usize,
    /// Tokens per restored file (default 5000); longer files are truncated.
    pub max_tokens_per_file: u64,
    /// Tokens for all restored files together (default 50000).
    pub max_file_tokens_total: u64,
    /// Consecutive failures after which autocompact stops for the session (default 3, as
    /// Claude Code's `MAX_CONSECUTIVE_AUTOCOMPACT_FAILURES`).
    pub max_consecutive_failures: u32,
}

impl Default for AutocompactConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold_percent: None,
            keep_recent_tokens: 8_000,
            max_files: 5,
            max_tokens_per_file: 5_000,
            max_file_tokens_total: 50_000,
            max_consecutive_failures: 3,
        }
    }
}

/// All knobs of the pipeline. Build it with [`CompactConfig::new`] or
/// [`CompactConfig::from_env`] (the only place the environment is read), then adjust
/// fields.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactConfig {
    /// Model name; picks the context window.
    pub model: String,
    /// `max_tokens` of requests; at most 20000 of it is reserved from the window.
    pub max_output_tokens: u64,
    /// Overrides the model's context window (`GYRE_CONTEXT_WINDOW`).
    pub context_window: Option<u64>,
    /// Stage 1: how large tool results may be before they go to disk.
    pub tool_result_budget: ToolResultBudgetConfig,
    /// Stage 2: dropping old rounds.
    pub snip: SnipConfig,
    /// Stage 3: clearing old tool results.
    pub microcompact: MicrocompactConfig,
    /// Stage 4: sending digests of old spans.
    pub collapse: CollapseConfig,
    /// Stage 5: summarising, and when to start.
    pub autocompact: AutocompactConfig,
}

impl Default for CompactConfig {
    fn default() -> Self {
        Self::new("", ASSUMED_MAX_OUTPUT_TOKENS)
    }
}

impl CompactConfig {
    /// Defaults for `model` sending requests with `max_output_tokens`.
    #[must_use]
    pub fn new(model: impl Into<String>, max_output_tokens: u64) -> Self {
        Self {
            model: model.into(),
            max_output_tokens,
            context_window: None,
            tool_result_budget: ToolResultBudgetConfig::default(),
            snip: SnipConfig::default(),
            microcompact: MicrocompactConfig::default(),
            collapse: CollapseConfig::default(),
            autocompact: AutocompactConfig::default(),
        }
    }

    /// Defaults adjusted by `GYRE_AUTOCOMPACT_PCT_OVERRIDE`, `GYRE_DISABLE_AUTOCOMPACT`
    /// and `GYRE_CONTEXT_WINDOW`. Unparsable values are ignored.
    #[must_use]
    pub fn from_env(model: impl Into<String>, max_output_tokens: u64) -> Self {
        Self::from_vars(model, max_output_tokens, |name| std::env::var(name).ok())
    }

    /// [`CompactConfig::from_env`] with the variables looked up through `var`.
    #[must_use]
    pub fn from_vars(
        model: impl Into<String>,
        max_output_tokens: u64,
        var: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let mut config = Self::new(model, max_output_tokens);
        if let Some(pct) = var(ENV_AUTOCOMPACT_PCT_OVERRIDE)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|p| *p > 0.0 && *p <= 100.0)
        {
            config.autocompact.threshold_percent = Some(pct);
        }
        if let Some(v) = var(ENV_DISABLE_AUTOCOMPACT) {
            let v = v.trim().to_ascii_lowercase();
            if !(v.is_empty() || v == "0" || v == "false" || v == "no") {
                config.autocompact.enabled = false;
            }
        }
        if let Some(window) = var(ENV_CONTEXT_WINDOW)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|w| *w > 0)
        {
            config.context_window = Some(window);
        }
        config
    }

    /// The token levels derived from the model, `max_output_tokens` and the overrides.
    #[must_use]
    pub fn thresholds(&self) -> Thresholds {
        let context_window = self
            .context_window
            .unwrap_or_else(|| context_window_for_model(&self.model));
        let effective_window =
            context_window.saturating_sub(self.max_output_tokens.min(MAX_OUTPUT_RESERVE));
        let mut autocompact = effective_window.saturating_sub(AUTOCOMPACT_BUFFER_TOKENS);
        if let Some(pct) = self.autocompact.threshold_percent {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let by_pct = (effective_window as f64 * pct / 100.0).floor() as u64;
            autocompact = autocompact.min(by_pct);
        }
        let collapse_stage = effective_window * u64::from(self.collapse.stage_at_percent) / 100;
        Thresholds {
            context_window,
            effective_window,
            autocompact,
            warning: autocompact.saturating_sub(WARNING_BUFFER_TOKENS),
            blocking: effective_window.saturating_sub(BLOCKING_BUFFER_TOKENS),
            collapse_stage,
        }
    }
}

/// Token levels of one model configuration, all derived from its context window and
/// `max_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// The model's context window.
    pub context_window: u64,
    /// `context_window − min(max_output_tokens, 20000)`.
    pub effective_window: u64,
    /// `effective_window − 13000`, or lower with a percentage override.
    pub autocompact: u64,
    /// `autocompact − 20000`: microcompact (and snip) start here.
    pub warning: u64,
    /// `effective_window − 3000`: without autocompact the turn must stop here.
    pub blocking: u64,
    /// Context collapse stages spans from here (90% of the effective window).
    pub collapse_stage: u64,
}

impl Thresholds {
    /// The lowest level any stage reacts to: below it no stage needs an exact count.
    #[must_use]
    pub fn floor(&self) -> u64 {
        self.warning
            .min(self.collapse_stage)
            .min(self.autocompact)
            .min(self.blocking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_windows_match_the_spec_numbers() {
        let t = CompactConfig::new("claude-sonnet-4-5", 32_000).thresholds();
        assert_eq!(t.context_window, 200_000);
        assert_eq!(t.effective_window, 180_000);
        assert_eq!(t.autocompact, 167_000);
        assert_eq!(t.warning, 147_000);
        assert_eq!(t.blocking, 177_000);
        assert_eq!(t.collapse_stage, 162_000);
    }

    #[test]
    fn small_max_output_reserves_only_what_it_needs() {
        let t = CompactConfig::new("claude-haiku", 8_192).thresholds();
        assert_eq!(t.effective_window, 200_000 - 8_192);
        assert_eq!(t.autocompact, 200_000 - 8_192 - 13_000);
    }

    #[test]
    fn one_million_variants_get_the_large_window() {
        assert_eq!(context_window_for_model("claude-sonnet-4-5[1m]"), 1_000_000);
        assert_eq!(context_window_for_model("claude-opus-4"), 200_000);
        let t = CompactConfig::new("claude-sonnet-4-5[1m]", 64_000).thresholds();
        assert_eq!(t.effective_window, 980_000);
    }

    #[test]
    fn env_percent_override_lowers_the_threshold_but_never_raises_it() {
        let env = |pct: &'static str| {
            move |name: &str| (name == ENV_AUTOCOMPACT_PCT_OVERRIDE).then(|| pct.to_owned())
        };
        let t = CompactConfig::from_vars("m", 32_000, env("50")).thresholds();
        assert_eq!(t.autocompact, 90_000);
        assert_eq!(t.warning, 70_000);
        let t = CompactConfig::from_vars("m", 32_000, env("99")).thresholds();
        assert_eq!(t.autocompact, 167_000);
        let c = CompactConfig::from_vars("m", 32_000, env("abc"));
        assert_eq!(c.autocompact.threshold_percent, None);
    }

    #[test]
    fn env_disable_and_window_override() {
        let c = CompactConfig::from_vars("m", 32_000, |name| match name {
            ENV_DISABLE_AUTOCOMPACT => Some("1".to_owned()),
            ENV_CONTEXT_WINDOW => Some("50000".to_owned()),
            _ => None,
        });
        assert!(!c.autocompact.enabled);
        assert_eq!(c.thresholds().context_window, 50_000);
        let c = CompactConfig::from_vars("m", 32_000, |_| Some("0".to_owned()));
        assert!(c.autocompact.enabled);
    }

    #[test]
    fn caps_per_tool() {
        let c = ToolResultBudgetConfig::default();
        assert_eq!(c.cap_for("Bash"), 30_000);
        assert_eq!(c.cap_for("Grep"), 20_000);
        assert_eq!(c.cap_for("Read"), 50_000);
    }
}
