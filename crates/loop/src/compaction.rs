//! The seam between the loop and context compaction.

use gyre_compact::{CompactError, Trigger, UsageAnchor};
use gyre_protocol::Message;
use gyre_tools::BoxFuture;
use serde::{Deserialize, Serialize};

/// A compaction that replaced the history with a boundary and a summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionOutcome {
    /// What caused it; `auto`, `manual` or `reactive` in transcripts and stream-json.
    pub trigger: Trigger,
    /// Tokens of the context before.
    pub pre_tokens: u64,
    /// Tokens of what is sent after.
    pub post_tokens: u64,
}

/// The history as it should go to the model this iteration.
#[derive(Debug, Clone, Default)]
pub struct PreparedContext {
    /// What to send.
    pub messages: Vec<Message>,
    /// When the stored history itself changed (autocompact, persisted tool results),
    /// the new history; the loop replaces its messages with it.
    pub history: Option<Vec<Message>>,
    /// `Some` when a compaction happened this iteration.
    pub compacted: Option<CompactionOutcome>,
    /// Past the blocking limit with autocompact off: the turn must end.
    pub at_blocking_limit: bool,
}

/// Why context compaction failed. A failed [`ContextCompactor::prepare`] sends the
/// history as it is; a failed `/compact` shows the message to the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompactionError {
    /// `gyre-compact`'s pipeline failed (the summarizer, an empty summary, …).
    #[error(transparent)]
    Pipeline(#[from] CompactError),
    /// Another compactor's failure, with its message.
    #[error("{0}")]
    Other(String),
}

impl From<String> for CompactionError {
    fn from(message: String) -> Self {
        Self::Other(message)
    }
}

impl From<&str> for CompactionError {
    fn from(message: &str) -> Self {
        Self::Other(message.to_owned())
    }
}

/// What [`ContextCompactor::compact_now`] gives: the new history and what happened,
/// `None` when there was nothing to compact, or why compacting failed.
pub type CompactNowResult = Result<Option<(Vec<Message>, CompactionOutcome)>, CompactionError>;

/// Context management as the loop sees it; `gyre-compact`'s pipeline is one
/// implementation, [`NoCompaction`] another.
pub trait ContextCompactor: Send {
    /// Runs before every model call. `anchor` is the usage of the last response and the
    /// index of its assistant message in `messages`.
    ///
    /// # Errors
    /// A [`CompactionError`]: the loop then sends the history as it is.
    fn prepare<'a>(
        &'a mut self,
        messages: &'a [Message],
        anchor: Option<UsageAnchor>,
    ) -> BoxFuture<'a, Result<PreparedContext, CompactionError>>;

    /// Compacts now (`/compact`, or reactively on prompt-too-long). `Ok(None)` when
    /// there was nothing to compact or compaction is not available.
    fn compact_now<'a>(
        &'a mut self,
        messages: &'a [Message],
        trigger: Trigger,
    ) -> BoxFuture<'a, CompactNowResult>;

    /// [`ContextCompactor::compact_now`] with the user's instructions for the summary
    /// (`/compact <instructions>`); the default leaves them out.
    fn compact_now_with<'a>(
        &'a mut self,
        messages: &'a [Message],
        trigger: Trigger,
        _instructions: Option<&'a str>,
    ) -> BoxFuture<'a, CompactNowResult> {
        self.compact_now(messages, trigger)
    }

    /// Commits every staged context collapse; `true` when that freed anything.
    fn recover_from_overflow(&mut self) -> bool;

    /// A new user turn begins (reactive compaction may be tried again).
    fn reset_turn(&mut self) {}

    /// The messages of a request that has been sent, handed back so that the next
    /// [`ContextCompactor::prepare`] can reuse them instead of copying the history.
    fn recycle(&mut self, _sent: Vec<Message>) {}
}

/// Sends the history as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCompaction;

impl ContextCompactor for NoCompaction {
    fn prepare<'a>(
        &'a mut self,
        messages: &'a [Message],
        _anchor: Option<UsageAnchor>,
    ) -> BoxFuture<'a, Result<PreparedContext, CompactionError>> {
        Box::pin(async move {
            Ok(PreparedContext {
                messages: messages.to_vec(),
                ..PreparedContext::default()
            })
        })
    }

    fn compact_now<'a>(
        &'a mut self,
        _messages: &'a [Message],
        _trigger: Trigger,
    ) -> BoxFuture<'a, CompactNowResult> {
        Box::pin(async { Ok(None) })
    }

    fn recover_from_overflow(&mut self) -> bool {
        false
    }
}
