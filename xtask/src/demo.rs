//! `cargo xtask demo`: gyre's main job with no API key. Starts gyre-testkit with the
//! bundled session script, runs the real `gyre` binary against it in a scratch project,
//! and prints the session as it happens.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use gyre_testkit::{Script, TestServer};
use serde_json::Value;

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

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or_default().replace('\t', "  ");
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || s.lines().count() > 1 {
        out.push('…');
    }
    out
}

/// Renders one stream-json line for people.
fn render(v: &Value) -> Option<String> {
    let kind = v.get("type")?.as_str()?;
    match kind {
        "system" => match v.get("subtype")?.as_str()? {
            "init" => Some(format!(
                "session {} · model {} · tools {}",
                v["session_id"].as_str()?,
                v["model"].as_str()?,
                v["tools"]
                    .as_array()?
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            "api_retry" => Some(format!(
                "  … retrying in {} ms (attempt {}/{})",
                v["retry_delay_ms"], v["attempt"], v["max_retries"]
            )),
            other => Some(format!("  [{other}]")),
        },
        "assistant" => {
            let mut out = Vec::new();
            for block in v["message"]["content"].as_array()? {
                match block["type"].as_str()? {
                    "text" => out.push(format!(
                        "● {}",
                        block["text"].as_str()?.replace('\n', "\n  ")
                    )),
                    "thinking" => out.push(format!(
                        "  (thinking) {}",
                        first_line(block["thinking"].as_str()?, 70)
                    )),
                    "tool_use" => {
                        out.push(format!("● {}({})", block["name"].as_str()?, block["input"]));
                    }
                    _ => {}
                }
            }
            Some(out.join("\n"))
        }
        "user" => {
            let mut out = Vec::new();
            for block in v["message"]["content"].as_array()? {
                if block["type"] == "tool_result" {
                    let text = match &block["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let lines = text.lines().count();
                    let mark = if block["is_error"] == true {
                        "✗"
                    } else {
                        "⎿"
                    };
                    out.push(format!(
                        "  {mark} {} ({lines} lines)",
                        first_line(&text, 60)
                    ));
                }
            }
            Some(out.join("\n"))
        }
        "result" => Some(format!(
            "\nresult: {} · {} turns · {} ms · ${:.4} · terminal {}",
            v["subtype"].as_str()?,
            v["num_turns"],
            v["duration_ms"],
            v["total_cost_usd"].as_f64()?,
            v["terminal_reason"].as_str()?
        )),
        _ => None,
    }
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

    let scratch = tempfile::tempdir().context("could not create a scratch directory")?;
    let project = scratch.path().join("thermo");
    write_project(&project)?;
    let home = scratch.path().join("gyre-home");
    let script = Script::from_json(&SCRIPT.replace("$SCRATCH", &project.to_string_lossy()))
        .context("the bundled demo script does not parse")?;
    let server = TestServer::spawn(script).context("could not start gyre-testkit")?;

    println!(
        "gyre demo — scripted model at {} (gyre-testkit), project in {}\n",
        server.url(),
        project.display()
    );
    println!("> {PROMPT}\n");
    let mut child = Command::new(&gyre)
        .args([
            "-p",
            PROMPT,
            "--output-format",
            "stream-json",
            "--verbose",
            "--max-turns",
            "10",
        ])
        .current_dir(&project)
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "testkit-demo-key")
        .env("GYRE_HOME", &home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not run {}", gyre.display()))?;
    let stdout = child.stdout.take().context("no stdout from gyre")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let v: Value = serde_json::from_str(&line)
            .with_context(|| format!("gyre printed a line that is not JSON: {line}"))?;
        if let Some(text) = render(&v).filter(|t| !t.is_empty()) {
            println!("{text}");
        }
    }
    let status = child.wait()?;
    println!(
        "\ngyre exited with {status}; {} requests reached the scripted model; transcript under {}",
        server.request_count(),
        home.join("projects").display()
    );
    if !status.success() {
        bail!("the demo session failed");
    }
    Ok(())
}
