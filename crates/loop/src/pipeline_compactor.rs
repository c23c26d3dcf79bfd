//! `gyre-compact`'s pipeline behind the loop's [`ContextCompactor`] seam, with a
//! summarizer that asks the model through the same [`QueryDeps`] (foreground, retried).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use gyre_compact::{
    CompactConfig, CompactError, EstimateCounter, Pipeline, PrepareContext, Prepared, RecentFile,
    SummarizeError, Summarizer, SummaryRequest, Trigger, UsageAnchor,
};
use gyre_protocol::Message;
use gyre_tools::{BoxFuture, FileStateCache};
use tokio_util::sync::CancellationToken;

use crate::compaction::{CompactNowResult, CompactionOutcome, ContextCompactor, PreparedContext};
use crate::deps::QueryDeps;

/// `max_tokens` of a summary request.
const SUMMARY_MAX_TOKENS: u32 = 20_000;
/// Recently read files restored after a compaction (SPEC §7: up to 5).
const RESTORED_FILES: usize = 5;

/// Asks the model for the summary.
struct ModelSummarizer {
    deps: Arc<dyn QueryDeps>,
    model: String,
}

impl Summarizer for ModelSummarizer {
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        Box::pin(async move {
            crate::side_query::side_query(
                self.deps.as_ref(),
                &self.model,
                "You are summarizing a coding session so that it can continue in a fresh context. Follow the requested format exactly.",
                request.to_messages(),
                SUMMARY_MAX_TOKENS,
                CancellationToken::new(),
            )
            .await
            .map(|answer| answer.text)
            .map_err(SummarizeError::new)
        })
    }
}

/// The compaction pipeline of a session.
pub struct PipelineCompactor {
    pipeline: Pipeline,
    session_dir: Option<PathBuf>,
    file_state: Option<Arc<FileStateCache>>,
    autocompact_enabled: bool,
    last_prepare: Option<Instant>,
}

impl std::fmt::Debug for PipelineCompactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineCompactor")
            .field("session_dir", &self.session_dir)
            .finish_non_exhaustive()
    }
}

impl PipelineCompactor {
    /// A pipeline for `model` whose summaries come from `deps`. `session_dir` holds
    /// persisted tool results; `file_state` names the recently read files to restore.
    #[must_use]
    pub fn new(
        config: CompactConfig,
        deps: Arc<dyn QueryDeps>,
        session_dir: Option<PathBuf>,
        file_state: Option<Arc<FileStateCache>>,
    ) -> Self {
        let summarizer = Arc::new(ModelSummarizer {
            deps,
            model: config.model.clone(),
        });
        let autocompact_enabled = config.autocompact.enabled;
        Self {
            pipeline: Pipeline::new(config, summarizer, Arc::new(EstimateCounter)),
            session_dir,
            file_state,
            autocompact_enabled,
            last_prepare: None,
        }
    }

    /// Reads the recently read files; only when a compaction may need them.
    fn recent_files(&self) -> Vec<RecentFile> {
        let Some(cache) = &self.file_state else {
            return Vec::new();
        };
        cache
            .recent(RESTORED_FILES)
            .into_iter()
            .filter_map(|path| {
                let content = std::fs::read_to_string(&path).ok()?;
                Some(RecentFile { path, content })
            })
            .collect()
    }

    fn context(&self, anchor: Option<UsageAnchor>, with_files: bool) -> PrepareContext {
        PrepareContext {
            usage_anchor: anchor,
            idle: self.last_prepare.map(|t| t.elapsed()),
            session_dir: self.session_dir.clone(),
            recent_files: if with_files {
                self.recent_files()
            } else {
                Vec::new()
            },
            compact_instructions: None,
        }
    }
}

fn outcome(prepared: &Prepared) -> Option<CompactionOutcome> {
    prepared.boundary.as_ref().map(|b| CompactionOutcome {
        trigger: b.trigger,
        pre_tokens: b.pre_tokens,
        post_tokens: b.post_tokens,
    })
}

impl ContextCompactor for PipelineCompactor {
    fn prepare<'a>(
        &'a mut self,
        messages: &'a [Message],
        anchor: Option<UsageAnchor>,
    ) -> BoxFuture<'a, Result<PreparedContext, String>> {
        Box::pin(async move {
            let mut ctx = self.context(anchor, false);
            if self.autocompact_enabled
                && self.pipeline.token_state(messages, &ctx).above_autocompact
            {
                ctx.recent_files = self.recent_files();
            }
            self.last_prepare = Some(Instant::now());
            let prepared = self
                .pipeline
                .prepare(messages, &ctx)
                .await
                .map_err(|e| e.to_string())?;
            tracing::debug!(
                tokens = prepared.tokens.tokens,
                threshold = prepared.tokens.threshold,
                above_autocompact = prepared.tokens.above_autocompact,
                stages = ?prepared.stages,
                "context prepared"
            );
            Ok(PreparedContext {
                compacted: outcome(&prepared),
                at_blocking_limit: !self.autocompact_enabled && prepared.tokens.at_blocking_limit,
                messages: prepared.messages,
                history: prepared.history,
            })
        })
    }

    fn compact_now<'a>(
        &'a mut self,
        messages: &'a [Message],
        trigger: Trigger,
    ) -> BoxFuture<'a, CompactNowResult> {
        Box::pin(async move {
            let ctx = self.context(None, true);
            match self.pipeline.compact_now(messages, &ctx, trigger).await {
                Ok(prepared) => {
                    let Some(done) = outcome(&prepared) else {
                        return Ok(None);
                    };
                    let history = prepared.history.unwrap_or(prepared.messages);
                    Ok(Some((history, done)))
                }
                Err(CompactError::ReactiveAlreadyAttempted | CompactError::NothingToCompact) => {
                    Ok(None)
                }
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn recover_from_overflow(&mut self) -> bool {
        self.pipeline.recover_from_overflow()
    }

    fn reset_turn(&mut self) {
        self.pipeline.reset_turn();
    }

    fn recycle(&mut self, sent: Vec<Message>) {
        self.pipeline.recycle(sent);
    }
}
