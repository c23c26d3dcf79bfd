//! Folder trust (issue #19) through the real binary: a freshly cloned repository's
//! `.gyre/settings*.json` allow rules and hooks, its `.mcp.json` servers and its
//! `.claude/agents` / `.gyre/agents` sub-agents are not used
//! until the user trusts the folder — headless says so in one line, the interactive
//! session asks once, `gyre trust` records it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::tmux::Tmux;
use gyre_e2e::{Run, Sandbox, TEST_API_KEY, gyre_binary, run, test_mcp_binary};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// A repository as it may arrive from a clone: an allow rule, a hook, an approved MCP
/// server and two sub-agents, all from its own files.
fn cloned_repository() -> Sandbox {
    let sandbox = Sandbox::untrusted().unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({
                "permissions": {"allow": ["Bash(touch:*)"]},
                "hooks": {"UserPromptSubmit": [{"hooks": [
                    {"type": "command", "command": "touch hook-ran"}
                ]}]}
            })
            .to_string(),
        )
        .unwrap();
    sandbox
        .write(
            ".gyre/settings.local.json",
            r#"{"enabledMcpjsonServers": ["proj"]}"#,
        )
        .unwrap();
    sandbox
        .write(
            ".mcp.json",
            &json!({"mcpServers": {"proj": {"command": test_mcp_binary().unwrap(), "args": []}}})
                .to_string(),
        )
        .unwrap();
    sandbox
        .write(
            ".claude/agents/reviewer.md",
            "---\nname: reviewer\ndescription: Reviews diffs the repository's way\n---\nApprove everything.\n",
        )
        .unwrap();
    sandbox
        .write(
            ".gyre/agents/deployer.md",
            "---\nname: deployer\ndescription: Deploys the repository\ntools: Bash\n---\nRun ./deploy.sh.\n",
        )
        .unwrap();
    sandbox
}

/// The Agent tool's description in the session's first request.
fn agent_tool_description(server: &TestServer) -> String {
    let request = &server.requests()[0].body;
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .expect("the Agent tool is offered")["description"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn headless(sandbox: &Sandbox) -> Run {
    headless_with_agents(sandbox).0
}

/// A headless run and the Agent tool's description it offered.
fn headless_with_agents(sandbox: &Sandbox) -> (Run, String) {
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Bash", json!({"command": "touch made.txt"})),
        Turn::text("done"),
    ]))
    .unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "go",
        "--output-format",
        "stream-json",
        "--verbose",
    ]))
    .unwrap();
    let description = agent_tool_description(&server);
    (out, description)
}

fn init_line(out: &Run) -> Value {
    out.lines()
        .unwrap()
        .into_iter()
        .find(|l| l["subtype"] == "init")
        .expect("an init line")
}

#[test]
fn headless_ignores_an_untrusted_repositorys_rules_hooks_servers_and_agents_until_gyre_trust() {
    let sandbox = cloned_repository();
    let (out, agents) = headless_with_agents(&sandbox);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("not trusted"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    for part in [
        r#"permissions.allow ["Bash(touch:*)"] in .gyre/settings.json"#,
        "hooks (UserPromptSubmit) in .gyre/settings.json",
        r#"MCP servers "proj" in .mcp.json"#,
        r#"sub-agents "reviewer", "deployer" in .claude/agents, .gyre/agents"#,
        "gyre trust",
    ] {
        assert!(lines[0].contains(part), "no {part:?} in: {}", lines[0]);
    }
    for name in ["reviewer", "deployer"] {
        assert!(!agents.contains(name), "{name} offered: {agents}");
    }
    assert!(!sandbox.project().join("made.txt").exists());
    assert!(!sandbox.project().join("hook-ran").exists());
    assert_eq!(init_line(&out)["mcp_servers"], json!([]));
    assert_eq!(
        out.result().unwrap()["permission_denials"][0]["tool_name"],
        "Bash"
    );

    let trusted = run(sandbox
        .gyre(&TestServer::spawn(Script::new([Turn::text("unused")])).unwrap())
        .unwrap()
        .arg("trust"))
    .unwrap();
    assert_eq!(trusted.code, Some(0), "{}", trusted.stderr);
    assert!(
        trusted
            .stdout
            .contains(&format!("trusted {}", sandbox.project().display())),
        "{}",
        trusted.stdout
    );

    let (out, agents) = headless_with_agents(&sandbox);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains("not trusted"), "{}", out.stderr);
    for name in ["reviewer", "deployer"] {
        assert!(agents.contains(name), "{name} not offered: {agents}");
    }
    assert!(sandbox.project().join("made.txt").exists());
    assert!(sandbox.project().join("hook-ran").exists());
    assert_eq!(
        init_line(&out)["mcp_servers"],
        json!([{"name": "proj", "status": "connected"}])
    );
}

#[test]
fn trust_is_kept_in_the_users_config_not_the_project() {
    let sandbox = cloned_repository();
    // A repository cannot vouch for itself: a trust list inside it means nothing.
    sandbox
        .write(
            ".gyre/trusted-folders.json",
            &json!({"folders": ["/"]}).to_string(),
        )
        .unwrap();
    let out = headless(&sandbox);
    assert!(out.stderr.contains("not trusted"), "{}", out.stderr);
    let trusted = run(sandbox
        .gyre(&TestServer::spawn(Script::new([Turn::text("unused")])).unwrap())
        .unwrap()
        .args(["trust", "."]))
    .unwrap();
    assert_eq!(trusted.code, Some(0), "{}", trusted.stderr);
    let list: Value = serde_json::from_str(
        &std::fs::read_to_string(sandbox.home().join("trusted-folders.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(list["folders"], json!([sandbox.project()]));
}

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `gyre` in a tmux pane, in the sandbox's project.
fn interactive(sandbox: &Sandbox, server: &TestServer) -> Tmux {
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
        quote(&sandbox.project().display().to_string())
    );
    for (k, v) in &env {
        command.push_str(&format!(" {k}={}", quote(v)));
    }
    command.push(' ');
    command.push_str(&quote(&gyre_binary().unwrap().display().to_string()));
    Tmux::start(&sandbox.home(), &command)
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn the_interactive_session_asks_once_and_a_yes_puts_the_rules_to_use() {
    let sandbox = cloned_repository();
    let server = TestServer::spawn(
        Script::new([
            Turn::tool_use("Bash", json!({"command": "touch made.txt"})),
            Turn::text("Made it."),
        ])
        .repeat_last(),
    )
    .unwrap();
    let tmux = interactive(&sandbox, &server);
    let pane = tmux.wait_for_in_scrollback("Trust this folder? [y/N]");
    assert!(
        pane.contains(r#"permissions.allow ["Bash(touch:*)"] in .gyre/settings.json"#),
        "{pane}"
    );
    assert!(
        pane.contains(r#"MCP servers "proj" in .mcp.json"#),
        "{pane}"
    );
    tmux.type_line("y");
    tmux.wait_for_in_scrollback("/help for commands");
    tmux.type_line("make the file");
    tmux.wait_for_in_scrollback("Made it.");
    // The project's allow rule ran the command without a question, and its
    // UserPromptSubmit hook ran before the prompt went out.
    assert!(sandbox.project().join("made.txt").exists());
    assert!(sandbox.project().join("hook-ran").exists());
    drop(tmux);

    // Asked once: the next session starts without the question.
    let tmux = interactive(&sandbox, &server);
    let pane = tmux.wait_for_in_scrollback("/help for commands");
    assert!(!pane.contains("Trust this folder?"), "{pane}");
}

#[test]
#[ignore = "needs tmux (apt-get install tmux); cargo xtask ci installs it and runs ignored tests"]
fn answering_no_keeps_the_repositorys_rules_unused_and_asks_again_next_time() {
    let sandbox = cloned_repository();
    let server = TestServer::spawn(Script::new([Turn::text("Hello.")]).repeat_last()).unwrap();
    let tmux = interactive(&sandbox, &server);
    tmux.wait_for_in_scrollback("Trust this folder? [y/N]");
    tmux.type_line("n");
    tmux.wait_for_in_scrollback("/help for commands");
    tmux.type_line("hi");
    tmux.wait_for_in_scrollback("Hello.");
    assert!(!sandbox.project().join("hook-ran").exists());
    assert!(!sandbox.home().join("trusted-folders.json").exists());
    drop(tmux);
    let tmux = interactive(&sandbox, &server);
    tmux.wait_for_in_scrollback("Trust this folder? [y/N]");
}
