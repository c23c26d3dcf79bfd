//! gyre's permission questions as `session/request_permission` requests, and the
//! editor's choice as gyre's [`Approval`].

use agent_client_protocol as acp;
use gyre_core::approvals::{Approval, ApprovalRequest};

use crate::updates;

/// The option ids gyre offers; the editor answers with one of them.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";

/// The request for `question`: the call it is about (kind, title, files, diff) and the
/// three answers — allow once, allow always (the rule "always" adds, named), reject.
#[must_use]
pub fn request(
    session_id: &acp::SessionId,
    question: &ApprovalRequest,
) -> acp::RequestPermissionRequest {
    let q = &question.question;
    let call = acp::ToolCallUpdate::new(
        q.tool_use_id.clone(),
        updates::tool_call_fields(&q.tool, &q.input),
    );
    let options = vec![
        acp::PermissionOption::new(ALLOW_ONCE, "Allow", acp::PermissionOptionKind::AllowOnce),
        acp::PermissionOption::new(
            ALLOW_ALWAYS,
            format!("Always allow {}", q.always),
            acp::PermissionOptionKind::AllowAlways,
        ),
        acp::PermissionOption::new(REJECT_ONCE, "Reject", acp::PermissionOptionKind::RejectOnce),
    ];
    acp::RequestPermissionRequest::new(session_id.clone(), call, options)
}

/// The editor's answer as gyre's: "always" adds the question's rule for the rest of
/// the session; a cancelled question (the prompt was cancelled) also ends the turn; an
/// option gyre did not offer is a no.
#[must_use]
pub fn approval(question: &ApprovalRequest, outcome: &acp::RequestPermissionOutcome) -> Approval {
    match outcome {
        acp::RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
            ALLOW_ONCE => Approval::once(),
            ALLOW_ALWAYS => Approval::always(question),
            _ => Approval::deny(),
        },
        acp::RequestPermissionOutcome::Cancelled => Approval::Deny {
            message: None,
            interrupt: true,
        },
        // A later protocol's outcome gyre does not know: no.
        #[allow(unreachable_patterns)]
        _ => Approval::deny(),
    }
}

#[cfg(test)]
mod tests {
    use gyre_core::approvals::{PermissionUpdate, Question, RuleBehavior};
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn question() -> ApprovalRequest {
        ApprovalRequest {
            id: 7,
            question: Question {
                tool: "Bash".into(),
                input: json!({"command": "npm test"}),
                tool_use_id: "toolu_1".into(),
                reason: "needs permission".into(),
                always: "Bash(npm test)".parse().unwrap(),
            },
            withdrawn: CancellationToken::new(),
        }
    }

    fn selected(id: &str) -> acp::RequestPermissionOutcome {
        acp::RequestPermissionOutcome::Selected(acp::SelectedPermissionOutcome::new(id.to_owned()))
    }

    #[test]
    fn the_request_names_the_call_and_offers_once_always_and_reject() {
        let request = request(&acp::SessionId::new("s"), &question());
        assert_eq!(&*request.tool_call.tool_call_id.0, "toolu_1");
        assert_eq!(request.tool_call.fields.kind, Some(acp::ToolKind::Execute));
        let kinds: Vec<_> = request.options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                acp::PermissionOptionKind::AllowOnce,
                acp::PermissionOptionKind::AllowAlways,
                acp::PermissionOptionKind::RejectOnce
            ]
        );
        assert_eq!(request.options[1].name, "Always allow Bash(npm test)");
    }

    #[test]
    fn each_answer_is_the_approval_it_names() {
        let q = question();
        assert_eq!(approval(&q, &selected(ALLOW_ONCE)), Approval::once());
        let Approval::Allow { updates, .. } = approval(&q, &selected(ALLOW_ALWAYS)) else {
            panic!("always allows");
        };
        assert_eq!(
            updates,
            [PermissionUpdate::AddRules {
                behavior: RuleBehavior::Allow,
                rules: vec!["Bash(npm test)".parse().unwrap()],
            }]
        );
        assert_eq!(approval(&q, &selected(REJECT_ONCE)), Approval::deny());
        assert_eq!(approval(&q, &selected("made_up")), Approval::deny());
        assert_eq!(
            approval(&q, &acp::RequestPermissionOutcome::Cancelled),
            Approval::Deny {
                message: None,
                interrupt: true
            }
        );
    }
}
