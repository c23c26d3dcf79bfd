//! Google Vertex AI's `streamRawPredict`: what differs from the Anthropic API behind
//! `AnthropicClient`'s provider seam.
//!
//! - URL: `{base}/projects/{project}/locations/{region}/publishers/anthropic/models/
//!   {model}:streamRawPredict`; the body has no `model` and says `anthropic_version:
//!   vertex-2023-10-16`. The answer is the Messages API's SSE.
//! - Authorisation: `Bearer` with an OAuth access token from Application Default
//!   Credentials: a service-account key (an RS256-signed JWT exchanged at its
//!   `token_uri`) or gcloud's user credentials (a refresh token). The token is kept and
//!   fetched anew [`REFRESH_MARGIN`](crate::REFRESH_MARGIN) before it expires, or after a 401.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use gyre_protocol::MessagesRequest;

use crate::ApiError;

/// The body's `anthropic_version` on Vertex AI.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// The Application Default Credentials file, parsed.
#[derive(serde::Deserialize)]
struct CredentialsFile {
    #[serde(rename = "type")]
    kind: String,
    client_email: Option<String>,
    private_key: Option<String>,
    token_uri: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    refresh_token: Option<String>,
}

/// How a token is obtained.
enum Grant {
    /// The GCE metadata server's token for the instance's service account.
    Metadata {
        network: crate::NetworkOptions,
        /// The proxy-less client, made at the first fetch.
        client: std::sync::OnceLock<reqwest::Client>,
    },
    /// A JWT signed with the service account's key.
    ServiceAccount {
        email: String,
        key: ring::signature::RsaKeyPair,
    },
    /// gcloud's user credentials.
    RefreshToken {
        client_id: String,
        client_secret: String,
        refresh_token: String,
    },
}

/// Mints and keeps Vertex AI access tokens.
pub(crate) struct TokenSource {
    /// What errors name: `Google credentials FILE`, `the GCE metadata server HOST`.
    source_name: String,
    token_uri: String,
    grant: Grant,
    current: tokio::sync::Mutex<Option<(String, Instant)>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("source_name", &self.source_name)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

fn credentials_error(source_name: &str, message: String) -> ApiError {
    ApiError::Credentials {
        source_name: source_name.to_owned(),
        message,
    }
}

/// The DER inside a PEM block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .ok()
}

/// `application/x-www-form-urlencoded` of one value.
fn form_value(value: &str) -> String {
    crate::encode::percent_encode(value)
}

impl TokenSource {
    /// Tokens from the GCE metadata server at `host` (`host[:port]`).
    pub(crate) fn metadata(host: &str, network: &crate::NetworkOptions) -> Self {
        Self {
            source_name: format!("the GCE metadata server {host}"),
            token_uri: format!(
                "http://{host}/computeMetadata/v1/instance/service-accounts/default/token"
            ),
            grant: Grant::Metadata {
                network: network.clone(),
                client: std::sync::OnceLock::new(),
            },
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// Reads the credentials file now.
    pub(crate) fn new(file: &Path) -> Result<Self, ApiError> {
        let source_name = format!("Google credentials {}", file.display());
        let failed = |message: String| credentials_error(&source_name, message);
        let text = std::fs::read_to_string(file).map_err(|e| {
            failed(format!(
                "{e}; set GOOGLE_APPLICATION_CREDENTIALS to a service-account key file, or run \
                 `gcloud auth application-default login`"
            ))
        })?;
        let parsed: CredentialsFile = serde_json::from_str(&text)
            .map_err(|e| failed(format!("not a Google credentials file: {e}")))?;
        let missing = |field: &str| failed(format!("no `{field}` in it"));
        let grant = match parsed.kind.as_str() {
            "service_account" => {
                let pem = parsed.private_key.ok_or_else(|| missing("private_key"))?;
                let der = pem_der(&pem).ok_or_else(|| failed("private_key is not PEM".into()))?;
                let key = ring::signature::RsaKeyPair::from_pkcs8(&der)
                    .map_err(|e| failed(format!("private_key is not an RSA key: {e}")))?;
                Grant::ServiceAccount {
                    email: parsed.client_email.ok_or_else(|| missing("client_email"))?,
                    key,
                }
            }
            "authorized_user" => Grant::RefreshToken {
                client_id: parsed.client_id.ok_or_else(|| missing("client_id"))?,
                client_secret: parsed
                    .client_secret
                    .ok_or_else(|| missing("client_secret"))?,
                refresh_token: parsed
                    .refresh_token
                    .ok_or_else(|| missing("refresh_token"))?,
            },
            other => {
                return Err(failed(format!(
                    "credentials of type `{other}` are not supported (service_account and \
                     authorized_user are)"
                )));
            }
        };
        Ok(Self {
            source_name: source_name.clone(),
            token_uri: parsed
                .token_uri
                .unwrap_or_else(|| DEFAULT_TOKEN_URI.to_owned()),
            grant,
            current: tokio::sync::Mutex::new(None),
        })
    }

    /// The RS256 JWT a service account exchanges for a token.
    fn assertion(
        &self,
        email: &str,
        key: &ring::signature::RsaKeyPair,
    ) -> Result<String, ApiError> {
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let header = b64(br#"{"alg":"RS256","typ":"JWT"}"#);
        let claims = serde_json::json!({
            "iss": email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": now,
            "exp": now + 3600,
        });
        let signing_input = format!("{header}.{}", b64(claims.to_string().as_bytes()));
        let mut signature = vec![0; key.public().modulus_len()];
        key.sign(
            &ring::signature::RSA_PKCS1_SHA256,
            &ring::rand::SystemRandom::new(),
            signing_input.as_bytes(),
            &mut signature,
        )
        .map_err(|_| {
            credentials_error(&self.source_name, "the JWT could not be signed".to_owned())
        })?;
        Ok(format!("{signing_input}.{}", b64(&signature)))
    }

    /// The access token: the kept one unless it expires within [`REFRESH_MARGIN`].
    pub(crate) async fn token(&self, http: &reqwest::Client) -> Result<String, ApiError> {
        let mut current = self.current.lock().await;
        if let Some((token, expires)) = current.as_ref()
            && expires.saturating_duration_since(Instant::now()) > crate::REFRESH_MARGIN
        {
            return Ok(token.clone());
        }
        let failed = |message: String| credentials_error(&self.source_name, message);
        let form = match &self.grant {
            Grant::Metadata { network, client } => {
                let client = match client.get() {
                    Some(c) => c,
                    None => {
                        let made = crate::network::metadata_client(network)
                            .map_err(|e| failed(e.to_string()))?;
                        client.get_or_init(|| made)
                    }
                };
                let response = client
                    .get(&self.token_uri)
                    .header("metadata-flavor", "Google")
                    .send()
                    .await
                    .map_err(|e| {
                        failed(format!(
                            "it could not be reached ({e}); off Google Cloud, set \
                             GOOGLE_APPLICATION_CREDENTIALS to a service-account key file or \
                             run `gcloud auth application-default login`"
                        ))
                    })?;
                return self.keep(&mut current, response).await;
            }
            Grant::ServiceAccount { email, key } => format!(
                "grant_type={}&assertion={}",
                form_value("urn:ietf:params:oauth:grant-type:jwt-bearer"),
                form_value(&self.assertion(email, key)?)
            ),
            Grant::RefreshToken {
                client_id,
                client_secret,
                refresh_token,
            } => format!(
                "grant_type=refresh_token&client_id={}&client_secret={}&refresh_token={}",
                form_value(client_id),
                form_value(client_secret),
                form_value(refresh_token)
            ),
        };
        let response = http
            .post(&self.token_uri)
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(form)
            .send()
            .await
            .map_err(|e| failed(format!("the token endpoint {} failed: {e}", self.token_uri)))?;
        self.keep(&mut current, response).await
    }

    /// Reads a token endpoint's answer and keeps the token until it nears its expiry.
    async fn keep(
        &self,
        current: &mut Option<(String, Instant)>,
        response: reqwest::Response,
    ) -> Result<String, ApiError> {
        let failed = |message: String| credentials_error(&self.source_name, message);
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let said: String = body.chars().take(300).collect();
            return Err(failed(format!(
                "the token endpoint {} answered {status}: {said}",
                self.token_uri
            )));
        }
        #[derive(serde::Deserialize)]
        struct Token {
            access_token: String,
            expires_in: Option<u64>,
        }
        let token: Token = serde_json::from_str(&body)
            .map_err(|e| failed(format!("the token endpoint's answer has no token: {e}")))?;
        let expires = Instant::now() + Duration::from_secs(token.expires_in.unwrap_or(3600));
        *current = Some((token.access_token.clone(), expires));
        Ok(token.access_token)
    }

    /// Forgets the token (Vertex refused it with a 401).
    pub(crate) async fn invalidate(&self) {
        *self.current.lock().await = None;
    }
}

/// `{base}/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict`.
#[must_use]
pub(crate) fn url(base_url: &str, project: &str, region: &str, model: &str) -> String {
    format!(
        "{}/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict",
        base_url.trim_end_matches('/')
    )
}

/// The request body Vertex takes: the Messages API's without `model`, with
/// `anthropic_version`.
pub(crate) fn body(request: &MessagesRequest) -> Result<Vec<u8>, ApiError> {
    crate::encode::provider_body(request, &["model"], VERTEX_ANTHROPIC_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_goes_in_the_url_and_the_body_names_the_vertex_version() {
        assert_eq!(
            url(
                "https://us-east5-aiplatform.googleapis.com/v1/",
                "proj",
                "us-east5",
                "claude-sonnet-4-5@20250929"
            ),
            "https://us-east5-aiplatform.googleapis.com/v1/projects/proj/locations/us-east5/\
             publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"
        );
        let mut request = MessagesRequest::new(
            "claude-x",
            10,
            vec![gyre_protocol::Message::user_text("hi")],
        );
        request.stream = true;
        let body: serde_json::Value = serde_json::from_slice(&body(&request).unwrap()).unwrap();
        assert_eq!(body["anthropic_version"], VERTEX_ANTHROPIC_VERSION);
        assert_eq!(body["stream"], true);
        assert!(body.get("model").is_none());
    }

    #[test]
    fn a_missing_or_foreign_credentials_file_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let missing = TokenSource::new(&dir.path().join("nope.json")).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("GOOGLE_APPLICATION_CREDENTIALS"),
            "{missing}"
        );
        let other = dir.path().join("other.json");
        std::fs::write(&other, r#"{"type": "external_account"}"#).unwrap();
        let err = TokenSource::new(&other).unwrap_err().to_string();
        assert!(err.contains("external_account"), "{err}");
    }
}
