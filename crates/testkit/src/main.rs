//! `gyre-testkit --script FILE [--port P]`: serves a script until SIGTERM or SIGINT.
//!
//! Prints exactly `PORT <n>` on stdout once listening, so a parent process can read the
//! port from the first line.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use gyre_testkit::{Script, TestServer};

const USAGE: &str = "usage: gyre-testkit --script FILE [--port PORT]

Serves a scripted Anthropic Messages API on 127.0.0.1 (random port unless --port).
Prints `PORT <n>` on stdout, then serves until SIGTERM or SIGINT.
The script format is documented in the gyre-testkit crate docs.";

#[derive(Debug)]
struct Args {
    script: PathBuf,
    port: u16,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> anyhow::Result<Option<Args>> {
    let mut script = None;
    let mut port = 0;
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .with_context(|| format!("{flag} needs a value\n\n{USAGE}"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--script" => script = Some(PathBuf::from(value()?)),
            "--port" => {
                let text = value()?;
                port = text
                    .parse()
                    .with_context(|| format!("--port: `{text}` is not a port number"))?;
            }
            other => bail!("unknown argument `{other}`\n\n{USAGE}"),
        }
    }
    let script = script.with_context(|| format!("--script is required\n\n{USAGE}"))?;
    Ok(Some(Args { script, port }))
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
    let Some(args) = parse_args(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
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

    fn parse(args: &[&str]) -> anyhow::Result<Option<Args>> {
        parse_args(args.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn parses_both_flags_in_both_spellings() {
        let args = parse(&["--script", "s.json", "--port=8080"])
            .unwrap()
            .unwrap();
        assert_eq!(args.script, PathBuf::from("s.json"));
        assert_eq!(args.port, 8080);
        let args = parse(&["--script=s.json"]).unwrap().unwrap();
        assert_eq!(args.port, 0);
    }

    #[test]
    fn rejects_missing_script_and_unknown_flags() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["--script"]).is_err());
        assert!(parse(&["--script", "s", "--verbose"]).is_err());
        assert!(parse(&["--script", "s", "--port", "x"]).is_err());
        assert!(parse(&["--help"]).unwrap().is_none());
    }
}
