//! `cargo xtask`: the maintainers' commands (SPEC §10).

mod ci;
mod demo;

use anyhow::{Result, bail};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  demo        run gyre end to end against the bundled testkit session (no API key)
  ci          what CI runs: fmt check, clippy, tests, bench --quick, fixture check";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        println!("{USAGE}");
        return Ok(());
    };
    let rest = &args[1..];
    match command.as_str() {
        "demo" => demo::run(rest),
        "ci" => ci::run(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown xtask command {other:?}\n\n{USAGE}"),
    }
}

/// The workspace root (xtask's parent directory).
fn workspace_root() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// Runs a command in the workspace root, failing with its name if it fails.
fn run_cmd(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = std::process::Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()?;
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}
