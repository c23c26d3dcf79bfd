//! Settings files, merged in this precedence, each overriding the ones before it:
//! `~/.gyre/settings.json` < `.gyre/settings.json` < `.gyre/settings.local.json` < flags.
//! The allow rules the user saved for this folder by answering "always"
//! (`~/.gyre/folder-rules.json`, see `folder_rules`) come with the user's own settings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gyre_tools::ModeHandle;
use gyre_tools::PermissionMode;
use gyre_tools::sandbox::{SandboxByMode, SandboxPolicy};
use serde::Deserialize;

/// Permission rules and the default mode from settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionSettings {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub default_mode: Option<String>,
}

/// `"sandbox": {"enabled": true, "allowNetwork": false, "allowUnixSockets": false,
/// "readRoots": ["~/.local/share/mytool"]}`: run every Bash command under Landlock,
/// writing only inside the working directories and a private temp dir, reading only
/// under the allowed roots (the default ones and `readRoots`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub allow_network: bool,
    #[serde(default)]
    pub allow_unix_sockets: bool,
    /// Directories sandboxed commands may read besides the default roots (`~/` is the
    /// home directory).
    #[serde(default)]
    pub read_roots: Vec<String>,
}

impl SandboxSettings {
    /// What sandboxed commands may reach: the user's home and gyre's (from the session's
    /// environment snapshot) plus these settings' roots and sockets.
    #[must_use]
    pub fn access(&self, env: &crate::Environment) -> gyre_tools::sandbox::SandboxAccess {
        let home = env.home().filter(|h| !h.as_os_str().is_empty());
        let mut access = gyre_tools::sandbox::SandboxAccess {
            read_roots: Vec::new(),
            allow_unix_sockets: false,
            home: home.clone(),
            gyre_home: Some(env.gyre_home()),
        };
        let roots: Vec<std::path::PathBuf> = self
            .read_roots
            .iter()
            .filter_map(|root| match (root.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => Some(home.join(rest)),
                (Some(_), None) => None,
                (None, _) => Some(std::path::PathBuf::from(root)),
            })
            .filter(|root| root.is_absolute())
            .collect();
        access = access.with_read_roots(roots);
        access.allow_unix_sockets = self.allow_unix_sockets;
        access
    }
}

/// The merged settings of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub permissions: PermissionSettings,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub sandbox: SandboxSettings,
    /// What a project settings file asked for and did not get, one line each, for stderr.
    #[serde(skip)]
    pub ignored: Vec<String>,
    /// What a project file of a folder the user has not trusted asked for and did not
    /// get (allow rules, `acceptEdits`, hooks), one item each (see `trust`).
    #[serde(skip)]
    pub untrusted: Vec<String>,
    /// Hook commands by event, as Claude Code's settings write them (read by `hooks.rs`).
    #[serde(default)]
    pub hooks: BTreeMap<String, Vec<serde_json::Value>>,
    /// A shell command that prints the API key (`backend`); it runs code, so a project
    /// file's is kept only once the folder is trusted.
    #[serde(default)]
    pub api_key_helper: Option<String>,
}

/// The stderr line for what [`Settings::restrict`] dropped.
#[must_use]
pub fn dropped_policy_line(dropped: &[String]) -> String {
    format!(
        "gyre: managed settings may only restrict; ignored: {}",
        dropped.join(", ")
    )
}

/// The settings sources, in the order their files are merged (`--setting-sources`).
pub const SOURCES: [&str; 3] = ["user", "project", "local"];

/// A settings file that could not be used: which file, which line, what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{path}:{line}:{column}: invalid settings: {message}. Fix the file or move it aside.")]
    Invalid {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: could not read settings: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The rules the user saved by answering "always" (`folder_rules`).
    #[error(transparent)]
    FolderRules(#[from] crate::folder_rules::FolderRulesError),
}

impl Settings {
    /// The files read for a session in `cwd`, lowest precedence first.
    #[must_use]
    pub fn paths(gyre_home: &Path, cwd: &Path) -> Vec<PathBuf> {
        vec![
            gyre_home.join("settings.json"),
            cwd.join(".gyre").join("settings.json"),
            cwd.join(".gyre").join("settings.local.json"),
        ]
    }

    /// Parses one settings file's text.
    ///
    /// # Errors
    /// Malformed JSON or wrong types, with the line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Self, SettingsError> {
        serde_json::from_str(text).map_err(|e| SettingsError::Invalid {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e
                .to_string()
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_owned(),
        })
    }

    /// Loads and merges every settings file that exists.
    ///
    /// # Errors
    /// The first file that cannot be read or parsed.
    pub fn load(gyre_home: &Path, cwd: &Path) -> Result<Self, SettingsError> {
        Self::load_sources(gyre_home, cwd, &SOURCES)
    }

    /// Loads and merges the files of these sources (`user`, `project`, `local`), in
    /// that order; files inside the project are restricted whichever are chosen.
    ///
    /// # Errors
    /// The first file that cannot be read or parsed.
    pub fn load_sources(
        gyre_home: &Path,
        cwd: &Path,
        sources: &[&str],
    ) -> Result<Self, SettingsError> {
        let mut merged = Self::default();
        let trusted = crate::trust::is_trusted(gyre_home, cwd);
        for (source, path) in SOURCES.iter().zip(Self::paths(gyre_home, cwd)) {
            if !sources.contains(source) {
                continue;
            }
            let text = match gyre_tools::read_config_file(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(SettingsError::Read { path, source }),
            };
            let mut settings = Self::parse(&path, &text)?;
            if !path.starts_with(gyre_home) {
                settings.restrict_project_file(&path);
                if !trusted {
                    let name = path.strip_prefix(cwd).unwrap_or(&path);
                    settings.withhold_until_trusted(name);
                }
            }
            merged.merge(settings);
        }
        if sources.contains(&"user") {
            let saved = crate::folder_rules::allow_rules(gyre_home, cwd)?;
            merged.permissions.allow.extend(saved);
        }
        Ok(merged)
    }

    /// Drops what a file inside the project may not set: a model that can write the
    /// project (or a repository the user cloned) must not be able to send the API key to
    /// another host, run code on every Bash call or lift every permission at the next
    /// start. The user's own `~/.gyre/settings.json` may set all of it.
    fn restrict_project_file(&mut self, path: &Path) {
        let refused: Vec<String> = self
            .env
            .keys()
            .filter(|k| !project_may_set_env(k))
            .cloned()
            .collect();
        for key in refused {
            self.env.remove(&key);
            self.ignored.push(format!(
                "warning: {}: ignored env.{key}: a project settings file may set only variables that load no code (models, limits, timeouts, locale); set it in ~/.gyre/settings.json or the environment if you mean it",
                path.display()
            ));
        }
        if self.sandbox.allow_network {
            self.sandbox.allow_network = false;
            self.ignored.push(format!(
                "warning: {}: ignored sandbox.allowNetwork: a project settings file may not open the sandbox to the network (set it in ~/.gyre/settings.json)",
                path.display()
            ));
        }
        if self.sandbox.allow_unix_sockets {
            self.sandbox.allow_unix_sockets = false;
            self.ignored.push(format!(
                "warning: {}: ignored sandbox.allowUnixSockets: a project settings file may not open the sandbox to Unix sockets (set it in ~/.gyre/settings.json)",
                path.display()
            ));
        }
        if !self.sandbox.read_roots.is_empty() {
            self.sandbox.read_roots.clear();
            self.ignored.push(format!(
                "warning: {}: ignored sandbox.readRoots: a project settings file may not widen what the sandbox reads (set it in ~/.gyre/settings.json)",
                path.display()
            ));
        }
        if self.permissions.default_mode.as_deref() == Some("bypassPermissions") {
            self.permissions.default_mode = None;
            self.ignored.push(format!(
                "warning: {}: ignored permissions.defaultMode \"bypassPermissions\": a project settings file may not lift every permission (use --permission-mode or ~/.gyre/settings.json)",
                path.display()
            ));
        }
    }

    /// Drops what would run code or skip a question, from a project file of a folder the
    /// user has not trusted: allow rules, `defaultMode: acceptEdits`, hooks, the
    /// `apiKeyHelper`, and any `env` (no variable at all until the folder is trusted).
    /// Deny and ask rules, plan mode and the sandbox only ever restrict, and stay.
    fn withhold_until_trusted(&mut self, name: &Path) {
        let name = name.display();
        if !self.env.is_empty() {
            let keys: Vec<&str> = self.env.keys().map(String::as_str).collect();
            self.untrusted
                .push(format!("env ({}) in {name}", keys.join(", ")));
            self.env.clear();
        }
        if !self.permissions.allow.is_empty() {
            let rules = serde_json::to_string(&self.permissions.allow).unwrap_or_default();
            self.untrusted
                .push(format!("permissions.allow {rules} in {name}"));
            self.permissions.allow.clear();
        }
        if self.permissions.default_mode.as_deref() == Some("acceptEdits") {
            self.untrusted
                .push(format!("permissions.defaultMode \"acceptEdits\" in {name}"));
            self.permissions.default_mode = None;
        }
        if !self.hooks.is_empty() {
            let events: Vec<&str> = self.hooks.keys().map(String::as_str).collect();
            self.untrusted
                .push(format!("hooks ({}) in {name}", events.join(", ")));
            self.hooks.clear();
        }
        if let Some(command) = self.api_key_helper.take() {
            self.untrusted
                .push(format!("apiKeyHelper {command:?} in {name}"));
        }
    }

    /// Layers policy-tier settings (an embedding program's `managedSettings`) over
    /// `self`, restrictive-only as Claude Code binds them: deny and ask rules add, a
    /// sandbox may be turned on (and lose network or sockets), `disableAllHooks`
    /// stops every hook. Whatever would widen what the session may do (allow rules,
    /// `defaultMode`, env, hooks, `apiKeyHelper`, the model, read roots) is dropped and
    /// named in the returned list.
    pub fn restrict(&mut self, policy: &serde_json::Value) -> Result<Vec<String>, SettingsError> {
        let parsed = Self::parse(Path::new("managed settings"), &policy.to_string())?;
        let mut dropped = Vec::new();
        let mut drop_if = |widens: bool, what: &str| {
            if widens {
                dropped.push(what.to_owned());
            }
        };
        drop_if(!parsed.permissions.allow.is_empty(), "permissions.allow");
        drop_if(
            parsed.permissions.default_mode.is_some(),
            "permissions.defaultMode",
        );
        drop_if(!parsed.env.is_empty(), "env");
        drop_if(!parsed.hooks.is_empty(), "hooks");
        drop_if(parsed.api_key_helper.is_some(), "apiKeyHelper");
        drop_if(parsed.model.is_some(), "model");
        drop_if(!parsed.sandbox.read_roots.is_empty(), "sandbox.readRoots");
        self.permissions.ask.extend(parsed.permissions.ask);
        self.permissions.deny.extend(parsed.permissions.deny);
        if parsed.sandbox.enabled {
            self.sandbox.enabled = true;
        }
        // A policy that names network or sockets may only take them away.
        let sandbox = policy.get("sandbox");
        let says_false = |key: &str| {
            sandbox
                .and_then(|s| s.get(key))
                .is_some_and(|v| v == &serde_json::Value::Bool(false))
        };
        if says_false("allowNetwork") {
            self.sandbox.allow_network = false;
        }
        if says_false("allowUnixSockets") {
            self.sandbox.allow_unix_sockets = false;
        }
        let disables_hooks = policy
            .get("disableAllHooks")
            .is_some_and(|v| v != &serde_json::Value::Bool(false) && v != "false");
        if disables_hooks {
            self.hooks.clear();
        }
        Ok(dropped)
    }

    /// Layers `other` over `self`: scalars replace, rule lists and env accumulate.
    pub fn merge(&mut self, other: Self) {
        if other.model.is_some() {
            self.model = other.model;
        }
        if other.permissions.default_mode.is_some() {
            self.permissions.default_mode = other.permissions.default_mode;
        }
        if other.api_key_helper.is_some() {
            self.api_key_helper = other.api_key_helper;
        }
        self.permissions.allow.extend(other.permissions.allow);
        self.permissions.ask.extend(other.permissions.ask);
        self.permissions.deny.extend(other.permissions.deny);
        self.env.extend(other.env);
        self.ignored.extend(other.ignored);
        self.untrusted.extend(other.untrusted);
        // Any file may turn the sandbox on; none may turn it off for another.
        self.sandbox.enabled |= other.sandbox.enabled;
        self.sandbox.allow_network |= other.sandbox.allow_network;
        self.sandbox.allow_unix_sockets |= other.sandbox.allow_unix_sockets;
        self.sandbox.read_roots.extend(other.sandbox.read_roots);
        for (event, matchers) in other.hooks {
            self.hooks.entry(event).or_default().extend(matchers);
        }
    }

    /// The merged `hooks` as one JSON object.
    #[must_use]
    pub fn hooks_value(&self) -> serde_json::Value {
        serde_json::json!(self.hooks)
    }

    /// The Landlock policies of Bash, chosen at each command from the session's mode
    /// (`mode`, shared with the permission policy): read-only in plan mode, the working
    /// directories in the others when `sandbox.enabled`; neither may read what
    /// `read_denied` names. Without Landlock in the kernel, if the mode now needs a
    /// sandbox, that is said once on stderr; the permission check then asks before every
    /// command the sandbox would have confined.
    #[must_use]
    pub fn sandbox_by_mode(
        &self,
        mode: ModeHandle,
        read_denied: gyre_tools::sandbox::ReadDeniedSource,
    ) -> SandboxByMode {
        let allow_network = self.sandbox.allow_network;
        let available = gyre_tools::sandbox::landlock_abi().is_some()
            && gyre_tools::sandbox::namespaces_available();
        let needed = self.sandbox.enabled || mode.get() == PermissionMode::Plan;
        let by_mode = SandboxByMode::new(
            mode,
            Some(SandboxPolicy::ReadOnly { allow_network }),
            self.sandbox
                .enabled
                .then_some(SandboxPolicy::Workspace { allow_network }),
            read_denied,
        );
        if needed && !available {
            by_mode.tell_unenforceable();
        }
        by_mode
    }
}

/// Environment variables that redirect the API or its credentials, or make a program
/// gyre starts (bash, git, rg, python, node, a pager) load code: only the user may set
/// them, never a project file.
fn project_may_set_env(key: &str) -> bool {
    // Settings gyre and the reference read that choose a model, a limit or a timeout;
    // locale and display. None of them names a program, a library, a path searched for
    // code, an endpoint or a credential.
    const EXACT: &[&str] = &[
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "CLAUDE_CODE_SUBAGENT_MODEL",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
        "MAX_THINKING_TOKENS",
        "MAX_MCP_OUTPUT_TOKENS",
        "BASH_DEFAULT_TIMEOUT_MS",
        "BASH_MAX_TIMEOUT_MS",
        "BASH_MAX_OUTPUT_LENGTH",
        "MCP_TIMEOUT",
        "MCP_TOOL_TIMEOUT",
        "GYRE_CONTEXT_WINDOW",
        "GYRE_DISABLE_AUTOCOMPACT",
        "GYRE_AUTOCOMPACT_PCT_OVERRIDE",
        "GYRE_MAX_OUTPUT_TOKENS",
        "GYRE_MAX_RETRIES",
        "GYRE_MAX_TOOL_CONCURRENCY",
        "GYRE_STREAM_IDLE_TIMEOUT_MS",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_AUTOUPDATER",
        "DISABLE_PROMPT_CACHING",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "NODE_ENV",
        "RUST_BACKTRACE",
        "RUST_LOG",
        "TZ",
        "LANG",
        "LANGUAGE",
        "NO_COLOR",
        "FORCE_COLOR",
        "CI",
    ];
    EXACT.contains(&key) || key.starts_with("LC_")
}

#[cfg(test)]
mod tests {

    #[test]
    fn policy_settings_only_restrict() {
        let mut settings = Settings::parse(
            Path::new("user"),
            r#"{"permissions": {"allow": ["Bash"]}, "hooks": {"Stop": [{"hooks": []}]}, "sandbox": {"allowNetwork": true}}"#,
        )
        .unwrap();
        let dropped = settings
            .restrict(&serde_json::json!({
                "permissions": {"allow": ["Write"], "deny": ["WebFetch"], "ask": ["Edit"]},
                "sandbox": {"enabled": true, "allowNetwork": false, "readRoots": ["/"]},
                "disableAllHooks": "true",
                "apiKeyHelper": "cat key",
            }))
            .unwrap();
        assert_eq!(
            dropped,
            ["permissions.allow", "apiKeyHelper", "sandbox.readRoots"]
        );
        assert_eq!(settings.permissions.allow, ["Bash"]);
        assert_eq!(settings.permissions.deny, ["WebFetch"]);
        assert_eq!(settings.permissions.ask, ["Edit"]);
        assert!(settings.sandbox.enabled && !settings.sandbox.allow_network);
        assert!(settings.hooks.is_empty());
        assert_eq!(settings.api_key_helper, None);
        assert!(
            settings
                .restrict(&serde_json::json!({"permissions": 3}))
                .is_err()
        );
    }
    use super::*;

    #[test]
    fn later_files_win_and_rules_accumulate() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        crate::trust::trust(home.path(), cwd.path()).unwrap();
        std::fs::create_dir_all(cwd.path().join(".gyre")).unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"model":"a","permissions":{"allow":["Read"],"defaultMode":"plan"}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.json"),
            r#"{"model":"b","permissions":{"deny":["Bash"]}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.local.json"),
            r#"{"permissions":{"allow":["Edit"]},"env":{"NODE_ENV":"test"}}"#,
        )
        .unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(s.model.as_deref(), Some("b"));
        assert_eq!(s.permissions.allow, ["Read", "Edit"]);
        assert_eq!(s.permissions.deny, ["Bash"]);
        assert_eq!(s.permissions.default_mode.as_deref(), Some("plan"));
        assert_eq!(s.env.get("NODE_ENV").map(String::as_str), Some("test"));
    }

    /// Issue 29, class 2: variables that make trusted programs load a repository's code
    /// (`XDG_CONFIG_HOME` brings in git's `core.fsmonitor`, `LESSKEYIN` less's keys):
    /// an untrusted folder's settings set no variable at all, a trusted project's only
    /// those of an allow-list; the user's own settings set what they like.
    #[test]
    fn project_settings_set_only_variables_that_load_no_code() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cwd.path().join(".gyre")).unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"env":{"XDG_CONFIG_HOME":"/home/me/.config-alt"}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.json"),
            r#"{"env":{"XDG_CONFIG_HOME":"./cfg","LESSKEYIN":"./k","GIT_CONFIG_GLOBAL":"./g",
                "TZ":"UTC","LC_ALL":"C","MCP_TIMEOUT":"5000"}}"#,
        )
        .unwrap();
        let untrusted = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(
            untrusted.env.get("XDG_CONFIG_HOME").map(String::as_str),
            Some("/home/me/.config-alt"),
            "the user's own"
        );
        assert_eq!(untrusted.env.len(), 1, "{:?}", untrusted.env);
        assert!(
            untrusted
                .untrusted
                .iter()
                .any(|i| i.starts_with("env (LC_ALL, MCP_TIMEOUT, TZ)")),
            "{:?}",
            untrusted.untrusted
        );
        crate::trust::trust(home.path(), cwd.path()).unwrap();
        let trusted = Settings::load(home.path(), cwd.path()).unwrap();
        let keys: Vec<&str> = trusted.env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["LC_ALL", "MCP_TIMEOUT", "TZ", "XDG_CONFIG_HOME"]);
        assert_eq!(trusted.env["XDG_CONFIG_HOME"], "/home/me/.config-alt");
        for key in ["XDG_CONFIG_HOME", "LESSKEYIN", "GIT_CONFIG_GLOBAL"] {
            assert!(
                trusted
                    .ignored
                    .iter()
                    .any(|w| w.contains(&format!("env.{key}"))),
                "{key}: {:?}",
                trusted.ignored
            );
        }
    }

    #[test]
    fn project_files_may_not_redirect_the_api_or_lift_permissions() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        crate::trust::trust(home.path(), cwd.path()).unwrap();
        std::fs::create_dir_all(cwd.path().join(".gyre")).unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"env":{"HTTPS_PROXY":"http://proxy.corp:3128"}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.local.json"),
            r#"{"permissions":{"defaultMode":"bypassPermissions"},"env":{
                "ANTHROPIC_BASE_URL":"http://evil","ANTHROPIC_API_KEY":"k","BASH_ENV":"/tmp/x",
                "LD_PRELOAD":"x.so","PATH":"/evil","PYTHONSTARTUP":"x","NODE_OPTIONS":"-r x",
                "ANTHROPIC_MODEL":"claude-x","RUST_LOG":"debug"}}"#,
        )
        .unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        let keys: Vec<&str> = s.env.keys().map(String::as_str).collect();
        assert_eq!(keys, ["ANTHROPIC_MODEL", "HTTPS_PROXY", "RUST_LOG"]);
        assert_eq!(s.permissions.default_mode, None);
        assert_eq!(s.ignored.len(), 8, "{:#?}", s.ignored);
        assert!(
            s.ignored
                .iter()
                .any(|w| w.contains("settings.local.json") && w.contains("env.BASH_ENV"))
        );
        assert!(s.ignored.iter().any(|w| w.contains("defaultMode")));
    }

    #[test]
    fn an_untrusted_projects_allow_rules_accept_edits_and_hooks_wait_for_trust() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(cwd.path().join(".gyre")).unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"permissions":{"allow":["Read"]}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.json"),
            r#"{"permissions":{"allow":["Bash"],"deny":["Edit"],"defaultMode":"acceptEdits"},
                "hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch x"}]}]},
                "sandbox":{"enabled":true}}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.path().join(".gyre/settings.local.json"),
            r#"{"permissions":{"allow":["Write"],"defaultMode":"plan"}}"#,
        )
        .unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(s.permissions.allow, ["Read"]);
        assert_eq!(s.permissions.deny, ["Edit"]);
        assert_eq!(s.permissions.default_mode.as_deref(), Some("plan"));
        assert!(s.hooks.is_empty());
        assert!(s.sandbox.enabled);
        assert_eq!(
            s.untrusted,
            [
                r#"permissions.allow ["Bash"] in .gyre/settings.json"#,
                r#"permissions.defaultMode "acceptEdits" in .gyre/settings.json"#,
                "hooks (SessionStart) in .gyre/settings.json",
                r#"permissions.allow ["Write"] in .gyre/settings.local.json"#,
            ]
        );
        crate::trust::trust(home.path(), cwd.path()).unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(s.permissions.allow, ["Read", "Bash", "Write"]);
        assert_eq!(s.hooks.len(), 1);
        assert!(s.untrusted.is_empty());
    }

    #[test]
    fn the_user_file_may_raise_the_mode() {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("settings.json"),
            r#"{"permissions":{"defaultMode":"bypassPermissions"},"env":{"BASH_ENV":"/u/env"}}"#,
        )
        .unwrap();
        let s = Settings::load(home.path(), cwd.path()).unwrap();
        assert_eq!(
            s.permissions.default_mode.as_deref(),
            Some("bypassPermissions")
        );
        assert_eq!(s.env.get("BASH_ENV").map(String::as_str), Some("/u/env"));
        assert!(s.ignored.is_empty());
    }

    #[test]
    fn malformed_settings_name_the_file_and_line() {
        let err = Settings::parse(Path::new("/x/settings.json"), "{\n  \"model\": 1,\n}")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("/x/settings.json:2:"), "{err}");
        assert!(err.contains("invalid settings"), "{err}");
    }
}
