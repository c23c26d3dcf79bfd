//! stdin and stdout as the connection's byte streams, with the JSON-RPC errors the
//! connection itself leaves unsaid: a line that is not JSON gets a parse error, and
//! JSON that is no JSON-RPC message an invalid-request error (both with a null id, as
//! JSON-RPC 2.0 says), and the connection goes on with the next line.

use std::future::Future;

use serde::Serialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::compat::{Compat, TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

/// Room for a few messages in each direction.
const PIPE_BYTES: usize = 256 * 1024;

/// JSON-RPC 2.0's codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// A JSON-RPC 2.0 error response to a message that has no id to answer by.
#[derive(Debug, Serialize)]
struct Refusal {
    jsonrpc: &'static str,
    id: Option<()>,
    error: RefusalError,
}

#[derive(Debug, Serialize)]
struct RefusalError {
    code: i64,
    message: String,
}

/// What to answer a line from the client with instead of handing it on, if anything.
fn refusal(line: &str) -> Option<Refusal> {
    let (code, message) = match serde_json::from_str::<Value>(line) {
        Err(e) => (PARSE_ERROR, format!("Parse error: the line is not JSON ({e})")),
        Ok(Value::Object(message)) if message.contains_key("method") || message.contains_key("id") => {
            return None;
        }
        Ok(_) => (
            INVALID_REQUEST,
            "Invalid Request: a message is one JSON-RPC 2.0 object with a \"method\" (a request or notification) or an \"id\" (a response)".to_owned(),
        ),
    };
    Some(Refusal {
        jsonrpc: "2.0",
        id: None,
        error: RefusalError { code, message },
    })
}

/// The connection's ends and the tasks that move lines between them and stdio.
pub struct Stdio<R, W> {
    /// What the connection reads: stdin's messages; it ends when stdin does.
    pub incoming: Compat<DuplexStream>,
    /// What the connection writes.
    pub outgoing: Compat<DuplexStream>,
    /// Reads stdin.
    pub read: R,
    /// Writes stdout; ends once the connection's output is dropped and written.
    pub write: W,
}

/// See [`Stdio`].
pub fn stdio() -> Stdio<impl Future<Output = ()>, impl Future<Output = ()>> {
    let (agent_in, mut feed) = tokio::io::duplex(PIPE_BYTES);
    let (agent_out, drain) = tokio::io::duplex(PIPE_BYTES);
    let (errors, mut error_lines) = mpsc::unbounded_channel::<String>();
    let read = async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            match refusal(&line) {
                Some(error) => {
                    if let Ok(line) = serde_json::to_string(&error) {
                        let _ = errors.send(line);
                    }
                }
                None => {
                    let mut line = line;
                    line.push('\n');
                    if feed.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `feed` ends the connection's input.
    };
    let write = async move {
        let mut stdout = tokio::io::stdout();
        let mut replies = BufReader::new(drain).lines();
        loop {
            let line = tokio::select! {
                line = replies.next_line() => match line {
                    Ok(Some(line)) => line,
                    _ => break,
                },
                Some(line) = error_lines.recv() => line,
            };
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                break;
            }
        }
    };
    Stdio {
        incoming: agent_in.compat(),
        outgoing: agent_out.compat_write(),
        read,
        write,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_rpc_messages_pass_and_the_rest_is_answered_with_its_error() {
        assert!(refusal(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).is_none());
        assert!(refusal(r#"{"jsonrpc":"2.0","method":"session/cancel"}"#).is_none());
        assert!(refusal(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#).is_none());
        let error = serde_json::to_value(refusal("{not json").unwrap()).unwrap();
        assert_eq!(error["error"]["code"], PARSE_ERROR);
        assert_eq!(error["id"], Value::Null);
        assert_eq!(error["jsonrpc"], "2.0");
        let error = serde_json::to_value(refusal("[1, 2]").unwrap()).unwrap();
        assert_eq!(error["error"]["code"], INVALID_REQUEST);
    }
}
