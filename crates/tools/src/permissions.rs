//! The permission policy: modes and allow / ask / deny rules.
//!
//! Evaluation order: deny rules → ask rules → the tool's own hard denials →
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

use crate::bash_rules;
use crate::mode::{ModeHandle, PermissionMode};
use crate::{BoxFuture, CanUseTool, PathFilter, PermissionDecision, Tool, ToolCall, ToolContext};

/// Reads the names `--permission-mode` and settings files use.
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
    /// A rule with nothing in it.
    #[error("empty permission rule")]
    Empty,
    /// Text that is not `Tool` or `Tool(specifier)`.
    #[error(
        "permission rule `{0}`: a rule is a tool name, optionally followed by a specifier in parentheses, e.g. `Bash(git diff:*)`"
    )]
    Malformed(String),
    /// `Tool()`: an empty specifier (the rule and the tool name, for the message).
    #[error(
        "permission rule `{0}`: the specifier in parentheses is empty; write `{1}` to name the whole tool"
    )]
    EmptySpecifier(String, String),
    /// A path specifier that is not a valid glob.
    #[error("permission rule `{rule}`: invalid path pattern: {message}")]
    InvalidPattern {
        /// The rule as written.
        rule: String,
        /// What is wrong.
        message: String,
    },
    /// A mode name that is not one of the four.
    #[error(
        "unknown permission mode `{0}`: expected default, acceptEdits, plan or bypassPermissions"
    )]
    UnknownMode(String),
}

/// `Tool` or `Tool(specifier)`: `Bash`, `Bash(git diff:*)`, `Read(src/**)`,
/// `Edit(/abs/path/**)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PermissionRule {
    /// The tool the rule names (`Bash`, `mcp__server__tool`).
    pub tool: String,
    /// What in the call the rule matches (`git diff:*`, `src/**`); `None` matches every call.
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

    /// A rule naming the calls of `tool` that `specifier` matches.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptAnswer {
    /// Allow this call only.
    AllowOnce,
    /// Allow, and allow the same again for the rest of the session.
    AllowAlways,
    /// Refuse the call.
    Deny,
    /// No, and what to do instead: the words go to the model in the tool result (the
    /// REPL's "No, keep planning" for ExitPlanMode).
    DenyWithFeedback(String),
}

/// Asks the user (the REPL plugs one in; headless runs have none).
pub trait PermissionPrompt: Send + Sync {
    /// Asks whether `call` of `tool` may run; `reason` says why the policy asks, and
    /// `always` is the rule an "always" answer allows ([`always_rule`]): the question
    /// shows it, and a prompt that saves the answer saves that rule.
    fn ask<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        reason: &'a str,
        always: &'a PermissionRule,
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
    /// "Allow always" answers; shared by the policies a session rebuilds
    /// ([`Permissions::keeping_answers_of`]).
    session_allow: Arc<Mutex<Vec<PermissionRule>>>,
    prompt: Option<Arc<dyn PermissionPrompt>>,
    /// The `Read(…)` deny rules compiled for one cwd, built at the first check after
    /// the rules change (a new policy, [`Permissions::with_deny`]).
    read_deny: Mutex<Option<ReadDenyMatchers>>,
}

/// The `Read(…)` deny rules with their compiled patterns, for the cwd they were
/// anchored at.
#[derive(Clone)]
struct ReadDenyMatchers {
    cwd: std::path::PathBuf,
    rules: Arc<[(PermissionRule, globset::GlobMatcher)]>,
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
        session_start();
        Self {
            mode: ModeHandle::new(mode),
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            session_allow: Arc::default(),
            prompt: None,
            read_deny: Mutex::new(None),
        }
    }

    /// The mode now.
    #[must_use]
    pub fn mode(&self) -> PermissionMode {
        self.mode.get()
    }

    /// This policy with its mode held in `handle` (set to the policy's mode now), so a
    /// switch through any clone of the handle reaches it: a session that rebuilds its
    /// policy keeps one handle for ExitPlanMode and the UI.
    #[must_use]
    pub fn with_mode_handle(mut self, handle: ModeHandle) -> Self {
        handle.set(self.mode.get());
        self.mode = handle;
        self
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

    /// Adds allow rules.
    #[must_use]
    pub fn with_allow(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.allow.extend(rules);
        self
    }

    /// Adds ask rules.
    #[must_use]
    pub fn with_ask(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.ask.extend(rules);
        self
    }

    /// Adds deny rules.
    #[must_use]
    pub fn with_deny(mut self, rules: impl IntoIterator<Item = PermissionRule>) -> Self {
        self.deny.extend(rules);
        self.read_deny = Mutex::new(None);
        self
    }

    /// Makes the policy interactive: "ask" asks `prompt` instead of denying.
    #[must_use]
    pub fn with_prompt(mut self, prompt: Arc<dyn PermissionPrompt>) -> Self {
        self.prompt = Some(prompt);
        self
    }

    /// The allow rules, in the order given.
    #[must_use]
    pub fn allow_rules(&self) -> &[PermissionRule] {
        &self.allow
    }

    /// The deny rules, in the order given.
    #[must_use]
    pub fn deny_rules(&self) -> &[PermissionRule] {
        &self.deny
    }

    /// The ask rules, in the order given.
    #[must_use]
    pub fn ask_rules(&self) -> &[PermissionRule] {
        &self.ask
    }

    /// This policy sharing `earlier`'s "allow always" answers: a session that rebuilds
    /// its policy (a mode change, rules added mid-session) keeps what the user answered,
    /// and an answer given to either reaches both.
    #[must_use]
    pub fn keeping_answers_of(mut self, earlier: &Self) -> Self {
        self.session_allow = Arc::clone(&earlier.session_allow);
        self
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
        let name = name.as_ref();
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
        if name == "Bash"
            && let Some(decision) = self.bash_reads_denied(target.command(), ctx)
        {
            return decision;
        }
        if let Some(rule) = self.ask.iter().find(|r| target.matches(r, RuleKind::Ask)) {
            return PermissionDecision::Ask {
                reason: format!("the ask rule `{rule}` requires confirmation"),
            };
        }
        if name == "Bash"
            && let Some(decision) = self.bash_unseen_by_rules(target.command(), ctx)
        {
            return decision;
        }
        let own = tool.check_permissions(input, ctx);
        if let PermissionDecision::Deny { .. } = own {
            return own;
        }
        // Before allow rules and the mode: a rule or acceptEdits written by a model must
        // not let it rewrite the settings that decide its next session.
        if self.mode.get() != PermissionMode::BypassPermissions
            && !tool.is_read_only(input)
            && let Some(reason) = path.as_deref().and_then(|p| ctx.protected_reason(p))
        {
            return PermissionDecision::Ask { reason };
        }
        // No allow rule or mode runs a command as if confined on a kernel that cannot
        // confine it: the user decides.
        if name == "Bash" && ctx.sandbox_unenforceable_now() {
            return PermissionDecision::Ask {
                reason: crate::sandbox::unenforceable_reason().to_owned(),
            };
        }
        let session = self.session_rules();
        let allow: Vec<&PermissionRule> = self.allow.iter().chain(session.iter()).collect();
        if name == "WebFetch"
            && self.mode.get() != PermissionMode::BypassPermissions
            && let Some(reason) = local_fetch_reason(input, &allow)
        {
            return PermissionDecision::Ask { reason };
        }
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
                if !tool.is_read_only(input) {
                    return PermissionDecision::Ask {
                        reason: "plan mode allows only read-only tools".to_owned(),
                    };
                }
                // `readOnlyHint` is what the server says of its tool, not what it does.
                if name.starts_with("mcp__") {
                    return PermissionDecision::Ask {
                        reason: format!(
                            "plan mode asks before MCP tools: that {name} only reads is its server's claim"
                        ),
                    };
                }
                if name == "Bash" {
                    return self.plan_mode_bash(target.command(), ctx);
                }
                return PermissionDecision::Allow;
            }
            PermissionMode::AcceptEdits if path.is_some() => return PermissionDecision::Allow,
            PermissionMode::AcceptEdits
                if name == "Bash" && self.accepts_file_command(target.command(), ctx) =>
            {
                return PermissionDecision::Allow;
            }
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

    /// Under `Bash(…)` deny or ask rules, a command whose code those rules cannot read —
    /// an interpreter's script, a Makefile or package script, a program given as a path
    /// or written during the session (`cp /bin/rm ./x` in one call, `./x` in the next)
    /// — asks, whatever allow rule or mode would run it; plan mode excepted, whose
    /// commands the kernel holds read-only (or asks about where it cannot), and a rule
    /// naming exactly this command line (the user's "always" answer).
    fn bash_unseen_by_rules(&self, command: &str, ctx: &ToolContext) -> Option<PermissionDecision> {
        let ruled = self
            .deny
            .iter()
            .chain(&self.ask)
            .filter(|r| r.tool == "Bash" && r.specifier.is_some())
            .map(ToString::to_string)
            .collect::<Vec<_>>();
        if ruled.is_empty() || self.mode.get() == PermissionMode::Plan {
            return None;
        }
        // The user's own decision about this very command line (an "always" answer, an
        // exact rule) stands, as a "yes" would.
        let named_exactly = self
            .allow
            .iter()
            .chain(self.session_rules().iter())
            .any(|r| {
                r.tool == "Bash" && r.specifier.as_deref().map(str::trim) == Some(command.trim())
            });
        if named_exactly {
            return None;
        }
        let since = session_start();
        let written = |word: &str| crate::program_age::program_written_since(word, ctx, since);
        if bash_rules::runs_unseen_code(command, &written) {
            return Some(PermissionDecision::Ask {
                reason: format!(
                    "`{command}` runs code the rules {} cannot read (an interpreter's script, a build or package script, a program given as a path or changed during this session), so it needs permission",
                    ruled.join(", ")
                ),
            });
        }
        // Nor code planted for later: gyre's settings and hooks, git's config and
        // hooks, rc files, which a later session or git command runs unchecked.
        let Some(targets) = bash_rules::written_candidates(command) else {
            return Some(PermissionDecision::Ask {
                reason: format!(
                    "`{command}` writes to a file named by a variable, which the rules {} cannot check against protected paths",
                    ruled.join(", ")
                ),
            });
        };
        targets.iter().find_map(|word| {
            let path = ctx.resolve(word);
            ctx.protected_reason(&path).map(|why| PermissionDecision::Ask {
                reason: format!(
                    "`{command}` may write {}, and {why}: under the rules {} that is code they would not see run",
                    path.display(),
                    ruled.join(", ")
                ),
            })
        })
    }

    /// acceptEdits runs `mkdir`, `touch`, `rm`, `rmdir`, `mv`, `cp` and a contained `sed`
    /// as it runs Edit: when every path they name is inside the working directories, not
    /// protected, and under no Edit or Write deny or ask rule.
    fn accepts_file_command(&self, command: &str, ctx: &ToolContext) -> bool {
        let Some(paths) = crate::accept_edits::file_command_paths(command) else {
            return false;
        };
        paths.iter().all(|arg| {
            let path = ctx.resolve(arg);
            let ruled = self.deny.iter().chain(&self.ask).any(|r| {
                matches!(r.tool.as_str(), "Edit" | "Write")
                    && r.specifier
                        .as_deref()
                        .is_some_and(|s| path_rule_matches(s, &path, ctx))
            });
            ctx.is_inside_working_dirs(&path) && ctx.protected_reason(&path).is_none() && !ruled
        })
    }

    /// A command the classifier calls read-only still runs in plan mode only inside the
    /// read-only sandbox, and only when it names no path outside the working
    /// directories or under a `Read(…)` deny rule.
    fn plan_mode_bash(&self, command: &str, ctx: &ToolContext) -> PermissionDecision {
        let policy = ctx.sandbox_now();
        if policy.is_none() || crate::sandbox::unenforceable(policy.as_ref()) {
            return PermissionDecision::Ask {
                reason: "plan mode runs Bash without asking only inside the Landlock sandbox, which is not available".to_owned(),
            };
        }
        for arg in bash_rules::path_arguments(command) {
            let path = ctx.resolve(&arg);
            if !ctx.is_inside_working_dirs(&path) {
                return PermissionDecision::Ask {
                    reason: format!(
                        "`{command}` reads {}, outside the working directories",
                        path.display()
                    ),
                };
            }
            if let Some(rule) = self.read_denied_by(&path, ctx) {
                return PermissionDecision::Ask {
                    reason: format!(
                        "`{command}` reads {}, which `{rule}` denies",
                        path.display()
                    ),
                };
            }
        }
        PermissionDecision::Allow
    }

    /// The `Read(…)` deny rules compiled for `ctx`'s cwd: built once per policy and cwd,
    /// so checking a command's files costs no glob compilation.
    fn read_deny_matchers(
        &self,
        ctx: &ToolContext,
    ) -> Arc<[(PermissionRule, globset::GlobMatcher)]> {
        let mut cache = self
            .read_deny
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(cached) = cache.as_ref()
            && cached.cwd == ctx.cwd
        {
            return Arc::clone(&cached.rules);
        }
        let rules: Arc<[(PermissionRule, globset::GlobMatcher)]> = self
            .deny
            .iter()
            .filter(|r| r.tool == "Read")
            .filter_map(|r| {
                let matcher = path_rule_matcher(r.specifier.as_deref()?, ctx)?;
                Some((r.clone(), matcher))
            })
            .collect();
        *cache = Some(ReadDenyMatchers {
            cwd: ctx.cwd.clone(),
            rules: Arc::clone(&rules),
        });
        rules
    }

    /// The `Read(…)` deny rule that covers `path` (resolved), if any.
    fn read_denied_by(&self, path: &Path, ctx: &ToolContext) -> Option<PermissionRule> {
        self.read_deny_matchers(ctx)
            .iter()
            .find(|(_, m)| m.is_match(path) || m.is_match(path.join("x")))
            .map(|(rule, _)| rule.clone())
    }

    /// A Bash command that names a file a `Read(…)` deny rule covers is refused, whatever
    /// rule allows the command (`cat secret/key` under `Bash(cat:*)`): every word that
    /// may be a file, `< file` inputs, and what a glob matches on disk now.
    fn bash_reads_denied(&self, command: &str, ctx: &ToolContext) -> Option<PermissionDecision> {
        if self.read_deny_matchers(ctx).is_empty() {
            return None;
        }
        let deny = |path: &Path, rule: PermissionRule| PermissionDecision::Deny {
            reason: format!(
                "Permission to use Bash has been denied: `{command}` names {}, which the deny rule `{rule}` covers.",
                path.display()
            ),
        };
        for arg in bash_rules::file_arguments(command) {
            let (bash_rules::FileArgument::Path(word) | bash_rules::FileArgument::Glob(word)) =
                &arg;
            // Unmatched, bash passes a glob on as it is.
            let path = ctx.resolve(word);
            if let Some(rule) = self.read_denied_by(&path, ctx) {
                return Some(deny(&path, rule));
            }
            if let bash_rules::FileArgument::Glob(pattern) = &arg {
                let Some(paths) = crate::paths::glob_now(&ctx.cwd, pattern) else {
                    return Some(PermissionDecision::Ask {
                        reason: format!(
                            "`{pattern}` matches too many files to check them against the Read deny rules"
                        ),
                    });
                };
                for path in paths {
                    let path = ctx.resolve(&path.to_string_lossy());
                    if let Some(rule) = self.read_denied_by(&path, ctx) {
                        return Some(deny(&path, rule));
                    }
                }
            }
        }
        None
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
        if let Some(p) = &path
            && !tool.is_read_only(&call.input)
            && ctx.protected_reason(p).is_some()
        {
            return format!(
                "Permission to use {name} was denied: {reason}. Protected paths always need the user's confirmation; no allow rule or mode but bypassPermissions lifts that. Ask the user to make this change."
            );
        }
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
            None if name == "Bash" => {
                return format!(
                    "Permission to use {name} was denied: {reason}. {}",
                    self.bash_hint(tool, call, ctx)
                );
            }
            // A local address needs a rule naming its host; any fetch is allowed by one.
            None if name == "WebFetch" => {
                match call
                    .input
                    .get("url")
                    .and_then(Value::as_str)
                    .and_then(crate::domain::url_host)
                {
                    Some(host) => format!("run with --allowedTools \"WebFetch(domain:{host})\""),
                    None => format!("run with --allowedTools \"{name}\""),
                }
            }
            _ => format!("run with --allowedTools \"{name}\""),
        };
        format!(
            "Permission to use {name} was denied: {reason}. To allow it, {how} (or add the rule to permissions.allow in .gyre/settings.json)."
        )
    }
}

impl Permissions {
    /// How to allow a refused Bash command, checked: the rules it still needs (one per
    /// simple command no allow rule covers yet), or, when no `Bash(…)` rule can allow
    /// it, that the user must approve it or allow every command — each only when this
    /// policy with the suggestion added would allow the call.
    fn bash_hint(&self, tool: &dyn Tool, call: &ToolCall, ctx: &ToolContext) -> String {
        let command = call
            .input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("");
        let session = self.session_rules();
        let existing: Vec<&str> = self
            .allow
            .iter()
            .chain(session.iter())
            .filter(|r| r.tool == "Bash")
            .filter_map(|r| r.specifier.as_deref())
            .collect();
        let why = match bash_rules::suggested_rules(&existing, command) {
            Ok(rules) if !rules.is_empty() => {
                let value = rules.join(" ");
                if self.allows_with(&value, tool, call, ctx) {
                    let these = if rules.len() == 1 {
                        "the rule"
                    } else {
                        "these rules"
                    };
                    let besides = if existing.is_empty() {
                        ""
                    } else {
                        " as well as the allow rules already given"
                    };
                    return format!(
                        "To allow it, run with --allowedTools {}{besides} (or add {these} to permissions.allow in .gyre/settings.json).",
                        shell_quote(&value)
                    );
                }
                None
            }
            Ok(_) => None,
            Err(why) => Some(why),
        };
        if self.allows_with("Bash", tool, call, ctx) {
            let why = why.map_or_else(String::new, |why| format!(" because {why}"));
            return format!(
                "No Bash(…) rule can allow this command{why}. It needs the user's approval: ask the user to run it or to approve it in an interactive session, or to allow every command with --allowedTools \"Bash\"."
            );
        }
        "No --allowedTools rule allows this command in this session: ask the user to run it or to approve it in an interactive session.".to_owned()
    }

    /// Whether this policy, with the rules of the `--allowedTools` value `list` added,
    /// would allow `call`.
    fn allows_with(&self, list: &str, tool: &dyn Tool, call: &ToolCall, ctx: &ToolContext) -> bool {
        let Ok(extra) = parse_rule_list(list) else {
            return false;
        };
        let policy = Self {
            allow: self
                .allow
                .iter()
                .cloned()
                .chain(self.session_rules())
                .chain(extra)
                .collect(),
            ask: self.ask.clone(),
            deny: self.deny.clone(),
            ..Self::new(self.mode.get())
        };
        matches!(policy.evaluate(tool, call, ctx), PermissionDecision::Allow)
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
            let always = always_rule(tool, call, ctx);
            match prompt.ask(tool, call, &reason, &always).await {
                PromptAnswer::AllowOnce => PermissionDecision::Allow,
                PromptAnswer::AllowAlways => {
                    self.session_allow
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(always);
                    PermissionDecision::Allow
                }
                PromptAnswer::Deny => PermissionDecision::Deny {
                    reason: format!(
                        "The user denied permission to use {}. Do not retry it; ask the user how to proceed.",
                        tool.name()
                    ),
                },
                PromptAnswer::DenyWithFeedback(feedback) => PermissionDecision::Deny {
                    reason: format!(
                        "The user doesn't want to proceed with this {} call: it was rejected. To tell you how to proceed, the user said:\n{feedback}",
                        tool.name()
                    ),
                },
            }
        })
    }
}

/// The rule an "always" answer to a question about `call` allows, never wider than the
/// question: the exact command for Bash; for a path tool, the working directory the path
/// is in (`Edit(//project/**)`), or the path's own directory when it is outside every
/// working directory; the whole tool otherwise. A bare `Edit` would allow edits
/// anywhere on disk.
#[must_use]
pub fn always_rule(tool: &dyn Tool, call: &ToolCall, ctx: &ToolContext) -> PermissionRule {
    let name = tool.name();
    if name == "Bash"
        && let Some(command) = call.input.get("command").and_then(Value::as_str)
    {
        return PermissionRule::with_specifier(name, command.trim());
    }
    if let Some(field) = tool.path_field() {
        let path = ctx.resolve(call.input.get(field).and_then(Value::as_str).unwrap_or("."));
        let inside = ctx
            .working_dirs
            .iter()
            .filter(|dir| crate::paths::is_inside_any(&path, std::slice::from_ref(*dir)))
            .max_by_key(|dir| dir.as_os_str().len());
        let dir = match inside {
            Some(dir) => dir.clone(),
            None if path.is_dir() => path,
            None => path.parent().map_or(path.clone(), Path::to_path_buf),
        };
        let dir = dir.display().to_string();
        // `//abs` is how rules spell an absolute path unambiguously.
        return PermissionRule::with_specifier(name, format!("/{}/**", dir.trim_end_matches('/')));
    }
    PermissionRule::tool(name)
}

/// `value` quoted for a POSIX shell, so that pasting the flag passes it unchanged:
/// in double quotes when nothing in it is special there, else in single quotes.
fn shell_quote(value: &str) -> String {
    if value.contains(['"', '$', '`', '\\', '!']) {
        format!("'{}'", value.replace('\'', "'\\''"))
    } else {
        format!("\"{value}\"")
    }
}

/// Why fetching the call's URL asks although a rule may allow it: it reaches this
/// machine or a private network, and no allow rule names that host itself
/// (`WebFetch(domain:localhost)`).
fn local_fetch_reason(input: &Value, allow: &[&PermissionRule]) -> Option<String> {
    let url = input.get("url").and_then(Value::as_str)?;
    if !crate::domain::is_local_url(url) {
        return None;
    }
    let named = allow.iter().any(|r| {
        r.tool == "WebFetch"
            && r.specifier
                .as_deref()
                .and_then(|s| s.strip_prefix("domain:"))
                .is_some_and(|d| crate::domain::domain_rule_matches(d, input))
    });
    (!named).then(|| {
        format!(
            "{url} reaches this machine or a private network, which needs permission unless a WebFetch(domain:…) rule names that host"
        )
    })
}

/// When the first policy of this process was made: a program file changed since then
/// may be one a tool call of the session wrote.
fn session_start() -> std::time::SystemTime {
    static START: std::sync::OnceLock<std::time::SystemTime> = std::sync::OnceLock::new();
    *START.get_or_init(std::time::SystemTime::now)
}

/// Tools whose specifiers are path patterns.
fn is_path_rule_tool(tool: &str) -> bool {
    matches!(tool, "Read" | "Edit" | "Write" | "Grep" | "Glob")
}

/// Whether a rule written for `rule_tool` covers a call of `tool`: `Read(…)` path rules
/// cover every reading tool, `Edit(…)` every editing tool, `mcp__server` every tool of
/// that MCP server (as in Claude Code).
fn rule_covers(rule_tool: &str, tool: &str, has_specifier: bool) -> bool {
    if rule_tool == tool || is_mcp_server_of(rule_tool, tool) {
        return true;
    }
    has_specifier
        && match rule_tool {
            "Read" => matches!(tool, "Grep" | "Glob"),
            "Edit" => tool == "Write",
            _ => false,
        }
}

/// `mcp__server` names a whole MCP server, whose tools are `mcp__server__<tool>`.
fn is_mcp_server_of(rule_tool: &str, tool: &str) -> bool {
    rule_tool.starts_with("mcp__")
        && !rule_tool["mcp__".len()..].contains("__")
        && tool
            .strip_prefix(rule_tool)
            .is_some_and(|rest| rest.starts_with("__"))
}

/// The call being judged.
struct Target<'a> {
    name: &'a str,
    input: &'a Value,
    path: Option<&'a Path>,
    ctx: &'a ToolContext,
}

impl Target<'_> {
    /// Whether the allow rules cover the call. A Bash command line is covered when it
    /// parses plainly and each of its simple commands is covered by some rule.
    fn allowed_by(&self, rules: &[&PermissionRule]) -> bool {
        if self.name != "Bash" {
            return rules.iter().any(|r| self.matches(r, RuleKind::Allow));
        }
        let bash_rules: Vec<&PermissionRule> =
            rules.iter().copied().filter(|r| r.tool == "Bash").collect();
        if bash_rules.iter().any(|r| r.specifier.is_none()) {
            return true;
        }
        let specs: Vec<&str> = bash_rules
            .iter()
            .filter_map(|r| r.specifier.as_deref())
            .collect();
        !specs.is_empty() && bash_rules::allowed(&specs, self.command())
    }

    fn command(&self) -> &str {
        self.input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    fn matches(&self, rule: &PermissionRule, kind: RuleKind) -> bool {
        if !rule_covers(&rule.tool, self.name, rule.specifier.is_some()) {
            return false;
        }
        let Some(spec) = &rule.specifier else {
            return true;
        };
        if self.name == "Bash" {
            return match kind {
                RuleKind::Allow => bash_rules::allowed(&[spec], self.command()),
                RuleKind::Ask | RuleKind::Deny => bash_rules::deny_matches(spec, self.command()),
            };
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
        let rules = self.read_deny_matchers(ctx);
        (!rules.is_empty()).then(|| {
            PathFilter::new(move |path: &Path| {
                rules
                    .iter()
                    .any(|(_, m)| m.is_match(path) || m.is_match(path.join("x")))
            })
        })
    }
}

impl Permissions {
    /// What the `Read(…)` deny rules name, for the sandbox to make unreadable: a literal
    /// path (or `dir/**`) as it is, a pattern searched under its literal prefix, and a
    /// pattern without a slash (`.env`, `*.pem`) under each working directory (the
    /// kernel cannot enforce "at any depth anywhere"; elsewhere only the string check
    /// holds).
    #[must_use]
    pub fn sandbox_read_denied(&self, ctx: &ToolContext) -> crate::sandbox::ReadDenied {
        use crate::sandbox::DeniedPath;
        let mut paths = Vec::new();
        for spec in self
            .deny
            .iter()
            .filter(|r| r.tool == "Read")
            .filter_map(|r| r.specifier.as_deref())
        {
            let Some(matcher) = path_rule_matcher(spec, ctx) else {
                continue;
            };
            let matches = PathFilter::new(move |path: &Path| {
                matcher.is_match(path) || matcher.is_match(path.join("x"))
            });
            if !spec.contains('/') {
                paths.extend(ctx.working_dirs.iter().map(|dir| DeniedPath::Matching {
                    root: dir.clone(),
                    matches: matches.clone(),
                }));
                continue;
            }
            let (literal, rest) = split_literal(spec);
            let root = if literal.is_empty() {
                ctx.resolve(".")
            } else {
                ctx.resolve(
                    &literal
                        .strip_prefix("//")
                        .map_or(literal.clone(), |l| format!("/{l}")),
                )
            };
            if rest.is_empty() || rest == "**" {
                paths.push(DeniedPath::Exact(root));
            } else {
                paths.push(DeniedPath::Matching { root, matches });
            }
        }
        crate::sandbox::ReadDenied { paths }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_flag_values_are_quoted_for_the_shell() {
        assert_eq!(
            shell_quote("Bash(ls:*) Bash(wc:*)"),
            "\"Bash(ls:*) Bash(wc:*)\""
        );
        assert_eq!(shell_quote("Bash(a$b:*)"), "'Bash(a$b:*)'");
        assert_eq!(shell_quote("Bash(it's!:*)"), "'Bash(it'\\''s!:*)'");
    }

    #[test]
    fn an_mcp_server_rule_covers_its_tools_only() {
        assert!(rule_covers("mcp__git", "mcp__git__status", false));
        assert!(rule_covers("mcp__git__status", "mcp__git__status", false));
        assert!(!rule_covers("mcp__git", "mcp__github__status", false));
        assert!(!rule_covers(
            "mcp__git__status",
            "mcp__git__status_all",
            false
        ));
        assert!(!rule_covers("mcp", "mcp__git__status", false));
    }
}
