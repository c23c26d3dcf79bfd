//! `cargo xtask release [--target T] [--allow-dirty]`: the optimised, stripped `gyre`
//! (the workspace's `[profile.release]`), packed with README and LICENSE into
//! `target/dist/gyre-<version>-<target>.tar.gz`, plus a `.sha256` that `sha256sum -c`
//! accepts.
//!
//! Packing uses the system `tar` (sorted names, fixed owner and mtime, `gzip -n`) and
//! `sha256sum`: both are on every Linux CI image, and a reproducible tarball needs nothing
//! more.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, human_bytes, output_of, run_cmd, target_dir, workspace_root};

/// `cargo xtask release`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Build for this target triple (default: the host).
    #[arg(long)]
    target: Option<String>,
    /// Package even when the work tree has uncommitted changes.
    #[arg(long)]
    allow_dirty: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let target = args.target.clone();
    let allow_dirty = args.allow_dirty;

    let dirty = output_of("git", &["status", "--porcelain"])?;
    if !dirty.trim().is_empty() {
        if allow_dirty {
            eprintln!("warning: releasing from a dirty tree (--allow-dirty)");
        } else {
            bail!(
                "the working tree has uncommitted changes; commit them or pass --allow-dirty:\n{}",
                dirty.trim_end()
            );
        }
    }

    let version = workspace_version()?;
    let host = host_triple()?;
    let triple = target.clone().unwrap_or(host);
    let cargo = cargo();
    let mut build = vec![
        "build",
        "--release",
        "--locked",
        "-p",
        "gyre-cli",
        "--bin",
        "gyre",
    ];
    if let Some(t) = &target {
        build.extend(["--target", t.as_str()]);
    }
    run_cmd(&cargo, &build)?;
    let release_dir = match &target {
        Some(t) => target_dir().join(t).join("release"),
        None => target_dir().join("release"),
    };
    let binary = release_dir.join("gyre");
    if !binary.is_file() {
        bail!("the release build left no binary at {}", binary.display());
    }

    let name = format!("gyre-{version}-{triple}");
    let dist = target_dir().join("dist");
    let stage = dist.join(&name);
    if stage.exists() {
        std::fs::remove_dir_all(&stage)
            .with_context(|| format!("could not clear {}", stage.display()))?;
    }
    std::fs::create_dir_all(&stage)
        .with_context(|| format!("could not create {}", stage.display()))?;
    let root = workspace_root();
    copy(&binary, &stage.join("gyre"))?;
    copy(&root.join("README.md"), &stage.join("README.md"))?;
    copy(&root.join("LICENSE"), &stage.join("LICENSE"))?;

    let tarball = dist.join(format!("{name}.tar.gz"));
    let mtime = format!("@{}", source_date_epoch());
    let status = Command::new("tar")
        .current_dir(&dist)
        .args([
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mtime",
            &mtime,
            "-I",
            "gzip -n -9",
            "-cf",
        ])
        .arg(&tarball)
        .arg(&name)
        .status()
        .context("could not run tar")?;
    if !status.success() {
        bail!("tar failed with {status}");
    }
    std::fs::remove_dir_all(&stage)
        .with_context(|| format!("could not remove {}", stage.display()))?;

    let tar_name = format!("{name}.tar.gz");
    let out = Command::new("sha256sum")
        .current_dir(&dist)
        .arg(&tar_name)
        .output()
        .context("could not run sha256sum")?;
    if !out.status.success() {
        bail!("sha256sum failed with {}", out.status);
    }
    let checksum = dist.join(format!("{tar_name}.sha256"));
    std::fs::write(&checksum, &out.stdout)
        .with_context(|| format!("could not write {}", checksum.display()))?;

    println!("gyre {version} for {triple}:");
    for path in [&binary, &tarball, &checksum] {
        let size = std::fs::metadata(path)
            .with_context(|| format!("could not stat {}", path.display()))?
            .len();
        println!("  {}  {}", path.display(), human_bytes(size));
    }
    println!(
        "verify with: (cd {} && sha256sum -c {tar_name}.sha256)",
        dist.display()
    );
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("could not copy {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// gyre-cli's version, which is the workspace's (`version.workspace = true`).
fn workspace_version() -> Result<String> {
    let metadata = output_of(
        &cargo(),
        &["metadata", "--no-deps", "--format-version", "1"],
    )?;
    let metadata: Value = serde_json::from_str(&metadata).context("cargo metadata is not JSON")?;
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "gyre-cli")
        .and_then(|p| p["version"].as_str())
        .map(str::to_owned)
        .context("cargo metadata lists no gyre-cli version")
}

fn host_triple() -> Result<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let info = output_of(&rustc, &["-vV"])?;
    info.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_owned())
        .context("`rustc -vV` names no host triple")
}

/// `SOURCE_DATE_EPOCH` if set, else the last commit's time: the same tree gives the same
/// tarball.
fn source_date_epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| output_of("git", &["log", "-1", "--format=%ct"]).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}
