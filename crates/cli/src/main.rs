//! `gyre`: a coding agent for the terminal.
//!
//! This binary is thin: flags, settings, rendering. The loop lives in `gyre-loop`.

mod agents;
mod args;
mod headless;
mod repl;
mod session;
mod sessions;
mod settings;
mod stream_json;
mod system_prompt;
mod web_fetch;
mod web_search;

use std::io::{IsTerminal, Read};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};
use gyre_loop::TerminalReason;
use gyre_protocol::ContentBlock;

use crate::args::{Cli, Command, InputFormat, OutputFormat};
use crate::headless::Output;
use crate::settings::Settings;

/// Exit codes (SPEC §9).
const EXIT_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

fn usage_error(message: &str) -> ExitCode {
    eprintln!("gyre: {message} (see gyre --help)");
    ExitCode::from(EXIT_USAGE)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                _ => {
                    let rendered = e.to_string();
                    let first = rendered
                        .lines()
                        .next()
                        .unwrap_or("invalid arguments")
                        .trim_start_matches("error: ");
                    usage_error(first)
                }
            };
        }
    };
    for flag in cli.ignored_flag_warnings() {
        eprintln!(
            "gyre: warning: {flag} is accepted for compatibility but not supported yet; ignored"
        );
    }
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            let text = format!("{e:#}");
            eprintln!("gyre: {}", text.replace('\n', " "));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

fn init_logging(cli: &Cli) -> Result<()> {
    let filter = std::env::var("RUST_LOG").ok();
    if filter.is_none() && cli.debug_file.is_none() {
        return Ok(());
    }
    let env_filter = tracing_subscriber::EnvFilter::new(filter.unwrap_or_else(|| "debug".into()));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_ansi(false);
    if let Some(path) = &cli.debug_file {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("could not open --debug-file {}", path.display()))?;
        builder.with_writer(std::sync::Mutex::new(file)).init();
    } else {
        builder.with_writer(std::io::stderr).init();
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<ExitCode> {
    init_logging(cli)?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    match &cli.command {
        Some(Command::Completions { shell }) => {
            clap_complete::generate(*shell, &mut Cli::command(), "gyre", &mut std::io::stdout());
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Sessions) => {
            sessions::print_sessions(&cwd, &mut std::io::stdout())?;
            return Ok(ExitCode::SUCCESS);
        }
        None => {}
    }
    let headless = cli.print || !std::io::stdin().is_terminal();
    if headless && cli.output_format == OutputFormat::StreamJson && !cli.verbose {
        return Ok(usage_error(
            "--output-format stream-json requires --verbose",
        ));
    }
    if cli.input_format == InputFormat::StreamJson && cli.output_format != OutputFormat::StreamJson
    {
        return Ok(usage_error(
            "--input-format stream-json requires --output-format stream-json",
        ));
    }
    let settings = Settings::load(&session::gyre_home(), &cwd)?;
    apply_settings_env(&settings);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    if headless {
        runtime.block_on(run_headless(cli, &cwd, &settings))
    } else {
        runtime.block_on(repl::run(cli, &cwd, &settings))
    }
}

fn apply_settings_env(settings: &Settings) {
    for (key, value) in &settings.env {
        if std::env::var_os(key).is_none() {
            set_env(key, value);
        }
    }
}

#[allow(unsafe_code)]
fn set_env(key: &str, value: &str) {
    // SAFETY: called from `run` before the async runtime or any other thread exists,
    // so nothing reads the environment concurrently.
    unsafe { std::env::set_var(key, value) };
}

fn read_prompt(cli: &Cli) -> Result<Option<String>> {
    if let Some(p) = &cli.prompt {
        return Ok(Some(p.clone()));
    }
    if std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let mut buf = String::new();
    std::io::stdin()
        .read_to_string(&mut buf)
        .context("could not read the prompt from stdin")?;
    let trimmed = buf.trim();
    Ok((!trimmed.is_empty()).then(|| trimmed.to_owned()))
}

async fn run_headless(cli: &Cli, cwd: &Path, settings: &Settings) -> Result<ExitCode> {
    let prompt = if cli.input_format == InputFormat::Text {
        match read_prompt(cli)? {
            Some(p) => Some(p),
            None => {
                return Ok(usage_error(
                    "-p needs a prompt: pass it as an argument or on stdin",
                ));
            }
        }
    } else {
        None
    };
    let mut session = session::build(cli, cwd, settings, false, None)?;
    let interrupt = session.engine.interrupt_handle();
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let interrupted = std::sync::Arc::clone(&interrupted);
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
                interrupt.interrupt();
            }
        });
    }
    let stdout = std::io::stdout().lock();
    let mut output = Output::new(stdout, cli.output_format, cli.include_partial_messages);
    headless::print_init(&mut output, &session.facts)?;
    let mut last_error = false;
    if let Some(prompt) = prompt {
        let result = headless::run_turn(
            &mut session.engine,
            vec![ContentBlock::text(prompt)],
            &mut session.facts,
            &mut output,
        )
        .await?;
        last_error = result.is_error;
    } else {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for turn in headless::read_input_lines(std::io::stdin().lock()) {
                if tx.send(turn).is_err() {
                    break;
                }
            }
        });
        while let Some(turn) = rx.recv().await {
            let content = turn?;
            let result = headless::run_turn(
                &mut session.engine,
                content,
                &mut session.facts,
                &mut output,
            )
            .await?;
            last_error = result.is_error;
            if matches!(
                result.terminal.reason,
                TerminalReason::AbortedStreaming | TerminalReason::AbortedTools
            ) {
                break;
            }
        }
    }
    if interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(ExitCode::from(EXIT_INTERRUPTED));
    }
    Ok(if last_error {
        ExitCode::from(EXIT_ERROR)
    } else {
        ExitCode::SUCCESS
    })
}
