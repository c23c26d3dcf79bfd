//! Plugins given by the program that starts gyre (`--plugin-dir`, `--plugin-dir-no-mcp`,
//! an Agent SDK's `plugins`): folders laid out as Claude Code's plugins, whose
//! `commands/`, `skills/` and `agents/` join the session's through the same loaders
//! the `.claude` folders go through, whose `hooks/hooks.json` adds hook commands, and
//! whose `.mcp.json` adds MCP servers (not with `--plugin-dir-no-mcp`). `${CLAUDE_PLUGIN_ROOT}`
//! in a hook command or a server entry is the plugin's folder. Nothing here is read
//! unless a plugin is given.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::CoreError;

/// The variable a plugin's hooks and servers name their own folder by.
const ROOT_VARIABLE: &str = "${CLAUDE_PLUGIN_ROOT}";

/// One plugin folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    /// The folder (absolute once [`resolve`] has run).
    pub dir: PathBuf,
    /// Whether its `.mcp.json` servers are started (`--plugin-dir`), or the program
    /// runs them itself (`--plugin-dir-no-mcp`, `skipMcpDiscovery`).
    pub mcp: bool,
}

/// `plugins`, relative folders taken from `cwd`, each checked to be a folder.
///
/// # Errors
/// A plugin that is not a folder, named.
pub fn resolve(plugins: &[Plugin], cwd: &Path) -> Result<Vec<Plugin>, CoreError> {
    plugins
        .iter()
        .map(|p| {
            let dir = if p.dir.is_absolute() {
                p.dir.clone()
            } else {
                cwd.join(&p.dir)
            };
            if dir.is_dir() {
                Ok(Plugin { dir, mcp: p.mcp })
            } else {
                Err(CoreError::Invalid(format!(
                    "--plugin-dir {}: not a directory; a plugin is a folder holding commands/, agents/, skills/, hooks/hooks.json or .mcp.json",
                    p.dir.display()
                )))
            }
        })
        .collect()
}

/// `text` with `${CLAUDE_PLUGIN_ROOT}` replaced by the plugin's folder (as a JSON
/// string's content, so a folder with quotes or backslashes stays valid JSON).
fn with_root(text: &str, dir: &Path) -> String {
    let quoted = serde_json::to_string(&dir.display().to_string()).unwrap_or_default();
    let inner = quoted
        .strip_prefix('"')
        .and_then(|q| q.strip_suffix('"'))
        .unwrap_or_default();
    text.replace(ROOT_VARIABLE, inner)
}

/// A JSON file of the plugin's, with its folder put in; `None` when there is none.
fn read_json(dir: &Path, relative: &str) -> Result<Option<Value>, CoreError> {
    let path = dir.join(relative);
    if !path.is_file() {
        return Ok(None);
    }
    let text = gyre_tools::read_config_file(&path)
        .map_err(CoreError::io("could not read the plugin file", &path))?;
    serde_json::from_str(&with_root(&text, dir))
        .map(Some)
        .map_err(|e| CoreError::Invalid(format!("{}: {e}", path.display())))
}

/// The plugin's hooks (`hooks/hooks.json`: `{"hooks": {"PreToolUse": […]}}`, or the
/// map itself), as the `hooks` of a settings file.
///
/// # Errors
/// An unreadable or invalid file.
pub fn hooks(plugin: &Plugin) -> Result<Option<Value>, CoreError> {
    Ok(read_json(&plugin.dir, "hooks/hooks.json")?
        .map(|root| root.get("hooks").cloned().unwrap_or(root)))
}

/// The plugin's MCP servers (`.mcp.json`: `{"mcpServers": {…}}` or the map itself) as
/// the text of an `--mcp-config` file; `None` without them or with `mcp` off.
///
/// # Errors
/// An unreadable or invalid file.
pub fn mcp_servers(plugin: &Plugin) -> Result<Option<String>, CoreError> {
    if !plugin.mcp {
        return Ok(None);
    }
    Ok(read_json(&plugin.dir, ".mcp.json")?.map(|root| {
        if root.get("mcpServers").is_some() {
            root.to_string()
        } else {
            serde_json::json!({ "mcpServers": root }).to_string()
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_folder_goes_into_its_hooks_and_servers_and_no_mcp_skips_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
        std::fs::write(
            dir.path().join("hooks/hooks.json"),
            r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/stop.sh"}]}]}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(".mcp.json"),
            r#"{"db": {"command": "${CLAUDE_PLUGIN_ROOT}/db"}}"#,
        )
        .unwrap();
        let plugin = &resolve(
            &[Plugin {
                dir: dir.path().to_path_buf(),
                mcp: true,
            }],
            Path::new("/"),
        )
        .unwrap()[0];
        let hooks = hooks(plugin).unwrap().unwrap();
        assert_eq!(
            hooks["Stop"][0]["hooks"][0]["command"],
            format!("{}/stop.sh", dir.path().display())
        );
        let servers: Value = serde_json::from_str(&mcp_servers(plugin).unwrap().unwrap()).unwrap();
        assert_eq!(
            servers["mcpServers"]["db"]["command"],
            format!("{}/db", dir.path().display())
        );
        let quiet = Plugin {
            mcp: false,
            ..plugin.clone()
        };
        assert_eq!(mcp_servers(&quiet).unwrap(), None);
        let missing = resolve(
            &[Plugin {
                dir: dir.path().join("nope"),
                mcp: true,
            }],
            Path::new("/"),
        )
        .unwrap_err()
        .to_string();
        assert!(missing.contains("not a directory"), "{missing}");
    }
}
