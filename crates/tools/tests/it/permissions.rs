#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns may unwrap too

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use gyre_tools::permissions::parse_rule_list;
use gyre_tools::{
    BoxFuture, CanUseTool, PermissionDecision, PermissionMode, PermissionPrompt, PermissionRule,
    Permissions, PromptAnswer, RuleError, Tool, ToolCall, ToolContext, ToolRegistry, run_tool_call,
};
use serde_json::{Value, json};

async fn decide(
    perms: &Permissions,
    ctx: &ToolContext,
    name: &str,
    input: Value,
) -> PermissionDecision {
    let registry = ToolRegistry::with_default_tools();
    let tool = registry.get(name).unwrap();
    let call = ToolCall::new("toolu_1", name, input);
    perms.can_use_tool(tool.as_ref(), &call, ctx).await
}

fn allowed(d: &PermissionDecision) -> bool {
    matches!(d, PermissionDecision::Allow)
}

fn setup() -> (tempfile::TempDir, tempfile::TempDir, ToolContext) {
    let work = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("in.txt"), "in").unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let ctx = ToolContext::new(work.path().canonicalize().unwrap());
    (work, outside, ctx)
}

#[test]
fn rules_parse_tool_names_and_specifiers() {
    assert_eq!(
        "Bash".parse::<PermissionRule>().unwrap(),
        PermissionRule::tool("Bash")
    );
    assert_eq!(
        "Bash(git diff:*)".parse::<PermissionRule>().unwrap(),
        PermissionRule::with_specifier("Bash", "git diff:*")
    );
    assert_eq!(
        "Read(src/**)"
            .parse::<PermissionRule>()
            .unwrap()
            .to_string(),
        "Read(src/**)"
    );
    assert_eq!(
        parse_rule_list("Bash(git diff:*) Read,Edit").unwrap(),
        vec![
            PermissionRule::with_specifier("Bash", "git diff:*"),
            PermissionRule::tool("Read"),
            PermissionRule::tool("Edit"),
        ]
    );
}

#[test]
fn malformed_rules_are_clear_errors() {
    assert_eq!("".parse::<PermissionRule>(), Err(RuleError::Empty));
    assert!(matches!(
        "Bash(git".parse::<PermissionRule>(),
        Err(RuleError::Malformed(_))
    ));
    assert!(matches!(
        "Bash()".parse::<PermissionRule>(),
        Err(RuleError::EmptySpecifier(..))
    ));
    assert!(matches!(
        "(x)".parse::<PermissionRule>(),
        Err(RuleError::Malformed(_))
    ));
    let err = "Read(src/[)".parse::<PermissionRule>().unwrap_err();
    assert!(err.to_string().contains("invalid path pattern"), "{err}");
    let err = "Bash(git"
        .parse::<PermissionRule>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("Bash(git diff:*)"), "{err}");
}

#[test]
fn modes_parse_by_their_exact_names() {
    for (s, m) in [
        ("default", PermissionMode::Default),
        ("acceptEdits", PermissionMode::AcceptEdits),
        ("plan", PermissionMode::Plan),
        ("bypassPermissions", PermissionMode::BypassPermissions),
    ] {
        assert_eq!(s.parse::<PermissionMode>().unwrap(), m);
        assert_eq!(m.to_string(), s);
    }
    assert!("AcceptEdits".parse::<PermissionMode>().is_err());
}

#[tokio::test]
async fn default_mode_allows_reads_inside_and_asks_for_writes_and_bash() {
    let (work, _out, ctx) = setup();
    let perms = Permissions::default();
    let inside = work.path().join("in.txt").display().to_string();
    assert!(allowed(
        &decide(&perms, &ctx, "Read", json!({"file_path": inside})).await
    ));
    assert!(allowed(
        &decide(&perms, &ctx, "Grep", json!({"pattern": "x"})).await
    ));
    assert!(allowed(
        &decide(&perms, &ctx, "Glob", json!({"pattern": "*"})).await
    ));
    let edit = decide(
        &perms,
        &ctx,
        "Edit",
        json!({"file_path": inside, "old_string": "a", "new_string": "b"}),
    )
    .await;
    let PermissionDecision::Deny { reason } = edit else {
        panic!("{edit:?}")
    };
    assert!(
        reason.contains("Permission to use Edit was denied"),
        "{reason}"
    );
    assert!(reason.contains("--permission-mode acceptEdits"), "{reason}");
    assert!(!allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "ls"})).await
    ));
}

#[tokio::test]
async fn path_escapes_are_denied_in_default_mode() {
    let (work, outside, ctx) = setup();
    let perms = Permissions::default();
    let secret = outside.path().join("secret.txt");
    std::os::unix::fs::symlink(&secret, work.path().join("link.txt")).unwrap();
    let rel_escape = format!(
        "../{}/secret.txt",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    for path in [
        secret.display().to_string(),
        rel_escape.clone(),
        work.path().join(&rel_escape).display().to_string(),
        work.path().join("link.txt").display().to_string(),
    ] {
        let d = decide(&perms, &ctx, "Read", json!({"file_path": path})).await;
        let PermissionDecision::Deny { reason } = d else {
            panic!("{path} was allowed")
        };
        assert!(
            reason.contains("outside the working directories"),
            "{reason}"
        );
        assert!(reason.contains("--add-dir"), "{reason}");
    }
    assert!(!allowed(
        &decide(
            &perms,
            &ctx,
            "Grep",
            json!({"pattern": "x", "path": outside.path()})
        )
        .await
    ));
    // Even acceptEdits does not write outside.
    let edits = Permissions::new(PermissionMode::AcceptEdits);
    assert!(!allowed(
        &decide(
            &edits,
            &ctx,
            "Write",
            json!({"file_path": work.path().join("link.txt"), "content": ""})
        )
        .await
    ));
}

#[tokio::test]
async fn a_symlink_escape_is_denied_end_to_end_and_the_target_is_untouched() {
    let (work, outside, ctx) = setup();
    std::os::unix::fs::symlink(outside.path(), work.path().join("dirlink")).unwrap();
    let registry = ToolRegistry::with_default_tools();
    let perms = Permissions::new(PermissionMode::AcceptEdits);
    let call = ToolCall::new(
        "t",
        "Write",
        json!({"file_path": work.path().join("dirlink/new.txt"), "content": "x"}),
    );
    let outcome = run_tool_call(&registry, &call, &ctx, &perms, &|_| {}).await;
    assert!(outcome.output.is_error);
    assert!(outcome.denial.is_some());
    assert!(!outside.path().join("new.txt").exists());
}

#[tokio::test]
async fn allow_rules_open_paths_outside_and_add_dir_works() {
    let (_work, outside, ctx) = setup();
    let secret = outside.path().join("secret.txt").display().to_string();
    let rule = format!(
        "Read({}/**)",
        outside.path().canonicalize().unwrap().display()
    );
    let perms =
        Permissions::from_rules(PermissionMode::Default, &[rule.as_str()], &[], &[]).unwrap();
    assert!(allowed(
        &decide(&perms, &ctx, "Read", json!({"file_path": secret})).await
    ));
    let added = ctx.clone().with_working_dir(outside.path());
    assert!(allowed(
        &decide(
            &Permissions::default(),
            &added,
            "Read",
            json!({"file_path": secret})
        )
        .await
    ));
}

#[tokio::test]
async fn deny_rules_win_over_bypass_permissions_and_allow_rules() {
    let (work, _out, ctx) = setup();
    let perms = Permissions::from_rules(
        PermissionMode::BypassPermissions,
        &["Bash", "Read"],
        &[],
        &["Bash(rm:*)", "Read(*.txt)"],
    )
    .unwrap();
    let d = decide(
        &perms,
        &ctx,
        "Bash",
        json!({"command": "ls && rm -rf build"}),
    )
    .await;
    let PermissionDecision::Deny { reason } = d else {
        panic!("{d:?}")
    };
    assert!(reason.contains("deny rule `Bash(rm:*)`"), "{reason}");
    assert!(!allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "FOO=1 rm x"})).await
    ));
    assert!(!allowed(
        &decide(
            &perms,
            &ctx,
            "Read",
            json!({"file_path": work.path().join("in.txt")})
        )
        .await
    ));
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "ls"})).await
    ));
    assert!(allowed(
        &decide(
            &perms,
            &ctx,
            "Write",
            json!({"file_path": "/tmp/anything", "content": ""})
        )
        .await
    ));
}

#[tokio::test]
async fn evaluation_order_is_deny_then_ask_then_allow() {
    let (_work, _out, ctx) = setup();
    let perms = Permissions::from_rules(
        PermissionMode::Default,
        &["Bash"],
        &["Bash(git push:*)"],
        &["Bash(git push --force:*)"],
    )
    .unwrap();
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "git status"})).await
    ));
    // Ask beats allow; headless, ask means deny.
    let ask = decide(&perms, &ctx, "Bash", json!({"command": "git push origin"})).await;
    let PermissionDecision::Deny { reason } = ask else {
        panic!("{ask:?}")
    };
    assert!(reason.contains("ask rule"), "{reason}");
    let deny = decide(&perms, &ctx, "Bash", json!({"command": "git push --force"})).await;
    let PermissionDecision::Deny { reason } = deny else {
        panic!()
    };
    assert!(reason.contains("deny rule"), "{reason}");
}

#[tokio::test]
async fn bash_prefix_rules_must_match_every_part_of_a_compound_command() {
    let (_work, _out, ctx) = setup();
    let perms = Permissions::from_rules(
        PermissionMode::Default,
        &["Bash(git diff:*)", "Bash(ls:*)"],
        &[],
        &[],
    )
    .unwrap();
    for ok in [
        "git diff",
        "git diff HEAD~1 -- src",
        "git diff && ls -la",
        "git diff | ls",
    ] {
        assert!(
            allowed(&decide(&perms, &ctx, "Bash", json!({"command": ok})).await),
            "{ok}"
        );
    }
    for bad in [
        "git diff; rm -rf /",
        "git diff && rm -rf /",
        "git diff | sh",
        "git difftool",
        "git diff $(rm -rf /)",
        "git diff `rm -rf /`",
        "git diff > /etc/passwd",
        "rm -rf / ; git diff",
        "git diff & rm x",
    ] {
        assert!(
            !allowed(&decide(&perms, &ctx, "Bash", json!({"command": bad})).await),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn accept_edits_allows_edits_inside_the_working_dirs() {
    let (work, out, ctx) = setup();
    let perms = Permissions::new(PermissionMode::AcceptEdits);
    assert!(allowed(
        &decide(
            &perms,
            &ctx,
            "Write",
            json!({"file_path": work.path().join("new.txt"), "content": ""})
        )
        .await
    ));
    // The filesystem commands the reference runs in acceptEdits, inside the working
    // directories; anything else, or a path outside or protected, still asks.
    let bash = |command: &str| json!({ "command": command });
    for command in [
        "touch x",
        "mkdir -p src/new && touch src/new/mod.rs",
        "mv a b; cp b c; rm -f c; rmdir d",
        "sed -i 's/old/new/g' a.txt",
    ] {
        assert!(
            allowed(&decide(&perms, &ctx, "Bash", bash(command)).await),
            "{command}"
        );
    }
    let outside = format!("touch {}/x", out.path().display());
    for command in [
        outside.as_str(),
        "rm -rf ../elsewhere",
        "rm .gyre/settings.json",
        "touch x && curl example.com",
        "rm *.txt",
        "sed -i 's/a/b/w copy' a.txt",
        "sed -i '1e id' a.txt",
        "cp a b > log",
    ] {
        assert!(
            !allowed(&decide(&perms, &ctx, "Bash", bash(command)).await),
            "{command}"
        );
    }
    let denied =
        Permissions::from_rules(PermissionMode::AcceptEdits, &[], &[], &["Edit(secret/**)"])
            .unwrap();
    assert!(!allowed(
        &decide(&denied, &ctx, "Bash", bash("rm secret/key")).await
    ));
}

#[tokio::test]
async fn plan_mode_allows_only_read_only_tools() {
    let (work, _out, ctx) = setup();
    let ctx = ctx.with_sandbox(gyre_tools::sandbox::SandboxPolicy::ReadOnly {
        allow_network: false,
    });
    let perms = Permissions::new(PermissionMode::Plan);
    assert!(allowed(
        &decide(
            &perms,
            &ctx,
            "Read",
            json!({"file_path": work.path().join("in.txt")})
        )
        .await
    ));
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "git status"})).await
    ));
    assert!(!allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "rm x"})).await
    ));
    let d = decide(
        &perms,
        &ctx,
        "Write",
        json!({"file_path": work.path().join("x"), "content": ""}),
    )
    .await;
    let PermissionDecision::Deny { reason } = d else {
        panic!()
    };
    assert!(reason.contains("plan mode"), "{reason}");
}

#[tokio::test]
async fn path_rules_are_relative_to_the_cwd_and_edit_rules_cover_write() {
    let (work, _out, ctx) = setup();
    std::fs::create_dir(work.path().join("src")).unwrap();
    let perms =
        Permissions::from_rules(PermissionMode::Default, &["Edit(src/**)"], &[], &[]).unwrap();
    assert!(allowed(
        &decide(
            &perms,
            &ctx,
            "Edit",
            json!({"file_path": work.path().join("src/a.rs"), "old_string": "a", "new_string": "b"})
        )
        .await
    ));
    assert!(allowed(
        &decide(
            &perms,
            &ctx,
            "Write",
            json!({"file_path": work.path().join("src/deep/b.rs"), "content": ""})
        )
        .await
    ));
    assert!(!allowed(
        &decide(
            &perms,
            &ctx,
            "Write",
            json!({"file_path": work.path().join("other.rs"), "content": ""})
        )
        .await
    ));
}

struct Answer(PromptAnswer, AtomicUsize);

impl PermissionPrompt for Answer {
    fn ask<'a>(
        &'a self,
        _tool: &'a dyn Tool,
        _call: &'a ToolCall,
        _reason: &'a str,
        _always: &'a PermissionRule,
    ) -> BoxFuture<'a, PromptAnswer> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { self.0.clone() })
    }
}

#[tokio::test]
async fn interactive_prompt_answers_and_allow_always_is_remembered() {
    let (_work, _out, ctx) = setup();
    let prompt = Arc::new(Answer(PromptAnswer::AllowAlways, AtomicUsize::new(0)));
    let perms = Permissions::default().with_prompt(prompt.clone());
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "make test"})).await
    ));
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "make test"})).await
    ));
    assert_eq!(
        prompt.1.load(Ordering::SeqCst),
        1,
        "allow always should not ask again"
    );
    assert_eq!(
        perms.session_rules(),
        vec![PermissionRule::with_specifier("Bash", "make test")]
    );

    let no = Permissions::default()
        .with_prompt(Arc::new(Answer(PromptAnswer::Deny, AtomicUsize::new(0))));
    let d = decide(&no, &ctx, "Bash", json!({"command": "make"})).await;
    assert!(matches!(d, PermissionDecision::Deny { reason } if reason.contains("user denied")));
    // A no with feedback gives the model the user's words.
    let feedback = PromptAnswer::DenyWithFeedback("use cargo instead".to_owned());
    let told = Permissions::default().with_prompt(Arc::new(Answer(feedback, AtomicUsize::new(0))));
    let d = decide(&told, &ctx, "Bash", json!({"command": "make"})).await;
    assert!(
        matches!(&d, PermissionDecision::Deny { reason } if reason.contains("the user said:\nuse cargo instead")),
        "{d:?}"
    );
    // Deny rules are never put to the user.
    let prompt = Arc::new(Answer(PromptAnswer::AllowOnce, AtomicUsize::new(0)));
    let strict = Permissions::default()
        .with_deny(["Bash".parse().unwrap()])
        .with_prompt(prompt.clone());
    assert!(!allowed(
        &decide(&strict, &ctx, "Bash", json!({"command": "make"})).await
    ));
    assert_eq!(prompt.1.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn plan_mode_bash_asks_for_paths_a_read_deny_rule_protects_or_outside_the_cwd() {
    let (work, outside, ctx) = setup();
    std::fs::create_dir(work.path().join("secrets")).unwrap();
    std::fs::write(work.path().join("secrets/key"), "k").unwrap();
    let ctx = ctx.with_sandbox(gyre_tools::sandbox::SandboxPolicy::ReadOnly {
        allow_network: false,
    });
    let perms = Permissions::from_rules(
        PermissionMode::Plan,
        &[] as &[&str],
        &[],
        &["Read(secrets/**)"],
    )
    .unwrap();
    for command in [
        "cat secrets/key".to_owned(),
        "grep -r k secrets".to_owned(),
        format!("cat {}", outside.path().join("secret.txt").display()),
        "cat ../x".to_owned(),
    ] {
        assert!(
            !allowed(&decide(&perms, &ctx, "Bash", json!({"command": command})).await),
            "{command}"
        );
    }
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "cat in.txt"})).await
    ));
}

#[tokio::test]
async fn plan_mode_without_the_sandbox_asks_before_bash() {
    let (_work, _out, ctx) = setup();
    let perms = Permissions::new(PermissionMode::Plan);
    assert!(!allowed(
        &decide(&perms, &ctx, "Bash", json!({"command": "ls"})).await
    ));
}

/// Answers "always" and keeps the rule each question offered.
#[derive(Default)]
struct AlwaysRecording(std::sync::Mutex<Vec<PermissionRule>>);

impl PermissionPrompt for AlwaysRecording {
    fn ask<'a>(
        &'a self,
        _tool: &'a dyn Tool,
        _call: &'a ToolCall,
        _reason: &'a str,
        always: &'a PermissionRule,
    ) -> BoxFuture<'a, PromptAnswer> {
        self.0.lock().unwrap().push(always.clone());
        Box::pin(async { PromptAnswer::AllowAlways })
    }
}

#[tokio::test]
async fn an_always_answer_to_an_edit_covers_the_project_and_nothing_outside_it() {
    let (work, outside, ctx) = setup();
    let project = work.path().canonicalize().unwrap();
    std::fs::create_dir(work.path().join("src")).unwrap();
    let prompt = Arc::new(AlwaysRecording::default());
    let perms = Permissions::default().with_prompt(prompt.clone());
    let edit =
        |path: std::path::PathBuf| json!({"file_path": path, "old_string": "a", "new_string": "b"});
    assert!(allowed(
        &decide(&perms, &ctx, "Edit", edit(work.path().join("in.txt"))).await
    ));
    let offered = prompt.0.lock().unwrap().clone();
    let scoped = PermissionRule::with_specifier("Edit", format!("/{}/**", project.display()));
    assert_eq!(
        offered,
        std::slice::from_ref(&scoped),
        "the question shows the scoped rule"
    );
    assert_eq!(
        perms.session_rules(),
        std::slice::from_ref(&scoped),
        "and the session keeps it"
    );
    // Another file in the project, deeper down: not asked again.
    assert!(allowed(
        &decide(&perms, &ctx, "Edit", edit(work.path().join("src/lib.rs"))).await
    ));
    assert_eq!(prompt.0.lock().unwrap().len(), 1);
    // A file outside the project is asked about again, with its own directory's rule.
    decide(
        &perms,
        &ctx,
        "Edit",
        edit(outside.path().join("secret.txt")),
    )
    .await;
    let offered = prompt.0.lock().unwrap().clone();
    let elsewhere = outside.path().canonicalize().unwrap();
    assert_eq!(
        offered[1],
        PermissionRule::with_specifier("Edit", format!("/{}/**", elsewhere.display()))
    );

    // The rule as saved text, read back by the next session without a prompt (headless):
    // the project is allowed, a file outside it is not.
    let next =
        Permissions::from_rules(PermissionMode::Default, &[scoped.to_string()], &[], &[]).unwrap();
    assert!(allowed(
        &decide(
            &next,
            &ctx,
            "Write",
            json!({"file_path": work.path().join("new.txt"), "content": ""})
        )
        .await
    ));
    assert!(!allowed(
        &decide(&next, &ctx, "Edit", edit(outside.path().join("secret.txt"))).await
    ));
}

#[tokio::test]
async fn an_always_answer_to_a_bash_command_is_that_exact_command() {
    let (_work, _outside, ctx) = setup();
    let prompt = Arc::new(AlwaysRecording::default());
    let perms = Permissions::default().with_prompt(prompt.clone());
    decide(&perms, &ctx, "Bash", json!({"command": "  make test "})).await;
    assert_eq!(
        prompt.0.lock().unwrap().clone(),
        [PermissionRule::with_specifier("Bash", "make test")]
    );
    let next = Permissions::from_rules(
        PermissionMode::Default,
        &["Bash(make test)"],
        &[] as &[&str],
        &[] as &[&str],
    )
    .unwrap();
    assert!(allowed(
        &decide(&next, &ctx, "Bash", json!({"command": "make test"})).await
    ));
    assert!(!allowed(
        &decide(&next, &ctx, "Bash", json!({"command": "make install"})).await
    ));
}

/// The reason of a headless denial of `command` under `perms`.
async fn bash_denial(perms: &Permissions, ctx: &ToolContext, command: &str) -> String {
    match decide(perms, ctx, "Bash", json!({ "command": command })).await {
        PermissionDecision::Deny { reason } => reason,
        other => panic!("{command:?}: {other:?}"),
    }
}

/// The value a denial's hint gives `--allowedTools`, as the user's shell passes it on.
fn hinted_allowed_tools(reason: &str) -> Option<String> {
    let (_, rest) = reason.split_once("--allowedTools ")?;
    let quote = rest.chars().next().filter(|c| matches!(c, '"' | '\''))?;
    let value = rest.strip_prefix(quote)?.split(quote).next()?;
    Some(value.to_owned())
}

#[tokio::test]
async fn a_denial_hint_names_every_rule_a_compound_command_needs() {
    let (_work, _outside, ctx) = setup();
    let reason = bash_denial(&Permissions::default(), &ctx, "ls -la && wc -l notes.txt").await;
    assert!(
        reason.contains(
            "To allow it, run with --allowedTools \"Bash(ls:*) Bash(wc:*)\" (or add these rules to permissions.allow"
        ),
        "{reason}"
    );
    for (command, want) in [
        ("ls; pwd", "Bash(ls:*) Bash(pwd:*)"),
        ("ls | wc -l", "Bash(ls:*) Bash(wc:*)"),
        (
            "(cd src && ls) || true",
            "Bash(cd src:*) Bash(ls:*) Bash(true:*)",
        ),
        (
            "git status && git diff --stat && git status -s",
            "Bash(git status:*) Bash(git diff:*)",
        ),
    ] {
        let reason = bash_denial(&Permissions::default(), &ctx, command).await;
        assert_eq!(
            hinted_allowed_tools(&reason).as_deref(),
            Some(want),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn following_a_denial_hint_allows_the_command() {
    let (_work, _outside, ctx) = setup();
    for command in [
        "ls -la && wc -l notes.txt",
        "ls | wc -l",
        "cat in.txt; echo done",
        "(cd sub && make) || echo failed",
        "{ git status; git diff --stat; } 2>&1",
        "git -C sub log --oneline -3 | head -n 2",
        "rm -rf build && cargo build --release",
        "git diff --output=x && ls",
        "timeout 5 npm test && ls",
        "find . -name '*.rs' | xargs grep -n foo",
        "./run.sh --fast; echo ok",
        "echo 'a; b' \"c && d\"",
        "cat *.txt | sort -u",
        "while false; do sleep 1; done",
        // Quoted for the user's shell: `'Bash(a$b:*) Bash(ls:*)'`.
        "'a$b' x && ls",
    ] {
        let reason = bash_denial(&Permissions::default(), &ctx, command).await;
        let value = hinted_allowed_tools(&reason).unwrap_or_else(|| panic!("{reason}"));
        let rules: Vec<String> = parse_rule_list(&value)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        let perms = Permissions::from_rules(PermissionMode::Default, &rules, &[], &[]).unwrap();
        assert!(
            allowed(&decide(&perms, &ctx, "Bash", json!({ "command": command })).await),
            "{command:?}: {reason}"
        );
    }
}

#[tokio::test]
async fn a_denial_hint_leaves_out_rules_already_given() {
    let (_work, _outside, ctx) = setup();
    let given = ["Bash(ls:*)".to_owned()];
    let perms = Permissions::from_rules(PermissionMode::Default, &given, &[], &[]).unwrap();
    let command = "ls -la && wc -l notes.txt";
    let reason = bash_denial(&perms, &ctx, command).await;
    assert!(
        reason.contains(
            "--allowedTools \"Bash(wc:*)\" as well as the allow rules already given (or add the rule"
        ),
        "{reason}"
    );
    let mut rules = given.to_vec();
    rules.push(hinted_allowed_tools(&reason).unwrap());
    let perms = Permissions::from_rules(PermissionMode::Default, &rules, &[], &[]).unwrap();
    assert!(allowed(
        &decide(&perms, &ctx, "Bash", json!({ "command": command })).await
    ));
}

#[tokio::test]
async fn a_denial_hint_does_not_suggest_rules_that_cannot_work() {
    let (_work, _outside, ctx) = setup();
    for command in [
        "echo $(date)",
        "ls && echo $HOME",
        "$cmd x",
        "ls > listing.txt",
        "X=1 make",
    ] {
        let reason = bash_denial(&Permissions::default(), &ctx, command).await;
        assert!(
            reason.contains("No Bash(…) rule can allow this command because")
                && reason.contains("needs the user's approval")
                && reason.contains("--allowedTools \"Bash\""),
            "{command:?}: {reason}"
        );
        assert_eq!(
            hinted_allowed_tools(&reason).as_deref(),
            Some("Bash"),
            "{reason}"
        );
        // And `Bash` does allow it.
        let perms = Permissions::from_rules(PermissionMode::Default, &["Bash"], &[], &[]).unwrap();
        assert!(allowed(
            &decide(&perms, &ctx, "Bash", json!({ "command": command })).await
        ));
    }
    // An ask rule comes before every allow rule: nothing on the command line helps.
    let perms = Permissions::from_rules(
        PermissionMode::Default,
        &[] as &[&str],
        &["Bash(rm:*)"],
        &[] as &[&str],
    )
    .unwrap();
    let reason = bash_denial(&perms, &ctx, "rm x").await;
    assert!(
        reason.contains("No --allowedTools rule allows this command in this session"),
        "{reason}"
    );
    assert_eq!(hinted_allowed_tools(&reason), None, "{reason}");
}

/// Issue #29 class 12: a `Read(…)` deny rule covers the file arguments of every command,
/// whatever allow rule covers the command.
#[tokio::test]
async fn read_deny_rules_refuse_commands_that_name_denied_files() {
    let (work, _out, ctx) = setup();
    std::fs::create_dir(work.path().join("secret")).unwrap();
    std::fs::write(work.path().join("secret/key"), "k").unwrap();
    let perms = Permissions::from_rules(
        PermissionMode::Default,
        &[
            "Bash(cat:*)",
            "Bash(head:*)",
            "Bash(grep:*)",
            "Bash(wc:*)",
            "Bash(cp:*)",
        ],
        &[],
        &["Read(./secret/**)"],
    )
    .unwrap();
    for command in [
        "cat secret/key",
        "cat ./secret/../secret/key",
        "head -n 1 secret/key",
        "grep k secret/key",
        "grep -r k secret",
        "wc -l < secret/key",
        "cp secret/key copy",
        "cat secret/*",
        "cat s*/key",
        "cat in.txt; cat secret/key",
    ] {
        assert!(
            matches!(
                decide(&perms, &ctx, "Bash", json!({"command": command})).await,
                PermissionDecision::Deny { .. }
            ),
            "{command}"
        );
    }
    for command in ["cat in.txt", "grep k in.txt", "cat *.txt"] {
        assert!(
            allowed(&decide(&perms, &ctx, "Bash", json!({"command": command})).await),
            "{command}"
        );
    }
}

/// A tool known only by its name and its read-only claim: an MCP tool whose server says
/// `readOnlyHint`, or WebFetch as gyre-core defines it.
struct Named(&'static str, bool);

impl Tool for Named {
    fn name(&self) -> std::borrow::Cow<'static, str> {
        self.0.into()
    }
    fn description(&self) -> std::borrow::Cow<'static, str> {
        "test tool".into()
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }
    fn is_read_only(&self, _input: &Value) -> bool {
        self.1
    }
    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: "needs permission".to_owned(),
        }
    }
    fn max_result_size_chars(&self) -> usize {
        1000
    }
    fn call<'a>(
        &'a self,
        _input: Value,
        _ctx: &'a ToolContext,
        _progress: &'a gyre_tools::ProgressFn,
    ) -> BoxFuture<'a, gyre_tools::ToolOutput> {
        Box::pin(async { gyre_tools::ToolOutput::ok("ran") })
    }
}

fn evaluate_named(
    perms: &Permissions,
    ctx: &ToolContext,
    tool: &Named,
    input: Value,
) -> PermissionDecision {
    let call = ToolCall::new("toolu_1", tool.0, input);
    perms.evaluate(tool, &call, ctx)
}

/// Issue #29 class 11: a domain rule is judged on the host the URL parser connects to,
/// and loopback, link-local and private addresses ask even when a rule allows the call.
#[tokio::test]
async fn web_fetch_rules_judge_the_parsed_host_and_private_addresses_ask() {
    let (_work, _out, ctx) = setup();
    let fetch = Named("WebFetch", false);
    let perms = Permissions::from_rules(
        PermissionMode::Default,
        &["WebFetch(domain:allowed.com)"],
        &[],
        &[],
    )
    .unwrap();
    for url in [
        "https://127.0.0.1\\@allowed.com/",
        "https://127.0.0.1\\@allowed.com:443/x",
        "http://localhost\\@allowed.com/",
    ] {
        assert!(
            !allowed(&evaluate_named(&perms, &ctx, &fetch, json!({"url": url}))),
            "{url}"
        );
    }
    assert!(allowed(&evaluate_named(
        &perms,
        &ctx,
        &fetch,
        json!({"url": "https://allowed.com\\@127.0.0.1/"})
    )));
    let everything =
        Permissions::from_rules(PermissionMode::Default, &["WebFetch"], &[], &[]).unwrap();
    // Every spelling is in gyre-tools' domain tests; one of each kind here.
    for url in [
        "http://2130706433/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/",
        "http://LOCALHOST./",
    ] {
        assert!(
            matches!(
                evaluate_named(&everything, &ctx, &fetch, json!({"url": url})),
                PermissionDecision::Ask { .. }
            ),
            "{url}"
        );
    }
    assert!(allowed(&evaluate_named(
        &everything,
        &ctx,
        &fetch,
        json!({"url": "https://example.com/"})
    )));
    // A rule that names the private host itself is the user's decision.
    let named = Permissions::from_rules(
        PermissionMode::Default,
        &["WebFetch(domain:localhost)"],
        &[],
        &[],
    )
    .unwrap();
    assert!(allowed(&evaluate_named(
        &named,
        &ctx,
        &fetch,
        json!({"url": "http://localhost:3000/"})
    )));
}

/// Issue #29 class 14: `readOnlyHint` is the server's claim, not proof.
#[tokio::test]
async fn plan_mode_asks_for_mcp_tools_a_server_calls_read_only_unless_a_rule_allows_them() {
    let (_work, _out, ctx) = setup();
    let tool = Named("mcp__files__read", true);
    let plan = Permissions::new(PermissionMode::Plan);
    assert!(matches!(
        evaluate_named(&plan, &ctx, &tool, json!({})),
        PermissionDecision::Ask { .. }
    ));
    let ruled = Permissions::from_rules(PermissionMode::Plan, &["mcp__files"], &[], &[]).unwrap();
    assert!(allowed(&evaluate_named(&ruled, &ctx, &tool, json!({}))));
}

/// Issue 29, class 17: gyre's home is protected where it is, whatever its name: in
/// acceptEdits, Edit/Write and the file commands acceptEdits runs still ask there.
#[tokio::test]
async fn gyre_home_under_any_name_is_protected_in_accept_edits() {
    let (work, _outside, ctx) = setup();
    let home = work.path().canonicalize().unwrap().join("my-config");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("trust.json"), "{}").unwrap();
    let perms = Permissions::new(PermissionMode::AcceptEdits);
    let write = json!({"file_path": home.join("settings.json"), "content": "{}"});
    let mv = json!({"command": format!("mv {} x.json", home.join("trust.json").display())});
    // Without the home known, the folder is just part of the project.
    assert!(allowed(&decide(&perms, &ctx, "Write", write.clone()).await));
    assert!(allowed(&decide(&perms, &ctx, "Bash", mv.clone()).await));
    let ctx = ctx.with_protected_root(&home);
    // Asked about; with no one to ask (this policy has no prompt), refused.
    let decision = decide(&perms, &ctx, "Write", write).await;
    let PermissionDecision::Deny { reason } = &decision else {
        panic!("{decision:?}")
    };
    assert!(reason.contains("gyre's home"), "{reason}");
    let decision = decide(&perms, &ctx, "Bash", mv).await;
    assert!(
        matches!(decision, PermissionDecision::Deny { .. }),
        "{decision:?}"
    );
    // The rest of the project is edited without asking, as before.
    let elsewhere = json!({"file_path": work.path().join("in.txt"), "content": "x"});
    assert!(allowed(&decide(&perms, &ctx, "Write", elsewhere).await));
}

/// Issue 29, round 3: under a `Bash(rm:*)` deny rule, code the rule cannot read asks
/// whatever allow rule or mode would run it — an interpreter, a program given as a
/// path, a program written after the session started — unless a rule names exactly
/// that command line (the user's own "always").
#[tokio::test]
async fn under_a_deny_rule_code_it_cannot_read_asks() {
    let (_work, outside, ctx) = setup();
    // Headless, the question is answered no: the reason says why it was asked.
    let asks = |d: &PermissionDecision| match d {
        PermissionDecision::Ask { reason } | PermissionDecision::Deny { reason } => {
            reason.contains("Bash(rm:*) cannot read")
        }
        PermissionDecision::Allow => false,
    };
    for mode in [PermissionMode::BypassPermissions, PermissionMode::Default] {
        let perms = Permissions::from_rules(mode, &["Bash"], &[], &["Bash(rm:*)"]).unwrap();
        for command in [
            "python3 -c 'import os; os.remove(\"x\")'",
            "make clean",
            "./x keep.txt",
            "git -C planted st",
        ] {
            let d = decide(&perms, &ctx, "Bash", json!({ "command": command })).await;
            assert!(asks(&d), "{mode:?} {command}: {d:?}");
        }
        assert!(allowed(
            &decide(&perms, &ctx, "Bash", json!({"command": "ls -la"})).await
        ));
    }
    // A program file made now, after the policy, outside the working directories, run
    // by name on the PATH.
    let bin = outside.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy("/bin/ls", bin.join("tidy")).unwrap();
    let mut ctx = ctx;
    ctx.child_env = vec![(
        "PATH".to_owned(),
        format!("{}:/usr/bin:/bin", bin.display()),
    )]
    .into();
    let perms =
        Permissions::from_rules(PermissionMode::Default, &["Bash"], &[], &["Bash(rm:*)"]).unwrap();
    assert!(asks(
        &decide(&perms, &ctx, "Bash", json!({"command": "tidy x"})).await
    ));
    // Without deny rules nothing changes; an exact rule is the user's decision.
    let open = Permissions::from_rules(PermissionMode::Default, &["Bash"], &[], &[]).unwrap();
    assert!(allowed(
        &decide(&open, &ctx, "Bash", json!({"command": "python3 -c 1"})).await
    ));
    let exact = Permissions::from_rules(
        PermissionMode::Default,
        &["Bash(python3 -c 1)"],
        &[],
        &["Bash(rm:*)"],
    )
    .unwrap();
    assert!(allowed(
        &decide(&exact, &ctx, "Bash", json!({"command": "python3 -c 1"})).await
    ));
}

/// Issue 29, round 3: under a `Bash(rm:*)` deny rule, a command that may write a
/// protected path (gyre's settings and hooks, git's hooks, `.mcp.json`) asks: the code
/// it plants would run later, where the rule never looks.
#[tokio::test]
async fn under_a_deny_rule_writing_protected_paths_asks() {
    let (_work, _outside, ctx) = setup();
    let perms = Permissions::from_rules(
        PermissionMode::BypassPermissions,
        &["Bash"],
        &[],
        &["Bash(rm:*)"],
    )
    .unwrap();
    for command in [
        "echo '{\"hooks\":{}}' > .gyre/settings.local.json",
        "cp evil.sh .git/hooks/pre-commit",
        "echo '{}' | tee .mcp.json",
        "mkdir -p .claude/agents",
        "bash -c 'cat x >> ~/.bashrc'",
        "f=.mcp.json; echo '{}' > \"$f\"",
    ] {
        let d = decide(&perms, &ctx, "Bash", json!({ "command": command })).await;
        assert!(!allowed(&d), "{command}: {d:?}");
    }
    for command in ["echo x > out.txt", "cat .gyre/settings.json", "cp a b"] {
        let d = decide(&perms, &ctx, "Bash", json!({ "command": command })).await;
        assert!(allowed(&d), "{command}: {d:?}");
    }
}
