//! `cargo xtask ci`: exactly what `.ci/run` runs, cheapest checks first.
//!
//! fmt, clippy, the library crates built without their default features, a check that
//! the fuzz targets compile, the system tools that ignored tests and the bench need (tmux, rg), every test — the
//! ignored ones included, so a test that needs a tool runs here rather than passing
//! unseen — (nextest when installed, plus doc tests), `fixture check`, the demo, then
//! `bench --quick` (a release build: the slowest step, so last). [`Step::ALL`] is that
//! order; `--help` and the README list it. 12.5–17 minutes from a fresh clone on 2 cores,
//! a few with a warm `target/`.

use std::time::Instant;

use anyhow::{Context, Result};

use crate::{cargo, run_cmd};

/// `cargo xtask ci`: takes no options.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// The steps, in the order they run (the `--help` text and the README list them so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Fmt,
    Clippy,
    LibrariesAlone,
    FuzzCheck,
    Tools,
    Tests,
    DocTests,
    FixtureCheck,
    Demo,
    Bench,
}

impl Step {
    pub const ALL: [Self; 10] = [
        Self::Fmt,
        Self::Clippy,
        Self::LibrariesAlone,
        Self::FuzzCheck,
        Self::Tools,
        Self::Tests,
        Self::DocTests,
        Self::FixtureCheck,
        Self::Demo,
        Self::Bench,
    ];

    /// How the step is announced; the `--help` text uses the same words.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fmt => "fmt check",
            Self::Clippy => "clippy",
            Self::LibrariesAlone => "libraries without default features",
            Self::FuzzCheck => "fuzz targets compile",
            Self::Tools => "install tmux, rg, node and npm if missing",
            Self::Tests => "tests (ignored ones included)",
            Self::DocTests => "doc tests",
            Self::FixtureCheck => "fixture check",
            Self::Demo => "demo",
            Self::Bench => "bench --quick",
        }
    }

    fn run(self, cargo: &str) -> Result<()> {
        match self {
            Self::Fmt => run_cmd(cargo, &["fmt", "--all", "--", "--check"]),
            Self::Clippy => run_cmd(
                cargo,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            ),
            // gyre-api without its HTTP client and gyre-compact without tiktoken: the
            // parts other projects take alone must build so.
            Self::LibrariesAlone => run_cmd(
                cargo,
                &[
                    "check",
                    "-p",
                    "gyre-api",
                    "-p",
                    "gyre-compact",
                    "--no-default-features",
                    "--lib",
                ],
            ),
            // The fuzz targets are a workspace of their own (cargo-fuzz builds them on
            // nightly); checking them here keeps a moved or changed file from breaking
            // them unseen. Their own target dir under target/, so the workspace's
            // build is not disturbed.
            Self::FuzzCheck => run_cmd(
                cargo,
                &[
                    "check",
                    "--manifest-path",
                    "fuzz/Cargo.toml",
                    "--target-dir",
                    "target/fuzz",
                    "--bins",
                ],
            ),
            // rg: the bench's reference for Grep and Glob.
            Self::Tools => ensure_installed(&[
                ("tmux", "tmux"),
                ("rg", "ripgrep"),
                ("node", "nodejs"),
                ("npm", "npm"),
            ]),
            Self::Tests if nextest_installed(cargo) => run_cmd(
                cargo,
                &[
                    "nextest",
                    "run",
                    "--workspace",
                    "--no-fail-fast",
                    "--run-ignored",
                    "all",
                ],
            ),
            // Without nextest, `cargo test` runs the doc tests with the others.
            Self::Tests => run_cmd(
                cargo,
                &[
                    "test",
                    "--workspace",
                    "--no-fail-fast",
                    "--",
                    "--include-ignored",
                ],
            ),
            Self::DocTests if nextest_installed(cargo) => {
                run_cmd(cargo, &["test", "--workspace", "--doc"])
            }
            Self::DocTests => {
                eprintln!("(`cargo test` ran them with the other tests)");
                Ok(())
            }
            Self::FixtureCheck => {
                crate::fixture::run(crate::fixture::FixtureCommand::Check { dir: None })
            }
            Self::Demo => crate::demo::run(&crate::demo::Args {}),
            Self::Bench => crate::bench::run(&crate::bench::Args::quick()),
        }
    }
}

pub fn run(_args: &Args) -> Result<()> {
    let started = Instant::now();
    let cargo = cargo();
    for step in Step::ALL {
        eprintln!(
            "\n== ci: {} ({:.0?} so far)",
            step.name(),
            started.elapsed()
        );
        step.run(&cargo)?;
    }
    eprintln!("\n== ci: passed in {:.0?}", started.elapsed());
    Ok(())
}

/// nextest runs every test but the doc tests, which need `cargo test --doc`.
fn nextest_installed(cargo: &str) -> bool {
    crate::command(cargo)
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
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
