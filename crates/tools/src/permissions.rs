//! The permission policy: modes and allow / ask / deny rules.
//!
//! Evaluation order (SPEC §6): deny rules → ask rules → the tool's own hard denials →
//! allow rules (and answers remembered for the session) → `bypassPermissions` → the
//! working-directory check for path tools → the mode (`plan`, `acceptEdits`) → the
//! tool's own view. A deny rule therefore wins in every mode. Without a
//! [`PermissionPrompt`] (headless), "ask" means deny, with a message saying how to allow.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};

use globset::GlobBuilder;
use serde_json::Value;

use crate::mode::ModeHandle;
use crate::{BoxFuture, CanUseTool, PathFilter, PermissionDecision, Tool, ToolCall, ToolContext};

/// How much is allowed without a rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum PermissionMode {
    /// Read-only tools inside the working directories; the rest needs a rule.
    #[default]
    Default,
    /// Also Edit and Write inside the working directories.
    AcceptEdits,
    /// Only read-only tools.
    Plan,
    /// Everything but what a deny (or ask) rule names.
    BypassPermissions,
}

impl PermissionMode {
    /// The name used by `--permission-mode` and settings files.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PermissionMode {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "acceptEdits" => Ok(Self::AcceptEdits),
            "plan" => Ok(Self::Plan),
            "bypassPermissions" => Ok(Self::BypassPermissions),
            other => Err(RuleError::UnknownMode(other.to_owned())),
        }
    }
}

/// A malformed rule or mode, as found in flags and settings files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("empty permission rule")]
    Empty,
    #[error(
        "permission rule `{0}`: a rule is a tool name, optionally followed by a specifier in parentheses, e.g. `Bash(git diff:*)`"
    )]
    Malformed(String),
    #[error(
        "permission rule `{0}`: the specifier in parentheses is empty; write `{1}` to name the whole tool"
    )]
    EmptySpecifier(String, String),
    #[error("permission rule `{rule}`: invalid path pattern: {message}")]
    InvalidPattern { rule: String, message: String },
    #[error(
        "unknown permission mode `{0}`: expected default, acceptEdits, plan or bypassPermissions"
    )]
    UnknownMode(String),
}

/// `Tool` or `Tool(specifier)`: `Bash`, `Bash(git diff:*)`, `Read(src/**)`,
/// `Edit(/abs/path/**)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PermissionRule {
    pub tool: String,
    pub specifier: Option<String>,
}

impl PermissionRule {
    /// A rule naming every use of `tool`.
    #[must_use]
    pub fn tool(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            specifier: None,
        }
    }

    #[must_use]
    pub fn with_specifier(tool: impl Into<String>, specifier: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            specifier: Some(specifier.into()),
        }
    }
}

impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.specifier {
            Some(s) => write!(f, "{}({s})", self.tool),
            None => f.write_str(&self.tool),
        }
    }
}

impl FromStr for PermissionRule {
    type Err = RuleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(RuleError::Empty);
        }
        let (tool, specifier) = match s.find('(') {
            None => (s, None),
            Some(open) => {
                let Some(inner) = s[open + 1..].strip_suffix(')') else {
                    return Err(RuleError::Malformed(s.to_owned()));
                };
                let tool = &s[..open];
                if inner.trim().is_empty() {
                    return Err(RuleError::EmptySpecifier(s.to_owned(), tool.to_owned()));
                }
                (tool, Some(inner.to_owned()))
            }
        };
        let valid_name = tool.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && tool
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name || (specifier.is_none() && s.contains(')')) {
            return Err(RuleError::Malformed(s.to_owned()));
        }
        if let Some(spec) = &specifier
            && is_path_rule_tool(tool)
        {
            GlobBuilder::new(spec)
                .literal_separator(true)
                .build()
                .map_err(|e| RuleError::InvalidPattern {
                    rule: s.to_owned(),
                    message: e.to_string(),
                })?;
        }
        Ok(Self {
            tool: tool.to_owned(),
            specifier,
        })
    }
}

/// Parses a tool list as `--allowedTools` takes it: rules separated by commas or spaces
/// (spaces inside parentheses belong to the specifier): `"Bash(git diff:*) Read,Edit"`.
pub fn parse_rule_list(list: &str) -> Result<Vec<PermissionRule>, RuleError> {
    let mut rules = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in list.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !current.trim().is_empty() {
                    rules.push(current.parse()?);
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if !current.trim().is_empty() {
        rules.push(current.parse()?);
    }
    Ok(rules)
}

/// Allows every call: for tests and trusted embedders.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl CanUseTool for AllowAll {
    fn can_use_tool<'a>(
        &'a self,
        _tool: &'a dyn Tool,
        _call: &'a ToolCall,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async { PermissionDecision::Allow })
    }
}

/// The user's answer to a permission question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptAnswer {
    AllowOnce,
    /// Allow, and allow the same again for the rest of the session.
    AllowAlways,
    Deny,
}

/// Asks the user (the REPL plugs one in; headless runs have none).
pub trait PermissionPrompt: Send + Sync {
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
    ) -> BoxFuture<'a, PromptAnswer>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleKind {
    Allow,
    Ask,
    Deny,
}

/// The permission policy of a session. Implements [`CanUseTool`].
pub struct Permissions {
    /// Shared and changeable mid-session ([`Permissions::mode_handle`]).
    mode: ModeHandle,
    allow: Vec<PermissionRule>,
    ask: Vec<PermissionRule>,
    deny: Vec<PermissionRule>,
    session_allow: Mutex<Vec<PermissionRule>>,
    prompt: Option<Arc<dyn PermissionPrompt>>,
}

impl Default for Permissions {
    fn default() -> Self {
        Self::new(PermissionMode::Default)
    }
}

impl fmt::Debug for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permissions")
            .field("mode", &self.mode.get())
            .field("allow", &self.allow)
            .field("ask", &self.ask)
            .field("deny", &self.deny)
            .field("interactive", &self.prompt.is_some())
            .finish_non_exhaustive()
    }
}

impl Permissions {
    /// A headless policy in `mode` with no rules.
    #[must_use]
    pub fn new(mode: PermissionMode) -> Self {
        Self {
            mode: ModeHandle::new(mode),
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            session_allow: Mutex::new(Vec::new()),
            prompt: None,
        }
    }

    /// The mode now.
    #[must_use]
    pub fn mode(&self) -> PermissionMode {
        self.mode.get()
    }

    /// The shared mode: setting it switches this policy's mode (ExitPlanMode).
    #[must_use]
    pub fn mode_handle(&self) -> ModeHandle {
        self.mode.clone()
    }

    /// A policy from rule strings (settings files, `--allowedTools`, `--disallowedTools`).
    pub fn from_rules<S: AsRef<str>>(
        mode: PermissionMode,
        allow: &[S],
        ask: &[S],
        deny: &[S],
    ) -> Result<Self, RuleError> {
        let parse = |list: &[S]| -> Result<Vec<PermissionRule>, RuleError> {
            list.iter().map(|s| s.as_ref().parse()).collect()
        };
        Ok(Self {
            allow: parse(allow)?,
            ask: parse(ask)?,
            deny: parse(deny)?,
            ..Self::new(mode)
        })
    }

    #[must_use]
    pub fn with_allow(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.allow.extend(rules);
        self
    }

    #[must_use]
    pub fn with_ask(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.ask.extend(rules);
        self
    }

    #[must_use]
    pub fn with_deny(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.deny.extend(rules);
        self
    }

    /// Makes the policy interactive: "ask" asks `prompt` instead of denying.
    #[must_use]
    pub fn with_prompt(mut self, prompt: Arc<dyn PermissionPrompt>) -> Self {
        self.prompt = Some(prompt);
        self
    }

    #[must_use]
    pub fn allow_rules(&self) -> &[PermissionRule] {
        &self.allow
    }

    #[must_use]
    pub fn deny_rules(&self) -> &[PermissionRule] {
        &self.deny
    }

    #[must_use]
    pub fn ask_rules(&self) -> &[PermissionRule] {
        &self.ask
    }

    /// Rules remembered from "allow always" answers.
    #[must_use]
    pub fn session_rules(&self) -> Vec<PermissionRule> {
        self.session_allow
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The decision without asking anyone: `Ask` means a question would be needed.
    #[must_use]
    pub fn evaluate(
        &self,
        tool: &dyn Tool,
        call: &ToolCall,
        ctx: &ToolContext,
    ) -> PermissionDecision {
        let name = tool.name();
        let input = &call.input;
        let path = tool
            .path_field()
            .map(|field| ctx.resolve(input.get(field).and_then(Value::as_str).unwrap_or(".")));
        let target = Target {
            name,
            input,
            path: path.as_deref(),
            ctx,
        };

        if let Some(rule) = self.deny.iter().find(|r| target.matches(r, RuleKind::Deny)) {
            return PermissionDecision::Deny {
                reason: format!(
                    "Permission to use {name} has been denied by the deny rule `{rule}`."
                ),
            };
        }
        if let Some(rule) = self.ask.iter().find(|r| target.matches(r, RuleKind::Ask)) {
            return PermissionDecision::Ask {
                reason: format!("the ask rule `{rule}` requires confirmation"),
            };
        }
        let own = tool.check_permissions(input, ctx);
        if let PermissionDecision::Deny { .. } = own {
            return own;
        }
        let session = self.session_rules();
        let allow: Vec<&PermissionRule> = self.allow.iter().chain(session.iter()).collect();
        if target.allowed_by(&allow) {
            return PermissionDecision::Allow;
        }
        let mode = self.mode.get();
        if mode == PermissionMode::BypassPermissions {
            return PermissionDecision::Allow;
        }
        if let Some(path) = &path
            && !ctx.is_inside_working_dirs(path)
        {
            return PermissionDecision::Ask {
                reason: format!(
                    "{} is outside the working directories ({})",
                    path.display(),
                    ctx.working_dirs
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
        }
        match mode {
            PermissionMode::Plan => {
                return if tool.is_read_only(input) {
                    PermissionDecision::Allow
                } else {
                    PermissionDecision::Ask {
                        reason: "plan mode allows only read-only tools".to_owned(),
                    }
                };
            }
            PermissionMode::AcceptEdits if path.is_some() => return PermissionDecision::Allow,
            PermissionMode::AcceptEdits
            | PermissionMode::Default
            | PermissionMode::BypassPermissions => {}
        }
        match own {
            PermissionDecision::Allow => PermissionDecision::Allow,
            PermissionDecision::Ask { reason } | PermissionDecision::Deny { reason } => {
                PermissionDecision::Ask {
                    reason: self.needs_reason(name, &reason, input, path.as_deref()),
                }
            }
        }
    }

    fn needs_reason(&self, name: &str, own: &str, input: &Value, path: Option<&Path>) -> String {
        match (name, path) {
            ("Bash", _) => format!(
                "running `{}` needs permission",
                input.get("command").and_then(Value::as_str).unwrap_or("")
            ),
            (_, Some(path)) => format!("changing {} needs permission", path.display()),
            _ => own.to_owned(),
        }
    }

    /// The message of a headless denial: what was refused and how to allow it.
    fn headless_denial(
        &self,
        tool: &dyn Tool,
        call: &ToolCall,
        ctx: &ToolContext,
        reason: &str,
    ) -> String {
        let name = tool.name();
        let path = tool
            .path_field()
            .map(|field| ctx.resolve(call.input.get(field).and_then(Value::as_str).unwrap_or(".")));
        let how = match &path {
            Some(p) if !ctx.is_inside_working_dirs(p) => {
                let dir = if tool.is_read_only(&call.input) && p.is_dir() {
                    p.clone()
                } else {
                    p.parent().map_or_else(|| p.clone(), Path::to_path_buf)
                };
                format!(
                    "run with --add-dir {} or --allowedTools \"{name}({}/**)\"",
                    dir.display(),
                    dir.display()
                )
            }
            Some(_) if !tool.is_read_only(&call.input) => {
                format!("run with --allowedTools \"{name}\" or --permission-mode acceptEdits")
            }
            _ => format!(
                "run with --allowedTools \"{}\"",
                suggested_rule(name, &call.input)
            ),
        };
        format!(
            "Permission to use {name} was denied: {reason}. To allow it, {how} (or add the rule to permissions.allow in .gyre/settings.json)."
        )
    }
}

impl CanUseTool for Permissions {
    fn can_use_tool<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision> {
        Box::pin(async move {
            let reason = match self.evaluate(tool, call, ctx) {
                PermissionDecision::Ask { reason } => reason,
                decided @ (PermissionDecision::Allow | PermissionDecision::Deny { .. }) => {
                    return decided;
                }
            };
            let Some(prompt) = &self.prompt else {
                return PermissionDecision::Deny {
                    reason: self.headless_denial(tool, call, ctx, &reason),
                };
            };
            match prompt.ask(tool, call, &reason).await {
                PromptAnswer::AllowOnce => PermissionDecision::Allow,
                PromptAnswer::AllowAlways => {
                    self.session_allow
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(remembered_rule(tool, call, ctx));
                    PermissionDecision::Allow
                }
                PromptAnswer::Deny => PermissionDecision::Deny {
                    reason: format!(
                        "The user denied permission to use {}. Do not retry it; ask the user how to proceed.",
                        tool.name()
                    ),
                },
            }
        })
    }
}

/// What "allow always" remembers: the exact command for Bash, the file's directory for
/// path tools, the whole tool otherwise.
fn remembered_rule(tool: &dyn Tool, call: &ToolCall, ctx: &ToolContext) -> PermissionRule {
    let name = tool.name();
    if name == "Bash"
        && let Some(command) = call.input.get("command").and_then(Value::as_str)
    {
        return PermissionRule::with_specifier(name, command.trim());
    }
    if let Some(field) = tool.path_field() {
        let path = ctx.resolve(call.input.get(field).and_then(Value::as_str).unwrap_or("."));
        let dir = if path.is_dir() {
            path
        } else {
            path.parent().map_or(path.clone(), Path::to_path_buf)
        };
        let dir = dir.display().to_string();
        // `//abs` is how rules spell an absolute path unambiguously.
        return PermissionRule::with_specifier(name, format!("/{dir}/**"));
    }
    PermissionRule::tool(name)
}

/// The rule to suggest for a refused call: `Bash(git diff:*)` for `git diff HEAD`.
fn suggested_rule(name: &str, input: &Value) -> String {
    if name != "Bash" {
        return name.to_owned();
    }
    let command = input.get("command").and_then(Value::as_str).unwrap_or("");
    let first = split_permissive(command)
        .into_iter()
        .next()
        .unwrap_or_default();
    let words: Vec<&str> = first.split_whitespace().take(2).collect();
    match words.as_slice() {
        [] => "Bash".to_owned(),
        [one] => format!("Bash({one}:*)"),
        [cmd, sub, ..]
            if sub
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !sub.starts_with('-') =>
        {
            format!("Bash({cmd} {sub}:*)")
        }
        [cmd, ..] => format!("Bash({cmd}:*)"),
    }
}

/// Tools whose specifiers are path patterns.
fn is_path_rule_tool(tool: &str) -> bool {
    matches!(tool, "Read" | "Edit" | "Write" | "Grep" | "Glob")
}

/// Whether a rule written for `rule_tool` covers a call of `tool`: `Read(…)` path rules
/// cover every reading tool, `Edit(…)` every editing tool (as in Claude Code).
fn rule_covers(rule_tool: &str, tool: &str, has_specifier: bool) -> bool {
    if rule_tool == tool {
        return true;
    }
    has_specifier
        && match rule_tool {
            "Read" => matches!(tool, "Grep" | "Glob"),
            "Edit" => tool == "Write",
            _ => false,
        }
}

/// The call being judged.
struct Target<'a> {
    name: &'a str,
    input: &'a Value,
    path: Option<&'a Path>,
    ctx: &'a ToolContext,
}

impl Target<'_> {
    /// Whether the allow rules cover the call. A compound Bash command is covered when
    /// each of its parts is covered by some rule.
    fn allowed_by(&self, rules: &[&PermissionRule]) -> bool {
        if self.name != "Bash" {
            return rules.iter().any(|r| self.matches(r, RuleKind::Allow));
        }
        let bash_rules: Vec<&PermissionRule> =
            rules.iter().copied().filter(|r| r.tool == "Bash").collect();
        if bash_rules.iter().any(|r| r.specifier.is_none()) {
            return true;
        }
        let command = self
            .input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("");
        if bash_rules.iter().any(|r| {
            r.specifier
                .as_deref()
                .is_some_and(|s| s.trim() == command.trim())
        }) {
            return true;
        }
        match split_strict(command) {
            Some(parts) if !parts.is_empty() => parts.iter().all(|part| {
                !has_unsafe_redirection(part)
                    && bash_rules.iter().any(|r| {
                        r.specifier
                            .as_deref()
                            .is_some_and(|s| spec_matches(s.trim(), part))
                    })
            }),
            _ => false,
        }
    }

    fn matches(&self, rule: &PermissionRule, kind: RuleKind) -> bool {
        if !rule_covers(&rule.tool, self.name, rule.specifier.is_some()) {
            return false;
        }
        let Some(spec) = &rule.specifier else {
            return true;
        };
        if self.name == "Bash" {
            let command = self
                .input
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("");
            return bash_rule_matches(spec, command, kind);
        }
        if let Some(domain) = spec.strip_prefix("domain:") {
            return crate::domain::domain_rule_matches(domain, self.input);
        }
        match self.path {
            Some(path) => path_rule_matches(spec, path, self.ctx),
            None => false,
        }
    }
}

impl Permissions {
    /// The paths the deny rules forbid reading (`Read(…)` rules with a path), as a
    /// filter for Grep and Glob walks in a session whose cwd is `ctx.cwd`; `None` when
    /// no such rule exists.
    #[must_use]
    pub fn read_deny_filter(&self, ctx: &ToolContext) -> Option<PathFilter> {
        let matchers: Vec<globset::GlobMatcher> = self
            .deny
            .iter()
            .filter(|r| r.tool == "Read")
            .filter_map(|r| r.specifier.as_deref())
            .filter_map(|spec| path_rule_matcher(spec, ctx))
            .collect();
        (!matchers.is_empty()).then(|| {
            PathFilter::new(move |path: &Path| {
                matchers
                    .iter()
                    .any(|m| m.is_match(path) || m.is_match(path.join("x")))
            })
        })
    }
}

/// Whether a path pattern covers `path` (resolved). `/x` and `//x` are absolute, `~/x`
/// is in the home directory, anything else is relative to the cwd; a pattern without a
/// slash (`*.env`) matches file names at any depth.
fn path_rule_matches(spec: &str, path: &Path, ctx: &ToolContext) -> bool {
    let Some(matcher) = path_rule_matcher(spec, ctx) else {
        return false;
    };
    // A directory (Grep or Glob over it) matches `dir/**` too.
    matcher.is_match(path) || matcher.is_match(path.join("x"))
}

/// The compiled glob of a path pattern, anchored as [`path_rule_matches`] says.
fn path_rule_matcher(spec: &str, ctx: &ToolContext) -> Option<globset::GlobMatcher> {
    let pattern = if !spec.contains('/') {
        format!("**/{spec}")
    } else {
        let (literal, rest) = split_literal(spec);
        let base = if literal.is_empty() {
            ctx.resolve(".")
        } else {
            let literal = literal
                .strip_prefix("//")
                .map_or(literal.clone(), |l| format!("/{l}"));
            ctx.resolve(&literal)
        };
        let base = base.display().to_string();
        if rest.is_empty() {
            base
        } else {
            format!("{}/{rest}", base.trim_end_matches('/'))
        }
    };
    let glob = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .build()
        .ok()?;
    Some(glob.compile_matcher())
}

/// `src/**/*.rs` → (`src`, `**/*.rs`): the leading components free of glob characters.
fn split_literal(spec: &str) -> (String, String) {
    let mut literal: Vec<&str> = Vec::new();
    let parts: Vec<&str> = spec.split('/').collect();
    let mut i = 0;
    while i < parts.len() && !parts[i].contains(['*', '?', '[', '{']) {
        literal.push(parts[i]);
        i += 1;
    }
    let mut literal = literal.join("/");
    if literal.is_empty() && spec.starts_with('/') {
        literal.push('/');
    }
    (literal, parts[i..].join("/"))
}

/// Whether a Bash specifier covers `command`. `cmd:*` is a prefix at a word boundary,
/// `*` elsewhere a wildcard, anything else the exact command. An allow rule must cover
/// every part of a compound command (`a && b; c | d`) and never covers command
/// substitution or an output redirection; deny and ask rules need only one part.
fn bash_rule_matches(spec: &str, command: &str, kind: RuleKind) -> bool {
    let spec = spec.trim();
    if command.trim() == spec {
        return true;
    }
    match kind {
        RuleKind::Allow => match split_strict(command) {
            Some(parts) if !parts.is_empty() => parts
                .iter()
                .all(|part| !has_unsafe_redirection(part) && spec_matches(spec, part)),
            _ => false,
        },
        RuleKind::Ask | RuleKind::Deny => split_permissive(command)
            .iter()
            .any(|part| spec_matches(spec, strip_env_assignments(part))),
    }
}

fn spec_matches(spec: &str, part: &str) -> bool {
    let part = part.trim();
    if let Some(prefix) = spec.strip_suffix(":*") {
        let prefix = prefix.trim();
        return part == prefix
            || part
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with([' ', '\t']));
    }
    if spec.contains('*') {
        return wildcard_match(spec, part);
    }
    part == spec
}

/// `*` matches any run of characters.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let pieces: Vec<&str> = pattern.split('*').collect();
    let mut rest = text;
    for (i, piece) in pieces.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(piece) else {
                return false;
            };
            rest = r;
        } else if i == pieces.len() - 1 {
            return rest.ends_with(piece);
        } else {
            let Some(pos) = rest.find(piece) else {
                return false;
            };
            rest = &rest[pos + piece.len()..];
        }
    }
    rest.is_empty()
}

fn strip_env_assignments(part: &str) -> &str {
    let mut rest = part.trim_start();
    loop {
        let Some((word, tail)) = rest.split_once(char::is_whitespace) else {
            return rest;
        };
        let is_assignment = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if !is_assignment {
            return rest;
        }
        rest = tail.trim_start();
    }
}

/// Splits a command on `;`, `&&`, `||`, `|`, `&` and newlines outside quotes. `None`
/// when the command holds what a prefix cannot vouch for: `$(…)`, backticks, `<(…)`,
/// unbalanced quotes.
fn split_strict(command: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut chars = command.chars().peekable();
    let (mut single, mut double) = (false, false);
    while let Some(c) = chars.next() {
        if single {
            current.push(c);
            if c == '\'' {
                single = false;
            }
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                if let Some(n) = chars.next() {
                    current.push(n);
                }
            }
            '\'' if !double => {
                single = true;
                current.push(c);
            }
            '"' => {
                double = !double;
                current.push(c);
            }
            '`' => return None,
            '$' if chars.peek() == Some(&'(') => return None,
            '<' | '>' if chars.peek() == Some(&'(') && !double => return None,
            ';' | '\n' | '&' | '|' if !double => {
                // `2>&1` and `>&2` are redirections, not separators.
                if c == '&' && (current.ends_with('>') || chars.peek() == Some(&'>')) {
                    current.push(c);
                    continue;
                }
                if matches!(chars.peek(), Some('&' | '|')) && c != ';' && c != '\n' {
                    chars.next();
                }
                if !current.trim().is_empty() {
                    parts.push(current.trim().to_owned());
                }
                current.clear();
            }
            _ => current.push(c),
        }
    }
    if single || double {
        return None;
    }
    if !current.trim().is_empty() {
        parts.push(current.trim().to_owned());
    }
    Some(parts)
}

/// Splits on every separator and substitution boundary, quotes or not: for deny and ask
/// rules, where finding a part too many is the safe mistake.
fn split_permissive(command: &str) -> Vec<String> {
    command
        .split([';', '\n', '&', '|', '`', '(', ')'])
        .map(|p| p.trim().trim_start_matches('$').trim())
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An unquoted `>` or `<` other than `2>&1`, `>&2` or to `/dev/null`.
fn has_unsafe_redirection(part: &str) -> bool {
    let cleaned = part
        .replace("2>&1", "")
        .replace("1>&2", "")
        .replace(">&2", "")
        .replace("2>/dev/null", "")
        .replace(">/dev/null", "")
        .replace("> /dev/null", "");
    let (mut single, mut double) = (false, false);
    for c in cleaned.chars() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '>' | '<' if !single && !double => return true,
            _ => {}
        }
    }
    false
}

/// Whether a shell command only reads: every part starts with a known read-only
/// command and nothing is redirected into a file.
#[must_use]
pub fn is_read_only_command(command: &str) -> bool {
    const READ_ONLY: &[&str] = &[
        "ls", "cat", "head", "tail", "wc", "grep", "rg", "pwd", "echo", "which", "file", "stat",
        "du", "df", "tree", "sort", "uniq", "cut", "date", "uname", "whoami", "true", "false",
        "printenv", "basename", "dirname", "realpath", "readlink", "diff", "cmp", "less", "more",
        "type", "id", "hostname", "nl", "tr", "column",
    ];
    const GIT_READ_ONLY: &[&str] = &[
        "status",
        "diff",
        "log",
        "show",
        "blame",
        "rev-parse",
        "ls-files",
        "grep",
        "describe",
        "shortlog",
        "cat-file",
        "ls-tree",
        "reflog",
    ];
    let Some(parts) = split_strict(command) else {
        return false;
    };
    !parts.is_empty()
        && parts.iter().all(|part| {
            if has_unsafe_redirection(part) {
                return false;
            }
            let words: Vec<&str> = part.split_whitespace().collect();
            match words.as_slice() {
                ["git", sub, ..] => GIT_READ_ONLY.contains(sub),
                ["find", rest @ ..] => !rest.iter().any(|w| {
                    matches!(
                        *w,
                        "-exec"
                            | "-execdir"
                            | "-delete"
                            | "-ok"
                            | "-okdir"
                            | "-fprint"
                            | "-fprintf"
                            | "-fls"
                    )
                }),
                [cmd, ..] => READ_ONLY.contains(cmd),
                [] => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_strict_handles_operators_and_quotes() {
        assert_eq!(
            split_strict("git diff; rm -rf /").unwrap(),
            vec!["git diff", "rm -rf /"]
        );
        assert_eq!(
            split_strict("a && b || c | d & e").unwrap(),
            vec!["a", "b", "c", "d", "e"]
        );
        assert_eq!(
            split_strict("echo 'a; b' \"c && d\"").unwrap(),
            vec!["echo 'a; b' \"c && d\""]
        );
        assert_eq!(split_strict("make 2>&1").unwrap(), vec!["make 2>&1"]);
        assert!(split_strict("echo $(rm -rf /)").is_none());
        assert!(split_strict("echo `rm`").is_none());
        assert!(split_strict("echo 'open").is_none());
    }

    #[test]
    fn wildcards_match_anywhere() {
        assert!(wildcard_match("npm run *", "npm run test"));
        assert!(wildcard_match("git * --stat", "git diff --stat"));
        assert!(!wildcard_match("git * --stat", "git diff"));
    }

    #[test]
    fn read_only_commands_are_recognised() {
        assert!(is_read_only_command("ls -la && git status"));
        assert!(is_read_only_command("grep foo src | wc -l"));
        assert!(!is_read_only_command("echo hi > file"));
        assert!(!is_read_only_command("find . -delete"));
        assert!(!is_read_only_command("git push"));
        assert!(!is_read_only_command("ls; rm x"));
    }

    #[test]
    fn suggestion_uses_command_and_subcommand() {
        assert_eq!(
            suggested_rule("Bash", &serde_json::json!({"command": "git diff HEAD~1"})),
            "Bash(git diff:*)"
        );
        assert_eq!(
            suggested_rule("Bash", &serde_json::json!({"command": "ls -la"})),
            "Bash(ls:*)"
        );
    }
}
