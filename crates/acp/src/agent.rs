//! The agent side of the connection: each ACP request as what it does to gyre's
//! sessions. A session runs in a task of its own ([`crate::worker`]); the editor's
//! requests reach it through its [`Handle`], so sessions never share state.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use agent_client_protocol::{self as acp, Client as _};
use gyre_core::settings::Settings;
use gyre_core::{Environment, Resume, SessionOptions};
use serde_json::{Map, Value, json};

use crate::Connection;
use crate::worker::{self, Handle};

/// The models the model picker offers besides the session's own.
const MODELS: [&str; 3] = ["claude-opus-4-6", "claude-sonnet-4-5", "claude-haiku-4-5"];

/// The id of the model picker among the session's config options.
pub const MODEL_OPTION: &str = "model";

/// gyre as an ACP agent.
pub struct GyreAgent {
    conn: Connection,
    /// What `gyre acp` was started with; each session starts from these.
    base: SessionOptions,
    /// The process's variables, read once.
    env: Environment,
    sessions: RefCell<HashMap<String, Handle>>,
    /// What the client said it can do, in `initialize`.
    client: RefCell<acp::ClientCapabilities>,
    /// Where the tools' requests for the editor's files and terminals go, once a
    /// session uses them.
    requests: OnceCell<crate::editor::FsRequests>,
    /// The terminal each call ran in.
    shown: crate::editor::Shown,
}

impl std::fmt::Debug for GyreAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GyreAgent")
            .field("sessions", &self.sessions.borrow().len())
            .finish_non_exhaustive()
    }
}

fn invalid(message: impl Into<String>) -> acp::Error {
    let message: String = message.into();
    acp::Error::invalid_params().data(Value::String(message))
}

/// The client's MCP servers in the `mcpServers` form of an `--mcp-config` file.
fn mcp_config(servers: &[acp::McpServer]) -> Option<Value> {
    if servers.is_empty() {
        return None;
    }
    let pairs = |items: Vec<(String, String)>| -> Value {
        Value::Object(
            items
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        )
    };
    let remote = |kind: &str, url: &str, headers: &[acp::HttpHeader]| {
        let headers = headers.iter().map(|h| (h.name.clone(), h.value.clone()));
        json!({"type": kind, "url": url, "headers": pairs(headers.collect())})
    };
    let mut out = Map::new();
    for server in servers {
        let (name, config) = match server {
            acp::McpServer::Stdio(s) => (
                s.name.clone(),
                json!({
                    "command": s.command,
                    "args": s.args,
                    "env": pairs(s.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect()),
                }),
            ),
            acp::McpServer::Http(s) => (s.name.clone(), remote("http", &s.url, &s.headers)),
            acp::McpServer::Sse(s) => (s.name.clone(), remote("sse", &s.url, &s.headers)),
            // A transport of a later protocol: not started, said on stderr.
            #[allow(unreachable_patterns)]
            _ => {
                eprintln!("gyre: an MCP server of an unknown transport was not started");
                continue;
            }
        };
        out.insert(name, config);
    }
    Some(Value::Object(out))
}

/// The protocol versions gyre speaks.
const VERSIONS: [acp::ProtocolVersion; 1] = [acp::ProtocolVersion::V1];

/// The version to answer `initialize` with: the client's when gyre speaks it, else the
/// newest gyre speaks (the client then decides whether it can go on).
fn negotiate(requested: acp::ProtocolVersion) -> acp::ProtocolVersion {
    if VERSIONS.contains(&requested) {
        requested
    } else {
        acp::ProtocolVersion::LATEST
    }
}

/// The permission modes an editor offers, by gyre's (Claude Code's) names.
fn modes(current: &str, bypass_allowed: bool) -> acp::SessionModeState {
    let mut modes = vec![
        acp::SessionMode::new("default", "Default")
            .description("Ask before edits and commands".to_owned()),
        acp::SessionMode::new("acceptEdits", "Accept edits")
            .description("Edit files in the project without asking".to_owned()),
        acp::SessionMode::new("plan", "Plan")
            .description("Read and plan; change nothing".to_owned()),
        acp::SessionMode::new("dontAsk", "Don't ask")
            .description("Refuse what would be asked about".to_owned()),
        acp::SessionMode::new("auto", "Auto")
            .description("A quick model decides what would be asked about".to_owned()),
    ];
    if bypass_allowed {
        modes.push(
            acp::SessionMode::new("bypassPermissions", "Bypass permissions")
                .description("Everything but what deny rules name".to_owned()),
        );
    }
    acp::SessionModeState::new(current.to_owned(), modes)
}

/// The model picker: the session's model and the usual ones.
pub fn model_option(current: &str) -> acp::SessionConfigOption {
    let mut names = vec![current.to_owned()];
    names.extend(
        MODELS
            .iter()
            .map(|m| (*m).to_owned())
            .filter(|m| m != current),
    );
    let options: Vec<_> = names
        .into_iter()
        .map(|m| acp::SessionConfigSelectOption::new(m.clone(), m))
        .collect();
    acp::SessionConfigOption::select(MODEL_OPTION, "Model", current.to_owned(), options)
        .category(acp::SessionConfigOptionCategory::Model)
}

/// The models `session/set_model` offers (the unstable model selection of ACP, which
/// editors read besides the model picker among the config options).
pub fn model_state(current: &str) -> acp::SessionModelState {
    let models = std::iter::once(current)
        .chain(MODELS.iter().copied().filter(|m| *m != current))
        .map(|m| acp::ModelInfo::new(m.to_owned(), m.to_owned()))
        .collect();
    acp::SessionModelState::new(current.to_owned(), models)
}

/// How a session is opened.
enum Opening {
    /// `session/new`.
    New,
    /// `session/load` and `session/resume`: the saved session with this id, its
    /// history replayed to the editor (load) or not (resume).
    Saved(String, Replay),
    /// `session/fork`: a new session that goes on from the saved one with this id.
    Fork(String),
}

/// Whether a saved session's history is sent to the editor when it opens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replay {
    Yes,
    No,
}

/// What the answer to a request that opened a session tells the editor.
struct Opened {
    id: acp::SessionId,
    modes: acp::SessionModeState,
    models: acp::SessionModelState,
    options: Vec<acp::SessionConfigOption>,
}

/// The sessions `session/list` shows: those of `cwd`, or of every folder.
fn session_infos(home: &Path, cwd: Option<&Path>) -> Vec<acp::SessionInfo> {
    let summaries = match cwd {
        Some(cwd) => gyre_core::sessions::list(home, cwd),
        None => gyre_core::sessions::list_all(home),
    };
    summaries
        .into_iter()
        .filter_map(|s| {
            // A transcript that never says where it ran cannot be loaded by folder.
            let folder = cwd
                .map(Path::to_path_buf)
                .or_else(|| s.cwd.as_ref().map(std::path::PathBuf::from))?;
            let title = (!s.first_prompt.is_empty()).then(|| s.first_prompt.clone());
            let updated = (!s.timestamp.is_empty()).then(|| s.timestamp.clone());
            Some(
                acp::SessionInfo::new(s.id, folder)
                    .title(title)
                    .updated_at(updated),
            )
        })
        .collect()
}

impl GyreAgent {
    /// An agent whose sessions start from `base` with the process's `env`.
    #[must_use]
    pub fn new(conn: Connection, base: SessionOptions, env: Environment) -> Self {
        Self {
            conn,
            base,
            env,
            sessions: RefCell::new(HashMap::new()),
            client: RefCell::new(acp::ClientCapabilities::default()),
            requests: OnceCell::new(),
            shown: Rc::default(),
        }
    }

    fn bypass_allowed(&self) -> bool {
        self.base.dangerously_skip_permissions || self.base.allow_dangerously_skip_permissions
    }

    fn handle(&self, id: &acp::SessionId) -> Result<Handle, acp::Error> {
        self.sessions.borrow().get(&*id.0).cloned().ok_or_else(|| {
            invalid(format!(
                "no session {} in this connection; start one with session/new or session/load",
                id.0
            ))
        })
    }

    /// Builds a session in `cwd`, with the folder's settings (its trust honoured as
    /// headless gyre does: what an untrusted project asked for is said on stderr and
    /// not used) and the client's MCP servers.
    async fn start(
        &self,
        cwd: &Path,
        servers: &[acp::McpServer],
        opening: Opening,
    ) -> Result<worker::Started, acp::Error> {
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(invalid(format!(
                "cwd {} is not an absolute path to a directory",
                cwd.display()
            )));
        }
        let home = self.env.gyre_home();
        let settings = Settings::load(&home, cwd).map_err(|e| invalid(e.to_string()))?;
        let trusted = gyre_core::trust::is_trusted(&home, cwd);
        let (servers_ignored, agents_ignored) = if trusted {
            (Vec::new(), Vec::new())
        } else {
            (
                gyre_core::trust::project_mcp_servers(cwd),
                gyre_core::agents::project_agent_names(cwd),
            )
        };
        let mut items =
            gyre_core::trust::ignored_items(&settings.untrusted, &servers_ignored, &agents_ignored);
        if !trusted {
            items.extend(gyre_core::commands::project_untrusted_item(cwd));
        }
        if !items.is_empty() {
            eprintln!("{}", gyre_core::trust::ignored_line(&items));
        }
        for warning in &settings.ignored {
            eprintln!("{warning}");
        }
        let env = self.env.clone().with_settings(&settings.env);
        let mut options = self.base.clone();
        // Chosen here: the editor's file requests name the session.
        let fresh = || uuid::Uuid::new_v4().to_string();
        let (session_id, resume) = match opening {
            Opening::New => (fresh(), Resume::New),
            Opening::Saved(id, _) => (id.clone(), Resume::Id(id)),
            Opening::Fork(from) => {
                options.fork_session = true;
                (fresh(), Resume::Id(from))
            }
        };
        if !matches!(resume, Resume::Id(ref id) if *id == session_id) {
            options.session_id = Some(session_id.clone());
        }
        let (progress, progressed) = worker::progress_sink();
        options.editor = Some(self.editor(&session_id, progress));
        options.resume = resume;
        options.initialize.mcp_servers = mcp_config(servers);
        let mcp = gyre_core::mcp_config::start(&options, cwd, &home, &env)
            .await
            .map_err(|e| invalid(e.to_string()))?;
        let session = gyre_core::session::build(&options, cwd, &settings, true, &env, mcp)
            .map_err(|e| invalid(e.to_string()))?;
        let (handle, started) = worker::spawn(
            session,
            Rc::clone(&self.conn),
            Rc::clone(&self.shown),
            progressed,
        );
        self.sessions
            .borrow_mut()
            .insert(started.session_id.clone(), handle);
        Ok(started)
    }

    /// Opens a session (`start`, or the one already open under that id), replays a
    /// loaded one's history, and tells the editor its slash commands.
    async fn open(
        &self,
        cwd: &Path,
        servers: &[acp::McpServer],
        opening: Opening,
    ) -> Result<Opened, acp::Error> {
        let replay = matches!(opening, Opening::Saved(_, Replay::Yes));
        // A session open in this connection is the one opened again, as it stands.
        let open = match &opening {
            Opening::Saved(id, _) => self.sessions.borrow().get(id.as_str()).cloned(),
            Opening::New | Opening::Fork(_) => None,
        };
        let started = match open {
            Some(handle) => handle.state().await?,
            None => self.start(cwd, servers, opening).await?,
        };
        let id = acp::SessionId::new(started.session_id.clone());
        if replay {
            for message in &started.history {
                for update in crate::updates::replay(message) {
                    self.notify(&id, update).await;
                }
            }
        }
        self.announce_commands(&id, &started.commands);
        Ok(Opened {
            modes: modes(&started.mode, self.bypass_allowed()),
            models: model_state(&started.model),
            options: vec![model_option(&started.model)],
            id,
        })
    }

    /// The editor's files and terminals for session `session_id`, those the client
    /// offers, and where the running calls' output goes to be shown.
    fn editor(&self, session_id: &str, progress: gyre_tools::ProgressSink) -> gyre_core::Editor {
        let client = self.client.borrow().clone();
        let (read, write) = (client.fs.read_text_file, client.fs.write_text_file);
        if !read && !write && !client.terminal {
            return gyre_core::Editor {
                files: None,
                terminals: None,
                progress: Some(progress),
            };
        }
        let requests = self
            .requests
            .get_or_init(|| crate::editor::serve(Rc::clone(&self.conn), Rc::clone(&self.shown)))
            .clone();
        let session_id = acp::SessionId::new(session_id.to_owned());
        let files: Option<Arc<dyn gyre_tools::editor::EditorFiles>> = (read || write).then(|| {
            Arc::new(crate::editor::ClientFiles {
                session_id: session_id.clone(),
                read,
                write,
                requests: requests.clone(),
            }) as _
        });
        let terminals: Option<Arc<dyn gyre_tools::editor::EditorTerminals>> =
            client.terminal.then(|| {
                Arc::new(crate::editor::ClientTerminals {
                    session_id,
                    requests,
                }) as _
            });
        gyre_core::Editor {
            files,
            terminals,
            progress: Some(progress),
        }
    }

    /// The slash commands, sent once the session's id is known to the editor: after
    /// the answer that names it.
    fn announce_commands(
        &self,
        session_id: &acp::SessionId,
        commands: &[gyre_core::commands::CommandInfo],
    ) {
        let conn = Rc::clone(&self.conn);
        let notification = acp::SessionNotification::new(
            session_id.clone(),
            acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(
                crate::prompt::available_commands(commands),
            )),
        );
        tokio::task::spawn_local(async move {
            // The answer is sent when the request's handler returns, before this runs.
            tokio::task::yield_now().await;
            if let Some(conn) = conn.get() {
                let _ = conn.session_notification(notification).await;
            }
        });
    }

    async fn notify(&self, session_id: &acp::SessionId, update: acp::SessionUpdate) {
        if let Some(conn) = self.conn.get() {
            // The client went away: the connection's end stops everything.
            let _ = conn
                .session_notification(acp::SessionNotification::new(session_id.clone(), update))
                .await;
        }
    }
}

#[async_trait::async_trait(?Send)]
impl acp::Agent for GyreAgent {
    async fn initialize(
        &self,
        args: acp::InitializeRequest,
    ) -> Result<acp::InitializeResponse, acp::Error> {
        *self.client.borrow_mut() = args.client_capabilities.clone();
        let version = negotiate(args.protocol_version);
        let capabilities = acp::AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(
                acp::PromptCapabilities::new()
                    .image(true)
                    .embedded_context(true),
            )
            .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(true))
            .session_capabilities(
                acp::SessionCapabilities::new()
                    .list(acp::SessionListCapabilities::new())
                    .fork(acp::SessionForkCapabilities::new())
                    .resume(acp::SessionResumeCapabilities::new())
                    .close(acp::SessionCloseCapabilities::new()),
            );
        Ok(acp::InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .agent_info(
                acp::Implementation::new("gyre", env!("CARGO_PKG_VERSION"))
                    .title("gyre".to_owned()),
            ))
    }

    async fn authenticate(
        &self,
        _args: acp::AuthenticateRequest,
    ) -> Result<acp::AuthenticateResponse, acp::Error> {
        // gyre reads its credentials from the environment and settings; nothing to do.
        Ok(acp::AuthenticateResponse::default())
    }

    async fn new_session(
        &self,
        args: acp::NewSessionRequest,
    ) -> Result<acp::NewSessionResponse, acp::Error> {
        let o = self
            .open(&args.cwd, &args.mcp_servers, Opening::New)
            .await?;
        Ok(acp::NewSessionResponse::new(o.id)
            .modes(o.modes)
            .models(o.models)
            .config_options(o.options))
    }

    async fn load_session(
        &self,
        args: acp::LoadSessionRequest,
    ) -> Result<acp::LoadSessionResponse, acp::Error> {
        let saved = Opening::Saved(args.session_id.0.to_string(), Replay::Yes);
        let o = self.open(&args.cwd, &args.mcp_servers, saved).await?;
        Ok(acp::LoadSessionResponse::new()
            .modes(o.modes)
            .models(o.models)
            .config_options(o.options))
    }

    async fn resume_session(
        &self,
        args: acp::ResumeSessionRequest,
    ) -> Result<acp::ResumeSessionResponse, acp::Error> {
        // As session/load, without replaying the history: the editor still shows it.
        let saved = Opening::Saved(args.session_id.0.to_string(), Replay::No);
        let o = self.open(&args.cwd, &args.mcp_servers, saved).await?;
        Ok(acp::ResumeSessionResponse::new()
            .modes(o.modes)
            .models(o.models)
            .config_options(o.options))
    }

    async fn fork_session(
        &self,
        args: acp::ForkSessionRequest,
    ) -> Result<acp::ForkSessionResponse, acp::Error> {
        let fork = Opening::Fork(args.session_id.0.to_string());
        let o = self.open(&args.cwd, &args.mcp_servers, fork).await?;
        Ok(acp::ForkSessionResponse::new(o.id)
            .modes(o.modes)
            .models(o.models)
            .config_options(o.options))
    }

    async fn close_session(
        &self,
        args: acp::CloseSessionRequest,
    ) -> Result<acp::CloseSessionResponse, acp::Error> {
        let handle = self.handle(&args.session_id)?;
        // The turn in flight stops; the task ends with the last handle.
        handle.cancel();
        self.sessions.borrow_mut().remove(&*args.session_id.0);
        Ok(acp::CloseSessionResponse::new())
    }

    async fn list_sessions(
        &self,
        args: acp::ListSessionsRequest,
    ) -> Result<acp::ListSessionsResponse, acp::Error> {
        if let Some(cursor) = &args.cursor {
            return Err(invalid(format!(
                "cursor {cursor:?} was not given by gyre: it lists every session in one page"
            )));
        }
        if let Some(cwd) = &args.cwd
            && !cwd.is_absolute()
        {
            return Err(invalid(format!(
                "cwd {} is not an absolute path",
                cwd.display()
            )));
        }
        let home = self.env.gyre_home();
        Ok(acp::ListSessionsResponse::new(session_infos(
            &home,
            args.cwd.as_deref(),
        )))
    }

    async fn set_session_model(
        &self,
        args: acp::SetSessionModelRequest,
    ) -> Result<acp::SetSessionModelResponse, acp::Error> {
        let handle = self.handle(&args.session_id)?;
        let model = handle.set_model(args.model_id.0.to_string()).await?;
        // The model picker among the config options says the same.
        self.notify(
            &args.session_id,
            acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(vec![
                model_option(&model),
            ])),
        )
        .await;
        Ok(acp::SetSessionModelResponse::new())
    }

    async fn prompt(&self, args: acp::PromptRequest) -> Result<acp::PromptResponse, acp::Error> {
        let handle = self.handle(&args.session_id)?;
        let stop = handle.prompt(crate::prompt::request(args.prompt)).await?;
        Ok(acp::PromptResponse::new(stop))
    }

    async fn cancel(&self, args: acp::CancelNotification) -> Result<(), acp::Error> {
        self.handle(&args.session_id)?.cancel();
        Ok(())
    }

    async fn set_session_mode(
        &self,
        args: acp::SetSessionModeRequest,
    ) -> Result<acp::SetSessionModeResponse, acp::Error> {
        let handle = self.handle(&args.session_id)?;
        let mode = handle
            .set_mode(&args.mode_id.0)
            .map_err(|e| invalid(e.to_string()))?;
        self.notify(
            &args.session_id,
            acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode)),
        )
        .await;
        Ok(acp::SetSessionModeResponse::new())
    }

    async fn set_session_config_option(
        &self,
        args: acp::SetSessionConfigOptionRequest,
    ) -> Result<acp::SetSessionConfigOptionResponse, acp::Error> {
        let handle = self.handle(&args.session_id)?;
        if &*args.config_id.0 != MODEL_OPTION {
            return Err(invalid(format!(
                "unknown config option {:?}; gyre has \"{MODEL_OPTION}\"",
                args.config_id.0
            )));
        }
        let model = handle.set_model(args.value.0.to_string()).await?;
        Ok(acp::SetSessionConfigOptionResponse::new(vec![
            model_option(&model),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_servers_become_an_mcp_config() {
        let stdio = acp::McpServer::Stdio(
            acp::McpServerStdio::new("files", "/bin/srv")
                .args(vec!["--x".into()])
                .env(vec![acp::EnvVariable::new("K", "V")]),
        );
        let http = acp::McpServer::Http(
            acp::McpServerHttp::new("web", "http://127.0.0.1:1/mcp")
                .headers(vec![acp::HttpHeader::new("Authorization", "t")]),
        );
        let config = mcp_config(&[stdio, http]).unwrap();
        assert_eq!(
            config,
            json!({
                "files": {"command": "/bin/srv", "args": ["--x"], "env": {"K": "V"}},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "t"}},
            })
        );
        assert!(mcp_config(&[]).is_none());
    }

    #[test]
    fn the_version_is_the_clients_when_gyre_speaks_it_else_gyres_newest() {
        assert_eq!(
            negotiate(acp::ProtocolVersion::V1),
            acp::ProtocolVersion::V1
        );
        assert_eq!(
            negotiate(acp::ProtocolVersion::V0),
            acp::ProtocolVersion::V1
        );
        assert_eq!(
            negotiate(serde_json::from_value(json!(2)).unwrap()),
            acp::ProtocolVersion::V1
        );
    }

    #[test]
    fn bypass_is_offered_only_when_the_session_may_use_it() {
        let ids = |state: acp::SessionModeState| -> Vec<String> {
            state
                .available_modes
                .iter()
                .map(|m| m.id.0.to_string())
                .collect()
        };
        assert!(!ids(modes("default", false)).contains(&"bypassPermissions".to_owned()));
        assert!(ids(modes("default", true)).contains(&"bypassPermissions".to_owned()));
    }
}
