//! `cargo xtask ci`: exactly what `.ci/run` runs, cheapest checks first.
//!
//! fmt, clippy, the system tools that ignored tests and the bench need (tmux, rg), every test — the
//! ignored ones included, so a test that needs a tool runs here rather than passing
//! unseen — (nextest when installed, plus doc tests), `fixture check`, the demo, then
//! `bench --quick` (a release build: the slowest step, so last). About 15 minutes from a
//! cold `target/` on 2 cores, a few with a warm one.

use std::time::Instant;

use anyhow::{Context, Result};

use crate::{cargo, run_cmd};

/// `cargo xtask ci`: takes no options.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> Result<()> {
    let started = Instant::now();
    let cargo = cargo();
    let step = |name: &str| eprintln!("\n== ci: {name} ({:.0?} so far)", started.elapsed());

    step("fmt");
    run_cmd(&cargo, &["fmt", "--all", "--", "--check"])?;
    step("clippy");
    run_cmd(
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    step("tools for the ignored tests");
    // rg: the bench's reference for Grep and Glob.
    ensure_installed(&[("tmux", "tmux"), ("rg", "ripgrep")])?;
    step("tests (ignored ones included)");
    let nextest = std::process::Command::new(&cargo)
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if nextest {
        run_cmd(
            &cargo,
            &[
                "nextest",
                "run",
                "--workspace",
                "--no-fail-fast",
                "--run-ignored",
                "all",
            ],
        )?;
        run_cmd(&cargo, &["test", "--workspace", "--doc"])?;
    } else {
        run_cmd(
            &cargo,
            &[
                "test",
                "--workspace",
                "--no-fail-fast",
                "--",
                "--include-ignored",
            ],
        )?;
    }
    step("fixture check");
    crate::fixture::run(crate::fixture::FixtureCommand::Check { dir: None })?;
    step("demo");
    crate::demo::run(&crate::demo::Args {})?;
    step("bench --quick");
    crate::bench::run(&crate::bench::Args::quick())?;
    eprintln!("\n== ci: passed in {:.0?}", started.elapsed());
    Ok(())
}

/// Installs each missing `(command, Debian package)` with apt-get, or fails naming the
/// command to run: a test that needs a tool must run in CI, not pass unseen.
fn ensure_installed(tools: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(command, _)| {
            !std::process::Command::new("sh")
                .args(["-c", &format!("command -v {command}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|(_, package)| *package)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut install = vec!["install", "-y", "--no-install-recommends"];
    install.extend(&missing);
    let installed =
        run_cmd("apt-get", &["update", "-q"]).and_then(|()| run_cmd("apt-get", &install));
    installed.with_context(|| {
        format!(
            "these tests need {}: install with `apt-get install {}` (as root) and run again",
            missing.join(", "),
            missing.join(" ")
        )
    })
}
