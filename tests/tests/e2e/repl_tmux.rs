//! The interactive terminal UI driven through a real terminal: `gyre` runs in a
//! detached tmux session against gyre-testkit; the tests type real keys (Enter, Ctrl+J,
//! ↑, Ctrl+R, Tab, Esc, Ctrl+C, Ctrl+O, a bracketed paste) and read the screen with
//! `tmux capture-pane`.
//!
//! Ignored by a plain `cargo test` (they need tmux); `cargo xtask ci` installs tmux and
//! runs them with the other ignored tests. Without tmux they fail, they do not skip, and
//! with `CI` set a missing tmux fails even a run of the tests that are not ignored.
//! `GYRE_UPDATE_DOCS=1` rewrites `docs/repl.md` from the first test's screens and
//! `docs/repl-session.cast` / `.txt` from the recorded colour session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use gyre_e2e::tmux::{SESSION, Tmux, WAIT};
use gyre_e2e::{Sandbox, TEST_API_KEY, gyre_binary, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::json;

/// The REPL's own waits, on top of the shared driver.
pub(crate) trait ReplScreen {
    /// Waits until the REPL is idle at an empty input box (so typing is not early).
    fn wait_for_prompt(&self) -> String;
}

impl ReplScreen for Tmux {
    fn wait_for_prompt(&self) -> String {
        self.wait_until("the empty input box", |pane| {
            box_text(pane).as_deref() == Some("") && !busy(pane)
        })
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The input box's first text row (`│> text   │` → `text`), if a box is on screen.
pub(crate) fn box_text(pane: &str) -> Option<String> {
    pane.lines().find_map(|l| {
        let inner = l.strip_prefix("│>")?;
        Some(inner.trim_end_matches(['│', ' ']).trim_start().to_owned())
    })
}

/// A turn is running: the spinner says so.
fn busy(pane: &str) -> bool {
    pane.contains("esc to interrupt") || pane.contains("╭─") && pane.contains(" › y) Yes")
}

/// Bold, dim or a foreground colour on screen.
fn has_styles(styled: &str) -> bool {
    [
        "\x1b[1m",
        "\x1b[2m",
        "\x1b[38;5;",
        "\x1b[31m",
        "\x1b[32m",
        "\x1b[33m",
    ]
    .iter()
    .any(|code| styled.contains(code))
}

/// In CI (`CI` set, as CI services do) a missing tmux fails the run even when only
/// the tests that are not ignored run: the terminal tests must not go unseen there.
#[test]
fn in_ci_tmux_is_installed_for_the_terminal_tests() {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !ci || Tmux::installed(),
        "CI is set but tmux is not installed: apt-get install tmux (cargo xtask ci does this)"
    );
}

/// `gyre` (no arguments) in a tmux pane, in the sandbox's project, against `server`,
/// with `NO_COLOR=1`; the pane's shell prints how gyre exited.
pub(crate) fn start_gyre(sandbox: &Sandbox, server: &TestServer) -> Tmux {
    start_gyre_with(sandbox, server, false, &[])
}

pub(crate) fn start_gyre_with(
    sandbox: &Sandbox,
    server: &TestServer,
    colour: bool,
    args: &[&str],
) -> Tmux {
    start_gyre_with_env(sandbox, server, colour, args, &[])
}

/// [`start_gyre_with`], with `extra` variables in gyre's environment.
pub(crate) fn start_gyre_with_env(
    sandbox: &Sandbox,
    server: &TestServer,
    colour: bool,
    args: &[&str],
    extra: &[(&str, &str)],
) -> Tmux {
    let gyre = gyre_binary().unwrap();
    let mut env = vec![
        ("PATH", std::env::var("PATH").unwrap_or_default()),
        ("HOME", sandbox.home().display().to_string()),
        ("GYRE_HOME", sandbox.home().display().to_string()),
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", TEST_API_KEY.to_owned()),
        ("NO_COLOR", if colour { "" } else { "1" }.to_owned()),
        ("TERM", "tmux-256color".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    let mut command = format!(
        "cd {} && env -i",
        shell_quote(&sandbox.project().display().to_string())
    );
    for (k, v) in &env {
        command.push_str(&format!(" {k}={}", shell_quote(v)));
    }
    command.push(' ');
    command.push_str(&shell_quote(&gyre.display().to_string()));
    for arg in args {
        command.push(' ');
        command.push_str(&shell_quote(arg));
    }
    // The pane's shell reaps gyre and reports how it ended: tmux itself sometimes
    // leaves an exited pane process unreaped, never marking the pane dead.
    command.push_str("; echo \"gyre exited with status $?\"");
    let tmux = Tmux::start(&sandbox.home(), &command);
    tmux.wait_for("/help for commands");
    tmux.wait_for_prompt();
    tmux
}

/// The text of the newest user message the server received.
pub(crate) fn last_prompt(server: &TestServer) -> String {
    let requests = server.requests();
    let messages = requests.last().unwrap().body["messages"].clone();
    let last = messages.as_array().and_then(|m| m.last()).unwrap().clone();
    last["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn repl_streams_asks_interrupts_reports_cost_and_exits() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("I'll write the greeting first.\n")
            .and_tool_use(
                "Bash",
                json!({"command": "printf 'hello\\nfrom\\nthe\\nshell\\nin\\nsix\\n' | tee greeting.txt"}),
            )
            // Every turn scripts its input tokens (unscripted, the testkit would report
            // the request's size): 500 + 600 + 100 = the 1,200 /cost shows.
            .with_tokens(500, 0)
            .delay_per_event(Duration::from_millis(10)),
        Turn::text(
            "## Done\n\nThe command printed **hello** and wrote `greeting.txt`:\n\n\
             - one file\n- four lines\n\n```rust\nlet greeting = \"hello\";\n```\n",
        )
        .with_tokens(600, 80)
        .delay_per_event(Duration::from_millis(10)),
        Turn::tool_use("Bash", json!({"command": "sleep 30"})).with_tokens(100, 0),
        Turn::text("unused"),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);

    tmux.type_line("say hello into a file");
    let pane = tmux.wait_for(" › y) Yes");
    let asking = pane.clone();
    assert!(pane.contains("? Bash printf"), "{pane}");
    assert!(pane.contains("I'll write the greeting first."), "{pane}");
    // One key answers.
    tmux.key("y");
    tmux.wait_for("- four lines");
    let pane = tmux.wait_for_prompt();
    assert!(pane.contains("● Bash printf"), "{pane}");
    assert!(pane.contains("  ? allowed once"), "{pane}");
    assert!(pane.contains("  ⎿ exit 0 · 6 lines"), "{pane}");
    // Bash output folded to a few lines, Ctrl+O shows it whole under its call.
    assert!(
        pane.contains("    the\n    … +3 lines (ctrl+o to expand)"),
        "{pane}"
    );
    assert!(!pane.contains("    shell"), "{pane}");
    assert!(pane.contains("## Done"), "{pane}");
    assert!(pane.contains("let greeting = \"hello\";"), "{pane}");
    tmux.key("C-o");
    let pane = tmux.wait_for("    six");
    assert!(
        pane.contains("· all 6 lines of its output\n    hello\n    from\n    the\n    shell\n"),
        "{pane}"
    );
    // Nothing else is folded.
    tmux.key("C-o");
    tmux.wait_for("No folded Bash output left to expand");
    assert_eq!(
        std::fs::read_to_string(sandbox.project().join("greeting.txt")).unwrap(),
        "hello\nfrom\nthe\nshell\nin\nsix\n"
    );

    // A line ending in `\` goes on at the next one.
    tmux.type_line("now wait \\");
    tmux.type_line("for a while");
    let pane = tmux.wait_for("? Bash sleep 30");
    assert!(pane.contains("> now wait\n  for a while"), "{pane}");
    assert_eq!(last_prompt(&server), "now wait \nfor a while");
    // Arrows and Enter answer too: down to "don't ask again this session".
    tmux.key("Down");
    tmux.key("Enter");
    tmux.wait_for("Running Bash");
    let interrupted_at = Instant::now();
    tmux.key("Escape");
    tmux.wait_for("Interrupted · tell gyre what to do instead");
    let pane = tmux.wait_for_prompt();
    assert!(interrupted_at.elapsed() < Duration::from_secs(10));
    assert!(
        pane.contains("  ? allowed for this session: Bash(sleep 30)"),
        "{pane}"
    );
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
    // The viewport is gone: the shell's next line follows the scrollback.
    assert!(!pane.contains("╭─"), "{pane}");

    let history = std::fs::read_to_string(sandbox.home().join("history")).unwrap();
    assert!(history.contains("say hello into a file"), "{history}");
    assert!(history.contains("/cost"), "{history}");

    if std::env::var_os("GYRE_UPDATE_DOCS").is_some() {
        write_docs(&asking, &tmux.capture_all(), &sandbox.project());
    }
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn streamed_text_shows_before_its_line_is_complete_and_enter_queues_the_next_message() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(
        Script::new([
            Turn::text("The first words arrive early and the paragraph ends much later with FINIS")
                .delay_per_event(Duration::from_millis(250)),
            Turn::text("queued answer"),
        ])
        .with_chunk_chars(4),
    )
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("tell me");
    // The start of the one-line answer is on screen while its end is still to come.
    let pane = tmux.wait_for("The first words");
    assert!(!pane.contains("FINIS"), "{pane}");
    // Typed ahead during the turn, Enter queues the message until the turn ends.
    tmux.type_line("and then?");
    let pane = tmux.wait_for("Queued, sent when this turn ends: and then?");
    assert_eq!(server.request_count(), 1, "{pane}");
    tmux.wait_for("FINIS");
    tmux.wait_for("queued answer");
    tmux.wait_for_prompt();
    assert_eq!(server.request_count(), 2);
    assert_eq!(last_prompt(&server), "and then?");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn the_input_box_edits_lines_pastes_recalls_history_and_completes_commands() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);

    // Ctrl+J starts a second line; Enter sends both.
    tmux.run(&["send-keys", "-t", SESSION, "-l", "first line"]);
    tmux.key("C-j");
    tmux.run(&["send-keys", "-t", SESSION, "-l", "second line"]);
    let pane = tmux.wait_for("second line");
    assert!(pane.contains("│> first line"), "{pane}");
    assert!(pane.contains("│  second line"), "{pane}");
    // ↑ in a box of several lines moves to the line above, to edit it.
    tmux.key("Up");
    tmux.key("End");
    tmux.run(&["send-keys", "-t", SESSION, "-l", "!"]);
    tmux.wait_for("│> first line!");
    tmux.key("Enter");
    tmux.wait_for("one");
    tmux.wait_for_prompt();
    assert_eq!(last_prompt(&server), "first line!\nsecond line");

    // A paste keeps its newlines and is not sent by them.
    tmux.paste("pasted\ntext");
    tmux.wait_for("│  text");
    tmux.key("Enter");
    tmux.wait_for("two");
    tmux.wait_for_prompt();
    assert_eq!(last_prompt(&server), "pasted\ntext");

    // ↑ brings the last entry back; Ctrl+R finds an older one.
    tmux.key("Up");
    tmux.wait_until("the last entry", |p| {
        box_text(p).as_deref() == Some("pasted")
    });
    tmux.key("C-c");
    tmux.wait_until("an empty box", |p| box_text(p).as_deref() == Some(""));
    tmux.key("C-r");
    tmux.run(&["send-keys", "-t", SESSION, "-l", "first"]);
    let pane = tmux.wait_for("search history: first");
    assert_eq!(box_text(&pane).as_deref(), Some("first line!"), "{pane}");
    tmux.key("Enter");
    tmux.key("Enter");
    tmux.wait_for("three");
    tmux.wait_for_prompt();
    assert_eq!(last_prompt(&server), "first line!\nsecond line");

    // Tab completes a slash command; the candidates are listed under the box.
    tmux.run(&["send-keys", "-t", SESSION, "-l", "/co"]);
    let pane = tmux.wait_for("/compact  /cost");
    assert_eq!(box_text(&pane).as_deref(), Some("/co"), "{pane}");
    tmux.run(&["send-keys", "-t", SESSION, "-l", "s"]);
    tmux.key("Tab");
    tmux.wait_until("the completed command", |p| {
        box_text(p).as_deref() == Some("/cost")
    });
    tmux.key("Enter");
    tmux.wait_for("Total cost:");
    tmux.wait_for_prompt();

    // `quit` alone leaves.
    tmux.type_line("quit");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
    assert_eq!(server.request_count(), 3);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn esc_and_ctrl_c_each_interrupt_an_answer_still_streaming() {
    let sandbox = Sandbox::new().unwrap();
    // Each answer stops mid-stream and never ends on its own.
    let server = TestServer::spawn(Script::new([
        Turn::text("The first answer starts and then").stall_forever(5),
        Turn::text("The second answer starts and then").stall_forever(5),
        Turn::text("The third answer, whole."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    for (prompt, shown, key) in [
        ("first", "The first answer", "Escape"),
        ("second", "The second answer", "C-c"),
    ] {
        tmux.type_line(prompt);
        tmux.wait_for(shown);
        tmux.key(key);
        let pane = tmux.wait_until("the interruption", |pane| {
            pane.matches("Interrupted · tell gyre what to do instead")
                .count()
                == usize::from(prompt == "second") + 1
        });
        assert!(pane.contains(shown), "{pane}");
        tmux.wait_for_prompt();
    }
    // The session goes on.
    tmux.type_line("third");
    tmux.wait_for("The third answer, whole.");
    tmux.wait_for_prompt();
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn a_long_paste_keeps_its_last_line_in_sight_and_is_sent_whole() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("Read all 60.")])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    let text: Vec<String> = (1..=60).map(|n| format!("pasted line {n}")).collect();
    tmux.paste(&text.join("\n"));
    let pane = tmux.wait_for("│  pasted line 60");
    // Its first lines scrolled out of the box.
    assert!(
        !pane.lines().any(|l| l.starts_with("│> pasted line 1 ")),
        "{pane}"
    );
    tmux.key("Enter");
    tmux.wait_for("Read all 60.");
    tmux.wait_for_prompt();
    assert_eq!(last_prompt(&server), text.join("\n"));
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn quitting_before_typing_leaves_no_empty_session() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    assert!(!has_styles(&tmux.capture_styled()), "NO_COLOR is set");
    tmux.type_line("exit");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
    assert_eq!(server.request_count(), 0);
    assert!(
        sandbox.transcripts().is_empty(),
        "{:?}",
        sandbox.transcripts()
    );
    let sessions = run(sandbox.gyre(&server).unwrap().arg("sessions")).unwrap();
    assert_eq!(sessions.code, Some(0), "{}", sessions.stderr);
    assert!(
        sessions.stdout.starts_with("No sessions in "),
        "{}",
        sessions.stdout
    );
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn always_saves_the_rule_edits_show_a_diff_and_the_status_line_counts_down_retries() {
    let sandbox = Sandbox::new().unwrap();
    let file = sandbox.write("notes.txt", "alpha\nbeta\ngamma\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::http_error(529)
            .with_header("retry-after", "3")
            .with_body(json!({"type": "error", "error": {
                "type": "overloaded_error",
                "message": "Overloaded: more requests than the service can take right now, in every region",
            }})),
        Turn::tool_use("Read", json!({"file_path": file})).with_tokens(30_000, 20),
        Turn::tool_use(
            "Edit",
            json!({"file_path": file, "old_string": "beta", "new_string": "BETA"}),
        ),
        Turn::tool_use("Bash", json!({"command": "ls"})),
        Turn::text("Edited and listed."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("shout beta");
    // The retry countdown with the whole reason, not cut to fit.
    let pane = tmux.wait_for("retrying in");
    let words = pane.split_whitespace().collect::<Vec<_>>().join(" ");
    let reason = words
        .split_once("The API is overloaded")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no reason:\n{pane}"));
    assert!(
        reason.contains(
            " (529): Overloaded: more requests than the service can take right now, in every \
             region · retrying in "
        ),
        "{pane}"
    );
    // gyre is about to retry: the line does not tell the user to.
    assert!(!reason.contains("Try again"), "{pane}");
    assert!(reason.contains("(attempt 1/10)"), "{pane}");
    // The Edit's question shows its diff; `s` allows and saves the rule.
    // The Edit's diff is on screen above its question, once, numbered in the file.
    let pane = tmux.wait_for("? Edit notes.txt");
    assert!(
        pane.contains("    1   alpha\n    2 - beta\n    2 + BETA\n    3   gamma\n"),
        "{pane}"
    );
    assert_eq!(pane.matches("- beta").count(), 1, "{pane}");
    tmux.key("s");
    let pane = tmux.wait_for("? Bash ls");
    assert!(
        pane.contains("always allowed in this folder: Edit(//"),
        "{pane}"
    );
    // "No" stops the turn and waits for the user's words; they go to the model with the
    // refusal, in the next request.
    let requests = server.request_count();
    tmux.key("n");
    let pane = tmux.wait_for("Interrupted · tell gyre what to do instead");
    assert!(pane.contains("  ? denied"), "{pane}");
    tmux.wait_for_prompt();
    assert_eq!(
        server.request_count(),
        requests,
        "the refusal waited for the user"
    );
    tmux.type_line("list with dir instead");
    tmux.wait_for("Edited and listed.");
    let pane = tmux.wait_for_prompt();
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("The user denied permission to use Bash"),
        "{last}"
    );
    assert!(last.contains("list with dir instead"), "{last}");
    // The status line: model, mode, context use of the last request in %, cost.
    let status = pane.lines().last().unwrap();
    let parts: Vec<&str> = status.split(" · ").collect();
    assert_eq!(
        parts[..2],
        ["claude-sonnet-4-5", "default mode"],
        "{status}"
    );
    let percent = parts[2].strip_prefix("context ").unwrap().strip_suffix('%');
    assert!(percent.unwrap().parse::<u8>().is_ok(), "{status}");
    assert!(
        parts[3].strip_prefix('$').unwrap().parse::<f64>().unwrap() > 0.0,
        "{status}"
    );
    // Saved in the user's config for this folder, scoped to the project: a bare `Edit`
    // would allow edits anywhere on disk. Nothing is written into the project.
    let saved = std::fs::read_to_string(sandbox.home().join("folder-rules.json")).unwrap();
    let saved: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let project = sandbox.project().canonicalize().unwrap();
    let project = project.to_str().unwrap();
    assert_eq!(
        saved["allow"][project],
        json!([format!("Edit(/{project}/**)")]),
        "{saved}"
    );
    assert!(!sandbox.project().join(".gyre").exists());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "alpha\nBETA\ngamma\n"
    );
    tmux.key("C-d");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn a_long_command_is_shown_whole_above_its_question_and_the_answers_stay_on_screen() {
    let sandbox = Sandbox::new().unwrap();
    let script: String = (1..=30).map(|n| format!("print({n})\n")).collect();
    let command = format!("python3 - <<'EOF'\n{script}EOF");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": command})),
        Turn::text("Not run."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("count to thirty");
    let pane = tmux.wait_for(" › y) Yes");
    for shown in [
        "    print(29)",
        "    EOF",
        "(the whole command is above)",
        "   n) No, tell gyre what to do instead",
    ] {
        assert!(pane.contains(shown), "{shown:?} missing:\n{pane}");
    }
    tmux.key("n");
    tmux.wait_for("Interrupted · tell gyre what to do instead");
    let pane = tmux.wait_for_prompt();
    assert!(pane.contains("  ? denied"), "{pane}");
    assert_eq!(
        server.request_count(),
        1,
        "the refusal waits for the user's words"
    );
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn the_input_box_follows_the_last_line_and_sits_on_the_bottom_rows_of_a_full_screen() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    // Every row of the pane (capture() drops the blank ones at the end).
    let rows = || -> Vec<String> {
        tmux.run(&["capture-pane", "-p", "-t", SESSION])
            .lines()
            .map(str::to_owned)
            .collect()
    };
    // On an empty screen: right under the banner, nothing under the status line.
    let screen = rows();
    assert!(screen[3].starts_with("╭─"), "{screen:#?}");
    assert!(screen[4].starts_with("│>"), "{screen:#?}");
    assert_eq!(screen[6], "claude-sonnet-4-5 · default mode", "{screen:#?}");
    // Once the output fills the screen, the box and status line are its last rows.
    for _ in 0..3 {
        tmux.type_line("/help");
        tmux.wait_for_prompt();
    }
    let screen = rows();
    assert_eq!(screen.len(), 50, "{screen:#?}");
    assert!(screen[46].starts_with("╭─"), "{screen:#?}");
    assert!(screen[47].starts_with("│>"), "{screen:#?}");
    assert!(screen[48].starts_with("╰─"), "{screen:#?}");
    assert_eq!(
        screen[49], "claude-sonnet-4-5 · default mode",
        "{screen:#?}"
    );
    // The output above ends right over it.
    assert!(
        screen[44].contains("no and type what to change"),
        "{screen:#?}"
    );
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn after_the_terminal_narrows_and_widens_the_screen_shows_one_input_box_and_the_answer() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text(
        "A Rust project; README.md is the place to start reading it.",
    )]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("what is in this folder?");
    tmux.wait_for("the place to start reading it.");
    tmux.wait_for_prompt();
    let boxes = |pane: &str| pane.lines().filter(|l| l.starts_with('╭')).count();
    let prompts = |pane: &str| pane.lines().filter(|l| l.starts_with("│>")).count();
    for width in [40_usize, 100] {
        // tmux rewraps the rows it shows, as most terminals do.
        let columns = width.to_string();
        tmux.run(&["resize-window", "-t", SESSION, "-x", &columns, "-y", "50"]);
        let pane = tmux.wait_until(&format!("one input box at width {width}"), |pane| {
            boxes(pane) == 1
                && pane.lines().all(|l| l.chars().count() <= width)
                && pane
                    .lines()
                    .any(|l| l.starts_with('╭') && l.chars().count() == width)
        });
        assert_eq!(prompts(&pane), 1, "{pane}");
        assert!(
            pane.lines()
                .all(|l| !l.trim_start().starts_with('╰') || l.starts_with('╰')),
            "{pane}"
        );
        let answer: String = pane.lines().collect::<Vec<_>>().join(" ");
        assert!(
            answer.contains("the place to start") && answer.contains("> what is in this folder?"),
            "{pane}"
        );
    }
    // The input box still works at the new size.
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn without_no_color_the_ui_is_styled_and_a_double_ctrl_c_quits() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([])).unwrap();
    let tmux = start_gyre_with(&sandbox, &server, true, &[]);
    let styled = tmux.capture_styled();
    assert!(has_styles(&styled), "{styled}");
    tmux.key("C-c");
    tmux.wait_for("Press Ctrl+C again to exit");
    tmux.key("C-c");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn a_prompt_on_the_command_line_is_sent_first() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("hello to you")])).unwrap();
    let tmux = start_gyre_with(&sandbox, &server, false, &["hello there"]);
    let pane = tmux.wait_for("hello to you");
    assert!(pane.contains("> hello there"), "{pane}");
    tmux.wait_for_prompt();
    assert_eq!(last_prompt(&server), "hello there");
    // It is in the history like a typed one.
    tmux.key("Up");
    tmux.wait_until("the entry", |p| {
        box_text(p).as_deref() == Some("hello there")
    });
    tmux.key("C-c");
    tmux.key("C-d");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
    assert_eq!(sandbox.transcripts().len(), 1);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn shift_tab_cycles_the_permission_mode_and_the_next_call_follows_it() {
    let sandbox = Sandbox::new().unwrap();
    let note = sandbox.project().join("note.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Write", json!({"file_path": note, "content": "hi\n"})),
        Turn::text("Wrote the note."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.key("BTab");
    tmux.wait_for("claude-sonnet-4-5 · acceptEdits mode");
    // acceptEdits writes without asking.
    tmux.type_line("write a note");
    tmux.wait_for("Wrote the note.");
    let pane = tmux.wait_for_prompt();
    assert!(!pane.contains("needs permission"), "{pane}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "hi\n");
    // The status line says which mode is on.
    let status = pane.lines().last().unwrap();
    assert!(
        status.starts_with("claude-sonnet-4-5 · acceptEdits mode · "),
        "{status}"
    );
    // Switching again keeps the model, the context and the cost on the status line.
    tmux.key("BTab");
    let pane = tmux.wait_for("claude-sonnet-4-5 · plan mode");
    let status = pane.lines().last().unwrap();
    let parts: Vec<&str> = status.split(" · ").collect();
    assert_eq!(parts[..2], ["claude-sonnet-4-5", "plan mode"], "{status}");
    assert!(parts[2].starts_with("context "), "{status}");
    assert!(parts[3].starts_with('$'), "{status}");
    tmux.key("BTab");
    tmux.wait_for("claude-sonnet-4-5 · default mode");
    tmux.key("C-d");
    let pane = tmux.wait_for("gyre exited with status");
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn todo_write_shows_as_a_checklist() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "TodoWrite",
            json!({"todos": [
                {"content": "Read the parser", "status": "completed", "activeForm": "Reading the parser"},
                {"content": "Fix the bug", "status": "in_progress", "activeForm": "Fixing the bug"},
                {"content": "Run the tests", "status": "pending", "activeForm": "Running the tests"}
            ]}),
        ),
        Turn::text("Planned."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("plan the fix");
    let pane = tmux.wait_for("Planned.");
    for line in ["☒ Read the parser", "◼ Fixing the bug", "☐ Run the tests"] {
        assert!(pane.contains(line), "{line:?} missing:\n{pane}");
    }
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn three_parallel_sub_agents_each_get_a_live_line_then_a_one_line_outcome() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "a note\n").unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "find a", "prompt": "look for a"}),
        )
        .and_tool_use(
            "Agent",
            json!({"description": "find b", "prompt": "look for b"}),
        )
        .and_tool_use(
            "Agent",
            json!({"description": "find c", "prompt": "look for c"}),
        ),
        // Each sub-agent globs first (whichever asks first gets the first of these).
        Turn::tool_use("Glob", json!({"pattern": "*.txt"})).with_tokens(1500, 20),
        Turn::tool_use("Glob", json!({"pattern": "*.txt"})).with_tokens(1500, 20),
        Turn::tool_use("Glob", json!({"pattern": "*.txt"})).with_tokens(1500, 20),
        // Then two answer and the third fails; the first answer waits, so the screen
        // holds the live lines long enough to be read.
        Turn::text("found a")
            .with_tokens(1600, 30)
            .delay(Duration::from_secs(4)),
        Turn::text("found b").with_tokens(1600, 30),
        Turn::http_error(400),
        Turn::text("Two found, one failed."),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("look for a, b and c");
    // While they run: one live line per sub-agent, with its newest tool call.
    let pane = tmux.wait_until("three live sub-agent lines", |pane| {
        ["find a", "find b", "find c"]
            .iter()
            .all(|d| pane.lines().any(|l| l.starts_with(&format!("  ⎿ {d} "))))
            && pane.contains("Glob *.txt · 1 tool use")
    });
    assert!(pane.contains("● Agent find a"), "{pane}");
    tmux.wait_for("Two found, one failed.");
    let pane = tmux.wait_for_prompt();
    // Done: each collapses to one outcome line; the failure says why.
    let outcomes: Vec<&str> = pane
        .lines()
        .filter(|l| l.starts_with("  ⎿ ") && l.contains("Agent find "))
        .collect();
    assert_eq!(outcomes.len(), 3, "{pane}");
    let done = outcomes
        .iter()
        .filter(|l| l.contains(": Done (1 tool use · 1.6k tokens · "))
        .count();
    assert_eq!(done, 2, "{pane}");
    let failed = outcomes
        .iter()
        .filter(|l| l.starts_with("  ⎿ ✗ Agent find ") && l.contains(": Failed after 1 tool use: "))
        .count();
    assert_eq!(failed, 1, "{pane}");
    // No live line is left behind.
    assert!(!pane.lines().any(|l| l.starts_with("  ⎿ find ")), "{pane}");
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn esc_stops_a_running_sub_agent_and_its_line_says_interrupted() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Agent",
            json!({"description": "search long", "prompt": "search"}),
        ),
        Turn::tool_use("Glob", json!({"pattern": "*"})).with_tokens(900, 10),
        // The sub-agent's second request never ends on its own.
        Turn::text("never").stall_forever(1),
        Turn::text("unused"),
    ]))
    .unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("search for a long time");
    tmux.wait_for("  ⎿ search long · Glob * · 1 tool use · 910 tokens");
    tmux.key("Escape");
    tmux.wait_for("Interrupted · tell gyre what to do instead");
    let pane = tmux.wait_for_prompt();
    assert!(
        pane.contains("  ⎿ ✗ Interrupted after 1 tool use"),
        "{pane}"
    );
    assert!(!pane.contains("  ⎿ search long · "), "{pane}");
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

/// Whether the process `pid` still runs (a zombie waiting for its reaper does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|rest| !rest.starts_with('Z'))
    })
}

/// Waits until `pid` is gone (it was sent SIGKILL); fails after [`WAIT`].
fn wait_dead(pid: u32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(start.elapsed() < WAIT, "process {pid} outlived its kill");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pid_in(path: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(start.elapsed() < WAIT, "no pid in {}", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn bashes_lists_background_shells_kills_one_and_exit_kills_the_rest() {
    let sandbox = Sandbox::new().unwrap();
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "Bash",
            json!({"command": "echo $$ > one.pid; exec sleep 300", "run_in_background": true}),
        )
        .and_tool_use(
            "Bash",
            json!({"command": "echo $$ > two.pid; exec sleep 301", "run_in_background": true}),
        ),
        Turn::text("Both servers are up."),
    ]))
    .unwrap();
    let tmux = start_gyre_with(&sandbox, &server, false, &["--allowedTools", "Bash"]);
    tmux.type_line("start two servers");
    tmux.wait_for("Both servers are up.");
    let pane = tmux.wait_until("the status line's count", |pane| {
        pane.contains("2 background shells (/bashes)")
    });
    assert!(box_text(&pane).is_some(), "{pane}");
    let one = pid_in(&sandbox.project().join("one.pid"));
    let two = pid_in(&sandbox.project().join("two.pid"));
    assert!(alive(one) && alive(two));

    // `/bashes` lists them in place of the input box; `k` kills the selected one.
    tmux.type_line("/bashes");
    let pane = tmux.wait_for("k kills the selected shell");
    let row = |pane: &str, id: &str| {
        pane.lines()
            .find(|l| l.starts_with('│') && l.contains(&format!(" {id} ")))
            .unwrap_or_else(|| panic!("no {id} row:\n{pane}"))
            .to_owned()
    };
    assert!(
        row(&pane, "bash_1").contains("› bash_1   running "),
        "{pane}"
    );
    assert!(
        row(&pane, "bash_1").contains("echo $$ > one.pid; exec sleep 300"),
        "{pane}"
    );
    assert!(
        row(&pane, "bash_2").contains("echo $$ > two.pid; exec sleep 301"),
        "{pane}"
    );
    // The runtimes count while the list is open, with no key pressed.
    let before = row(&pane, "bash_2");
    tmux.wait_until("bash_2's runtime to change", |pane| {
        pane.lines()
            .find(|l| l.starts_with('│') && l.contains(" bash_2 "))
            .is_some_and(|now| now != before)
    });
    tmux.key("k");
    // The outcome line goes into the scrollback first, then the list is drawn again under
    // it: wait for both.
    let pane = tmux.wait_until("the kill's line and the list showing it", |pane| {
        pane.contains("Killed bash_1 (echo $$ > one.pid; exec sleep 300)")
            && pane
                .lines()
                .any(|l| l.starts_with('│') && l.contains("bash_1   killed "))
    });
    assert!(row(&pane, "bash_1").contains("bash_1   killed "), "{pane}");
    wait_dead(one);
    assert!(alive(two));
    tmux.key("Escape");
    let pane = tmux.wait_for_prompt();
    assert!(pane.contains("1 background shell (/bashes)"), "{pane}");
    // By id too.
    tmux.type_line("/bashes kill bash_1");
    tmux.wait_for("Shell bash_1 is not running (status: killed)");
    tmux.wait_for_prompt();

    // The rest stop with gyre.
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
    wait_dead(two);
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn a_plan_rejected_with_feedback_goes_back_to_the_model_and_approved_switches_to_accept_edits() {
    let sandbox = Sandbox::new().unwrap();
    let note = sandbox.project().join("note.txt");
    let server = TestServer::spawn(Script::new([
        Turn::tool_use(
            "ExitPlanMode",
            json!({"plan": "## Plan\n\n1. Write the note\n2. Check it"}),
        ),
        Turn::tool_use(
            "ExitPlanMode",
            json!({"plan": "## Plan\n\n1. Write the note in plain words\n2. Check it"}),
        ),
        Turn::tool_use("Write", json!({"file_path": note, "content": "hi\n"})),
        Turn::text("Wrote the note."),
    ]))
    .unwrap();
    let tmux = start_gyre_with(&sandbox, &server, false, &["--permission-mode", "plan"]);
    tmux.type_line("plan a note");
    let pane = tmux.wait_for(" › 1) Yes, and auto-accept edits");
    assert!(pane.contains("Here is gyre's plan:"), "{pane}");
    assert!(pane.contains("│ 1. Write the note"), "{pane}");
    assert!(
        pane.contains("2) Yes, and manually approve edits"),
        "{pane}"
    );
    assert!(pane.contains("3) No, keep planning"), "{pane}");

    // No: the feedback is typed in the box and goes back as the tool result.
    tmux.key("3");
    tmux.wait_for("What should gyre change in the plan?");
    tmux.run(&["send-keys", "-t", SESSION, "-l", "use plain words"]);
    tmux.wait_for("> use plain words");
    tmux.key("Enter");
    tmux.wait_for("? keep planning: use plain words");

    // The revised plan: yes, with edits auto-accepted.
    let pane = tmux.wait_until("the second plan", |pane| {
        pane.contains("│ 1. Write the note in plain words") && pane.contains(" › 1) Yes")
    });
    assert!(pane.contains("plan mode"), "{pane}");
    tmux.key("1");
    tmux.wait_for("Wrote the note.");
    let pane = tmux.wait_for_prompt();
    assert!(
        pane.contains("? plan approved · edits are auto-accepted"),
        "{pane}"
    );
    // acceptEdits wrote without asking, and the status line says so.
    assert!(!pane.contains("needs permission"), "{pane}");
    assert!(pane.contains("acceptEdits mode"), "{pane}");
    assert_eq!(std::fs::read_to_string(&note).unwrap(), "hi\n");

    let requests = server.requests();
    let rejected = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]
        .clone();
    assert_eq!(rejected["type"], "tool_result", "{rejected}");
    assert_eq!(rejected["is_error"], true, "{rejected}");
    assert!(
        rejected["content"]
            .to_string()
            .contains("the user said:\\nuse plain words"),
        "{rejected}"
    );
    let approved = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["content"][0]
        .clone();
    assert!(
        approved["content"]
            .to_string()
            .contains("User has approved your plan"),
        "{approved}"
    );
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status 0");
}

/// A screen recording as asciinema's cast format (v2): the styled screen each time it
/// changed while the test waited, with the time since the start.
struct Recording {
    started: Instant,
    /// Replaces the sandbox's paths in what is recorded.
    project: String,
    frames: Vec<(f64, String)>,
}

/// The longest pause a replay keeps (a slow machine's waits are not worth watching).
const MAX_PAUSE: f64 = 1.5;
/// The shortest step between frames (keys typed by the test come faster than a
/// person's).
const MIN_STEP: f64 = 0.06;

impl Recording {
    fn new(project: &Path) -> Self {
        Self {
            started: Instant::now(),
            project: project.display().to_string(),
            frames: Vec::new(),
        }
    }

    /// Records the screen if it changed; the screen as plain text.
    fn frame(&mut self, tmux: &Tmux) -> String {
        let screen: Vec<String> = tmux
            .capture_styled()
            .lines()
            .map(|row| self.hide_project(row))
            .collect();
        let screen = screen.join("\n");
        let plain = without_escapes(&screen).trim_end().to_owned();
        if self.frames.last().is_some_and(|(_, last)| *last == screen) {
            return plain;
        }
        let now = self.started.elapsed().as_secs_f64();
        let at = match self.frames.last() {
            Some((last, _)) => last + (now - last).clamp(MIN_STEP, MAX_PAUSE),
            None => 0.0,
        };
        self.frames.push((at, screen));
        plain
    }

    /// `row` with the sandbox's path shown as `~/project`, a box's right border kept
    /// where it was (and the test shell's last word left out).
    fn hide_project(&self, row: &str) -> String {
        // The test's shell saying how gyre ended is no part of the session.
        if row.starts_with("gyre exited with status") {
            return String::new();
        }
        let n = row.matches(&self.project).count();
        let mut out = row.replace(&self.project, "~/project");
        if n > 0
            && let Some(border) = out.rfind('│')
            && border > 0
        {
            let lost = n * (self.project.chars().count() - "~/project".chars().count());
            out.insert_str(border, &" ".repeat(lost));
        }
        out
    }

    /// Records the screen until `text` is on it; the plain screen.
    fn wait_for(&mut self, tmux: &Tmux, text: &str) -> String {
        self.wait_until(tmux, text, |pane| pane.contains(text))
    }

    /// Records the screen until `done` holds for it; the plain screen.
    fn wait_until(&mut self, tmux: &Tmux, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            // What is checked is what was recorded.
            let pane = self.frame(tmux);
            if done(&pane) {
                return pane;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}; the screen:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` a key at a time, as a person would, then Enter.
    fn type_line(&mut self, tmux: &Tmux, text: &str) {
        for c in text.chars() {
            tmux.run(&["send-keys", "-t", SESSION, "-l", &c.to_string()]);
            self.frame(tmux);
        }
        tmux.key("Enter");
    }

    /// The cast: a header line, then one `[time, "o", data]` line per frame, each
    /// frame rewriting the rows that changed since the one before.
    fn cast(&self) -> String {
        let header = json!({
            "version": 2,
            "width": 100,
            "height": 50,
            "title": "gyre's REPL against gyre-testkit (recorded by tests/tests/e2e/repl_tmux.rs)",
            "env": {"TERM": "tmux-256color"}
        });
        let mut out = format!("{header}\n");
        let mut before: Vec<&str> = Vec::new();
        for (at, screen) in &self.frames {
            let rows: Vec<&str> = screen.lines().collect();
            let mut data = if before.is_empty() {
                "\x1b[H\x1b[2J".to_owned()
            } else {
                String::new()
            };
            for i in 0..rows.len().max(before.len()) {
                let row = rows.get(i).copied().unwrap_or_default();
                if before.get(i).copied().unwrap_or_default() != row || before.is_empty() {
                    data.push_str(&format!("\x1b[{};1H{row}\x1b[0m\x1b[K", i + 1));
                }
            }
            out.push_str(&json!([(at * 1000.0).round() / 1000.0, "o", data]).to_string());
            out.push('\n');
            before = rows;
        }
        out
    }
}

/// Bold and the foreground colour (of the basic eight) text is drawn in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sgr {
    bold: bool,
    fg: Option<u8>,
}

impl Sgr {
    /// Applies one `ESC [ … m` sequence's parameters.
    fn apply(&mut self, params: &str) {
        let mut params = params.split(';');
        while let Some(p) = params.next() {
            match p {
                "" | "0" => *self = Self::default(),
                "1" => self.bold = true,
                "22" => self.bold = false,
                "39" => self.fg = None,
                // 38;5;n (256 colours) or 38;2;r;g;b.
                "38" => {
                    self.fg = match params.next() {
                        Some("5") => params.next().and_then(|n| n.parse().ok()),
                        _ => None,
                    };
                }
                "48" => {
                    let skip = if params.next() == Some("5") { 1 } else { 3 };
                    params.by_ref().take(skip).for_each(drop);
                }
                colour if colour.len() == 2 && colour.starts_with('3') => {
                    self.fg = colour[1..].parse().ok();
                }
                _ => {}
            }
        }
    }
}

/// The style `at` is drawn in, in the row of the styled screen that reads `line`.
fn style_at(styled: &str, line: &str, at: &str) -> Sgr {
    let Some(row) = styled
        .lines()
        .find(|row| without_escapes(row).trim_end() == line)
    else {
        panic!("no row {line:?} on the screen:\n{styled}");
    };
    let plain_at = line.find(at).unwrap();
    let mut sgr = Sgr::default();
    let mut plain = 0;
    let mut chars = row.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            let mut sequence = String::new();
            for d in chars.by_ref() {
                sequence.push(d);
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            if let Some(params) = sequence.strip_prefix('[').and_then(|s| s.strip_suffix('m')) {
                sgr.apply(params);
            }
            continue;
        }
        if plain == plain_at {
            return sgr;
        }
        plain += c.len_utf8();
    }
    sgr
}

/// Where the recorded session goes in the docs.
fn docs_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn in_colour_edits_show_a_red_and_green_diff_and_code_is_highlighted_in_a_recorded_session() {
    let sandbox = Sandbox::new().unwrap();
    let main = sandbox
        .write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n")
        .unwrap();
    let tests = "for t in parse_empty parse_one parse_many render_plain render_colour \
                 fold_short fold_long expand; do echo \"test $t ... ok\"; done";
    let server = TestServer::spawn(
        Script::new([
            Turn::text("I'll read `src/main.rs` first.\n")
                .and_tool_use("Read", json!({"file_path": main}))
                .with_tokens(3_000, 40)
                .delay_per_event(Duration::from_millis(40)),
            Turn::text("It greets `hello`; I'll make it greet the world.\n")
                .and_tool_use(
                    "Edit",
                    json!({
                        "file_path": main,
                        "old_string": "    println!(\"hello\");",
                        "new_string": "    let who = \"world\";\n    println!(\"hello, {who}\");",
                    }),
                )
                .with_tokens(3_400, 60)
                .delay_per_event(Duration::from_millis(40)),
            Turn::tool_use("Bash", json!({"command": tests})).with_tokens(3_900, 40),
            Turn::tool_use(
                "TodoWrite",
                json!({"todos": [
                    {"content": "Greet the world", "status": "completed", "activeForm": "Greeting the world"},
                    {"content": "Run the tests", "status": "completed", "activeForm": "Running the tests"},
                    {"content": "Update the changelog", "status": "in_progress", "activeForm": "Updating the changelog"}
                ]}),
            )
            .with_tokens(4_300, 50),
            Turn::text(
                "## Done\n\nThe program now greets **the world**; all 8 tests pass.\n\n\
                 ```rust\nfn main() {\n    let who = \"world\";\n    println!(\"hello, {who}\");\n}\n```\n\n\
                 - `src/main.rs`: one line became two\n- next: the changelog\n",
            )
            .with_tokens(4_600, 120)
            .delay_per_event(Duration::from_millis(40)),
        ])
        .with_chunk_chars(6),
    )
    .unwrap();
    let tmux = start_gyre_with(&sandbox, &server, true, &[]);
    let mut rec = Recording::new(&sandbox.project());

    rec.type_line(&tmux, "make it greet the world, then run the tests");
    // The Edit asks first, its diff in the question; `a` allows edits for the session.
    let pane = rec.wait_for(&tmux, " › y) Yes");
    assert!(pane.contains("? Edit src/main.rs"), "{pane}");
    let styled = tmux.capture_styled();
    let removed = "    2 -     println!(\"hello\");";
    assert!(
        style_at(&styled, removed, removed).fg == Some(1),
        "the removed line is red:\n{styled}"
    );
    let added = "    2 +     let who = \"world\";";
    assert!(
        style_at(&styled, added, added).fg == Some(2),
        "the added lines are green:\n{styled}"
    );
    tmux.key("a");
    // The Bash call asks too; the arrows and Enter pick "yes" this time.
    let pane = rec.wait_for(&tmux, "? Bash for t in");
    assert!(
        pane.contains("  ? allowed for this session: Edit"),
        "{pane}"
    );
    tmux.key("Down");
    rec.wait_for(&tmux, " › a) Yes, and don't ask again");
    tmux.key("Up");
    rec.wait_for(&tmux, " › y) Yes");
    tmux.key("Enter");
    rec.wait_for(&tmux, "(ctrl+o to expand)");
    rec.wait_for(&tmux, "◼ Updating the changelog");
    rec.wait_for(&tmux, "next: the changelog");
    let pane = rec.wait_until(&tmux, "the turn's end", |pane| {
        box_text(pane).is_some() && !busy(pane)
    });
    assert!(
        pane.ends_with("default mode · context 2% · $0.0622"),
        "{pane}"
    );
    assert!(pane.contains("    ☒ Greet the world"), "{pane}");
    assert!(pane.contains("    ◼ Updating the changelog"), "{pane}");
    // Markdown: the heading bold, inline code cyan, keywords and strings in the code.
    let styled = tmux.capture_styled();
    let bold = Sgr {
        bold: true,
        fg: None,
    };
    let colour = |n| Sgr {
        bold: false,
        fg: Some(n),
    };
    for (what, line, at, style) in [
        ("the heading", "Done", "Done", bold),
        (
            "inline code",
            "• src/main.rs: one line became two",
            "src/main.rs",
            colour(6),
        ),
        ("a keyword", "fn main() {", "fn", bold),
        (
            "a string",
            "    let who = \"world\";",
            "\"world\"",
            colour(2),
        ),
    ] {
        assert_eq!(
            style_at(&styled, line, at),
            style,
            "{what} is not styled:\n{styled}"
        );
    }
    tmux.key("C-o");
    rec.wait_for(&tmux, "test expand ... ok");
    rec.type_line(&tmux, "/cost");
    rec.wait_for(&tmux, "Usage:");
    rec.type_line(&tmux, "exit");
    let pane = tmux.wait_for("gyre exited with status");
    rec.frame(&tmux);
    assert!(pane.contains("gyre exited with status 0"), "{pane}");
    assert_eq!(
        std::fs::read_to_string(&main).unwrap(),
        "fn main() {\n    let who = \"world\";\n    println!(\"hello, {who}\");\n}\n"
    );

    if std::env::var_os("GYRE_UPDATE_DOCS").is_some() {
        std::fs::write(docs_dir().join("repl-session.cast"), rec.cast()).unwrap();
        let all = tmux.capture_all();
        let text: Vec<&str> = all
            .lines()
            .take_while(|l| !l.starts_with("gyre exited with status"))
            .collect::<Vec<_>>();
        let text = text
            .join("\n")
            .trim_end()
            .replace(&sandbox.project().display().to_string(), "~/project");
        std::fs::write(docs_dir().join("repl-session.txt"), format!("{text}\n")).unwrap();
    }
}

/// `text` without its escape sequences (`ESC [ … letter`).
fn without_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The recording in the docs is one of this UI: a cast a player can show, frames in
/// time order, the permission question, the diff, the folded output and the checklist
/// on them.
#[test]
fn the_recorded_session_in_the_docs_is_a_cast_of_the_ui() {
    let cast = std::fs::read_to_string(docs_dir().join("repl-session.cast")).unwrap();
    let mut lines = cast.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(100), Some(50))
    );
    let mut last = 0.0;
    let mut screens = String::new();
    for line in lines {
        let event: (f64, String, String) = serde_json::from_str(line).unwrap();
        assert!(event.0 >= last, "{line}");
        assert_eq!(event.1, "o");
        last = event.0;
        screens.push_str(&without_escapes(&event.2));
    }
    for shown in [
        "? Edit src/main.rs",
        "Yes, and don't ask again this session",
        "(ctrl+o to expand)",
        "☒ Greet the world",
        "test expand ... ok",
        "Total cost:",
    ] {
        assert!(
            screens.contains(shown),
            "{shown:?} is not in docs/repl-session.cast"
        );
    }
}

fn write_docs(asking: &str, pane: &str, project: &Path) {
    let asking = asking
        .trim_end()
        .replace(&project.display().to_string(), "~/project");
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
         permission question for a Bash call answered with one key, its output folded\n\
         and then expanded with Ctrl+O, a code block, a two-line request, a second call\n\
         allowed for the session and interrupted with Esc, `/cost`, an unknown command\n\
         and `/exit`. The answers come from gyre-testkit. While gyre runs, the input box\n\
         and the status line sit under the scrollback; `/exit` erases them. After the\n\
         terminal is resized, gyre draws the screen afresh at the new size: its newest\n\
         lines, then the input box.\n\n\
         Keys: Enter sends; Ctrl+J or Alt+Enter (or `\\` then Enter) starts a new line;\n\
         ↑/↓ move between the lines of a longer text, then browse the history, and Ctrl+R\n\
         searches it; a paste keeps its newlines; Tab completes a `/command` (gyre's, then\n\
         your custom commands and skills, which `/help` lists) or a path after `@` (an\n\
         `@path` attaches the file, as Read reads it, unless a `Read(…)` deny rule names it);\n\
         `!command` runs your own shell command, shows its output and hands both to the model\n\
         with your next message; Esc or Ctrl+C\n\
         interrupt a turn (Ctrl+C twice quits); Ctrl+D, `exit` or `quit` leave; Shift+Tab\n\
         switches the permission mode (default, acceptEdits, plan); Ctrl+O shows the newest\n\
         folded Bash output whole (again: the one before); a permission question takes\n\
         `y` (once), `a` (this session), `s` (always in this folder: saved in your own\n\
         `~/.gyre/folder-rules.json`) or `n`, or the arrows and Enter. Edits and writes\n\
         show their diff, numbered in the file; TodoWrite shows its list as a checklist. A plan (ExitPlanMode) takes `1` (yes, edits\n\
         auto-accepted), `2` (yes, edits ask first) or `3` (no: type what to change).\n\
         Running sub-agents each have a live line (their newest tool call, tool uses,\n\
         tokens) that becomes one outcome line; `/bashes` lists the background shells\n\
         (`k` kills the selected one) and the status line counts them. `/rewind` (or Esc\n\
         Esc at an empty box) goes back to before a prompt: the files Edit and Write\n\
         changed since, the conversation, or both (what Bash did stays). `NO_COLOR` turns\n\
         colours off.\n\n\
         ## A recorded session\n\n\
         [`repl-session.cast`](repl-session.cast) is a recording of gyre in colour editing a\n\
         file (its diff right above the permission question, answered `a`), running tests\n\
         with Bash (answered with the arrows and Enter; the output folded, then expanded\n\
         with Ctrl+O),\n\
         a TodoWrite checklist, a streamed Markdown answer with a code block, `/cost` and\n\
         `exit`. Play it with `asciinema play docs/repl-session.cast` (or any asciicast v2\n\
         player); [`repl-session.txt`](repl-session.txt) is the same session as plain text,\n\
         as it stays in the scrollback.\n\n\
         Both it and the screens below are captured from a real terminal (tmux, 100×50) by\n\
         `tests/tests/e2e/repl_tmux.rs`, with gyre-testkit answering; regenerate them with\n\
         `GYRE_UPDATE_DOCS=1 cargo nextest run -p gyre-e2e --test e2e repl_tmux:: --run-ignored all`.\n\n\
         ## Screens\n\n\
         While the first permission question waits (the viewport: the question in its box,\n\
         then the status line with model, permission mode, context use and cost once known):\n\n\
         ```text\n{asking}\n```\n\n\
         The whole session after `/exit`, as it stays in the terminal's scrollback:\n\n\
         ```text\n{screen}\n```\n"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/repl.md");
    std::fs::write(path, doc).unwrap();
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn compact_on_a_short_conversation_says_why_there_is_nothing_to_compact() {
    let sandbox = Sandbox::new().unwrap();
    let server =
        TestServer::spawn(Script::new([Turn::text("Hello.").with_tokens(1_200, 10)])).unwrap();
    let tmux = start_gyre(&sandbox, &server);
    tmux.type_line("hi");
    tmux.wait_for("Hello.");
    tmux.wait_for_prompt();
    tmux.type_line("/compact");
    let pane = tmux.wait_for("Nothing to compact");
    let words = pane.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("Nothing to compact: the conversation (2 messages, 1210 tokens in use,"),
        "{pane}"
    );
    assert!(
        words.contains("older turns are summarised once there are some"),
        "{pane}"
    );
    assert_eq!(server.request_count(), 1, "no summary was asked for");
    tmux.key("C-d");
    tmux.wait_for("gyre exited with status");
}
