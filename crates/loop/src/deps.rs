//! The seam between the loop and the world it calls (the model, ids, the clock): tests
//! inject fakes here instead of patching modules.

use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use futures::Stream;
use gyre_api::{ApiError, ModelClient, ModelEvent, RetryOptions, stream_with_retry};
use gyre_protocol::MessagesRequest;
use tokio_util::sync::CancellationToken;

/// A model response as the loop consumes it: raw events, completed blocks, retry
/// notices and the final message, or the error that ended the attempt.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ApiError>> + Send>>;

/// What the loop needs from outside itself.
pub trait QueryDeps: Send + Sync {
    /// Streams one model response, retrying as the policy says. `fallback_model` is the
    /// model to switch to after repeated overloads (`None` once switched).
    /// The request is the caller's, which may send it again after a fallback; the stream
    /// shares it (every attempt sends the same one). A wrapper may change it before it
    /// is sent: `Arc::make_mut` copies nothing while the caller holds the only
    /// reference, as the loop does.
    fn call_model(
        &self,
        request: &mut Arc<MessagesRequest>,
        fallback_model: Option<String>,
        cancel: CancellationToken,
    ) -> ModelStream;

    /// The same seam for another conversation (a side request, a sub-agent), keeping
    /// nothing per conversation with this one: the HTTP client's body encoder, above all,
    /// whose cache of the last request a request of another conversation would evict
    /// (see [`ModelClient::fork`]). `None` (the default): nothing is kept per
    /// conversation; use `self`.
    fn fork(&self) -> Option<Arc<dyn QueryDeps>> {
        None
    }

    /// A fresh unique id for a message.
    fn uuid(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// Wall-clock time, for transcripts and idle detection.
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// The production deps: a [`ModelClient`] behind the retry layer.
pub struct ApiDeps {
    client: Arc<dyn ModelClient>,
    retry: RetryOptions,
}

impl std::fmt::Debug for ApiDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiDeps").finish_non_exhaustive()
    }
}

impl ApiDeps {
    /// Calls through `client`, retrying and falling back as `retry` says.
    #[must_use]
    pub fn new(client: Arc<dyn ModelClient>, retry: RetryOptions) -> Self {
        Self { client, retry }
    }

    /// The client. A request beside the conversation goes through its
    /// [`fork`](ModelClient::fork) (see [`QueryDeps::fork`]), not through it.
    #[must_use]
    pub fn client(&self) -> Arc<dyn ModelClient> {
        Arc::clone(&self.client)
    }

    /// The retry options every request starts from.
    #[must_use]
    pub fn retry_options(&self) -> &RetryOptions {
        &self.retry
    }
}

impl QueryDeps for ApiDeps {
    fn fork(&self) -> Option<Arc<dyn QueryDeps>> {
        let client = self.client.fork()?;
        Some(Arc::new(Self::new(client, self.retry.clone())))
    }

    fn call_model(
        &self,
        request: &mut Arc<MessagesRequest>,
        fallback_model: Option<String>,
        cancel: CancellationToken,
    ) -> ModelStream {
        let mut options = self.retry.clone();
        options.fallback_model = fallback_model;
        stream_with_retry(
            Arc::clone(&self.client),
            Arc::clone(request),
            options,
            cancel,
        )
    }
}
