//! Hooks: callbacks an SDK registered in `initialize` (run over the control protocol as
//! `hook_callback` requests) and shell commands from the settings' `hooks`, both fed the
//! same JSON input and read the same JSON output as Claude Code's hooks.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize as _;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

use crate::client::ClientChannel;

/// The events gyre fires, by Claude Code's names. The matcher of each is matched
/// against the tool's name (the tool events), the `source` (SessionStart), the
/// `notification_type` (Notification), the agent type (SubagentStart, SubagentStop) or
/// the `trigger` (PreCompact, PostCompact); the others match every hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    PreToolUse,
    PostToolUse,
    /// After a tool call that failed (its result is an error).
    PostToolUseFailure,
    /// When the policy would ask about a call: a hook may answer for the user.
    PermissionRequest,
    /// After auto mode's judge refused a call: a hook may let the model retry.
    PermissionDenied,
    UserPromptSubmit,
    Stop,
    /// When a sub-agent (the Agent tool) starts; its context goes to the sub-agent.
    SubagentStart,
    /// When a sub-agent would finish; a block sends it on.
    SubagentStop,
    /// Before a compaction's summary; the matcher names the trigger (`auto`, `manual`).
    PreCompact,
    /// After a compaction's summary came back (`trigger`, `compact_summary`).
    PostCompact,
    /// Before the first prompt of a session (`startup`, `resume`) and the first after
    /// `/clear` (`clear`) or a compaction (`compact`); its output joins that prompt.
    SessionStart,
    /// When the session ends (`reason`: `clear`, `prompt_input_exit`, `other`).
    SessionEnd,
    /// When gyre waits for the user (`permission_prompt`, `idle_prompt`).
    Notification,
}

impl HookEvent {
    /// Every event gyre fires.
    pub const ALL: [Self; 14] = [
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PostToolUseFailure,
        Self::PermissionRequest,
        Self::PermissionDenied,
        Self::UserPromptSubmit,
        Self::Stop,
        Self::SubagentStart,
        Self::SubagentStop,
        Self::PreCompact,
        Self::PostCompact,
        Self::SessionStart,
        Self::SessionEnd,
        Self::Notification,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::PermissionRequest => "PermissionRequest",
            Self::PermissionDenied => "PermissionDenied",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::Stop => "Stop",
            Self::SubagentStart => "SubagentStart",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
            Self::PostCompact => "PostCompact",
            Self::SessionStart => "SessionStart",
            Self::SessionEnd => "SessionEnd",
            Self::Notification => "Notification",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether a command's plain stdout (not JSON) is context for the model.
    fn stdout_is_context(self) -> bool {
        matches!(
            self,
            Self::UserPromptSubmit | Self::PreCompact | Self::SessionStart
        )
    }
}

/// What a PermissionRequest hook answered for the user
/// (`hookSpecificOutput.decision`).
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionAnswer {
    /// `behavior: "allow"`, with `updatedInput` and `updatedPermissions` (the SDKs'
    /// `PermissionUpdate`s: `addRules`, `setMode`).
    Allow {
        updated_input: Option<Value>,
        updated_permissions: Vec<crate::approvals::PermissionUpdate>,
    },
    /// `behavior: "deny"`: `message` for the model; `interrupt` ends the turn.
    Deny {
        message: Option<String>,
        interrupt: bool,
    },
}

/// `hookSpecificOutput.decision` of a PermissionRequest hook, as written.
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "behavior", rename_all = "camelCase")]
enum WireDecision {
    #[serde(rename_all = "camelCase")]
    Allow {
        #[serde(default)]
        updated_input: Option<Value>,
        #[serde(default)]
        updated_permissions: Vec<WirePermissionUpdate>,
    },
    Deny {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        interrupt: bool,
    },
}

/// A permission update a hook gave (`{"type":"addRules","rules":[{"toolName":…,
/// "ruleContent":…}],"behavior":…}`, `{"type":"setMode","mode":…}`).
#[derive(Debug, serde::Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
enum WirePermissionUpdate {
    AddRules {
        rules: Vec<WireRule>,
        behavior: String,
    },
    SetMode {
        mode: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRule {
    tool_name: String,
    #[serde(default)]
    rule_content: Option<String>,
}

impl WirePermissionUpdate {
    fn into_update(self) -> Option<crate::approvals::PermissionUpdate> {
        use crate::approvals::{PermissionUpdate, RuleBehavior};
        match self {
            Self::AddRules { rules, behavior } => {
                let behavior = match behavior.as_str() {
                    "allow" => RuleBehavior::Allow,
                    "deny" => RuleBehavior::Deny,
                    "ask" => RuleBehavior::Ask,
                    _ => return None,
                };
                let rules = rules
                    .into_iter()
                    .filter_map(|r| {
                        let text = match r.rule_content {
                            Some(content) => format!("{}({content})", r.tool_name),
                            None => r.tool_name,
                        };
                        text.parse().ok()
                    })
                    .collect();
                Some(PermissionUpdate::AddRules { behavior, rules })
            }
            Self::SetMode { mode } => Some(PermissionUpdate::SetMode(mode)),
            Self::Other => None,
        }
    }
}

/// What runs for a matching hook.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Runner {
    /// An SDK callback, by the id the SDK gave it in `initialize`.
    Callback(String),
    /// A settings command, run with `sh -c`.
    Command(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Hook {
    event: HookEvent,
    /// `None`, `""` or `"*"`: every tool; otherwise tool names separated by `|`.
    matcher: Option<String>,
    runner: Runner,
    timeout: Duration,
}

impl Hook {
    fn matches(&self, tool_name: Option<&str>) -> bool {
        match (self.matcher.as_deref(), tool_name) {
            (None | Some("" | "*"), _) | (Some(_), None) => true,
            (Some(m), Some(tool)) => m.split('|').any(|alt| alt.trim() == tool),
        }
    }
}

/// Claude Code's default hook timeout: 60 s.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What the hooks that ran decided, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookVerdict {
    /// Block the action (`decision: "block"`, `permissionDecision: "deny"`, exit 2).
    pub block: Option<String>,
    /// `permissionDecision: "allow"` (or `decision: "approve"`): no permission question.
    pub allow: bool,
    /// `permissionDecision: "ask"`: ask even when the rules would allow.
    pub ask: bool,
    /// `hookSpecificOutput.updatedInput`.
    pub updated_input: Option<Value>,
    /// `hookSpecificOutput.additionalContext` (and the stdout of a UserPromptSubmit or
    /// PreCompact command: context for the prompt, instructions for the summary).
    pub context: Vec<String>,
    /// `continue: false`: stop the query, with this reason.
    pub stop: Option<String>,
    /// A PermissionRequest hook's answer for the user.
    pub permission: Option<PermissionAnswer>,
    /// A PermissionDenied hook's `retry: true`: the model may try the call again.
    pub retry: bool,
}

impl HookVerdict {
    fn absorb(&mut self, output: &Value) {
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        if output.get("continue") == Some(&Value::Bool(false)) {
            self.stop =
                Some(text(output, "stopReason").unwrap_or_else(|| "stopped by a hook".into()));
        }
        let reason = text(output, "reason");
        match output.get("decision").and_then(Value::as_str) {
            Some("block") => {
                self.block = Some(reason.clone().unwrap_or_else(|| "blocked by a hook".into()));
            }
            Some("approve") => self.allow = true,
            _ => {}
        }
        let specific = output
            .get("hookSpecificOutput")
            .cloned()
            .unwrap_or_default();
        let why = text(&specific, "permissionDecisionReason").or(reason);
        match specific.get("permissionDecision").and_then(Value::as_str) {
            Some("deny") => {
                self.block = Some(why.unwrap_or_else(|| "denied by a PreToolUse hook".into()));
            }
            Some("allow") => self.allow = true,
            Some("ask") => self.ask = true,
            _ => {}
        }
        if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
            self.updated_input = Some(input.clone());
        }
        if let Some(context) = text(&specific, "additionalContext") {
            self.context.push(context);
        }
        if specific.get("retry") == Some(&Value::Bool(true)) {
            self.retry = true;
        }
        if let Some(decision) = specific.get("decision").filter(|d| d.is_object()) {
            match WireDecision::deserialize(decision) {
                Ok(WireDecision::Allow {
                    updated_input,
                    updated_permissions,
                }) if !matches!(self.permission, Some(PermissionAnswer::Deny { .. })) => {
                    self.permission = Some(PermissionAnswer::Allow {
                        updated_input: updated_input.filter(Value::is_object),
                        updated_permissions: updated_permissions
                            .into_iter()
                            .filter_map(WirePermissionUpdate::into_update)
                            .collect(),
                    });
                }
                // A deny stands over an earlier hook's allow.
                Ok(WireDecision::Deny { message, interrupt }) => {
                    self.permission = Some(PermissionAnswer::Deny { message, interrupt });
                }
                Ok(WireDecision::Allow { .. }) => {}
                Err(e) => tracing::warn!("a PermissionRequest hook's decision is not valid: {e}"),
            }
        }
    }
}

/// Fields every hook input carries.
#[derive(Debug, Clone, Default)]
pub struct HookBase {
    pub session_id: String,
    pub transcript_path: String,
    pub cwd: String,
    /// Variables hook commands get on top of gyre's environment (the settings' `env`).
    pub child_env: Vec<(String, String)>,
}

/// A hook's start or end, as `--include-hook-events` reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookReport {
    Started {
        hook_id: String,
        /// `PreToolUse:Bash`, `Stop`, …
        hook_name: String,
        hook_event: &'static str,
    },
    Response {
        hook_id: String,
        hook_name: String,
        hook_event: &'static str,
        /// The hook's output, or why it failed.
        output: String,
        /// `success` or `error`.
        outcome: &'static str,
    },
}

/// Where hook starts and ends go (`--include-hook-events`).
pub type HookEventSink = Arc<dyn Fn(HookReport) + Send + Sync>;

/// The registered hooks of a session and how to run them.
#[derive(Clone, Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
    channel: Option<ClientChannel>,
    base: HookBase,
    events: Option<HookEventSink>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("hooks", &self.hooks.len())
            .field("sdk", &self.channel.is_some())
            .finish_non_exhaustive()
    }
}

impl Hooks {
    #[must_use]
    pub fn new(base: HookBase) -> Self {
        Self {
            base,
            ..Self::default()
        }
    }

    /// Reports each hook's start and end to `sink`.
    pub fn report_to(&mut self, sink: HookEventSink) {
        self.events = Some(sink);
    }

    /// Whether any hook listens to `event`.
    #[must_use]
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// The hooks registered, one line each, by event (`/hooks`): the event, the
    /// matcher (`*` for every subject), what runs and its timeout.
    #[must_use]
    pub fn listing(&self) -> String {
        if self.hooks.is_empty() {
            return "No hooks configured. Add them under \"hooks\" in ~/.gyre/settings.json or \
                    the project's .gyre/settings.json (a project's run once the folder is \
                    trusted); an Agent SDK registers its callbacks in initialize."
                .to_owned();
        }
        let mut lines = vec![format!("Hooks ({})", self.hooks.len())];
        for event in HookEvent::ALL {
            for hook in self.hooks.iter().filter(|h| h.event == event) {
                let matcher = hook
                    .matcher
                    .as_deref()
                    .filter(|m| !m.is_empty())
                    .unwrap_or("*");
                let runs = match &hook.runner {
                    Runner::Command(command) => format!("command: {command}"),
                    Runner::Callback(id) => format!("SDK callback {id}"),
                };
                lines.push(format!(
                    "  {:<18} {matcher:<16} {runs} ({}s)",
                    event.name(),
                    hook.timeout.as_secs()
                ));
            }
        }
        lines.join("\n")
    }

    /// Adds the SDK's hooks from `initialize`'s `hooks` map:
    /// `{"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["hook_0"],"timeout":5}]}`.
    /// Events gyre does not fire are ignored.
    pub fn add_sdk_callbacks(&mut self, config: &Value, channel: ClientChannel) {
        self.channel = Some(channel);
        for e in entries(config, "hookCallbackIds") {
            if let Some(id) = e.item.as_str() {
                self.push(
                    e.event,
                    e.matcher,
                    Runner::Callback(id.to_owned()),
                    e.timeout,
                );
            }
        }
    }

    /// Adds the settings' command hooks: `{"PreToolUse":[{"matcher":"Bash","hooks":
    /// [{"type":"command","command":"…","timeout":30}]}]}`.
    pub fn add_settings_commands(&mut self, config: &Value) {
        for e in entries(config, "hooks") {
            if e.item.get("type").and_then(Value::as_str) != Some("command") {
                continue;
            }
            if let Some(command) = e.item.get("command").and_then(Value::as_str) {
                let timeout = e.item.get("timeout").and_then(Value::as_u64).or(e.timeout);
                self.push(
                    e.event,
                    e.matcher,
                    Runner::Command(command.to_owned()),
                    timeout,
                );
            }
        }
    }

    fn push(
        &mut self,
        event: HookEvent,
        matcher: Option<String>,
        runner: Runner,
        secs: Option<u64>,
    ) {
        self.hooks.push(Hook {
            event,
            matcher,
            runner,
            timeout: secs.map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        });
    }

    /// Runs every hook of `event` that matches `tool_name`, in order, and merges what
    /// they decided. `fields` are the event's own input fields. A hook that fails
    /// (error, timeout, bad output) is logged and decides nothing.
    pub async fn run(
        &self,
        event: HookEvent,
        tool_name: Option<&str>,
        tool_use_id: Option<&str>,
        permission_mode: &str,
        fields: Value,
        cancel: &CancellationToken,
    ) -> HookVerdict {
        let mut verdict = HookVerdict::default();
        let matching: Vec<&Hook> = self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.matches(tool_name))
            .collect();
        if matching.is_empty() {
            return verdict;
        }
        let mut input = json!({
            "session_id": self.base.session_id,
            "transcript_path": self.base.transcript_path,
            "cwd": self.base.cwd,
            "permission_mode": permission_mode,
            "hook_event_name": event.name(),
        });
        if let (Some(obj), Value::Object(extra)) = (input.as_object_mut(), fields) {
            obj.extend(extra);
        }
        let hook_name = match tool_name {
            Some(tool) => format!("{}:{tool}", event.name()),
            None => event.name().to_owned(),
        };
        for hook in matching {
            let hook_id = uuid::Uuid::new_v4().to_string();
            self.report(|| HookReport::Started {
                hook_id: hook_id.clone(),
                hook_name: hook_name.clone(),
                hook_event: event.name(),
            });
            let outcome = match &hook.runner {
                Runner::Callback(id) => {
                    self.run_callback(id, tool_use_id, &input, hook.timeout, cancel)
                        .await
                }
                Runner::Command(command) => {
                    self.run_command(command, event, &input, hook.timeout).await
                }
            };
            let (output, outcome_name) = match &outcome {
                Ok(output) => (output.to_string(), "success"),
                Err(e) => (e.to_string(), "error"),
            };
            self.report(|| HookReport::Response {
                hook_id: hook_id.clone(),
                hook_name: hook_name.clone(),
                hook_event: event.name(),
                output,
                outcome: outcome_name,
            });
            match outcome {
                Ok(output) => verdict.absorb(&output),
                Err(e) => tracing::warn!(event = event.name(), error = %e, "hook failed"),
            }
        }
        verdict
    }

    fn report(&self, report: impl FnOnce() -> HookReport) {
        if let Some(sink) = &self.events {
            sink(report());
        }
    }

    async fn run_callback(
        &self,
        id: &str,
        tool_use_id: Option<&str>,
        input: &Value,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Value, HookError> {
        let Some(channel) = &self.channel else {
            return Err(HookError::NoSdk);
        };
        Ok(tokio::time::timeout(
            timeout,
            channel.hook_callback(id, input, tool_use_id, cancel),
        )
        .await
        .map_err(|_| HookError::CallbackTimeout {
            id: id.to_owned(),
            timeout,
        })??)
    }

    async fn run_command(
        &self,
        command: &str,
        event: HookEvent,
        input: &Value,
        timeout: Duration,
    ) -> Result<Value, HookError> {
        let command_name = || command.to_owned();
        let mut sh = tokio::process::Command::new("sh");
        // gyre's own credentials are not the hook's, unless the settings' env names
        // them for the programs gyre starts.
        for name in gyre_tools::sandbox::SECRET_ENV {
            if !self.base.child_env.iter().any(|(k, _)| k.as_str() == *name) {
                sh.env_remove(name);
            }
        }
        let mut child = sh
            .arg("-c")
            .arg(command)
            .current_dir(&self.base.cwd)
            .envs(self.base.child_env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| HookError::Start {
                command: command_name(),
                source,
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its input is fine: ignore a broken pipe.
            let _ = stdin.write_all(input.to_string().as_bytes()).await;
        }
        let out = tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .map_err(|_| HookError::TimedOut {
                command: command_name(),
                timeout,
            })?
            .map_err(|source| HookError::Wait {
                command: command_name(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            // Exit 2 blocks, with stderr as the reason (Claude Code's hook contract).
            Some(2) => Ok(json!({ "decision": "block", "reason": stderr.trim() })),
            Some(0) => {
                let trimmed = stdout.trim();
                if trimmed.starts_with('{') {
                    serde_json::from_str(trimmed).map_err(|source| HookError::InvalidJson {
                        command: command_name(),
                        source,
                    })
                } else if event.stdout_is_context() && !trimmed.is_empty() {
                    Ok(json!({ "hookSpecificOutput": { "additionalContext": trimmed } }))
                } else {
                    Ok(json!({}))
                }
            }
            code => Err(HookError::Exit {
                command: command_name(),
                code,
                stderr: stderr.trim().to_owned(),
            }),
        }
    }
}

/// Why a hook gave no answer; reported as the hook's output and logged.
#[derive(Debug, thiserror::Error)]
enum HookError {
    #[error("no SDK to call")]
    NoSdk,
    #[error("the hook callback {id} did not answer in {timeout:?}")]
    CallbackTimeout { id: String, timeout: Duration },
    #[error(transparent)]
    Client(#[from] crate::client::ClientError),
    #[error("could not start hook `{command}`: {source}")]
    Start {
        command: String,
        source: std::io::Error,
    },
    #[error("hook `{command}` timed out after {timeout:?}")]
    TimedOut { command: String, timeout: Duration },
    #[error("hook `{command}`: {source}")]
    Wait {
        command: String,
        source: std::io::Error,
    },
    #[error("hook `{command}` printed invalid JSON: {source}")]
    InvalidJson {
        command: String,
        source: serde_json::Error,
    },
    #[error("hook `{command}` exited with {code:?}: {stderr}")]
    Exit {
        command: String,
        code: Option<i32>,
        stderr: String,
    },
}

/// One entry of a matcher of a hooks map, with the matcher's fields.
struct Entry<'a> {
    event: HookEvent,
    matcher: Option<String>,
    /// The matcher's `timeout` in seconds.
    timeout: Option<u64>,
    item: &'a Value,
}

/// Each entry (under `list_key`) of each matcher of a hooks map.
fn entries<'a>(config: &'a Value, list_key: &str) -> Vec<Entry<'a>> {
    let mut out = Vec::new();
    let Some(map) = config.as_object() else {
        return out;
    };
    for (name, matchers) in map {
        let Some(event) = HookEvent::parse(name) else {
            tracing::warn!(event = %name, "hook event not supported by gyre; ignored");
            continue;
        };
        for m in matchers.as_array().into_iter().flatten() {
            let matcher = m.get("matcher").and_then(Value::as_str).map(str::to_owned);
            let timeout = m.get("timeout").and_then(Value::as_u64);
            for item in m
                .get(list_key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                out.push(Entry {
                    event,
                    matcher: matcher.clone(),
                    timeout,
                    item,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(output: &Value) -> HookVerdict {
        let mut v = HookVerdict::default();
        v.absorb(output);
        v
    }

    #[test]
    fn outputs_map_to_decisions() {
        let deny = verdict(
            &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
            "permissionDecision": "deny", "permissionDecisionReason": "no"}}),
        );
        assert_eq!(deny.block.as_deref(), Some("no"));
        let block = verdict(&json!({"decision": "block", "reason": "again"}));
        assert_eq!(block.block.as_deref(), Some("again"));
        let stop = verdict(&json!({"continue": false, "stopReason": "enough"}));
        assert_eq!(stop.stop.as_deref(), Some("enough"));
        let allow = verdict(
            &json!({"hookSpecificOutput": {"permissionDecision": "allow",
            "updatedInput": {"command": "ls"}, "additionalContext": "fyi"}}),
        );
        assert!(allow.allow && allow.block.is_none());
        assert_eq!(allow.updated_input, Some(json!({"command": "ls"})));
        assert_eq!(allow.context, ["fyi"]);
        assert_eq!(verdict(&json!({})), HookVerdict::default());
    }

    #[test]
    fn matchers_name_tools_or_everything() {
        let hook = |m: Option<&str>| Hook {
            event: HookEvent::PreToolUse,
            matcher: m.map(str::to_owned),
            runner: Runner::Command("true".into()),
            timeout: DEFAULT_TIMEOUT,
        };
        assert!(hook(None).matches(Some("Bash")));
        assert!(hook(Some("*")).matches(Some("Bash")));
        assert!(hook(Some("Write|Edit")).matches(Some("Edit")));
        assert!(!hook(Some("Write|Edit")).matches(Some("Bash")));
    }

    #[tokio::test]
    async fn settings_commands_get_the_input_on_stdin_and_exit_2_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let mut hooks = Hooks::new(HookBase {
            cwd: dir.path().display().to_string(),
            ..HookBase::default()
        });
        hooks.add_settings_commands(&json!({
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": "cat > input.json; echo 'no rm' >&2; exit 2"}]}]
        }));
        let cancel = CancellationToken::new();
        let v = hooks
            .run(
                HookEvent::PreToolUse,
                Some("Bash"),
                Some("toolu_1"),
                "default",
                json!({"tool_name": "Bash", "tool_input": {"command": "rm -rf x"}}),
                &cancel,
            )
            .await;
        assert_eq!(v.block.as_deref(), Some("no rm"));
        let input: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("input.json")).unwrap())
                .unwrap();
        assert_eq!(input["hook_event_name"], "PreToolUse");
        assert_eq!(input["tool_input"]["command"], "rm -rf x");
        let other = hooks
            .run(
                HookEvent::PreToolUse,
                Some("Read"),
                None,
                "default",
                json!({}),
                &cancel,
            )
            .await;
        assert_eq!(other, HookVerdict::default());
    }
}
