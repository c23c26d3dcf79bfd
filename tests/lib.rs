//! Support for the end-to-end tests in `tests/tests/e2e/`: build the real `gyre` binary once,
//! run it against a [`gyre_testkit::TestServer`] in a scratch project, and parse what it
//! printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use gyre_testkit::TestServer;
use serde_json::Value;

/// The API key the tests give gyre; grep for it to prove it was never written.
pub const TEST_API_KEY: &str = "sk-ant-test-e2e-0123456789";

/// The `gyre` binary, built on first use.
///
/// # Errors
/// When cargo cannot build it.
pub fn gyre_binary() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build("gyre-cli", "gyre").map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The `gyre-testkit` binary, built on first use.
///
/// # Errors
/// When cargo cannot build it.
pub fn testkit_binary() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build("gyre-testkit", "gyre-testkit").map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

/// The `gyre-test-mcp` binary (the testkit's MCP server), built on first use.
///
/// # Errors
/// When cargo cannot build it.
pub fn test_mcp_binary() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| build("gyre-testkit", "gyre-test-mcp").map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build(package: &str, bin_name: &str) -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?
        .to_path_buf();
    // Without the variables `cargo test` set for this process: see gyre_testkit::cargo.
    let mut cargo = gyre_testkit::cargo::command(&root);
    cargo.args(["build", "--quiet", "-p", package, "--bin", bin_name]);
    let status = cargo.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build -p {package} failed");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let bin = target.join("debug").join(bin_name);
    if !bin.is_file() {
        bail!("{bin_name} not found at {}", bin.display());
    }
    Ok(bin)
}

/// A scratch project and `GYRE_HOME` for one test.
#[derive(Debug)]
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    /// A project the user has trusted (`gyre trust`), as their own usually is: its
    /// allow rules, hooks and `.mcp.json` servers are used.
    ///
    /// # Errors
    /// When the temp dir cannot be made.
    pub fn new() -> Result<Self> {
        let sandbox = Self::untrusted()?;
        std::fs::write(
            sandbox.home().join("trusted-folders.json"),
            serde_json::json!({ "folders": [sandbox.project()] }).to_string(),
        )?;
        Ok(sandbox)
    }

    /// A project the user has not trusted yet (a repository just cloned).
    ///
    /// # Errors
    /// When the temp dir cannot be made.
    pub fn untrusted() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir_all(dir.path().join("project"))?;
        std::fs::create_dir_all(dir.path().join("home"))?;
        Ok(Self { dir })
    }

    /// The project directory gyre runs in (canonical, so paths compare equal).
    #[must_use]
    pub fn project(&self) -> PathBuf {
        let p = self.dir.path().join("project");
        p.canonicalize().unwrap_or(p)
    }

    /// `GYRE_HOME` of this test.
    #[must_use]
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// Writes a file under the project and returns its absolute path.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write(&self, rel: &str, content: &str) -> Result<PathBuf> {
        let path = self.project().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
        Ok(path)
    }

    /// A `gyre` command in the project, pointed at `server`.
    ///
    /// # Errors
    /// When the binary cannot be built.
    pub fn gyre(&self, server: &TestServer) -> Result<Command> {
        let mut cmd = Command::new(gyre_binary()?);
        cmd.current_dir(self.project())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("GYRE_HOME", self.home())
            .env("ANTHROPIC_BASE_URL", server.url())
            .env("ANTHROPIC_API_KEY", TEST_API_KEY)
            // No test may reach a cloud metadata service's link-local address: EC2's is
            // off and GCE's is a closed loopback port unless a test points them at a mock.
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("GCE_METADATA_HOST", "127.0.0.1:1")
            .stdin(Stdio::null());
        Ok(cmd)
    }

    /// Every transcript file written under `GYRE_HOME`.
    #[must_use]
    pub fn transcripts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let projects = self.home().join("projects");
        let Ok(dirs) = std::fs::read_dir(projects) else {
            return out;
        };
        for d in dirs.filter_map(Result::ok) {
            if let Ok(files) = std::fs::read_dir(d.path()) {
                out.extend(
                    files
                        .filter_map(Result::ok)
                        .map(|f| f.path())
                        .filter(|p| p.extension().is_some_and(|x| x == "jsonl")),
                );
            }
        }
        out
    }
}

/// Runs one Bash call per scripted turn, headless in stream-json, with `args` and `env`
/// on top of the sandbox's.
///
/// # Errors
/// When the server or gyre cannot be started.
pub fn bash_session(
    sandbox: &Sandbox,
    commands: &[&str],
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<Run> {
    let turns = commands
        .iter()
        .map(|c| gyre_testkit::Turn::tool_use("Bash", serde_json::json!({"command": c})))
        .chain([gyre_testkit::Turn::text("done")]);
    let server = TestServer::spawn(gyre_testkit::Script::new(turns))?;
    let mut cmd = sandbox.gyre(&server)?;
    cmd.args(["-p", "go", "--output-format", "stream-json", "--verbose"])
        .args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    run(&mut cmd)
}

/// What a run printed.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as JSON lines.
    ///
    /// # Errors
    /// A line that is not JSON.
    pub fn lines(&self) -> Result<Vec<Value>> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).with_context(|| format!("not JSON: {l}")))
            .collect()
    }

    /// The `result` line.
    ///
    /// # Errors
    /// When there is none.
    pub fn result(&self) -> Result<Value> {
        self.lines()?
            .into_iter()
            .rfind(|v| v["type"] == "result")
            .context("no result line")
    }
}

impl From<Output> for Run {
    fn from(o: Output) -> Self {
        Self {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs a command to completion.
///
/// # Errors
/// When it cannot be started.
pub fn run(cmd: &mut Command) -> Result<Run> {
    Ok(cmd.output().context("running gyre")?.into())
}

/// Runs `gyre` in `sandbox` in stream-json mode (input and output, `--verbose`) with
/// `extra` arguments and `env` variables, writes `lines` to its stdin, closes it, and
/// waits for the end.
///
/// # Panics
/// When gyre cannot be started (this is for tests).
#[allow(clippy::unwrap_used)]
pub fn stream_json_lines(
    sandbox: &Sandbox,
    server: &TestServer,
    extra: &[&str],
    env: &[(&str, &str)],
    lines: &[Value],
) -> Run {
    use std::io::Write;
    let mut child = sandbox
        .gyre(server)
        .unwrap()
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .args(extra)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap().into()
}

/// Runs `cmd` (a `gyre` command with its arguments) in stream-json mode the way an SDK
/// program does: `first` goes to stdin, then every stdout line is handed to `answer`,
/// whose lines are written back; stdin closes when `answer` returns `None`. Returns
/// every stdout line and stderr.
///
/// # Panics
/// When gyre cannot be started or prints a line that is not JSON (this is for tests).
#[allow(clippy::unwrap_used)]
pub fn converse(
    mut cmd: Command,
    first: &[Value],
    mut answer: impl FnMut(&Value) -> Option<Vec<Value>>,
) -> (Vec<Value>, String) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut child = cmd
        .args([
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut stdin = Some(child.stdin.take().unwrap());
    for line in first {
        writeln!(stdin.as_mut().unwrap(), "{line}").unwrap();
    }
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(input) = stdin.as_mut() {
            match answer(&line) {
                Some(replies) => {
                    for reply in replies {
                        writeln!(input, "{reply}").unwrap();
                    }
                }
                None => stdin = None,
            }
        }
        lines.push(line);
    }
    child.wait().unwrap();
    (lines, stderr.join().unwrap())
}

/// The tool results on stream-json `user` lines, in call order: (is_error, text).
#[must_use]
pub fn tool_results_of_lines(lines: &[Value]) -> Vec<(bool, String)> {
    lines
        .iter()
        .filter(|v| v["type"] == "user")
        .flat_map(|v| {
            v["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let text = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (b["is_error"] == Value::Bool(true), text)
        })
        .collect()
}

/// `(type, subtype)` of each line, for sequence assertions.
#[must_use]
pub fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|v| match v["subtype"].as_str() {
            Some(s) if v["type"] == "system" => format!("system/{s}"),
            _ => v["type"].as_str().unwrap_or("?").to_owned(),
        })
        .collect()
}

/// What is wrong with the tool_use / tool_result pairing of a request's `messages`: every
/// tool_use must be answered by exactly one tool_result in the next message (a user
/// message), and no tool_result may answer anything else. Empty when the pairing holds.
#[must_use]
pub fn pairing_problems(messages: &Value) -> Vec<String> {
    let empty = Vec::new();
    let messages = messages.as_array().unwrap_or(&empty);
    let blocks = |m: &Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter(|b| b["type"] == kind)
                    .filter_map(|b| b[key].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let results = blocks(m, "tool_result", "tool_use_id");
        let calls_before = if i == 0 {
            Vec::new()
        } else {
            blocks(&messages[i - 1], "tool_use", "id")
        };
        for id in &results {
            if !calls_before.contains(id) {
                problems.push(format!("messages[{i}]: orphan tool_result {id}"));
            }
        }
        let calls = blocks(m, "tool_use", "id");
        if calls.is_empty() {
            continue;
        }
        let answers = messages
            .get(i + 1)
            .filter(|next| next["role"] == "user")
            .map(|next| blocks(next, "tool_result", "tool_use_id"));
        let Some(answers) = answers else {
            problems.push(format!(
                "messages[{i}]: tool_use {calls:?} not followed by their results"
            ));
            continue;
        };
        for id in &calls {
            let n = answers.iter().filter(|a| *a == id).count();
            if n != 1 {
                problems.push(format!("messages[{i}]: tool_use {id} answered {n} times"));
            }
        }
    }
    problems
}

/// Runs `cmd` to completion while another thread calls `race` over and over (a file
/// swapper, say); returns what the run printed and how many times `race` ran.
///
/// # Errors
/// When the command cannot be started.
pub fn run_racing(
    cmd: &mut Command,
    mut race: impl FnMut() + Send + 'static,
) -> Result<(Run, u64)> {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                race();
                rounds += 1;
            }
            rounds
        })
    };
    let out = run(cmd);
    stop.store(true, Ordering::Relaxed);
    let rounds = racer
        .join()
        .map_err(|_| anyhow::anyhow!("the racing thread panicked"))?;
    Ok((out?, rounds))
}

/// A tmux server of a test's own, for driving the interactive UI through a real
/// terminal (used by the tests marked `#[ignore = "needs tmux …"]`).
pub mod tmux {
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// How long a wait for the screen may take before the test fails.
    pub const WAIT: Duration = Duration::from_secs(60);
    /// The tmux session the command runs in.
    pub const SESSION: &str = "gyre";

    /// A tmux server (its socket in the test's directory), killed on drop.
    #[derive(Debug)]
    pub struct Tmux {
        socket: PathBuf,
    }

    impl Tmux {
        /// Whether a `tmux` binary runs here.
        #[must_use]
        pub fn installed() -> bool {
            Command::new("tmux")
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success())
        }

        /// Starts `command` (a shell command line) in a 100x50 pane that stays after it
        /// exits.
        ///
        /// # Panics
        /// When tmux is not installed (a test that needs it fails rather than skips: CI
        /// must run it) or fails (this is for tests).
        #[must_use]
        pub fn start(dir: &Path, command: &str) -> Self {
            assert!(
                Self::installed(),
                "tmux is not installed: apt-get install tmux (cargo xtask ci does this)"
            );
            // A fresh socket each time: a server being killed may still hold the last one.
            static STARTED: AtomicUsize = AtomicUsize::new(0);
            let n = STARTED.fetch_add(1, Ordering::Relaxed);
            let tmux = Self {
                socket: dir.join(format!("tmux-{n}.sock")),
            };
            tmux.run(&[
                "new-session",
                "-d",
                "-s",
                SESSION,
                "-x",
                "100",
                "-y",
                "50",
                command,
                ";",
                "set-option",
                "-t",
                SESSION,
                "remain-on-exit",
                "on",
            ]);
            tmux
        }

        /// Runs one tmux command against this server; its stdout.
        ///
        /// # Panics
        /// When the command fails.
        #[allow(clippy::expect_used)]
        pub fn run(&self, args: &[&str]) -> String {
            let out = Command::new("tmux")
                .arg("-S")
                .arg(&self.socket)
                .args(["-f", "/dev/null"])
                .args(args)
                .output()
                .expect("run tmux");
            assert!(
                out.status.success(),
                "tmux {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        }

        /// Types `text` literally, then Enter.
        pub fn type_line(&self, text: &str) {
            self.run(&["send-keys", "-t", SESSION, "-l", text]);
            self.run(&["send-keys", "-t", SESSION, "Enter"]);
        }

        /// Sends one key by tmux's name for it (`Enter`, `C-c`, `Up`, …).
        pub fn key(&self, key: &str) {
            self.run(&["send-keys", "-t", SESSION, key]);
        }

        /// The screen as text.
        #[must_use]
        pub fn capture(&self) -> String {
            let pane = self.run(&["capture-pane", "-p", "-t", SESSION]);
            pane.trim_end().to_owned()
        }

        /// The screen with its colours and attributes as escape sequences.
        #[must_use]
        pub fn capture_styled(&self) -> String {
            self.run(&["capture-pane", "-e", "-p", "-t", SESSION])
        }

        /// The screen with everything scrolled off it.
        #[must_use]
        pub fn capture_all(&self) -> String {
            let pane = self.run(&["capture-pane", "-p", "-S", "-", "-t", SESSION]);
            pane.trim_end().to_owned()
        }

        /// Pastes `text` as a terminal does when the application asked for bracketed
        /// paste.
        pub fn paste(&self, text: &str) {
            self.run(&["set-buffer", "-b", "gyre-paste", text]);
            self.run(&[
                "paste-buffer",
                "-p",
                "-d",
                "-b",
                "gyre-paste",
                "-t",
                SESSION,
            ]);
        }

        /// Polls the screen until `done` holds; fails with the screen after [`WAIT`].
        pub fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
            self.poll(what, Self::capture, done)
        }

        /// Waits until `text` is on the screen.
        pub fn wait_for(&self, text: &str) -> String {
            self.wait_until(text, |pane| pane.contains(text))
        }

        /// Waits until `text` is on the screen or scrolled off it.
        pub fn wait_for_in_scrollback(&self, text: &str) -> String {
            self.poll(text, Self::capture_all, |pane| pane.contains(text))
        }

        fn poll(
            &self,
            what: &str,
            capture: impl Fn(&Self) -> String,
            done: impl Fn(&str) -> bool,
        ) -> String {
            let start = Instant::now();
            loop {
                let pane = capture(self);
                if done(&pane) {
                    // The UI writes a finished line, then draws its live area again: a
                    // capture may fall in between. A moment later the screen is whole;
                    // what it waited for may be gone by then (a passing state), and
                    // then the first capture stands.
                    std::thread::sleep(Duration::from_millis(50));
                    let settled = capture(self);
                    return if done(&settled) { settled } else { pane };
                }
                assert!(
                    start.elapsed() < WAIT,
                    "timed out waiting for {what}; the screen:\n{pane}"
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    impl Drop for Tmux {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .arg("-S")
                .arg(&self.socket)
                .arg("kill-server")
                .output();
        }
    }
}

/// Cargo's target directory, where tests keep what they install (SDKs, published MCP
/// servers) between runs.
#[must_use]
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// Runs an install step (`what` says what for) and fails the test, with its stderr,
/// when it does not succeed: a test never passes without what it needs.
///
/// # Panics
/// When `cmd` cannot run or fails.
pub fn install(what: &str, cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {cmd:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A session whose fourth request is refused as too long: three Reads of a long
/// `log.txt` (written into `sandbox`), the API's prompt-too-long error, then the
/// compaction summary and the answer after it ("Done, after compacting.").
#[allow(clippy::unwrap_used)]
#[must_use]
pub fn prompt_too_long_after_three_reads(sandbox: &Sandbox) -> gyre_testkit::Script {
    use gyre_testkit::Turn;
    let file = sandbox
        .write(
            "log.txt",
            &"a line of a long log file for the context\n".repeat(800),
        )
        .unwrap();
    let read = || Turn::tool_use("Read", serde_json::json!({"file_path": file}));
    let too_long = Turn::http_error(400).with_body(serde_json::json!({
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}
    }));
    gyre_testkit::Script::new([
        read(),
        read(),
        read(),
        too_long,
        Turn::text("<summary>The user asked to read log.txt three times.</summary>"),
        Turn::text("Done, after compacting."),
    ])
}

/// Held while one test process installs into the target dir's folder `name`: tests in
/// other processes that need the same folder wait, then find it installed.
#[allow(clippy::unwrap_used)]
fn install_lock(name: &str) -> std::fs::File {
    let path = target_dir().join(format!("{name}.lock"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let lock = std::fs::File::create(path).unwrap();
    lock.lock().unwrap();
    lock
}

/// A folder under the target dir whose `node_modules` holds the npm `package` (a
/// pinned `name@version`), installed on first use without optional packages and kept.
/// `name` names the folder.
///
/// # Panics
/// When npm cannot install it: a test that needs it never passes without it.
#[allow(clippy::unwrap_used)]
#[must_use]
pub fn npm_package(name: &str, package: &str) -> PathBuf {
    let dir = target_dir().join(name);
    let marker = dir.join(format!("{}.installed", package.replace('/', "_")));
    let _one_at_a_time = install_lock(name);
    if !marker.is_file() {
        std::fs::create_dir_all(&dir).unwrap();
        install(
            &format!("{package} needs node and npm (apt-get install nodejs npm)"),
            Command::new("npm")
                .args([
                    "install",
                    "--omit=optional",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(&dir)
                .arg(package),
        );
        std::fs::write(&marker, "").unwrap();
    }
    dir
}

/// A venv under the target dir with `requirement` installed from PyPI (`python3 -m venv`,
/// then pip), made on first use and kept; its python. `name` names the venv's folder.
///
/// # Panics
/// When the venv cannot be made or the package installed: a test that needs it never
/// passes without it.
#[allow(clippy::unwrap_used)]
#[must_use]
pub fn pip_venv(name: &str, requirement: &str) -> PathBuf {
    let venv = target_dir().join(name);
    let python = venv.join("bin").join("python");
    let marker = venv.join(format!("{requirement}.installed"));
    let _one_at_a_time = install_lock(name);
    if marker.is_file() {
        return python;
    }
    if !python.is_file() {
        install(
            &format!("the venv for {requirement} (python3-venv)"),
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        );
    }
    install(
        &format!("{requirement} from PyPI"),
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(requirement),
    );
    std::fs::write(&marker, "").unwrap();
    python
}

/// Runs a client's suite of cases (`cmd`: the interpreter and the script, with its own
/// arguments) with gyre and gyre-testkit, each named by `--gyre` and `--testkit`
/// (`GYRE_SDK_CASE` picks cases by name), and fails unless every case passed.
///
/// # Panics
/// When the binaries cannot be built, the suite cannot run, or a case failed.
#[allow(clippy::unwrap_used)]
pub fn run_client_cases(mut cmd: Command) {
    cmd.arg("--gyre")
        .arg(gyre_binary().unwrap())
        .arg("--testkit")
        .arg(testkit_binary().unwrap());
    if let Ok(only) = std::env::var("GYRE_SDK_CASE") {
        cmd.args(["--only", &only]);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// A folder of session transcripts under `tests/fixtures/transcripts/` (gyre's of older
/// versions, the reference CLI's), laid out as in a `projects/<project>/` folder.
#[must_use]
pub fn transcript_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/transcripts")
        .join(name)
}

/// Copies the folder `from` with everything in it to `to`.
///
/// # Errors
/// When a file cannot be read or written.
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

impl Sandbox {
    /// The folder of this project's transcripts under `home` (gyre's, or the reference
    /// CLI's home: both lay them out as `projects/<project>/`).
    #[must_use]
    pub fn transcript_folder(&self, home: &Path) -> PathBuf {
        home.join("projects")
            .join(gyre_loop::project_dir_name(&self.project()))
    }

    /// Runs `prompt` headless in the session `session` (`--resume`), printing the result
    /// as JSON.
    ///
    /// # Errors
    /// When the binary cannot be built or run.
    pub fn resume(&self, server: &TestServer, session: &str, prompt: &str) -> Result<Run> {
        run(self
            .gyre(server)?
            .args(["-p", prompt, "--resume", session, "--output-format", "json"]))
    }
}
