//! The editor's files and terminals: gyre-tools' [`EditorFiles`] over the client's
//! `fs/read_text_file` and `fs/write_text_file`, and its [`EditorTerminals`] over
//! `terminal/*`, for a client that offers them.
//!
//! The tools ask from their own threads (files from blocking ones, Bash from the
//! runtime's); the requests are sent from the connection's thread by [`serve`], and the
//! tool waits for the answer.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use agent_client_protocol::{self as acp, Client as _};
use gyre_tools::editor::{
    EditorFiles, EditorTerminals, TerminalCommand, TerminalEnding, TerminalRun,
};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::Connection;

/// The terminal each call ran in, so its final update shows it too.
pub type Shown = Rc<RefCell<HashMap<String, acp::TerminalId>>>;

/// A Bash command for the editor's terminal.
pub struct TerminalJob {
    session_id: acp::SessionId,
    command: String,
    cwd: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
    cancel: CancellationToken,
    tool_use_id: Option<String>,
    output_byte_limit: usize,
}

/// A request of a tool to the editor.
pub enum FsRequest {
    Read {
        request: acp::ReadTextFileRequest,
        reply: oneshot::Sender<Option<String>>,
    },
    Write {
        request: acp::WriteTextFileRequest,
        reply: oneshot::Sender<Result<(), String>>,
    },
    Terminal {
        job: TerminalJob,
        reply: oneshot::Sender<std::io::Result<TerminalRun>>,
    },
}

/// Where the tools' requests go.
pub type FsRequests = mpsc::UnboundedSender<FsRequest>;

/// Sends the tools' requests to the client, each as it comes (they may overlap).
pub fn serve(conn: Connection, shown: Shown) -> FsRequests {
    let (requests, mut incoming) = mpsc::unbounded_channel::<FsRequest>();
    tokio::task::spawn_local(async move {
        while let Some(request) = incoming.recv().await {
            let conn = Rc::clone(&conn);
            let shown = Rc::clone(&shown);
            tokio::task::spawn_local(async move {
                let Some(conn) = conn.get() else {
                    return;
                };
                match request {
                    FsRequest::Read { request, reply } => {
                        // An error (no such buffer, a client that cannot read it): the
                        // disk is read instead.
                        let text = conn.read_text_file(request).await.ok().map(|r| r.content);
                        let _ = reply.send(text);
                    }
                    FsRequest::Write { request, reply } => {
                        let done = conn
                            .write_text_file(request)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string());
                        let _ = reply.send(done);
                    }
                    FsRequest::Terminal { job, reply } => {
                        let _ = reply.send(run_terminal(conn, job, &shown).await);
                    }
                }
            });
        }
    });
    requests
}

/// One session's view of the editor's files: what the client said it can do.
#[derive(Debug)]
pub struct ClientFiles {
    pub session_id: acp::SessionId,
    pub read: bool,
    pub write: bool,
    pub requests: FsRequests,
}

impl std::fmt::Debug for FsRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read { request, .. } => f.debug_tuple("Read").field(&request.path).finish(),
            Self::Write { request, .. } => f.debug_tuple("Write").field(&request.path).finish(),
            Self::Terminal { job, .. } => f.debug_tuple("Terminal").field(&job.command).finish(),
        }
    }
}

/// An ACP error as an I/O error saying what the editor said.
fn refused(what: &str) -> impl FnOnce(acp::Error) -> std::io::Error + '_ {
    move |e| std::io::Error::other(format!("{what}: {e}"))
}

/// The exit code a shell would give: the code, or 128 + the signal.
fn exit_code(status: &acp::TerminalExitStatus) -> i32 {
    if let Some(code) = status.exit_code {
        return i32::try_from(code).unwrap_or(i32::MAX);
    }
    let signal = status.signal.as_deref().unwrap_or_default();
    let number = match signal.trim_start_matches("SIG") {
        "HUP" => 1,
        "INT" => 2,
        "KILL" => 9,
        "SEGV" => 11,
        "PIPE" => 13,
        "TERM" => 15,
        _ => 0,
    };
    128 + number
}

/// Creates the terminal, shows it in the call, waits for the command (or its timeout,
/// or the turn's abort, then kills it), reads its output and releases it.
async fn run_terminal(
    conn: &acp::AgentSideConnection,
    job: TerminalJob,
    shown: &Shown,
) -> std::io::Result<TerminalRun> {
    let sid = job.session_id.clone();
    let env = job
        .env
        .iter()
        .map(|(k, v)| acp::EnvVariable::new(k.clone(), v.clone()))
        .collect();
    let created = conn
        .create_terminal(
            acp::CreateTerminalRequest::new(sid.clone(), "bash")
                .args(vec!["-c".to_owned(), job.command.clone()])
                .env(env)
                .cwd(job.cwd.clone())
                .output_byte_limit(u64::try_from(job.output_byte_limit).ok()),
        )
        .await
        .map_err(refused("the editor could not create a terminal"))?;
    let id = created.terminal_id;
    if let Some(call) = &job.tool_use_id {
        shown.borrow_mut().insert(call.clone(), id.clone());
        let update = acp::ToolCallUpdate::new(
            call.clone(),
            acp::ToolCallUpdateFields::new().content(vec![acp::ToolCallContent::Terminal(
                acp::Terminal::new(id.clone()),
            )]),
        );
        let _ = conn
            .session_notification(acp::SessionNotification::new(
                sid.clone(),
                acp::SessionUpdate::ToolCallUpdate(update),
            ))
            .await;
    }
    let ending = tokio::select! {
        exit = conn.wait_for_terminal_exit(acp::WaitForTerminalExitRequest::new(sid.clone(), id.clone())) => {
            TerminalEnding::Exited(exit_code(&exit.map_err(refused("the editor's terminal failed"))?.exit_status))
        }
        () = tokio::time::sleep(job.timeout) => TerminalEnding::TimedOut,
        () = job.cancel.cancelled() => TerminalEnding::Cancelled,
    };
    if !matches!(ending, TerminalEnding::Exited(_)) {
        let _ = conn
            .kill_terminal(acp::KillTerminalRequest::new(sid.clone(), id.clone()))
            .await;
    }
    let output = conn
        .terminal_output(acp::TerminalOutputRequest::new(sid.clone(), id.clone()))
        .await;
    let _ = conn
        .release_terminal(acp::ReleaseTerminalRequest::new(sid, id))
        .await;
    let output = output.map_err(refused("the editor could not give the terminal's output"))?;
    Ok(TerminalRun {
        output: output.output,
        truncated: output.truncated,
        ending,
    })
}

/// One session's view of the editor's terminals.
#[derive(Debug)]
pub struct ClientTerminals {
    pub session_id: acp::SessionId,
    pub requests: FsRequests,
}

impl EditorTerminals for ClientTerminals {
    fn run<'a>(
        &'a self,
        command: TerminalCommand<'a>,
    ) -> futures::future::BoxFuture<'a, std::io::Result<TerminalRun>> {
        let job = TerminalJob {
            session_id: self.session_id.clone(),
            command: command.command.to_owned(),
            cwd: command.cwd.to_path_buf(),
            env: command.env.to_vec(),
            timeout: command.timeout,
            cancel: command.cancel.clone(),
            tool_use_id: command.tool_use_id.map(str::to_owned),
            output_byte_limit: command.output_byte_limit,
        };
        Box::pin(async move {
            let closed = || std::io::Error::other("the editor's connection is closed");
            let (reply, answer) = oneshot::channel();
            self.requests
                .send(FsRequest::Terminal { job, reply })
                .map_err(|_| closed())?;
            answer.await.map_err(|_| closed())?
        })
    }
}

impl EditorFiles for ClientFiles {
    fn read_text(&self, path: &Path) -> Option<String> {
        if !self.read {
            return None;
        }
        let (reply, answer) = oneshot::channel();
        let request = acp::ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
        self.requests
            .send(FsRequest::Read { request, reply })
            .ok()?;
        answer.blocking_recv().ok().flatten()
    }

    fn write_text(&self, path: &Path, text: &str) -> Option<std::io::Result<()>> {
        if !self.write {
            return None;
        }
        let (reply, answer) = oneshot::channel();
        let request = acp::WriteTextFileRequest::new(
            self.session_id.clone(),
            path.to_path_buf(),
            text.to_owned(),
        );
        let closed = || std::io::Error::other("the editor's connection is closed");
        if self
            .requests
            .send(FsRequest::Write { request, reply })
            .is_err()
        {
            return Some(Err(closed()));
        }
        Some(match answer.blocking_recv() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(std::io::Error::other(format!(
                "the editor refused the write: {why}"
            ))),
            Err(_) => Err(closed()),
        })
    }
}
