//! The REPL in a long session (issue 31), driven through tmux: the release `gyre` in a
//! 100×50 tmux pane against the release testkit, and the reference CLI beside it where
//! it runs here (`@anthropic-ai/claude-code` from npm, installed under the target dir).
//!
//! One session per client:
//! 1. a first answer of [`SCROLLBACK_LINES`] lines (streamed fast): the scrollback;
//! 2. idle at the input box: the CPU ticks the process used (`/proc/<pid>/stat`, utime +
//!    stime, every thread, exited ones included);
//! 3. a second answer streamed at 100 tokens/s (a 4-character text delta every 10 ms):
//!    CPU per token and as a share of a core over the turn; gyre's frames from
//!    `GYRE_FRAME_LOG` (see `gyre_tui`'s `ui.rs`): the median time to draw one, and how
//!    many redrew the whole screen;
//! 4. one resize, which must redraw the screen (gyre's frame log says it did);
//! 5. keys typed into the input box with [`HISTORY_ENTRIES`] entries of history: the
//!    time from `tmux send-keys` to the character on `capture-pane` (both clients), and
//!    gyre's own time from reading the key to flushing its frame.
//!
//! Start-up is timed apart: a client respawned in the pane until its input box is on
//! screen, polled with `capture-pane` for both (gyre's first frame from its log too).
//!
//! Without tmux every row is missing, with a note saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use gyre_testkit::{Script, SummaryAnswer, Turn};
use serde_json::json;

use super::{Plan, Row, STABLE_SPREAD, Testkit, median, scratch, spread};

/// Lines of the first answer: the scrollback the rest runs over.
const SCROLLBACK_LINES: usize = 10_000;
/// One text delta of this many characters (about a token) every [`TOKEN_EVERY`]: 100
/// tokens/s.
const TOKEN_CHARS: usize = 4;
const TOKEN_EVERY: Duration = Duration::from_millis(10);
/// Entries in the input box's history.
const HISTORY_ENTRIES: usize = 1_000;
/// The pane.
const WIDTH: u16 = 100;
const HEIGHT: u16 = 50;
/// The tmux session.
const SESSION: &str = "bench";
/// The longest wait for a screen.
const WAIT: Duration = Duration::from_secs(120);
/// The API key both clients send (the reference approves it by its last 20 characters).
const API_KEY: &str = "bench-key-0123456789abcdef";

/// How much each mode measures.
struct Counts {
    /// Tokens of the streamed answer.
    tokens: usize,
    /// Time idle at the input box.
    idle: Duration,
    /// Keys typed.
    keys: usize,
    /// Start-ups.
    startups: usize,
}

fn counts(plan: &Plan) -> Counts {
    if plan.quick {
        Counts {
            tokens: 300,
            idle: Duration::from_secs(2),
            keys: 10,
            startups: 3,
        }
    } else {
        Counts {
            tokens: 1_500,
            idle: Duration::from_secs(10),
            keys: 30,
            startups: 10,
        }
    }
}

/// The rows' ids, labels and units, in order.
const ROWS: [(&str, &str, &str); 7] = [
    (
        "repl_cpu_per_token",
        "REPL streaming 100 tokens/s over 10,000 lines of scrollback, CPU per token",
        "ms",
    ),
    ("repl_cpu_share", "  CPU, share of a core", "%"),
    ("repl_frame", "  time to draw a frame", "ms"),
    (
        "repl_full_redraws",
        "  full-screen redraws while streaming (then one resize)",
        "redraws",
    ),
    ("repl_idle_cpu", "REPL idle at the input box, CPU", "ticks"),
    (
        "repl_key_echo",
        "REPL keystroke to echo, 1,000 history entries",
        "ms",
    ),
    ("repl_startup", "REPL start-up to the input box", "ms"),
];

/// Every row missing, for `why`.
fn all_missing(why: &str) -> Vec<Row> {
    ROWS.iter()
        .map(|(id, label, unit)| Row::missing(id, label, unit, why))
        .collect()
}

/// The rows; missing ones (with a note) when tmux is not installed.
pub fn rows(gyre: &Path, testkit: &Path, work: &Path, plan: &Plan) -> Result<Vec<Row>> {
    if !tmux_installed() {
        return Ok(all_missing(
            "tmux is not installed (apt-get install tmux; cargo xtask ci installs it)",
        ));
    }
    let counts = counts(plan);
    let ours = gyre_client(gyre);
    eprintln!("  gyre: a {SCROLLBACK_LINES}-line answer, idle, a streamed one, keys");
    let session = measure_session(&ours, testkit, work, &counts)?;
    eprintln!("  gyre: {} start-ups", counts.startups);
    let startup = measure_startups(&ours, testkit, work, &counts)?;
    let reference = match reference_client() {
        Ok(client) => {
            eprintln!("  the reference CLI: the same");
            let measured = measure_session(&client, testkit, work, &counts)
                .and_then(|s| Ok((s, measure_startups(&client, testkit, work, &counts)?)));
            measured.map_err(|e| {
                eprintln!("  the reference CLI did not get through: {e:#}");
                format!("the reference CLI did not get through: {}", first_line(&e))
            })
        }
        Err(e) => Err(format!("no reference CLI: {}", first_line(&e))),
    };
    Ok(build_rows(&session, &startup, reference.as_ref(), &counts))
}

/// What one client's session measured.
#[derive(Debug, Default)]
struct Session {
    /// CPU time over the streamed turn, and the turn's wall time.
    stream_cpu: Duration,
    stream_wall: Duration,
    /// The same over the whole turn: the request (the 10,000-line answer in it) built
    /// and sent, the answer, the turn's end.
    turn_cpu: Duration,
    turn_wall: Duration,
    tokens: usize,
    /// CPU ticks while idle, and for how long.
    idle_ticks: u64,
    idle: Duration,
    /// `send-keys` to the character on screen, per key (ms).
    echo: Vec<f64>,
    /// gyre's frames (none for the reference).
    frames: Vec<Frame>,
    /// The streamed turn's span and the resize's time (µs since 1970).
    stream_span: (u64, u64),
    resized_at: u64,
    /// The scrollback tmux held when streaming began.
    history: usize,
}

/// What the start-ups measured (ms): polled, and gyre's first frame.
#[derive(Debug, Default)]
struct Startups {
    polled: Vec<f64>,
    first_frame: Vec<f64>,
}

fn build_rows(
    ours: &Session,
    startup: &Startups,
    reference: Result<&(Session, Startups), &String>,
    counts: &Counts,
) -> Vec<Row> {
    let [cpu_token, cpu_share, frame, redraws, idle, echo, start] = ROWS;
    let row = |(id, label, unit): (&str, &str, &str)| Row::new(id, label, unit);
    let why_not = |what: &str| match reference {
        Ok(_) => what.to_owned(),
        Err(e) => e.clone(),
    };
    let refer = reference.ok();
    let with_ref = |r: Row, value: Option<f64>, what: &str| match value {
        Some(v) => r.against(v, "claude"),
        None => {
            let note = why_not(what);
            match r.note.clone() {
                Some(n) => r.note(format!("{n}; reference: {note}")),
                None => r.note(format!("reference: {note}")),
            }
        }
    };

    let per_token = |s: &Session| ms_f(s.stream_cpu) / s.tokens.max(1) as f64;
    let share =
        |s: &Session| 100.0 * s.stream_cpu.as_secs_f64() / s.stream_wall.as_secs_f64().max(1e-9);
    let in_stream: Vec<&Frame> = ours
        .frames
        .iter()
        .filter(|f| f.at >= ours.stream_span.0 && f.at <= ours.stream_span.1)
        .collect();
    let frame_ms: Vec<f64> = in_stream.iter().map(|f| f.took as f64 / 1000.0).collect();
    let count = |kind: Redraw| in_stream.iter().filter(|f| f.redraw == kind).count();
    let after_resize = ours
        .frames
        .iter()
        .filter(|f| f.at >= ours.resized_at && f.redraw == Redraw::Screen)
        .count();
    let keys: Vec<f64> = ours
        .frames
        .iter()
        .filter(|f| f.at > ours.resized_at)
        .filter_map(|f| f.key)
        .map(|us| us as f64 / 1000.0)
        .collect();
    let stream_note = format!(
        "{} tokens of {TOKEN_CHARS} characters, one every {} ms, after a {SCROLLBACK_LINES}-line \
         answer (tmux held {} lines); /proc/<pid>/stat utime + stime from the first words \
         on screen to the last, {:.1} s ({:.0} tokens/s as delivered); the whole turn (the request with the long answer \
         in it, the turn's end): {:.1} ms CPU in {:.1} s",
        ours.tokens,
        TOKEN_EVERY.as_millis(),
        ours.history,
        ours.stream_wall.as_secs_f64(),
        ours.tokens as f64 / ours.stream_wall.as_secs_f64().max(1e-9),
        ms_f(ours.turn_cpu),
        ours.turn_wall.as_secs_f64()
    );

    let mut rows = Vec::new();
    rows.push(with_ref(
        row(cpu_token)
            .value(per_token(ours))
            .note(stream_note.clone()),
        refer.map(|(s, _)| per_token(s)),
        "",
    ));
    rows.push(with_ref(
        row(cpu_share).value(share(ours)).below_or_at(5.0),
        refer.map(|(s, _)| share(s)),
        "",
    ));
    let frame_row = row(frame)
        .samples(&frame_ms)
        .below_or_at(2.0)
        .stable_if(frame_ms.len() >= 50)
        .note(format!(
            "median of {} frames while streaming, from GYRE_FRAME_LOG (drawing the live \
             area plus printing the lines finished since the frame before); {} of them \
             redrew the live area whole (a line printed above it)",
            frame_ms.len(),
            count(Redraw::Area)
        ));
    rows.push(with_ref(
        frame_row,
        None,
        "its frames cannot be timed from outside",
    ));
    let full = count(Redraw::Screen);
    #[allow(clippy::cast_precision_loss)]
    let redraw_row = row(redraws).value(full as f64).note(format!(
        "{after_resize} full-screen redraw(s) after the resize to {}×{HEIGHT}",
        WIDTH - 10
    ));
    rows.push(with_ref(
        redraw_row.require(
            "0 while streaming, ≥ 1 on the resize",
            full == 0 && after_resize >= 1,
        ),
        None,
        "its frames cannot be seen from outside",
    ));
    #[allow(clippy::cast_precision_loss)]
    rows.push(with_ref(
        row(idle)
            .value(ours.idle_ticks as f64)
            .require("0 ticks", ours.idle_ticks == 0)
            .note(format!(
                "{:.0} s at the input box after the streamed turn; 1 tick = {} ms",
                ours.idle.as_secs_f64(),
                1000 / clock_ticks()
            )),
        #[allow(clippy::cast_precision_loss)]
        refer.map(|(s, _)| s.idle_ticks as f64),
        "",
    ));
    let echo_spread = spread(&ours.echo);
    rows.push(with_ref(
        row(echo)
            .samples(&ours.echo)
            .stable_if(echo_spread <= STABLE_SPREAD)
            .note(format!(
                "{} keys, tmux send-keys until capture-pane shows the character (each \
                 capture a process of its own: a few ms of the figure); gyre's own time \
                 from reading the key to its frame flushed: {}",
                ours.echo.len(),
                fmt_ms(median(keys))
            )),
        refer.and_then(|(s, _)| median(s.echo.clone())),
        "",
    ));
    rows.push(with_ref(
        row(start)
            .samples(&startup.polled)
            .below(plan_startup_goal(counts))
            .stable_if(spread(&startup.polled) <= STABLE_SPREAD)
            .note(format!(
                "{} start-ups, tmux respawn-pane until capture-pane shows the empty input \
                 box; gyre's first frame (its log) {} after the respawn",
                startup.polled.len(),
                fmt_ms(median(startup.first_frame.clone()))
            )),
        refer.and_then(|(_, s)| median(s.polled.clone())),
        "",
    ));
    rows
}

/// Start-up's goal: the issue's "about 28 ms today" kept, with room for the polling.
fn plan_startup_goal(counts: &Counts) -> f64 {
    if counts.startups < 10 { 150.0 } else { 100.0 }
}

/// An error's first line (a screen it carries is for stderr, not the table).
fn first_line(e: &anyhow::Error) -> String {
    format!("{e:#}")
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2} ms"))
}

fn ms_f(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Row {
    /// Goal `value ≤ limit`.
    fn below_or_at(mut self, limit: f64) -> Self {
        self.goal = self.value.map(|v| super::Goal {
            text: format!("≤ {limit} {}", self.unit),
            pass: v <= limit,
        });
        self
    }
}

// ---- the clients ---------------------------------------------------------------------

/// A CLI to drive: how to start it and how to read its screen.
struct Client {
    name: &'static str,
    program: PathBuf,
    /// Its environment (besides PATH, HOME, TERM, the API's URL and key).
    env: Vec<(String, String)>,
    /// Whether gyre's frame log is kept.
    frame_log: bool,
    /// The input box's text when the client waits at it, idle.
    idle_box: fn(&str) -> Option<String>,
    /// Writes `entries` of input history and whatever the client needs to start
    /// without questions into `home` for a project in `project`.
    prepare: fn(&Path, &Path, usize) -> Result<()>,
}

fn gyre_client(gyre: &Path) -> Client {
    Client {
        name: "gyre",
        program: gyre.to_path_buf(),
        env: Vec::new(),
        frame_log: true,
        idle_box: gyre_idle_box,
        prepare: |home, _project, entries| {
            let history: String = (0..entries)
                .map(|i| format!("history entry {i}: explain the module layout\n"))
                .collect();
            std::fs::write(home.join("history"), history)?;
            Ok(())
        },
    }
}

/// gyre's box (`│> text   │`) when no turn runs.
fn gyre_idle_box(pane: &str) -> Option<String> {
    if pane.contains("esc to interrupt") {
        return None;
    }
    pane.lines().find_map(|l| {
        let inner = l.strip_prefix("│>")?;
        Some(inner.trim_end_matches(['│', ' ']).trim_start().to_owned())
    })
}

/// The reference's box (`❯ text` over a rule) when no turn runs.
fn reference_idle_box(pane: &str) -> Option<String> {
    if pane.contains("esc to interrupt") {
        return None;
    }
    let lines: Vec<&str> = pane.lines().collect();
    lines.windows(2).rev().find_map(|pair| {
        let inner = pair[0].strip_prefix('❯')?;
        pair[1].starts_with('─').then(|| inner.trim().to_owned())
    })
}

/// The reference CLI from npm, installed under the target dir on first use.
fn reference_client() -> Result<Client> {
    let binary = super::cache::reference_cli().map_err(anyhow::Error::msg)?;
    Ok(Client {
        name: "claude",
        program: binary,
        env: super::cache::REFERENCE_ENV
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        frame_log: false,
        idle_box: reference_idle_box,
        prepare: |home, project, entries| {
            // Onboarding done, the key approved, the project trusted: no questions.
            let key_tail = &API_KEY[API_KEY.len() - 20..];
            let project = project.to_string_lossy().into_owned();
            let config = json!({
                "hasCompletedOnboarding": true,
                "theme": "dark",
                "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
                "projects": {project.clone(): {"hasTrustDialogAccepted": true, "allowedTools": []}},
            });
            std::fs::write(home.join(".claude.json"), config.to_string())?;
            let dir = home.join(".claude");
            std::fs::create_dir_all(&dir)?;
            let history: String = (0..entries)
                .map(|i| {
                    json!({
                        "display": format!("history entry {i}: explain the module layout"),
                        "pastedContents": {},
                        "timestamp": 1_700_000_000_000_u64 + i as u64,
                        "project": project,
                    })
                    .to_string()
                        + "\n"
                })
                .collect();
            std::fs::write(dir.join("history.jsonl"), history)?;
            Ok(())
        },
    })
}

/// The shell command that runs `client` in the pane (`exec`: the pane's process is
/// the client).
fn command_line(client: &Client, project: &Path, home: &Path, url: &str, log: &Path) -> String {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("HOME".into(), home.display().to_string()),
        ("TERM".into(), "tmux-256color".into()),
        ("ANTHROPIC_BASE_URL".into(), url.to_owned()),
        ("ANTHROPIC_API_KEY".into(), API_KEY.to_owned()),
    ];
    if client.frame_log {
        env.push(("GYRE_HOME".into(), home.display().to_string()));
        env.push(("GYRE_FRAME_LOG".into(), log.display().to_string()));
    }
    env.extend(client.env.iter().cloned());
    let mut line = format!(
        "cd {} && exec env -i",
        quote(&project.display().to_string())
    );
    for (k, v) in &env {
        line.push_str(&format!(" {k}={}", quote(v)));
    }
    line.push(' ');
    line.push_str(&quote(&client.program.display().to_string()));
    line
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

// ---- the measurements ----------------------------------------------------------------

/// The last line of the streamed answer.
const STREAM_END: &str = "End of the streamed answer.";

/// The streamed answer: prose in lines of about 80 characters, `tokens` deltas of
/// [`TOKEN_CHARS`] long, ending in [`STREAM_END`].
fn streamed_text(tokens: usize) -> String {
    let words = [
        "the", "stream", "goes", "on", "word", "by", "word", "as", "models", "write",
    ];
    let body = (tokens * TOKEN_CHARS).saturating_sub(STREAM_END.len() + 2);
    let mut text = String::new();
    let mut line = 0;
    for word in words.iter().cycle() {
        if text.len() + word.len() + 1 > body {
            break;
        }
        text.push_str(word);
        line += word.len() + 1;
        if line > 78 {
            text.push('\n');
            line = 0;
        } else {
            text.push(' ');
        }
    }
    while text.len() < body {
        text.push('.');
    }
    text.push('\n');
    text.push_str(STREAM_END);
    text.push('\n');
    text
}

/// The script: the long first answer, then the streamed one.
fn script(tokens: usize) -> Script {
    let long: String = (1..=SCROLLBACK_LINES)
        .map(|i| format!("Line {i} of the long first answer, which fills the scrollback.\n"))
        .collect();
    Script::new([
        Turn::text(long).with_chunk_chars(4_000),
        Turn::text(streamed_text(tokens))
            .with_chunk_chars(TOKEN_CHARS)
            .delay_per_event(TOKEN_EVERY),
    ])
    .repeat_last()
    // The reference asks for a title for the session on the side: answered apart, so
    // that it takes no turn.
    .with_summary(SummaryAnswer::new(
        REFERENCE_TITLE_PROMPT,
        Turn::text("Benchmark session"),
    ))
}

/// Words of the reference CLI's request for a session title.
const REFERENCE_TITLE_PROMPT: &str = "Write the title in the language the user wrote in";

fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros(),
    )
    .unwrap_or(u64::MAX)
}

/// A scratch project and home for `client` under `name`, the testkit serving
/// [`script`] of `tokens`, the shell command that starts the client, and where gyre's
/// frame log goes.
struct Setup {
    server: Testkit,
    command: String,
    log: PathBuf,
}

impl Setup {
    fn new(
        client: &Client,
        testkit: &Path,
        work: &Path,
        name: &str,
        tokens: usize,
    ) -> Result<Self> {
        let (project, home) = scratch(work, name)?;
        let project = project.canonicalize()?;
        (client.prepare)(&home, &project, HISTORY_ENTRIES)?;
        let server = Testkit::start(testkit, work, name, &script(tokens))?;
        let log = home.join("frames.log");
        let command = command_line(client, &project, &home, &server.url, &log);
        Ok(Self {
            server,
            command,
            log,
        })
    }
}

fn measure_session(
    client: &Client,
    testkit: &Path,
    work: &Path,
    counts: &Counts,
) -> Result<Session> {
    let name = format!("repl-{}", client.name);
    let Setup {
        server: _server,
        command,
        log,
    } = Setup::new(client, testkit, work, &name, counts.tokens)?;
    let tmux = Tmux::start(work, &name, &command)?;
    let ready = |pane: &str| (client.idle_box)(pane).is_some_and(|b| b.is_empty());
    tmux.wait("the input box", ready)?;
    let pid = tmux.pane_pid()?;

    // The scrollback.
    tmux.type_line("write the long answer")?;
    tmux.wait("the long answer's last line", |pane| {
        pane.contains(&format!("Line {SCROLLBACK_LINES} of")) && ready(pane)
    })?;
    let history = tmux.history_size()?;

    // Idle, once the answer's aftermath (the transcript written) is over.
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(pid)?;
    std::thread::sleep(counts.idle);
    let idle_ticks = cpu_ticks(pid)? - before;

    // The streamed answer: from its first words on screen to its last (the request's
    // building and sending, and the turn's end, left out), and the whole turn.
    let turn_before = cpu_ticks(pid)?;
    let turn_started = Instant::now();
    tmux.type_line("stream the second answer")?;
    let edge = Duration::from_millis(10);
    tmux.poll("the streamed answer's first words", edge, |pane| {
        pane.contains("the stream goes")
    })?;
    let started = Instant::now();
    let start_us = now_us();
    let before = cpu_ticks(pid)?;
    tmux.poll("the streamed answer's last line", edge, |pane| {
        pane.contains(STREAM_END)
    })?;
    let ticks = cpu_ticks(pid)? - before;
    let stream_wall = started.elapsed();
    let end_us = now_us();
    tmux.wait("the input box after the streamed answer", ready)?;
    let turn_ticks = cpu_ticks(pid)? - turn_before;
    let turn_wall = turn_started.elapsed();

    // One resize, then keys.
    let resized_at = now_us();
    tmux.run(&[
        "resize-window",
        "-t",
        SESSION,
        "-x",
        &(WIDTH - 10).to_string(),
        "-y",
        &HEIGHT.to_string(),
    ])?;
    std::thread::sleep(Duration::from_millis(500));
    tmux.wait("the input box after the resize", ready)?;
    let mut echo = Vec::new();
    let mut typed = String::new();
    for i in 0..counts.keys {
        let c = char::from(b'a' + u8::try_from(i % 26).unwrap_or(0));
        typed.push(c);
        let sent = Instant::now();
        tmux.run(&["send-keys", "-t", SESSION, "-l", &c.to_string()])?;
        tmux.wait_fast("the typed key", |pane| {
            (client.idle_box)(pane).is_some_and(|b| b == typed)
        })?;
        echo.push(ms_f(sent.elapsed()));
        std::thread::sleep(Duration::from_millis(20));
    }
    let frames = if client.frame_log {
        parse_frames(&std::fs::read_to_string(&log).context("gyre wrote no frame log")?)?
    } else {
        Vec::new()
    };
    let tick = Duration::from_secs(1) / u32::try_from(clock_ticks()).unwrap_or(100);
    let cpu = |ticks: u64| tick * u32::try_from(ticks).unwrap_or(u32::MAX);
    Ok(Session {
        stream_cpu: cpu(ticks),
        stream_wall,
        turn_cpu: cpu(turn_ticks),
        turn_wall,
        tokens: counts.tokens,
        idle_ticks,
        idle: counts.idle,
        echo,
        frames,
        stream_span: (start_us, end_us),
        resized_at,
        history,
    })
}

fn measure_startups(
    client: &Client,
    testkit: &Path,
    work: &Path,
    counts: &Counts,
) -> Result<Startups> {
    let name = format!("repl-start-{}", client.name);
    let Setup {
        server: _server,
        command,
        log,
    } = Setup::new(client, testkit, work, &name, 10)?;
    // A pane that waits; each start-up replaces its process.
    let tmux = Tmux::start(work, &name, "exec sleep 600")?;
    let ready = |pane: &str| (client.idle_box)(pane).is_some_and(|b| b.is_empty());
    let mut out = Startups::default();
    for run in 0..=counts.startups {
        let _ = std::fs::remove_file(&log);
        tmux.run(&["clear-history", "-t", SESSION])?;
        let at = now_us();
        let started = Instant::now();
        tmux.run(&["respawn-pane", "-k", "-t", SESSION, &command])?;
        tmux.wait_fast("the input box", ready)?;
        let polled = ms_f(started.elapsed());
        // The first run warms the page cache.
        if run == 0 {
            continue;
        }
        out.polled.push(polled);
        if client.frame_log {
            let frames = parse_frames(&std::fs::read_to_string(&log).unwrap_or_default())?;
            if let Some(first) = frames.first() {
                #[allow(clippy::cast_precision_loss)]
                out.first_frame
                    .push(first.at.saturating_sub(at) as f64 / 1000.0);
            }
        }
    }
    Ok(out)
}

// ---- tmux ------------------------------------------------------------------------------

fn tmux_installed() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tmux server of the bench's own (its socket and config under the bench's folder),
/// killed on drop.
struct Tmux {
    socket: PathBuf,
    config: PathBuf,
}

impl Tmux {
    /// `command` (a shell command line) in a [`WIDTH`]×[`HEIGHT`] pane with no status
    /// line and room for the whole scrollback.
    fn start(work: &Path, name: &str, command: &str) -> Result<Self> {
        let socket = work.join(format!("{name}.tmux"));
        let config = work.join(format!("{name}.tmux.conf"));
        let _ = std::fs::remove_file(&socket);
        std::fs::write(
            &config,
            format!(
                "set -g history-limit {}\nset -g status off\nset -g remain-on-exit on\n",
                SCROLLBACK_LINES * 2
            ),
        )?;
        let tmux = Self { socket, config };
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &WIDTH.to_string(),
            "-y",
            &HEIGHT.to_string(),
            command,
        ])?;
        Ok(tmux)
    }

    fn run(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("-f")
            .arg(&self.config)
            .args(args)
            .output()
            .context("could not run tmux")?;
        if !out.status.success() {
            bail!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn capture(&self) -> Result<String> {
        self.run(&["capture-pane", "-p", "-t", SESSION])
    }

    fn type_line(&self, text: &str) -> Result<()> {
        self.run(&["send-keys", "-t", SESSION, "-l", text])?;
        self.run(&["send-keys", "-t", SESSION, "Enter"])?;
        Ok(())
    }

    fn pane_pid(&self) -> Result<u32> {
        let pid = self.run(&["display-message", "-p", "-t", SESSION, "#{pane_pid}"])?;
        pid.trim()
            .parse()
            .with_context(|| format!("tmux gave the pane's pid as {pid:?}"))
    }

    fn history_size(&self) -> Result<usize> {
        let n = self.run(&["display-message", "-p", "-t", SESSION, "#{history_size}"])?;
        n.trim()
            .parse()
            .with_context(|| format!("tmux gave the history size as {n:?}"))
    }

    /// Polls the screen every 50 ms until `done`; fails with the screen after [`WAIT`].
    fn wait(&self, what: &str, done: impl Fn(&str) -> bool) -> Result<String> {
        self.poll(what, Duration::from_millis(50), done)
    }

    /// The same, polling as fast as tmux answers: for the latencies.
    fn wait_fast(&self, what: &str, done: impl Fn(&str) -> bool) -> Result<String> {
        self.poll(what, Duration::ZERO, done)
    }

    fn poll(&self, what: &str, every: Duration, done: impl Fn(&str) -> bool) -> Result<String> {
        let start = Instant::now();
        loop {
            let pane = self.capture()?;
            if done(&pane) {
                return Ok(pane);
            }
            if start.elapsed() > WAIT {
                bail!("timed out waiting for {what}; the screen:\n{pane}");
            }
            std::thread::sleep(every);
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

// ---- /proc and the frame log -----------------------------------------------------------

/// Clock ticks a second (`/proc/<pid>/stat`'s unit), as `getconf CLK_TCK` says (100,
/// Linux's USER_HZ, if it cannot).
fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|t| t.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

/// A process's CPU time so far, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    stat_cpu_ticks(&stat).with_context(|| format!("cannot read /proc/{pid}/stat: {stat:?}"))
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The name (field 2,
/// in parentheses) may hold spaces and parentheses: fields are counted from the last
/// `)`.
fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// How much of the screen a frame wrote afresh (`GYRE_FRAME_LOG`'s third field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redraw {
    Diff,
    Area,
    Screen,
}

/// One line of `GYRE_FRAME_LOG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    /// When it was flushed (µs since 1970).
    at: u64,
    /// How long it took (µs).
    took: u64,
    redraw: Redraw,
    /// The time from the key it answered to its flush (µs).
    key: Option<u64>,
}

/// The frames of a `GYRE_FRAME_LOG` file: `<unix µs> <µs> <diff|area|screen> <µs|->`.
fn parse_frames(text: &str) -> Result<Vec<Frame>> {
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            let bad = || format!("GYRE_FRAME_LOG line {}: {line:?}", i + 1);
            let f: Vec<&str> = line.split(' ').collect();
            let [at, took, redraw, key] = f[..] else {
                bail!("{}: not 4 fields", bad());
            };
            Ok(Frame {
                at: at.parse().with_context(bad)?,
                took: took.parse().with_context(bad)?,
                redraw: match redraw {
                    "diff" => Redraw::Diff,
                    "area" => Redraw::Area,
                    "screen" => Redraw::Screen,
                    _ => bail!("{}: unknown redraw {redraw:?}", bad()),
                },
                key: match key {
                    "-" => None,
                    us => Some(us.parse().with_context(bad)?),
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tmux_every_row_is_missing_and_says_why() {
        let rows = all_missing("tmux is not installed");
        assert_eq!(rows.len(), ROWS.len());
        for row in rows {
            assert!(row.value.is_none() && row.goal.is_none(), "{row:?}");
            assert_eq!(row.note.as_deref(), Some("tmux is not installed"));
        }
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime_counted_from_the_last_parenthesis() {
        // A name with a space and a parenthesis; utime 1234, stime 56.
        let stat = "4242 (gyre (x) y) S 1 4242 4242 0 -1 4194304 900 0 0 0 1234 56 0 0 20 0 \
                    5 0 100 200000000 3000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1";
        assert_eq!(stat_cpu_ticks(stat), Some(1290));
        assert_eq!(stat_cpu_ticks("4242 (gyre) S 1 2"), None);
        assert_eq!(stat_cpu_ticks("no parenthesis"), None);
    }

    #[test]
    fn the_frame_log_parses_and_bad_lines_say_where() {
        let frames =
            parse_frames("1700000000000000 180 diff -\n1700000000001000 950 screen 1200\n")
                .unwrap();
        assert_eq!(
            frames,
            [
                Frame {
                    at: 1_700_000_000_000_000,
                    took: 180,
                    redraw: Redraw::Diff,
                    key: None
                },
                Frame {
                    at: 1_700_000_000_001_000,
                    took: 950,
                    redraw: Redraw::Screen,
                    key: Some(1200)
                },
            ]
        );
        let err = parse_frames("1 2 diff -\n1 2 sideways -\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        assert!(parse_frames("1 2 diff").is_err());
    }

    #[test]
    fn the_input_boxes_are_read_only_when_idle() {
        let gyre = "text above\n╭────╮\n│> hello   │\n╰────╯\n";
        assert_eq!(gyre_idle_box(gyre).as_deref(), Some("hello"));
        assert_eq!(gyre_idle_box(&format!("{gyre}· esc to interrupt")), None);
        let claude = "❯ hi\n\n● answer\n───\n❯ ab\n───\n  ? for shortcuts";
        assert_eq!(reference_idle_box(claude).as_deref(), Some("ab"));
        assert_eq!(reference_idle_box("❯ \n───").as_deref(), Some(""));
        // A prompt in the scrollback is not the box.
        assert_eq!(reference_idle_box("❯ hi\n\n● answer"), None);
        assert_eq!(reference_idle_box("❯ ab\n───\n✻ esc to interrupt"), None);
    }

    #[test]
    fn the_streamed_answer_has_the_tokens_asked_for_in_lines() {
        let script = script(300);
        let json = serde_json::to_value(&script).unwrap();
        let text = json["turns"][1]["content"][0]["text"].as_str().unwrap();
        assert_eq!(text.len(), 300 * TOKEN_CHARS);
        assert!(text.lines().all(|l| l.len() <= 90), "{text}");
        assert!(text.lines().count() > 10, "{text}");
        assert!(text.ends_with(&format!("\n{STREAM_END}\n")), "{text}");
        let long = json["turns"][0]["content"][0]["text"].as_str().unwrap();
        assert_eq!(long.lines().count(), SCROLLBACK_LINES);
    }

    #[test]
    fn without_a_reference_every_row_says_why() {
        let session = Session {
            stream_cpu: Duration::from_millis(300),
            stream_wall: Duration::from_secs(10),
            tokens: 1000,
            echo: vec![3.0, 4.0, 5.0],
            frames: vec![
                Frame {
                    at: 10,
                    took: 500,
                    redraw: Redraw::Diff,
                    key: None,
                },
                Frame {
                    at: 30,
                    took: 900,
                    redraw: Redraw::Screen,
                    key: None,
                },
                Frame {
                    at: 31,
                    took: 100,
                    redraw: Redraw::Diff,
                    key: Some(700),
                },
            ],
            stream_span: (5, 20),
            resized_at: 25,
            ..Session::default()
        };
        let startups = Startups {
            polled: vec![30.0, 31.0],
            first_frame: vec![20.0],
        };
        let why = "no reference CLI: npm failed".to_owned();
        let rows = build_rows(
            &session,
            &startups,
            Err(&why),
            &counts(&super::super::QUICK),
        );
        assert_eq!(rows.len(), ROWS.len());
        let get = |id: &str| rows.iter().find(|r| r.id == id).unwrap();
        assert!((get("repl_cpu_per_token").value.unwrap() - 0.3).abs() < 1e-9);
        assert!((get("repl_cpu_share").value.unwrap() - 3.0).abs() < 1e-9);
        assert_eq!(get("repl_frame").value, Some(0.5));
        let redraws = get("repl_full_redraws");
        assert_eq!(redraws.value, Some(0.0));
        assert!(redraws.goal.as_ref().unwrap().pass, "one after the resize");
        assert!(
            get("repl_key_echo")
                .note
                .as_ref()
                .unwrap()
                .contains("0.70 ms")
        );
        for row in &rows {
            assert!(row.reference.is_none());
            assert!(row.note.as_ref().unwrap().contains("npm failed"), "{row:?}");
        }
    }
}
