//! `cargo xtask`: the maintainers' commands (SPEC §10).

mod bench;
mod ci;
mod demo;
mod fixture;
mod proxy;
mod release;
mod rusage;
mod secrets;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

const USAGE: &str = "usage: cargo xtask <command>

commands:
  demo                        run gyre end to end against the bundled testkit session (no API key)
  release [--target T] [--allow-dirty]
                              optimised build, tarball gyre-<version>-<target>.tar.gz and its .sha256
  fixture record (--script S | --live) -o F [--prompt P] [--project DIR] [-- GYRE_ARGS…]
                              record a gyre session to a fixture (secrets redacted)
  fixture replay F            replay it through gyre and diff the stream-json against the recording
  fixture check [DIR]         parse every fixture under tests/fixtures/ and scan them for secrets
  bench [--quick] [--baseline FILE]
                              the benchmark suite: one table, goals and ratios (SPEC §11)
  ci                          what CI runs: fmt check, clippy, tests, bench --quick, fixture check, demo";

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
        "release" => release::run(rest),
        "fixture" => fixture::run(rest),
        "bench" => bench::run(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown xtask command {other:?}\n\n{USAGE}"),
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

/// Takes `--name VALUE` out of `args`.
fn take_value(args: &mut Vec<String>, names: &[&str]) -> Result<Option<String>> {
    let Some(i) = args.iter().position(|a| names.contains(&a.as_str())) else {
        return Ok(None);
    };
    if i + 1 >= args.len() {
        bail!("{} needs a value", args[i]);
    }
    let value = args.remove(i + 1);
    args.remove(i);
    Ok(Some(value))
}

/// Takes the flag `--name` out of `args`.
fn take_flag(args: &mut Vec<String>, name: &str) -> bool {
    let before = args.len();
    args.retain(|a| a != name);
    args.len() != before
}

/// Fails on anything left over after the known options were taken.
fn no_more_args(args: &[String], usage: &str) -> Result<()> {
    if let Some(extra) = args.first() {
        bail!("unexpected argument {extra:?}\n\nusage: {usage}");
    }
    Ok(())
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
