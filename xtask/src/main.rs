//! `cargo xtask`: the maintainers' commands.

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
    ///
    /// Builds gyre (cargo shows its progress), then runs the real binary with `--verbose`
    /// against gyre-testkit serving xtask/demo/session.json, in a small project under
    /// target/demo/run-<time>/. That project and gyre's session transcript stay there
    /// until you remove them; the demo prints both paths.
    Demo(demo::Args),
    /// What CI runs, in this order: fmt check, clippy, libraries without default features,
    /// fuzz targets compile, install tmux, rg, node and npm if missing, tests (ignored ones included),
    /// doc tests, fixture check, demo, bench --quick.
    Ci(ci::Args),
    /// Optimised build, tarball gyre-<version>-<target>.tar.gz and its .sha256.
    Release(release::Args),
    /// Record, replay or check fixtures (secrets redacted).
    #[command(subcommand)]
    Fixture(fixture::FixtureCommand),
    /// The benchmark suite: one table, goals and ratios.
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

/// `program` to run in the workspace root, without the variables cargo set for xtask
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …): a child cargo that inherited them would
/// rebuild what the user's own `cargo build` built (see `gyre_testkit::cargo`).
fn command(program: &str) -> Command {
    let mut command = Command::new(program);
    command.current_dir(workspace_root());
    gyre_testkit::cargo::scrub(&mut command);
    command
}

/// Runs a command in the workspace root, failing with its name if it fails.
fn run_cmd(program: &str, args: &[&str]) -> Result<()> {
    eprintln!("$ {program} {}", args.join(" "));
    let status = command(program)
        .args(args)
        .status()
        .with_context(|| format!("could not run {program}"))?;
    if !status.success() {
        bail!("`{program} {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// Runs a command in the workspace root and returns its stdout.
fn output_of(program: &str, args: &[&str]) -> Result<String> {
    let out = command(program)
        .args(args)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use clap::CommandFactory;
    use clap::error::ErrorKind;

    use super::*;

    /// Every subcommand path: `["demo"]`, `["fixture", "record"]`, …
    fn subcommand_paths(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_owned());
            out.push(path.clone());
            subcommand_paths(sub, &path, out);
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_answers_help_instead_of_running() {
        let mut paths = Vec::new();
        subcommand_paths(&Cli::command(), &[], &mut paths);
        let names: Vec<String> = paths.iter().map(|p| p.join(" ")).collect();
        for expected in ["demo", "ci", "release", "fixture record", "bench"] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        for path in paths {
            for flag in ["--help", "-h"] {
                let args = std::iter::once("cargo xtask")
                    .chain(path.iter().map(String::as_str))
                    .chain([flag]);
                let err = Cli::try_parse_from(args).expect_err("help is not a task to run");
                assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{path:?} {flag}");
                assert!(err.to_string().contains("Usage: cargo xtask"), "{err}");
            }
        }
    }

    /// Where each of `needles` first occurs in `haystack`, searching after the previous.
    fn in_order(haystack: &str, needles: &[&str]) -> Result<(), String> {
        let mut from = 0;
        for needle in needles {
            match haystack[from..].find(needle) {
                Some(at) => from += at + needle.len(),
                None => {
                    return Err(format!(
                        "{needle:?} missing or out of order in {haystack:?}"
                    ));
                }
            }
        }
        Ok(())
    }

    #[test]
    fn ci_help_lists_the_steps_in_the_order_they_run() {
        let mut cli = Cli::command();
        let ci = cli.find_subcommand_mut("ci").unwrap();
        let help = ci.render_help().to_string();
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        let names: Vec<&str> = ci::Step::ALL.iter().map(|s| s.name()).collect();
        in_order(&help, &names).unwrap();
    }

    #[test]
    fn the_readme_lists_the_ci_steps_in_the_order_they_run() {
        let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
        let sentence = readme
            .split("\n\n")
            .find(|p| p.starts_with("`cargo xtask ci` runs, in this order:"))
            .expect("the README says what `cargo xtask ci` runs");
        let sentence = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
        // The README's word for each step of ci::Step::ALL.
        let words: [&str; ci::Step::ALL.len()] = [
            "fmt",
            "clippy",
            "default features",
            "fuzz",
            "tmux",
            "every test",
            "doc tests",
            "fixture check",
            "demo",
            "bench",
        ];
        in_order(&sentence, &words).unwrap();
    }
}
