//! Skills and custom commands through the binary: the Skill tool the model sees and
//! calls, `/name args` from a headless prompt and from the SDK, `$ARGUMENTS`, `!`
//! lines and `@` files of command files, folder trust and `--setting-sources`, the
//! SDK's `initialize` commands, and `@path` mentions in a prompt.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gyre_e2e::{Sandbox, run};
use gyre_testkit::{Script, TestServer, Turn};
use serde_json::{Value, json};

/// The text of a request's last user message (its text blocks and tool results).
fn last_user_text(request: &Value) -> String {
    let messages = request["messages"].as_array().unwrap();
    let last = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or_default().to_owned(),
                Some("tool_result") => match &b["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                _ => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn tool<'a>(request: &'a Value, name: &str) -> Option<&'a Value> {
    request["tools"]
        .as_array()?
        .iter()
        .find(|t| t["name"] == name)
}

fn skill_file(name: &str, description: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")
}

/// A user skill under `~/.claude/skills`, one under `$GYRE_HOME/skills` and a project
/// one under `.claude/skills`.
fn with_skills(sandbox: &Sandbox) {
    let home = sandbox.home();
    for (dir, name, description) in [
        (
            home.join(".claude/skills/pdf"),
            "pdf",
            "Work with PDF files",
        ),
        (
            home.join("skills/changelog"),
            "changelog",
            "Write changelog entries",
        ),
    ] {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            skill_file(
                name,
                description,
                &format!("{name} instructions for $ARGUMENTS"),
            ),
        )
        .unwrap();
    }
    sandbox
        .write(
            ".claude/skills/deploy/SKILL.md",
            &skill_file(
                "deploy",
                "Deploy this project",
                "Run ./deploy.sh, never by hand.",
            ),
        )
        .unwrap();
    sandbox
        .write(".claude/skills/deploy/deploy.sh", "echo deployed")
        .unwrap();
}

#[test]
fn skill_tool_lists_the_skills_and_loads_one_when_the_model_calls_it() {
    let sandbox = Sandbox::new().unwrap();
    with_skills(&sandbox);
    let server = TestServer::spawn(Script::new([
        Turn::tool_use("Skill", json!({"skill": "deploy"})),
        Turn::text("deployed as told"),
    ]))
    .unwrap();
    let out =
        run(sandbox
            .gyre(&server)
            .unwrap()
            .args(["-p", "ship it", "--output-format", "json"]))
        .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.result().unwrap()["result"], "deployed as told");
    let requests = server.requests();
    let skill = tool(&requests[0].body, "Skill").expect("the Skill tool is offered");
    let description = skill["description"].as_str().unwrap();
    for listed in [
        "- pdf: Work with PDF files",
        "- changelog: Write changelog entries",
        "- deploy: Deploy this project",
    ] {
        assert!(description.contains(listed), "{listed} in {description}");
    }
    let result = last_user_text(&requests[1].body);
    assert!(
        result.contains("Run ./deploy.sh, never by hand."),
        "{result}"
    );
    let folder = sandbox.project().join(".claude/skills/deploy");
    assert!(
        result.contains(&format!(
            "Base directory for this skill: {}",
            folder.display()
        )),
        "{result}"
    );
}

#[test]
fn skill_invoked_as_a_slash_command_from_a_headless_prompt() {
    let sandbox = Sandbox::new().unwrap();
    with_skills(&sandbox);
    let server = TestServer::spawn(Script::new([Turn::text("read it")])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "/pdf report.pdf"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let sent = last_user_text(&server.requests()[0].body);
    assert!(sent.contains("pdf instructions for report.pdf"), "{sent}");
    assert!(sent.contains("<command-name>/pdf</command-name>"), "{sent}");
}

#[test]
fn project_skills_and_commands_wait_for_folder_trust() {
    let sandbox = Sandbox::untrusted().unwrap();
    with_skills(&sandbox);
    sandbox
        .write(".claude/commands/hello.md", "Say hello from the project")
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args(["-p", "/hello"])).unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let request = &server.requests()[0].body;
    let description = tool(request, "Skill").unwrap()["description"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(description.contains("- pdf:"), "{description}");
    assert!(!description.contains("deploy"), "{description}");
    // Not a command here: the text goes to the model as typed.
    assert_eq!(last_user_text(request), "/hello");
    assert!(
        out.stderr.contains(
            "skills \"deploy\" and custom commands \"hello\" in .claude, .gyre. If you trust it"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn setting_sources_decide_which_skills_load() {
    let sandbox = Sandbox::new().unwrap();
    with_skills(&sandbox);
    let server = TestServer::spawn(Script::new([
        Turn::text("a"),
        Turn::text("b"),
        Turn::text("c"),
    ]))
    .unwrap();
    for sources in ["", "project", "user"] {
        let out =
            run(sandbox
                .gyre(&server)
                .unwrap()
                .args(["-p", "hi", "--setting-sources", sources]))
            .unwrap();
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    }
    let requests = server.requests();
    assert!(
        tool(&requests[0].body, "Skill").is_none(),
        "no sources, no skills"
    );
    let project = tool(&requests[1].body, "Skill").unwrap()["description"].to_string();
    assert!(
        project.contains("deploy") && !project.contains("pdf"),
        "{project}"
    );
    let user = tool(&requests[2].body, "Skill").unwrap()["description"].to_string();
    assert!(user.contains("pdf") && !user.contains("deploy"), "{user}");
}

#[test]
fn custom_command_expands_arguments_shell_lines_and_files() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write("notes.txt", "first note\nsecond note\n")
        .unwrap();
    sandbox
        .write(
            ".claude/commands/review.md",
            "---\ndescription: Review a file\nargument-hint: <file> [focus]\nallowed-tools: Bash(echo:*)\nmodel: claude-opus-4-5\n---\nReview $1 for $2 (all: $ARGUMENTS).\nStatus: !`echo shell-said-hi`\nNotes: @notes.txt\n",
        )
        .unwrap();
    sandbox
        .write(
            ".gyre/commands/frontend/test.md",
            "Run the UI tests of $ARGUMENTS",
        )
        .unwrap();
    std::fs::create_dir_all(sandbox.home().join(".claude/commands")).unwrap();
    std::fs::write(
        sandbox.home().join(".claude/commands/mine.md"),
        "The user's own command",
    )
    .unwrap();
    let server =
        TestServer::spawn(Script::new([Turn::text("reviewed"), Turn::text("tested")])).unwrap();
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "/review src/lib.rs safety"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let out = run(sandbox
        .gyre(&server)
        .unwrap()
        .args(["-p", "/frontend:test the login page"]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let requests = server.requests();
    let sent = last_user_text(&requests[0].body);
    assert!(
        sent.contains("Review src/lib.rs for safety (all: src/lib.rs safety)."),
        "{sent}"
    );
    assert!(sent.contains("Status: shell-said-hi"), "{sent}");
    assert!(sent.contains("1\tfirst note"), "{sent}");
    assert_eq!(requests[0].body["model"], "claude-opus-4-5");
    let sent = last_user_text(&requests[1].body);
    assert!(
        sent.contains("Run the UI tests of the login page"),
        "{sent}"
    );
}

#[test]
fn custom_command_shell_line_runs_only_where_the_rules_allow_it() {
    let sandbox = Sandbox::new().unwrap();
    sandbox
        .write(
            ".claude/commands/sneaky.md",
            "Before !`touch made-by-command` after",
        )
        .unwrap();
    sandbox
        .write(
            ".claude/commands/denied.md",
            "---\nallowed-tools: Bash(touch:*)\n---\nBefore !`touch denied-file` after",
        )
        .unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({"permissions": {"deny": ["Bash(touch denied-file)"]}}).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok"), Turn::text("ok")])).unwrap();
    for prompt in ["/sneaky", "/denied"] {
        let out = run(sandbox.gyre(&server).unwrap().args(["-p", prompt])).unwrap();
        assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    }
    assert!(!sandbox.project().join("made-by-command").exists());
    assert!(!sandbox.project().join("denied-file").exists());
    let requests = server.requests();
    let sent = last_user_text(&requests[0].body);
    assert!(sent.contains("not run"), "{sent}");
    let sent = last_user_text(&requests[1].body);
    assert!(sent.contains("denied"), "{sent}");
}

#[test]
fn mentions_in_a_prompt_attach_the_file_unless_a_read_rule_denies_it() {
    let sandbox = Sandbox::new().unwrap();
    sandbox.write("notes.txt", "alpha\nbeta\n").unwrap();
    sandbox.write("secret.txt", "the password").unwrap();
    sandbox
        .write(
            ".gyre/settings.json",
            &json!({"permissions": {"deny": ["Read(./secret.txt)"]}}).to_string(),
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("ok")])).unwrap();
    let out = run(sandbox.gyre(&server).unwrap().args([
        "-p",
        "compare @notes.txt with @secret.txt and mail bob@example.com",
    ]))
    .unwrap();
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let sent = last_user_text(&server.requests()[0].body);
    assert!(sent.contains("compare @notes.txt"), "{sent}");
    assert!(
        sent.contains("1\talpha\n     2\tbeta") || sent.contains("2\tbeta"),
        "{sent}"
    );
    assert!(!sent.contains("the password"), "{sent}");
    assert!(sent.contains("denied"), "{sent}");
}

#[test]
fn sdk_initialize_lists_commands_and_skills_and_runs_a_command_prompt() {
    let sandbox = Sandbox::new().unwrap();
    with_skills(&sandbox);
    sandbox
        .write(
            ".claude/commands/review.md",
            "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS",
        )
        .unwrap();
    let server = TestServer::spawn(Script::new([Turn::text("reviewed")])).unwrap();
    let out = gyre_e2e::stream_json_lines(
        &sandbox,
        &server,
        &["--setting-sources", "user,project"],
        &[],
        &[
            json!({"type": "control_request", "request_id": "init", "request": {"subtype": "initialize"}}),
            json!({"type": "user", "message": {"role": "user", "content": "/review main.rs"}}),
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = out.lines().unwrap();
    let init_line = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    let slash: Vec<&str> = init_line["slash_commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        slash.ends_with(&["review", "pdf", "changelog", "deploy"]),
        "{slash:?}"
    );
    let init = lines
        .iter()
        .find(|l| l["type"] == "control_response" && l["response"]["request_id"] == "init")
        .unwrap();
    let commands = init["response"]["response"]["commands"].as_array().unwrap();
    let names: Vec<&str> = commands.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["compact", "review", "pdf", "changelog", "deploy"]);
    let review = &commands[1];
    assert_eq!(review["description"], "Review a file");
    assert_eq!(review["argumentHint"], "<file>");
    let sent = last_user_text(&server.requests()[0].body);
    assert!(sent.contains("Review main.rs"), "{sent}");
}

#[test]
fn sdk_program_loads_skills_and_commands_through_setting_sources() {
    // The real Python Agent SDK (the venv agent_sdk.rs installs).
    let python = gyre_e2e::pip_venv("agent-sdk-venv", "claude-agent-sdk==0.2.189");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/sdk/skills_sdk_cases.py");
    let mut cmd = std::process::Command::new(python);
    cmd.arg(script);
    gyre_e2e::run_client_cases(cmd);
}
