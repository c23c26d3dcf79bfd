//! `gyre`: a coding agent for the terminal.
//!
//! This binary is thin: flags, settings, rendering. The loop lives in `gyre-loop`.

mod args;
mod sessions;

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};

use crate::args::{Cli, Command, InputFormat, OutputFormat};
use gyre_core::settings::Settings;

/// Exit codes: 0 success, 1 error, 2 usage error, 130 interrupted (128 + SIGINT).
const EXIT_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_INTERRUPTED: u8 = 130;

fn usage_error(message: &str) -> ExitCode {
    eprintln!("gyre: {message} (see gyre --help)");
    ExitCode::from(EXIT_USAGE)
}

fn main() -> ExitCode {
    // First, while this is the only thread: keep the API key out of /proc/<pid>/environ,
    // which any Bash command could otherwise read.
    gyre_tools::sandbox::hide_process_environment(gyre_tools::sandbox::SECRET_ENV);
    // Nothing gyre's parent left open reaches a command, hook or server gyre starts.
    gyre_tools::sandbox::close_inherited_descriptors();
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
                    // clap's whole message: what was wrong, a "did you mean", the usage.
                    let _ = e.print();
                    ExitCode::from(EXIT_USAGE)
                }
            };
        }
    };
    for flag in cli.ignored_flag_warnings() {
        eprintln!(
            "gyre: warning: {flag} is accepted for compatibility but not supported yet; ignored"
        );
    }
    // Orphans of tool processes (a `setsid` child whose shell exited) reparent to gyre,
    // so a timeout, an abort or the end of the session can still kill them.
    if let Err(e) = gyre_tools::process_tree::become_subreaper() {
        eprintln!("gyre: warning: cannot adopt orphaned tool processes ({e})");
    }
    let outcome = run(&cli);
    gyre_tools::process_tree::kill_left_running();
    match outcome {
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
    // The process's variables, read once; gyre's home comes from them alone.
    let process_env = gyre_core::Environment::capture();
    let home = process_env.gyre_home();
    match &cli.command {
        Some(Command::Completions { shell }) => {
            clap_complete::generate(*shell, &mut Cli::command(), "gyre", &mut std::io::stdout());
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Sessions) => {
            let reference = gyre_core::session::reference_home(&process_env);
            sessions::print_sessions(&home, reference.as_deref(), &cwd, &mut std::io::stdout())?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Trust { dir }) => {
            let dir = dir.as_deref().unwrap_or(&cwd);
            if !dir.is_dir() {
                return Ok(usage_error(&format!(
                    "trust: {} is not a directory",
                    dir.display()
                )));
            }
            let dir = gyre_core::trust::trust(&home, dir)?;
            println!(
                "gyre: trusted {}: its project settings' allow rules and hooks and its .mcp.json servers will be used",
                dir.display()
            );
            return Ok(ExitCode::SUCCESS);
        }
        Some(Command::Acp {
            model,
            permission_mode,
            allow_dangerously_skip_permissions,
        }) => {
            let options = gyre_core::SessionOptions {
                model: model.clone(),
                permission_mode: permission_mode.clone(),
                allow_dangerously_skip_permissions: *allow_dangerously_skip_permissions,
                ..gyre_core::SessionOptions::default()
            };
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("could not start the async runtime")?;
            runtime.block_on(gyre_acp::run(options, process_env))?;
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
    // `--project-config-root`: the project's configuration comes from that folder.
    let config_root = match &cli.project_config_root {
        Some(dir) => {
            let dir = cwd.join(dir);
            if !dir.is_dir() {
                return Ok(usage_error(&format!(
                    "--project-config-root {}: not a directory",
                    dir.display()
                )));
            }
            Some(dir)
        }
        None => None,
    };
    let project = config_root.as_deref().unwrap_or(&cwd);
    let mut settings = load_settings(cli, &home, project)?;
    if let Some(trusted_now) = settle_trust(cli, &home, project, &settings, headless)?
        && trusted_now
    {
        settings = load_settings(cli, &home, project)?;
    }
    for warning in &settings.ignored {
        eprintln!("{warning}");
    }
    // Read once: the settings' env fills in what the process does not set, for the
    // libraries' configuration and for the programs gyre starts, never in gyre's own
    // environment.
    let env = process_env.with_settings(&settings.env);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let mut options = cli.session_options();
    options.project_config_root = config_root;
    if !headless {
        return Ok(runtime.block_on(gyre_tui::run(
            &options,
            cli.prompt.clone(),
            &cwd,
            &settings,
            &env,
        ))?);
    }
    let headless = gyre_exec::HeadlessOptions {
        prompt: cli.prompt.clone(),
        input_format: cli.input_format,
        output_format: cli.output_format,
        include_partial_messages: cli.include_partial_messages,
        include_hook_events: cli.include_hook_events,
        verbose: cli.verbose,
        quiet: cli.quiet,
        permission_prompt_tool: cli.permission_prompt_tool.clone(),
        no_permission_prompts: cli.permission_prompts.as_deref() == Some("none"),
        session_mirror: cli.session_mirror,
        replay_user_messages: cli.replay_user_messages,
    };
    let outcome = runtime.block_on(gyre_exec::run(&headless, &options, &cwd, &settings, &env))?;
    Ok(match outcome {
        gyre_exec::Outcome::Done => ExitCode::SUCCESS,
        gyre_exec::Outcome::Failed => ExitCode::from(EXIT_ERROR),
        gyre_exec::Outcome::Interrupted => ExitCode::from(EXIT_INTERRUPTED),
        gyre_exec::Outcome::Usage(message) => usage_error(&message),
    })
}

/// In a folder the user has not trusted, what its project files asked for and did not
/// get: headless says so in one line; the interactive session asks once, before it
/// starts. `Some(true)` when the user just trusted it (settings must be read again).
fn settle_trust(
    cli: &Cli,
    home: &Path,
    cwd: &Path,
    settings: &Settings,
    headless: bool,
) -> Result<Option<bool>> {
    let trusted = gyre_core::trust::is_trusted(home, cwd);
    let servers = if cli.strict_mcp_config || trusted {
        Vec::new()
    } else {
        gyre_core::trust::project_mcp_servers(cwd)
    };
    let agents = if trusted {
        Vec::new()
    } else {
        gyre_core::agents::project_agent_names(cwd)
    };
    let mut items = gyre_core::trust::ignored_items(&settings.untrusted, &servers, &agents);
    if !trusted {
        items.extend(gyre_core::commands::project_untrusted_item(cwd));
    }
    if items.is_empty() {
        return Ok(None);
    }
    if headless {
        eprintln!("{}", gyre_core::trust::ignored_line(&items));
        return Ok(Some(false));
    }
    let trusted = gyre_core::trust::ask(
        home,
        cwd,
        &items,
        &mut std::io::stdin().lock(),
        &mut std::io::stderr(),
    )?;
    Ok(Some(trusted))
}

/// The settings files `--setting-sources` names (all three by default), then
/// `--settings` (a file or inline JSON) over them.
fn load_settings(cli: &Cli, home: &Path, cwd: &Path) -> Result<Settings> {
    let mut settings = match &cli.setting_sources {
        None => Settings::load(home, cwd)?,
        Some(sources) => {
            let wanted: Vec<&str> = sources
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            if let Some(bad) = wanted
                .iter()
                .find(|s| !gyre_core::settings::SOURCES.contains(s))
            {
                anyhow::bail!(
                    "--setting-sources: unknown source {bad:?}; use user, project and/or local"
                );
            }
            Settings::load_sources(home, cwd, &wanted)?
        }
    };
    apply_settings_flag(cli, &mut settings)?;
    apply_managed_settings_flag(cli, &mut settings)?;
    Ok(settings)
}

fn apply_settings_flag(cli: &Cli, settings: &mut Settings) -> Result<()> {
    let Some(value) = &cli.settings else {
        return Ok(());
    };
    let (path, text) = if value.trim_start().starts_with('{') {
        (Path::new("--settings").to_path_buf(), value.clone())
    } else {
        let path = Path::new(value).to_path_buf();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read --settings {}", path.display()))?;
        (path, text)
    };
    settings.merge(Settings::parse(&path, &text)?);
    Ok(())
}

/// `--managed-settings JSON|FILE`: policy settings from the program that started gyre,
/// over everything else and restrictive-only.
fn apply_managed_settings_flag(cli: &Cli, settings: &mut Settings) -> Result<()> {
    let Some(value) = &cli.managed_settings else {
        return Ok(());
    };
    let text = if value.trim_start().starts_with('{') {
        value.clone()
    } else {
        std::fs::read_to_string(value)
            .with_context(|| format!("could not read --managed-settings {value}"))?
    };
    let policy: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--managed-settings: not a JSON object: {value}"))?;
    let dropped = settings.restrict(&policy)?;
    if !dropped.is_empty() {
        eprintln!("{}", gyre_core::settings::dropped_policy_line(&dropped));
    }
    Ok(())
}
