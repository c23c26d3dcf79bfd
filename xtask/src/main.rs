//! `cargo xtask`: the maintainers' commands (SPEC §10).

mod bench;
mod ci;
mod demo;
mod fixture;
mod proxy;
mod release;
mod secrets;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

/// The maintainers' commands. Each has its own `--help`.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    about = "gyre's maintainer commands: demo, ci, release, fixture, bench"
)]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run gyre end to end against the bundled testkit session (no API key needed).
    Demo(demo::Args),
    /// What CI runs, in this order: fmt check, clippy, install tmux if missing, tests
    /// (ignored ones included), doc tests, fixture check, demo, bench --quick.
    Ci(ci::Args),
    /// Optimised build, tarball gyre-<version>-<target>.tar.gz and its .sha256.
    Release(release::Args),
    /// Record, replay or check fixtures (secrets redacted).
    #[command(subcommand)]
    Fixture(fixture::FixtureCommand),
    /// The benchmark suite: one table, goals and ratios (SPEC §11).
    Bench(bench::Args),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Task::Demo(args) => demo::run(&args),
        Task::Ci(args) => ci::run(&args),
        Task::Release(args) => release::run(&args),
        Task::Fixture(command) => fixture::run(command),
        Task::Bench(args) => bench::run(&args),
    }
}

/// The workspace root (xtask's parent directory).
fn workspace_root() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// Cargo's target directory (`CARGO_TARGET_DIR` or `<root>/target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace_root().join("target"), PathBuf::from)
}

/// The cargo that runs us (so `cargo +toolchain xtask` stays on that toolchain).
fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// Runs a command in the workspace root, failing with its name if it fails.
fn run_cmd(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("could not run {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// Runs a command in the workspace root and returns its stdout.
fn output_of(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("could not run {program}"))?;
    if !out.status.success() {
        bail!(
            "`{program} {}` failed with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{program} printed non-UTF-8"))
}

/// A size for people: `12.3 MiB`.
fn human_bytes(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}
