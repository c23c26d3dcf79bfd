//! Proxies and CAs through the real HTTP client: a TLS server whose CA the test makes
//! (gyre-testkit's `TlsFront`), with and without that CA trusted, and a CONNECT proxy.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use futures::StreamExt;
use gyre_api::{
    AnthropicClient, ApiError, ClientConfig, ModelClient, ModelEvent, NetworkOptions,
    RecordingSleeper, RetryOptions, UnreachableReason, stream_with_retry,
};
use gyre_protocol::{Message, MessagesRequest};
use gyre_testkit::{ConnectProxy, Script, TestServer, TlsFront, Turn};
use tokio_util::sync::CancellationToken;

struct Tls {
    server: TestServer,
    front: TlsFront,
    dir: tempfile::TempDir,
}

fn tls_server(turns: usize) -> Tls {
    let server =
        TestServer::spawn(Script::new((0..turns).map(|_| Turn::text("over TLS")))).unwrap();
    let front = TlsFront::spawn(server.addr()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), front.ca_pem()).unwrap();
    Tls { server, front, dir }
}

fn vars(pairs: &[(&str, String)]) -> NetworkOptions {
    NetworkOptions::from_lookup(|k| {
        pairs
            .iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.clone())
    })
}

/// One request through `stream_with_retry`: the items and how many waits it took.
async fn run(
    base_url: &str,
    network: NetworkOptions,
) -> (Vec<Result<ModelEvent, ApiError>>, usize) {
    let config = ClientConfig::new("k")
        .with_base_url(base_url)
        .with_network(network);
    let client: Arc<dyn ModelClient> = Arc::new(AnthropicClient::new(config).unwrap());
    let sleeper = RecordingSleeper::new();
    let options = RetryOptions::default().with_sleeper(Arc::new(sleeper.clone()));
    let request = MessagesRequest::new("claude-test", 100, vec![Message::user_text("hi")]);
    let items = stream_with_retry(client, request, options, CancellationToken::new())
        .collect()
        .await;
    (items, sleeper.sleeps().len())
}

fn answered(items: &[Result<ModelEvent, ApiError>]) -> bool {
    matches!(items.last(), Some(Ok(ModelEvent::Message(m))) if m.content == [gyre_protocol::ContentBlock::text("over TLS")])
}

#[tokio::test]
async fn a_server_signed_by_an_unknown_ca_fails_at_once_saying_what_to_set() {
    let tls = tls_server(1);
    let (items, waits) = run(&tls.front.url(), NetworkOptions::default()).await;
    assert_eq!(
        waits, 0,
        "an untrusted certificate is not retried: {items:?}"
    );
    let Some(Err(e)) = items.last() else {
        panic!("{items:?}")
    };
    assert!(
        matches!(
            e,
            ApiError::Unreachable {
                reason: UnreachableReason::UntrustedCertificate,
                ..
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(text.contains("NODE_EXTRA_CA_CERTS"), "{text}");
    assert!(text.contains("SSL_CERT_FILE"), "{text}");
    assert_eq!(tls.server.request_count(), 0);
}

#[tokio::test]
async fn the_extra_ca_bundle_makes_the_same_server_trusted() {
    for var in ["NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE"] {
        let tls = tls_server(1);
        let ca = tls.dir.path().join("ca.pem").display().to_string();
        let (items, waits) = run(&tls.front.url(), vars(&[(var, ca)])).await;
        assert!(answered(&items), "{var}: {items:?}");
        assert_eq!(waits, 0);
        assert_eq!(tls.server.request_count(), 1);
    }
}

#[tokio::test]
async fn https_proxy_tunnels_the_request_and_no_proxy_bypasses_it() {
    let tls = tls_server(2);
    let proxy = ConnectProxy::spawn().unwrap();
    let ca = tls.dir.path().join("ca.pem").display().to_string();
    let through = vars(&[
        ("HTTPS_PROXY", proxy.url()),
        ("NODE_EXTRA_CA_CERTS", ca.clone()),
    ]);
    let (items, _) = run(&tls.front.url(), through).await;
    assert!(answered(&items), "{items:?}");
    let port = tls.front.url().rsplit(':').next().unwrap().to_owned();
    assert_eq!(proxy.targets(), [format!("localhost:{port}")]);

    let bypass = vars(&[
        ("https_proxy", proxy.url()),
        ("no_proxy", "localhost".to_owned()),
        ("NODE_EXTRA_CA_CERTS", ca),
    ]);
    let (items, _) = run(&tls.front.url(), bypass).await;
    assert!(answered(&items), "{items:?}");
    assert_eq!(proxy.targets().len(), 1, "NO_PROXY must bypass the proxy");
    assert_eq!(tls.server.request_count(), 2);
}

#[tokio::test]
async fn a_proxy_that_refuses_the_tunnel_is_an_error_not_a_direct_connection() {
    let tls = tls_server(1);
    let ca = tls.dir.path().join("ca.pem").display().to_string();
    // The proxy only tunnels to loopback; `example.invalid` it refuses without a lookup.
    let proxy = ConnectProxy::spawn().unwrap();
    let network = vars(&[("HTTPS_PROXY", proxy.url()), ("NODE_EXTRA_CA_CERTS", ca)]);
    let (items, _) = run("https://example.invalid", network).await;
    assert!(matches!(items.last(), Some(Err(_))), "{items:?}");
    assert!(proxy.targets().iter().all(|t| t == "example.invalid:443"));
    assert!(!proxy.targets().is_empty());
    assert_eq!(tls.server.request_count(), 0);
}
