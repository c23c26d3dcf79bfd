//! `cargo xtask ci`: exactly what `.ci/run` runs, cheapest checks first.
//!
//! fmt, clippy, the tests (nextest when installed, plus doc tests), `fixture check`,
//! the demo, then `bench --quick` (a release build: the slowest step, so last). About
//! 15 minutes from a cold `target/` on 2 cores, a few with a warm one.

use std::time::Instant;

use anyhow::Result;

use crate::{cargo, run_cmd};

pub fn run(_args: &[String]) -> Result<()> {
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
    step("tests");
    let nextest = std::process::Command::new(&cargo)
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if nextest {
        run_cmd(&cargo, &["nextest", "run", "--workspace", "--no-fail-fast"])?;
        run_cmd(&cargo, &["test", "--workspace", "--doc"])?;
    } else {
        run_cmd(&cargo, &["test", "--workspace", "--no-fail-fast"])?;
    }
    step("fixture check");
    crate::fixture::run(&["check".to_owned()])?;
    step("demo");
    crate::demo::run(&[])?;
    step("bench --quick");
    crate::bench::run(&["--quick".to_owned()])?;
    eprintln!("\n== ci: passed in {:.0?}", started.elapsed());
    Ok(())
}
