//! `--permission-prompt-tool stdio`: the session's permission questions
//! ([`ApprovalRequest`] events) go to the SDK as `can_use_tool` requests, and its
//! `PermissionResult` answers them ([`Op::Answer`]).

use gyre_core::approvals::{Approval, ApprovalRequest, PermissionUpdate, RuleBehavior};
use gyre_core::{Control, Op};
use gyre_tools::PermissionRule;
use serde::Deserialize;
use serde_json::Value;

use crate::control::{
    ClientRequest, ControlChannel, SessionStates, WireError, WireRule, WireUpdate,
};
use crate::stream_json::SessionState;

/// The SDK's answer to `can_use_tool`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "behavior", rename_all = "lowercase")]
enum PermissionResult {
    #[serde(rename_all = "camelCase")]
    Allow {
        #[serde(default)]
        updated_input: Option<Value>,
        #[serde(default)]
        updated_permissions: Vec<WireUpdate>,
    },
    Deny {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        interrupt: bool,
    },
}

/// The "always" an SDK may offer its user: `request`'s rule, for this session.
fn suggestion(request: &ApprovalRequest) -> WireUpdate {
    WireUpdate::AddRules {
        rules: vec![WireRule::from(&request.question.always)],
        behavior: "allow".to_owned(),
        destination: Some("session".to_owned()),
    }
}

/// Reads wire updates into the session's; one malformed update rejects them all.
///
/// # Errors
/// What was wrong: an `addRules`/`removeRules` behavior other than allow, ask or deny, or a rule
/// that does not parse.
pub fn updates(wire: &[WireUpdate]) -> Result<Vec<PermissionUpdate>, WireError> {
    let mut updates = Vec::new();
    for update in wire {
        match update {
            WireUpdate::AddRules {
                rules, behavior, ..
            } => {
                let (behavior, rules) = rule_update("addRules", behavior, rules)?;
                updates.push(PermissionUpdate::AddRules { behavior, rules });
            }
            WireUpdate::RemoveRules {
                rules, behavior, ..
            } => {
                let (behavior, rules) = rule_update("removeRules", behavior, rules)?;
                updates.push(PermissionUpdate::RemoveRules { behavior, rules });
            }
            WireUpdate::SetMode { mode, .. } => {
                updates.push(PermissionUpdate::SetMode(mode.clone()));
            }
            WireUpdate::Other => {
                tracing::warn!("permission update not supported by gyre; skipped");
            }
        }
    }
    Ok(updates)
}

/// An `addRules` or `removeRules` update's behavior and parsed rules.
fn rule_update(
    kind: &str,
    behavior: &str,
    rules: &[WireRule],
) -> Result<(RuleBehavior, Vec<PermissionRule>), WireError> {
    let behavior = match behavior {
        "allow" => RuleBehavior::Allow,
        "ask" => RuleBehavior::Ask,
        "deny" => RuleBehavior::Deny,
        other => return Err(WireError(format!("{kind} with behavior {other:?}"))),
    };
    let rules = rules
        .iter()
        .map(|r| match &r.rule_content {
            Some(content) => format!("{}({content})", r.tool_name).parse(),
            None => r.tool_name.parse(),
        })
        .collect::<Result<Vec<PermissionRule>, _>>()
        .map_err(|e| WireError(e.to_string()))?;
    Ok((behavior, rules))
}

fn refused(message: String) -> Approval {
    Approval::Deny {
        message: Some(message),
        interrupt: false,
    }
}

/// Asks the SDK `request`'s question; its withdrawal cancels the request.
async fn ask(channel: &ControlChannel, request: &ApprovalRequest) -> Approval {
    let question = &request.question;
    let wire = ClientRequest::CanUseTool {
        tool_name: question.tool.clone(),
        input: question.input.clone(),
        permission_suggestions: vec![suggestion(request)],
        tool_use_id: question.tool_use_id.clone(),
        decision_reason: question.reason.clone(),
    };
    let answer = match channel.request(wire, &request.withdrawn).await {
        Ok(answer) => answer,
        Err(e) => {
            return refused(format!(
                "Permission to use {} could not be asked: {e}",
                question.tool
            ));
        }
    };
    match PermissionResult::deserialize(&answer) {
        Ok(PermissionResult::Allow {
            updated_input,
            updated_permissions,
        }) => {
            let updates = updates(&updated_permissions).unwrap_or_else(|e| {
                eprintln!("gyre: the SDK's updatedPermissions were not applied: {e}");
                Vec::new()
            });
            Approval::Allow {
                updated_input,
                updates,
            }
        }
        // No message: the session's own words for a refusal.
        Ok(PermissionResult::Deny { message, interrupt }) => Approval::Deny { message, interrupt },
        Err(e) => refused(format!(
            "Permission to use {} was not granted: the SDK's answer is not a PermissionResult ({e}); expected behavior allow or deny",
            question.tool
        )),
    }
}

/// Asks the SDK `request`'s question in a task of its own (the turn goes on streaming)
/// and answers it with the SDK's reply. The session `requires_action` while it waits.
pub fn ask_over(
    channel: &ControlChannel,
    control: &Control,
    states: &SessionStates,
    request: ApprovalRequest,
) {
    let (channel, control, states) = (channel.clone(), control.clone(), states.clone());
    tokio::spawn(async move {
        states.send(SessionState::RequiresAction);
        let approval = ask(&channel, &request).await;
        states.send(SessionState::Running);
        let _ = control.submit(Op::Answer {
            id: request.id,
            approval,
        });
    });
}

#[cfg(test)]
mod tests {
    use gyre_core::approvals::Question;
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn request(always: &str) -> ApprovalRequest {
        ApprovalRequest {
            id: 1,
            question: Question {
                tool: "Bash".into(),
                input: json!({"command": "ls -la"}),
                tool_use_id: "t".into(),
                reason: "r".into(),
                always: always.parse().unwrap(),
            },
            withdrawn: CancellationToken::new(),
        }
    }

    #[test]
    fn the_always_suggestion_is_the_questions_rule_for_this_session() {
        let offered = serde_json::to_value(suggestion(&request("Bash(ls -la)"))).unwrap();
        assert_eq!(
            offered,
            json!({"type": "addRules", "behavior": "allow", "destination": "session",
                "rules": [{"toolName": "Bash", "ruleContent": "ls -la"}]})
        );
        let bare = serde_json::to_value(suggestion(&request("Edit"))).unwrap();
        assert_eq!(bare["rules"], json!([{"toolName": "Edit"}]));
    }

    #[test]
    fn updated_permissions_are_read_whole_or_not_at_all() {
        let wire: Vec<WireUpdate> = serde_json::from_value(json!([
            {"type": "addRules", "behavior": "deny", "destination": "session",
                "rules": [{"toolName": "Bash", "ruleContent": "rm:*"}]},
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
            {"type": "addDirectories", "directories": ["/x"], "destination": "session"},
            {"type": "removeRules", "behavior": "allow", "destination": "session",
                "rules": [{"toolName": "Read"}]},
        ]))
        .unwrap();
        assert_eq!(
            updates(&wire).unwrap(),
            [
                PermissionUpdate::AddRules {
                    behavior: RuleBehavior::Deny,
                    rules: vec!["Bash(rm:*)".parse().unwrap()],
                },
                PermissionUpdate::SetMode("acceptEdits".into()),
                PermissionUpdate::RemoveRules {
                    behavior: RuleBehavior::Allow,
                    rules: vec!["Read".parse().unwrap()],
                },
            ]
        );
        let bad: Vec<WireUpdate> = serde_json::from_value(json!([
            {"type": "setMode", "mode": "plan"},
            {"type": "addRules", "behavior": "maybe", "rules": []},
        ]))
        .unwrap();
        assert_eq!(
            updates(&bad).unwrap_err(),
            WireError("addRules with behavior \"maybe\"".into())
        );
    }

    #[test]
    fn an_answer_is_a_permission_result() {
        let allow: PermissionResult = serde_json::from_value(json!({
            "behavior": "allow", "updatedInput": {"command": "ls"},
            "updatedPermissions": [{"type": "setMode", "mode": "plan"}]}))
        .unwrap();
        assert_eq!(
            allow,
            PermissionResult::Allow {
                updated_input: Some(json!({"command": "ls"})),
                updated_permissions: vec![WireUpdate::SetMode {
                    mode: "plan".into(),
                    destination: None
                }],
            }
        );
        let deny: PermissionResult =
            serde_json::from_value(json!({"behavior": "deny", "interrupt": true})).unwrap();
        assert_eq!(
            deny,
            PermissionResult::Deny {
                message: None,
                interrupt: true
            }
        );
        assert!(serde_json::from_value::<PermissionResult>(json!({"behavior": "maybe"})).is_err());
    }
}
