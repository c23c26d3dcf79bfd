//! Permission questions as events answered by operations.
//!
//! When the policy asks, the gate sends an [`ApprovalRequest`] event on the front-end's
//! channel and the call waits until the front-end answers it with
//! [`Approvals::answer`] (by the request's id) with an [`Approval`]. No callback runs in
//! the front-end: the terminal UI reads the events in its own loop and answers when the
//! user has; the SDK front-end turns each into a `can_use_tool` request on its wire and
//! its reply into an [`Approval`]. One question at a time, even when tools ask
//! concurrently; a front-end that is gone (its receiver dropped), a withdrawn question
//! ([`Approvals::withdraw_all`]) or a cancelled call means no.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use gyre_tools::PermissionRule;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// A question for the user: may this call run?
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// What [`Approvals::answer`] names it by.
    pub id: u64,
    pub question: Question,
    /// Fires when the call no longer waits (the turn was interrupted, or the question
    /// was answered): the front-end withdraws the question.
    pub withdrawn: CancellationToken,
}

/// What a question is about.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The tool's name (`Bash`, `Edit`, `ExitPlanMode`, an MCP tool…).
    pub tool: String,
    /// The call's input.
    pub input: Value,
    /// The call's tool_use id.
    pub tool_use_id: String,
    /// Why the policy asks.
    pub reason: String,
    /// The rule an "always" answer allows (shown with the question; a front-end that
    /// saves the answer saves this rule; [`Approval::always`] adds it for the session).
    pub always: PermissionRule,
}

/// Where an `addRules` update puts its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleBehavior {
    Allow,
    Ask,
    Deny,
}

/// A change to the session's policy that comes with an answer (the SDK's
/// `updatedPermissions`; the terminal's "always"). It lasts for the rest of the session
/// and survives mode changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionUpdate {
    /// More rules of one kind.
    AddRules {
        behavior: RuleBehavior,
        rules: Vec<PermissionRule>,
    },
    /// Fewer rules of one kind (a rule not there is no error).
    RemoveRules {
        behavior: RuleBehavior,
        rules: Vec<PermissionRule>,
    },
    /// Another permission mode, by its Claude Code name (`acceptEdits`, `plan`, …).
    SetMode(String),
}

/// The answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Run the call: with `updated_input` instead of its own input when given, after
    /// applying `updates`.
    Allow {
        updated_input: Option<Value>,
        updates: Vec<PermissionUpdate>,
    },
    /// Do not run it. `message` is what the model is told (a default that says the user
    /// refused when `None`); `interrupt` also ends the turn.
    Deny {
        message: Option<String>,
        interrupt: bool,
    },
}

impl Approval {
    /// Yes, this once.
    #[must_use]
    pub fn once() -> Self {
        Self::Allow {
            updated_input: None,
            updates: Vec::new(),
        }
    }

    /// Yes, and the same again for the rest of the session: `request`'s `always` rule.
    #[must_use]
    pub fn always(request: &ApprovalRequest) -> Self {
        Self::Allow {
            updated_input: None,
            updates: vec![PermissionUpdate::AddRules {
                behavior: RuleBehavior::Allow,
                rules: vec![request.question.always.clone()],
            }],
        }
    }

    /// No, and what to do instead: `feedback` goes to the model with the refusal
    /// (the terminal's "No, keep planning" for ExitPlanMode).
    #[must_use]
    pub fn rejected(tool: &str, feedback: &str) -> Self {
        Self::Deny {
            message: Some(format!(
                "The user doesn't want to proceed with this {tool} call: it was rejected. To tell you how to proceed, the user said:\n{feedback}"
            )),
            interrupt: false,
        }
    }

    /// No.
    #[must_use]
    pub fn deny() -> Self {
        Self::Deny {
            message: None,
            interrupt: false,
        }
    }
}

/// The receiving end: the front-end's stream of questions.
pub type ApprovalRequests = mpsc::UnboundedReceiver<ApprovalRequest>;

/// See the module docs.
#[derive(Debug)]
pub struct Approvals {
    requests: mpsc::UnboundedSender<ApprovalRequest>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Approval>>>,
    next_id: AtomicU64,
    one_at_a_time: tokio::sync::Mutex<()>,
}

impl Approvals {
    /// The question channel to give the session's gate, and the questions it will send.
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
    pub fn answer(&self, id: u64, answer: Approval) -> bool {
        let waiting = self.lock().remove(&id);
        waiting.is_some_and(|reply| reply.send(answer).is_ok())
    }

    /// Every waiting question is answered no (the front-end is going away).
    pub fn withdraw_all(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Approval>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `question` as an event and waits for its answer; `cancel` (the call's)
    /// withdraws it, and so does dropping the wait (the turn went away). No front-end, a
    /// withdrawn or a cancelled question: no.
    pub async fn ask(&self, question: Question, cancel: &CancellationToken) -> Approval {
        let _one_at_a_time = tokio::select! {
            guard = self.one_at_a_time.lock() => guard,
            () = cancel.cancelled() => return Approval::deny(),
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        self.lock().insert(id, reply);
        let pending = Pending {
            approvals: self,
            id,
            withdrawn: cancel.child_token(),
        };
        let request = ApprovalRequest {
            id,
            question,
            withdrawn: pending.withdrawn.clone(),
        };
        if self.requests.send(request).is_err() {
            return Approval::deny();
        }
        tokio::select! {
            // A withdrawn question drops its sender: no.
            answer = answer => answer.unwrap_or_else(|_| Approval::deny()),
            () = cancel.cancelled() => Approval::deny(),
        }
    }
}

/// A question on its way: however the wait ends, it no longer waits for an answer and
/// the front-end is told.
struct Pending<'a> {
    approvals: &'a Approvals,
    id: u64,
    withdrawn: CancellationToken,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.approvals.lock().remove(&self.id);
        self.withdrawn.cancel();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn question(command: &str) -> Question {
        Question {
            tool: "Bash".into(),
            input: json!({ "command": command }),
            tool_use_id: "t1".into(),
            reason: "needs permission".into(),
            always: "Bash(npm test)".parse().unwrap(),
        }
    }

    fn ask(
        approvals: &Arc<Approvals>,
        command: &'static str,
        cancel: &CancellationToken,
    ) -> tokio::task::JoinHandle<Approval> {
        let (approvals, cancel) = (Arc::clone(approvals), cancel.clone());
        tokio::spawn(async move { approvals.ask(question(command), &cancel).await })
    }

    #[tokio::test]
    async fn a_question_is_an_event_and_the_call_waits_for_its_answer() {
        let (approvals, mut requests) = Approvals::channel();
        let asking = ask(&approvals, "npm test", &CancellationToken::new());
        let request = requests.recv().await.unwrap();
        assert_eq!(request.question, question("npm test"));
        assert!(!asking.is_finished());
        assert!(!request.withdrawn.is_cancelled());
        let always = Approval::always(&request);
        assert!(approvals.answer(request.id, always.clone()));
        assert_eq!(asking.await.unwrap(), always);
        // Answered once only.
        assert!(!approvals.answer(request.id, Approval::deny()));
        assert!(request.withdrawn.is_cancelled());
    }

    #[tokio::test]
    async fn one_question_at_a_time_and_a_withdrawn_one_is_no() {
        let (approvals, mut requests) = Approvals::channel();
        let never = CancellationToken::new();
        let first = ask(&approvals, "a", &never);
        let request = requests.recv().await.unwrap();
        assert_eq!(request.question.input["command"], "a");
        let second = ask(&approvals, "b", &never);
        // The second waits behind the first.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(requests.try_recv().is_err());
        approvals.withdraw_all();
        assert_eq!(first.await.unwrap(), Approval::deny());
        let next = requests.recv().await.unwrap();
        assert_ne!(next.id, request.id);
        assert!(approvals.answer(next.id, Approval::once()));
        assert_eq!(second.await.unwrap(), Approval::once());
        // No front-end: no.
        drop(requests);
        assert_eq!(
            ask(&approvals, "c", &never).await.unwrap(),
            Approval::deny()
        );
    }

    #[tokio::test]
    async fn a_dropped_wait_withdraws_its_question() {
        let (approvals, mut requests) = Approvals::channel();
        let asking = ask(&approvals, "a", &CancellationToken::new());
        let request = requests.recv().await.unwrap();
        asking.abort();
        let _ = asking.await;
        assert!(request.withdrawn.is_cancelled());
        assert!(!approvals.answer(request.id, Approval::once()));
    }

    #[tokio::test]
    async fn a_cancelled_call_withdraws_its_question() {
        let (approvals, mut requests) = Approvals::channel();
        let cancel = CancellationToken::new();
        let asking = ask(&approvals, "a", &cancel);
        let request = requests.recv().await.unwrap();
        cancel.cancel();
        assert_eq!(asking.await.unwrap(), Approval::deny());
        assert!(request.withdrawn.is_cancelled());
        assert!(!approvals.answer(request.id, Approval::once()));
    }
}
