//! `gyre acp` driven by an editor: the `agent-client-protocol` crate's client side
//! (what Zed uses) speaks ACP to the real binary over its stdio, against gyre-testkit.
//! The malformed-message case writes raw lines instead.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::rc::Rc;
use std::time::Duration;

use agent_client_protocol::{self as acp, Agent as _};
use gyre_e2e::Sandbox;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

/// How long a test waits for an update it expects.
const PATIENCE: Duration = Duration::from_secs(20);

/// A terminal's output once its command exited.
type Exited = Rc<RefCell<Option<std::process::Output>>>;

/// The editor's side: what it was told, and how it answers gyre's requests.
#[derive(Default)]
struct Editor {
    updates: RefCell<Vec<acp::SessionNotification>>,
    /// The option each permission question is answered with, in order.
    answers: RefCell<VecDeque<&'static str>>,
    asked: RefCell<Vec<acp::RequestPermissionRequest>>,
    /// Unsaved buffers, served to `fs/read_text_file`.
    buffers: RefCell<HashMap<PathBuf, String>>,
    /// What `fs/write_text_file` received.
    written: RefCell<Vec<(PathBuf, String)>>,
    /// Each terminal's command line, and its output once it exited.
    terminals: RefCell<Vec<(String, Exited)>>,
    changed: tokio::sync::Notify,
}

#[async_trait::async_trait(?Send)]
impl acp::Client for Editor {
    async fn request_permission(
        &self,
        args: acp::RequestPermissionRequest,
    ) -> acp::Result<acp::RequestPermissionResponse> {
        self.asked.borrow_mut().push(args);
        self.changed.notify_waiters();
        // A question waits for the test to queue its answer.
        let option = loop {
            let changed = self.changed.notified();
            if let Some(option) = self.answers.borrow_mut().pop_front() {
                break option;
            }
            changed.await;
        };
        let outcome =
            acp::RequestPermissionOutcome::Selected(acp::SelectedPermissionOutcome::new(option));
        Ok(acp::RequestPermissionResponse::new(outcome))
    }

    async fn session_notification(&self, args: acp::SessionNotification) -> acp::Result<()> {
        self.updates.borrow_mut().push(args);
        self.changed.notify_waiters();
        Ok(())
    }

    async fn read_text_file(
        &self,
        args: acp::ReadTextFileRequest,
    ) -> acp::Result<acp::ReadTextFileResponse> {
        match self.buffers.borrow().get(&args.path) {
            Some(text) => Ok(acp::ReadTextFileResponse::new(text.clone())),
            None => Err(acp::Error::resource_not_found(Some(
                args.path.display().to_string(),
            ))),
        }
    }

    async fn write_text_file(
        &self,
        args: acp::WriteTextFileRequest,
    ) -> acp::Result<acp::WriteTextFileResponse> {
        self.written.borrow_mut().push((args.path, args.content));
        Ok(acp::WriteTextFileResponse::new())
    }

    async fn create_terminal(
        &self,
        args: acp::CreateTerminalRequest,
    ) -> acp::Result<acp::CreateTerminalResponse> {
        let mut cmd = tokio::process::Command::new(&args.command);
        cmd.args(&args.args)
            .envs(args.env.iter().map(|e| (&e.name, &e.value)));
        if let Some(cwd) = &args.cwd {
            cmd.current_dir(cwd);
        }
        let done = Rc::new(RefCell::new(None));
        let id = {
            let mut terminals = self.terminals.borrow_mut();
            terminals.push((args.args.join(" "), Rc::clone(&done)));
            terminals.len() - 1
        };
        tokio::task::spawn_local(async move {
            let output = cmd.output().await.unwrap();
            *done.borrow_mut() = Some(output);
        });
        Ok(acp::CreateTerminalResponse::new(id.to_string()))
    }

    async fn wait_for_terminal_exit(
        &self,
        args: acp::WaitForTerminalExitRequest,
    ) -> acp::Result<acp::WaitForTerminalExitResponse> {
        let done =
            Rc::clone(&self.terminals.borrow()[args.terminal_id.0.parse::<usize>().unwrap()].1);
        loop {
            if let Some(output) = &*done.borrow() {
                let code = output.status.code().map(|c| u32::try_from(c).unwrap());
                return Ok(acp::WaitForTerminalExitResponse::new(
                    acp::TerminalExitStatus::new().exit_code(code),
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn terminal_output(
        &self,
        args: acp::TerminalOutputRequest,
    ) -> acp::Result<acp::TerminalOutputResponse> {
        let terminals = self.terminals.borrow();
        let done = terminals[args.terminal_id.0.parse::<usize>().unwrap()]
            .1
            .borrow();
        let output = done.as_ref().map_or_else(String::new, |o| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        Ok(acp::TerminalOutputResponse::new(output, false))
    }

    async fn release_terminal(
        &self,
        _args: acp::ReleaseTerminalRequest,
    ) -> acp::Result<acp::ReleaseTerminalResponse> {
        Ok(acp::ReleaseTerminalResponse::new())
    }
}

impl Editor {
    /// The updates of `session`, in order.
    fn updates_of(&self, session: &acp::SessionId) -> Vec<acp::SessionUpdate> {
        self.updates
            .borrow()
            .iter()
            .filter(|n| &n.session_id == session)
            .map(|n| n.update.clone())
            .collect()
    }

    /// Waits until `done` holds of what the editor has seen.
    async fn wait_until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let waited = tokio::time::timeout(PATIENCE, async {
            loop {
                let changed = self.changed.notified();
                if done(self) {
                    return;
                }
                changed.await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "timed out waiting for {what}; updates: {:#?}",
            self.updates.borrow()
        );
    }
}

/// A running `gyre acp` and the editor's connection to it.
struct Acp {
    conn: acp::ClientSideConnection,
    editor: Rc<Editor>,
    /// Killed when the test drops it.
    _child: tokio::process::Child,
}

impl Acp {
    /// Starts `gyre acp` in the sandbox's project, against `server`, and initializes
    /// the connection with these file capabilities.
    async fn start(
        sandbox: &Sandbox,
        server: &TestServer,
        fs: acp::FileSystemCapabilities,
    ) -> Self {
        Self::start_with_caps(sandbox, server, acp::ClientCapabilities::new().fs(fs)).await
    }

    async fn start_with_caps(
        sandbox: &Sandbox,
        server: &TestServer,
        caps: acp::ClientCapabilities,
    ) -> Self {
        let mut cmd = tokio::process::Command::from(sandbox.gyre(server).unwrap());
        cmd.arg("acp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let stdin = child.stdin.take().unwrap().compat_write();
        let stdout = child.stdout.take().unwrap().compat();
        let editor = Rc::new(Editor::default());
        let (conn, io) =
            acp::ClientSideConnection::new(Rc::clone(&editor), stdin, stdout, |task| {
                tokio::task::spawn_local(task);
            });
        tokio::task::spawn_local(io);
        let init = conn
            .initialize(
                acp::InitializeRequest::new(acp::ProtocolVersion::V1).client_capabilities(caps),
            )
            .await
            .unwrap();
        assert_eq!(init.protocol_version, acp::ProtocolVersion::V1);
        assert!(init.agent_capabilities.load_session);
        Self {
            conn,
            editor,
            _child: child,
        }
    }

    async fn new_session(&self, cwd: &Path) -> acp::NewSessionResponse {
        self.conn
            .new_session(acp::NewSessionRequest::new(cwd.to_path_buf()))
            .await
            .unwrap()
    }

    async fn prompt(&self, session: &acp::SessionId, text: &str) -> acp::Result<acp::StopReason> {
        self.conn
            .prompt(acp::PromptRequest::new(
                session.clone(),
                vec![acp::ContentBlock::from(text.to_owned())],
            ))
            .await
            .map(|r| r.stop_reason)
    }

    /// Loads session `id`; the replayed user text and answer.
    async fn load(&self, id: &acp::SessionId, cwd: &Path) -> (String, String) {
        self.conn
            .load_session(acp::LoadSessionRequest::new(id.clone(), cwd.to_path_buf()))
            .await
            .unwrap();
        let replayed = self.editor.updates_of(id);
        let user = replayed
            .iter()
            .filter(|u| matches!(u, acp::SessionUpdate::UserMessageChunk(_)))
            .filter_map(text_of)
            .collect();
        (user, answer_text(&replayed))
    }

    fn answer(&self, options: &[&'static str]) {
        self.editor
            .answers
            .borrow_mut()
            .extend(options.iter().copied());
        self.editor.changed.notify_waiters();
    }
}

/// Runs `test` on a single thread, as the ACP crate's futures need.
fn local(test: impl std::future::Future<Output = ()>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&runtime, test);
}

/// The transcript of session `id` in the sandbox's gyre home.
fn transcript_of(sandbox: &Sandbox, id: &acp::SessionId) -> PathBuf {
    std::fs::read_dir(sandbox.home().join("projects"))
        .unwrap()
        .map(|d| d.unwrap().path().join(format!("{}.jsonl", id.0)))
        .find(|p| p.is_file())
        .unwrap()
}

fn no_fs() -> acp::FileSystemCapabilities {
    acp::FileSystemCapabilities::new()
}

fn text_of(update: &acp::SessionUpdate) -> Option<String> {
    let (acp::SessionUpdate::AgentMessageChunk(chunk)
    | acp::SessionUpdate::UserMessageChunk(chunk)
    | acp::SessionUpdate::AgentThoughtChunk(chunk)) = update
    else {
        return None;
    };
    match &chunk.content {
        acp::ContentBlock::Text(text) => Some(text.text.clone()),
        _ => None,
    }
}

fn answer_text(updates: &[acp::SessionUpdate]) -> String {
    updates
        .iter()
        .filter(|u| matches!(u, acp::SessionUpdate::AgentMessageChunk(_)))
        .filter_map(text_of)
        .collect()
}

fn tool_calls(updates: &[acp::SessionUpdate]) -> Vec<acp::ToolCall> {
    updates
        .iter()
        .filter_map(|u| match u {
            acp::SessionUpdate::ToolCall(call) => Some(call.clone()),
            _ => None,
        })
        .collect()
}

/// The last status each call was given, and the text of its content.
fn outcome_of(updates: &[acp::SessionUpdate], id: &str) -> (Option<acp::ToolCallStatus>, String) {
    let mut status = None;
    let mut text = String::new();
    for update in updates {
        if let acp::SessionUpdate::ToolCallUpdate(u) = update
            && &*u.tool_call_id.0 == id
        {
            status = u.fields.status.or(status);
            if let Some(content) = &u.fields.content {
                text = content
                    .iter()
                    .filter_map(|c| match c {
                        acp::ToolCallContent::Content(c) => match &c.content {
                            acp::ContentBlock::Text(t) => Some(t.text.clone()),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
            }
        }
    }
    (status, text)
}

fn bash(id: &str, command: &str) -> Turn {
    Turn::response([gyre_testkit::Block::tool_use_with_id(
        id,
        "Bash",
        json!({"command": command, "description": "make a file"}),
    )])
}

#[test]
fn a_tool_call_allowed_once_runs_and_streams_its_plan_call_and_answer() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::tool_use(
                "TodoWrite",
                json!({"todos": [
                    {"content": "Make the file", "status": "in_progress", "activeForm": "Making the file"}
                ]}),
            ),
            bash("toolu_make", "touch made.txt"),
            Turn::text("Made it."),
        ]))
        .unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let modes = session.modes.clone().unwrap();
        assert_eq!(&*modes.current_mode_id.0, "default");
        let ids: Vec<_> = modes
            .available_modes
            .iter()
            .map(|m| m.id.0.to_string())
            .collect();
        for mode in ["default", "acceptEdits", "plan", "dontAsk"] {
            assert!(ids.contains(&mode.to_owned()), "{mode} in {ids:?}");
        }
        gyre.answer(&["allow_once"]);
        let stop = gyre
            .prompt(&session.session_id, "make the file")
            .await
            .unwrap();
        assert_eq!(stop, acp::StopReason::EndTurn);
        assert!(sandbox.project().join("made.txt").is_file());

        let editor = &gyre.editor;
        editor
            .wait_until("the answer", |e| {
                answer_text(&e.updates_of(&session.session_id)) == "Made it."
            })
            .await;
        let updates = editor.updates_of(&session.session_id);
        // The slash commands, the plan, the call with its kind, its completion.
        assert!(updates.iter().any(|u| matches!(u,
            acp::SessionUpdate::AvailableCommandsUpdate(c)
                if c.available_commands.iter().any(|c| c.name == "compact"))));
        let plan = updates
            .iter()
            .find_map(|u| match u {
                acp::SessionUpdate::Plan(p) => Some(p.clone()),
                _ => None,
            })
            .expect("TodoWrite's list is the plan");
        assert_eq!(plan.entries[0].content, "Make the file");
        assert_eq!(plan.entries[0].status, acp::PlanEntryStatus::InProgress);
        let calls = tool_calls(&updates);
        assert_eq!(
            calls.len(),
            1,
            "TodoWrite is the plan, not a call: {calls:?}"
        );
        assert_eq!(&*calls[0].tool_call_id.0, "toolu_make");
        assert_eq!(calls[0].kind, acp::ToolKind::Execute);
        assert_eq!(
            outcome_of(&updates, "toolu_make").0,
            Some(acp::ToolCallStatus::Completed)
        );

        // The question named the call and offered once / always / reject.
        let asked = editor.asked.borrow();
        assert_eq!(asked.len(), 1);
        assert_eq!(&*asked[0].tool_call.tool_call_id.0, "toolu_make");
        let kinds: Vec<_> = asked[0].options.iter().map(|o| o.kind).collect();
        assert_eq!(
            kinds,
            [
                acp::PermissionOptionKind::AllowOnce,
                acp::PermissionOptionKind::AllowAlways,
                acp::PermissionOptionKind::RejectOnce
            ]
        );
    });
}

#[test]
fn allow_always_is_not_asked_again_and_reject_fails_the_call() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            bash("toolu_1", "touch a.txt"),
            bash("toolu_2", "touch a.txt"),
            Turn::text("Twice."),
            bash("toolu_3", "touch b.txt"),
            Turn::text("Not made."),
        ]))
        .unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let id = &session.session_id;

        gyre.answer(&["allow_always"]);
        assert_eq!(
            gyre.prompt(id, "twice").await.unwrap(),
            acp::StopReason::EndTurn
        );
        assert_eq!(
            gyre.editor.asked.borrow().len(),
            1,
            "asked once, then allowed"
        );
        gyre.editor
            .wait_until("both calls done", |e| {
                let updates = e.updates_of(id);
                outcome_of(&updates, "toolu_2").0 == Some(acp::ToolCallStatus::Completed)
            })
            .await;

        gyre.answer(&["reject_once"]);
        assert_eq!(
            gyre.prompt(id, "another").await.unwrap(),
            acp::StopReason::EndTurn
        );
        assert_eq!(gyre.editor.asked.borrow().len(), 2);
        assert!(!sandbox.project().join("b.txt").exists());
        gyre.editor
            .wait_until("the refused call failed", |e| {
                let updates = e.updates_of(id);
                outcome_of(&updates, "toolu_3").0 == Some(acp::ToolCallStatus::Failed)
            })
            .await;
        // The model was told.
        let last = server.requests().last().unwrap().body.to_string();
        assert!(
            last.contains("rejected") || last.contains("denied") || last.contains("refused"),
            "{last}"
        );
    });
}

#[test]
fn cancel_stops_the_turn_and_the_prompt_says_cancelled() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::text("Thinking about it at length")
                .with_chunk_chars(4)
                .stall(4, Duration::from_secs(60)),
            Turn::text("Back again."),
        ]))
        .unwrap();
        let gyre = Rc::new(Acp::start(&sandbox, &server, no_fs()).await);
        let session = gyre.new_session(&sandbox.project()).await;
        let id = session.session_id.clone();
        let running = {
            let (gyre, id) = (Rc::clone(&gyre), id.clone());
            tokio::task::spawn_local(async move { gyre.prompt(&id, "go on").await })
        };
        gyre.editor
            .wait_until("the first words", |e| {
                !answer_text(&e.updates_of(&id)).is_empty()
            })
            .await;
        gyre.conn
            .cancel(acp::CancelNotification::new(id.clone()))
            .await
            .unwrap();
        let stop = tokio::time::timeout(PATIENCE, running)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stop.unwrap(), acp::StopReason::Cancelled);
        // The session goes on.
        assert_eq!(
            gyre.prompt(&id, "again").await.unwrap(),
            acp::StopReason::EndTurn
        );
    });
}

#[test]
fn set_mode_changes_what_is_asked_and_a_bad_mode_is_an_error() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let target = sandbox.project().join("notes.md");
        let server = TestServer::spawn(Script::new([
            Turn::tool_use(
                "Write",
                json!({"file_path": target, "content": "# Notes\n"}),
            ),
            Turn::text("Written."),
        ]))
        .unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let id = &session.session_id;
        let bad = gyre
            .conn
            .set_session_mode(acp::SetSessionModeRequest::new(id.clone(), "reckless"))
            .await
            .unwrap_err();
        assert!(format!("{bad:?}").contains("reckless"), "{bad:?}");
        gyre.conn
            .set_session_mode(acp::SetSessionModeRequest::new(id.clone(), "acceptEdits"))
            .await
            .unwrap();
        assert_eq!(
            gyre.prompt(id, "write notes").await.unwrap(),
            acp::StopReason::EndTurn
        );
        assert!(
            gyre.editor.asked.borrow().is_empty(),
            "acceptEdits writes without asking"
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "# Notes\n");
        let updates = gyre.editor.updates_of(id);
        assert!(updates.iter().any(|u| matches!(u,
            acp::SessionUpdate::CurrentModeUpdate(m) if &*m.current_mode_id.0 == "acceptEdits")));
        // The edit's call carries its file and its diff.
        let call = tool_calls(&updates).pop().unwrap();
        assert_eq!(call.kind, acp::ToolKind::Edit);
        assert_eq!(call.locations[0].path, target);
        assert!(matches!(&call.content[..],
            [acp::ToolCallContent::Diff(d)] if d.new_text == "# Notes\n" && d.old_text.is_none()));
    });
}

#[test]
fn a_model_picked_in_the_editor_answers_the_next_prompt() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("Quick.")])).unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let options = session.config_options.clone().unwrap();
        assert_eq!(&*options[0].id.0, "model");
        let changed = gyre
            .conn
            .set_session_config_option(acp::SetSessionConfigOptionRequest::new(
                session.session_id.clone(),
                "model",
                "claude-haiku-4-5",
            ))
            .await
            .unwrap();
        let acp::SessionConfigKind::Select(select) = &changed.config_options[0].kind else {
            panic!("a select");
        };
        assert_eq!(&*select.current_value.0, "claude-haiku-4-5");
        gyre.prompt(&session.session_id, "hi").await.unwrap();
        assert_eq!(server.requests()[0].body["model"], "claude-haiku-4-5");
    });
}

#[test]
fn a_refusal_ends_the_prompt_as_a_refusal() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::text("I can't help with that.").with_stop_reason("refusal")
        ]))
        .unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let stop = gyre
            .prompt(&session.session_id, "something bad")
            .await
            .unwrap();
        assert_eq!(stop, acp::StopReason::Refusal);
    });
}

#[test]
fn acp_available_commands_list_custom_commands_and_skills_and_a_prompt_runs_one() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        sandbox
            .write(
                ".claude/commands/review.md",
                "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS closely",
            )
            .unwrap();
        sandbox
            .write(
                ".claude/skills/pdf/SKILL.md",
                "---\nname: pdf\ndescription: Work with PDF files\n---\nUse pdftotext.",
            )
            .unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("Reviewed.")])).unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let editor = &gyre.editor;
        editor
            .wait_until("the commands", |e| {
                e.updates_of(&session.session_id)
                    .iter()
                    .any(|u| matches!(u, acp::SessionUpdate::AvailableCommandsUpdate(_)))
            })
            .await;
        let commands = editor
            .updates_of(&session.session_id)
            .iter()
            .find_map(|u| match u {
                acp::SessionUpdate::AvailableCommandsUpdate(c) => {
                    Some(c.available_commands.clone())
                }
                _ => None,
            })
            .unwrap();
        let names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["compact", "clear", "review", "pdf"]);
        assert_eq!(commands[2].description, "Review a file");
        let stop = gyre
            .prompt(&session.session_id, "/review lib.rs")
            .await
            .unwrap();
        assert_eq!(stop, acp::StopReason::EndTurn);
        let sent = server.requests()[0].body["messages"].to_string();
        assert!(sent.contains("Review lib.rs closely"), "{sent}");
    });
}

#[test]
fn a_loaded_session_replays_its_history_and_goes_on() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::text("Noted: the tree is an oak."),
            Turn::text("An oak."),
        ]))
        .unwrap();
        let id = {
            let first = Acp::start(&sandbox, &server, no_fs()).await;
            let session = first.new_session(&sandbox.project()).await;
            first
                .prompt(&session.session_id, "remember: the tree is an oak")
                .await
                .unwrap();
            session.session_id
        };
        let second = Acp::start(&sandbox, &server, no_fs()).await;
        let (user, answer) = second.load(&id, &sandbox.project()).await;
        assert_eq!(user, "remember: the tree is an oak");
        assert_eq!(answer, "Noted: the tree is an oak.");
        second.prompt(&id, "which tree?").await.unwrap();
        let sent = server.requests()[1].body["messages"].to_string();
        assert!(
            sent.contains("the tree is an oak"),
            "the history went with it: {sent}"
        );
        // An unknown session is an error that names it.
        let err = second
            .conn
            .load_session(acp::LoadSessionRequest::new(
                "123e4567-e89b-12d3-a456-426614174000",
                sandbox.project(),
            ))
            .await
            .unwrap_err();
        assert!(format!("{err:?}").contains("123e4567"), "{err:?}");
    });
}

#[test]
fn a_loaded_session_replays_the_conversation_as_a_rewind_left_it() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::text("One."),
            Turn::text("Two."),
            Turn::text("After."),
        ]))
        .unwrap();
        let id = {
            let first = Acp::start(&sandbox, &server, no_fs()).await;
            let session = first.new_session(&sandbox.project()).await;
            first.prompt(&session.session_id, "first").await.unwrap();
            first.prompt(&session.session_id, "second").await.unwrap();
            session.session_id
        };
        // The REPL's /rewind to before "second" writes this line.
        let transcript = transcript_of(&sandbox, &id);
        let rewind = json!({
            "type": "system", "subtype": "rewind", "rewoundTo": "the-second-prompt",
            "sessionId": id.0.to_string(), "uuid": "rewind-line",
            "history": [
                {"role": "user", "content": [{"type": "text", "text": "first"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "One."}]},
            ],
        });
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&transcript)
            .unwrap();
        writeln!(file, "{rewind}").unwrap();
        let second = Acp::start(&sandbox, &server, no_fs()).await;
        let (user, answer) = second.load(&id, &sandbox.project()).await;
        assert_eq!(user, "first");
        assert_eq!(answer, "One.");
        second.prompt(&id, "third").await.unwrap();
        let sent = server.requests()[2].body["messages"].to_string();
        assert!(sent.contains("first") && !sent.contains("second"), "{sent}");
    });
}

#[test]
fn two_sessions_in_one_process_run_at_once_and_stay_apart() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        // A asks about its call and waits; B's whole turn runs meanwhile; then A goes on.
        let server = TestServer::spawn(Script::new([
            bash("toolu_a", "touch a.txt"),
            Turn::text("B done."),
            Turn::text("A done."),
        ]))
        .unwrap();
        let gyre = Rc::new(Acp::start(&sandbox, &server, no_fs()).await);
        let a = gyre.new_session(&sandbox.project()).await.session_id;
        let b = gyre.new_session(&sandbox.project()).await.session_id;
        assert_ne!(a, b);
        // No answer queued: A's question waits until the test gives one.
        let editor = Rc::clone(&gyre.editor);
        let held = {
            let (gyre, a) = (Rc::clone(&gyre), a.clone());
            tokio::task::spawn_local(async move { gyre.prompt(&a, "make a").await })
        };
        let asked = async {
            editor
                .wait_until("A's question", |e| !e.asked.borrow().is_empty())
                .await;
        };
        asked.await;
        assert_eq!(
            gyre.prompt(&b, "say done").await.unwrap(),
            acp::StopReason::EndTurn
        );
        // A still waits for its answer, and nothing of B's turn reached it.
        assert!(!held.is_finished());
        let b_updates = editor.updates_of(&b);
        assert_eq!(answer_text(&b_updates), "B done.");
        assert!(tool_calls(&b_updates).is_empty(), "A's call is not B's");
        assert!(answer_text(&editor.updates_of(&a)).is_empty());
        gyre.answer(&["allow_once"]);
        let stop = tokio::time::timeout(PATIENCE, held)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(stop, acp::StopReason::EndTurn);
        editor
            .wait_until("A's answer", |e| {
                answer_text(&e.updates_of(&a)) == "A done."
            })
            .await;
        assert!(sandbox.project().join("a.txt").is_file());
        assert_eq!(answer_text(&editor.updates_of(&b)), "B done.");
    });
}

#[test]
fn the_editors_buffers_are_read_and_edits_go_through_the_editor() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let file = sandbox.write("src/lib.rs", "fn on_disk() {}\n").unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::tool_use("Read", json!({"file_path": file})),
            Turn::tool_use(
                "Edit",
                json!({"file_path": file, "old_string": "unsaved", "new_string": "edited"}),
            ),
            Turn::text("Renamed."),
        ]))
        .unwrap();
        let fs = acp::FileSystemCapabilities::new()
            .read_text_file(true)
            .write_text_file(true);
        let gyre = Acp::start(&sandbox, &server, fs).await;
        gyre.editor
            .buffers
            .borrow_mut()
            .insert(file.clone(), "fn unsaved() {}\n".to_owned());
        let session = gyre.new_session(&sandbox.project()).await;
        gyre.answer(&["allow_once"]);
        assert_eq!(
            gyre.prompt(&session.session_id, "rename it").await.unwrap(),
            acp::StopReason::EndTurn
        );
        // Read saw the unsaved buffer, not the disk.
        let read_result = server.requests()[1].body["messages"].to_string();
        assert!(read_result.contains("fn unsaved()"), "{read_result}");
        assert!(!read_result.contains("fn on_disk()"), "{read_result}");
        // The edit went to the editor, made on its text; the disk is the editor's to write.
        assert_eq!(
            *gyre.editor.written.borrow(),
            [(file.clone(), "fn edited() {}\n".to_owned())]
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "fn on_disk() {}\n");
    });
}

#[test]
fn bash_runs_in_the_editors_terminal_and_the_call_shows_it() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            bash("toolu_t", "echo from-the-terminal; touch t.txt; exit 3"),
            Turn::text("Seen."),
        ]))
        .unwrap();
        let gyre = Acp::start_with_caps(
            &sandbox,
            &server,
            acp::ClientCapabilities::new().terminal(true),
        )
        .await;
        let session = gyre.new_session(&sandbox.project()).await;
        let id = &session.session_id;
        gyre.answer(&["allow_once"]);
        assert_eq!(
            gyre.prompt(id, "run it").await.unwrap(),
            acp::StopReason::EndTurn
        );
        // The editor ran it, in the project.
        let commands: Vec<String> = gyre
            .editor
            .terminals
            .borrow()
            .iter()
            .map(|t| t.0.clone())
            .collect();
        assert_eq!(commands, ["-c echo from-the-terminal; touch t.txt; exit 3"]);
        assert!(sandbox.project().join("t.txt").is_file());
        // The model got its output and exit code as from a command run by gyre.
        let sent = server.requests()[1].body["messages"].to_string();
        assert!(sent.contains("Exit code 3\\nfrom-the-terminal"), "{sent}");
        // The call showed the terminal, and still does when it has failed.
        gyre.editor
            .wait_until("the call's end", |e| {
                outcome_of(&e.updates_of(id), "toolu_t").0 == Some(acp::ToolCallStatus::Failed)
            })
            .await;
        let updates = gyre.editor.updates_of(id);
        let last = updates
            .iter()
            .rev()
            .find_map(|u| match u {
                acp::SessionUpdate::ToolCallUpdate(u) if &*u.tool_call_id.0 == "toolu_t" => {
                    u.fields.content.clone()
                }
                _ => None,
            })
            .unwrap();
        assert!(
            matches!(&last[0], acp::ToolCallContent::Terminal(t) if &*t.terminal_id.0 == "0"),
            "{last:?}"
        );
    });
}

#[test]
fn sessions_are_listed_resumed_forked_and_closed() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            Turn::text("Noted: the tree is an oak."),
            Turn::text("An oak."),
            Turn::text("Still an oak."),
        ]))
        .unwrap();
        let project = sandbox.project();
        let id = {
            let first = Acp::start(&sandbox, &server, no_fs()).await;
            let session = first.new_session(&project).await;
            first
                .prompt(&session.session_id, "remember: the tree is an oak")
                .await
                .unwrap();
            session.session_id
        };
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        // The folder's sessions, and every folder's, each with its first prompt.
        let listed = gyre
            .conn
            .list_sessions(acp::ListSessionsRequest::new().cwd(project.clone()))
            .await
            .unwrap();
        assert_eq!(listed.sessions.len(), 1, "{listed:?}");
        let info = &listed.sessions[0];
        assert_eq!(info.session_id, id);
        assert_eq!(info.cwd, project);
        assert_eq!(info.title.as_deref(), Some("remember: the tree is an oak"));
        assert!(info.updated_at.is_some());
        let everywhere = gyre
            .conn
            .list_sessions(acp::ListSessionsRequest::new())
            .await
            .unwrap();
        assert!(
            everywhere
                .sessions
                .iter()
                .any(|s| s.session_id == id && s.cwd == project),
            "{everywhere:?}"
        );
        let err = gyre
            .conn
            .list_sessions(acp::ListSessionsRequest::new().cursor("page-2".to_owned()))
            .await
            .unwrap_err();
        assert!(format!("{err:?}").contains("page-2"), "{err:?}");

        // Resumed: the history goes on, without being replayed to the editor.
        let resumed = gyre
            .conn
            .resume_session(acp::ResumeSessionRequest::new(id.clone(), project.clone()))
            .await
            .unwrap();
        assert!(resumed.models.is_some() && resumed.modes.is_some());
        gyre.prompt(&id, "which tree?").await.unwrap();
        assert!(
            !gyre
                .editor
                .updates_of(&id)
                .iter()
                .any(|u| matches!(u, acp::SessionUpdate::UserMessageChunk(_))),
            "nothing replayed"
        );
        let sent = server.requests()[1].body["messages"].to_string();
        assert!(sent.contains("the tree is an oak"), "{sent}");
        // Opened again in this connection: the same session, as it stands.
        gyre.conn
            .resume_session(acp::ResumeSessionRequest::new(id.clone(), project.clone()))
            .await
            .unwrap();
        let (user, answer) = gyre.load(&id, &project).await;
        assert_eq!(user, "remember: the tree is an oakwhich tree?");
        assert!(
            answer.ends_with("Noted: the tree is an oak.An oak."),
            "{answer:?}"
        );

        // Forked: a new session with the history so far; the original stays as it was.
        let fork = gyre
            .conn
            .fork_session(acp::ForkSessionRequest::new(id.clone(), project.clone()))
            .await
            .unwrap();
        assert_ne!(fork.session_id, id);
        gyre.prompt(&fork.session_id, "and now?").await.unwrap();
        let sent = server.requests()[2].body["messages"].to_string();
        assert!(
            sent.contains("the tree is an oak") && sent.contains("which tree?"),
            "{sent}"
        );
        let ids: Vec<_> = gyre
            .conn
            .list_sessions(acp::ListSessionsRequest::new().cwd(project.clone()))
            .await
            .unwrap()
            .sessions
            .into_iter()
            .map(|s| s.session_id)
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert!(ids.contains(&fork.session_id) && ids.contains(&id));
        let transcript = transcript_of(&sandbox, &id);
        let original = std::fs::read_to_string(transcript).unwrap();
        assert!(!original.contains("and now?"), "the original is untouched");

        // Closed: the session is gone from the connection.
        gyre.conn
            .close_session(acp::CloseSessionRequest::new(fork.session_id.clone()))
            .await
            .unwrap();
        let err = gyre.prompt(&fork.session_id, "hello?").await.unwrap_err();
        assert!(format!("{err:?}").contains("no session"), "{err:?}");
    });
}

#[test]
fn set_model_offers_the_models_and_switches_the_next_prompt() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("Quick.")])).unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let models = session.models.clone().unwrap();
        assert_eq!(&*models.current_model_id.0, "claude-sonnet-4-5");
        let ids: Vec<&str> = models
            .available_models
            .iter()
            .map(|m| &*m.model_id.0)
            .collect();
        assert_eq!(ids[0], "claude-sonnet-4-5");
        assert!(ids.contains(&"claude-haiku-4-5"), "{ids:?}");
        let id = &session.session_id;
        gyre.conn
            .set_session_model(acp::SetSessionModelRequest::new(
                id.clone(),
                "claude-haiku-4-5",
            ))
            .await
            .unwrap();
        // The model picker among the config options follows.
        gyre.editor
            .wait_until("the config option's update", |e| {
                e.updates_of(id).iter().any(|u| {
                    matches!(u, acp::SessionUpdate::ConfigOptionUpdate(c)
                        if matches!(&c.config_options[0].kind,
                            acp::SessionConfigKind::Select(s) if &*s.current_value.0 == "claude-haiku-4-5"))
                })
            })
            .await;
        gyre.prompt(id, "hi").await.unwrap();
        assert_eq!(server.requests()[0].body["model"], "claude-haiku-4-5");
        let err = gyre
            .conn
            .set_session_model(acp::SetSessionModelRequest::new(
                "123e4567-e89b-12d3-a456-426614174000",
                "claude-haiku-4-5",
            ))
            .await
            .unwrap_err();
        assert!(format!("{err:?}").contains("no session"), "{err:?}");
    });
}

#[test]
fn without_editor_terminals_a_commands_output_grows_in_its_call_while_it_runs() {
    local(async {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([
            bash("toolu_slow", "echo first; sleep 2; echo second"),
            Turn::text("Both."),
        ]))
        .unwrap();
        let gyre = Acp::start(&sandbox, &server, no_fs()).await;
        let session = gyre.new_session(&sandbox.project()).await;
        let id = session.session_id.clone();
        gyre.answer(&["allow_once"]);
        let running = gyre.prompt(&id, "run it");
        let watch = async {
            // Seen while the command still sleeps: the first line, not the second.
            gyre.editor
                .wait_until("the first line, live", |e| {
                    let (status, text) = outcome_of(&e.updates_of(&id), "toolu_slow");
                    status == Some(acp::ToolCallStatus::InProgress) && text.contains("first")
                })
                .await;
            let (_, text) = outcome_of(&gyre.editor.updates_of(&id), "toolu_slow");
            assert!(!text.contains("second"), "{text:?}");
        };
        let (stop, ()) = tokio::join!(running, watch);
        assert_eq!(stop.unwrap(), acp::StopReason::EndTurn);
        // The last word is the result, whatever came late.
        let (status, text) = outcome_of(&gyre.editor.updates_of(&id), "toolu_slow");
        assert_eq!(status, Some(acp::ToolCallStatus::Completed));
        assert!(
            text.contains("first") && text.contains("second"),
            "{text:?}"
        );
    });
}

/// Writes raw lines to `gyre acp` and reads one reply line per line that expects one.
#[test]
fn a_broken_or_unknown_message_gets_a_json_rpc_error_and_the_connection_goes_on() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .arg("acp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut exchange = |line: &str| -> Value {
        writeln!(stdin, "{line}").unwrap();
        let mut reply = String::new();
        stdout.read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap()
    };
    let reply = exchange("{this is not json");
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert_eq!(reply["id"], Value::Null);
    let reply = exchange("[1, 2, 3]");
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    let reply = exchange(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#,
    );
    assert_eq!(reply["result"]["protocolVersion"], 1, "{reply}");
    let reply = exchange(r#"{"jsonrpc":"2.0","id":2,"method":"session/teleport","params":{}}"#);
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["error"]["code"], -32601, "{reply}");
    let reply = exchange(
        r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}"#,
    );
    assert_eq!(reply["id"], 3);
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"].to_string().contains("no session nope"),
        "{reply}"
    );
    let reply = exchange(
        r#"{"jsonrpc":"2.0","id":4,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#,
    );
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert!(
        reply["error"].to_string().contains("relative/dir"),
        "{reply}"
    );
    // Still serving.
    let cwd = sandbox.project();
    let reply = exchange(&json!({"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd": cwd,"mcpServers":[]}}).to_string());
    assert!(reply["result"]["sessionId"].is_string(), "{reply}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
