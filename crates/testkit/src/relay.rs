//! Network middlemen for tests of gyre's proxy and CA handling, on loopback only.
//!
//! - [`TlsFront`] terminates TLS with a certificate for `localhost` and `127.0.0.1`
//!   issued by a CA it makes at start ([`TlsFront::ca_pem`]), and relays the plain bytes
//!   to a target (a [`TestServer`](crate::TestServer)): what a corporate TLS-inspecting
//!   proxy or gateway looks like to a client that does not know its CA.
//! - [`ConnectProxy`] is an HTTP proxy that answers `CONNECT host:port` by tunnelling to
//!   that address, and records each target. It refuses any target that is not a loopback
//!   address, so a test can never reach out through it.
//!
//! Each runs on a runtime of its own, on a background thread, until dropped: usable from
//! synchronous and asynchronous tests alike.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::TestkitError;
use crate::background::Background;

/// See the module docs.
#[derive(Debug)]
pub struct TlsFront {
    run: Background,
    ca_pem: String,
}

fn tls_error(e: impl std::fmt::Display) -> TestkitError {
    TestkitError::Tls(e.to_string())
}

impl TlsFront {
    /// Makes a CA and a server certificate, and serves TLS on a random loopback port,
    /// relaying each connection to `target`.
    ///
    /// # Errors
    /// [`TestkitError::Tls`] when the certificates or the TLS config cannot be made,
    /// [`TestkitError::Bind`], [`TestkitError::Runtime`].
    pub fn spawn(target: SocketAddr) -> Result<Self, TestkitError> {
        let ca_key = rcgen::KeyPair::generate().map_err(tls_error)?;
        let mut ca_params =
            rcgen::CertificateParams::new(Vec::<String>::new()).map_err(tls_error)?;
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "gyre-testkit CA");
        ca_params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).map_err(tls_error)?;
        let key = rcgen::KeyPair::generate().map_err(tls_error)?;
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .map_err(tls_error)?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        let cert = params.signed_by(&key, &ca).map_err(tls_error)?;
        let key_der =
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).map_err(tls_error)?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key_der)
        .map_err(tls_error)?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let run = Background::spawn("tls", 0, move |listener| async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    // A client that does not trust the CA aborts the handshake: nothing to relay.
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    if let Ok(mut upstream) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                    }
                });
            }
        })?;
        Ok(Self {
            run,
            ca_pem: ca.pem(),
        })
    }

    /// `https://localhost:PORT`: the base URL to give the client.
    #[must_use]
    pub fn url(&self) -> String {
        format!("https://localhost:{}", self.run.addr().port())
    }

    /// The CA certificate (PEM) that issued the server's: what `NODE_EXTRA_CA_CERTS`
    /// names to trust it.
    #[must_use]
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct ConnectProxy {
    run: Background,
    targets: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    /// Serves as an HTTP CONNECT proxy on a random loopback port.
    ///
    /// # Errors
    /// [`TestkitError::Bind`], [`TestkitError::Runtime`].
    pub fn spawn() -> Result<Self, TestkitError> {
        let targets = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&targets);
        let run = Background::spawn("proxy", 0, move |listener| async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                connections.spawn(tunnel(socket, log));
            }
        })?;
        Ok(Self { run, targets })
    }

    /// `http://127.0.0.1:PORT`: what `HTTPS_PROXY` takes.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.run.addr())
    }

    /// The `host:port` of every CONNECT received so far, refused ones included.
    #[must_use]
    pub fn targets(&self) -> Vec<String> {
        self.targets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// `localhost:port` or a loopback `ip:port` as an address; anything else is `None`, and
/// is never looked up (a name lookup could itself leave the machine).
fn loopback(target: &str) -> Option<SocketAddr> {
    let (host, port) = target.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.eq_ignore_ascii_case("localhost") {
        std::net::IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse().ok()?
    };
    ip.is_loopback().then_some(SocketAddr::new(ip, port))
}

/// Reads one `CONNECT host:port` request and its headers, then relays both ways.
async fn tunnel(socket: TcpStream, log: Arc<Mutex<Vec<String>>>) {
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    if reader.read_line(&mut line).await.is_err() {
        return;
    }
    let mut words = line.split_whitespace();
    let (method, target) = (words.next(), words.next().map(str::to_owned));
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header).await {
            Ok(0) | Err(_) => return,
            Ok(_) if header.trim().is_empty() => break,
            Ok(_) => {}
        }
    }
    let mut socket = reader.into_inner();
    let Some(target) = target.filter(|_| method == Some("CONNECT")) else {
        let _ = socket
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(target.clone());
    let upstream = match loopback(&target) {
        Some(addr) => TcpStream::connect(addr).await.ok(),
        None => None,
    };
    let Some(mut upstream) = upstream else {
        let _ = socket
            .write_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    if socket
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_ok()
    {
        let _ = tokio::io::copy_bidirectional(&mut socket, &mut upstream).await;
    }
}
