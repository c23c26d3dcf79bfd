//! Which MCP servers a session uses, in Claude Code's format:
//! `{"mcpServers": {"name": {"command", "args", "env"} | {"type": "http" | "sse", "url",
//! "headers"} | {"type": "sdk"}}}`, from `--mcp-config` (a file or inline JSON) and the
//! project's `.mcp.json`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// How to reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerConfig {
    /// A child process speaking JSON-RPC on its stdin and stdout.
    Stdio {
        /// The program to run.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP (`"type": "http"`).
    Http {
        /// The server's endpoint.
        url: String,
        /// Headers sent with every request (authorization, …).
        headers: BTreeMap<String, String>,
    },
    /// The deprecated HTTP+SSE transport (`"type": "sse"`).
    Sse {
        /// The server's endpoint.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
    /// A server living in the Agent SDK program that drives gyre, reached through the
    /// stream-json control protocol (`mcp_message` control requests).
    Sdk,
}

impl ServerConfig {
    /// The transport's name as the config spells it.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
            Self::Sse { .. } => "sse",
            Self::Sdk => "sdk",
        }
    }
}

/// A set of named servers, in the order they were configured.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    servers: Vec<(String, ServerConfig)>,
}

/// A config that could not be used: where it came from and what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config is not valid JSON, or not the `mcpServers` shape.
    #[error("{origin}: invalid MCP config: {message}")]
    Invalid {
        /// Where the config came from (a file path, `--mcp-config`).
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// A server name that cannot be part of a tool name.
    #[error(
        "{origin}: invalid MCP config: server name {name:?} may use only letters, digits, '_' and '-' (it becomes part of tool names)"
    )]
    BadName {
        /// Where the config came from.
        origin: String,
        /// The name.
        name: String,
    },
    /// One server's entry is wrong.
    #[error("{origin}: invalid MCP config: server {name:?}: {source}")]
    Server {
        /// Where the config came from.
        origin: String,
        /// The server's name.
        name: String,
        /// What is wrong with its entry.
        source: ServerConfigError,
    },
    /// The config file could not be read.
    #[error("{origin}: could not read the MCP config: {source}")]
    Read {
        /// The file's path.
        origin: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl McpConfig {
    /// The servers, in configuration order.
    #[must_use]
    pub fn servers(&self) -> &[(String, ServerConfig)] {
        &self.servers
    }

    /// Whether no server is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Adds a server; one of the same name is replaced (later sources win).
    pub fn insert(&mut self, name: impl Into<String>, server: ServerConfig) {
        let name = name.into();
        self.servers.retain(|(n, _)| *n != name);
        self.servers.push((name, server));
    }

    /// Adds every server of `other`, replacing those of the same name.
    pub fn merge(&mut self, other: McpConfig) {
        for (name, server) in other.servers {
            self.insert(name, server);
        }
    }

    /// Keeps only the servers `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &ServerConfig) -> bool) {
        self.servers.retain(|(name, server)| keep(name, server));
    }

    /// Parses the text of a config; `origin` (a path or `--mcp-config`) names it in errors.
    ///
    /// # Errors
    /// Malformed JSON (with line and column), no `mcpServers` object, a server without
    /// `command` or `url`, an unknown `type`, a name that cannot be part of a tool name.
    pub fn parse(origin: &str, text: &str) -> Result<Self, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            message,
        };
        let root: Value = serde_json::from_str(text).map_err(|e| {
            invalid(format!(
                "line {}, column {}: {}",
                e.line(),
                e.column(),
                e.to_string().split(" at line ").next().unwrap_or_default()
            ))
        })?;
        let Some(servers) = root.get("mcpServers") else {
            return Err(invalid(
                r#"no "mcpServers" object; write {"mcpServers": {"name": {"command": "…"}}}"#
                    .to_owned(),
            ));
        };
        let Some(servers) = servers.as_object() else {
            return Err(invalid(
                r#""mcpServers" must be an object of named servers"#.to_owned(),
            ));
        };
        let mut config = Self::default();
        for (name, server) in servers {
            if !check_name(name) {
                return Err(ConfigError::BadName {
                    origin: origin.to_owned(),
                    name: name.clone(),
                });
            }
            let server = parse_server(server).map_err(|source| ConfigError::Server {
                origin: origin.to_owned(),
                name: name.clone(),
                source,
            })?;
            config.insert(name.clone(), server);
        }
        Ok(config)
    }

    /// One `--mcp-config` value: inline JSON when it starts with `{`, otherwise a file.
    ///
    /// # Errors
    /// An unreadable file or an invalid config.
    pub fn from_arg(arg: &str) -> Result<Self, ConfigError> {
        if arg.trim_start().starts_with('{') {
            return Self::parse("inline JSON", arg);
        }
        Self::from_file(Path::new(arg))
    }

    /// A config file (`.mcp.json`, or a file given to `--mcp-config`).
    ///
    /// # Errors
    /// An unreadable file or an invalid config.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let origin = path.display().to_string();
        let text = gyre_tools::read_config_file(path).map_err(|source| ConfigError::Read {
            origin: origin.clone(),
            source,
        })?;
        Self::parse(&origin, &text)
    }
}

/// Server names become part of tool names (`mcp__<server>__<tool>`) and permission rules.
fn check_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What is wrong with one server's entry in a config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerConfigError {
    /// The entry is not a JSON object.
    #[error("expected an object")]
    NotObject,
    /// `type` is not a string.
    #[error("\"type\" must be a string, not {0}")]
    TypeNotString(Value),
    /// A stdio server without `command`.
    #[error(r#"needs "command" (or "type": "http" with a "url")"#)]
    NoCommand,
    /// An HTTP or SSE server without `url`.
    #[error(r#"a {kind} server needs "url""#)]
    NoUrl {
        /// `http` or `sse`.
        kind: String,
    },
    /// A `type` gyre does not know.
    #[error("unknown \"type\" {0:?}; use \"stdio\", \"http\", \"sse\" or \"sdk\"")]
    UnknownType(String),
    /// A string field that is blank.
    #[error("\"{field}\" is empty")]
    Empty {
        /// The field.
        field: String,
    },
    /// A field (or a map's entry, `env.KEY`) that should be a string.
    #[error("\"{field}\" must be a string, not {found}")]
    NotString {
        /// The field.
        field: String,
        /// What it holds.
        found: Value,
    },
    /// A list holding something other than strings.
    #[error("\"{field}\" must hold strings, not {item}")]
    NotStringItem {
        /// The field.
        field: String,
        /// The item at fault.
        item: Value,
    },
    /// A field that should be a list of strings.
    #[error("\"{field}\" must be a list of strings, not {found}")]
    NotList {
        /// The field.
        field: String,
        /// What it holds.
        found: Value,
    },
    /// A field that should be an object of strings.
    #[error("\"{field}\" must be an object of strings, not {found}")]
    NotMap {
        /// The field.
        field: String,
        /// What it holds.
        found: Value,
    },
}

fn parse_server(server: &Value) -> Result<ServerConfig, ServerConfigError> {
    let Some(object) = server.as_object() else {
        return Err(ServerConfigError::NotObject);
    };
    let kind = match object.get("type") {
        None => "stdio",
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => return Err(ServerConfigError::TypeNotString(other.clone())),
    };
    match kind {
        "stdio" => Ok(ServerConfig::Stdio {
            command: string_field(server, "command")?.ok_or(ServerConfigError::NoCommand)?,
            args: string_list(server, "args")?,
            env: string_map(server, "env")?,
        }),
        "http" | "sse" => {
            let url = string_field(server, "url")?.ok_or_else(|| ServerConfigError::NoUrl {
                kind: kind.to_owned(),
            })?;
            let headers = string_map(server, "headers")?;
            Ok(if kind == "http" {
                ServerConfig::Http { url, headers }
            } else {
                ServerConfig::Sse { url, headers }
            })
        }
        "sdk" => Ok(ServerConfig::Sdk),
        other => Err(ServerConfigError::UnknownType(other.to_owned())),
    }
}

fn string_field(server: &Value, field: &str) -> Result<Option<String>, ServerConfigError> {
    match server.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(ServerConfigError::Empty {
            field: field.to_owned(),
        }),
        Some(other) => Err(ServerConfigError::NotString {
            field: field.to_owned(),
            found: other.clone(),
        }),
    }
}

fn string_list(server: &Value, field: &str) -> Result<Vec<String>, ServerConfigError> {
    match server.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| ServerConfigError::NotStringItem {
                        field: field.to_owned(),
                        item: item.clone(),
                    })
            })
            .collect(),
        Some(other) => Err(ServerConfigError::NotList {
            field: field.to_owned(),
            found: other.clone(),
        }),
    }
}

fn string_map(server: &Value, field: &str) -> Result<BTreeMap<String, String>, ServerConfigError> {
    match server.get(field) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(s) => Ok((key.clone(), s.clone())),
                other => Err(ServerConfigError::NotString {
                    field: format!("{field}.{key}"),
                    found: other.clone(),
                }),
            })
            .collect(),
        Some(other) => Err(ServerConfigError::NotMap {
            field: field.to_owned(),
            found: other.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_four_kinds_of_server() {
        let config = McpConfig::parse(
            "test",
            r#"{"mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "1"}},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "k"}},
                "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
                "probe": {"type": "sdk", "name": "probe"}
            }}"#,
        )
        .unwrap();
        let kinds: Vec<(&str, &str)> = config
            .servers()
            .iter()
            .map(|(n, s)| (n.as_str(), s.kind()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("files", "stdio"),
                ("old", "sse"),
                ("probe", "sdk"),
                ("web", "http")
            ]
        );
        assert_eq!(
            config.servers()[0].1,
            ServerConfig::Stdio {
                command: "npx".into(),
                args: vec!["-y".into(), "server".into()],
                env: BTreeMap::from([("A".into(), "1".into())]),
            }
        );
    }

    #[test]
    fn errors_name_the_server_and_what_is_missing() {
        let err = McpConfig::parse("x.json", r#"{"mcpServers": {"a": {"args": []}}}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("x.json: invalid MCP config: server \"a\": needs \"command\""),
            "{err}"
        );
        let err = McpConfig::parse(
            "x.json",
            r#"{"mcpServers": {"a": {"type": "ws", "url": "u"}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown \"type\" \"ws\""), "{err}");
        let err = McpConfig::parse("x.json", r#"{"servers": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no \"mcpServers\" object"), "{err}");
        let err = McpConfig::parse("x.json", "{\n  \"mcpServers\": ,\n}")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2, column"), "{err}");
        let err = McpConfig::parse("x.json", r#"{"mcpServers": {"a b": {"command": "c"}}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("may use only letters"), "{err}");
    }

    #[test]
    fn later_configs_replace_servers_of_the_same_name() {
        let mut config =
            McpConfig::parse("a", r#"{"mcpServers": {"s": {"command": "one"}}}"#).unwrap();
        config
            .merge(McpConfig::parse("b", r#"{"mcpServers": {"s": {"command": "two"}}}"#).unwrap());
        assert_eq!(config.servers().len(), 1);
        assert!(
            matches!(&config.servers()[0].1, ServerConfig::Stdio { command, .. } if command == "two")
        );
    }

    #[test]
    fn an_argument_is_inline_json_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("servers.json");
        std::fs::write(&path, r#"{"mcpServers": {"f": {"type": "sdk"}}}"#).unwrap();
        assert_eq!(
            McpConfig::from_arg(path.to_str().unwrap())
                .unwrap()
                .servers()[0]
                .0,
            "f"
        );
        assert_eq!(
            McpConfig::from_arg(r#" {"mcpServers": {"i": {"type": "sdk"}}}"#)
                .unwrap()
                .servers()[0]
                .0,
            "i"
        );
        let missing = dir.path().join("nope.json");
        let err = McpConfig::from_arg(missing.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("could not read the MCP config"), "{err}");
    }
}
