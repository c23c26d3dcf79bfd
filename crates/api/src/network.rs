//! [`NetworkOptions`]: how every HTTP client gyre builds reaches the network (the API
//! client, WebFetch, MCP's HTTP and SSE transports): which proxy, which extra CAs.
//!
//! One function, [`NetworkOptions::client_builder`], turns them into a
//! `reqwest::ClientBuilder`, so the three clients cannot drift apart. The options are
//! read from a variable lookup (gyre-core's environment snapshot), never from the
//! process: reqwest's own reading of `HTTPS_PROXY` is switched off.
//!
//! Trust: the platform's root certificates (rustls-platform-verifier, over the system
//! store) plus every certificate of the PEM files named by `SSL_CERT_FILE` and
//! `NODE_EXTRA_CA_CERTS`, and of the files in the directories `SSL_CERT_DIR` names
//! (`:`-separated, as OpenSSL reads it), the way a TLS-inspecting corporate proxy's CA
//! gets in. The
//! roots are read once per process, at the first TLS handshake, and shared by every
//! client: a session over plain HTTP never reads the system's store.

use std::fmt;
use std::path::PathBuf;

/// The variables that name extra CA bundles (PEM), in the order they are read.
pub const CA_BUNDLE_VARS: [&str; 2] = ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"];

/// The variable that names directories of CA certificates (PEM files), `:`-separated.
pub const CA_DIR_VAR: &str = "SSL_CERT_DIR";

/// Proxies and extra trust for gyre's HTTP clients. `Debug` hides proxy passwords.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NetworkOptions {
    /// The proxy for `https://` URLs (`HTTPS_PROXY`, else `https_proxy`).
    pub https_proxy: Option<String>,
    /// The proxy for `http://` URLs (`HTTP_PROXY`, else `http_proxy`).
    pub http_proxy: Option<String>,
    /// Hosts reached without a proxy (`NO_PROXY`, else `no_proxy`): comma-separated
    /// names, `.suffix`es, IPs, CIDR blocks, or `*`.
    pub no_proxy: Option<String>,
    /// PEM files whose certificates are trusted on top of the platform's roots.
    pub extra_cas: Vec<CaBundle>,
}

/// A PEM file of CA certificates, or a directory of them (`SSL_CERT_DIR`), and the
/// variable that named it (for error messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundle {
    /// `SSL_CERT_FILE`, `NODE_EXTRA_CA_CERTS`, `SSL_CERT_DIR`, or how else it was given.
    pub var: String,
    /// The file or directory.
    pub path: PathBuf,
}

impl fmt::Debug for NetworkOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetworkOptions")
            .field(
                "https_proxy",
                &self.https_proxy.as_deref().map(redact_proxy),
            )
            .field("http_proxy", &self.http_proxy.as_deref().map(redact_proxy))
            .field("no_proxy", &self.no_proxy)
            .field("extra_cas", &self.extra_cas)
            .finish()
    }
}

/// Why the network options cannot make a client.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// A CA bundle that cannot be read or holds no certificate.
    #[error("the CA bundle {path} ({var}) cannot be used: {message}")]
    CaBundle {
        /// The variable that named it.
        var: String,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A proxy URL reqwest does not accept.
    #[error("the proxy {var}={value} is not a valid proxy URL: {message}")]
    Proxy {
        /// `HTTPS_PROXY` or `HTTP_PROXY`.
        var: &'static str,
        /// The value, password hidden.
        value: String,
        /// What reqwest said.
        message: String,
    },
    /// The TLS configuration could not be made (the crypto provider refused it).
    #[error("TLS could not be set up: {0}")]
    Tls(String),
}

/// `scheme://user:***@host`: a proxy URL fit for a log line.
#[must_use]
pub fn redact_proxy(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((user_info, host)) => {
                let user = user_info.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}:***@{host}")
            }
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

impl NetworkOptions {
    /// Reads `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` (each also lowercase), the CA
    /// bundles of [`CA_BUNDLE_VARS`] and the directories of [`CA_DIR_VAR`] through
    /// `lookup`. Blank values count as unset.
    #[must_use]
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let read = |names: [&str; 2]| {
            names
                .into_iter()
                .filter_map(&lookup)
                .map(|v| v.trim().to_owned())
                .find(|v| !v.is_empty())
        };
        let mut extra_cas: Vec<CaBundle> = CA_BUNDLE_VARS
            .into_iter()
            .filter_map(|var| {
                read([var, var]).map(|path| CaBundle {
                    var: var.to_owned(),
                    path: PathBuf::from(path),
                })
            })
            .collect();
        if let Some(dirs) = read([CA_DIR_VAR, CA_DIR_VAR]) {
            extra_cas.extend(
                dirs.split(':')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|dir| CaBundle {
                        var: CA_DIR_VAR.to_owned(),
                        path: PathBuf::from(dir),
                    }),
            );
        }
        Self {
            https_proxy: read(["HTTPS_PROXY", "https_proxy"]),
            http_proxy: read(["HTTP_PROXY", "http_proxy"]),
            no_proxy: read(["NO_PROXY", "no_proxy"]),
            extra_cas,
        }
    }

    /// The proxy a request to `url` goes through, redacted; `None` for a direct one.
    #[must_use]
    pub fn proxy_for(&self, url: &str) -> Option<String> {
        let proxy = if url.starts_with("https://") {
            self.https_proxy.as_deref()
        } else {
            self.http_proxy.as_deref()
        }?;
        let host = url
            .split_once("://")
            .map_or(url, |(_, rest)| rest)
            .split(['/', '?', '#'])
            .next()
            .unwrap_or_default();
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => host.split(':').next().unwrap_or_default(),
        };
        let bypassed = self.no_proxy.as_deref().is_some_and(|list| {
            list.split(',').map(str::trim).any(|entry| {
                entry == "*"
                    || entry.eq_ignore_ascii_case(host)
                    || (!entry.is_empty()
                        && host
                            .to_ascii_lowercase()
                            .ends_with(&format!(".{}", entry.trim_start_matches('.'))))
            })
        });
        (!bypassed).then(|| redact_proxy(proxy))
    }

    #[cfg(feature = "client")]
    /// A `reqwest::ClientBuilder` that uses exactly these proxies and trusts the
    /// platform's roots plus the extra CAs; the caller adds its timeouts and user agent.
    ///
    /// # Errors
    /// An unreadable or empty CA bundle, an invalid proxy URL.
    pub fn client_builder(&self) -> Result<reqwest::ClientBuilder, NetworkError> {
        ensure_crypto_provider();
        // Proxies come from these options only, never from reqwest's own look at the
        // process environment.
        let mut builder = reqwest::Client::builder().no_proxy();
        let no_proxy = self
            .no_proxy
            .as_deref()
            .and_then(reqwest::NoProxy::from_string);
        let proxies: [(&'static str, Option<&str>, ProxyFor); 2] = [
            ("HTTPS_PROXY", self.https_proxy.as_deref(), |u| {
                reqwest::Proxy::https(u)
            }),
            ("HTTP_PROXY", self.http_proxy.as_deref(), |u| {
                reqwest::Proxy::http(u)
            }),
        ];
        for (var, value, make) in proxies {
            let Some(value) = value else { continue };
            let proxy = make(value).map_err(|e| NetworkError::Proxy {
                var,
                value: redact_proxy(value),
                message: e.to_string(),
            })?;
            builder = builder.proxy(proxy.no_proxy(no_proxy.clone()));
        }
        let verifier = lazy_verifier(&self.extra_cas)?;
        let mut tls = rustls::ClientConfig::builder_with_provider(verifier.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| NetworkError::Tls(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(builder.tls_backend_preconfigured(tls))
    }
}

/// A client for the cloud's credential endpoints on the machine's own network (EC2 and
/// GCE metadata, the container credentials endpoint): never through a proxy, and quick
/// to give up, the way the cloud SDKs ask them.
#[cfg(any(feature = "bedrock", feature = "vertex"))]
pub(crate) fn metadata_client(network: &NetworkOptions) -> Result<reqwest::Client, NetworkError> {
    let direct = NetworkOptions {
        https_proxy: None,
        http_proxy: None,
        ..network.clone()
    };
    direct
        .client_builder()?
        .connect_timeout(std::time::Duration::from_secs(1))
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .map_err(|e| NetworkError::Tls(e.to_string()))
}

/// The platform's roots plus the extra CAs, loaded once per process and only at the
/// first TLS handshake: every client shares one (the API's, WebFetch's, MCP's), and a
/// session that speaks only plain HTTP (a local gateway, the testkit) never reads the
/// system's certificate store. Signatures are checked with the crypto provider's own
/// algorithms, which need no roots.
#[cfg(feature = "client")]
#[derive(Debug)]
struct LazyVerifier {
    /// The extra CA bundles, each checked to hold a certificate, read whole only when
    /// the roots are loaded.
    extra: Vec<CaBundle>,
    provider: std::sync::Arc<rustls::crypto::CryptoProvider>,
    loaded: std::sync::OnceLock<Result<rustls_platform_verifier::Verifier, String>>,
}

#[cfg(feature = "client")]
impl LazyVerifier {
    fn platform(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.loaded
            .get_or_init(|| {
                let mut extra = Vec::new();
                for bundle in &self.extra {
                    extra.extend(read_bundle(bundle).map_err(|e| e.to_string())?);
                }
                rustls_platform_verifier::Verifier::new_with_extra_roots(
                    extra,
                    self.provider.clone(),
                )
                .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| rustls::Error::General(e.clone()))
    }
}

#[cfg(feature = "client")]
impl rustls::client::danger::ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.platform()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The shared verifier for these extra CA bundles (each checked now, so a missing or
/// empty bundle is an error at once; read whole at the first handshake).
#[cfg(feature = "client")]
fn lazy_verifier(bundles: &[CaBundle]) -> Result<std::sync::Arc<LazyVerifier>, NetworkError> {
    type Shared = Vec<(Vec<CaBundle>, std::sync::Arc<LazyVerifier>)>;
    static SHARED: std::sync::Mutex<Shared> = std::sync::Mutex::new(Vec::new());
    let mut shared = SHARED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, verifier)) = shared.iter().find(|(b, _)| b.as_slice() == bundles) {
        return Ok(std::sync::Arc::clone(verifier));
    }
    // The same file named twice (SSL_CERT_FILE and NODE_EXTRA_CA_CERTS often are) is
    // read once.
    let mut extra: Vec<CaBundle> = Vec::new();
    for bundle in bundles {
        check_bundle(bundle)?;
        if !extra.iter().any(|b| b.path == bundle.path) {
            extra.push(bundle.clone());
        }
    }
    let verifier = std::sync::Arc::new(LazyVerifier {
        extra,
        provider: std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        loaded: std::sync::OnceLock::new(),
    });
    shared.push((bundles.to_vec(), std::sync::Arc::clone(&verifier)));
    Ok(verifier)
}

/// `reqwest::Proxy::https` or `::http`.
#[cfg(feature = "client")]
type ProxyFor = fn(&str) -> reqwest::Result<reqwest::Proxy>;

/// The files of a bundle: itself, or a directory's regular files (links followed), in
/// the directory's order. Lazy: the start-up check stops at the first good file
/// instead of listing a system directory of hundreds.
#[cfg(feature = "client")]
fn bundle_files(bundle: &CaBundle) -> Result<Box<dyn Iterator<Item = PathBuf>>, NetworkError> {
    if !bundle.path.is_dir() {
        return Ok(Box::new(std::iter::once(bundle.path.clone())));
    }
    let entries = std::fs::read_dir(&bundle.path).map_err(|e| NetworkError::CaBundle {
        var: bundle.var.clone(),
        path: bundle.path.clone(),
        message: e.to_string(),
    })?;
    Ok(Box::new(
        entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file()),
    ))
}

/// The certificates of one PEM file; `None` when it holds none (a directory may hold
/// other files too).
#[cfg(feature = "client")]
fn pem_certificates(pem: &[u8]) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

/// A bundle that can be opened and starts a PEM certificate (only the first one is
/// decoded here); a directory that holds at least one file that does.
#[cfg(feature = "client")]
fn check_bundle(bundle: &CaBundle) -> Result<(), NetworkError> {
    use rustls::pki_types::pem::PemObject;
    let failed = |message: String| NetworkError::CaBundle {
        var: bundle.var.clone(),
        path: bundle.path.clone(),
        message,
    };
    let mut last = None;
    for file in bundle_files(bundle)? {
        // The first certificate is near the start: no need to read a whole system bundle.
        let mut pem = Vec::new();
        let read = std::fs::File::open(&file).and_then(|f| {
            std::io::Read::read_to_end(&mut std::io::Read::take(f, 1 << 16), &mut pem)
        });
        if let Err(e) = read {
            last = Some(e.to_string());
            continue;
        }
        match rustls::pki_types::CertificateDer::pem_slice_iter(&pem).next() {
            Some(Ok(_)) => return Ok(()),
            Some(Err(e)) => last = Some(e.to_string()),
            None => {}
        }
    }
    Err(failed(
        last.unwrap_or_else(|| "no PEM certificate in it".to_owned()),
    ))
}

#[cfg(feature = "client")]
fn read_bundle(
    bundle: &CaBundle,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, NetworkError> {
    let failed = |message: String| NetworkError::CaBundle {
        var: bundle.var.clone(),
        path: bundle.path.clone(),
        message,
    };
    let directory = bundle.path.is_dir();
    let mut certs = Vec::new();
    for file in bundle_files(bundle)? {
        let read = std::fs::read(&file)
            .map_err(|e| e.to_string())
            .and_then(|pem| pem_certificates(&pem));
        match read {
            Ok(found) => certs.extend(found),
            // A directory's stray file (a README, a CRL) is skipped.
            Err(_) if directory => {}
            Err(e) => return Err(failed(e)),
        }
    }
    if certs.is_empty() {
        return Err(failed("no PEM certificate in it".to_owned()));
    }
    Ok(certs)
}

#[cfg(feature = "client")]
/// rustls needs a process-wide crypto provider before reqwest builds a client; gyre
/// uses ring. Installing twice is harmless (the first one stays).
pub fn ensure_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn options(vars: &[(&str, &str)]) -> NetworkOptions {
        let env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        NetworkOptions::from_lookup(|k| env.get(k).cloned())
    }

    #[test]
    fn reads_proxies_uppercase_first_and_both_ca_bundles() {
        let o = options(&[
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("https_proxy", "http://other:1"),
            ("http_proxy", "http://plain:8080"),
            ("no_proxy", "localhost,.corp"),
            ("SSL_CERT_FILE", "/a.pem"),
            ("NODE_EXTRA_CA_CERTS", "/b.pem"),
        ]);
        assert_eq!(o.https_proxy.as_deref(), Some("http://proxy:3128"));
        assert_eq!(o.http_proxy.as_deref(), Some("http://plain:8080"));
        assert_eq!(o.no_proxy.as_deref(), Some("localhost,.corp"));
        let files: Vec<_> = o
            .extra_cas
            .iter()
            .map(|b| (b.var.as_str(), b.path.clone()))
            .collect();
        assert_eq!(
            files,
            [
                ("SSL_CERT_FILE", PathBuf::from("/a.pem")),
                ("NODE_EXTRA_CA_CERTS", PathBuf::from("/b.pem"))
            ]
        );
        assert_eq!(options(&[("HTTPS_PROXY", "  ")]), NetworkOptions::default());
        let dirs = options(&[("SSL_CERT_DIR", "/etc/ssl/certs:/corp/cas")]);
        let dirs: Vec<_> = dirs
            .extra_cas
            .iter()
            .map(|b| (b.var.as_str(), b.path.clone()))
            .collect();
        assert_eq!(
            dirs,
            [
                ("SSL_CERT_DIR", PathBuf::from("/etc/ssl/certs")),
                ("SSL_CERT_DIR", PathBuf::from("/corp/cas"))
            ]
        );
    }

    #[test]
    fn proxy_for_honours_no_proxy_and_hides_the_password() {
        let o = options(&[
            ("HTTPS_PROXY", "http://me:s3cret@proxy:3128"),
            ("NO_PROXY", "localhost, .corp.example"),
        ]);
        assert_eq!(
            o.proxy_for("https://api.anthropic.com/v1/messages")
                .as_deref(),
            Some("http://me:***@proxy:3128")
        );
        assert_eq!(o.proxy_for("https://localhost:8443/x"), None);
        assert_eq!(o.proxy_for("https://git.corp.example/x"), None);
        assert_eq!(o.proxy_for("http://example.com/"), None);
        assert!(!format!("{o:?}").contains("s3cret"));
    }

    #[cfg(feature = "client")]
    #[test]
    fn a_missing_or_empty_ca_bundle_is_an_error_naming_the_variable() {
        let missing = options(&[("NODE_EXTRA_CA_CERTS", "/nonexistent/ca.pem")]);
        let err = missing.client_builder().err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("NODE_EXTRA_CA_CERTS") && e.contains("/nonexistent")),
            "{err:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let empty = NetworkOptions {
            extra_cas: vec![CaBundle {
                var: "SSL_CERT_FILE".to_owned(),
                path: empty,
            }],
            ..NetworkOptions::default()
        };
        assert!(empty.client_builder().is_err());
    }

    #[cfg(feature = "client")]
    #[test]
    fn a_bad_proxy_url_is_an_error() {
        let o = options(&[("HTTPS_PROXY", "http://[::1")]);
        assert!(matches!(
            o.client_builder(),
            Err(NetworkError::Proxy {
                var: "HTTPS_PROXY",
                ..
            })
        ));
    }
}
