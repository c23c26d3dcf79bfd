//! The one error type of the library.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can go wrong loading a script or starting a [`TestServer`](crate::TestServer).
///
/// Messages are complete on their own (the file, then the underlying I/O or serde
/// message), so the underlying error is part of `Display` rather than `source()`.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// A TLS front's certificates or TLS config could not be made.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    /// The script file could not be read.
    #[error("cannot read script {}: {error}", path.display())]
    ReadScript {
        /// The file that was asked for.
        path: PathBuf,
        /// Why reading it failed.
        error: io::Error,
    },
    /// The script file is not valid JSON or not a valid script.
    #[error("invalid script {}: {error}", path.display())]
    ParseScriptFile {
        /// The file that was read.
        path: PathBuf,
        /// What serde found wrong, with the turn index (`turns[2]: …`) where it applies.
        error: serde_json::Error,
    },
    /// A stream file has a line that is not an event.
    #[error("invalid stream file {}:{line}: {message}", path.display())]
    ParseEvents {
        /// The file that was read.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A script given as a JSON string is not valid JSON or not a valid script.
    #[error("invalid script: {0}")]
    ParseScript(serde_json::Error),
    /// A script is well-formed but cannot be served (e.g. `chunk_chars` of 0).
    #[error("invalid script: {0}")]
    InvalidScript(String),
    /// The listening socket could not be bound.
    #[error("cannot listen on {addr}: {error}")]
    Bind {
        /// The address that was asked for.
        addr: SocketAddr,
        /// Why binding failed.
        error: io::Error,
    },
    /// [`TestServer::start`](crate::TestServer::start) was called outside a tokio runtime.
    #[error(
        "TestServer::start must be called inside a tokio runtime; \
         use TestServer::spawn from synchronous code"
    )]
    NoRuntime,
    /// The background runtime or thread of [`TestServer::spawn`](crate::TestServer::spawn)
    /// could not be started.
    #[error("cannot start the server thread: {0}")]
    Runtime(io::Error),
}
