//! The `Tool` trait and the values that flow through it.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gyre_protocol::ImageSource;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::file_state::FileStateCache;
use crate::paths::{PathChanged, PathFilter};

/// A boxed, sendable future: the return type of the async trait methods.
pub use futures::future::BoxFuture;

/// What a tool call returns: the text of its `tool_result`, any images (Read of a
/// picture), and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct ToolOutput {
    /// The text of the result the model reads.
    pub content: String,
    /// Whether the result is an error (`is_error` of the `tool_result`).
    pub is_error: bool,
    /// Sent after the text, as image parts of the `tool_result`.
    pub images: Vec<ImageSource>,
}

impl ToolOutput {
    /// A successful text result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    /// A failed result with this message.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            images: Vec::new(),
        }
    }

    /// A successful result that is one image.
    pub fn image(source: ImageSource) -> Self {
        Self {
            content: String::new(),
            is_error: false,
            images: vec![source],
        }
    }

    /// An input validation error: `<tool_use_error>…</tool_use_error>`.
    pub fn tool_use_error(message: impl std::fmt::Display) -> Self {
        Self::error(format!("<tool_use_error>{message}</tool_use_error>"))
    }
}

/// Why a tool refused its input before running ([`Tool::validate_input`]). The model
/// reads the message inside `<tool_use_error>…</tool_use_error>`, so it names the field
/// at fault and says what would be accepted.
///
/// Built from the message: `Err("plan must not be empty".into())`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolInputError {
    message: String,
}

impl ToolInputError {
    /// An error with this message for the model.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message the model reads.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<String> for ToolInputError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolInputError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

/// Progress reported by a running tool (shown by the UI, never sent to the model).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolProgress {
    /// New output of a running command (Bash), as text.
    Output {
        /// The new output.
        text: String,
    },
    /// A short status line ("searching 1200 files").
    Status {
        /// The status line.
        message: String,
    },
}

/// The progress callback handed to [`Tool::call`].
pub type ProgressFn = dyn Fn(ToolProgress) + Send + Sync;

/// Everything a tool may use besides its input.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The session's working directory: relative paths and Bash start here.
    pub cwd: PathBuf,
    /// Directories the tools may touch without a rule: the cwd plus `--add-dir`.
    pub working_dirs: Vec<PathBuf>,
    /// What was read, when: Edit and Write refuse files not read or changed since.
    pub file_state: Arc<FileStateCache>,
    /// Abort of the turn (Ctrl+C); tools stop as soon as they can.
    pub cancel: CancellationToken,
    /// Where Bash saves the full text of an output too long to return.
    pub output_dir: PathBuf,
    /// Paths that read deny rules name: Grep and Glob skip them while walking, so a
    /// search of a parent directory cannot read what `Read(secrets/**)` denies.
    pub hidden: Option<PathFilter>,
    /// The Landlock policy Bash runs under (plan mode, or `sandbox.enabled`); `None`
    /// runs commands unconfined. A session whose mode can change sets `sandbox_by_mode`
    /// instead; read it through [`ToolContext::sandbox_now`].
    pub sandbox: Option<crate::sandbox::SandboxPolicy>,
    /// The policy chosen at each call from the session's mode now, so a switch into or
    /// out of plan mode (ExitPlanMode, the SDK, Shift+Tab) changes what the kernel
    /// enforces for the next command.
    pub sandbox_by_mode: Option<crate::sandbox::SandboxByMode>,
    /// The id of the call being run, set by the runner (the Agent tool tags its
    /// sub-agent's messages with it).
    pub tool_use_id: Option<String>,
    /// Variables the commands tools start get on top of gyre's own environment (a
    /// session's settings `env`: gyre never sets them in its own process). gyre's
    /// secrets are removed after these, so no entry can bring them back.
    pub child_env: Arc<[(String, String)]>,
    /// How many concurrency-safe calls run at once; `None` is the executor's default.
    pub max_tool_concurrency: Option<usize>,
    /// What sandboxed commands may read besides the working dirs, and whether they may
    /// open Unix sockets.
    pub sandbox_access: crate::sandbox::SandboxAccess,
    /// Directories protected as a whole wherever they are (gyre's own home: its
    /// settings, trust file and folder rules), besides the names [`crate::protected`]
    /// protects everywhere.
    pub protected_roots: Arc<[PathBuf]>,
    /// The editor that holds the files, when gyre runs inside one (see
    /// [`crate::editor`]); `None` reads and writes the disk.
    pub editor_files: Option<Arc<dyn crate::editor::EditorFiles>>,
    /// The editor's terminals, where Bash runs unconfined commands when gyre runs inside
    /// an editor that offers them (see [`crate::editor`]); `None` runs them here.
    pub editor_terminals: Option<Arc<dyn crate::editor::EditorTerminals>>,
    /// Where Edit and Write keep a file's content before they change it (the session's
    /// checkpoints, see [`crate::file_history`]); `None` keeps nothing.
    pub file_history: Option<Arc<dyn crate::file_history::FileHistory>>,
    /// Where the running calls' progress goes (a front-end that shows it, as an ACP
    /// editor shows a command's output while it runs); `None` drops it.
    pub progress: Option<ProgressSink>,
}

/// Progress of a running call, with the call's `tool_use_id`.
pub type ExecutorProgressFn = dyn Fn(&str, ToolProgress) + Send + Sync;

/// Where a front-end that shows running calls (an ACP editor) takes their progress,
/// set on the [`ToolContext`] (the executor reports to it, see
/// [`crate::StreamingToolExecutor`]); with none set, progress goes nowhere.
#[derive(Clone)]
pub struct ProgressSink(pub Arc<ExecutorProgressFn>);

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// `path` made absolute against the current directory (lexically: symlinks are resolved
/// where paths are checked). Paths compared with a relative root would never match.
fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

impl ToolContext {
    /// A context for `cwd`: the cwd is the only working directory, a fresh file-state
    /// cache, a fresh cancellation token, long outputs saved under the system temp dir.
    /// A relative `cwd` is taken from the process's current directory.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = absolute(cwd.into());
        Self {
            working_dirs: vec![cwd.clone()],
            cwd,
            file_state: Arc::new(FileStateCache::new()),
            cancel: CancellationToken::new(),
            output_dir: std::env::temp_dir().join("gyre-tool-output"),
            hidden: None,
            sandbox: None,
            sandbox_by_mode: None,
            tool_use_id: None,
            child_env: Arc::from([]),
            max_tool_concurrency: None,
            sandbox_access: crate::sandbox::SandboxAccess::from_env(),
            protected_roots: Arc::from([]),
            editor_files: None,
            editor_terminals: None,
            file_history: None,
            progress: None,
        }
    }

    /// Protects everything under `dir` as [`ToolContext::protected_roots`] says (both
    /// as given and with its symlinks resolved, since tools check resolved paths).
    #[must_use]
    pub fn with_protected_root(mut self, dir: impl Into<PathBuf>) -> Self {
        let dir = absolute(dir.into());
        let mut roots: Vec<PathBuf> = self.protected_roots.iter().cloned().collect();
        if let Ok(real) = dir.canonicalize()
            && real != dir
        {
            roots.push(real);
        }
        roots.push(dir);
        self.protected_roots = roots.into();
        self
    }

    /// Why a change to `path` must always ask (see [`crate::protected`]), or `None`.
    #[must_use]
    pub fn protected_reason(&self, path: &Path) -> Option<String> {
        if let Some(root) = self.protected_roots.iter().find(|r| path.starts_with(r)) {
            return Some(format!(
                "{} is inside gyre's home {}, which holds its settings, trust and rules",
                path.display(),
                root.display()
            ));
        }
        crate::protected::protected_reason(path)
    }

    /// Gives the commands tools start these variables (see [`ToolContext::child_env`]).
    #[must_use]
    pub fn with_child_env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Self {
        self.child_env = vars.into_iter().collect();
        self
    }

    /// The policy for a command started now: the mode's when the session set
    /// `sandbox_by_mode`, else `sandbox`.
    #[must_use]
    pub fn sandbox_now(&self) -> Option<crate::sandbox::SandboxPolicy> {
        match &self.sandbox_by_mode {
            Some(by_mode) => by_mode.now(),
            None => self.sandbox.clone(),
        }
    }

    /// Whether the policy for a command started now is
    /// [`unenforceable`](crate::sandbox::unenforceable); the first time in a session it
    /// is, that is said on stderr.
    #[must_use]
    pub fn sandbox_unenforceable_now(&self) -> bool {
        match &self.sandbox_by_mode {
            Some(by_mode) => {
                if by_mode.unenforceable_now() {
                    return true;
                }
                // Unsandboxed, the kernel still holds the Read deny rules where it can
                // cover the denied paths; where it cannot, the command is asked about.
                let masks_unenforceable = by_mode.now().is_none()
                    && !crate::sandbox::namespaces_available()
                    && by_mode
                        .read_denied
                        .now()
                        .resolve()
                        .is_ok_and(|denied| crate::sandbox::masks_unenforceable(&denied));
                if masks_unenforceable {
                    by_mode.tell_unenforceable();
                }
                masks_unenforceable
            }
            None => crate::sandbox::unenforceable(self.sandbox.as_ref()),
        }
    }

    /// The ruleset for a command started now: the mode's policy, the working
    /// directories, and what the session's `Read(…)` deny rules name; for a command
    /// that runs unsandboxed, the masks over what the deny rules name.
    ///
    /// # Errors
    /// As [`crate::sandbox::confinement`] and [`crate::sandbox::masks`].
    pub fn confinement(
        &self,
    ) -> Result<Option<crate::sandbox::Confinement>, crate::sandbox::SandboxError> {
        let policy = self.sandbox_now();
        if crate::sandbox::unenforceable(policy.as_ref()) {
            // The permission check asked the user, who let it run without the sandbox.
            return Ok(None);
        }
        let denied = match &self.sandbox_by_mode {
            Some(by_mode) => by_mode.read_denied.now().resolve()?,
            None => std::collections::BTreeSet::new(),
        };
        if policy.is_none() {
            return crate::sandbox::masks(&self.cwd, &denied);
        }
        crate::sandbox::confinement(
            policy.as_ref(),
            &self.cwd,
            &self.working_dirs,
            &denied,
            &self.sandbox_access,
        )
    }

    /// Runs Bash under `policy` (see [`crate::sandbox`]).
    #[must_use]
    pub fn with_sandbox(mut self, policy: crate::sandbox::SandboxPolicy) -> Self {
        self.sandbox = Some(policy);
        self
    }

    /// Adds a working directory (`--add-dir`).
    #[must_use]
    pub fn with_working_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.working_dirs.push(absolute(dir.into()));
        self
    }

    /// Saves long Bash outputs under `dir`.
    #[must_use]
    pub fn with_output_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.output_dir = dir.into();
        self
    }

    /// The same context with another cancellation token (the executor gives each call
    /// a child token so one call can be cancelled alone).
    #[must_use]
    pub fn with_cancel(&self, cancel: CancellationToken) -> Self {
        Self {
            cancel,
            ..self.clone()
        }
    }

    /// `raw` resolved against the cwd, `..` folded and symlinks resolved.
    #[must_use]
    pub fn resolve(&self, raw: &str) -> PathBuf {
        crate::paths::resolve_path(&self.cwd, raw)
    }

    /// The path a tool opens for `raw`, which the runner resolved for the permission
    /// check: the same path, or an error when a symlink was swapped into it since.
    ///
    /// # Errors
    /// [`PathChanged`] when resolving again leads somewhere else; its message is for
    /// the model.
    pub fn resolve_as_checked(&self, raw: &str) -> Result<PathBuf, PathChanged> {
        crate::paths::resolve_as_checked(&self.cwd, raw)
    }

    /// Whether `path` (already resolved) lies inside one of the working directories.
    #[must_use]
    pub fn is_inside_working_dirs(&self, path: &Path) -> bool {
        crate::paths::is_inside_any(path, &self.working_dirs)
    }
}

/// A permission decision: for the whole call ([`CanUseTool`]) or the tool's own view
/// ([`Tool::check_permissions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Run the call.
    Allow,
    /// Refuse the call.
    Deny {
        /// Why, for the model and the user.
        reason: String,
    },
    /// Ask the user (or the SDK) first.
    Ask {
        /// What to ask, shown with the question.
        reason: String,
    },
}

/// A `tool_use` the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The `tool_use` id, which the result answers.
    pub id: String,
    /// The tool's name as the model wrote it.
    pub name: String,
    /// The arguments as the model wrote them.
    pub input: Value,
}

impl ToolCall {
    /// A call of tool `name` with id `id` and `input`.
    #[must_use]
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            input,
        }
    }
}

/// One capability offered to the model.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`Read`, `Bash`, …): borrowed for a built-in
    /// tool, owned for one made at run time (an MCP server's).
    fn name(&self) -> Cow<'static, str>;
    /// What the model reads about the tool: borrowed or made at each request (the
    /// Agent tool lists the agents on offer now).
    fn description(&self) -> Cow<'static, str>;
    /// The JSON schema of the input. A registry compiles it at the tool's first call and
    /// checks every call against that, so it should not change.
    fn input_schema(&self) -> Value;
    /// Checks beyond the schema; the message names the field at fault. None by default.
    ///
    /// # Errors
    /// A [`ToolInputError`] the model reads as the call's `<tool_use_error>`.
    fn validate_input(&self, _input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        Ok(())
    }
    /// Whether this call may run alongside other safe calls.
    fn is_concurrency_safe(&self, input: &Value) -> bool;
    /// Whether this call changes nothing (plan mode allows only these).
    fn is_read_only(&self, input: &Value) -> bool;
    /// The tool's own part of the permission decision, before modes and rules.
    fn check_permissions(&self, input: &Value, ctx: &ToolContext) -> PermissionDecision;
    /// Results longer than this are persisted by the loop's tool result budget.
    fn max_result_size_chars(&self) -> usize;
    /// Runs the call. Failures are `is_error` outputs, never panics.
    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput>;

    /// The input field holding a filesystem path (`file_path`, `path`), if any. The
    /// runner resolves it (symlinks included) before the permission check and hands the
    /// tool the resolved path, so what is checked is what is opened.
    fn path_field(&self) -> Option<&'static str> {
        None
    }

    /// Other names the tool answers to (old transcripts call Agent `Task`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Whether the tool is on offer now. An MCP server's tools are withdrawn while the
    /// server is disabled; the registry then neither offers nor finds them, so the next
    /// request goes without them. Always, by default.
    fn is_enabled(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for dyn Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool").field("name", &self.name()).finish()
    }
}

/// A permission decision that may also replace the input the allowed call runs with
/// (an Agent SDK's or a hook's `updatedInput`).
#[derive(Debug, Clone, PartialEq)]
pub struct InputDecision {
    /// Whether the call may run.
    pub decision: PermissionDecision,
    /// Checked like the model's input (schema, `validate_input`, path resolution)
    /// before the tool runs with it.
    pub updated_input: Option<Value>,
}

/// Decides whether a call may run.
pub trait CanUseTool: Send + Sync {
    /// Decides on `call` of `tool` in `ctx`: allow, deny or ask, maybe with another input.
    fn can_use_tool<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, PermissionDecision>;

    /// What the tool runner asks: the decision, and possibly another input to run the
    /// allowed call with. The default keeps the input.
    fn can_use_tool_with_input<'a>(
        &'a self,
        tool: &'a dyn Tool,
        call: &'a ToolCall,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, InputDecision> {
        Box::pin(async move {
            InputDecision {
                decision: self.can_use_tool(tool, call, ctx).await,
                updated_input: None,
            }
        })
    }
}

/// The shape of most tools' `call`: parse the input as `I` (a schema mismatch is a
/// `<tool_use_error>`), then run `work` on it.
pub fn call_with_input<'a, I, F, Fut>(input: Value, work: F) -> BoxFuture<'a, ToolOutput>
where
    I: serde::de::DeserializeOwned + Send + 'a,
    F: FnOnce(I) -> Fut + Send + 'a,
    Fut: std::future::Future<Output = ToolOutput> + Send + 'a,
{
    Box::pin(async move {
        match serde_json::from_value::<I>(input) {
            Ok(input) => work(input).await,
            Err(e) => ToolOutput::tool_use_error(e),
        }
    })
}

/// The shape of the file tools' `call`: parse the input as `I` (a schema mismatch is a
/// `<tool_use_error>`), then run `work` on a blocking thread, since it does file I/O.
pub(crate) fn call_blocking<'a, I>(
    input: Value,
    ctx: &'a ToolContext,
    work: fn(I, &ToolContext) -> ToolOutput,
) -> BoxFuture<'a, ToolOutput>
where
    I: serde::de::DeserializeOwned + Send + 'static,
{
    Box::pin(async move {
        let input: I = match serde_json::from_value(input) {
            Ok(i) => i,
            Err(e) => return ToolOutput::tool_use_error(e),
        };
        let ctx = ctx.clone();
        match tokio::task::spawn_blocking(move || work(input, &ctx)).await {
            Ok(output) => output,
            Err(e) => ToolOutput::error(format!("The tool stopped unexpectedly: {e}")),
        }
    })
}
