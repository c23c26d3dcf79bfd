//! A session driven only by `Op`s, read only through `Event`s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use futures::StreamExt;
use gyre_core::approvals::Approval;
use gyre_core::session::{self, Session};
use gyre_core::settings::Settings;
use gyre_core::{Environment, Event, Op, SessionOptions};
use gyre_loop::{EngineEvent, LoopEvent};
use gyre_mcp::McpServers;
use gyre_protocol::ContentBlock;
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

fn session(server: &TestServer, home: &Path, cwd: &Path, mode: &str) -> Session {
    let env = Environment::from_vars([
        ("ANTHROPIC_API_KEY".to_owned(), "sk-test".to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), server.url()),
        ("GYRE_HOME".to_owned(), home.display().to_string()),
    ]);
    let options = SessionOptions {
        permission_mode: Some(mode.to_owned()),
        ..SessionOptions::default()
    };
    session::build(
        &options,
        cwd,
        &Settings::default(),
        true,
        &env,
        McpServers::default(),
    )
    .unwrap()
}

/// Runs `op` to its end, answering each question with `answer`.
async fn run(session: &mut Session, op: Op, answer: impl Fn() -> Approval) -> Vec<Event> {
    let control = session.control();
    let events = session.submit(op);
    futures::pin_mut!(events);
    let mut seen = Vec::new();
    while let Some(event) = events.next().await {
        if let Event::Question(request) = &event {
            let op = Op::Answer {
                id: request.id,
                approval: answer(),
            };
            assert!(matches!(control.submit(op), Ok(None)));
        }
        seen.push(event);
    }
    seen
}

fn user(text: &str) -> Op {
    Op::UserMessage(vec![ContentBlock::text(text)])
}

fn denials(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Engine(EngineEvent::Loop(LoopEvent::PermissionDenied { .. }))
            )
        })
        .count()
}

/// A session that asks its questions, whose model runs `echo one` in each of two turns.
async fn asking_twice() -> (TestServer, [tempfile::TempDir; 2], Session) {
    let server = TestServer::start(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo one"})),
        Turn::text("ran it"),
        Turn::tool_use("Bash", json!({"command": "echo one"})),
        Turn::text("ran it again"),
    ]))
    .await
    .unwrap();
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut session = session(&server, home.path(), cwd.path(), "default");
    session.ask_questions();
    (server, [home, cwd], session)
}

#[tokio::test]
async fn a_question_is_an_event_answered_by_an_op_and_set_mode_is_an_op_too() {
    let (_server, _dirs, mut session) = asking_twice().await;
    let first = run(&mut session, user("run it"), || Approval::Allow {
        updated_input: None,
        updates: Vec::new(),
    })
    .await;
    let asked: Vec<_> = first
        .iter()
        .filter_map(|e| match e {
            Event::Question(r) => Some(r.question.always.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(asked, ["Bash(echo one)"]);
    assert_eq!(denials(&first), 0);
    let Some(Event::Engine(EngineEvent::Result(result))) = first.last() else {
        panic!("the turn ends with its result: {first:?}")
    };
    assert_eq!(result.result, "ran it");

    // A mode change from any task, or through the session.
    let control = session.control();
    assert!(matches!(
        control.submit(Op::SetMode("acceptEdits".into())),
        Ok(Some(Event::ModeChanged(Ok(ref m)))) if m == "acceptEdits"
    ));
    let modes = run(&mut session, Op::SetMode("default".into()), Approval::deny).await;
    assert!(matches!(&modes[..], [Event::ModeChanged(Ok(m))] if m == "default"));
    assert_eq!(session.facts.permission_mode, "default");
}

#[tokio::test]
async fn a_session_answer_is_a_rule_that_survives_a_mode_change() {
    let (_server, _dirs, mut session) = asking_twice().await;
    let control = session.control();
    // The first answer is "always" (the rule the question offers).
    let mut questions = 0;
    {
        let events = session.submit(user("run it"));
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            if let Event::Question(request) = event {
                questions += 1;
                let approval = Approval::always(&request);
                control
                    .submit(Op::Answer {
                        id: request.id,
                        approval,
                    })
                    .unwrap();
            }
        }
    }
    assert_eq!(questions, 1);
    control.submit(Op::SetMode("plan".into())).unwrap();
    control.submit(Op::SetMode("default".into())).unwrap();
    let again = run(&mut session, user("again"), Approval::deny).await;
    assert!(
        !again.iter().any(|e| matches!(e, Event::Question(_))),
        "asked again after a mode change: {again:?}"
    );
    assert_eq!(denials(&again), 0);
}

#[tokio::test]
async fn a_denial_reaches_the_model_and_set_model_compact_and_clear_are_ops() {
    let server = TestServer::start(Script::new([
        Turn::tool_use("Bash", json!({"command": "echo one"})),
        Turn::text("understood"),
    ]))
    .await
    .unwrap();
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut session = session(&server, home.path(), cwd.path(), "default");
    session.ask_questions();
    let events = run(&mut session, user("run it"), Approval::deny).await;
    assert_eq!(denials(&events), 1);
    let sent = server.requests();
    let last = sent.last().unwrap().body.to_string();
    assert!(last.contains("denied permission to use Bash"), "{last}");

    let model = run(
        &mut session,
        Op::SetModel(Some("claude-opus-4-1".into())),
        Approval::deny,
    )
    .await;
    assert!(matches!(&model[..], [Event::ModelChanged(m)] if m == "claude-opus-4-1"));
    assert_eq!(session.facts.model(), "claude-opus-4-1");
    let back = run(&mut session, Op::SetModel(None), Approval::deny).await;
    assert!(matches!(&back[..], [Event::ModelChanged(m)] if m == session::DEFAULT_MODEL));

    let compacted = run(
        &mut session,
        Op::Compact { instructions: None },
        Approval::deny,
    )
    .await;
    assert!(
        matches!(&compacted[..], [Event::Compacted(Ok(None))]),
        "{compacted:?}"
    );
    let cleared = run(&mut session, Op::Clear, Approval::deny).await;
    assert!(matches!(&cleared[..], [Event::Cleared]));
    assert!(session.engine.messages().is_empty());
}

#[tokio::test]
async fn a_blocked_prompt_is_an_event_and_no_request_is_sent() {
    let server = TestServer::start(Script::new([Turn::text("never")]))
        .await
        .unwrap();
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let settings: Settings = serde_json::from_value(json!({"hooks": {"UserPromptSubmit": [
        {"hooks": [{"type": "command", "command": "echo no >&2; exit 2"}]}]}}))
    .unwrap();
    let env = Environment::from_vars([
        ("ANTHROPIC_API_KEY".to_owned(), "sk-test".to_owned()),
        ("ANTHROPIC_BASE_URL".to_owned(), server.url()),
        ("GYRE_HOME".to_owned(), home.path().display().to_string()),
    ]);
    let mut session = session::build(
        &SessionOptions::default(),
        cwd.path(),
        &settings,
        false,
        &env,
        McpServers::default(),
    )
    .unwrap();
    let events = run(&mut session, user("hi"), Approval::deny).await;
    assert!(
        matches!(&events[..], [Event::PromptBlocked(r)] if r.contains("no")),
        "{events:?}"
    );
    assert_eq!(server.request_count(), 0);
}
