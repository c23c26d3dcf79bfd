//! `xtask-bench-probe`: the parts of `cargo xtask bench` that run gyre's libraries
//! directly, built in release like the shipped binary.
//!
//! - `tool Grep|Glob DIR INPUT_JSON`: one call of the tool through the public
//!   gyre-tools API with DIR as the working directory, its text on stdout. The bench
//!   times the whole process, as it times `rg`.
//! - `glob-all DIR PATTERN`: every file Glob's search finds (before its cut at 100).
//! - `spawn OUT PROGRAM ARGS…`: runs PROGRAM and writes its exit code, peak RSS and
//!   wall time to OUT (see `spawn` for why the bench needs a small parent).
//! - `spawn-lines OUT PROGRAM ARGS…`: the same, and reads PROGRAM's stdout itself: the
//!   lines go to `OUT.stdout`, and `OUT.marks` gets, for each line, when it arrived and
//!   how much CPU PROGRAM had used by then (see `Lines`).
//! - `stream RUNS`: one streamed turn from gyre-testkit carrying five tool calls to a safe
//!   tool that sleeps 200 ms, run through the `StreamingToolExecutor` as the loop does
//!   (each call added at its `content_block_stop`); median stream time and turn time (all
//!   results in).
//! - `replay FROM TO`: the request bodies gyre sent to the testkit on port FROM, sent
//!   again in order to a testkit on port TO serving the same script, by the plainest
//!   client there is (see `replay`); each round trip as `[wall µs, CPU µs]`, in a JSON
//!   list. The bench's reference for what sending those bytes costs any client.

use std::borrow::Cow;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ClientConfig, ModelClient, ModelEvent, RetryOptions, RetryPolicy,
    stream_with_retry,
};
use gyre_protocol::{ContentBlock, Message, MessagesRequest};
use gyre_testkit::{Block, Script, TestServer, Turn};
use gyre_tools::{
    AllowAll, BoxFuture, PermissionDecision, ProgressFn, StreamingToolExecutor, Tool, ToolCall,
    ToolContext, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

/// How long each fake tool call takes.
const TOOL_MS: u64 = 200;

#[path = "../rusage.rs"]
mod rusage;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Before anything else (no runtime): this process stays small, see `spawn`.
    if let [command, out, program, rest @ ..] = args.as_slice()
        && (command == "spawn" || command == "spawn-lines")
    {
        let code = spawn(out, program, rest, command == "spawn-lines")?;
        std::process::exit(code);
    }
    // The runtime gyre itself runs tools on (one thread; the tool on a blocking one).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("could not start a tokio runtime")?;
    let out = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["tool", name, dir, input] => runtime.block_on(tool(name, dir, input))?,
        ["glob-all", dir, pattern] => glob_all(dir, pattern)?,
        ["stream", runs] => runtime
            .block_on(stream(runs.parse()?))
            .map(|v| v.to_string())?,
        ["replay", from, to] => replay(from.parse()?, to.parse()?)?,
        _ => bail!(
            "usage: xtask-bench-probe tool Grep|Glob DIR INPUT_JSON | glob-all DIR PATTERN | stream RUNS | replay FROM_PORT TO_PORT"
        ),
    };
    println!("{out}");
    Ok(())
}

/// The requests the testkit on `port` received, bodies included.
fn captured(port: u16) -> Result<Vec<gyre_testkit::CapturedRequest>> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.write_all(b"GET /_testkit/requests HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let start = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("the testkit's request list had no body")?;
    serde_json::from_slice(&raw[start + 4..]).context("the testkit's request list is not JSON")
}

/// Sends every request body the testkit on `from` received, in order, to the testkit on
/// `to` and times each round trip: from the first byte written to the last byte of the
/// answer read, in wall time and in this thread's CPU time. One kept-alive socket with
/// `TCP_NODELAY`, the head and the body in one blocking write, the chunked answer read
/// into one reused buffer: the least any HTTP client can do to send those bytes and read
/// the answer.
///
/// Every request is built before the first is sent, as bytes a client holds: a request
/// built just before its write would be sent from the CPU's cache, and at 500 KB that
/// takes about 80 µs less than sending it from memory, a discount no client that keeps
/// its body between turns (as gyre does, to encode only the new messages) can have.
fn replay(from: u16, to: u16) -> Result<String> {
    const END: &[u8] = b"\r\n0\r\n\r\n";
    let requests: Vec<Vec<u8>> = captured(from)?
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .map(|r| -> Result<Vec<u8>> {
            let body = serde_json::to_vec(&r.body)?;
            let mut request = Vec::with_capacity(body.len() + 200);
            write!(
                request,
                "POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
                 x-api-key: bench-key\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n",
                body.len()
            )?;
            request.extend_from_slice(&body);
            Ok(request)
        })
        .collect::<Result<_>>()?;
    let mut stream = TcpStream::connect(("127.0.0.1", to))?;
    stream.set_nodelay(true)?;
    // A testkit that stops answering fails the bench instead of hanging it.
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut out = Vec::with_capacity(requests.len());
    let mut answer = Vec::with_capacity(1 << 16);
    let mut buf = vec![0u8; 1 << 16];
    let cpu = rusage::CpuClock::this_thread();
    for request in &requests {
        answer.clear();
        let cpu_before = cpu.read()?;
        let started = Instant::now();
        stream.write_all(request)?;
        while !answer.ends_with(END) {
            let n = stream.read(&mut buf)?;
            if n == 0 {
                bail!("the testkit closed the connection mid-answer");
            }
            answer.extend_from_slice(&buf[..n]);
            // An error answer is not chunked: waiting for the last chunk would hang.
            if answer.len() >= 12 && !answer.starts_with(b"HTTP/1.1 200") {
                bail!(
                    "the testkit answered a replayed request with {}",
                    String::from_utf8_lossy(&answer[..answer.len().min(300)])
                );
            }
        }
        let wall = started.elapsed().as_micros();
        out.push((wall, cpu.read()? - cpu_before));
    }
    Ok(serde_json::to_string(&out)?)
}

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples
        .get(samples.len() / 2)
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
}

/// Runs `program` with `args` (stdio, directory and environment inherited) and writes
/// `<exit code> <peak RSS in KiB> <wall µs> <CPU µs>` to `out`; exits with the
/// program's code. With `lines`, reads the program's stdout (see [`Lines`]).
///
/// Why a process between the bench and what it measures: the peak RSS the kernel
/// reports for a child counts the memory of the process it was forked from (the
/// parent's address space is the child's until `exec`), so a child of the bench would
/// report at least the bench's own RSS (about 12 MiB for a debug xtask) however little
/// it uses. This process is a few MiB.
fn spawn(out: &str, program: &str, args: &[String], lines: bool) -> Result<i32> {
    let started = Instant::now();
    let mut command = std::process::Command::new(program);
    command.args(args);
    if lines {
        command.stdout(std::process::Stdio::piped());
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("could not run {program}"))?;
    if let Some(stdout) = child.stdout.take() {
        let read = Lines::read(stdout, &child, started).and_then(|lines| lines.write(out));
        if let Err(e) = read {
            // Not left running without its reader.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    }
    let usage = rusage::wait_usage(&child)?;
    let wall = started.elapsed().as_micros();
    std::fs::write(
        out,
        format!(
            "{} {} {wall} {}\n",
            usage.code, usage.peak_kib, usage.cpu_us
        ),
    )?;
    Ok(usage.code)
}

/// A child's stdout as the plainest reader takes it (one loop of blocking reads, in a
/// release build, nothing parsed), and for each line when its newline arrived (µs since
/// spawn) and the child's CPU time by then (user + system, every thread, µs).
///
/// Why the probe reads the lines and not the bench: the bench is a debug build, and on
/// two cores a slow reader competes with what it times. Why CPU time: on two cores the
/// wall time of a sub-millisecond turn swings with whatever else runs (the local
/// testkit, the reader); the CPU gyre spent on a turn does not, and it is what grows if
/// gyre does work that scales with the history.
struct Lines {
    text: Vec<u8>,
    /// (arrival µs, child CPU µs) per line.
    marks: Vec<(u128, u64)>,
}

impl Lines {
    fn read(mut stdout: impl Read, child: &std::process::Child, started: Instant) -> Result<Self> {
        let cpu = rusage::CpuClock::of(child)?;
        let mut lines = Self {
            text: Vec::with_capacity(1 << 20),
            marks: Vec::new(),
        };
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            let chunk = &buf[..n];
            let newlines = chunk.iter().filter(|&&b| b == b'\n').count();
            if newlines > 0 {
                let at = started.elapsed().as_micros();
                // The child may be exiting: its clock then reads as the last it had.
                let used = cpu
                    .read()
                    .unwrap_or_else(|_| lines.marks.last().map_or(0, |m| m.1));
                lines
                    .marks
                    .extend(std::iter::repeat_n((at, used), newlines));
            }
            lines.text.extend_from_slice(chunk);
        }
        Ok(lines)
    }

    fn write(&self, out: &str) -> Result<()> {
        std::fs::write(format!("{out}.stdout"), &self.text)?;
        let marks: String = self
            .marks
            .iter()
            .map(|(at, cpu)| format!("{at} {cpu}\n"))
            .collect();
        std::fs::write(format!("{out}.marks"), marks)?;
        Ok(())
    }
}

/// One Grep or Glob call in `dir` (the working directory), its text on stdout: what a
/// user of the tool waits for, process start included, timed from outside like `rg`.
async fn tool(name: &str, dir: &str, input: &str) -> Result<String> {
    let ctx = ToolContext::new(dir);
    let input: Value = serde_json::from_str(input).context("the tool input is not JSON")?;
    let tool: &dyn Tool = match name {
        "Grep" => &gyre_tools::grep::GrepTool,
        "Glob" => &gyre_tools::glob::GlobTool,
        _ => bail!("unknown tool {name}: Grep or Glob"),
    };
    let result = tool.call(input, &ctx, &|_| {}).await;
    if result.is_error {
        bail!("{name} failed: {}", result.content);
    }
    Ok(result.content)
}

/// Every file Glob's search finds for `pattern` in `dir`, one per line, before the
/// tool's cut at 100: the set to compare with `rg --files`.
fn glob_all(dir: &str, pattern: &str) -> Result<String> {
    let ctx = ToolContext::new(dir);
    let files = gyre_tools::glob::find(std::path::Path::new(dir), pattern, &ctx)
        .map_err(anyhow::Error::msg)?;
    Ok(files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join("\n"))
}

/// A concurrency-safe tool that takes [`TOOL_MS`].
struct SlowSafeTool;

impl Tool for SlowSafeTool {
    fn name(&self) -> Cow<'static, str> {
        "Sleep".into()
    }
    fn description(&self) -> Cow<'static, str> {
        "Waits 200 ms.".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn validate_input(&self, _: &Value, _: &ToolContext) -> Result<(), gyre_tools::ToolInputError> {
        Ok(())
    }
    fn is_concurrency_safe(&self, _: &Value) -> bool {
        true
    }
    fn is_read_only(&self, _: &Value) -> bool {
        true
    }
    fn check_permissions(&self, _: &Value, _: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
    }
    fn max_result_size_chars(&self) -> usize {
        1000
    }
    fn call<'a>(
        &'a self,
        _: Value,
        _: &'a ToolContext,
        _: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(TOOL_MS)).await;
            ToolOutput::ok("slept")
        })
    }
}

/// Five tool calls spread through the answer, each followed by some text, so the last call
/// is complete three quarters of the way through the stream; 20 ms before each of its 49 events
/// makes a stream of about 1 s.
fn streamed_turn() -> Turn {
    let mut blocks = vec![Block::text("Checking five things at once.")];
    for i in 0..5 {
        blocks.push(Block::tool_use("Sleep", json!({"n": i})));
        blocks.push(Block::text(format!("Started check {i}.")));
    }
    blocks.push(Block::text(
        "While those run, here is what each check looks at and why it matters for the answer.",
    ));
    Turn::response(blocks)
        .with_chunk_chars(24)
        .delay_per_event(Duration::from_millis(20))
}

async fn stream(runs: usize) -> Result<Value> {
    let scratch = tempfile::tempdir()?;
    let registry = Arc::new(ToolRegistry::new().with(Arc::new(SlowSafeTool)));
    let mut stream_samples = Vec::new();
    let mut turn_samples = Vec::new();
    let mut events = 0;
    for _ in 0..runs {
        let server = TestServer::start(Script::new([streamed_turn()])).await?;
        let client: Arc<dyn ModelClient> = Arc::new(AnthropicClient::new(
            ClientConfig::new("bench").with_base_url(server.url()),
        )?);
        let executor = StreamingToolExecutor::new(
            Arc::clone(&registry),
            ToolContext::new(scratch.path()),
            Arc::new(AllowAll),
        );
        let request = MessagesRequest::new("claude-bench", 1024, vec![Message::user_text("go")]);
        let started = Instant::now();
        let mut model = stream_with_retry(
            client,
            request,
            RetryOptions::new(RetryPolicy::default()),
            tokio_util::sync::CancellationToken::new(),
        );
        let mut calls = 0;
        events = 0;
        let mut stream_end = None;
        while let Some(event) = model.next().await {
            match event? {
                ModelEvent::Stream(_) => events += 1,
                ModelEvent::BlockComplete {
                    block:
                        ContentBlock::ToolUse {
                            id, name, input, ..
                        },
                    ..
                } => {
                    calls += 1;
                    executor.add_tool(ToolCall::new(id, name, input));
                }
                ModelEvent::Message(_) => stream_end = Some(started.elapsed()),
                ModelEvent::BlockComplete { .. } | ModelEvent::Retry(_) => {}
            }
        }
        let results: Vec<_> = executor.get_remaining_results().collect().await;
        let turn = started.elapsed();
        if calls != 5 || results.len() != 5 || results.iter().any(|r| r.output.is_error) {
            bail!(
                "the streamed turn ran {calls} calls and got {} results",
                results.len()
            );
        }
        stream_samples.push(stream_end.context("the stream never ended")?);
        turn_samples.push(turn);
    }
    Ok(json!({
        "stream_ms": median_ms(stream_samples),
        "turn_ms": median_ms(turn_samples),
        "events": events,
        "tools": 5,
        "tool_ms": TOOL_MS,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_whole_and_each_is_marked_when_it_arrived() {
        let started = Instant::now();
        let mut child = std::process::Command::new("sh")
            .args(["-c", "printf 'a\\nb\\n'; sleep 0.1; printf 'cc\\n'"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = Lines::read(stdout, &child, started).unwrap();
        child.wait().unwrap();
        assert_eq!(lines.text, b"a\nb\ncc\n");
        assert_eq!(lines.marks.len(), 3);
        let (first, last) = (lines.marks[0], lines.marks[2]);
        // The shell sleeps 100 ms before the third line, so it cannot arrive sooner after
        // the start; the first line's own mark may come late on a busy machine, so the
        // gap between the two is no bound.
        assert!(
            last.0 >= 100_000 && last.0 >= first.0,
            "the third line came at least 100 ms after the start: {:?}",
            lines.marks
        );
        assert!(last.1 >= first.1, "a CPU clock only goes forward");
    }
}
