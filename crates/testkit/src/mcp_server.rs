//! `gyre-test-mcp`: a small MCP server for gyre's tests, built on rmcp's server side.
//!
//! ```text
//! gyre-test-mcp [--http] [--pid-file PATH] [--spawn-grandchild] [--exit-at-start]
//! ```
//!
//! On stdio by default; with `--http` it serves streamable HTTP on 127.0.0.1 and prints
//! its URL as the first line of stdout. `--pid-file` appends its pid (and the
//! grandchild's, with `--spawn-grandchild`) so a test can check nothing outlives gyre.
//!
//! Tools: `echo` (read-only), `add` (text and structured content), `fail` (an `isError`
//! result), `crash` (the process exits mid-call), `sleep` (answers after `ms`), `image`
//! (a PNG), `resource` (an embedded text resource). Resource: `test://greeting`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

#[derive(Debug, Clone, Copy)]
struct TestServer;

fn parse<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![rmcp::model::ContentBlock::text(text)])
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let object = |properties: Value, required: &[&str]| json!({"type": "object", "properties": properties, "required": required});
        parse(json!({"tools": [
            {
                "name": "echo",
                "description": "Returns its text.",
                "inputSchema": object(json!({"text": {"type": "string"}}), &["text"]),
                "annotations": {"readOnlyHint": true}
            },
            {
                "name": "add",
                "description": "Adds two numbers.",
                "inputSchema": object(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"])
            },
            {
                "name": "fail",
                "description": "Answers with an error result.",
                "inputSchema": object(json!({"message": {"type": "string"}}), &["message"])
            },
            {
                "name": "crash",
                "description": "Exits the server in the middle of the call.",
                "inputSchema": object(json!({}), &[])
            },
            {
                "name": "sleep",
                "description": "Answers after ms milliseconds.",
                "inputSchema": object(json!({"ms": {"type": "integer"}}), &["ms"])
            },
            {
                "name": "image",
                "description": "Returns a tiny PNG.",
                "inputSchema": object(json!({}), &[]),
                "annotations": {"readOnlyHint": true}
            },
            {
                "name": "resource",
                "description": "Returns an embedded text resource.",
                "inputSchema": object(json!({}), &[])
            }
        ]}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match request.name.as_ref() {
            "echo" => text_result(args["text"].as_str().unwrap_or_default()),
            "add" => {
                let sum = args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0);
                parse(json!({
                    "content": [{"type": "text", "text": sum.to_string()}],
                    "structuredContent": {"sum": sum}
                }))?
            }
            "fail" => parse(json!({
                "content": [{"type": "text", "text": args["message"].as_str().unwrap_or("failed")}],
                "isError": true
            }))?,
            "crash" => {
                eprintln!("gyre-test-mcp: crashing on purpose");
                std::process::exit(3);
            }
            "sleep" => {
                let ms = args["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                text_result(format!("slept {ms} ms"))
            }
            "image" => parse(json!({
                "content": [
                    {"type": "text", "text": "a red pixel"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"}
                ]
            }))?,
            "resource" => parse(json!({
                "content": [{"type": "resource", "resource": {
                    "uri": "test://greeting", "mimeType": "text/plain", "text": "hello from a resource"
                }}]
            }))?,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named {other}"),
                    None,
                ));
            }
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        parse(json!({"resources": [
            {"uri": "test://greeting", "name": "greeting", "mimeType": "text/plain"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri != "test://greeting" {
            return Err(ErrorData::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        }
        let result: ReadResourceResult = parse(json!({"contents": [
            {"uri": "test://greeting", "mimeType": "text/plain", "text": "hello from a resource"}
        ]}))?;
        Ok(ReadResourceResponse::Complete(result))
    }
}

#[derive(Debug, Default)]
struct Options {
    http: bool,
    pid_file: Option<String>,
    spawn_grandchild: bool,
    exit_at_start: bool,
}

fn options() -> Result<Options> {
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--http" => options.http = true,
            "--pid-file" => {
                options.pid_file = Some(args.next().context("--pid-file needs a path")?);
            }
            "--spawn-grandchild" => options.spawn_grandchild = true,
            "--exit-at-start" => options.exit_at_start = true,
            other => anyhow::bail!("unknown argument {other}"),
        }
    }
    Ok(options)
}

fn record_pid(pid_file: Option<&str>, pid: u32) -> Result<()> {
    if let Some(path) = pid_file {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("could not open {path}"))?;
        writeln!(file, "{pid}")?;
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let options = options()?;
    if options.exit_at_start {
        eprintln!("gyre-test-mcp: refusing to start (--exit-at-start)");
        std::process::exit(2);
    }
    record_pid(options.pid_file.as_deref(), std::process::id())?;
    // Kept for the life of the server: a test checks it is gone with gyre.
    let _grandchild = if options.spawn_grandchild {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .context("could not spawn the grandchild")?;
        record_pid(options.pid_file.as_deref(), child.id())?;
        Some(child)
    } else {
        None
    };
    if options.http {
        serve_http().await
    } else {
        let service = TestServer.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        Ok(())
    }
}

async fn serve_http() -> Result<()> {
    let service: StreamableHttpService<TestServer, LocalSessionManager> =
        StreamableHttpService::new(
            || Ok(TestServer),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("http://{}/mcp", listener.local_addr()?);
    std::io::stdout().flush()?;
    loop {
        let (stream, _) = listener.accept().await?;
        let service = service.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let mut service = service.clone();
                tower_service::Service::call(&mut service, request)
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                .await;
        });
    }
}
