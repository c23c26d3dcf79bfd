//! Google Vertex AI for tests: the `streamRawPredict` route of the scripted server, and
//! [`GoogleTokenServer`], a loopback OAuth token endpoint that checks each
//! service-account JWT (RS256, with the public half of a key it made) before it mints a
//! token.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use crate::TestkitError;
use crate::background::Background;

/// The model of a `…/publishers/anthropic/models/{model}:streamRawPredict` path.
#[must_use]
pub(crate) fn stream_raw_predict_model(path: &str) -> Option<String> {
    let (_, rest) = path.split_once("/publishers/anthropic/models/")?;
    rest.strip_suffix(":streamRawPredict").map(str::to_owned)
}

#[derive(Debug, Default)]
struct TokenState {
    /// The service account's email and public key (PKCS#1 DER), once a key is made.
    account: Option<(String, Vec<u8>)>,
    minted: usize,
    refused: Vec<String>,
}

/// See the module docs.
#[derive(Debug)]
pub struct GoogleTokenServer {
    run: Background,
    expires_in: u64,
    state: Arc<Mutex<TokenState>>,
}

fn b64url(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.as_bytes())
        .ok()
}

/// Percent-decoding of one form value.
fn form_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why `assertion` is not a JWT this account signed for `audience`; `None` if it is.
fn refusal(assertion: &str, account: Option<&(String, Vec<u8>)>, audience: &str) -> Option<String> {
    let Some((email, public_key)) = account else {
        return Some("no service account key was made".to_owned());
    };
    let mut parts = assertion.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Some("not a JWT".to_owned());
    };
    let key = ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        public_key,
    );
    let signed = format!("{header}.{claims}");
    if key
        .verify(signed.as_bytes(), &b64url(signature).unwrap_or_default())
        .is_err()
    {
        return Some("the RS256 signature does not verify".to_owned());
    }
    let header: Value = serde_json::from_slice(&b64url(header)?).ok()?;
    let claims: Value = serde_json::from_slice(&b64url(claims)?).ok()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if header["alg"] != "RS256" {
        return Some(format!("alg {}", header["alg"]));
    }
    if claims["iss"] != email.as_str() {
        return Some(format!("iss {}", claims["iss"]));
    }
    if claims["aud"] != audience {
        return Some(format!("aud {} (expected {audience})", claims["aud"]));
    }
    if !claims["scope"]
        .as_str()
        .is_some_and(|s| s.contains("https://www.googleapis.com/auth/cloud-platform"))
    {
        return Some(format!("scope {}", claims["scope"]));
    }
    if claims["exp"].as_u64().is_none_or(|exp| exp <= now) {
        return Some(format!("exp {} is not after now ({now})", claims["exp"]));
    }
    None
}

impl GoogleTokenServer {
    /// Serves `POST /token` on a random loopback port; each token it mints is said to
    /// expire in `expires_in` seconds.
    ///
    /// # Errors
    /// [`TestkitError::Bind`], [`TestkitError::Runtime`].
    pub fn spawn(expires_in: u64) -> Result<Self, TestkitError> {
        let state = Arc::new(Mutex::new(TokenState::default()));
        let shared = Arc::clone(&state);
        let audience = Arc::new(Mutex::new(String::new()));
        let served_audience = Arc::clone(&audience);
        let run = Background::spawn("google-token", 0, move |listener| async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((socket, _)) = listener.accept().await {
                let state = Arc::clone(&shared);
                let audience = Arc::clone(&served_audience);
                connections.spawn(async move {
                    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                        let state = Arc::clone(&state);
                        let audience = Arc::clone(&audience);
                        async move {
                            let body = request
                                .into_body()
                                .collect()
                                .await
                                .map(http_body_util::Collected::to_bytes)
                                .unwrap_or_default();
                            let form = String::from_utf8_lossy(&body).into_owned();
                            let field = |name: &str| {
                                form.split('&').find_map(|pair| {
                                    let (k, v) = pair.split_once('=')?;
                                    (k == name).then(|| form_decode(v))
                                })
                            };
                            let audience = audience
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .clone();
                            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
                            let why = if field("grant_type").as_deref()
                                == Some("urn:ietf:params:oauth:grant-type:jwt-bearer")
                            {
                                refusal(
                                    &field("assertion").unwrap_or_default(),
                                    state.account.as_ref(),
                                    &audience,
                                )
                            } else {
                                Some(format!("grant_type {:?}", field("grant_type")))
                            };
                            let (status, answer) = match why {
                                Some(why) => {
                                    state.refused.push(why.clone());
                                    (400, serde_json::json!({"error": "invalid_grant", "error_description": why}))
                                }
                                None => {
                                    state.minted += 1;
                                    (200, serde_json::json!({
                                        "access_token": format!("ya29.gyre-test-{}", state.minted),
                                        "expires_in": expires_in,
                                        "token_type": "Bearer",
                                    }))
                                }
                            };
                            let mut response =
                                Response::new(Full::new(Bytes::from(answer.to_string())));
                            *response.status_mut() =
                                hyper::StatusCode::from_u16(status).unwrap_or_default();
                            Ok::<_, std::convert::Infallible>(response)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        })?;
        *audience.lock().unwrap_or_else(PoisonError::into_inner) =
            format!("http://{}/token", run.addr());
        Ok(Self {
            run,
            expires_in,
            state,
        })
    }

    /// `http://127.0.0.1:PORT/token`: the `token_uri` of the keys it makes.
    #[must_use]
    pub fn token_uri(&self) -> String {
        format!("http://{}/token", self.run.addr())
    }

    /// How long each token it mints lasts, in seconds.
    #[must_use]
    pub fn expires_in(&self) -> u64 {
        self.expires_in
    }

    /// Makes a 2048-bit RSA key (with the `openssl` command) and writes a service-account
    /// key file for it at `path`, whose `token_uri` is this server; the server then
    /// checks JWTs against its public half.
    ///
    /// # Errors
    /// [`TestkitError::Tls`] when `openssl` is missing or fails, or a file cannot be
    /// written.
    pub fn write_service_account(&self, path: &Path, email: &str) -> Result<(), TestkitError> {
        let failed = |what: String| TestkitError::Tls(format!("service account key: {what}"));
        let openssl = |args: &[&str], input: Option<&[u8]>| -> Result<Vec<u8>, TestkitError> {
            let mut child = Command::new("openssl")
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| failed(format!("openssl: {e}")))?;
            if let (Some(mut stdin), Some(input)) = (child.stdin.take(), input) {
                use std::io::Write as _;
                stdin.write_all(input).map_err(|e| failed(e.to_string()))?;
            }
            let out = child
                .wait_with_output()
                .map_err(|e| failed(e.to_string()))?;
            if out.status.success() {
                Ok(out.stdout)
            } else {
                Err(failed(String::from_utf8_lossy(&out.stderr).into_owned()))
            }
        };
        let private_pem = openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
            ],
            None,
        )?;
        let public_der = openssl(
            &["rsa", "-RSAPublicKey_out", "-outform", "DER"],
            Some(&private_pem),
        )?;
        let key = serde_json::json!({
            "type": "service_account",
            "project_id": "gyre-test",
            "private_key_id": "test",
            "private_key": String::from_utf8_lossy(&private_pem),
            "client_email": email,
            "client_id": "1",
            "token_uri": self.token_uri(),
        });
        std::fs::write(path, key.to_string()).map_err(|e| failed(e.to_string()))?;
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .account = Some((email.to_owned(), public_der));
        Ok(())
    }

    /// How many tokens it minted.
    #[must_use]
    pub fn minted(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .minted
    }

    /// Why it refused each JWT it refused.
    #[must_use]
    pub fn refused(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refused
            .clone()
    }
}
