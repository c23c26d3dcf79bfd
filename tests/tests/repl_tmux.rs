//! The interactive REPL driven through a real terminal: `gyre` runs in a detached tmux
//! session against gyre-testkit; the test types, answers a permission question,
//! interrupts a long Bash call with Ctrl+C, asks `/cost` and quits with `/exit`,
//! reading the screen with `tmux capture-pane`.
//!
//! Ignored by a plain `cargo test` (it needs tmux); `cargo xtask ci` installs tmux and runs
//! it with the other ignored tests. `GYRE_UPDATE_DOCS=1` rewrites
//! `docs/repl.md` from the captured screen.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gyre_e2e::{Sandbox, TEST_API_KEY, gyre_binary};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);
const SESSION: &str = "gyre";

/// A tmux server of our own (its socket in the sandbox), killed on drop.
struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    fn installed() -> bool {
        Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Starts `command` (a shell command line) in a 100x50 pane that stays after it exits.
    fn start(dir: &Path, command: &str) -> Self {
        let tmux = Self {
            socket: dir.join("tmux.sock"),
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

    fn run(&self, args: &[&str]) -> String {
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

    fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", SESSION, "-l", text]);
        self.run(&["send-keys", "-t", SESSION, "Enter"]);
    }

    fn key(&self, key: &str) {
        self.run(&["send-keys", "-t", SESSION, key]);
    }

    fn capture(&self) -> String {
        let pane = self.run(&["capture-pane", "-p", "-t", SESSION]);
        pane.trim_end().to_owned()
    }

    /// The screen with everything scrolled off it.
    fn capture_all(&self) -> String {
        let pane = self.run(&["capture-pane", "-p", "-S", "-", "-t", SESSION]);
        pane.trim_end().to_owned()
    }

    /// Waits until the REPL is back at an empty prompt (so typing is not echoed early).
    fn wait_for_prompt(&self) -> String {
        self.wait_until("the prompt", |pane| pane.lines().last() == Some(">"))
    }

    /// Polls the screen until `done` holds; fails with the screen after [`WAIT`].
    fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let pane = self.capture();
            if done(&pane) {
                return pane;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; the screen:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |pane| pane.contains(text))
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

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn repl_streams_asks_interrupts_reports_cost_and_exits() {
    assert!(
        Tmux::installed(),
        "tmux is not installed: apt-get install tmux (cargo xtask ci does this)"
    );
    let gyre = gyre_binary().unwrap();
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("I'll write the greeting first.\n")
            .and_tool_use("Bash", json!({"command": "echo hello | tee greeting.txt"}))
            .delay_per_event(Duration::from_millis(10)),
        Turn::text(
            "## Done\n\nThe command printed **hello** and wrote `greeting.txt`:\n\n\
             - one file\n- one line\n",
        )
        .with_tokens(1200, 80)
        .delay_per_event(Duration::from_millis(10)),
        Turn::tool_use("Bash", json!({"command": "sleep 30"})),
        Turn::text("unused"),
    ]))
    .unwrap();

    let env = [
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", sandbox.home().display().to_string()),
        ("GYRE_HOME", sandbox.home().display().to_string()),
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", TEST_API_KEY.to_owned()),
        ("NO_COLOR", "1".to_owned()),
        ("TERM", "tmux-256color".to_owned()),
    ];
    let mut command = format!(
        "cd {} && env -i",
        shell_quote(&sandbox.project().display().to_string())
    );
    for (k, v) in &env {
        command.push_str(&format!(" {k}={}", shell_quote(v)));
    }
    command.push(' ');
    command.push_str(&shell_quote(&gyre.display().to_string()));
    // The pane's shell reaps gyre and reports how it ended: tmux itself sometimes
    // leaves an exited pane process unreaped, never marking the pane dead.
    command.push_str("; echo \"gyre exited with status $?\"");
    let tmux = Tmux::start(&sandbox.home(), &command);

    tmux.wait_for("/help for commands");
    tmux.wait_for_prompt();
    tmux.type_line("say hello into a file");
    let pane = tmux.wait_for("Allow?");
    assert!(
        pane.contains("? Bash echo hello | tee greeting.txt"),
        "{pane}"
    );
    assert!(pane.contains("I'll write the greeting first."), "{pane}");
    tmux.type_line("y");
    tmux.wait_for("- one line");
    let pane = tmux.wait_for_prompt();
    assert!(
        pane.contains("● Bash echo hello | tee greeting.txt"),
        "{pane}"
    );
    assert!(pane.contains("  ⎿ exit 0 · hello"), "{pane}");
    assert!(pane.contains("## Done"), "{pane}");
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("greeting.txt")).unwrap(),
        "hello\n"
    );

    // A line ending in `\` goes on at the next one.
    tmux.type_line("now wait \\");
    tmux.type_line("for a while");
    let pane = tmux.wait_until("the second permission question", |p| {
        p.matches("Allow?").count() == 2
    });
    assert!(pane.contains("> now wait \\\n… for a while"), "{pane}");
    let asked = &server.requests()[2].body["messages"];
    let prompt = asked.as_array().and_then(|m| m.last()).unwrap();
    assert_eq!(
        prompt["content"][0]["text"], "now wait \nfor a while",
        "{prompt}"
    );
    tmux.type_line("a");
    tmux.wait_for("Running Bash");
    let interrupted_at = Instant::now();
    tmux.key("C-c");
    tmux.wait_for("Interrupted · tell gyre what to do instead");
    let pane = tmux.wait_for_prompt();
    assert!(interrupted_at.elapsed() < Duration::from_secs(10));
    assert!(pane.contains("● Bash sleep 30"), "{pane}");
    assert!(pane.contains("  ⎿ ✗ interrupted"), "{pane}");

    tmux.type_line("/cost");
    tmux.wait_for("Usage:");
    let pane = tmux.wait_for_prompt();
    assert!(pane.contains("Total cost:            $"), "{pane}");
    assert!(
        pane.contains("Usage:                 1,200 input"),
        "{pane}"
    );

    tmux.type_line("/nope");
    tmux.wait_for("Unknown command /nope · /help lists the commands");
    tmux.wait_for_prompt();

    tmux.type_line("/exit");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");

    let history = std::fs::read_to_string(sandbox.home().join("history")).unwrap();
    assert!(history.contains("say hello into a file"), "{history}");
    assert!(history.contains("/cost"), "{history}");
    assert!(
        !history.lines().any(|l| l == "y" || l == "a"),
        "answers are not history: {history}"
    );

    if std::env::var_os("GYRE_UPDATE_DOCS").is_some() {
        write_docs(&tmux.capture_all(), &sandbox.project());
    }
}

fn write_docs(pane: &str, project: &Path) {
    let screen: Vec<&str> = pane
        .lines()
        .take_while(|l| !l.starts_with("gyre exited with status"))
        .collect();
    let screen = screen
        .join("\n")
        .trim_end()
        .replace(&project.display().to_string(), "~/project");
    let doc = format!(
        "# The REPL\n\n\
         What `gyre` shows in a terminal (100×50, `NO_COLOR=1`): a streamed answer, a\n\
         permission question for a Bash call, a second call interrupted with Ctrl+C,\n\
         `/cost`, an unknown command and `/exit`. The answers come from gyre-testkit.\n\n\
         This is the screen captured by `tests/tests/repl_tmux.rs`; regenerate it with\n\
         `GYRE_UPDATE_DOCS=1 cargo test -p gyre-e2e --test repl_tmux`.\n\n\
         ```text\n{screen}\n```\n"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/repl.md");
    std::fs::write(path, doc).unwrap();
}
