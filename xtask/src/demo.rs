//! `cargo xtask demo`: gyre's main job with no API key. Starts gyre-testkit with the
//! bundled session script and runs the real `gyre` binary against it in a small project
//! under `target/demo/`, in text mode with `--verbose`: what the reader sees is gyre's
//! own output (a retry, each tool call and its outcome on stderr, the answer on
//! stdout). Works without a terminal, so CI runs it too. The project and transcript
//! stay for the reader to look at.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use gyre_testkit::{Script, TestServer};

use crate::{cargo, run_cmd, target_dir};

const SCRIPT: &str = include_str!("../demo/session.json");
const PROMPT: &str = "What does this project do? Read what you need and summarise it.";

fn write_project(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::create_dir_all(dir.join("tests"))?;
    std::fs::write(
        dir.join("README.md"),
        "# thermo\n\nConvert temperatures between Celsius and Fahrenheit.\n\n```rust\nassert_eq!(thermo::c_to_f(100.0), 212.0);\n```\n",
    )?;
    std::fs::write(
        dir.join("src/lib.rs"),
        "//! Temperature conversions.\n\n/// Celsius to Fahrenheit.\npub fn c_to_f(c: f64) -> f64 {\n    c * 9.0 / 5.0 + 32.0\n}\n\n/// Fahrenheit to Celsius.\npub fn f_to_c(f: f64) -> f64 {\n    (f - 32.0) * 5.0 / 9.0\n}\n",
    )?;
    std::fs::write(
        dir.join("tests/convert.rs"),
        "#[test]\nfn freezing_and_boiling() {\n    assert_eq!(thermo::c_to_f(0.0), 32.0);\n    assert_eq!(thermo::f_to_c(212.0), 100.0);\n}\n",
    )?;
    Ok(())
}

/// `cargo xtask demo`: takes no options.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args) -> Result<()> {
    run_cmd(&cargo(), &["build", "-p", "gyre-cli"])?;
    let gyre = target_dir().join("debug").join("gyre");
    if !gyre.is_file() {
        bail!("built gyre not found at {}", gyre.display());
    }

    // Kept after the demo (the transcript is worth reading), under target/ so that
    // `cargo clean` or `rm -rf target/demo` removes it.
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run_dir = target_dir().join("demo").join(format!("run-{stamp}"));
    let project = run_dir.join("thermo");
    write_project(&project)?;
    let home = run_dir.join("gyre-home");
    let script = Script::from_json(&SCRIPT.replace("$SCRATCH", &project.to_string_lossy()))
        .context("the bundled demo script does not parse")?;
    let server = TestServer::spawn(script).context("could not start gyre-testkit")?;

    println!(
        "gyre demo: the real gyre binary in {}, answered by a scripted model\n\
         (gyre-testkit at {}, so no API key and no cost). gyre's own output follows:\n\
         its progress and tool lines on stderr, the answer on stdout.\n",
        project.display(),
        server.url(),
    );
    println!("$ gyre -p {PROMPT:?} --verbose\n");
    let status = Command::new(&gyre)
        .args(["-p", PROMPT, "--verbose", "--max-turns", "10"])
        .current_dir(&project)
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "testkit-demo-key")
        .env("GYRE_HOME", &home)
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("could not run {}", gyre.display()))?;
    let transcripts = home.join("projects");
    println!(
        "\ngyre exited with {status}; {} requests reached the scripted model.\n\
         The project and the session transcript are kept in {}\n\
         (transcript: {}); remove them with `rm -rf {}`.\n\
         In a terminal, plain `gyre` opens the interactive UI; docs/repl.md shows it.",
        server.request_count(),
        run_dir.display(),
        transcripts.display(),
        target_dir().join("demo").display(),
    );
    if !status.success() {
        bail!("the demo session failed");
    }
    Ok(())
}
