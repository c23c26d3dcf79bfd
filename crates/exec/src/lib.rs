//! gyre's headless front-end: `gyre -p` in text, json or stream-json, and the Agent
//! SDK's control protocol on stream-json stdin and stdout (docs/sdk-protocol.md). It
//! builds the session through gyre-core and renders its events as lines.

mod control;
mod headless;
mod mirror;
mod permission;
mod sdk;
mod stream_json;

use std::io::{IsTerminal, Read, Write};
use std::path::Path;

use gyre_core::settings::Settings;
use gyre_core::{CoreError, Environment, SessionOptions};
use gyre_protocol::ContentBlock;

use crate::headless::Output;

/// How headless output is written (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The final result text only.
    Text,
    /// One JSON object: the result.
    Json,
    /// One JSON object per line as the session runs (needs --verbose).
    StreamJson,
}

/// How headless input is read (`--input-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// The prompt as plain text (argument or stdin).
    Text,
    /// User messages as JSON lines on stdin, one turn each, until EOF.
    StreamJson,
}

/// What the headless front-end was asked to do, apart from the session itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadlessOptions {
    /// The prompt; `None` reads it from stdin (text input).
    pub prompt: Option<String>,
    pub input_format: InputFormat,
    pub output_format: OutputFormat,
    /// stream-json: also the raw deltas as `stream_event` lines.
    pub include_partial_messages: bool,
    /// stream-json: hook starts and ends as lines.
    pub include_hook_events: bool,
    /// Text mode: each tool call and its outcome on stderr.
    pub verbose: bool,
    /// Text mode: no progress lines on stderr.
    pub quiet: bool,
    /// `stdio`: permission questions go to the SDK as `can_use_tool` requests.
    pub permission_prompt_tool: Option<String>,
    /// `--session-mirror`: the transcript's new lines go to the SDK as
    /// `transcript_mirror` frames.
    pub session_mirror: bool,
    /// `--permission-prompts none`: nobody answers questions, not even over
    /// `--permission-prompt-tool`; what would be asked is denied at once.
    pub no_permission_prompts: bool,
    /// stream-json input: each user message is echoed (`isReplay`, its own `uuid`)
    /// when its turn starts, as Zed's ACP adapter waits for.
    pub replay_user_messages: bool,
}

/// Why a headless run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The session could not be built.
    #[error(transparent)]
    Session(#[from] CoreError),
    /// stdin, stdout or stderr failed.
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    /// stdout could not be written (the reader went away, the disk is full).
    #[error("could not write the output: {0}")]
    Output(#[from] std::io::Error),
    /// A UserPromptSubmit hook refused the prompt.
    #[error("the prompt was blocked by a UserPromptSubmit hook: {0}")]
    PromptBlocked(String),
    /// The engine stopped without reporting how the turn ended.
    #[error("the turn ended without a result")]
    NoResult,
}

impl ExecError {
    pub(crate) fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> Self {
        move |source| Self::Io { what, source }
    }
}

/// How a headless run ended, for the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The last turn succeeded.
    Done,
    /// The last turn ended in an error (or a transcript line could not be written).
    Failed,
    /// Ctrl+C.
    Interrupted,
    /// The options cannot be used together; the text says why.
    Usage(String),
}

fn read_prompt(options: &HeadlessOptions) -> Result<Option<String>, ExecError> {
    if let Some(p) = &options.prompt {
        return Ok(Some(p.clone()));
    }
    if std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let mut buf = String::new();
    std::io::stdin()
        .read_to_string(&mut buf)
        .map_err(ExecError::io("could not read the prompt from stdin"))?;
    let trimmed = buf.trim();
    Ok((!trimmed.is_empty()).then(|| trimmed.to_owned()))
}

/// Runs the headless session: one prompt (text input), or the turns and control
/// requests an SDK sends on stdin (stream-json input).
///
/// # Errors
/// The session cannot be built, or stdout cannot be written.
pub async fn run(
    options: &HeadlessOptions,
    session_options: &SessionOptions,
    cwd: &Path,
    settings: &Settings,
    env: &Environment,
) -> Result<Outcome, ExecError> {
    let prompt = if options.input_format == InputFormat::Text {
        match read_prompt(options)? {
            Some(p) => Some(p),
            None => {
                return Ok(Outcome::Usage(
                    "-p needs a prompt: pass it as an argument or on stdin".to_owned(),
                ));
            }
        }
    } else {
        None
    };
    // An SDK session reads stdin from the start: its own MCP servers answer over it.
    let mut sdk_io = (options.input_format == InputFormat::StreamJson).then(|| {
        let out = control::LineOut::new(Box::new(std::io::stdout()));
        (sdk::SdkInput::start(out.clone()), out)
    });
    // An SDK's options in `initialize` come last in the precedence: the session waits
    // for its first line.
    let mut with_initialize = None;
    let mut with_settings = None;
    if let Some((input, _)) = &mut sdk_io
        && let Some(mut init) = input.boot_initialize().await
    {
        if let Some(over) = init.settings.take() {
            let mut merged = settings.clone();
            merged.merge(over);
            with_settings = Some(merged);
        }
        if let Some(policy) = init.managed_settings.take() {
            let mut restricted = with_settings.unwrap_or_else(|| settings.clone());
            let dropped = restricted.restrict(&policy).map_err(CoreError::from)?;
            if !dropped.is_empty() {
                eprintln!("{}", gyre_core::settings::dropped_policy_line(&dropped));
            }
            with_settings = Some(restricted);
        }
        with_initialize = Some(session_options.clone().with_initialize(init));
    }
    let session_options = with_initialize.as_ref().unwrap_or(session_options);
    let settings = with_settings.as_ref().unwrap_or(settings);
    let sdk_channel = sdk_io.as_ref().map(|(input, _)| input.channel.client());
    let mcp = gyre_core::mcp_config::start_with_sdk(
        session_options,
        cwd,
        &env.gyre_home(),
        env,
        sdk_channel.as_ref(),
    )
    .await?;
    let mut session =
        match gyre_core::session::build(session_options, cwd, settings, false, env, mcp) {
            Ok(session) => session,
            // A refused `--resume-drops-turn` is a result the SDK reads.
            Err(CoreError::Invalid(why))
                if why.starts_with(gyre_core::session::RESUME_REJECTED)
                    && options.output_format != OutputFormat::Text =>
            {
                eprintln!("gyre: {why}");
                let session_id = match &session_options.resume {
                    gyre_core::Resume::Id(id) => id.clone(),
                    _ => String::new(),
                };
                let line = stream_json::without_turn(
                    &why,
                    vec![why.clone()],
                    &gyre_protocol::Usage::default(),
                    0.0,
                    &session_id,
                    &uuid::Uuid::new_v4().to_string(),
                );
                let text = serde_json::to_string(&line).map_err(std::io::Error::from);
                let mut stdout = std::io::stdout().lock();
                text.and_then(|text| writeln!(stdout, "{text}"))
                    .map_err(ExecError::io("could not write the result"))?;
                return Ok(Outcome::Failed);
            }
            Err(e) => return Err(e.into()),
        };
    if options.verbose && !options.quiet {
        // stderr, so that stdout stays the answer (or its JSON lines).
        eprintln!("gyre: {}", session.facts.backend);
    }
    let control = session.control();
    let ctrl_c = tokio_util::sync::CancellationToken::new();
    {
        let ctrl_c = ctrl_c.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                ctrl_c.cancel();
                let _ = control.submit(gyre_core::Op::Interrupt);
            }
        });
    }
    if let Some((input, out)) = sdk_io {
        let ask_over_stdio = match options.permission_prompt_tool.as_deref() {
            _ if options.no_permission_prompts => false,
            Some("stdio") => true,
            Some(other) => {
                eprintln!(
                    "gyre: warning: --permission-prompt-tool {other} is not supported (only stdio); permission questions are denied"
                );
                false
            }
            None => false,
        };
        let truthy = |name| env.var(name).is_some_and(|v| !v.is_empty() && v != "0");
        let sdk_options = sdk::SdkOptions {
            ask_over_stdio,
            partial: options.include_partial_messages,
            hook_events: options.include_hook_events,
            replay_user_messages: options.replay_user_messages,
            session_states: truthy("CLAUDE_CODE_SDK_READS_SESSION_STATE")
                || truthy("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS"),
        };
        // `--session-mirror`: under the name the reference keeps the session by.
        let mirror = (options.session_mirror && !session_options.no_session_persistence)
            .then(|| {
                let cwd = Path::new(&session.facts.cwd);
                let transcript = gyre_loop::JsonlTranscript::path_for(
                    &env.gyre_home(),
                    cwd,
                    &session.facts.session_id,
                );
                let reference = gyre_core::session::reference_home(env)?;
                let reported = gyre_loop::JsonlTranscript::path_for(
                    &reference,
                    cwd,
                    &session.facts.session_id,
                );
                Some(mirror::Mirror::new(transcript, reported))
            })
            .flatten();
        let last_error = sdk::run(&mut session, input, out, &sdk_options, mirror, &ctrl_c).await?;
        end(&mut session).await;
        return Ok(outcome(ctrl_c.is_cancelled(), last_error));
    }
    let stdout = std::io::stdout().lock();
    let mut output = Output::new(
        stdout,
        options.output_format,
        options.include_partial_messages,
    )
    .with_progress(!options.quiet)
    .with_tool_lines(options.verbose && !options.quiet);
    headless::print_init(&mut output, &session)?;
    let mut last_error = false;
    if let Some(prompt) = prompt {
        let result = headless::run_turn(
            &mut session,
            vec![ContentBlock::text(prompt)],
            None,
            &mut output,
            || {},
            |_| {},
        )
        .await?;
        last_error = result.is_error || session.transcript_health.failure().is_some();
    }
    end(&mut session).await;
    Ok(outcome(ctrl_c.is_cancelled(), last_error))
}

/// The session's SessionEnd hooks (`reason` `other`: the input ended).
async fn end(session: &mut gyre_core::session::Session) {
    use futures::StreamExt as _;
    session
        .submit(gyre_core::Op::End {
            reason: "other".to_owned(),
        })
        .for_each(|_| async {})
        .await;
}

fn outcome(interrupted: bool, last_error: bool) -> Outcome {
    if interrupted {
        Outcome::Interrupted
    } else if last_error {
        Outcome::Failed
    } else {
        Outcome::Done
    }
}
