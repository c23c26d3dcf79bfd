//! One connected MCP server: its child process (stdio) or HTTP session, its tools, and
//! tool calls with a timeout, abort and a clear error when the server is gone.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gyre_tools::{INTERRUPTED_MESSAGE, ToolOutput};
use rmcp::model::{
    CallToolRequestParams, ClientConfig, JsonObject, ReadResourceRequestParams, ReadResourceResult,
    Resource, Tool as McpToolInfo,
};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceError};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;
use crate::sdk::SdkChannel;
use crate::start::{StartError, handshake};

/// The last lines a server wrote on stderr, kept to explain a failure.
const STDERR_TAIL_LINES: usize = 20;

/// The child process of a stdio server. Dropping it ends the server's whole process
/// group, so nothing it started (`npx` starts `node`) outlives gyre's session.
#[derive(Debug)]
struct ChildProcess {
    child: Mutex<Child>,
    /// The process group: the child was made its leader.
    pgid: Option<u32>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl ChildProcess {
    fn spawn(
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
    ) -> Result<
        (
            Self,
            tokio::process::ChildStdout,
            tokio::process::ChildStdin,
        ),
        StartError,
    > {
        let mut cmd = Command::new(command);
        // gyre's own credentials are not the server's, unless its config names them.
        for name in gyre_tools::sandbox::SECRET_ENV {
            if !env.contains_key(*name) {
                cmd.env_remove(name);
            }
        }
        cmd.args(args)
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own group: a terminal's Ctrl+C reaches gyre alone (gyre aborts the call),
            // and the group is ended with the session.
            .process_group(0);
        let mut child = cmd.spawn().map_err(|source| StartError::Spawn {
            command: command.to_owned(),
            source,
        })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(StartError::Spawn {
                command: command.to_owned(),
                source: std::io::Error::other("its stdin or stdout could not be piped"),
            });
        };
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr.take() {
            tokio::spawn(keep_stderr_tail(pipe, Arc::clone(&stderr)));
        }
        let pgid = child.id();
        Ok((
            Self {
                child: Mutex::new(child),
                pgid,
                stderr,
            },
            stdout,
            stdin,
        ))
    }

    /// The exit status, once the process has ended.
    fn exit_status(&self) -> Option<ExitStatus> {
        self.child
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .try_wait()
            .ok()
            .flatten()
    }

    /// `"; its last words on stderr: …"`, or nothing when it said nothing.
    fn stderr_note(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        match tail.back() {
            Some(last) => format!("; its stderr ended with: {last}"),
            None => String::new(),
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid {
            kill_group(pgid);
        }
        // `kill_on_drop` then SIGKILLs the leader itself if SIGTERM left it running.
    }
}

/// SIGTERM to the group the child leads (it was spawned with `process_group(0)`).
fn kill_group(pgid: u32) {
    let pid = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
    }
}

async fn keep_stderr_tail(pipe: ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(pipe).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "gyre_mcp::stderr", "{line}");
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        if tail.len() == STDERR_TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(line);
    }
}

/// A live connection to one server.
#[derive(Debug)]
pub struct Server {
    name: String,
    service: RunningService<RoleClient, ClientConfig>,
    child: Option<ChildProcess>,
    tools: Vec<McpToolInfo>,
    call_timeout: Duration,
    /// Set when a request found the connection closed.
    closed: Mutex<Option<String>>,
}

impl Server {
    /// Connects to the server `config` describes and lists its tools, within `timeout`.
    ///
    /// # Errors
    /// A command that cannot start, a failed handshake or tool listing, no answer in time,
    /// a transport gyre does not support.
    pub async fn connect(
        name: &str,
        config: &ServerConfig,
        cwd: &Path,
        timeout: Duration,
        call_timeout: Duration,
        network: &gyre_api::NetworkOptions,
        sdk: Option<SdkChannel>,
    ) -> Result<Self, StartError> {
        let (service, child) = match config {
            ServerConfig::Stdio { command, args, env } => {
                let (child, stdout, stdin) = ChildProcess::spawn(command, args, env, cwd)?;
                match handshake((stdout, stdin), timeout).await {
                    Ok(service) => (service, Some(child)),
                    Err(failure) => {
                        // Give its stderr a moment to say why it failed.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        return Err(failure.with_stderr(child.stderr_note()));
                    }
                }
            }
            ServerConfig::Http { url, headers } => {
                let client = network
                    .client_builder()?
                    .build()
                    .map_err(|e| StartError::Client(e.to_string()))?;
                let mut custom = std::collections::HashMap::new();
                for (key, value) in headers {
                    let header_error = |message: String| StartError::Header {
                        name: key.clone(),
                        message,
                    };
                    let name = http::HeaderName::try_from(key.as_str())
                        .map_err(|e| header_error(e.to_string()))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|e| header_error(e.to_string()))?;
                    custom.insert(name, value);
                }
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(custom),
                );
                (handshake(transport, timeout).await?, None)
            }
            ServerConfig::Sse { url, headers } => {
                let client = network
                    .client_builder()?
                    .build()
                    .map_err(|e| StartError::Client(e.to_string()))?;
                let started = std::time::Instant::now();
                let transport = crate::sse::connect(client, url, headers, timeout).await?;
                let left = timeout.saturating_sub(started.elapsed());
                (handshake(transport, left).await?, None)
            }
            ServerConfig::Sdk => {
                let channel = sdk.ok_or(StartError::NeedsSdkControl)?;
                (channel.handshake(timeout).await?, None)
            }
        };
        let tools = match tokio::time::timeout(timeout, service.list_all_tools()).await {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(StartError::ListTools(e.to_string())),
            Err(_) => {
                return Err(StartError::Timeout {
                    timeout,
                    stderr: child
                        .as_ref()
                        .map(ChildProcess::stderr_note)
                        .unwrap_or_default(),
                });
            }
        };
        Ok(Self {
            name: name.to_owned(),
            service,
            child,
            tools,
            call_timeout,
            closed: Mutex::new(None),
        })
    }

    /// The server's name in the config.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools it listed when it started.
    #[must_use]
    pub fn tools(&self) -> &[McpToolInfo] {
        &self.tools
    }

    /// Whether the server said it offers resources.
    #[must_use]
    pub fn offers_resources(&self) -> bool {
        self.service
            .peer_info()
            .is_some_and(|info| info.capabilities.resources.is_some())
    }

    /// Why the server can no longer be used, once it cannot: it exited, or its
    /// connection closed.
    #[must_use]
    pub fn failure(&self) -> Option<String> {
        if let Some(status) = self.child.as_ref().and_then(ChildProcess::exit_status) {
            return Some(format!("it exited ({status})"));
        }
        self.closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Calls `tool` with `arguments`. Every failure is an error output naming the server:
    /// an abort (`cancel`), no answer within the call timeout, a server that is gone.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: JsonObject,
        cancel: &CancellationToken,
    ) -> ToolOutput {
        if let Some(why) = self.failure() {
            return self.gone(&why);
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // Dropping the request future (abort, timeout) sends `notifications/cancelled`.
        let answer = tokio::select! {
            () = cancel.cancelled() => return ToolOutput::error(INTERRUPTED_MESSAGE),
            answer = tokio::time::timeout(self.call_timeout, self.service.call_tool(params)) => answer,
        };
        match answer {
            Ok(Ok(result)) => crate::result::to_output(result),
            Ok(Err(e)) => self.request_error(tool, &e).await,
            Err(_) => ToolOutput::error(format!(
                "MCP server \"{}\" did not answer {tool} within {}s; the call was cancelled (MCP_TOOL_TIMEOUT sets the limit, in milliseconds)",
                self.name,
                self.call_timeout.as_secs_f64()
            )),
        }
    }

    /// Lists the server's resources (an empty list when it offers none).
    ///
    /// # Errors
    /// The server's error, or a closed connection.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ServiceError> {
        self.service.list_all_resources().await
    }

    /// Reads one resource.
    ///
    /// # Errors
    /// The server's error, or a closed connection.
    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, ServiceError> {
        self.service
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
    }

    async fn request_error(&self, tool: &str, error: &ServiceError) -> ToolOutput {
        match error {
            ServiceError::McpError(e) => ToolOutput::error(format!(
                "MCP server \"{}\" refused {tool}: {}",
                self.name, e.message
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                // A process that just died may not have been reaped yet.
                tokio::time::sleep(Duration::from_millis(20)).await;
                let why = self
                    .failure()
                    .unwrap_or_else(|| format!("its connection closed ({error})"));
                *self.closed.lock().unwrap_or_else(PoisonError::into_inner) = Some(why.clone());
                self.gone(&why)
            }
            other => ToolOutput::error(format!(
                "MCP server \"{}\" failed to run {tool}: {other}",
                self.name
            )),
        }
    }

    fn gone(&self, why: &str) -> ToolOutput {
        let stderr = self
            .child
            .as_ref()
            .map(ChildProcess::stderr_note)
            .unwrap_or_default();
        ToolOutput::error(format!(
            "MCP server \"{}\" is not running: {why}{stderr}. Its tools are unavailable for the rest of this session.",
            self.name
        ))
    }
}
