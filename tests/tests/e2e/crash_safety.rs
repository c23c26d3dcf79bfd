//! Crash safety (issue #9): `kill -9` at any point loses no message that was
//! printed, and `--resume` continues the session with a valid history.
//!
//! A scripted two-turn session (streams with per-event delays, a Read, a Bash `sleep`, a
//! pause between the turns) is SIGKILLed at seeded pseudo-random times, many times. After
//! each kill the transcript must load (a torn last line is tolerated), hold every
//! assistant and user message that had been printed, and `--resume` must send a request
//! whose history is that transcript, every tool call paired (cut-off calls answered by
//! synthetic results). A second test kills gyre around an Edit of a large file: the file
//! is always either the old or the new version, never a mix.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gyre_e2e::{Sandbox, pairing_problems, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

const KILLS: u64 = 30;
const EDIT_KILLS: u64 = 12;
/// Runs going on at once (each is a gyre process and a testkit server).
const PARALLEL: u64 = 3;
const SEED: u64 = 0x9e37_79b9_7f4a_7c15;
/// Bound on any wait for gyre: far above a healthy run.
const DEADLINE: Duration = Duration::from_secs(20);

/// xorshift64*: a deterministic stream of kill times.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn session_script() -> Script {
    let slow = Duration::from_millis(15);
    Script::new([
        // Turn 1: read, run a slow command, answer.
        Turn::text("Let me read the notes first.")
            .and_tool_use("Read", json!({"file_path": "notes.txt"}))
            .delay_per_event(slow),
        Turn::text("Now the slow command.")
            .and_tool_use("Bash", json!({"command": "sleep 0.25; echo slept"}))
            .delay_per_event(slow),
        Turn::text("Turn one is done.").delay_per_event(slow),
        // Turn 2: write a file, answer.
        Turn::text("Writing the summary.")
            .and_tool_use(
                "Write",
                json!({"file_path": "summary.txt", "content": "summary\n"}),
            )
            .delay_per_event(slow),
        Turn::text("Turn two is done.").delay_per_event(slow),
    ])
}

fn user_line(text: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "user", "message": {"role": "user", "content": text}})
    )
}

/// A running gyre and everything it printed so far (complete lines only).
struct Watched {
    child: Child,
    printed: Arc<Mutex<Vec<String>>>,
    reader: std::thread::JoinHandle<()>,
}

/// Starts the two-turn session: the first prompt at once, the second 100 ms after the
/// first turn's result, then stdin closes.
fn start_session(sandbox: &Sandbox, server: &TestServer, session_id: &str) -> Watched {
    let mut child = sandbox
        .gyre(server)
        .unwrap()
        .args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash Write",
            "--session-id",
            session_id,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A closed pipe (gyre killed) makes these writes fail: that is expected.
    let _ = stdin.write_all(user_line("first task").as_bytes());
    let stdout = child.stdout.take().unwrap();
    let printed = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&printed);
    let reader = std::thread::spawn(move || {
        let mut stdin = Some(stdin);
        let mut results = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let is_result = line.starts_with(r#"{"type":"result""#)
                || serde_json::from_str::<Value>(&line).is_ok_and(|v| v["type"] == "result");
            sink.lock().unwrap().push(line);
            if is_result {
                results += 1;
                if results == 1 {
                    std::thread::sleep(Duration::from_millis(100));
                    if let Some(s) = stdin.as_mut() {
                        let _ = s.write_all(user_line("second task").as_bytes());
                    }
                }
                if results == 2 {
                    stdin = None;
                }
            }
        }
    });
    Watched {
        child,
        printed,
        reader,
    }
}

fn wait_bounded(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return child.wait().ok();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn transcript_path(sandbox: &Sandbox, session_id: &str) -> Option<PathBuf> {
    sandbox
        .transcripts()
        .into_iter()
        .find(|p| p.file_stem().is_some_and(|s| s == session_id))
}

/// What one kill did and whether anything was lost.
#[derive(Debug, Default)]
struct KillReport {
    killed_at_ms: u64,
    /// Whether gyre was still running when the kill came.
    killed: bool,
    printed_messages: usize,
    transcript_lines: usize,
    torn_lines: usize,
    repaired_calls: usize,
    problems: Vec<String>,
}

fn kill_once(kill_at_ms: u64, index: u64) -> KillReport {
    let mut report = KillReport {
        killed_at_ms: kill_at_ms,
        ..KillReport::default()
    };
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "remember the milk\n").unwrap();
    let session_id = format!("00000000-0000-4000-8000-{index:012}");
    let server = TestServer::spawn(session_script()).unwrap();
    let mut watched = start_session(&sandbox, &server, &session_id);
    std::thread::sleep(Duration::from_millis(kill_at_ms));
    report.killed = watched.child.try_wait().unwrap().is_none();
    // SIGKILL: no destructor, no flush, no signal handler runs.
    let _ = watched.child.kill();
    wait_bounded(&mut watched.child);
    watched.reader.join().unwrap();
    let printed: Vec<Value> = watched
        .printed
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let messages: Vec<&Value> = printed
        .iter()
        .filter(|l| l["type"] == "assistant" || l["type"] == "user")
        .collect();
    report.printed_messages = messages.len();

    let Some(path) = transcript_path(&sandbox, &session_id) else {
        if !messages.is_empty() {
            report
                .problems
                .push("messages were printed but there is no transcript".to_owned());
        }
        return report;
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let raw_lines: Vec<&str> = text.lines().collect();
    report.transcript_lines = raw_lines.len();
    let mut saved = std::collections::HashMap::new();
    for (i, line) in raw_lines.iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => {
                saved.insert(v["uuid"].as_str().unwrap_or_default().to_owned(), v);
            }
            Err(_) if i + 1 == raw_lines.len() && !text.ends_with('\n') => report.torn_lines += 1,
            Err(e) => report
                .problems
                .push(format!("transcript line {i} is corrupt: {e}")),
        }
    }
    for m in &messages {
        let uuid = m["uuid"].as_str().unwrap_or_default();
        let same = saved.get(uuid).is_some_and(|e| {
            e["message"]["role"] == m["message"]["role"]
                && e["message"]["content"] == m["message"]["content"]
        });
        if !same {
            report
                .problems
                .push(format!("printed message {uuid} is not in the transcript"));
        }
    }
    let loaded = match gyre_loop::load_transcript(&path) {
        Ok(l) => l,
        Err(e) => {
            report
                .problems
                .push(format!("transcript does not load: {e}"));
            return report;
        }
    };
    if loaded.skipped_lines != report.torn_lines {
        report.problems.push(format!(
            "load_transcript skipped {} lines, {} torn",
            loaded.skipped_lines, report.torn_lines
        ));
    }
    report.repaired_calls = loaded.repaired_tool_calls;
    if loaded.messages.is_empty() {
        return report;
    }

    // Resume: the next request carries the whole saved history, correctly paired.
    let resumed_server = TestServer::spawn(Script::new([Turn::text("Resumed.")])).unwrap();
    let out = run(sandbox.gyre(&resumed_server).unwrap().args([
        "-p",
        "carry on",
        "--resume",
        &session_id,
        "--output-format",
        "json",
    ]))
    .unwrap();
    if out.code != Some(0) {
        report
            .problems
            .push(format!("--resume exited {:?}: {}", out.code, out.stderr));
        return report;
    }
    let requests = resumed_server.requests();
    let Some(request) = requests.first() else {
        report.problems.push("--resume sent no request".to_owned());
        return report;
    };
    let sent = &request.body["messages"];
    report.problems.extend(
        pairing_problems(sent)
            .into_iter()
            .map(|p| format!("resumed request: {p}")),
    );
    let sent_text = sent.to_string();
    for m in &messages {
        for block in m["message"]["content"].as_array().into_iter().flatten() {
            let needle = match block["type"].as_str() {
                Some("text") => block["text"].to_string(),
                Some("tool_use") => block["id"].to_string(),
                Some("tool_result") => block["tool_use_id"].to_string(),
                _ => continue,
            };
            if !sent_text.contains(&needle) {
                report
                    .problems
                    .push(format!("resumed request lacks printed {needle}"));
            }
        }
    }
    if !sent_text.contains("carry on") {
        report
            .problems
            .push("resumed request lacks the new prompt".to_owned());
    }
    report
}

/// Runs `count` jobs, `PARALLEL` at a time, in index order of results.
fn in_parallel<T: Send>(count: u64, job: impl Fn(u64) -> T + Sync) -> Vec<T> {
    let next = std::sync::atomic::AtomicU64::new(0);
    let results: Mutex<Vec<(u64, T)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= count {
                        break;
                    }
                    let r = job(i);
                    results.lock().unwrap().push((i, r));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[test]
fn kill_9_at_random_points_loses_nothing_printed_and_resume_continues() {
    let mut rng = Rng(SEED);
    // A whole session takes about 1.5 s: kills land while streaming, during the Read,
    // during the Bash sleep, between the turns and in the second turn.
    let times: Vec<u64> = (0..KILLS).map(|_| 30 + rng.below(1500)).collect();
    let reports = in_parallel(KILLS, |i| kill_once(times[usize::try_from(i).unwrap()], i));

    let killed = reports.iter().filter(|r| r.killed).count();
    let torn: usize = reports.iter().map(|r| r.torn_lines).sum();
    let repaired: usize = reports.iter().map(|r| r.repaired_calls).sum();
    let failures: Vec<String> = reports
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.problems.is_empty())
        .map(|(i, r)| format!("kill {i} at {} ms: {:?}", r.killed_at_ms, r.problems))
        .collect();
    eprintln!(
        "{killed} of {KILLS} runs killed mid-session; {} survived with nothing lost; {torn} torn transcript lines; {repaired} cut-off tool calls repaired on resume",
        reports
            .iter()
            .filter(|r| r.killed && r.problems.is_empty())
            .count()
    );
    for (i, r) in reports.iter().enumerate() {
        eprintln!(
            "  kill {i:>2} at {:>4} ms: killed={} printed={} transcript_lines={} torn={} repaired={}",
            r.killed_at_ms,
            r.killed,
            r.printed_messages,
            r.transcript_lines,
            r.torn_lines,
            r.repaired_calls
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The schedule must actually hit running sessions, in several phases.
    assert!(
        killed * 10 >= usize::try_from(KILLS).unwrap() * 8,
        "only {killed} kills hit a running gyre"
    );
    assert!(
        reports.iter().any(|r| r.repaired_calls > 0),
        "no kill landed while a tool call was unanswered"
    );
}

/// Lines of the large file: 5 MB, so the Edit takes a while.
const BIG_LINES: usize = 100_000;

fn big_file(word: &str) -> String {
    (0..BIG_LINES)
        .map(|i| format!("{i:>8} {word} the quick brown fox jumps over the lazy dog\n"))
        .collect()
}

#[derive(Debug)]
enum EditOutcome {
    Old,
    New,
}

/// The file after the kill, and how many temp files the interrupted write left behind.
fn kill_around_edit(delay_ms: u64) -> Result<(EditOutcome, usize), String> {
    let sandbox = Sandbox::new().unwrap();
    let old = big_file("alpha");
    let new = big_file("omega");
    let path = sandbox.write("big.txt", &old).unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Read",
            json!({"file_path": "big.txt", "offset": 1, "limit": 3}),
        ),
        Turn::tool_use(
            "Edit",
            json!({"file_path": "big.txt", "old_string": "alpha", "new_string": "omega", "replace_all": true}),
        ),
        Turn::text("Edited."),
    ]))
    .unwrap();
    let mut child = sandbox
        .gyre(&server)
        .unwrap()
        .args([
            "-p",
            "rename alpha",
            "--allowedTools",
            "Edit",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the Edit call is on its way (the second request was answered), then
    // kill after `delay_ms`.
    let deadline = Instant::now() + DEADLINE;
    while server.turns_served() < 2 {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            return Err("the Edit turn was never requested".to_owned());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(delay_ms));
    let _ = child.kill();
    wait_bounded(&mut child);
    let now = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    let leftovers = leftover_temp_files(sandbox.project().as_path());
    if now == old {
        Ok((EditOutcome::Old, leftovers))
    } else if now == new {
        Ok((EditOutcome::New, leftovers))
    } else {
        Err(format!(
            "big.txt is neither version after a kill at +{delay_ms} ms ({} bytes, old {}, new {})",
            now.len(),
            old.len(),
            new.len()
        ))
    }
}

/// Temp files an interrupted atomic write leaves behind (harmless, never the target).
fn leftover_temp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(".gyre-write-"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn kill_9_around_an_edit_leaves_the_old_or_the_new_file() {
    let mut rng = Rng(SEED ^ 0xed17);
    let delays: Vec<u64> = (0..EDIT_KILLS).map(|_| rng.below(1500)).collect();
    let outcomes = in_parallel(EDIT_KILLS, |i| {
        kill_around_edit(delays[usize::try_from(i).unwrap()])
    });
    let old = outcomes
        .iter()
        .filter(|o| matches!(o, Ok((EditOutcome::Old, _))))
        .count();
    let new = outcomes
        .iter()
        .filter(|o| matches!(o, Ok((EditOutcome::New, _))))
        .count();
    let leftovers: usize = outcomes.iter().flatten().map(|(_, n)| n).sum();
    eprintln!(
        "{EDIT_KILLS} kills around a 5 MB Edit: {old} left the old file, {new} the new one, {leftovers} temp files left behind"
    );
    let errors: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}
