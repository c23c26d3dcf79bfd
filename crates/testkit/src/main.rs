//! `gyre-testkit --script FILE [--port P]`: serves a script until SIGTERM or SIGINT.
//!
//! Prints exactly `PORT <n>` on stdout once listening, so a parent process can read the
//! port from the first line.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use gyre_testkit::{Script, TestServer};

/// Serves a scripted Anthropic Messages API on 127.0.0.1 (a random port unless
/// --port). Prints `PORT <n>` on stdout, then serves until SIGTERM or SIGINT. The
/// script format is documented in the gyre-testkit crate docs.
#[derive(Debug, clap::Parser)]
#[command(name = "gyre-testkit", version)]
struct Args {
    /// The session script (JSON) to serve.
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

/// Resolves on SIGTERM or SIGINT. Handlers are installed when this is called, not when
/// it is first polled, so that a signal sent right after `PORT` is printed is not fatal.
#[cfg(unix)]
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

#[cfg(not(unix))]
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    Ok(async {
        // Without a handler Ctrl-C ends the process anyway.
        let _ = tokio::signal::ctrl_c().await;
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gyre-testkit: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let args = <Args as clap::Parser>::parse();
    let script = Script::from_file(&args.script)?;
    let server = TestServer::start_on(script, args.port)?;
    let shutdown = shutdown_signal()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "PORT {}", server.port()).context("cannot write to stdout")?;
    stdout.flush().context("cannot write to stdout")?;
    drop(stdout);
    shutdown.await;
    drop(server);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        Args::try_parse_from(std::iter::once("gyre-testkit").chain(args.iter().copied()))
    }

    #[test]
    fn parses_both_flags_in_both_spellings() {
        let args = parse(&["--script", "s.json", "--port=8080"]).unwrap();
        assert_eq!(args.script, PathBuf::from("s.json"));
        assert_eq!(args.port, 8080);
        let args = parse(&["--script=s.json"]).unwrap();
        assert_eq!(args.port, 0);
    }

    #[test]
    fn rejects_missing_script_and_unknown_flags() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--script"]).is_err());
        assert!(parse(&["--script", "s", "--verbose"]).is_err());
        assert!(parse(&["--script", "s", "--port", "x"]).is_err());
        let help = parse(&["--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
