//! What the session is and whether the installation is sound: the REPL's `/status`
//! (version, model, backend, credentials, settings files, memory, MCP servers) and
//! `/doctor` (each check with what to do when it fails).

use std::path::{Path, PathBuf};

use gyre_mcp::ServerState;

use crate::Environment;
use crate::session::Session;
use crate::settings::Settings;

/// One `/status` row: `Model` → `claude-sonnet-4-5`.
pub type StatusRow = (&'static str, String);

/// The settings files of `cwd` that exist, each with whether it applies: the user's
/// always, the project's only in a trusted folder (until then it is withheld).
#[must_use]
pub fn settings_files(gyre_home: &Path, cwd: &Path) -> Vec<(PathBuf, bool)> {
    let trusted = crate::trust::is_trusted(gyre_home, cwd);
    Settings::paths(gyre_home, cwd)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| {
            let applies = p.starts_with(gyre_home) || trusted;
            (p, applies)
        })
        .collect()
}

/// The rows of `/status`.
#[must_use]
pub fn status(session: &Session, gyre_home: &Path) -> Vec<StatusRow> {
    let facts = &session.facts;
    let cwd = Path::new(&facts.cwd);
    let backend = &facts.backend;
    let list = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    let settings = settings_files(gyre_home, cwd)
        .into_iter()
        .map(|(p, applies)| {
            let shown = p.display().to_string();
            if applies {
                shown
            } else {
                format!("{shown} (withheld: folder not trusted; `gyre trust`)")
            }
        })
        .collect();
    let memory = crate::system_prompt::memory_files(cwd)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let servers = session
        .mcp
        .status()
        .iter()
        .map(|s| {
            let state = match &s.state {
                ServerState::Connected => format!("connected, {} tools", s.tools.len()),
                ServerState::Failed { error } => format!("failed: {error}"),
                ServerState::Disabled => "disabled".to_owned(),
            };
            format!("{} ({state})", s.name)
        })
        .collect();
    let mut backend_line = format!("{} · {}", backend.backend, backend.base_url);
    if let Some(proxy) = &backend.proxy {
        backend_line.push_str(&format!(" · proxy {proxy}"));
    }
    vec![
        ("Version", format!("gyre {}", env!("CARGO_PKG_VERSION"))),
        ("Session ID", facts.session_id.clone()),
        ("cwd", facts.cwd.clone()),
        (
            "Working dirs",
            list(
                session
                    .engine
                    .working_dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect(),
            ),
        ),
        ("Model", facts.model()),
        ("Backend", backend_line),
        ("Auth", backend.credentials.clone()),
        ("Permission mode", session.gate.mode_name()),
        ("Settings", list(settings)),
        ("Memory", list(memory)),
        ("MCP servers", list(servers)),
    ]
}

/// How a `/doctor` check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Works, with a limit the user may want to lift.
    Warn,
    /// Broken: the check's fix says what to do.
    Fail,
}

/// One `/doctor` check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    /// What was found.
    pub detail: String,
    /// What to do about it (empty when nothing is needed).
    pub fix: String,
}

impl Check {
    fn new(name: &'static str, verdict: Verdict, detail: String, fix: &str) -> Self {
        Self {
            name,
            verdict,
            detail,
            fix: fix.to_owned(),
        }
    }
}

/// Memory files larger than this slow every request down; `/doctor` warns.
pub const LARGE_MEMORY_BYTES: u64 = 40_000;

/// Whether `program` is an executable file in one of `path`'s directories.
fn on_path(path: Option<&str>, program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.unwrap_or_default().split(':').any(|dir| {
        std::fs::metadata(Path::new(dir).join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Every `/doctor` check, in order: gyre's home, credentials, settings files, trust,
/// memory files, MCP servers, the sandbox, the programs tools need.
#[must_use]
pub fn doctor(session: &Session, env: &Environment) -> Vec<Check> {
    let facts = &session.facts;
    let cwd = Path::new(&facts.cwd);
    let home = env.gyre_home();
    let mut checks = Vec::new();

    let probe = home.join(format!(".doctor-{}", std::process::id()));
    let writable = std::fs::create_dir_all(&home)
        .and_then(|()| std::fs::write(&probe, b""))
        .and_then(|()| std::fs::remove_file(&probe));
    checks.push(match writable {
        Ok(()) => Check::new(
            "gyre home",
            Verdict::Ok,
            format!("{} is writable", home.display()),
            "",
        ),
        Err(e) => Check::new(
            "gyre home",
            Verdict::Fail,
            format!("{}: {e}", home.display()),
            "transcripts, history and saved rules go there: fix its permissions, or set GYRE_HOME to a writable folder",
        ),
    });

    checks.push(Check::new(
        "Credentials",
        Verdict::Ok,
        format!(
            "{} via {}",
            facts.backend.backend, facts.backend.credentials
        ),
        "",
    ));

    for path in Settings::paths(&home, cwd) {
        let text = match gyre_tools::read_config_file(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                checks.push(Check::new(
                    "Settings",
                    Verdict::Fail,
                    format!("{}: {e}", path.display()),
                    "make the file readable, or remove it",
                ));
                continue;
            }
        };
        checks.push(match Settings::parse(&path, &text) {
            Ok(_) => Check::new(
                "Settings",
                Verdict::Ok,
                format!("{} parses", path.display()),
                "",
            ),
            Err(e) => Check::new(
                "Settings",
                Verdict::Fail,
                e.to_string(),
                "fix the JSON at that line and column; gyre will not start with it broken",
            ),
        });
    }

    let withheld = settings_files(&home, cwd)
        .iter()
        .any(|(_, applies)| !applies)
        || !crate::trust::project_mcp_servers(cwd).is_empty();
    if withheld && !crate::trust::is_trusted(&home, cwd) {
        checks.push(Check::new(
            "Folder trust",
            Verdict::Warn,
            format!(
                "{} is not trusted: its settings' rules, hooks, env and MCP servers are withheld",
                cwd.display()
            ),
            "run `gyre trust` in this folder if you trust its repository",
        ));
    }

    for path in crate::system_prompt::memory_files(cwd) {
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        if size > LARGE_MEMORY_BYTES {
            checks.push(Check::new(
                "Memory",
                Verdict::Warn,
                format!(
                    "{} is {size} bytes, sent with every request",
                    path.display()
                ),
                "move what is rarely needed into files the model reads when it needs them",
            ));
        }
    }

    for server in &session.mcp.status() {
        if let ServerState::Failed { error } = &server.state {
            checks.push(Check::new(
                "MCP server",
                Verdict::Fail,
                format!("{}: {error}", server.name),
                "check the server's command or URL in .mcp.json or the settings; /mcp shows them",
            ));
        }
    }

    let sandbox = match (
        gyre_tools::sandbox::landlock_abi(),
        gyre_tools::sandbox::namespace::available(),
    ) {
        (Some(abi), true) => Check::new(
            "Sandbox",
            Verdict::Ok,
            format!(
                "Landlock {abi:?} and namespaces available: plan mode and sandbox.enabled are enforced by the kernel"
            ),
            "",
        ),
        _ => Check::new(
            "Sandbox",
            Verdict::Warn,
            gyre_tools::sandbox::unenforceable_reason().to_owned(),
            "gyre asks before each command it cannot confine; a kernel with Landlock (5.13+) and unprivileged user namespaces lifts this",
        ),
    };
    checks.push(sandbox);

    let path = env.var("PATH");
    for (program, why) in [
        ("bash", "the Bash tool runs commands with it"),
        ("git", "the model's git commands need it"),
    ] {
        if !on_path(path.as_deref(), program) {
            checks.push(Check::new(
                "Programs",
                Verdict::Fail,
                format!("{program} is not on PATH: {why}"),
                "install it, or add its folder to PATH",
            ));
        }
    }
    checks
}
