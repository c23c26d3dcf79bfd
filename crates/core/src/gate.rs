//! The session's gate around each tool call: PreToolUse hooks, then the permission
//! policy, then — for an "ask" — an [`ApprovalRequest`](crate::approvals::ApprovalRequest)
//! event the front-end answers (the terminal's question, or the SDK's `can_use_tool`
//! with `--permission-prompt-tool stdio`); PostToolUse and Stop hooks after. One object, so a permission mode set over the control protocol and hooks
//! registered in `initialize` apply to the running session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use gyre_compact::Trigger;
use gyre_loop::{
    AfterToolOutcome, CompactHook, InterruptHandle, PreCompactOutcome, StopHook, StopHookOutcome,
    SubagentHook, ToolHook,
};
use gyre_protocol::{ContentBlock, Message, Role};
use gyre_tools::{
    BoxFuture, CanUseTool, InputDecision, ModeHandle, PermissionDecision, PermissionMode,
    Permissions, RuleError, Tool, ToolCall, ToolCallOutcome, ToolContext,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::approvals::{Approval, Approvals, PermissionUpdate, Question, RuleBehavior};
use crate::auto_mode::{Judge, Verdict};
use crate::client::ClientChannel;
use crate::hooks::{HookEvent, HookEventSink, Hooks, PermissionAnswer};
use crate::structured;

/// Every name [`ModeName`] parses, in the order `--help` lists them.
pub const MODE_NAMES: [&str; 7] = [
    "default",
    "manual",
    "acceptEdits",
    "plan",
    "bypassPermissions",
    "dontAsk",
    "auto",
];

/// A permission mode name gyre does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown permission mode {name:?}: use one of {}", MODE_NAMES.join(", "))]
pub struct UnknownMode {
    /// The name given.
    pub name: String,
}

/// Why the gate's policy could not be built or changed; nothing changed then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// An unknown permission mode.
    #[error(transparent)]
    Mode(#[from] UnknownMode),
    /// A malformed permission rule.
    #[error(transparent)]
    Rule(#[from] RuleError),
    /// A switch to bypassPermissions in a session not started to allow it.
    #[error(
        "this session may not switch to bypassPermissions: start gyre with --allow-dangerously-skip-permissions (or in that mode) to allow it"
    )]
    BypassNotAllowed,
}

/// What the model is told after a refusal when a PermissionDenied hook allows a retry.
const RETRY_NOTE: &str =
    " A PermissionDenied hook says you may retry this call (for instance in a safer way).";

/// Shows one of `auto` mode's verdicts (`auto mode allowed Bash: …`).
pub type VerdictSink = Arc<dyn Fn(&str) + Send + Sync>;

/// A prompt a UserPromptSubmit hook refused (a block, or `continue: false`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct PromptBlocked {
    /// The hook's reason.
    pub reason: String,
}

/// A permission mode by its Claude Code name. `dontAsk` is the default policy that never
/// asks (an "ask" is a denial); `auto` is the default policy whose questions a small
/// model judges first ([`crate::auto_mode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeName {
    pub name: String,
    mode: PermissionMode,
    never_ask: bool,
    judged: bool,
}

impl std::str::FromStr for ModeName {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, UnknownMode> {
        // `manual` is Claude Code's other name for default.
        let s = if s == "manual" { "default" } else { s };
        let (mode, never_ask) = match s {
            "dontAsk" => (PermissionMode::Default, true),
            "auto" => (PermissionMode::Default, false),
            other => (
                other.parse().map_err(|_| UnknownMode {
                    name: other.to_owned(),
                })?,
                false,
            ),
        };
        Ok(Self {
            name: s.to_owned(),
            mode,
            never_ask,
            judged: s == "auto",
        })
    }
}

/// The rule strings a policy is built from, kept so a mode change can rebuild it.
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
}

struct Policy {
    mode: ModeName,
    rules: Rules,
    permissions: Arc<Permissions>,
}

/// See the module docs.
pub struct Gate {
    /// The mode every policy this gate builds reads, shared with ExitPlanMode.
    mode: ModeHandle,
    policy: RwLock<Policy>,
    hooks: RwLock<Hooks>,
    /// Where questions go; none: an "ask" is a denial that says which rule would allow.
    approvals: OnceLock<Arc<Approvals>>,
    interrupt: OnceLock<InterruptHandle>,
    /// A hook's `continue: false`, waiting for the end of the tool round.
    stop: Mutex<Option<String>>,
    /// PreToolUse hooks' `additionalContext`, by tool_use id, until the call's
    /// [`ToolHook::after_tool`] hands it to the loop.
    pre_tool_context: Mutex<HashMap<String, Vec<String>>>,
    /// `--json-schema`: where the StructuredOutput tool leaves the answer.
    structured: OnceLock<structured::Slot>,
    /// `auto` mode's judge, and where its verdicts are shown.
    judge: OnceLock<Judge>,
    verdicts: OnceLock<VerdictSink>,
    /// MCP tools that run code the model writes (an Agent SDK's `codeRunningMcpTools`,
    /// full `mcp__server__tool` names): in `auto` mode the judge decides every call to
    /// one, whatever allow rules and PreToolUse hooks say.
    code_running: OnceLock<Vec<String>>,
    /// Whether the mode may become bypassPermissions later: the session started in it,
    /// or with `--allow-dangerously-skip-permissions`.
    bypass_allowed: bool,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("mode", &self.mode_name())
            .field("permissions", &self.permissions())
            .finish_non_exhaustive()
    }
}

impl Gate {
    /// # Errors
    /// [`GateError::Rule`] for a malformed rule.
    pub fn new(mode: ModeName, rules: Rules, hooks: Hooks) -> Result<Self, GateError> {
        let handle = ModeHandle::default();
        let permissions = Arc::new(build_permissions(&mode, &rules, &handle)?);
        let bypass_allowed = mode.mode == PermissionMode::BypassPermissions;
        Ok(Self {
            mode: handle,
            policy: RwLock::new(Policy {
                mode,
                rules,
                permissions,
            }),
            hooks: RwLock::new(hooks),
            approvals: OnceLock::new(),
            interrupt: OnceLock::new(),
            stop: Mutex::new(None),
            pre_tool_context: Mutex::new(HashMap::new()),
            structured: OnceLock::new(),
            judge: OnceLock::new(),
            verdicts: OnceLock::new(),
            code_running: OnceLock::new(),
            bypass_allowed,
        })
    }

    /// Names the MCP tools that run code the model writes (set once, at start): in
    /// `auto` mode no allow rule or hook approves a call to one on its own.
    pub fn set_code_running_tools(&self, names: Vec<String>) {
        let _ = self.code_running.set(names);
    }

    fn runs_code(&self, name: &str) -> bool {
        self.code_running
            .get()
            .is_some_and(|names| names.iter().any(|n| n == name))
    }

    /// Lets the session switch to bypassPermissions later (the SDK's `set_permission_mode`
    /// or a `setMode` update), as `--allow-dangerously-skip-permissions` asks, without
    /// starting in it.
    #[must_use]
    pub fn allowing_bypass(mut self, allowed: bool) -> Self {
        self.bypass_allowed |= allowed;
        self
    }

    /// The policy now in force (for filters computed once, like hidden paths).
    #[must_use]
    pub fn permissions(&self) -> Arc<Permissions> {
        Arc::clone(
            &self
                .policy
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .permissions,
        )
    }

    /// The mode's name as the user gave it (`dontAsk`, `auto` included), or the mode
    /// ExitPlanMode switched to since.
    #[must_use]
    pub fn mode_name(&self) -> String {
        let policy = self.policy.read().unwrap_or_else(PoisonError::into_inner);
        let now = self.mode.get();
        if now == policy.mode.mode {
            policy.mode.name.clone()
        } else {
            now.to_string()
        }
    }

    /// The rules in force, from every source (settings, flags, saved and session
    /// answers), by kind.
    #[must_use]
    pub fn rules(&self) -> Rules {
        self.policy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .rules
            .clone()
    }

    /// The shared mode handle (ExitPlanMode switches it).
    #[must_use]
    pub fn mode_handle(&self) -> ModeHandle {
        self.mode.clone()
    }

    /// `set_permission_mode`.
    ///
    /// # Errors
    /// [`GateError::Mode`] for an unknown mode name.
    pub fn set_mode(&self, name: &str) -> Result<(), GateError> {
        let mode: ModeName = name.parse()?;
        self.rebuild(|policy| {
            policy.mode = mode;
            Ok(())
        })
    }

    /// Changes the mode or rules and rebuilds the policy from them.
    fn rebuild(
        &self,
        change: impl FnOnce(&mut Policy) -> Result<(), GateError>,
    ) -> Result<(), GateError> {
        let mut policy = self.policy.write().unwrap_or_else(PoisonError::into_inner);
        let mut next = Policy {
            mode: policy.mode.clone(),
            rules: policy.rules.clone(),
            permissions: Arc::clone(&policy.permissions),
        };
        change(&mut next)?;
        if next.mode.mode == PermissionMode::BypassPermissions
            && policy.mode.mode != PermissionMode::BypassPermissions
            && !self.bypass_allowed
        {
            return Err(GateError::BypassNotAllowed);
        }
        next.permissions = Arc::new(
            build_permissions(&next.mode, &next.rules, &self.mode)?
                .keeping_answers_of(&policy.permissions),
        );
        *policy = next;
        Ok(())
    }

    /// An answer's permission updates (the SDK's `updatedPermissions`, the terminal's
    /// "always"): rules added and the mode set for the rest of the session.
    ///
    /// # Errors
    /// A [`GateError`]: a malformed rule or an unknown mode; nothing is applied then.
    pub fn apply_updates(&self, updates: &[PermissionUpdate]) -> Result<(), GateError> {
        self.rebuild(|policy| {
            for update in updates {
                match update {
                    PermissionUpdate::AddRules { behavior, rules } => {
                        let list = match behavior {
                            RuleBehavior::Allow => &mut policy.rules.allow,
                            RuleBehavior::Deny => &mut policy.rules.deny,
                            RuleBehavior::Ask => &mut policy.rules.ask,
                        };
                        list.extend(rules.iter().map(ToString::to_string));
                    }
                    PermissionUpdate::RemoveRules { behavior, rules } => {
                        let list = match behavior {
                            RuleBehavior::Allow => &mut policy.rules.allow,
                            RuleBehavior::Deny => &mut policy.rules.deny,
                            RuleBehavior::Ask => &mut policy.rules.ask,
                        };
                        // Compared parsed, so `Bash(npm test)` matches however it was
                        // spaced in the file it came from.
                        list.retain(|kept| {
                            kept.parse::<gyre_tools::PermissionRule>()
                                .map_or(true, |kept| !rules.contains(&kept))
                        });
                    }
                    PermissionUpdate::SetMode(mode) => policy.mode = mode.parse()?,
                }
            }
            Ok(())
        })
    }

    /// Permission questions go to `approvals` as events (without: an "ask" is a denial).
    pub fn ask_through(&self, approvals: Arc<Approvals>) {
        let _ = self.approvals.set(approvals);
    }

    /// `--json-schema`: a turn may not end before the StructuredOutput tool filled `slot`.
    pub fn require_structured_output(&self, slot: structured::Slot) {
        let _ = self.structured.set(slot);
    }

    /// The small model that judges `auto` mode's questions.
    pub fn set_judge(&self, judge: Judge) {
        let _ = self.judge.set(judge);
    }

    /// Where `auto` mode's verdicts are shown (by default, a line on stderr).
    pub fn report_verdicts_to(&self, sink: VerdictSink) {
        let _ = self.verdicts.set(sink);
    }

    fn show_verdict(&self, line: &str) {
        match self.verdicts.get() {
            Some(sink) => sink(line),
            None => eprintln!("gyre: {line}"),
        }
    }

    /// The engine's interrupt, for a denial that also ends the turn.
    pub fn set_interrupt(&self, handle: InterruptHandle) {
        let _ = self.interrupt.set(handle);
    }

    /// Registers the SDK's hooks from `initialize`.
    pub fn add_sdk_hooks(&self, config: &Value, channel: ClientChannel) {
        self.hooks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .add_sdk_callbacks(config, channel);
    }

    /// `--include-hook-events`: each hook's start and end go to `sink`.
    pub fn report_hooks_to(&self, sink: HookEventSink) {
        self.hooks
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .report_to(sink);
    }

    /// Whether any hook listens to `event` (without copying the hooks).
    #[must_use]
    pub fn has_hook(&self, event: HookEvent) -> bool {
        self.hooks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .has(event)
    }

    /// The hooks now registered (cheap: a few strings per hook).
    #[must_use]
    pub fn hooks(&self) -> Hooks {
        self.hooks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    async fn decide(&self, tool: &dyn Tool, call: &ToolCall, ctx: &ToolContext) -> InputDecision {
        let keep = |decision| InputDecision {
            decision,
            updated_input: None,
        };
        let (mode, permissions) = {
            let p = self.policy.read().unwrap_or_else(PoisonError::into_inner);
            (p.mode.clone(), Arc::clone(&p.permissions))
        };
        let hooks = self.hooks();
        let mut verdict = None;
        let mut updated = None;
        if hooks.has(HookEvent::PreToolUse) {
            let fields =
                json!({ "tool_name": call.name, "tool_input": call.input, "tool_use_id": call.id });
            let v = hooks
                .run(
                    HookEvent::PreToolUse,
                    Some(&call.name),
                    Some(&call.id),
                    &mode.name,
                    fields,
                    &ctx.cancel,
                )
                .await;
            if !v.context.is_empty() {
                self.pre_tool_context
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(call.id.clone(), v.context.clone());
            }
            if let Some(reason) = &v.stop {
                *self.stop.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason.clone());
                return keep(PermissionDecision::Deny {
                    reason: reason.clone(),
                });
            }
            if let Some(reason) = v.block {
                return keep(PermissionDecision::Deny { reason });
            }
            updated = v.updated_input;
            verdict = Some((v.allow, v.ask));
        }
        // What the hook changed is what the rules judge.
        let effective = updated.as_ref().map(|input| ToolCall {
            input: input.clone(),
            ..call.clone()
        });
        let call = effective.as_ref().unwrap_or(call);
        let decision = match (permissions.evaluate(tool, call, ctx), verdict) {
            // A hook's "allow" answers the question; deny rules still win.
            (PermissionDecision::Ask { .. }, Some((true, _))) => PermissionDecision::Allow,
            (PermissionDecision::Allow, Some((_, true))) => PermissionDecision::Ask {
                reason: "a PreToolUse hook asked for confirmation".to_owned(),
            },
            (decision, _) => decision,
        };
        // A tool that runs code goes to auto mode's judge even when a rule or a hook
        // allowed it.
        let decision = match decision {
            PermissionDecision::Allow if mode.judged && self.runs_code(&call.name) => {
                PermissionDecision::Ask {
                    reason: format!(
                        "{} runs code the model writes: auto mode's judge decides each call",
                        call.name
                    ),
                }
            }
            decision => decision,
        };
        let PermissionDecision::Ask { reason } = decision else {
            return InputDecision {
                decision,
                updated_input: updated,
            };
        };
        let reason = match self.judge.get().filter(|_| mode.judged) {
            Some(judge) => match judge.judge(call, ctx, &reason).await {
                Verdict::Allow(why) => {
                    self.show_verdict(&format!("auto mode allowed {}: {why}", call.name));
                    return keep(PermissionDecision::Allow);
                }
                Verdict::Deny(why) => {
                    self.show_verdict(&format!("auto mode refused {}: {why}", call.name));
                    let mut reason = format!("auto mode's judge refused {}: {why}", call.name);
                    if self.permission_denied(call, &why).await {
                        reason.push_str(RETRY_NOTE);
                    }
                    return keep(PermissionDecision::Deny { reason });
                }
                Verdict::Unsure(why) => format!("{reason} (auto mode's judge: {why})"),
            },
            None => reason,
        };
        // PermissionRequest hooks may answer for the user (in every front-end, also where
        // an "ask" would be a denial).
        let hooked = self.permission_request(call, ctx, &mode.name).await;
        if hooked.is_none() && mode.never_ask {
            return keep(PermissionDecision::Deny {
                reason: format!(
                    "Permission to use {} was not granted in advance (dontAsk mode: {reason}).",
                    call.name
                ),
            });
        }
        let approval = match (hooked, self.approvals.get()) {
            (Some(answer), _) => answer,
            (None, None) => {
                return InputDecision {
                    decision: permissions.can_use_tool(tool, call, ctx).await,
                    updated_input: updated,
                };
            }
            (None, Some(approvals)) => {
                let question = Question {
                    tool: call.name.clone(),
                    input: call.input.clone(),
                    tool_use_id: call.id.clone(),
                    reason,
                    always: gyre_tools::always_rule(tool, call, ctx),
                };
                self.notify(
                    "permission_prompt",
                    &format!("gyre needs your permission to use {}", call.name),
                )
                .await;
                approvals.ask(question, &ctx.cancel).await
            }
        };
        match approval {
            Approval::Allow {
                updated_input,
                updates,
            } => {
                if let Err(e) = self.apply_updates(&updates) {
                    tracing::warn!("the answer's permission updates were not applied: {e}");
                    eprintln!("gyre: the answer's permission updates were not applied: {e}");
                }
                InputDecision {
                    decision: PermissionDecision::Allow,
                    // An SDK echoes the input when its callback kept it.
                    updated_input: updated_input
                        .filter(|u| u.is_object() && *u != call.input)
                        .or(updated),
                }
            }
            Approval::Deny { message, interrupt } => {
                if interrupt && let Some(handle) = self.interrupt.get() {
                    handle.interrupt();
                }
                let reason = message.filter(|m| !m.is_empty()).unwrap_or_else(|| {
                    format!(
                        "The user denied permission to use {}. Do not retry it; ask the user how to proceed.",
                        call.name
                    )
                });
                keep(PermissionDecision::Deny { reason })
            }
        }
    }
}

impl Gate {
    /// PermissionRequest hooks for a call the policy would ask about: their answer, as
    /// the user's would be, or `None` when none answered.
    async fn permission_request(
        &self,
        call: &ToolCall,
        ctx: &ToolContext,
        mode: &str,
    ) -> Option<Approval> {
        let hooks = self.hooks();
        if !hooks.has(HookEvent::PermissionRequest) {
            return None;
        }
        let fields = json!({
            "tool_name": call.name,
            "tool_input": call.input,
            "tool_use_id": call.id,
            "permission_suggestions": [],
        });
        let verdict = hooks
            .run(
                HookEvent::PermissionRequest,
                Some(&call.name),
                Some(&call.id),
                mode,
                fields,
                &ctx.cancel,
            )
            .await;
        Some(match verdict.permission? {
            PermissionAnswer::Allow {
                updated_input,
                mut updated_permissions,
            } => {
                // With code-running MCP tools declared, a hook may not change the mode
                // (it could leave auto mode's judge behind).
                if self
                    .code_running
                    .get()
                    .is_some_and(|names| !names.is_empty())
                {
                    updated_permissions.retain(|u| !matches!(u, PermissionUpdate::SetMode(_)));
                }
                Approval::Allow {
                    updated_input,
                    updates: updated_permissions,
                }
            }
            PermissionAnswer::Deny { message, interrupt } => Approval::Deny {
                message: message.or_else(|| {
                    Some(format!(
                        "A PermissionRequest hook denied permission to use {}.",
                        call.name
                    ))
                }),
                interrupt,
            },
        })
    }

    /// PermissionDenied hooks, after auto mode's judge refused `call` (`reason`):
    /// whether one said the model may retry (`hookSpecificOutput.retry`).
    async fn permission_denied(&self, call: &ToolCall, reason: &str) -> bool {
        let fields = json!({
            "tool_name": call.name,
            "tool_input": call.input,
            "tool_use_id": call.id,
            "reason": reason,
        });
        self.fire(HookEvent::PermissionDenied, Some(&call.name), fields)
            .await
            .is_some_and(|v| v.retry)
    }

    /// Notification hooks: gyre waits for the user (`notification_type`:
    /// `permission_prompt`, `idle_prompt`).
    pub async fn notify(&self, kind: &str, message: &str) {
        let fields = json!({ "message": message, "notification_type": kind, "title": "gyre" });
        self.fire(HookEvent::Notification, Some(kind), fields).await;
    }

    /// Runs the hooks of `event` that match `subject` (not a tool call's: nothing to
    /// cancel them with) and merges what they decided; `None` when none listens.
    async fn fire(
        &self,
        event: HookEvent,
        subject: Option<&str>,
        fields: Value,
    ) -> Option<crate::hooks::HookVerdict> {
        if !self.has_hook(event) {
            return None;
        }
        let hooks = self.hooks();
        let mode = self.mode_name();
        Some(
            hooks
                .run(
                    event,
                    subject,
                    None,
                    &mode,
                    fields,
                    &CancellationToken::new(),
                )
                .await,
        )
    }
}

fn build_permissions(
    mode: &ModeName,
    rules: &Rules,
    handle: &ModeHandle,
) -> Result<Permissions, RuleError> {
    Ok(
        Permissions::from_rules(mode.mode, &rules.allow, &rules.ask, &rules.deny)?
            .with_mode_handle(handle.clone()),
    )
}

impl CanUseTool for Gate {
    fn can_use_tool<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async move { self.decide(tool, call, ctx).await.decision })
    }

    fn can_use_tool_with_input<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, InputDecision> {
        Box::pin(self.decide(tool, call, ctx))
    }
}

impl ToolHook for Gate {
    /// PreToolUse and PostToolUse hooks' `additionalContext` and a PostToolUse block's
    /// reason go to the model after the result; `continue: false` (or a PreToolUse hook's) stops the query.
    fn after_tool<'a>(&'a self, outcome: &'a ToolCallOutcome) -> BoxFuture<'a, AfterToolOutcome> {
        Box::pin(async move {
            let mut after = AfterToolOutcome {
                pre_tool_context: self
                    .pre_tool_context
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&outcome.tool_use_id)
                    .unwrap_or_default(),
                ..AfterToolOutcome::default()
            };
            let hooks = self.hooks();
            // A failed call has its own event, with the error and whether an interrupt
            // caused it.
            let (event, fields) = if outcome.output.is_error {
                (
                    HookEvent::PostToolUseFailure,
                    json!({
                        "tool_name": outcome.tool_name,
                        "tool_input": outcome.input,
                        "tool_use_id": outcome.tool_use_id,
                        "error": outcome.output.content,
                        "is_interrupt": outcome.output.content == "Interrupted by user",
                    }),
                )
            } else {
                (
                    HookEvent::PostToolUse,
                    json!({
                        "tool_name": outcome.tool_name,
                        "tool_input": outcome.input,
                        "tool_response": outcome.output.content,
                        "tool_use_id": outcome.tool_use_id,
                    }),
                )
            };
            if hooks.has(event) && outcome.denial.is_none() {
                let v = hooks
                    .run(
                        event,
                        Some(&outcome.tool_name),
                        Some(&outcome.tool_use_id),
                        &self.mode_name(),
                        fields,
                        &CancellationToken::new(),
                    )
                    .await;
                after.additional_context = v.context;
                after.block_reason = v.block;
                after.stop = v.stop;
            }
            let pre_tool_stop = self
                .stop
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            after.stop = after.stop.or(pre_tool_stop);
            after
        })
    }
}

impl CompactHook for Gate {
    /// PreCompact hooks, with Claude Code's input (`trigger` `auto` or `manual`,
    /// `custom_instructions`); what they print becomes instructions for the summary.
    fn before_compact<'a>(
        &'a self,
        trigger: Trigger,
        custom_instructions: Option<&'a str>,
    ) -> BoxFuture<'a, PreCompactOutcome> {
        Box::pin(async move {
            let hooks = self.hooks();
            if !hooks.has(HookEvent::PreCompact) {
                return PreCompactOutcome::default();
            }
            let trigger = trigger_name(trigger);
            let fields = json!({ "trigger": trigger, "custom_instructions": custom_instructions });
            let v = hooks
                .run(
                    HookEvent::PreCompact,
                    Some(trigger),
                    None,
                    &self.mode_name(),
                    fields,
                    &CancellationToken::new(),
                )
                .await;
            PreCompactOutcome {
                instructions: v.context,
            }
        })
    }

    /// PostCompact hooks: the trigger (`auto` or `manual`) and the summary.
    fn after_compact<'a>(&'a self, trigger: Trigger, summary: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let trigger = trigger_name(trigger);
            let fields = json!({ "trigger": trigger, "compact_summary": summary });
            self.fire(HookEvent::PostCompact, Some(trigger), fields)
                .await;
        })
    }
}

impl StopHook for Gate {
    fn on_stop<'a>(
        &'a self,
        messages: &'a [Message],
        stop_hook_active: bool,
    ) -> BoxFuture<'a, StopHookOutcome> {
        Box::pin(async move {
            let mut blocking = Vec::new();
            let fields = json!({
                "stop_hook_active": stop_hook_active,
                "last_assistant_message": last_assistant_text(messages),
            });
            if let Some(v) = self.fire(HookEvent::Stop, None, fields).await {
                if let Some(reason) = v.stop {
                    return StopHookOutcome::Prevent(reason);
                }
                blocking.extend(v.block);
            }
            // --json-schema: a turn that ends without the structured answer is sent back
            // once to give it (not again, so a model that will not cannot loop forever).
            if !stop_hook_active
                && self.structured.get().is_some_and(|slot| {
                    slot.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .is_none()
                })
            {
                blocking.push(structured::MISSING.to_owned());
            }
            if blocking.is_empty() {
                StopHookOutcome::Allow
            } else {
                StopHookOutcome::Block(blocking)
            }
        })
    }
}

impl SubagentHook for Gate {
    /// SubagentStart hooks (`agent_id`, `agent_type`; matched on the type): their
    /// `additionalContext` goes to the sub-agent.
    fn on_start<'a>(
        &'a self,
        agent_id: &'a str,
        agent_type: &'a str,
    ) -> BoxFuture<'a, Vec<String>> {
        Box::pin(async move {
            let fields = json!({ "agent_id": agent_id, "agent_type": agent_type });
            self.fire(HookEvent::SubagentStart, Some(agent_type), fields)
                .await
                .map(|v| v.context)
                .unwrap_or_default()
        })
    }

    /// SubagentStop hooks, as Stop's for the sub-agent: a block sends it on with the
    /// reason, `continue: false` ends it.
    fn on_stop<'a>(
        &'a self,
        agent_id: &'a str,
        agent_type: &'a str,
        transcript: Option<&'a std::path::Path>,
        messages: &'a [Message],
        stop_hook_active: bool,
    ) -> BoxFuture<'a, StopHookOutcome> {
        Box::pin(async move {
            let fields = json!({
                "stop_hook_active": stop_hook_active,
                "agent_id": agent_id,
                "agent_type": agent_type,
                "agent_transcript_path": transcript.map(|p| p.display().to_string()),
                "last_assistant_message": last_assistant_text(messages),
            });
            let Some(v) = self
                .fire(HookEvent::SubagentStop, Some(agent_type), fields)
                .await
            else {
                return StopHookOutcome::Allow;
            };
            match (v.stop, v.block) {
                (Some(reason), _) => StopHookOutcome::Prevent(reason),
                (None, Some(reason)) => StopHookOutcome::Block(vec![reason]),
                (None, None) => StopHookOutcome::Allow,
            }
        })
    }
}

/// A compaction's trigger as hooks name it: Claude Code knows two, and a compaction it
/// was not asked for is `auto`.
fn trigger_name(trigger: Trigger) -> &'static str {
    match trigger {
        Trigger::Manual => "manual",
        Trigger::Auto | Trigger::Reactive => "auto",
    }
}

/// The text of the last assistant message (what Stop hooks are told the model said).
fn last_assistant_text(messages: &[Message]) -> String {
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .map(Message::text)
        .unwrap_or_default()
}

/// UserPromptSubmit hooks: a block refuses the prompt; additional context rides along
/// as another text block of the same message.
///
/// # Errors
/// [`PromptBlocked`] with the hook's reason when a hook refuses the prompt.
pub(crate) async fn prompt_hooks(
    gate: &Gate,
    session_id: &str,
    mut content: Vec<ContentBlock>,
) -> Result<Vec<ContentBlock>, PromptBlocked> {
    let hooks = gate.hooks();
    if !hooks.has(HookEvent::UserPromptSubmit) {
        return Ok(content);
    }
    let prompt: String = content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let verdict = hooks
        .run(
            HookEvent::UserPromptSubmit,
            None,
            None,
            &gate.mode_name(),
            json!({ "prompt": prompt, "session_id": session_id }),
            &CancellationToken::new(),
        )
        .await;
    if let Some(reason) = verdict.block.or(verdict.stop) {
        return Err(PromptBlocked { reason });
    }
    content.extend(verdict.context.into_iter().map(ContentBlock::text));
    Ok(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> Gate {
        Gate::new(
            "default".parse().unwrap(),
            Rules::default(),
            Hooks::default(),
        )
        .unwrap()
    }

    fn deny_rm() -> PermissionUpdate {
        PermissionUpdate::AddRules {
            behavior: RuleBehavior::Deny,
            rules: vec!["Bash(rm:*)".parse().unwrap()],
        }
    }

    #[test]
    fn permission_updates_add_rules_and_set_the_mode_or_change_nothing() {
        let g = gate();
        g.apply_updates(&[deny_rm(), PermissionUpdate::SetMode("acceptEdits".into())])
            .unwrap();
        assert_eq!(g.mode_name(), "acceptEdits");
        let deny: Vec<String> = g
            .permissions()
            .deny_rules()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(deny, ["Bash(rm:*)"]);
        let err = g
            .apply_updates(&[
                PermissionUpdate::SetMode("plan".into()),
                PermissionUpdate::SetMode("sideways".into()),
            ])
            .unwrap_err();
        assert!(err.to_string().contains("sideways"), "{err}");
        assert_eq!(g.mode_name(), "acceptEdits", "a bad update applies nothing");
    }

    /// Answers every question "allow always", counting them.
    fn answer_always(
        approvals: &Arc<Approvals>,
        mut questions: crate::approvals::ApprovalRequests,
    ) -> Arc<std::sync::atomic::AtomicUsize> {
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (approvals, count) = (Arc::clone(approvals), Arc::clone(&asked));
        tokio::spawn(async move {
            while let Some(request) = questions.recv().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                approvals.answer(request.id, Approval::always(&request));
            }
        });
        asked
    }

    /// The terminal's "allow for this session" lives in the policy, which a mode change
    /// (Shift+Tab, `set_permission_mode`) and `addRules` rebuild: the answer must stay.
    #[tokio::test]
    async fn a_session_answer_survives_mode_changes_and_added_rules() {
        let g = gate();
        let (approvals, questions) = Approvals::channel();
        g.ask_through(Arc::clone(&approvals));
        let asked = answer_always(&approvals, questions);
        let work = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(work.path().to_path_buf());
        let registry = gyre_tools::ToolRegistry::with_default_tools();
        let bash = registry.get("Bash").unwrap();
        let call = ToolCall::new("toolu_1", "Bash", json!({"command": "make test"}));
        let asked = || asked.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            g.can_use_tool(bash.as_ref(), &call, &ctx).await,
            PermissionDecision::Allow
        );
        assert_eq!(asked(), 1);
        g.set_mode("acceptEdits").unwrap();
        g.set_mode("default").unwrap();
        g.apply_updates(&[deny_rm()]).unwrap();
        assert_eq!(
            g.can_use_tool(bash.as_ref(), &call, &ctx).await,
            PermissionDecision::Allow
        );
        assert_eq!(asked(), 1, "the session answer was kept");
    }

    #[tokio::test]
    async fn a_denial_says_why_and_may_end_the_turn() {
        let g = gate();
        let (approvals, mut questions) = Approvals::channel();
        g.ask_through(Arc::clone(&approvals));
        let interrupt = InterruptHandle::default();
        g.set_interrupt(interrupt.clone());
        let work = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(work.path().to_path_buf());
        let registry = gyre_tools::ToolRegistry::with_default_tools();
        let bash = registry.get("Bash").unwrap();
        let call = ToolCall::new("toolu_1", "Bash", json!({"command": "make test"}));
        let answering = {
            let approvals = Arc::clone(&approvals);
            tokio::spawn(async move {
                let request = questions.recv().await.unwrap();
                assert_eq!(request.question.tool_use_id, "toolu_1");
                assert_eq!(request.question.always.to_string(), "Bash(make test)");
                approvals.answer(request.id, Approval::deny());
                let request = questions.recv().await.unwrap();
                approvals.answer(
                    request.id,
                    Approval::Deny {
                        message: Some("not now".into()),
                        interrupt: true,
                    },
                );
            })
        };
        let PermissionDecision::Deny { reason } = g.can_use_tool(bash.as_ref(), &call, &ctx).await
        else {
            panic!("allowed")
        };
        assert!(reason.contains("denied permission to use Bash"), "{reason}");
        assert!(!interrupt.is_interrupted());
        assert_eq!(
            g.can_use_tool(bash.as_ref(), &call, &ctx).await,
            PermissionDecision::Deny {
                reason: "not now".into()
            }
        );
        assert!(interrupt.is_interrupted());
        answering.await.unwrap();
    }

    #[test]
    fn bypass_permissions_is_reached_later_only_when_the_session_allows_it() {
        let err = gate().set_mode("bypassPermissions").unwrap_err();
        assert_eq!(err, GateError::BypassNotAllowed);
        assert!(
            err.to_string()
                .contains("--allow-dangerously-skip-permissions")
        );
        let update = PermissionUpdate::SetMode("bypassPermissions".into());
        assert_eq!(
            gate()
                .apply_updates(std::slice::from_ref(&update))
                .unwrap_err(),
            GateError::BypassNotAllowed
        );
        let allowed = gate().allowing_bypass(true);
        allowed.set_mode("bypassPermissions").unwrap();
        assert_eq!(allowed.mode_name(), "bypassPermissions");
        // A session started in it may leave it and come back.
        let started = Gate::new(
            "bypassPermissions".parse().unwrap(),
            Rules::default(),
            Hooks::default(),
        )
        .unwrap();
        started.set_mode("default").unwrap();
        started.apply_updates(&[update]).unwrap();
        assert_eq!(started.mode_name(), "bypassPermissions");
    }

    #[test]
    fn modes_by_claude_code_name() {
        assert!("dontAsk".parse::<ModeName>().unwrap().never_ask);
        assert!(!"auto".parse::<ModeName>().unwrap().never_ask);
        let err = "sideways".parse::<ModeName>().unwrap_err();
        assert_eq!(err.name, "sideways");
        assert!(err.to_string().contains("dontAsk"), "{err}");
    }
}
