//! The [`Pipeline`]: the five stages in order (tool result budget, snip, microcompact,
//! context collapse, autocompact), with per-session state.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use gyre_protocol::Message;

use crate::autocompact::{
    CircuitBreaker, CompactError, CompactInputs, Compaction, RecentFile, Summarizer, compact,
};
use crate::boundary::{CompactBoundary, Trigger, is_compact_boundary, last_boundary_index};
use crate::budget::{DirResultStore, apply_tool_result_budget};
use crate::collapse::ContextCollapse;
use crate::config::{CompactConfig, Thresholds};
use crate::microcompact::{microcompact, microcompact_batch};
use crate::snip::snip;
use crate::stage::{Stage, StageReport};
use crate::tokens::{CachedCounter, TokenCounter, UsageAnchor, measure};

/// Room left for the compaction prompt in the summarizer's own request.
const SUMMARY_PROMPT_RESERVE: u64 = 5_000;

/// What the loop knows at the start of a turn.
#[derive(Debug, Clone, Default)]
pub struct PrepareContext {
    /// Usage of the last API response and the index, in the history passed in, of the
    /// assistant message it belongs to. `None` on the first turn or after a compaction:
    /// everything is then estimated (and cached per message).
    pub usage_anchor: Option<UsageAnchor>,
    /// Time since the last assistant message; past `microcompact.idle_after` old tool
    /// results are cleared whatever the token count.
    pub idle: Option<Duration>,
    /// The session directory; oversized tool results go to `<dir>/tool-results/`. Without
    /// it the tool result budget does not run.
    pub session_dir: Option<PathBuf>,
    /// Files read recently, most recent first, restored after a compaction.
    pub recent_files: Vec<RecentFile>,
    /// Extra instructions for the summary (`/compact <instructions>`).
    pub compact_instructions: Option<String>,
}

/// The token count and where it stands against the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenState {
    /// Tokens of what is sent (after the pipeline).
    pub tokens: u64,
    /// `false` when the count is a rough estimate because it is far below every threshold.
    pub exact: bool,
    /// The level `percent_left` counts down to: the autocompact threshold, or the
    /// effective window when autocompact is off.
    pub threshold: u64,
    /// Percent of `threshold` still free (0–100).
    pub percent_left: u8,
    /// At or past the warning threshold: the UI shows how much is left.
    pub above_warning: bool,
    /// At or past the autocompact threshold: a compaction is due.
    pub above_autocompact: bool,
    /// At or past `effective − 3000`: without autocompact the turn must end.
    pub at_blocking_limit: bool,
}

impl TokenState {
    /// The state of `tokens` against `thresholds`; `autocompact` picks the level counted down to.
    #[must_use]
    pub fn new(tokens: u64, exact: bool, thresholds: &Thresholds, autocompact: bool) -> Self {
        let threshold = if autocompact {
            thresholds.autocompact
        } else {
            thresholds.effective_window
        };
        let left = threshold.saturating_sub(tokens);
        let percent_left = (left * 100 + threshold / 2)
            .checked_div(threshold)
            .map_or(0, |p| u8::try_from(p).unwrap_or(100));
        Self {
            tokens,
            exact,
            threshold,
            percent_left,
            above_warning: tokens >= thresholds.warning,
            above_autocompact: tokens >= thresholds.autocompact,
            at_blocking_limit: tokens >= thresholds.blocking,
        }
    }
}

/// The result of [`Pipeline::prepare`] and [`Pipeline::compact_now`].
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Prepared {
    /// What to send to the API (compact boundary markers are never sent).
    pub messages: Vec<Message>,
    /// `Some` when the stored history itself changed (tool results persisted, rounds
    /// snipped, old results cleared, or a compaction): the loop replaces its messages
    /// with it.
    pub history: Option<Vec<Message>>,
    /// `Some` when a compaction happened.
    pub boundary: Option<CompactBoundary>,
    /// One report per stage, in order.
    pub stages: Vec<StageReport>,
    /// Where the context stands after the pipeline.
    pub tokens: TokenState,
}

/// The compaction pipeline of one session: tool result budget → snip → microcompact →
/// context collapse → autocompact. It holds the session's state: the
/// collapse spans, the autocompact circuit breaker, the per-message token cache and the
/// per-turn reactive flag.
pub struct Pipeline {
    config: CompactConfig,
    summarizer: Arc<dyn Summarizer>,
    counter: CachedCounter,
    collapse: ContextCollapse,
    breaker: CircuitBreaker,
    reactive_attempted: bool,
    /// The messages of the last request sent ([`Pipeline::recycle`]): the next prepare
    /// brings them up to date instead of copying the history.
    recycled: Vec<Message>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("config", &self.config)
            .field("counter", &self.counter)
            .field("collapse", &self.collapse)
            .field("breaker", &self.breaker)
            .field("reactive_attempted", &self.reactive_attempted)
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// A pipeline with `config`, summarising with `summarizer` and counting with `counter`.
    #[must_use]
    pub fn new(
        config: CompactConfig,
        summarizer: Arc<dyn Summarizer>,
        counter: Arc<dyn TokenCounter>,
    ) -> Self {
        Self {
            config,
            summarizer,
            counter: CachedCounter::new(counter),
            collapse: ContextCollapse::new(),
            breaker: CircuitBreaker::default(),
            reactive_attempted: false,
            recycled: Vec::new(),
        }
    }

    /// Gives back the messages of a request once it is sent. The next
    /// [`Pipeline::prepare`] updates them in place, copying only the messages that
    /// differ from the history (the new ones, the one that carried the cache marker),
    /// where it would otherwise copy the whole history every turn.
    pub fn recycle(&mut self, sent: Vec<Message>) {
        self.recycled = sent;
    }

    /// The knobs in force.
    #[must_use]
    pub fn config(&self) -> &CompactConfig {
        &self.config
    }

    /// Change knobs mid-session (e.g. the model after a fallback).
    pub fn config_mut(&mut self) -> &mut CompactConfig {
        &mut self.config
    }

    /// The token levels of the current config (warning, autocompact, blocking).
    #[must_use]
    pub fn thresholds(&self) -> Thresholds {
        self.config.thresholds()
    }

    /// Consecutive autocompact failures so far.
    #[must_use]
    pub fn autocompact_failures(&self) -> u32 {
        self.breaker.failures()
    }

    /// Whether autocompact has stopped trying for this session.
    #[must_use]
    pub fn breaker_open(&self) -> bool {
        self.breaker
            .is_open(self.config.autocompact.max_consecutive_failures)
    }

    /// The collapse state (staged and committed spans).
    #[must_use]
    pub fn collapse(&self) -> &ContextCollapse {
        &self.collapse
    }

    /// Starts a new turn: a reactive compaction may be tried again.
    pub fn reset_turn(&mut self) {
        self.reactive_attempted = false;
    }

    /// Commits every staged collapse span ("collapse drain", on prompt-too-long).
    /// Returns whether anything was committed; then prepare and retry.
    pub fn recover_from_overflow(&mut self) -> bool {
        self.collapse.recover_from_overflow() > 0
    }

    /// The token state of `messages` without running any stage.
    #[must_use]
    pub fn token_state(&self, messages: &[Message], ctx: &PrepareContext) -> TokenState {
        let th = self.thresholds();
        let start = last_boundary_index(messages).unwrap_or(0);
        let m = measure(
            &self.counter,
            &messages[start..],
            shift_anchor(ctx.usage_anchor, start),
            th.floor(),
        );
        TokenState::new(m.tokens, m.exact, &th, self.config.autocompact.enabled)
    }

    /// Runs the pipeline on the stored history before an API call. Messages before the
    /// last compact boundary are ignored. Autocompact failures do not fail the call:
    /// they are reported in `stages` and counted by the circuit breaker.
    ///
    /// # Errors
    /// None today; reserved so stages may fail in the future without an API change.
    pub async fn prepare(
        &mut self,
        messages: &[Message],
        ctx: &PrepareContext,
    ) -> Result<Prepared, CompactError> {
        let th = self.thresholds();
        let start = last_boundary_index(messages).unwrap_or(0);
        let mut work = std::mem::take(&mut self.recycled);
        refresh(&mut work, &messages[start..]);
        let m = measure(
            &self.counter,
            &work,
            shift_anchor(ctx.usage_anchor, start),
            th.floor(),
        );
        let mut tokens = m.tokens;
        let mut stages = Vec::with_capacity(5);
        let mut history_changed = false;
        let cfg = &self.config;

        // 1. Tool result budget.
        let report = match (&ctx.session_dir, cfg.tool_result_budget.enabled) {
            (_, false) => StageReport::unchanged(Stage::ToolResultBudget, "disabled"),
            (None, true) => StageReport::unchanged(Stage::ToolResultBudget, "no session directory"),
            (Some(dir), true) => {
                let store = DirResultStore::new(dir);
                let r =
                    apply_tool_result_budget(work, &cfg.tool_result_budget, &store, &self.counter);
                work = r.messages;
                r.report
            }
        };
        tokens = tokens.saturating_sub(report.tokens_freed);
        history_changed |= report.changed;
        stages.push(report);

        // 2. Snip.
        let report = if !cfg.snip.enabled {
            StageReport::unchanged(Stage::Snip, "disabled")
        } else if tokens < th.warning {
            StageReport::unchanged(Stage::Snip, "below the warning level")
        } else {
            let target = th.effective_window * u64::from(cfg.snip.target_percent) / 100;
            let r = snip(
                work,
                &cfg.snip,
                tokens.saturating_sub(target),
                &self.counter,
            );
            work = r.messages;
            r.report
        };
        tokens = tokens.saturating_sub(report.tokens_freed);
        history_changed |= report.changed;
        stages.push(report);

        // 3. Microcompact.
        let report = if cfg.microcompact.should_run(tokens, th.warning, ctx.idle) {
            let r = microcompact(work, &cfg.microcompact, &self.counter);
            work = r.messages;
            r.report
        } else if cfg.microcompact.should_batch(tokens) {
            let r = microcompact_batch(work, &cfg.microcompact, &self.counter);
            work = r.messages;
            r.report
        } else if cfg.microcompact.enabled {
            StageReport::unchanged(Stage::Microcompact, "below the warning level, not idle")
        } else {
            StageReport::unchanged(Stage::Microcompact, "disabled")
        };
        tokens = tokens.saturating_sub(report.tokens_freed);
        history_changed |= report.changed;
        stages.push(report);

        // 4. Context collapse (a projection: `work` stays the history).
        let mut projection = None;
        let report = if cfg.collapse.enabled {
            if tokens >= th.collapse_stage {
                self.collapse.stage(&work, &cfg.collapse);
            }
            let limit = if cfg.autocompact.enabled {
                th.autocompact
            } else {
                th.blocking
            };
            if tokens >= limit {
                self.collapse
                    .commit(&work, tokens - limit + 1, &self.counter);
            }
            if self.collapse.committed() > 0 {
                let r = self.collapse.project(work.clone(), &self.counter);
                if r.report.changed {
                    projection = Some(r.messages);
                }
                r.report
            } else {
                let staged = self.collapse.staged();
                let detail = if staged == 0 {
                    "nothing staged".to_owned()
                } else {
                    format!("{staged} span(s) staged")
                };
                StageReport::unchanged(Stage::ContextCollapse, detail)
            }
        } else {
            StageReport::unchanged(Stage::ContextCollapse, "disabled")
        };
        tokens = tokens.saturating_sub(report.tokens_freed);
        stages.push(report);

        // 5. Autocompact.
        let report = if !cfg.autocompact.enabled {
            StageReport::unchanged(Stage::Autocompact, "disabled")
        } else if tokens < th.autocompact {
            StageReport::unchanged(Stage::Autocompact, "below the threshold")
        } else if self.breaker_open() {
            StageReport::unchanged(
                Stage::Autocompact,
                format!(
                    "circuit breaker open after {} consecutive failures",
                    self.breaker.failures()
                ),
            )
        } else {
            match self.run_compaction(&work, ctx, Trigger::Auto, tokens).await {
                Ok(c) => {
                    self.breaker.record_success();
                    return Ok(self.compacted(messages, start, c, stages));
                }
                Err(e) => {
                    self.breaker.record_failure();
                    StageReport::unchanged(Stage::Autocompact, format!("failed: {e}"))
                }
            }
        };
        stages.push(report);

        let state = TokenState::new(
            tokens,
            m.exact || tokens >= th.floor(),
            &th,
            self.config.autocompact.enabled,
        );
        let skip = usize::from(work.first().is_some_and(is_compact_boundary));
        let (sent, history) = match (projection, history_changed) {
            (Some(p), false) => (strip_boundary(p), None),
            (Some(p), true) => (strip_boundary(p), Some(join(messages, start, work))),
            (None, false) => (strip_boundary(work), None),
            (None, true) => (work[skip..].to_vec(), Some(join(messages, start, work))),
        };
        Ok(Prepared {
            messages: sent,
            history,
            boundary: None,
            stages,
            tokens: state,
        })
    }

    /// Compacts now, whatever the token count: `/compact` ([`Trigger::Manual`]) or the
    /// loop's reactive compaction after prompt-too-long ([`Trigger::Reactive`], once per
    /// turn until [`Pipeline::reset_turn`]). Neither is stopped by the circuit breaker.
    ///
    /// # Errors
    /// [`CompactError::ReactiveAlreadyAttempted`] on a second reactive call in a turn;
    /// [`CompactError::NothingToCompact`]; the summarizer's error;
    /// [`CompactError::EmptySummary`]; [`CompactError::NotSmaller`] when a reactive
    /// compaction would not shrink the context.
    pub async fn compact_now(
        &mut self,
        messages: &[Message],
        ctx: &PrepareContext,
        trigger: Trigger,
    ) -> Result<Prepared, CompactError> {
        if trigger == Trigger::Reactive {
            if self.reactive_attempted {
                return Err(CompactError::ReactiveAlreadyAttempted);
            }
            self.reactive_attempted = true;
        }
        let start = last_boundary_index(messages).unwrap_or(0);
        let work = &messages[start..];
        let tokens = measure(
            &self.counter,
            work,
            shift_anchor(ctx.usage_anchor, start),
            0,
        )
        .tokens;
        let c = self.run_compaction(work, ctx, trigger, tokens).await?;
        self.breaker.record_success();
        Ok(self.compacted(messages, start, c, Vec::new()))
    }

    async fn run_compaction(
        &self,
        work: &[Message],
        ctx: &PrepareContext,
        trigger: Trigger,
        pre_tokens: u64,
    ) -> Result<Compaction, CompactError> {
        let th = self.thresholds();
        let inputs = CompactInputs {
            trigger,
            pre_tokens,
            summary_input_budget: th.effective_window.saturating_sub(SUMMARY_PROMPT_RESERVE),
            recent_files: &ctx.recent_files,
            custom_instructions: ctx.compact_instructions.as_deref(),
        };
        let c = compact(
            work,
            inputs,
            &self.config.autocompact,
            self.summarizer.as_ref(),
            &self.counter,
        )
        .await?;
        if trigger != Trigger::Manual && c.boundary.post_tokens >= pre_tokens {
            return Err(CompactError::NotSmaller {
                pre: pre_tokens,
                post: c.boundary.post_tokens,
            });
        }
        Ok(c)
    }

    fn compacted(
        &mut self,
        messages: &[Message],
        start: usize,
        c: Compaction,
        mut stages: Vec<StageReport>,
    ) -> Prepared {
        self.collapse.reset();
        let th = self.thresholds();
        let freed = c.boundary.pre_tokens.saturating_sub(c.boundary.post_tokens);
        stages.push(StageReport::changed(
            Stage::Autocompact,
            freed,
            format!(
                "{} compaction: {} -> {} tokens",
                c.boundary.trigger.as_str(),
                c.boundary.pre_tokens,
                c.boundary.post_tokens
            ),
        ));
        let tokens = TokenState::new(
            c.boundary.post_tokens,
            true,
            &th,
            self.config.autocompact.enabled,
        );
        let sent = c.history[1..].to_vec();
        Prepared {
            messages: sent,
            history: Some(join(messages, start, c.history)),
            boundary: Some(c.boundary),
            stages,
            tokens,
        }
    }
}

fn shift_anchor(anchor: Option<UsageAnchor>, start: usize) -> Option<UsageAnchor> {
    anchor.and_then(|a| {
        a.message_index
            .checked_sub(start)
            .map(|message_index| UsageAnchor {
                message_index,
                usage: a.usage,
            })
    })
}

fn strip_boundary(mut messages: Vec<Message>) -> Vec<Message> {
    if messages.first().is_some_and(is_compact_boundary) {
        messages.remove(0);
    }
    messages
}

/// Makes `dst` equal to `src`, copying only the messages that differ. `dst` is
/// normally the last request's messages: `src` less its leading compact boundary (never
/// sent, so put back first to line the rest up), with the cache marker on what was then
/// the last message, and shorter by this turn's messages.
fn refresh(dst: &mut Vec<Message>, src: &[Message]) {
    if let Some(first) = src.first()
        && is_compact_boundary(first)
        && dst.first() != Some(first)
    {
        dst.insert(0, first.clone());
    }
    dst.truncate(src.len());
    for (i, message) in src.iter().enumerate() {
        match dst.get_mut(i) {
            Some(old) if old == message => {}
            Some(old) => old.clone_from(message),
            None => dst.push(message.clone()),
        }
    }
}

/// The stored history: what came before the working slice, then the new slice.
fn join(messages: &[Message], start: usize, work: Vec<Message>) -> Vec<Message> {
    if start == 0 {
        return work;
    }
    let mut out = Vec::with_capacity(start + work.len());
    out.extend_from_slice(&messages[..start]);
    out.extend(work);
    out
}
