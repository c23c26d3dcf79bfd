//! Background shells: `Bash` with `run_in_background: true` starts the command in its
//! own process group and returns a shell id at once; `BashOutput` reads what it printed
//! since the last read, `KillShell` stops it. Every shell still running is killed with
//! its process group when the session's tools are dropped (the session ends).
//!
//! The foreground `Bash` is untouched: [`BackgroundBash`] wraps it, adds the
//! `run_in_background` field to its schema and hands every other call, check and
//! permission question to it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use grep_matcher::Matcher as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::process::Command;

use crate::sandbox::SandboxError;
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// Output kept per stream of a shell; beyond it the oldest unread text is dropped.
const MAX_KEPT_BYTES: usize = 8 * 1024 * 1024;
/// The most a BashOutput result returns (the rest is cut from the front).
const MAX_RESULT_CHARS: usize = 30_000;

/// How a background shell stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellStatus {
    /// Still running.
    Running,
    /// Ended by itself.
    Completed {
        /// The command's exit status; `None` when a signal ended it.
        exit_code: Option<i32>,
    },
    /// Stopped by KillShell or the end of the session.
    Killed,
}

impl ShellStatus {
    /// `running`, `completed` or `killed`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed { .. } => "completed",
            Self::Killed => "killed",
        }
    }
}

/// Why a background shell could not be started or killed; the message is for the model
/// (and the REPL's `/bashes`).
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// The sandbox of the mode could not be set up for the command.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// bash itself could not be started.
    #[error("Failed to start bash: {0}")]
    Start(#[source] std::io::Error),
    /// The child had no process id: it ended before it could be tracked.
    #[error("the command ended before it started")]
    EndedBeforeStart,
    /// No shell has this id.
    #[error("No shell found with ID: {id}{}", known_shells(.shells))]
    Unknown {
        /// The id asked for.
        id: String,
        /// The ids of the shells the session started (none, maybe).
        shells: Vec<String>,
    },
    /// The shell already ended (or was killed).
    #[error("Shell {id} is not running (status: {})", .status.name())]
    NotRunning {
        /// The shell's id.
        id: String,
        /// How it stands.
        status: ShellStatus,
    },
}

/// The tail of [`ShellError::Unknown`]'s message: which shells there are.
fn known_shells(shells: &[String]) -> String {
    if shells.is_empty() {
        " (no background shells were started)".to_owned()
    } else {
        format!("; the shells are {}", shells.join(", "))
    }
}

/// One stream's text and how much of it the model has read.
#[derive(Debug, Default)]
struct Stream {
    text: String,
    read: usize,
}

impl Stream {
    fn push(&mut self, chunk: &str) {
        self.text.push_str(chunk);
        if self.text.len() > MAX_KEPT_BYTES {
            let mut cut = self.text.len() - MAX_KEPT_BYTES;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
            self.read = self.read.saturating_sub(cut);
        }
    }

    fn unread(&mut self) -> String {
        let new = self.text[self.read..].to_owned();
        self.read = self.text.len();
        new
    }
}

#[derive(Debug)]
struct Shell {
    command: String,
    /// The process group (the leader's pid).
    pgid: u32,
    stdout: Stream,
    stderr: Stream,
    status: ShellStatus,
    started: std::time::Instant,
    /// When it stopped (completed or killed), for its runtime.
    ended: Option<std::time::Instant>,
    /// The sandbox's private temp dir, removed with the shell.
    _temp_dir: Option<tempfile::TempDir>,
    /// What covers the denied paths of an unsandboxed shell, removed with the shell.
    _placeholders: Option<tempfile::TempDir>,
}

/// One background shell as a UI lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInfo {
    /// The id the model and `/bashes` name it by (`bash_1`, …).
    pub id: String,
    /// The command line it runs.
    pub command: String,
    /// Running, or how it ended.
    pub status: ShellStatus,
    /// How long it ran (so far, while it runs).
    pub runtime: std::time::Duration,
}

fn shell_number(id: &str) -> u64 {
    id.strip_prefix("bash_")
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

/// The session's background shells.
#[derive(Debug, Default)]
pub struct ShellTable {
    shells: Mutex<BTreeMap<String, Arc<Mutex<Shell>>>>,
    next: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sends SIGKILL to a process group; a group that is already gone is no error worth
/// reporting.
fn kill_group(pgid: u32) {
    let pid = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

impl ShellTable {
    /// Starts `command` in the background; returns its shell id.
    ///
    /// # Errors
    /// [`ShellError`] when the sandbox cannot be set up or bash cannot be started.
    pub fn spawn(&self, command: &str, ctx: &ToolContext) -> Result<String, ShellError> {
        let mut bash = Command::new("bash");
        bash.arg("-c")
            .arg(command)
            .current_dir(&ctx.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // As in the foreground: the session's credentials are not the command's, and
        // the sandbox of the mode (plan mode, `sandbox.enabled`) holds here too.
        bash.envs(ctx.child_env.iter().map(|(k, v)| (k, v)));
        for name in crate::sandbox::SECRET_ENV {
            bash.env_remove(name);
        }
        crate::bash::git_uses_no_found_bare_repository(&mut bash, ctx);
        let confinement = ctx.confinement()?;
        let mut temp_dir = None;
        let mut placeholders = None;
        let mut sweep = None;
        if let Some(c) = confinement {
            if let Some(dir) = &c.temp_dir {
                bash.env("TMPDIR", dir.path());
            }
            temp_dir = c.temp_dir;
            placeholders = c.placeholders;
            sweep = Some(c.sweep);
            crate::sandbox::confine_child(&mut bash, c.child);
        }
        let mut child = bash.spawn().map_err(ShellError::Start)?;
        let pgid = child.id().ok_or(ShellError::EndedBeforeStart)?;
        let id = format!("bash_{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let shell = Arc::new(Mutex::new(Shell {
            command: command.to_owned(),
            pgid,
            stdout: Stream::default(),
            stderr: Stream::default(),
            status: ShellStatus::Running,
            started: std::time::Instant::now(),
            ended: None,
            _temp_dir: temp_dir,
            _placeholders: placeholders,
        }));
        let out = child
            .stdout
            .take()
            .map(|s| pump(s, Arc::clone(&shell), true));
        let err = child
            .stderr
            .take()
            .map(|s| pump(s, Arc::clone(&shell), false));
        let waited = Arc::clone(&shell);
        tokio::spawn(async move {
            let status = child.wait().await;
            // The output is complete once both pipes are closed.
            for task in [out, err].into_iter().flatten() {
                let _ = task.await;
            }
            // Its PID namespace is gone with the shell: nothing of it can create
            // anything after this.
            let removed = sweep.map(crate::sandbox::ProtectedSweep::sweep);
            let mut shell = lock(&waited);
            if let Some(note) = removed.and_then(|r| crate::sandbox::ProtectedSweep::note(&r)) {
                shell.stderr.push(&note);
            }
            if shell.status == ShellStatus::Running {
                shell.status = ShellStatus::Completed {
                    exit_code: status.ok().and_then(|s| s.code()),
                };
                shell.ended = Some(std::time::Instant::now());
            }
        });
        lock(&self.shells).insert(id.clone(), shell);
        Ok(id)
    }

    fn get(&self, id: &str) -> Option<Arc<Mutex<Shell>>> {
        lock(&self.shells).get(id).cloned()
    }

    fn unknown(&self, id: &str) -> ShellError {
        ShellError::Unknown {
            id: id.to_owned(),
            shells: lock(&self.shells).keys().cloned().collect(),
        }
    }

    /// Every shell the session started, oldest first (for the REPL's `/bashes`).
    #[must_use]
    pub fn list(&self) -> Vec<ShellInfo> {
        let mut shells: Vec<ShellInfo> = lock(&self.shells)
            .iter()
            .map(|(id, shell)| {
                let shell = lock(shell);
                ShellInfo {
                    id: id.clone(),
                    command: shell.command.clone(),
                    status: shell.status,
                    runtime: shell
                        .ended
                        .unwrap_or_else(std::time::Instant::now)
                        .duration_since(shell.started),
                }
            })
            .collect();
        // `bash_10` after `bash_9`.
        shells.sort_by_key(|s| shell_number(&s.id));
        shells
    }

    /// How many shells are still running.
    #[must_use]
    pub fn running(&self) -> usize {
        lock(&self.shells)
            .values()
            .filter(|s| lock(s).status == ShellStatus::Running)
            .count()
    }

    /// Kills one running shell with its process group; its command on success.
    ///
    /// # Errors
    /// [`ShellError::Unknown`] for an unknown id, [`ShellError::NotRunning`] for a shell
    /// that is not running.
    pub fn kill(&self, id: &str) -> Result<String, ShellError> {
        let Some(shell) = self.get(id) else {
            return Err(self.unknown(id));
        };
        let mut shell = lock(&shell);
        if shell.status != ShellStatus::Running {
            return Err(ShellError::NotRunning {
                id: id.to_owned(),
                status: shell.status,
            });
        }
        kill_group(shell.pgid);
        shell.status = ShellStatus::Killed;
        shell.ended = Some(std::time::Instant::now());
        Ok(shell.command.clone())
    }

    /// Kills every shell still running, with its process group.
    pub fn kill_all(&self) {
        for shell in lock(&self.shells).values() {
            let mut shell = lock(shell);
            if shell.status == ShellStatus::Running {
                kill_group(shell.pgid);
                shell.status = ShellStatus::Killed;
                shell.ended = Some(std::time::Instant::now());
            }
        }
    }
}

impl Drop for ShellTable {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Copies a pipe into the shell's stream until it closes.
fn pump(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    shell: Arc<Mutex<Shell>>,
    is_stdout: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let chunk = String::from_utf8_lossy(&buf[..n]);
                    let mut shell = lock(&shell);
                    if is_stdout {
                        shell.stdout.push(&chunk);
                    } else {
                        shell.stderr.push(&chunk);
                    }
                }
            }
        }
    })
}

/// `Bash` with `run_in_background`: the wrapped tool does everything else.
pub struct BackgroundBash {
    inner: Arc<dyn Tool>,
    shells: Arc<ShellTable>,
}

impl std::fmt::Debug for BackgroundBash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundBash").finish_non_exhaustive()
    }
}

/// The input without `run_in_background`, as the wrapped Bash knows it.
pub(crate) fn foreground(input: &Value) -> Value {
    let mut input = input.clone();
    if let Some(object) = input.as_object_mut() {
        object.remove("run_in_background");
    }
    input
}

/// The field BackgroundBash adds to Bash's input (the rest goes to the wrapped Bash).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct BackgroundFlag {
    /// Run the command in the background and return a shell id at once; read its output with BashOutput, stop it with KillShell
    #[serde(default)]
    run_in_background: Option<bool>,
}

/// Whether the call asks for the background: the flag parsed (a flag that is not a
/// boolean is an input error, as the schema says).
fn in_background(input: &Value) -> Result<bool, serde_json::Error> {
    let flag = BackgroundFlag::deserialize(input)?;
    Ok(flag.run_in_background == Some(true))
}

impl Tool for BackgroundBash {
    fn name(&self) -> Cow<'static, str> {
        self.inner.name()
    }

    fn description(&self) -> Cow<'static, str> {
        self.inner.description()
    }

    fn input_schema(&self) -> Value {
        let mut schema = self.inner.input_schema();
        let flag = crate::schema::input_schema::<BackgroundFlag>();
        if let (Some(props), Some(added)) = (
            schema.get_mut("properties").and_then(Value::as_object_mut),
            flag.get("properties").and_then(Value::as_object),
        ) {
            props.extend(added.clone());
        }
        schema
    }

    fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolInputError> {
        self.inner.validate_input(&foreground(input), ctx)
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        self.inner.is_concurrency_safe(&foreground(input))
    }

    fn is_read_only(&self, input: &Value) -> bool {
        self.inner.is_read_only(&foreground(input))
    }

    fn check_permissions(&self, input: &Value, ctx: &ToolContext) -> PermissionDecision {
        self.inner.check_permissions(&foreground(input), ctx)
    }

    fn max_result_size_chars(&self) -> usize {
        self.inner.max_result_size_chars()
    }

    fn path_field(&self) -> Option<&'static str> {
        self.inner.path_field()
    }

    fn aliases(&self) -> &'static [&'static str] {
        self.inner.aliases()
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        match in_background(&input) {
            Ok(true) => {}
            Ok(false) => return self.inner.call(foreground(&input), ctx, progress),
            Err(e) => return Box::pin(async move { ToolOutput::tool_use_error(e) }),
        }
        Box::pin(async move {
            let Some(command) = input.get("command").and_then(Value::as_str) else {
                return ToolOutput::tool_use_error("The required parameter `command` is missing");
            };
            match self.shells.spawn(command, ctx) {
                Ok(id) => ToolOutput::ok(format!(
                    "Command running in background with ID: {id}. Read its output with BashOutput, stop it with KillShell."
                )),
                Err(e) => ToolOutput::error(e.to_string()),
            }
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputInput {
    /// The id of the background shell
    bash_id: String,
    /// Optional regular expression: only matching lines are shown
    #[serde(default)]
    filter: Option<String>,
}

/// `BashOutput`: what a background shell printed since the last read.
#[derive(Debug)]
pub struct BashOutputTool {
    shells: Arc<ShellTable>,
}

/// Only the lines `filter` matches (the others are read and gone).
fn keep_matching(text: &str, filter: Option<&grep_regex::RegexMatcher>) -> String {
    let Some(m) = filter else {
        return text.to_owned();
    };
    text.lines()
        .filter(|l| m.is_match(l.as_bytes()).unwrap_or(false))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The last `MAX_RESULT_CHARS` characters, saying how much was cut.
fn tail(text: String) -> String {
    let chars = text.chars().count();
    if chars <= MAX_RESULT_CHARS {
        return text;
    }
    let cut = chars - MAX_RESULT_CHARS;
    let rest: String = text.chars().skip(cut).collect();
    format!("[{cut} earlier characters cut]\n{rest}")
}

impl BashOutputTool {
    fn read(&self, input: &OutputInput) -> ToolOutput {
        let filter = match input.filter.as_deref().filter(|f| !f.is_empty()) {
            None => None,
            Some(f) => match grep_regex::RegexMatcher::new(f) {
                Ok(m) => Some(m),
                Err(e) => {
                    return ToolOutput::tool_use_error(format!("Invalid filter regex {f:?}: {e}"));
                }
            },
        };
        let Some(shell) = self.shells.get(&input.bash_id) else {
            return ToolOutput::error(self.shells.unknown(&input.bash_id).to_string());
        };
        let mut shell = lock(&shell);
        let stdout = tail(keep_matching(&shell.stdout.unread(), filter.as_ref()));
        let stderr = tail(keep_matching(&shell.stderr.unread(), filter.as_ref()));
        let mut text = format!("<status>{}</status>\n", shell.status.name());
        if let ShellStatus::Completed {
            exit_code: Some(code),
        } = shell.status
        {
            text.push_str(&format!("<exit_code>{code}</exit_code>\n"));
        }
        if !stdout.is_empty() {
            text.push_str(&format!("<stdout>\n{}\n</stdout>\n", stdout.trim_end()));
        }
        if !stderr.is_empty() {
            text.push_str(&format!("<stderr>\n{}\n</stderr>\n", stderr.trim_end()));
        }
        ToolOutput::ok(text.trim_end().to_owned())
    }
}

impl Tool for BashOutputTool {
    fn name(&self) -> Cow<'static, str> {
        "BashOutput".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Reads the output a background shell (started with Bash run_in_background) printed since the last read, with its status (running, completed, killed) and exit code. An optional regex `filter` keeps only matching lines; the others are consumed.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<OutputInput>()
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        MAX_RESULT_CHARS * 2 + 200
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        crate::call_with_input(
            input,
            move |input: OutputInput| async move { self.read(&input) },
        )
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct KillInput {
    /// The id of the background shell to kill
    shell_id: String,
}

/// `KillShell`: stops a background shell and its process group.
#[derive(Debug)]
pub struct KillShellTool {
    shells: Arc<ShellTable>,
}

impl KillShellTool {
    fn kill(&self, id: &str) -> ToolOutput {
        match self.shells.kill(id) {
            Ok(command) => ToolOutput::ok(format!("Successfully killed shell: {id} ({command})")),
            Err(e) => ToolOutput::error(e.to_string()),
        }
    }
}

impl Tool for KillShellTool {
    fn name(&self) -> Cow<'static, str> {
        "KillShell".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Kills a background shell (started with Bash run_in_background) and every process it started, by its shell id.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<KillInput>()
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        // It only stops what the session itself started in the background.
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }

    fn max_result_size_chars(&self) -> usize {
        10_000
    }

    fn call<'a>(
        &'a self,
        input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        crate::call_with_input(input, move |input: KillInput| async move {
            self.kill(&input.shell_id)
        })
    }
}

/// Bash with `run_in_background` (wrapping `bash`), BashOutput and KillShell, all three
/// sharing `shells`.
pub(crate) fn background_tools(
    bash: Arc<dyn Tool>,
    shells: &Arc<ShellTable>,
) -> [Arc<dyn Tool>; 3] {
    [
        Arc::new(BackgroundBash {
            inner: bash,
            shells: Arc::clone(shells),
        }),
        Arc::new(BashOutputTool {
            shells: Arc::clone(shells),
        }),
        Arc::new(KillShellTool {
            shells: Arc::clone(shells),
        }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AllowAll, ToolCall, ToolRegistry, run_tool_call};
    use serde_json::json;

    async fn call(registry: &ToolRegistry, name: &str, input: Value) -> ToolOutput {
        let ctx = ToolContext::new(std::env::temp_dir());
        let call = ToolCall::new("t", name, input);
        run_tool_call(registry, &call, &ctx, &AllowAll, &|_| {})
            .await
            .output
    }

    fn registry() -> (ToolRegistry, Arc<ShellTable>) {
        let mut r = ToolRegistry::new().with(Arc::new(crate::bash::BashTool));
        r.add_background_shells();
        let shells = Arc::clone(r.background_shells().unwrap());
        (r, shells)
    }

    async fn until_done(r: &ToolRegistry, id: &str) -> String {
        let mut seen = String::new();
        for _ in 0..500 {
            let out = call(r, "BashOutput", json!({"bash_id": id})).await;
            seen.push_str(&out.content);
            if !out.content.contains("<status>running</status>") {
                return seen;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("still running: {seen}");
    }

    #[tokio::test]
    async fn a_background_command_returns_an_id_then_its_output_once_with_the_exit_code() {
        let (r, _shells) = registry();
        let started = call(
            &r,
            "Bash",
            json!({"command": "echo one; echo two >&2; exit 3", "run_in_background": true}),
        )
        .await;
        assert!(started.content.contains("ID: bash_1"), "{started:?}");
        let seen = until_done(&r, "bash_1").await;
        assert!(seen.contains("<stdout>\none\n</stdout>"), "{seen}");
        assert!(seen.contains("<stderr>\ntwo\n</stderr>"), "{seen}");
        assert!(seen.contains("<exit_code>3</exit_code>"), "{seen}");
        let again = call(&r, "BashOutput", json!({"bash_id": "bash_1"})).await;
        assert_eq!(
            again.content,
            "<status>completed</status>\n<exit_code>3</exit_code>"
        );
    }

    #[tokio::test]
    async fn the_registry_lists_its_shells_and_a_ui_kills_one() {
        let (mut r, _) = registry();
        r = r.filtered(&["Bash", "BashOutput"]);
        let shells = Arc::clone(r.background_shells().unwrap());
        for _ in 0..2 {
            let _ = call(
                &r,
                "Bash",
                json!({"command": "sleep 30", "run_in_background": true}),
            )
            .await;
        }
        let listed = shells.list();
        let ids: Vec<&str> = listed.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["bash_1", "bash_2"]);
        assert!(
            listed
                .iter()
                .all(|s| s.command == "sleep 30" && s.status == ShellStatus::Running)
        );
        assert_eq!(shells.running(), 2);
        assert_eq!(shells.kill("bash_2").unwrap(), "sleep 30");
        assert_eq!(shells.list()[1].status, ShellStatus::Killed);
        assert_eq!(shells.running(), 1);
        let again = shells.kill("bash_2").unwrap_err().to_string();
        assert!(again.contains("not running (status: killed)"), "{again}");
        assert!(
            shells
                .kill("bash_9")
                .unwrap_err()
                .to_string()
                .contains("bash_1, bash_2")
        );
        let out = call(&r, "BashOutput", json!({"bash_id": "bash_2"})).await;
        assert!(out.content.contains("<status>killed</status>"), "{out:?}");
    }

    #[tokio::test]
    async fn a_background_shell_runs_under_the_modes_sandbox() {
        assert!(
            crate::sandbox::landlock_abi().is_some(),
            "this kernel has no Landlock: the sandbox tests need Linux 5.13 or later"
        );
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path().to_path_buf()).with_sandbox(
            crate::sandbox::SandboxPolicy::ReadOnly {
                allow_network: false,
            },
        );
        let shells = ShellTable::default();
        let id = shells.spawn("touch made-it; echo done", &ctx).unwrap();
        let shell = shells.get(&id).unwrap();
        while lock(&shell).status == ShellStatus::Running {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!dir.path().join("made-it").exists());
        assert_ne!(lock(&shell).status, ShellStatus::Running);
    }

    #[tokio::test]
    async fn a_filter_keeps_matching_lines_and_a_bad_one_is_an_input_error() {
        let (r, shells) = registry();
        let _ = call(
            &r,
            "Bash",
            json!({"command": "printf 'ok 1\\nerr 2\\nok 3\\n'", "run_in_background": true}),
        )
        .await;
        // Wait for completion without reading: a read consumes.
        let shell = shells.get("bash_1").unwrap();
        while lock(&shell).status == ShellStatus::Running {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let out = call(
            &r,
            "BashOutput",
            json!({"bash_id": "bash_1", "filter": "^ok"}),
        )
        .await;
        assert!(
            out.content.contains("<stdout>\nok 1\nok 3\n</stdout>"),
            "{out:?}"
        );
        let bad = call(
            &r,
            "BashOutput",
            json!({"bash_id": "bash_1", "filter": "("}),
        )
        .await;
        assert!(
            bad.is_error && bad.content.contains("Invalid filter"),
            "{bad:?}"
        );
    }

    #[tokio::test]
    async fn kill_shell_stops_the_group_and_an_unknown_id_names_the_shells() {
        let (r, shells) = registry();
        let _ = call(
            &r,
            "Bash",
            json!({"command": "sleep 30 & sleep 30", "run_in_background": true}),
        )
        .await;
        let killed = call(&r, "KillShell", json!({"shell_id": "bash_1"})).await;
        assert!(
            killed.content.contains("Successfully killed shell: bash_1"),
            "{killed:?}"
        );
        let out = call(&r, "BashOutput", json!({"bash_id": "bash_1"})).await;
        assert!(
            out.content.starts_with("<status>killed</status>"),
            "{out:?}"
        );
        let pgid = lock(&shells.get("bash_1").unwrap()).pgid;
        // The whole group is gone, the backgrounded `sleep` included.
        let mut alive = true;
        for _ in 0..500 {
            alive = std::process::Command::new("kill")
                .args(["-0", "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success();
            if !alive {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(!alive, "process group {pgid} still alive");
        let again = call(&r, "KillShell", json!({"shell_id": "bash_1"})).await;
        assert!(
            again.is_error && again.content.contains("not running"),
            "{again:?}"
        );
        let unknown = call(&r, "BashOutput", json!({"bash_id": "bash_9"})).await;
        assert!(
            unknown.content.contains("the shells are bash_1"),
            "{unknown:?}"
        );
    }
}
