//! Permission questions as events answered by operations.
//!
//! The session's policy asks through [`Approvals`], its [`PermissionPrompt`]: each
//! question becomes an [`ApprovalRequest`] event on the front-end's channel, and the
//! call waits until the front-end answers it with [`Approvals::answer`] (by the
//! request's id). No callback runs in the front-end: it reads events in its own loop and
//! answers when the user has. One question at a time, even when tools ask concurrently;
//! a front-end that is gone (its receiver dropped) or that withdraws a question
//! ([`Approvals::withdraw_all`]) means no.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use gyre_tools::{BoxFuture, PermissionPrompt, PermissionRule, PromptAnswer, Tool, ToolCall};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// A question for the user: may this call run?
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// What [`Approvals::answer`] names it by.
    pub id: u64,
    /// The tool's name (`Bash`, `Edit`, `ExitPlanMode`, an MCP tool…).
    pub tool: String,
    /// The call's input.
    pub input: Value,
    /// Why the policy asks.
    pub reason: String,
    /// The rule an "always" answer allows (shown with the question; a front-end that
    /// saves the answer saves this rule).
    pub always: PermissionRule,
}

/// The receiving end: the front-end's stream of questions.
pub type ApprovalRequests = mpsc::UnboundedReceiver<ApprovalRequest>;

/// See the module docs.
#[derive(Debug)]
pub struct Approvals {
    requests: mpsc::UnboundedSender<ApprovalRequest>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<PromptAnswer>>>,
    next_id: AtomicU64,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Approvals {
    /// The prompt to give the session, and the questions it will send.
    #[must_use]
    pub fn channel() -> (Arc<Self>, ApprovalRequests) {
        let (requests, receiver) = mpsc::unbounded_channel();
        let approvals = Self {
            requests,
            waiting: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            one_at_a_time: tokio::sync::Mutex::new(()),
        };
        (Arc::new(approvals), receiver)
    }

    /// Answers question `id`; false when no question of that id waits (answered
    /// already, or withdrawn).
    pub fn answer(&self, id: u64, answer: PromptAnswer) -> bool {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        waiting.is_some_and(|reply| reply.send(answer).is_ok())
    }

    /// Every waiting question is answered no (the front-end is going away).
    pub fn withdraw_all(&self) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl PermissionPrompt for Approvals {
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
        always: &'a PermissionRule,
    ) -> BoxFuture<'a, PromptAnswer> {
        Box::pin(async move {
            let _one_at_a_time = self.one_at_a_time.lock().await;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (reply, answer) = oneshot::channel();
            self.waiting
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id, reply);
            let request = ApprovalRequest {
                id,
                tool: tool.name().to_string(),
                input: call.input.clone(),
                reason: reason.to_owned(),
                always: always.clone(),
            };
            if self.requests.send(request).is_err() {
                self.waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                return PromptAnswer::Deny;
            }
            // A withdrawn question drops its sender: no.
            answer.await.unwrap_or(PromptAnswer::Deny)
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use gyre_tools::ToolRegistry;
    use serde_json::json;

    use super::*;

    fn bash_call(command: &str) -> ToolCall {
        ToolCall {
            id: "t1".into(),
            name: "Bash".into(),
            input: json!({ "command": command }),
        }
    }

    #[tokio::test]
    async fn a_question_is_an_event_and_the_call_waits_for_its_answer() {
        let (approvals, mut requests) = Approvals::channel();
        let registry = ToolRegistry::with_default_tools();
        let bash = Arc::clone(registry.get("Bash").unwrap());
        let always: PermissionRule = "Bash(npm test)".parse().unwrap();
        let asking = {
            let approvals = Arc::clone(&approvals);
            let (bash, always) = (Arc::clone(&bash), always.clone());
            tokio::spawn(async move {
                approvals
                    .ask(
                        bash.as_ref(),
                        &bash_call("npm test"),
                        "needs permission",
                        &always,
                    )
                    .await
            })
        };
        let request = requests.recv().await.unwrap();
        assert_eq!(request.tool, "Bash");
        assert_eq!(request.input["command"], "npm test");
        assert_eq!(request.always, always);
        assert!(!asking.is_finished());
        assert!(approvals.answer(request.id, PromptAnswer::AllowAlways));
        assert_eq!(asking.await.unwrap(), PromptAnswer::AllowAlways);
        // Answered once only.
        assert!(!approvals.answer(request.id, PromptAnswer::Deny));
    }

    #[tokio::test]
    async fn one_question_at_a_time_and_a_withdrawn_one_is_no() {
        let (approvals, mut requests) = Approvals::channel();
        let registry = ToolRegistry::with_default_tools();
        let bash = Arc::clone(registry.get("Bash").unwrap());
        let always: PermissionRule = "Bash".parse().unwrap();
        let ask = |command: &'static str| {
            let approvals = Arc::clone(&approvals);
            let (bash, always) = (Arc::clone(&bash), always.clone());
            tokio::spawn(async move {
                approvals
                    .ask(bash.as_ref(), &bash_call(command), "r", &always)
                    .await
            })
        };
        let first = ask("a");
        let request = requests.recv().await.unwrap();
        assert_eq!(request.input["command"], "a");
        let second = ask("b");
        // The second waits behind the first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(requests.try_recv().is_err());
        approvals.withdraw_all();
        assert_eq!(first.await.unwrap(), PromptAnswer::Deny);
        let next = requests.recv().await.unwrap();
        assert_ne!(next.id, request.id);
        assert!(approvals.answer(next.id, PromptAnswer::AllowOnce));
        assert_eq!(second.await.unwrap(), PromptAnswer::AllowOnce);
        // No front-end: no.
        drop(requests);
        assert_eq!(ask("c").await.unwrap(), PromptAnswer::Deny);
    }
}
