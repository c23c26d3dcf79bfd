//! `cargo xtask ci`: exactly what `.ci/run` runs.

use anyhow::Result;

use crate::run_cmd;

pub fn run(_args: &[String]) -> Result<()> {
    run_cmd("cargo", &["fmt", "--all", "--", "--check"])?;
    run_cmd(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    let nextest = std::process::Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if nextest {
        run_cmd(
            "cargo",
            &["nextest", "run", "--workspace", "--no-fail-fast"],
        )?;
        run_cmd("cargo", &["test", "--workspace", "--doc"])?;
    } else {
        run_cmd("cargo", &["test", "--workspace", "--no-fail-fast"])?;
    }
    run_cmd("cargo", &["xtask", "demo"])?;
    Ok(())
}
