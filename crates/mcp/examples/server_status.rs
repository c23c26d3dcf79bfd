//! Reading an MCP config and starting its servers: a server that cannot start is a
//! status to show, never an error of the session.
//!
//! The config names a stdio server whose program does not exist; starting it reports
//! it `failed` with the reason, and the session goes on with the tools it has. A config
//! that is not the `mcpServers` shape is an error that names where it came from.
//!
//! Run it with `cargo run -p gyre-mcp --example server_status`.

use std::time::Duration;

use gyre_mcp::{McpConfig, McpServers, ServerState, StartOptions};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config = McpConfig::parse(
        "inline",
        r#"{"mcpServers": {
            "notes": {"command": "gyre-example-no-such-server", "args": ["--stdio"]}
        }}"#,
    )?;
    for (name, server) in config.servers() {
        println!("configured: {name} ({})", server.kind());
    }

    let cwd = std::env::temp_dir();
    let mut options = StartOptions::from_env(&cwd);
    options.startup_timeout = Duration::from_secs(10);
    let servers = McpServers::start(&config, &options).await;
    for status in servers.status() {
        match &status.state {
            ServerState::Connected => {
                println!("{}: connected, tools {:?}", status.name, status.tools);
            }
            ServerState::Failed { error } => println!("{}: failed: {error}", status.name),
            ServerState::Disabled => println!("{}: disabled", status.name),
        }
    }
    let status = servers.status();
    assert!(matches!(status[0].state, ServerState::Failed { .. }));
    assert!(servers.tools().is_empty());

    let bad = McpConfig::parse(
        "settings.json",
        r#"{"mcpServers": {"notes": {"args": []}}}"#,
    );
    let error = bad
        .err()
        .ok_or("a server without command or url is refused")?;
    println!("config error: {error}");
    assert!(error.to_string().starts_with("settings.json"));
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_example_runs() {
        assert!(super::main().is_ok());
    }
}
