//! Support for the end-to-end tests in `tests/tests/`: build the real `gyre` binary once,
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

fn build(package: &str, bin_name: &str) -> Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("workspace root")?
        .to_path_buf();
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", package, "--bin", bin_name])
        .current_dir(&root)
        .status()
        .context("running cargo build")?;
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
    /// # Errors
    /// When the temp dir cannot be made.
    pub fn new() -> Result<Self> {
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
