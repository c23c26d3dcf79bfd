//! The editor's files: gyre-tools' [`EditorFiles`] over the client's
//! `fs/read_text_file` and `fs/write_text_file`, for a client that offers them.
//!
//! The tools ask from blocking threads; the requests are sent from the connection's own
//! thread by [`serve`], and the tool waits for the answer.

use std::path::Path;

use agent_client_protocol::{self as acp, Client as _};
use gyre_tools::editor::EditorFiles;
use tokio::sync::{mpsc, oneshot};

use crate::Connection;

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
}

/// Where the tools' requests go.
pub type FsRequests = mpsc::UnboundedSender<FsRequest>;

/// Sends the tools' requests to the client, each as it comes (they may overlap).
pub fn serve(conn: Connection) -> FsRequests {
    let (requests, mut incoming) = mpsc::unbounded_channel::<FsRequest>();
    tokio::task::spawn_local(async move {
        while let Some(request) = incoming.recv().await {
            let conn = std::rc::Rc::clone(&conn);
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
        }
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
