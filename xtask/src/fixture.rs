//! `cargo xtask fixture record|replay|check`: sessions recorded through gyre-api's
//! `RecordingClient`, replayed through its `ReplayClient`, with the real `gyre` binary in
//! between (it talks to a local [`Proxy`] backed by the client, so gyre needs no hook).
//!
//! A fixture is two files side by side:
//!
//! - `NAME.jsonl`: gyre-api's fixture format, one exchange per line (request, SSE text,
//!   error). The scratch project's path is written `$PROJECT` and `GYRE_HOME` is written
//!   `$GYRE_HOME`, so the fixture replays from any directory.
//! - `NAME.session.json`: how to run gyre again (prompt, arguments, the project's files,
//!   exit code) and the stream-json gyre printed, normalised (timestamps, uuids, session
//!   ids, durations and retry delays replaced by placeholders).
//!
//! `check` parses every `*.jsonl` and `*.session.json` under `tests/fixtures/` and scans
//! every file there for secrets (see [`crate::secrets`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, LazyLock};

use anyhow::{Context, Result, bail};
use gyre_api::{
    AnthropicClient, ClientConfig, FixtureEntry, ModelClient, RecordingClient, ReplayClient,
    encode_sse,
};
use gyre_protocol::{ContentDelta, StreamEvent};
use gyre_testkit::{Script, TestServer};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::proxy::Proxy;
use crate::{cargo, run_cmd, secrets, target_dir, workspace_root};

/// `cargo xtask fixture …`.
#[derive(Debug, clap::Subcommand)]
pub enum FixtureCommand {
    /// Record a gyre session (testkit script or the live API) to a fixture, secrets redacted.
    Record(RecordArgs),
    /// Replay a fixture through gyre and diff the stream-json against the recording.
    Replay {
        /// The fixture's `.jsonl` file.
        fixture: PathBuf,
    },
    /// Parse every fixture under DIR (default tests/fixtures/) and scan them for secrets.
    Check {
        /// The directory to check.
        dir: Option<PathBuf>,
    },
}

/// `cargo xtask fixture record`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("source").required(true).args(["script", "live"]))]
pub struct RecordArgs {
    /// A gyre-testkit script to record against.
    #[arg(long, value_name = "S")]
    script: Option<String>,
    /// Record against the live API (needs ANTHROPIC_API_KEY).
    #[arg(long)]
    live: bool,
    /// The fixture file to write.
    #[arg(short = 'o', long = "output", value_name = "F")]
    output: String,
    /// The prompt of the recorded session.
    #[arg(long, value_name = "P", default_value = DEFAULT_PROMPT)]
    prompt: String,
    /// A project directory copied into the session (at most 1 MiB).
    #[arg(long, value_name = "DIR")]
    project: Option<String>,
    /// More arguments for gyre, after `--`.
    #[arg(last = true, value_name = "GYRE_ARGS")]
    extra: Vec<String>,
}

/// The system prompt of recorded sessions: gyre's default one holds today's date and the
/// working directory, which would make every replay differ from its recording.
const SYSTEM_PROMPT: &str = "You are gyre, a coding agent. Use the tools to answer; be brief.";
const DEFAULT_PROMPT: &str = "What does this project do? Read what you need and summarise it.";
/// What gyre sends the proxy; the proxy's own client holds the real key.
const PROXY_KEY: &str = "xtask-fixture-proxy";
/// Largest project `--project` copies into a session file.
const MAX_PROJECT_BYTES: u64 = 1024 * 1024;

/// `NAME.session.json`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Session {
    /// Format version of this file.
    gyre_fixture_session: u32,
    /// `testkit:<script file>` or `live`.
    source: String,
    /// gyre's command line after `gyre` (the project path written `$PROJECT`).
    args: Vec<String>,
    /// The project's files, relative path → contents.
    files: BTreeMap<String, String>,
    /// gyre's exit code.
    exit_code: i32,
    /// How many exchanges the `.jsonl` holds.
    exchanges: usize,
    /// The stream-json lines, normalised.
    stream_json: Vec<Value>,
}

pub fn run(command: FixtureCommand) -> Result<()> {
    match command {
        FixtureCommand::Record(args) => record(args),
        FixtureCommand::Replay { fixture } => replay(&fixture),
        FixtureCommand::Check { dir } => check(dir),
    }
}

fn session_path(fixture: &Path) -> PathBuf {
    let name = fixture
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
    fixture.with_file_name(format!("{stem}.session.json"))
}

/// A scratch project and `GYRE_HOME`, with canonical paths so they compare equal.
struct Scratch {
    _dir: tempfile::TempDir,
    project: PathBuf,
    home: PathBuf,
}

impl Scratch {
    fn new(files: &BTreeMap<String, String>) -> Result<Self> {
        let dir = tempfile::tempdir().context("could not create a scratch directory")?;
        let root = dir.path().canonicalize()?;
        let project = root.join("project");
        let home = root.join("gyre-home");
        std::fs::create_dir_all(&project)?;
        std::fs::create_dir_all(&home)?;
        for (rel, text) in files {
            if Path::new(rel).is_absolute() || rel.split('/').any(|c| c == "..") {
                bail!("project file {rel:?} is not a plain relative path");
            }
            let path = project.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, text)?;
        }
        Ok(Self {
            _dir: dir,
            project,
            home,
        })
    }

    fn project_str(&self) -> String {
        self.project.to_string_lossy().into_owned()
    }

    fn home_str(&self) -> String {
        self.home.to_string_lossy().into_owned()
    }

    /// Real paths → placeholders.
    fn abstract_paths(&self, text: &str) -> String {
        text.replace(&self.project_str(), "$PROJECT")
            .replace(&self.home_str(), "$GYRE_HOME")
    }

    /// Placeholders → real paths.
    fn concrete_paths(&self, text: &str) -> String {
        text.replace("$PROJECT", &self.project_str())
            .replace("$GYRE_HOME", &self.home_str())
    }
}

fn build_gyre() -> Result<PathBuf> {
    run_cmd(
        &cargo(),
        &["build", "--quiet", "-p", "gyre-cli", "--bin", "gyre"],
    )?;
    let gyre = target_dir().join("debug").join("gyre");
    if !gyre.is_file() {
        bail!("built gyre not found at {}", gyre.display());
    }
    Ok(gyre)
}

/// Runs gyre headless against `base_url`; returns its exit code and stream-json lines.
fn run_gyre(
    gyre: &Path,
    scratch: &Scratch,
    args: &[String],
    base_url: &str,
) -> Result<(i32, Vec<String>)> {
    let mut command = Command::new(gyre);
    command
        .args(args.iter().map(|a| scratch.concrete_paths(a)))
        .current_dir(&scratch.project)
        .env_clear()
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", PROXY_KEY)
        .env("GYRE_HOME", &scratch.home)
        .env("HOME", &scratch.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("could not run {}", gyre.display()))?;
    let mut stderr = child.stderr.take().context("no stderr from gyre")?;
    let stderr_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let stdout = child.stdout.take().context("no stdout from gyre")?;
    let lines = BufReader::new(stdout)
        .lines()
        .collect::<std::io::Result<Vec<_>>>()
        .context("reading gyre's stdout")?;
    let status = child.wait()?;
    let stderr = stderr_reader.join().unwrap_or_default();
    if !stderr.trim().is_empty() {
        eprintln!("gyre stderr:\n{}", stderr.trim_end());
    }
    Ok((status.code().unwrap_or(-1), lines))
}

static UUID: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
});
static TIMESTAMP: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?")
});

/// Fields whose values differ from run to run by nature.
fn volatile(key: &str) -> Option<Value> {
    match key {
        "session_id" | "sessionId" => Some(Value::from("<session-id>")),
        "uuid" | "parent_uuid" | "parentUuid" | "request_id" => Some(Value::from("<uuid>")),
        "timestamp" => Some(Value::from("<timestamp>")),
        "duration_ms" | "duration_api_ms" | "retry_delay_ms" | "elapsed_ms" => Some(Value::from(0)),
        "gyre_version" => Some(Value::from("<version>")),
        _ => None,
    }
}

fn normalise_value(value: &mut Value, scratch: &Scratch) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if let Some(placeholder) = volatile(key) {
                    *v = placeholder;
                } else {
                    normalise_value(v, scratch);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| normalise_value(v, scratch)),
        Value::String(s) => {
            let mut out = scratch.abstract_paths(s);
            if let Ok(re) = UUID.as_ref() {
                out = re.replace_all(&out, "<uuid>").into_owned();
            }
            if let Ok(re) = TIMESTAMP.as_ref() {
                out = re.replace_all(&out, "<timestamp>").into_owned();
            }
            *s = out;
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// stream-json lines with what varies from run to run replaced by placeholders.
fn normalise(lines: &[String], scratch: &Scratch) -> Result<Vec<Value>> {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let mut v: Value = serde_json::from_str(line)
                .with_context(|| format!("gyre printed a line that is not JSON: {line}"))?;
            normalise_value(&mut v, scratch);
            Ok(v)
        })
        .collect()
}

/// Every file under `dir`, relative path → text (skipping `.git` and `target`).
fn read_project(dir: &Path) -> Result<BTreeMap<String, String>> {
    fn walk(
        root: &Path,
        dir: &Path,
        out: &mut BTreeMap<String, String>,
        total: &mut u64,
    ) -> Result<()> {
        let mut entries = std::fs::read_dir(dir)
            .with_context(|| format!("could not read {}", dir.display()))?
            .collect::<std::io::Result<Vec<_>>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let path = entry.path();
            let name = entry.file_name();
            if name == ".git" || name == "target" {
                continue;
            }
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(root, &path, out, total)?;
            } else if kind.is_file() {
                *total += entry.metadata()?.len();
                if *total > MAX_PROJECT_BYTES {
                    bail!(
                        "--project {} is over 1 MiB: fixtures hold small projects",
                        root.display()
                    );
                }
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
                let rel = path
                    .strip_prefix(root)?
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, text);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out, &mut 0)?;
    Ok(out)
}

fn record(args: RecordArgs) -> Result<()> {
    let RecordArgs {
        script,
        live: _,
        output: out,
        prompt,
        project,
        extra,
    } = args;
    let out = PathBuf::from(out);
    if !out.to_string_lossy().ends_with(".jsonl") {
        bail!("the fixture file must end in .jsonl (the session goes next to it)");
    }

    let files = match &project {
        Some(dir) => read_project(Path::new(dir))?,
        None => BTreeMap::new(),
    };
    let gyre = build_gyre()?;
    let scratch = Scratch::new(&files)?;

    // The upstream the recording client talks to: the testkit, or the real API.
    let mut server = None;
    let (config, source, secret) = match &script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("could not read the script {path}"))?;
            let text = text
                .replace("$PROJECT", &scratch.project_str())
                .replace("$SCRATCH", &scratch.project_str());
            let script = Script::from_json(&text)
                .with_context(|| format!("{path} is not a testkit script"))?;
            let started = TestServer::spawn(script).context("could not start gyre-testkit")?;
            let config = ClientConfig::new("xtask-fixture-testkit").with_base_url(started.url());
            server = Some(started);
            let name = Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (config, format!("testkit:{name}"), None)
        }
        None => {
            let config = ClientConfig::from_env().context(
                "--live records against the API: set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL if needed)",
            )?;
            let key = config.backend.static_secret().map(str::to_owned);
            (config, "live".to_owned(), key)
        }
    };
    let upstream: Arc<dyn ModelClient> =
        Arc::new(AnthropicClient::new(config).context("could not build the API client")?);
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut recorder =
        RecordingClient::create(upstream, &out).context("could not create the fixture")?;
    if let Some(key) = secret {
        recorder = recorder.with_secret(key);
    }

    let mut gyre_args = vec![
        "-p".to_owned(),
        prompt,
        "--output-format".to_owned(),
        "stream-json".to_owned(),
        "--verbose".to_owned(),
    ];
    if !extra.iter().any(|a| a.starts_with("--system-prompt")) {
        gyre_args.extend(["--system-prompt".to_owned(), SYSTEM_PROMPT.to_owned()]);
    }
    if !extra.iter().any(|a| a.starts_with("--max-turns")) {
        gyre_args.extend(["--max-turns".to_owned(), "20".to_owned()]);
    }
    gyre_args.extend(extra.iter().map(|a| scratch.abstract_paths(a)));

    let proxy = Proxy::spawn(Arc::new(recorder))?;
    let (exit_code, lines) = run_gyre(&gyre, &scratch, &gyre_args, &proxy.url())?;
    // Stopping the proxy ends every stream, so every exchange is written.
    drop(proxy);
    drop(server);

    let recorded = std::fs::read_to_string(&out)
        .with_context(|| format!("could not read back {}", out.display()))?;
    let recorded = abstract_fixture(&recorded, &scratch)?;
    std::fs::write(&out, &recorded)?;
    let exchanges = ReplayClient::parse(&recorded, &out.display().to_string())
        .context("the recorded fixture does not parse")?
        .entries()
        .len();
    let session = Session {
        gyre_fixture_session: 1,
        source,
        args: gyre_args,
        files,
        exit_code,
        exchanges,
        stream_json: normalise(&lines, &scratch)?,
    };
    let session_file = session_path(&out);
    let mut text = serde_json::to_string_pretty(&session)?;
    text.push('\n');
    std::fs::write(&session_file, text)
        .with_context(|| format!("could not write {}", session_file.display()))?;

    let mut leaks = Vec::new();
    for file in [&out, &session_file] {
        let text = std::fs::read_to_string(file)?;
        for f in secrets::scan(&text) {
            leaks.push(format!(
                "{}:{}: {} {}",
                file.display(),
                f.line,
                f.kind,
                f.preview
            ));
        }
    }
    if !leaks.is_empty() {
        bail!(
            "the recording holds secrets; do not commit it:\n  {}",
            leaks.join("\n  ")
        );
    }
    println!(
        "recorded {exchanges} exchanges and {} stream-json lines (gyre exited {exit_code}):\n  {}\n  {}",
        session.stream_json.len(),
        out.display(),
        session_file.display()
    );
    Ok(())
}

/// The fixture with the scratch paths written as placeholders. A path inside a streamed
/// block may be split over several deltas (`"/tmp/.tmpAb/pro"`, `"ject/README.md"`), so
/// each block's deltas are joined, substituted, and cut again at the same places, the
/// placeholder whole in the delta where the path began. Replay then needs only a plain
/// text replacement.
fn abstract_fixture(text: &str, scratch: &Scratch) -> Result<String> {
    let pairs = [
        (scratch.project_str(), "$PROJECT"),
        (scratch.home_str(), "$GYRE_HOME"),
    ];
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut entry: FixtureEntry = serde_json::from_str(line)
            .with_context(|| format!("recorded line {} is not a fixture entry", i + 1))?;
        let mut events = sse_events_of(&entry.sse)
            .with_context(|| format!("recorded line {} holds unreadable SSE", i + 1))?;
        // (index, kind) → positions of that block's deltas in `events`.
        let mut blocks: BTreeMap<(usize, u8), Vec<usize>> = BTreeMap::new();
        for (at, event) in events.iter().enumerate() {
            if let StreamEvent::ContentBlockDelta { index, delta } = event {
                let kind = match delta {
                    ContentDelta::TextDelta { .. } => 0,
                    ContentDelta::InputJsonDelta { .. } => 1,
                    ContentDelta::ThinkingDelta { .. } => 2,
                    ContentDelta::SignatureDelta { .. }
                    | ContentDelta::CitationsDelta { .. }
                    | ContentDelta::Other(_) => continue,
                };
                blocks.entry((*index, kind)).or_default().push(at);
            }
        }
        for positions in blocks.values() {
            let mut pieces: Vec<String> = positions
                .iter()
                .filter_map(|&at| delta_text(&events[at]).map(str::to_owned))
                .collect();
            for (needle, placeholder) in &pairs {
                pieces = substitute_pieces(&pieces, needle, placeholder);
            }
            for (&at, piece) in positions.iter().zip(pieces) {
                set_delta_text(&mut events[at], piece);
            }
        }
        entry.sse = events.iter().map(encode_sse).collect();
        let mut line = serde_json::to_string(&entry)?;
        for (needle, placeholder) in &pairs {
            line = line.replace(needle.as_str(), placeholder);
        }
        out.push_str(&line);
        out.push('\n');
    }
    Ok(out)
}

/// The events of recorded SSE text (written by `encode_sse`, so one `data:` line each).
fn sse_events_of(sse: &str) -> Result<Vec<StreamEvent>> {
    sse.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str::<StreamEvent>(data).map_err(anyhow::Error::from))
        .collect()
}

fn delta_text(event: &StreamEvent) -> Option<&str> {
    match event {
        StreamEvent::ContentBlockDelta { delta, .. } => match delta {
            ContentDelta::TextDelta { text } => Some(text),
            ContentDelta::InputJsonDelta { partial_json } => Some(partial_json),
            ContentDelta::ThinkingDelta { thinking } => Some(thinking),
            ContentDelta::SignatureDelta { .. }
            | ContentDelta::CitationsDelta { .. }
            | ContentDelta::Other(_) => None,
        },
        _ => None,
    }
}

fn set_delta_text(event: &mut StreamEvent, piece: String) {
    if let StreamEvent::ContentBlockDelta { delta, .. } = event {
        match delta {
            ContentDelta::TextDelta { text } => *text = piece,
            ContentDelta::InputJsonDelta { partial_json } => *partial_json = piece,
            ContentDelta::ThinkingDelta { thinking } => *thinking = piece,
            ContentDelta::SignatureDelta { .. }
            | ContentDelta::CitationsDelta { .. }
            | ContentDelta::Other(_) => {}
        }
    }
}

/// Replaces `needle` in the text the pieces make together, keeping every cut that is not
/// inside an occurrence; an occurrence is written whole into the piece where it began.
fn substitute_pieces(pieces: &[String], needle: &str, placeholder: &str) -> Vec<String> {
    let joined = pieces.concat();
    if needle.is_empty() || !joined.contains(needle) {
        return pieces.to_vec();
    }
    let found: Vec<(usize, usize)> = joined
        .match_indices(needle)
        .map(|(at, m)| (at, at + m.len()))
        .collect();
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for piece in pieces {
        let end = start + piece.len();
        let mut new = String::new();
        let mut at = start;
        while at < end {
            if let Some(&(s, e)) = found.iter().find(|&&(s, e)| s <= at && at < e) {
                if at == s {
                    new.push_str(placeholder);
                }
                at = e.min(end);
            } else {
                let next = found
                    .iter()
                    .map(|&(s, _)| s)
                    .filter(|&s| s > at && s < end)
                    .min()
                    .unwrap_or(end);
                new.push_str(&joined[at..next]);
                at = next;
            }
        }
        out.push(new);
        start = end;
    }
    out
}

fn replay(fixture: &Path) -> Result<()> {
    let session_file = session_path(fixture);
    let session: Session = serde_json::from_str(
        &std::fs::read_to_string(&session_file)
            .with_context(|| format!("could not read {}", session_file.display()))?,
    )
    .with_context(|| format!("{} is not a fixture session", session_file.display()))?;
    let text = std::fs::read_to_string(fixture)
        .with_context(|| format!("could not read {}", fixture.display()))?;

    let gyre = build_gyre()?;
    let scratch = Scratch::new(&session.files)?;
    let client = Arc::new(
        ReplayClient::parse(
            &scratch.concrete_paths(&text),
            &fixture.display().to_string(),
        )
        .context("the fixture does not parse")?,
    );
    let proxy = Proxy::spawn(Arc::clone(&client) as Arc<dyn ModelClient>)?;
    let (exit_code, lines) = run_gyre(&gyre, &scratch, &session.args, &proxy.url())?;
    drop(proxy);
    let replayed = normalise(&lines, &scratch)?;

    let mut problems = Vec::new();
    let recorded: Vec<String> = session.stream_json.iter().map(Value::to_string).collect();
    let got: Vec<String> = replayed.iter().map(Value::to_string).collect();
    if let Some(diff) = first_line_difference(&recorded, &got) {
        problems.push(diff);
    }
    if exit_code != session.exit_code {
        problems.push(format!(
            "gyre exited {exit_code}; the recording exited {}",
            session.exit_code
        ));
    }
    if client.remaining() > 0 {
        problems.push(format!(
            "gyre made {} requests; the fixture holds {}",
            client.entries().len() - client.remaining(),
            client.entries().len()
        ));
    }
    if !problems.is_empty() {
        bail!(
            "replay of {} differs:\n{}",
            fixture.display(),
            problems.join("\n")
        );
    }
    println!(
        "replay of {} matches: {} stream-json lines identical (normalised), {} exchanges served, exit code {exit_code}",
        fixture.display(),
        got.len(),
        client.entries().len()
    );
    Ok(())
}

/// The first differing line, shown as a small diff.
fn first_line_difference(recorded: &[String], got: &[String]) -> Option<String> {
    let n = recorded.len().max(got.len());
    (0..n).find_map(|i| {
        let (a, b) = (recorded.get(i), got.get(i));
        (a != b).then(|| {
            format!(
                "stream-json line {} differs ({} lines recorded, {} replayed):\n- {}\n+ {}",
                i + 1,
                recorded.len(),
                got.len(),
                a.map_or("(nothing)", String::as_str),
                b.map_or("(nothing)", String::as_str)
            )
        })
    })
}

fn check(dir: Option<PathBuf>) -> Result<()> {
    let dir = dir.unwrap_or_else(|| workspace_root().join("tests").join("fixtures"));
    if !dir.is_dir() {
        println!(
            "fixture check: no {} directory, nothing to check",
            dir.display()
        );
        return Ok(());
    }
    let mut files = Vec::new();
    collect_files(&dir, &mut files)?;
    files.sort();
    let mut problems = Vec::new();
    let (mut fixtures, mut sessions) = (0, 0);
    for file in &files {
        let bytes =
            std::fs::read(file).with_context(|| format!("could not read {}", file.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let name = file.to_string_lossy();
        // `transcripts/` holds session transcripts (gyre's and the reference CLI's, for
        // the resume and transcript-tool tests), not API recordings: each line is JSON.
        if file
            .strip_prefix(&dir)
            .is_ok_and(|p| p.starts_with("transcripts"))
        {
            if let Some((n, e)) = text.lines().enumerate().find_map(|(n, l)| {
                serde_json::from_str::<serde_json::Value>(l)
                    .err()
                    .map(|e| (n, e))
            }) {
                problems.push(format!("{name}:{}: not JSON: {e}", n + 1));
            }
        } else if name.ends_with(".jsonl") {
            fixtures += 1;
            if let Err(e) = ReplayClient::parse(&text, &name) {
                problems.push(format!("{name}: {e}"));
            }
        } else if name.ends_with(".session.json") {
            sessions += 1;
            match serde_json::from_str::<Session>(&text) {
                Ok(s) => {
                    let pair = file.with_file_name(
                        file.file_name()
                            .map(|n| n.to_string_lossy().replace(".session.json", ".jsonl"))
                            .unwrap_or_default(),
                    );
                    match std::fs::read_to_string(&pair) {
                        Ok(t) => {
                            let n = t.lines().filter(|l| !l.trim().is_empty()).count();
                            if n != s.exchanges {
                                problems.push(format!(
                                    "{name}: says {} exchanges, {} holds {n}",
                                    s.exchanges,
                                    pair.display()
                                ));
                            }
                        }
                        Err(_) => {
                            problems.push(format!("{name}: no {} next to it", pair.display()));
                        }
                    }
                }
                Err(e) => problems.push(format!("{name}: not a fixture session: {e}")),
            }
        }
        for f in secrets::scan(&text) {
            problems.push(format!("{name}:{}: {} {}", f.line, f.kind, f.preview));
        }
    }
    if !problems.is_empty() {
        bail!(
            "fixture check failed ({} problems):\n  {}",
            problems.len(),
            problems.join("\n  ")
        );
    }
    println!(
        "fixture check: {} files under {} ({fixtures} fixtures, {sessions} sessions) parse; no secrets",
        files.len(),
        dir.display()
    );
    Ok(())
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("could not read {}", dir.display()))?
    {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            collect_files(&entry.path(), out)?;
        } else if kind.is_file() {
            out.push(entry.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_path_split_over_pieces_becomes_one_placeholder() {
        let pieces = strings(&[
            "{\"p\": \"/tmp/x/pro",
            "ject/a.rs\", \"q\": \"/tmp/x/",
            "project\"}",
        ]);
        assert_eq!(
            substitute_pieces(&pieces, "/tmp/x/project", "$PROJECT"),
            strings(&["{\"p\": \"$PROJECT", "/a.rs\", \"q\": \"$PROJECT", "\"}"])
        );
    }

    #[test]
    fn pieces_without_the_path_are_unchanged() {
        let pieces = strings(&["abc", "def"]);
        assert_eq!(substitute_pieces(&pieces, "/tmp/x", "$P"), pieces);
    }
}
