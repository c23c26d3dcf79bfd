//! One-off requests beside the conversation (compaction summaries, WebFetch answers):
//! one request through a fork of the conversation's [`QueryDeps`] (its own body
//! encoder: the conversation's next request still reuses what it encoded), its text
//! back.

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{ApiError, ModelEvent};
use gyre_protocol::{Message, MessagesRequest, SystemBlock, Usage};
use tokio_util::sync::CancellationToken;

use crate::deps::QueryDeps;

/// A side request's answer and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct SideAnswer {
    /// The answer's text.
    pub text: String,
    /// The tokens it used.
    pub usage: Usage,
}

/// Why a side request gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum SideQueryError {
    /// The API failed (after its retries).
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The stream ended before a whole message came.
    #[error("the response ended without a message")]
    NoMessage,
}

/// Sends `messages` to `model` with `system` and returns the response's text and usage.
///
/// # Errors
/// [`SideQueryError::Api`] for the API's error, [`SideQueryError::NoMessage`] for a
/// stream that ended without a message.
pub async fn side_query(
    deps: &dyn QueryDeps,
    model: &str,
    system: &str,
    messages: Vec<Message>,
    max_tokens: u32,
    cancel: CancellationToken,
) -> Result<SideAnswer, SideQueryError> {
    let mut body = MessagesRequest::new(model.to_owned(), max_tokens, messages);
    body.system = vec![SystemBlock::text(system)];
    let fork = deps.fork();
    let deps = fork.as_deref().unwrap_or(deps);
    let mut stream = deps.call_model(&mut Arc::new(body), None, cancel);
    while let Some(event) = stream.next().await {
        match event {
            Ok(ModelEvent::Message(response)) => {
                return Ok(SideAnswer {
                    usage: response.usage,
                    text: response.to_message().text(),
                });
            }
            Ok(ModelEvent::Stream(_) | ModelEvent::BlockComplete { .. } | ModelEvent::Retry(_)) => {
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(SideQueryError::NoMessage)
}
