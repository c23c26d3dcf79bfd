//! WebFetch: fetch a URL, turn HTML into Markdown, and answer the model's prompt about
//! it with a side request to the small, fast model (the page itself never enters the
//! conversation). Redirects to another host are reported, not followed; http is
//! upgraded to https except for localhost; pages are cached for 15 minutes.
//!
//! It lives in the binary because it needs HTTP and the model, which gyre-tools
//! deliberately knows nothing of.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gyre_loop::{QueryDeps, SubagentEvent, SubagentSender};
use gyre_protocol::{ContentBlock, Message};
use gyre_tools::domain::url_host;
use gyre_tools::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};
use reqwest::{StatusCode, Url};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

/// The side model unless `ANTHROPIC_SMALL_FAST_MODEL` names another.
pub const DEFAULT_SMALL_FAST_MODEL: &str = "claude-haiku-4-5";
/// How long a fetched page is reused: Claude Code's WebFetch cache.
const CACHE_TTL: Duration = Duration::from_secs(15 * 60);
/// The largest body read (bytes); beyond it the fetch fails.
const MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// The Markdown handed to the side model is cut here (characters).
const MAX_MARKDOWN_CHARS: usize = 100_000;
/// Same-host redirects followed before giving up.
const MAX_REDIRECTS: usize = 10;
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);
const ANSWER_MAX_TOKENS: u32 = 4096;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebFetchInput {
    /// The URL to fetch (http or https)
    url: String,
    /// What to find out from the page
    prompt: String,
}

/// What a fetch gave: the page as Markdown, or a redirect to another host.
#[derive(Debug, Clone)]
enum Fetched {
    Page(String),
    Redirect {
        from: String,
        to: String,
        status: u16,
    },
}

/// The WebFetch tool of a session.
pub struct WebFetchTool {
    /// Made at the first fetch (most sessions never fetch; a client and its TLS setup
    /// cost memory at start).
    http: std::sync::OnceLock<reqwest::Client>,
    network: gyre_api::NetworkOptions,
    deps: Arc<dyn QueryDeps>,
    model: String,
    cache: Mutex<HashMap<String, (Instant, String)>>,
    /// Where the side requests' usage goes (it adds to the session's).
    usage: SubagentSender,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

fn is_local(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

/// WebFetch's resolver: the system's answer, refused when a name resolves to an address
/// on this machine or a private network (`127.0.0.1.nip.io`, a DNS record pointing at
/// 10.0.0.1). The permission check judged the name; this is where the address it leads
/// to is known, and it is the address reqwest connects to (no second lookup to race).
/// `localhost` and `*.localhost` are names of this machine already asked about by the
/// permission check, and resolve as usual.
struct PublicNames;

/// A name that resolved to a local or private address; its text is the call's error.
#[derive(Debug, thiserror::Error)]
#[error(
    "{host} resolves to {address}, an address on this machine or a private network; WebFetch does not fetch such a name. To fetch from there, give the address itself in the URL (http://{address}/…), which asks for permission"
)]
struct LocalName {
    host: String,
    address: std::net::IpAddr,
}

impl reqwest::dns::Resolve for PublicNames {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = match test_address(&host) {
                Some(addr) => vec![addr],
                None => {
                    let lookup = host.clone();
                    tokio::task::spawn_blocking(move || {
                        std::net::ToSocketAddrs::to_socket_addrs(&(lookup.as_str(), 0))
                            .map(Iterator::collect::<Vec<_>>)
                    })
                    .await??
                }
            };
            let named_local = host == "localhost" || host.ends_with(".localhost");
            if !named_local
                && let Some(local) = addrs
                    .iter()
                    .find(|a| gyre_tools::domain::is_local_address(a.ip()))
            {
                return Err(Box::new(LocalName {
                    host,
                    address: local.ip(),
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Debug builds (the tests) resolve the names `GYRE_TEST_RESOLVE` lists
/// (`name=address,…`) to those addresses, so a test can point a name at this machine
/// without a DNS server.
#[cfg(debug_assertions)]
fn test_address(host: &str) -> Option<std::net::SocketAddr> {
    std::env::var("GYRE_TEST_RESOLVE")
        .ok()?
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| name.eq_ignore_ascii_case(host))
        .and_then(|(_, ip)| ip.parse::<std::net::IpAddr>().ok())
        .map(|ip| std::net::SocketAddr::new(ip, 0))
}

#[cfg(not(debug_assertions))]
fn test_address(_host: &str) -> Option<std::net::SocketAddr> {
    None
}

/// `url::ParseError`, named through reqwest's `Url` (gyre-core does not depend on `url`).
type UrlParseError = <Url as std::str::FromStr>::Err;

/// A URL WebFetch will not fetch; the message is the model's `<tool_use_error>`.
#[derive(Debug, thiserror::Error)]
enum UrlError {
    #[error("Invalid URL {raw:?}: {source}")]
    Invalid { raw: String, source: UrlParseError },
    #[error("Cannot upgrade {raw} to https")]
    Upgrade { raw: String },
    #[error("Unsupported URL scheme {scheme:?}: use http or https")]
    Scheme { scheme: String },
    #[error("The URL {raw:?} has no host")]
    NoHost { raw: String },
}

/// Why a page could not be fetched; the message is the call's error result.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(
        "Failed to fetch {url}: {}",
        gyre_api::describe_transport_error(source)
    )]
    Request { url: Url, source: reqwest::Error },
    #[error("{url} answered {status} without a Location")]
    NoLocation { url: Url, status: StatusCode },
    #[error("{url} redirects to a bad URL {location:?}: {source}")]
    BadRedirect {
        url: Url,
        location: String,
        source: UrlParseError,
    },
    #[error("Failed to fetch {url}: HTTP {status}")]
    Status { url: Url, status: StatusCode },
    #[error("{url} is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge { url: Url },
    #[error("Failed to read the page: {0}")]
    Read(#[source] reqwest::Error),
    #[error("The page is larger than {MAX_BODY_BYTES} bytes")]
    PageTooLarge,
    #[error("Could not convert {url}: {source}")]
    Convert { url: Url, source: std::io::Error },
    #[error("{start} redirected more than {MAX_REDIRECTS} times")]
    TooManyRedirects { start: Url },
    #[error("could not set up WebFetch's HTTP client: {0}")]
    Client(String),
}

/// `url` parsed, http upgraded to https unless the host is this machine.
fn normalize(raw: &str) -> Result<Url, UrlError> {
    let mut url = Url::parse(raw).map_err(|source| UrlError::Invalid {
        raw: raw.to_owned(),
        source,
    })?;
    match url.scheme() {
        "https" => {}
        "http" => {
            if !url.host_str().is_some_and(is_local) {
                url.set_scheme("https").map_err(|()| UrlError::Upgrade {
                    raw: raw.to_owned(),
                })?;
            }
        }
        other => {
            return Err(UrlError::Scheme {
                scheme: other.to_owned(),
            });
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::NoHost {
            raw: raw.to_owned(),
        });
    }
    Ok(url)
}

/// The same site: equal hosts, `www.` aside.
fn same_host(a: &Url, b: &Url) -> bool {
    let strip = |u: &Url| {
        u.host_str()
            .unwrap_or_default()
            .trim_start_matches("www.")
            .to_ascii_lowercase()
    };
    strip(a) == strip(b)
}

impl WebFetchTool {
    /// # Errors
    /// When the HTTP client cannot be built (TLS initialisation, a bad proxy or CA bundle).
    pub fn new(
        deps: Arc<dyn QueryDeps>,
        model: String,
        usage: SubagentSender,
        network: &gyre_api::NetworkOptions,
    ) -> Result<Self, crate::error::CoreError> {
        // A bad proxy or CA bundle is said at start; the client is made when first used.
        let _checked = Self::client(network).map_err(|e| {
            crate::error::CoreError::Client(format!("could not set up WebFetch's HTTP client: {e}"))
        })?;
        Ok(Self {
            http: std::sync::OnceLock::new(),
            network: network.clone(),
            deps,
            model,
            cache: Mutex::new(HashMap::new()),
            usage,
        })
    }

    fn client(network: &gyre_api::NetworkOptions) -> Result<reqwest::ClientBuilder, String> {
        Ok(network
            .client_builder()
            .map_err(|e| e.to_string())?
            .dns_resolver(PublicNames)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .user_agent(concat!("gyre/", env!("CARGO_PKG_VERSION"), " (WebFetch)")))
    }

    fn http(&self) -> Result<&reqwest::Client, FetchError> {
        if let Some(http) = self.http.get() {
            return Ok(http);
        }
        let http = Self::client(&self.network)
            .and_then(|b| b.build().map_err(|e| e.to_string()))
            .map_err(FetchError::Client)?;
        Ok(self.http.get_or_init(|| http))
    }

    fn cached(&self, url: &str) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(url)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, page)| page.clone())
    }

    async fn fetch(&self, start: Url) -> Result<Fetched, FetchError> {
        let mut url = start.clone();
        for _ in 0..=MAX_REDIRECTS {
            let response = self
                .http()?
                .get(url.clone())
                .send()
                .await
                .map_err(|source| FetchError::Request {
                    url: url.clone(),
                    source,
                })?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| FetchError::NoLocation {
                        url: url.clone(),
                        status,
                    })?;
                let next = url
                    .join(location)
                    .map_err(|source| FetchError::BadRedirect {
                        url: url.clone(),
                        location: location.to_owned(),
                        source,
                    })?;
                if !same_host(&url, &next) {
                    return Ok(Fetched::Redirect {
                        from: start.to_string(),
                        to: next.to_string(),
                        status: status.as_u16(),
                    });
                }
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(FetchError::Status { url, status });
            }
            let is_html = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_none_or(|t| t.contains("html"));
            if response
                .content_length()
                .is_some_and(|n| n > MAX_BODY_BYTES as u64)
            {
                return Err(FetchError::TooLarge { url });
            }
            let body = read_capped(response).await?;
            let text = String::from_utf8_lossy(&body).into_owned();
            let page = if is_html {
                htmd::convert(&text).map_err(|source| FetchError::Convert { url, source })?
            } else {
                text
            };
            return Ok(Fetched::Page(cut(page)));
        }
        Err(FetchError::TooManyRedirects { start })
    }

    async fn run(&self, input: WebFetchInput, ctx: &ToolContext) -> ToolOutput {
        let url = match normalize(&input.url) {
            Ok(u) => u,
            Err(e) => return ToolOutput::tool_use_error(e),
        };
        let key = url.to_string();
        let page = if let Some(page) = self.cached(&key) {
            page
        } else {
            let fetched = tokio::select! {
                () = ctx.cancel.cancelled() => return ToolOutput::error(gyre_tools::INTERRUPTED_MESSAGE),
                fetched = self.fetch(url.clone()) => fetched,
            };
            match fetched {
                Ok(Fetched::Page(page)) => {
                    self.cache
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key, (Instant::now(), page.clone()));
                    page
                }
                Ok(Fetched::Redirect { from, to, status }) => {
                    return ToolOutput::ok(format!(
                        "REDIRECT DETECTED: The URL redirects to a different host.\n\nOriginal URL: {from}\nRedirect URL: {to}\nStatus: {status}\n\nTo read it, call WebFetch again with the redirect URL."
                    ));
                }
                Err(e) => return ToolOutput::error(e.to_string()),
            }
        };
        let question = format!(
            "Web page content:\n---\n{page}\n---\n\n{}\n\nAnswer from the content above only, concisely. Quote at most a few sentences verbatim.",
            input.prompt
        );
        match gyre_loop::side_query(
            self.deps.as_ref(),
            &self.model,
            "You answer questions about a web page's content.",
            vec![Message::user(vec![ContentBlock::text(question)])],
            ANSWER_MAX_TOKENS,
            ctx.cancel.clone(),
        )
        .await
        {
            Ok(answer) => {
                // The session is gone only when nobody is left to bill.
                let _ = self.usage.send(SubagentEvent::Usage {
                    model: self.model.clone(),
                    usage: answer.usage,
                });
                ToolOutput::ok(answer.text)
            }
            Err(e) => ToolOutput::error(format!("Fetched {url} but could not answer: {e}")),
        }
    }
}

/// The body, failing past [`MAX_BODY_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(FetchError::Read)? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(FetchError::PageTooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn cut(mut page: String) -> String {
    if let Some((at, _)) = page.char_indices().nth(MAX_MARKDOWN_CHARS) {
        page.truncate(at);
        page.push_str("\n\n[Content truncated]");
    }
    page
}

impl Tool for WebFetchTool {
    fn name(&self) -> Cow<'static, str> {
        "WebFetch".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Fetches a URL and answers a prompt about its content: the page (HTML turned into Markdown) goes to a small, fast model with your prompt, and its answer is the result. http is upgraded to https; a redirect to another host is reported with the new URL instead of followed (fetch that URL to go on). Pages are cached for 15 minutes. Read-only; for public pages, not for authenticated ones.".into()
    }

    fn input_schema(&self) -> Value {
        gyre_tools::schema::input_schema::<WebFetchInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        let raw = input.get("url").and_then(Value::as_str).unwrap_or_default();
        normalize(raw)
            .map(|_| ())
            .map_err(|e| ToolInputError::new(e.to_string()))
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        // It reaches the network: plan mode asks as default mode does.
        false
    }

    fn check_permissions(&self, input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        let host = input
            .get("url")
            .and_then(Value::as_str)
            .and_then(url_host)
            .unwrap_or_default();
        PermissionDecision::Ask {
            reason: format!(
                "fetching from {host} needs permission (rule: WebFetch(domain:{host}))"
            ),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        100_000
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        gyre_tools::call_with_input(input, move |input: WebFetchInput| self.run(input, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_tools::schema::validate;
    use serde_json::json;

    #[test]
    fn the_published_schema_is_the_input_struct_with_its_field_docs() {
        assert_eq!(
            gyre_tools::schema::input_schema::<WebFetchInput>(),
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The URL to fetch (http or https)"},
                    "prompt": {"type": "string", "description": "What to find out from the page"}
                },
                "required": ["url", "prompt"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn the_published_schema_accepts_exactly_what_the_parser_accepts() {
        let schema = gyre_tools::schema::input_schema::<WebFetchInput>();
        let parses = |input: &Value| serde_json::from_value::<WebFetchInput>(input.clone()).is_ok();
        let valid = [json!({"url": "https://example.com/", "prompt": "What is it?"})];
        let invalid = [
            json!({"url": "https://example.com/"}),
            json!({"prompt": "p"}),
            json!({"url": ["https://example.com/"], "prompt": "p"}),
            json!({"url": "https://example.com/", "prompt": "p", "max_tokens": 9}),
            json!({"url": null, "prompt": "p"}),
            json!([]),
        ];
        for input in &valid {
            assert!(parses(input), "{input}");
            assert_eq!(validate(&schema, input), Ok(()), "{input}");
        }
        for input in &invalid {
            assert!(!parses(input), "{input}");
            assert!(validate(&schema, input).is_err(), "{input}");
        }
    }

    #[test]
    fn http_is_upgraded_except_on_this_machine() {
        assert_eq!(normalize("http://example.com/a").unwrap().scheme(), "https");
        assert_eq!(
            normalize("http://localhost:8080/").unwrap().scheme(),
            "http"
        );
        assert_eq!(normalize("http://127.0.0.1:9/").unwrap().scheme(), "http");
        assert!(
            normalize("ftp://example.com")
                .unwrap_err()
                .to_string()
                .contains("scheme")
        );
        assert!(
            normalize("nonsense")
                .unwrap_err()
                .to_string()
                .contains("Invalid URL")
        );
    }

    #[test]
    fn www_does_not_make_another_host() {
        let a = Url::parse("https://example.com/a").unwrap();
        assert!(same_host(
            &a,
            &Url::parse("https://www.example.com/b").unwrap()
        ));
        assert!(!same_host(&a, &Url::parse("https://other.com/").unwrap()));
    }

    #[test]
    fn long_pages_are_cut_with_a_note() {
        let page = cut("x".repeat(MAX_MARKDOWN_CHARS + 5));
        assert!(page.ends_with("[Content truncated]"));
        assert_eq!(cut("short".to_owned()), "short");
    }
}
