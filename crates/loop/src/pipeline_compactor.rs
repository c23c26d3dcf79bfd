//! `gyre-compact`'s pipeline behind the loop's [`ContextCompactor`] seam, with a
//! summarizer that asks the model through the same [`QueryDeps`] (foreground, retried)
//! after the [`CompactHook`], if any, had its say.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Instant;

use gyre_compact::{
    CompactConfig, CompactError, EstimateCounter, Pipeline, PrepareContext, Prepared, RecentFile,
    SummarizeError, Summarizer, SummaryRequest, Trigger, UsageAnchor,
};
use gyre_protocol::{ContentBlock, Message};
use gyre_tools::{BoxFuture, FileStateCache};
use tokio_util::sync::CancellationToken;

use crate::compaction::{
    CompactNowResult, CompactionError, CompactionOutcome, ContextCompactor, PreparedContext,
};
use crate::deps::QueryDeps;
use crate::hooks::CompactHook;

/// `max_tokens` of a summary request.
const SUMMARY_MAX_TOKENS: u32 = 20_000;
/// Recently read files restored after a compaction, at most.
const RESTORED_FILES: usize = 5;

/// Asks the model for the summary, after the PreCompact hook.
struct ModelSummarizer {
    deps: Arc<dyn QueryDeps>,
    model: String,
    hook: OnceLock<Arc<dyn CompactHook>>,
    /// The user's instructions of the compaction under way (`/compact <instructions>`),
    /// for the hook's input.
    custom_instructions: Mutex<Option<String>>,
}

impl ModelSummarizer {
    /// The summary request's messages, with what the hook added after the prompt.
    async fn messages(&self, request: &SummaryRequest) -> Vec<Message> {
        let mut messages = request.to_messages();
        let Some(hook) = self.hook.get() else {
            return messages;
        };
        let custom = self
            .custom_instructions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let outcome = hook
            .before_compact(request.trigger, custom.as_deref())
            .await;
        let added: Vec<&str> = outcome
            .instructions
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        if let (false, Some(last)) = (added.is_empty(), messages.last_mut()) {
            last.content.push(ContentBlock::text(format!(
                "Additional instructions from a PreCompact hook:\n{}",
                added.join("\n")
            )));
        }
        messages
    }
}

impl Summarizer for ModelSummarizer {
    fn summarize<'a>(
        &'a self,
        request: &'a SummaryRequest,
    ) -> BoxFuture<'a, Result<String, SummarizeError>> {
        Box::pin(async move {
            let messages = self.messages(request).await;
            let summary = crate::side_query::side_query(
                self.deps.as_ref(),
                &self.model,
                "You are summarizing a coding session so that it can continue in a fresh context. Follow the requested format exactly.",
                messages,
                SUMMARY_MAX_TOKENS,
                CancellationToken::new(),
            )
            .await
            .map(|answer| answer.text)
            .map_err(|e| SummarizeError::new(e.to_string()))?;
            if let Some(hook) = self.hook.get() {
                hook.after_compact(request.trigger, &summary).await;
            }
            Ok(summary)
        })
    }
}

/// The compaction pipeline of a session.
pub struct PipelineCompactor {
    pipeline: Pipeline,
    summarizer: Arc<ModelSummarizer>,
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
            hook: OnceLock::new(),
            custom_instructions: Mutex::new(None),
        });
        let autocompact_enabled = config.autocompact.enabled;
        Self {
            pipeline: Pipeline::new(
                config,
                Arc::clone(&summarizer) as Arc<dyn Summarizer>,
                Arc::new(EstimateCounter),
            ),
            summarizer,
            session_dir,
            file_state,
            autocompact_enabled,
            last_prepare: None,
        }
    }

    /// `hook` runs before every summary (PreCompact).
    #[must_use]
    pub fn with_compact_hook(self, hook: Arc<dyn CompactHook>) -> Self {
        let _ = self.summarizer.hook.set(hook);
        self
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
    ) -> BoxFuture<'a, Result<PreparedContext, CompactionError>> {
        Box::pin(async move {
            let mut ctx = self.context(anchor, false);
            if self.autocompact_enabled
                && self.pipeline.token_state(messages, &ctx).above_autocompact
            {
                ctx.recent_files = self.recent_files();
            }
            self.last_prepare = Some(Instant::now());
            let prepared = self.pipeline.prepare(messages, &ctx).await?;
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
        self.compact_now_with(messages, trigger, None)
    }

    fn compact_now_with<'a>(
        &'a mut self,
        messages: &'a [Message],
        trigger: Trigger,
        instructions: Option<&'a str>,
    ) -> BoxFuture<'a, CompactNowResult> {
        Box::pin(async move {
            let mut ctx = self.context(None, true);
            ctx.compact_instructions = instructions.map(str::to_owned);
            (*self
                .summarizer
                .custom_instructions
                .lock()
                .unwrap_or_else(PoisonError::into_inner))
            .clone_from(&ctx.compact_instructions);
            let result = self.pipeline.compact_now(messages, &ctx, trigger).await;
            self.summarizer
                .custom_instructions
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            match result {
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
                Err(e) => Err(e.into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::PreCompactOutcome;
    use crate::testing::{FakeModel, text};

    /// Records what it was called with and asks for the test file to be kept.
    #[derive(Default)]
    struct KeepTests {
        calls: Mutex<Vec<(Trigger, Option<String>)>>,
    }

    impl CompactHook for KeepTests {
        fn before_compact<'a>(
            &'a self,
            trigger: Trigger,
            custom_instructions: Option<&'a str>,
        ) -> BoxFuture<'a, PreCompactOutcome> {
            self.calls
                .lock()
                .unwrap()
                .push((trigger, custom_instructions.map(str::to_owned)));
            Box::pin(async {
                PreCompactOutcome {
                    instructions: vec!["Keep tests/compact.rs verbatim.".into()],
                }
            })
        }
    }

    fn config() -> CompactConfig {
        let mut config = CompactConfig::new("claude-sonnet-4-5", 8192);
        config.autocompact.keep_recent_tokens = 10;
        config
    }

    fn history() -> Vec<Message> {
        (0..6)
            .flat_map(|i| {
                [
                    Message::user_text(format!("question {i}")),
                    Message::assistant(vec![ContentBlock::text(format!("answer {i}"))]),
                ]
            })
            .collect()
    }

    #[tokio::test]
    async fn the_compact_hook_runs_before_the_summary_and_its_instructions_go_with_it() {
        let model = FakeModel::new([text("<summary>all of it</summary>")]);
        let hook = Arc::new(KeepTests::default());
        let mut compactor = PipelineCompactor::new(
            config(),
            Arc::clone(&model) as Arc<dyn QueryDeps>,
            None,
            None,
        )
        .with_compact_hook(Arc::clone(&hook) as Arc<dyn CompactHook>);
        let done = compactor
            .compact_now_with(&history(), Trigger::Manual, Some("focus on the parser"))
            .await
            .unwrap();
        assert!(done.is_some());
        assert_eq!(
            *hook.calls.lock().unwrap(),
            [(Trigger::Manual, Some("focus on the parser".to_owned()))]
        );
        let sent = serde_json::to_string(&model.requests()[0].messages).unwrap();
        assert!(sent.contains("focus on the parser"), "{sent}");
        assert!(
            sent.contains(
                "Additional instructions from a PreCompact hook:\\nKeep tests/compact.rs verbatim."
            ),
            "{sent}"
        );
        // A compaction without instructions does not reuse the last ones.
        let model = FakeModel::new([text("<summary>again</summary>")]);
        let hook = Arc::new(KeepTests::default());
        let mut compactor = PipelineCompactor::new(
            config(),
            Arc::clone(&model) as Arc<dyn QueryDeps>,
            None,
            None,
        )
        .with_compact_hook(Arc::clone(&hook) as Arc<dyn CompactHook>);
        compactor
            .compact_now(&history(), Trigger::Reactive)
            .await
            .unwrap();
        assert_eq!(*hook.calls.lock().unwrap(), [(Trigger::Reactive, None)]);
    }
}
