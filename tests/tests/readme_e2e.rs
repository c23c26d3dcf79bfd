//! The README stays true: its headless examples run against gyre-testkit as written,
//! its offline walk-through works with the bundled script, and every flag it lists is
//! one `gyre --help` documents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gyre_e2e::{Sandbox, gyre_binary, testkit_binary};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The lines of the `sh` code blocks under the `## {heading}` section.
fn sh_lines(readme: &str, heading: &str) -> Vec<String> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("README has no '## {heading}' section"));
    let mut lines = Vec::new();
    let mut inside = false;
    for line in section.lines() {
        if line.starts_with("```") {
            inside = !inside && line.trim() == "```sh";
            continue;
        }
        if inside {
            lines.push(line.to_owned());
        }
    }
    lines
}

/// A README line without its trailing `# comment`.
fn command_part(line: &str) -> &str {
    line.split("  #").next().unwrap_or(line).trim()
}

/// `bash -c line` with `gyre` first on PATH and the sandbox's environment.
fn bash(sandbox: &Sandbox, server: &TestServer, line: &str) -> std::process::Output {
    let gyre = sandbox.gyre(server).unwrap();
    let bin_dir = gyre_binary().unwrap().parent().unwrap().to_path_buf();
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(line)
        .current_dir(sandbox.project())
        .env_clear();
    for (key, value) in gyre.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path).stdin(Stdio::null());
    cmd.output().unwrap()
}

#[test]
fn the_readme_s_headless_examples_run_as_written() {
    let lines: Vec<String> = sh_lines(&readme(), "Using it with the Anthropic API")
        .iter()
        .map(|l| command_part(l).to_owned())
        .filter(|l| l.starts_with("gyre -p"))
        .collect();
    assert!(lines.len() >= 2, "{lines:?}");
    for line in lines {
        let sandbox = Sandbox::new().unwrap();
        let server = TestServer::spawn(Script::new([Turn::text("All good.")])).unwrap();
        let out = bash(&sandbox, &server, &line);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "`{line}` failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        if line.contains("stream-json") {
            let parsed: Vec<Value> = stdout
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(parsed.last().unwrap()["type"], "result", "{stdout}");
        } else {
            assert_eq!(stdout.trim(), "All good.", "`{line}`");
        }
    }
}

#[test]
fn the_offline_walk_through_works_with_the_bundled_script() {
    let lines = sh_lines(&readme(), "Try it offline");
    let script = lines
        .iter()
        .find_map(|l| {
            command_part(l)
                .split_whitespace()
                .skip_while(|w| *w != "--script")
                .nth(1)
                .map(str::to_owned)
        })
        .expect("the offline section starts gyre-testkit --script");
    let gyre_line = lines
        .iter()
        .map(|l| command_part(l))
        .find(|l| l.starts_with("target/debug/gyre "))
        .expect("the offline section runs target/debug/gyre")
        .trim_start_matches("target/debug/gyre ")
        .to_owned();

    // The testkit as the README starts it: it prints PORT <n>.
    let mut testkit = Command::new(testkit_binary().unwrap())
        .args(["--script", &script])
        .current_dir(root())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(testkit.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port = first
        .trim()
        .strip_prefix("PORT ")
        .expect("PORT <n>")
        .to_owned();

    let sandbox = Sandbox::new().unwrap();
    let words: Vec<String> = gyre_line
        .split('"')
        .enumerate()
        .flat_map(|(i, part)| {
            if i % 2 == 1 {
                vec![part.to_owned()]
            } else {
                part.split_whitespace().map(str::to_owned).collect()
            }
        })
        .collect();
    let out = Command::new(gyre_binary().unwrap())
        .args(&words)
        .current_dir(sandbox.project())
        .env("GYRE_HOME", sandbox.home())
        .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("ANTHROPIC_API_KEY", "offline")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let _ = testkit.kill();
    let _ = testkit.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty(), "no answer on stdout");
}

#[test]
fn every_flag_the_readme_lists_is_documented_by_gyre_help() {
    let readme = readme();
    let flags_paragraph = readme
        .split("\n\n")
        .find(|p| p.starts_with("**Flags**"))
        .expect("README has a **Flags** paragraph");
    // The sentence naming the flags that are only accepted comes last.
    let listed = flags_paragraph
        .split("are accepted with a")
        .next()
        .unwrap_or_default()
        .rsplit_once("`--betas`")
        .map_or(flags_paragraph, |(before, _)| before);
    let help = Command::new(gyre_binary().unwrap())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let flags: Vec<&str> = listed
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .collect();
    assert!(flags.len() >= 15, "{flags:?}");
    let missing: Vec<&&str> = flags.iter().filter(|f| !help.contains(**f)).collect();
    assert!(
        missing.is_empty(),
        "README flags not in gyre --help: {missing:?}"
    );
}
