//! The README stays true: every shell line in it is run here (or by `cargo xtask ci`,
//! which `.ci/run` runs), its offline walk-through works as written, the permission
//! sentences hold, every flag it lists is one `gyre --help` documents, and the flags it
//! calls accepted-but-ignored are exactly the ones gyre warns about.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use gyre_e2e::{Sandbox, gyre_binary};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

/// The lines of the `sh` code blocks in `text`.
fn sh_block_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in text.lines() {
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

/// The lines of the `sh` code blocks under the `## {heading}` section.
fn sh_lines(readme: &str, heading: &str) -> Vec<String> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with(heading))
        .unwrap_or_else(|| panic!("README has no '## {heading}' section"));
    sh_block_lines(section)
}

/// The commands of `lines`: comments dropped, here-document bodies skipped.
fn commands(lines: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut heredoc_end: Option<String> = None;
    for line in lines {
        if let Some(end) = &heredoc_end {
            if line.trim() == end {
                heredoc_end = None;
            }
            continue;
        }
        let command = command_part(line);
        if let Some((_, tag)) = command.split_once("<<") {
            heredoc_end = Some(tag.trim().trim_matches('\'').to_owned());
        }
        if !command.is_empty() {
            out.push(command.to_owned());
        }
    }
    out
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
fn the_offline_walk_through_runs_as_written() {
    let readme = readme();
    let lines = sh_lines(&readme, "Try it offline");
    let block = lines.join("\n");
    // The binaries the test harness builds are the ones the README's build line names.
    let build = commands(&lines).remove(0);
    assert_eq!(build, "cargo build -p gyre-cli -p gyre-testkit");
    let script_path = block
        .split_whitespace()
        .skip_while(|w| *w != "--script")
        .nth(1)
        .expect("the walk-through starts gyre-testkit --script FILE")
        .trim_end_matches(')')
        .to_owned();
    // The scripted answer is the text of the script's last turn.
    let script_json = block
        .split_once("<<'EOF'\n")
        .and_then(|(_, rest)| rest.split_once("\nEOF\n"))
        .expect("the walk-through writes the script with a here-document")
        .0;
    let script: Value = serde_json::from_str(script_json).unwrap();
    let answer = script["turns"].as_array().unwrap().last().unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();

    // Run the block as written, except: the binaries are already built (and may live in
    // another target dir) and the script goes to this test's dir.
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("README.md", "# a project\n").unwrap();
    let bin_dir = gyre_binary().unwrap().parent().unwrap().to_path_buf();
    let own_script = sandbox.home().join("offline.json");
    let body: Vec<&str> = lines.iter().skip(1).map(String::as_str).collect();
    let body = body
        .join("\n")
        .replace("target/debug/", &format!("{}/", bin_dir.display()))
        .replace(&script_path, &own_script.to_string_lossy());
    let script_text = format!("set -e\n{body}\n");
    let server = TestServer::spawn(Script::new([])).unwrap();
    let out = bash(&sandbox, &server, &script_text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    assert!(stdout.ends_with(&format!("{answer}\n")), "{stdout}");
    assert_eq!(stdout.matches(&answer).count(), 1, "{stdout}");
    // What the prose after the block says gyre prints on stderr.
    assert!(
        stderr.contains("gyre: The API is overloaded (529)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("retrying in 1 s (attempt 1/10)"),
        "{stderr}"
    );
    assert!(stderr.contains("● Glob *.md"), "{stderr}");
    // gyre starts once gyre-testkit listens: no connection is refused first.
    assert!(!stderr.contains("Could not reach the API"), "{stderr}");
    assert!(stderr.contains("⎿ 1 file"), "{stderr}");
    assert_eq!(
        server.request_count(),
        0,
        "the walk-through uses its own testkit"
    );
    // Its last line stops gyre-testkit (the script path is this test's own); a
    // SIGTERM'd process may take a moment to go.
    let running = || {
        let pids = Command::new("pgrep")
            .args(["-f", &own_script.to_string_lossy()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&pids.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let mut left = running();
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = running();
    }
    for pid in &left {
        let _ = Command::new("kill").arg(pid).status();
    }
    assert!(left.is_empty(), "gyre-testkit still runs: {left:?}");
}

#[test]
fn every_shell_line_in_the_readme_is_run_by_a_test_or_by_ci() {
    let readme = readme();
    let offline = commands(&sh_lines(&readme, "Try it offline"));
    let ci_run = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    let cli_manifest = std::fs::read_to_string(root().join("crates/cli/Cargo.toml")).unwrap();
    let mut unexercised = Vec::new();
    for line in commands(&sh_block_lines(&readme)) {
        let exercised = match line.as_str() {
            // `.ci/run` is `cargo xtask ci`, whose steps include the demo.
            "cargo xtask ci" | "cargo xtask demo" => ci_run.contains("exec cargo xtask ci"),
            // A release build would take minutes: check it installs a binary named gyre.
            "cargo install --path crates/cli" => cli_manifest.contains("[[bin]]\nname = \"gyre\""),
            // The interactive session: tests/tests/e2e/repl_tmux.rs drives it in tmux.
            "gyre" => root().join("tests/tests/e2e/repl_tmux.rs").is_file(),
            // Environment only; the tests set these variables themselves.
            l if l.starts_with("export ANTHROPIC_") => true,
            // The Bedrock and Vertex sections': tests/tests/e2e/backends_e2e.rs sets them
            // for its sessions.
            l if l.starts_with("export CLAUDE_CODE_USE_BEDROCK")
                || l.starts_with("export CLAUDE_CODE_USE_VERTEX")
                || l.starts_with("export CLOUD_ML_REGION")
                || l.starts_with("export AWS_") =>
            {
                root().join("tests/tests/e2e/backends_e2e.rs").is_file()
            }
            // the_readme_s_headless_examples_run_as_written.
            l if l.starts_with("gyre -p ") => true,
            // the_offline_walk_through_runs_as_written.
            l if offline.iter().any(|o| o == l) => true,
            _ => false,
        };
        if !exercised {
            unexercised.push(line);
        }
    }
    assert!(
        unexercised.is_empty(),
        "README shell lines no test runs: {unexercised:?}"
    );
}

/// Runs gyre on `turns` with `args`; returns what it printed.
fn session(sandbox: &Sandbox, turns: Vec<Turn>, args: &[&str]) -> gyre_e2e::Run {
    let mut turns = turns;
    turns.push(Turn::text("Done."));
    let server = TestServer::spawn(Script::new(turns)).unwrap();
    gyre_e2e::run(sandbox.gyre(&server).unwrap().args(["-p", "go"]).args(args)).unwrap()
}

/// The tool calls gyre refused, from its text-mode stderr lines.
fn denied(out: &gyre_e2e::Run) -> Vec<String> {
    out.stderr
        .lines()
        .filter_map(|l| l.strip_prefix("gyre: denied "))
        .map(|l| l.split(':').next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_readme_s_permission_sentences_hold() {
    let readme = readme();
    let permissions = readme
        .split("\n\n")
        .find(|p| p.starts_with("**Permissions.**"))
        .expect("README has a **Permissions.** paragraph");
    let permissions = permissions.split_whitespace().collect::<Vec<_>>().join(" ");
    for claim in [
        "By default headless gyre may read and search inside the working directory and nothing more.",
        "`--permission-mode acceptEdits` lets it edit files there, and run `mkdir`, `touch`, `rm`, `rmdir`, `mv`, `cp` and `sed` on paths there; other commands need a Bash rule (`--allowedTools \"Bash(npm test:*)\"`), and `bypassPermissions` allows everything a deny rule does not refuse.",
    ] {
        assert!(
            permissions.contains(claim),
            "the README no longer says: {claim}"
        );
    }
    let write = |name: &str| Turn::tool_use("Write", json!({"file_path": name, "content": "x\n"}));
    let bash = |command: &str| Turn::tool_use("Bash", json!({"command": command}));

    // Default: reads and searches, nothing more.
    let sandbox = Sandbox::new().unwrap();
    let notes = sandbox.write("notes.txt", "one\n").unwrap();
    let written = sandbox.project().join("new.txt");
    let out = session(
        &sandbox,
        vec![
            Turn::tool_use("Read", json!({"file_path": notes})),
            Turn::tool_use("Grep", json!({"pattern": "one"})),
            write(&written.to_string_lossy()),
            bash("touch made"),
        ],
        &[],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(
        denied(&out),
        ["Write new.txt", "Bash touch made"],
        "{}",
        out.stderr
    );
    assert!(!written.exists());

    // acceptEdits: edits in the project, but no commands without a Bash rule.
    let sandbox = Sandbox::new().unwrap();
    let written = sandbox.project().join("new.txt");
    let accept = ["--permission-mode", "acceptEdits"];
    let out = session(
        &sandbox,
        vec![write(&written.to_string_lossy()), bash("ls")],
        &accept,
    );
    assert_eq!(denied(&out), ["Bash ls"], "{}", out.stderr);
    assert!(written.exists());

    // acceptEdits runs the filesystem commands on paths in the project, not outside it;
    // with a Bash rule, the other commands it names run too.
    let sandbox = Sandbox::new().unwrap();
    let outside = sandbox.home().join("outside");
    let out = session(
        &sandbox,
        vec![
            bash("mkdir made && touch made/a"),
            bash("cp made/a made/b && rm made/a"),
            bash(&format!("touch {}", outside.display())),
            bash("wc -c made/b"),
            bash("git init"),
        ],
        &[accept[0], accept[1], "--allowedTools", "Bash(wc:*)"],
    );
    assert_eq!(
        denied(&out),
        [
            format!("Bash touch {}", outside.display()),
            "Bash git init".to_owned()
        ],
        "{}",
        out.stderr
    );
    assert!(sandbox.project().join("made/b").exists());
    assert!(!sandbox.project().join("made/a").exists() && !outside.exists());

    // bypassPermissions: everything a deny rule does not refuse.
    let sandbox = Sandbox::new().unwrap();
    let out = session(
        &sandbox,
        vec![bash("touch made"), bash("rm -f made")],
        &[
            "--permission-mode",
            "bypassPermissions",
            "--disallowedTools",
            "Bash(rm:*)",
        ],
    );
    assert_eq!(denied(&out), ["Bash rm -f made"], "{}", out.stderr);
    assert!(sandbox.project().join("made").exists());
}

#[test]
fn the_demo_session_shows_gyre_s_own_lines_and_no_cost() {
    // What `cargo xtask demo` runs (xtask/src/demo.rs), in a project like the demo's:
    // the README promises a retry line, a line per tool call and the answer.
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("README.md", "# thermo\n\nConvert temperatures.\n")
        .unwrap();
    sandbox
        .write(
            "src/lib.rs",
            "pub fn c_to_f(c: f64) -> f64 {\n    c * 9.0 / 5.0 + 32.0\n}\n",
        )
        .unwrap();
    sandbox
        .write("tests/convert.rs", "#[test]\nfn boiling() {}\n")
        .unwrap();
    let script = std::fs::read_to_string(root().join("xtask/demo/session.json"))
        .unwrap()
        .replace("$SCRATCH", &sandbox.project().to_string_lossy());
    let script = Script::from_json(&script).unwrap();
    let turns = script.turns.len();
    let server = TestServer::spawn(script).unwrap();
    let out = gyre_e2e::run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "What does this project do?",
        "--verbose",
        "--max-turns",
        "10",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(server.request_count(), turns);
    let stderr: Vec<&str> = out.stderr.lines().collect();
    // --verbose names the backend first, then the overload is waited through.
    assert!(
        stderr[0].starts_with("gyre: backend: Anthropic API at http://127.0.0.1:"),
        "{}",
        out.stderr
    );
    assert!(
        stderr[1].starts_with("gyre: The API is overloaded"),
        "{}",
        out.stderr
    );
    assert!(stderr[1].ends_with("(attempt 1/10)"), "{}", out.stderr);
    for call in [
        "● Read README.md",
        "● Read src/lib.rs",
        "● Read tests/convert.rs",
        "● Read src/missing.rs",
    ] {
        assert!(stderr.contains(&call), "{call} missing:\n{}", out.stderr);
    }
    assert!(
        out.stderr.contains("⎿ ✗ File does not exist."),
        "{}",
        out.stderr
    );
    // Words a reader should not see: a wrong plural, raw JSON, a price for a script.
    for wrong in [" 1 lines", "{\"", "$"] {
        assert!(!out.stderr.contains(wrong), "{wrong:?} in:\n{}", out.stderr);
        assert!(!out.stdout.contains(wrong), "{wrong:?} in:\n{}", out.stdout);
    }
    assert!(
        out.stdout.starts_with("**thermo** converts temperatures"),
        "{}",
        out.stdout
    );
}

#[test]
fn each_flag_the_readme_calls_ignored_gets_a_warning() {
    let readme = readme();
    let flags_paragraph = readme
        .split("\n\n")
        .find(|p| p.starts_with("**Flags**"))
        .expect("README has a **Flags** paragraph");
    // The flags after the last `;` of the paragraph are the ones only accepted.
    let ignored_sentence = flags_paragraph
        .rsplit_once(';')
        .map(|(_, rest)| rest.to_owned())
        .expect("the Flags paragraph names the accepted-but-ignored flags");
    let ignored_sentence = ignored_sentence
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        ignored_sentence.contains("accepted with a warning and not acted on"),
        "{ignored_sentence}"
    );
    let flags: Vec<&str> = ignored_sentence
        .split('`')
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(!flags.is_empty(), "{flags:?}");
    // Switches take no value.
    let switches = ["--session-mirror"];
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let mut gyre = sandbox.gyre(&server).unwrap();
    gyre.args(["-p", "hi"]);
    for flag in &flags {
        gyre.arg(flag);
        if !switches.contains(flag) {
            gyre.arg("1");
        }
    }
    let out = gyre_e2e::run(&mut gyre).unwrap();
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let warned: Vec<&str> = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("gyre: warning: "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(warned, flags, "{}", out.stderr);
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
