//! Bash: a shell command in its own process group, with a timeout.

use std::borrow::Cow;
use std::process::Stdio;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;

use crate::editor::TerminalEnding;
use crate::process_tree::ProcessTree;
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
    ToolProgress, sandbox,
};

/// Timeout when none is given.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// The longest timeout a call may ask for.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Longer outputs are cut, head and tail kept, the full text saved to a file.
pub const MAX_OUTPUT_CHARS: usize = 30_000;
/// Output kept in memory beyond which the rest is dropped (the saved file says so).
const MAX_CAPTURE_BYTES: usize = 64 * 1024 * 1024;
/// After the shell exits, how long to wait for background children to close the pipes.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);
/// How often a running command reports its new output (a front-end shows it growing).
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// The Bash tool: runs a shell command in its own process group, with a timeout.
#[derive(Debug, Clone, Copy, Default)]
pub struct BashTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BashInput {
    /// The command to execute
    command: String,
    /// Optional timeout in milliseconds (max 600000)
    #[serde(default)]
    timeout: Option<f64>,
    /// Clear, concise description of what this command does in 5-10 words
    #[serde(default, rename = "description")]
    _description: Option<String>,
}

impl Tool for BashTool {
    fn name(&self) -> Cow<'static, str> {
        "Bash".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Executes a bash command (`bash -c`) in the session's working directory, with an optional timeout.\n\n\
Usage:\n\
- The command runs in its own process group with stdin closed; stdout and stderr are captured together.\n\
- timeout is in milliseconds: default 120000 (2 minutes), at most 600000 (10 minutes). On timeout the whole process group is killed and the partial output returned.\n\
- A non-zero exit status is reported as an error starting with \"Exit code N\".\n\
- Output over 30000 characters is cut (beginning and end kept) and the full output saved to a file whose path is given.\n\
- Prefer Read, Grep, Glob and Edit over cat, grep, find and sed.\n\
- Write a clear, concise description of what the command does in 5-10 words.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<BashInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        if let Some(t) = input.get("timeout").and_then(Value::as_f64) {
            if t <= 0.0 {
                return Err("timeout must be a positive number of milliseconds".into());
            }
            if t > MAX_TIMEOUT_MS as f64 {
                return Err(format!(
                    "timeout must be at most {MAX_TIMEOUT_MS} ms (10 minutes), got {t}"
                )
                .into());
            }
        }
        if input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| c.trim().is_empty())
        {
            return Err("command must not be empty".into());
        }
        Ok(())
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn is_read_only(&self, input: &Value) -> bool {
        input
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(crate::read_only::is_read_only_command)
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: "Bash runs commands".to_owned(),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        MAX_OUTPUT_CHARS
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: BashInput = match serde_json::from_value(input) {
                Ok(i) => i,
                Err(e) => return ToolOutput::tool_use_error(e),
            };
            // Saturating cast: validate_input bounded it.
            let timeout_ms = input
                .timeout
                .map_or(DEFAULT_TIMEOUT_MS, |t| (t as u64).clamp(1, MAX_TIMEOUT_MS));
            run_command(&input.command, timeout_ms, ctx, progress).await
        })
    }
}

/// Kills the command's process tree when dropped, unless disarmed: a call dropped
/// half-way (an aborted executor task) leaves no process behind.
struct GroupGuard {
    tree: Option<ProcessTree>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(tree) = self.tree.take() {
            tree.kill();
        }
    }
}

enum Ending {
    Exited(std::process::ExitStatus),
    TimedOut,
    Cancelled,
}

/// git in a command uses a bare repository only when told (`--git-dir`, `GIT_DIR`):
/// `safe.bareRepository=explicit`, added to the command's `GIT_CONFIG_*` list. A
/// directory planted in the workspace with a `HEAD`, `objects/`, `refs/` and a `config`
/// holding an alias or `core.fsmonitor` would otherwise be found by `git -C dir …` (or
/// from inside it) and its configuration would run.
pub(crate) fn git_uses_no_found_bare_repository(bash: &mut Command, ctx: &ToolContext) {
    let count = ctx
        .child_env
        .iter()
        .find(|(k, _)| k == "GIT_CONFIG_COUNT")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("GIT_CONFIG_COUNT").ok())
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    bash.env(format!("GIT_CONFIG_KEY_{count}"), "safe.bareRepository")
        .env(format!("GIT_CONFIG_VALUE_{count}"), "explicit")
        .env("GIT_CONFIG_COUNT", (count + 1).to_string());
}

async fn run_command(
    command: &str,
    timeout_ms: u64,
    ctx: &ToolContext,
    progress: &ProgressFn,
) -> ToolOutput {
    let mut bash = Command::new("bash");
    bash.arg("-c")
        .arg(command)
        .current_dir(&ctx.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // The session's credentials are not the command's: a model that runs `env` must
    // not copy the API key into the transcript and the next request.
    bash.envs(ctx.child_env.iter().map(|(k, v)| (k, v)));
    for name in sandbox::SECRET_ENV {
        bash.env_remove(name);
    }
    git_uses_no_found_bare_repository(&mut bash, ctx);
    let confinement = match ctx.confinement() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e.to_string()),
    };
    if confinement.is_none()
        && let Some(terminals) = &ctx.editor_terminals
    {
        return in_editor_terminal(terminals.as_ref(), command, timeout_ms, ctx).await;
    }
    // Kept until the command is done: the sandbox's temp dir, removed on drop.
    let mut _temp_dir = None;
    let mut _placeholders = None;
    let mut sweep = None;
    let confined = confinement.is_some();
    if let Some(c) = confinement {
        if let Some(dir) = &c.temp_dir {
            bash.env("TMPDIR", dir.path());
        }
        _temp_dir = c.temp_dir;
        _placeholders = c.placeholders;
        sweep = Some(c.sweep);
        sandbox::confine_child(&mut bash, c.child);
    }
    let mut child = match bash.spawn() {
        Ok(c) => c,
        Err(e) if confined => {
            return ToolOutput::error(format!("Failed to start bash in the sandbox: {e}"));
        }
        Err(e) => return ToolOutput::error(format!("Failed to start bash: {e}")),
    };
    let mut guard = GroupGuard {
        tree: child.id().and_then(ProcessTree::of_shell),
    };
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return ToolOutput::error("Failed to capture the command's output");
    };

    let mut captured: Vec<u8> = Vec::new();
    let mut dropped_bytes = 0usize;
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 64 * 1024];
    let (mut out_open, mut err_open) = (true, true);
    let mut status = None;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(timeout_ms);
    let mut drain_deadline = None;
    // Progress: the output not yet reported, at most once per PROGRESS_EVERY.
    let mut shown = 0usize;
    let mut progress_due: Option<tokio::time::Instant> = None;
    let mut last_progress: Option<tokio::time::Instant> = None;

    let ending = loop {
        if !out_open
            && !err_open
            && let Some(s) = status
        {
            break Ending::Exited(s);
        }
        let mut chunk: Option<&[u8]> = None;
        tokio::select! {
            n = stdout.read(&mut out_buf), if out_open => match n {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => chunk = Some(&out_buf[..n]),
            },
            n = stderr.read(&mut err_buf), if err_open => match n {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => chunk = Some(&err_buf[..n]),
            },
            s = child.wait(), if status.is_none() => match s {
                Ok(s) => {
                    status = Some(s);
                    drain_deadline = Some(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                Err(e) => return ToolOutput::error(format!("Failed to wait for bash: {e}")),
            },
            () = tokio::time::sleep_until(deadline), if status.is_none() => break Ending::TimedOut,
            () = ctx.cancel.cancelled() => break Ending::Cancelled,
            () = sleep_until_opt(progress_due) => {
                progress_due = None;
                if let Some(text) = unreported(&captured, &mut shown) {
                    last_progress = Some(tokio::time::Instant::now());
                    progress(ToolProgress::Output { text });
                }
            }
            () = sleep_until_opt(drain_deadline) => {
                // Background children still hold the pipes: return what the shell wrote.
                if let Some(s) = status {
                    break Ending::Exited(s);
                }
            }
        }
        if let Some(bytes) = chunk {
            let room = MAX_CAPTURE_BYTES.saturating_sub(captured.len());
            captured.extend_from_slice(&bytes[..bytes.len().min(room)]);
            dropped_bytes += bytes.len().saturating_sub(room);
            if progress_due.is_none() && shown < captured.len() {
                let now = tokio::time::Instant::now();
                progress_due = Some(last_progress.map_or(now, |at| (at + PROGRESS_EVERY).max(now)));
            }
        }
    };

    match ending {
        Ending::TimedOut | Ending::Cancelled => {
            if let Some(tree) = guard.tree.take() {
                tree.kill();
            }
            let _ = child.kill().await;
        }
        Ending::Exited(_) => {
            if let Some(tree) = guard.tree.take() {
                tree.leave_running();
            }
        }
    }

    // Not a second copy of up to MAX_CAPTURE_BYTES when the output is UTF-8.
    let text = String::from_utf8(captured)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let mut body = shorten_output(&text, dropped_bytes, ctx).await;
    // The command's PID namespace is gone with its shell: nothing of it can create
    // anything after this.
    if let Some(note) = sweep.and_then(|s| sandbox::ProtectedSweep::note(&s.sweep())) {
        body = with_note(&body, &note);
    }
    let ending = match ending {
        Ending::Exited(status) => TerminalEnding::Exited(exit_code(status)),
        Ending::TimedOut => TerminalEnding::TimedOut,
        Ending::Cancelled => TerminalEnding::Cancelled,
    };
    reported(body, &ending, timeout_ms, "its process group was killed")
}

/// The call's result: the output, and how the command ended (`killed` says what was
/// killed when it did not end by itself).
fn reported(
    mut body: String,
    ending: &TerminalEnding,
    timeout_ms: u64,
    killed: &str,
) -> ToolOutput {
    match ending {
        TerminalEnding::Exited(0) => {
            if body.is_empty() {
                body.push_str("(no output)");
            }
            ToolOutput::ok(body)
        }
        TerminalEnding::Exited(code) if body.is_empty() => {
            ToolOutput::error(format!("Exit code {code}"))
        }
        TerminalEnding::Exited(code) => ToolOutput::error(format!("Exit code {code}\n{body}")),
        TerminalEnding::TimedOut => ToolOutput::error(with_note(
            &body,
            &format!(
                "Command timed out after {timeout_ms} ms; {killed}. The output above is partial."
            ),
        )),
        TerminalEnding::Cancelled => ToolOutput::error(with_note(
            &body,
            &format!("Command was interrupted; {killed}. The output above is partial."),
        )),
    }
}

/// Runs `command` in the editor's terminal (nothing confines it) and reports it as a
/// command run here is reported.
async fn in_editor_terminal(
    terminals: &dyn crate::editor::EditorTerminals,
    command: &str,
    timeout_ms: u64,
    ctx: &ToolContext,
) -> ToolOutput {
    use crate::editor::TerminalCommand;
    let run = terminals
        .run(TerminalCommand {
            command,
            cwd: &ctx.cwd,
            env: &ctx.child_env,
            timeout: Duration::from_millis(timeout_ms),
            cancel: &ctx.cancel,
            tool_use_id: ctx.tool_use_id.as_deref(),
            output_byte_limit: MAX_CAPTURE_BYTES,
        })
        .await;
    let run = match run {
        Ok(run) => run,
        Err(e) => return ToolOutput::error(format!("The editor could not run the command: {e}")),
    };
    let mut body = shorten_output(&run.output, 0, ctx).await;
    if run.truncated {
        body = with_note(
            &body,
            &format!("[the start of the output was dropped: over {MAX_CAPTURE_BYTES} bytes]"),
        );
    }
    reported(
        body,
        &run.ending,
        timeout_ms,
        "the editor's terminal was killed",
    )
}

/// At most this much of the new output goes into one progress report: a command that
/// prints hundreds of megabytes would otherwise be copied again every half second
/// (front-ends show the tail anyway).
const PROGRESS_MAX_BYTES: usize = 64 * 1024;

/// The output of `captured` from `reported` on (its last [`PROGRESS_MAX_BYTES`] when
/// there is more), up to its last whole character (the rest waits for the bytes that
/// complete it); `None` when there is nothing new.
fn unreported(captured: &[u8], reported: &mut usize) -> Option<String> {
    let mut new = captured.get(*reported..)?;
    if new.len() > PROGRESS_MAX_BYTES {
        let mut skip = new.len() - PROGRESS_MAX_BYTES;
        // Start on a character, not inside one.
        while new.get(skip).is_some_and(|b| b & 0xc0 == 0x80) {
            skip += 1;
        }
        *reported += skip;
        new = &new[skip..];
    }
    let whole = match std::str::from_utf8(new) {
        Ok(_) => new.len(),
        // A character cut at the end of what was read so far.
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => new.len(),
    };
    if whole == 0 {
        return None;
    }
    *reported += whole;
    Some(String::from_utf8_lossy(&new[..whole]).into_owned())
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn with_note(body: &str, note: &str) -> String {
    if body.is_empty() {
        note.to_owned()
    } else {
        format!("{body}\n\n{note}")
    }
}

/// The exit code, or 128 + the signal for a command killed by a signal (as shells say).
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// The output, or when over [`MAX_OUTPUT_CHARS`] its head and tail with the full text
/// saved to a file in `ctx.output_dir`.
async fn shorten_output(text: &str, dropped_bytes: usize, ctx: &ToolContext) -> String {
    let text = text.trim_end_matches('\n');
    let chars = text.chars().count();
    if chars <= MAX_OUTPUT_CHARS && dropped_bytes == 0 {
        return text.to_owned();
    }
    let saved = save_full_output(text, dropped_bytes, &ctx.output_dir).await;
    let keep = MAX_OUTPUT_CHARS / 2 - 500;
    let head_end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars.saturating_sub(keep))
        .map_or(text.len(), |(i, _)| i)
        .max(head_end);
    let omitted = chars.saturating_sub(2 * keep);
    let where_saved = match saved {
        Ok(path) => format!("full output saved to {}", path.display()),
        Err(e) => format!("the full output could not be saved: {e}"),
    };
    format!(
        "{}\n\n... [{omitted} characters truncated; {where_saved}] ...\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    )
}

async fn save_full_output(
    text: &str,
    dropped_bytes: usize,
    dir: &std::path::Path,
) -> std::io::Result<std::path::PathBuf> {
    tokio::fs::create_dir_all(dir).await?;
    let file = tempfile::Builder::new()
        .prefix("bash-output-")
        .suffix(".txt")
        .tempfile_in(dir)?;
    let (_, path) = file.keep().map_err(|e| e.error)?;
    // Written as it is, not copied: the output may be MAX_CAPTURE_BYTES long.
    let mut out = tokio::fs::File::create(&path).await?;
    out.write_all(text.as_bytes()).await?;
    if dropped_bytes > 0 {
        out.write_all(
            format!(
                "\n[{dropped_bytes} further bytes of output were dropped: over the {MAX_CAPTURE_BYTES}-byte capture limit]\n"
            )
            .as_bytes(),
        )
        .await?;
    }
    out.flush().await?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::unreported;

    #[test]
    fn progress_reports_only_new_whole_characters() {
        let mut reported = 0;
        let mut captured = b"one\n".to_vec();
        assert_eq!(
            unreported(&captured, &mut reported).as_deref(),
            Some("one\n")
        );
        assert_eq!(unreported(&captured, &mut reported), None);
        // "é" arrives in two reads: the half waits for its other byte.
        captured.extend_from_slice(&[b't', 0xc3]);
        assert_eq!(unreported(&captured, &mut reported).as_deref(), Some("t"));
        captured.push(0xa9);
        assert_eq!(unreported(&captured, &mut reported).as_deref(), Some("é"));
        assert_eq!(reported, captured.len());
        // A flood: only its tail is reported, from a whole character.
        let mut flood = "é".repeat(100_000).into_bytes();
        flood.push(b'!');
        let mut reported = 0;
        let tail = unreported(&flood, &mut reported).unwrap();
        assert!(tail.len() <= super::PROGRESS_MAX_BYTES && tail.ends_with("é!"));
        assert_eq!(reported, flood.len());
    }
}
