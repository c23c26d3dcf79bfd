//! The `ModelClient` seam and what a client needs to know (`ClientConfig`); the HTTP
//! implementation, `AnthropicClient`, is in `http_client` (the `client` feature).

use std::fmt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use gyre_protocol::{MessagesRequest, StreamEvent};
use tokio_util::sync::CancellationToken;

pub use crate::aws_profile::{AwsCredentials, AwsProfile};
use crate::aws_source::switched_on;
pub use crate::aws_source::{AwsContainer, AwsCredentialSource, AwsSso, AwsWebIdentity};
use crate::{ApiError, NetworkOptions};

/// The raw events of one attempt, as they arrive.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, ApiError>> + Send>>;

/// Something that answers a Messages API request with a stream of events.
///
/// One call is one attempt: no retry here (see [`crate::stream_with_retry`]). The stream
/// ends after `message_stop`, or with the error that ended the attempt; cancelling the
/// token ends it at once with [`ApiError::Aborted`]. The request is shared, not copied:
/// a retry sends the same one again.
pub trait ModelClient: Send + Sync {
    /// One attempt: send the request, yield raw SSE events as they arrive. No retry here.
    fn stream(&self, request: Arc<MessagesRequest>, cancel: CancellationToken) -> EventStream;

    /// A client for another conversation (a side request, a sub-agent): it shares this
    /// one's connections and settings but none of what it keeps per conversation, so
    /// that requests through either leave the other's alone. `AnthropicClient` keeps
    /// the last request body to encode only what the next one adds
    /// ([`BodyEncoder`](crate::BodyEncoder)): a request of another conversation sent
    /// through it would make the next one re-encode the whole history.
    ///
    /// `None` (the default): the client keeps nothing per conversation; share it.
    fn fork(&self) -> Option<Arc<dyn ModelClient>> {
        None
    }
}

/// `https://api.anthropic.com`, used when `ANTHROPIC_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header gyre speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `gyre/<version>`: gyre always names itself.
#[must_use]
pub fn default_user_agent() -> String {
    format!("gyre/{}", env!("CARGO_PKG_VERSION"))
}

/// How requests to the Anthropic API are authorised. `Debug` never shows a secret.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// An API key, sent as `x-api-key` (`ANTHROPIC_API_KEY`).
    ApiKey(String),
    /// A token sent as `Authorization: Bearer` (`ANTHROPIC_AUTH_TOKEN`), for gateways.
    BearerToken(String),
    /// A command whose output is the key (settings' `apiKeyHelper`), sent as
    /// `x-api-key`: run when first needed, again when its TTL is up or after a 401.
    KeyHelper(KeyHelper),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ApiKey(_) => f.write_str("ApiKey([redacted])"),
            Self::BearerToken(_) => f.write_str("BearerToken([redacted])"),
            Self::KeyHelper(helper) => f.debug_tuple("KeyHelper").field(helper).finish(),
        }
    }
}

impl Credential {
    /// Where the credential comes from, for `--verbose` and `/status`: never the secret.
    #[must_use]
    pub fn source(&self) -> String {
        match self {
            Self::ApiKey(_) => "ANTHROPIC_API_KEY".to_owned(),
            Self::BearerToken(_) => "ANTHROPIC_AUTH_TOKEN (bearer)".to_owned(),
            // Not the command: it may hold a secret of its own (a vault token, a path).
            Self::KeyHelper(_) => "apiKeyHelper (settings)".to_owned(),
        }
    }

    /// The secret itself when it is known up front (a fixture recording redacts it).
    #[must_use]
    pub fn static_secret(&self) -> Option<&str> {
        match self {
            Self::ApiKey(s) | Self::BearerToken(s) => Some(s),
            Self::KeyHelper(_) => None,
        }
    }
}

/// A command that prints the API key (settings' `apiKeyHelper`), run with `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyHelper {
    /// The shell command.
    pub command: String,
    /// The directory it runs in.
    pub cwd: PathBuf,
    /// How long its output is used before it runs again
    /// (`CLAUDE_CODE_API_KEY_HELPER_TTL_MS`; [`KeyHelper::DEFAULT_TTL`] without it).
    pub ttl: Duration,
}

impl KeyHelper {
    /// The reference reruns the helper every 5 minutes unless told otherwise.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);

    /// A helper running `command` in `cwd`, with the TTL
    /// `CLAUDE_CODE_API_KEY_HELPER_TTL_MS` from `lookup` gives (default 5 minutes).
    #[must_use]
    pub fn new(
        command: impl Into<String>,
        cwd: impl Into<PathBuf>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Self {
        let ttl = lookup("CLAUDE_CODE_API_KEY_HELPER_TTL_MS")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Self::DEFAULT_TTL, Duration::from_millis);
        Self {
            command: command.into(),
            cwd: cwd.into(),
            ttl,
        }
    }
}

/// Which service answers the requests, and how they are authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The Anthropic Messages API, or a gateway that speaks it.
    Anthropic(Credential),
    /// Amazon Bedrock's `InvokeModelWithResponseStream` (`CLAUDE_CODE_USE_BEDROCK=1`).
    Bedrock(BedrockOptions),
    /// Google Vertex AI's `streamRawPredict` (`CLAUDE_CODE_USE_VERTEX=1`).
    Vertex(VertexOptions),
}

/// Where Vertex AI runs and how its requests are authorised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VertexOptions {
    /// `CLOUD_ML_REGION` (default `us-east5`); `global` for the global endpoint.
    pub region: String,
    /// `ANTHROPIC_VERTEX_PROJECT_ID` (else `GOOGLE_CLOUD_PROJECT`, `GCLOUD_PROJECT`).
    pub project_id: String,
    /// Where the OAuth access tokens come from.
    pub credentials: GoogleCredentialSource,
}

/// Where Vertex AI's OAuth access tokens come from (Application Default Credentials).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoogleCredentialSource {
    /// None: requests go without a token, for a gateway that authorises them
    /// (`CLAUDE_CODE_SKIP_VERTEX_AUTH=1`).
    Skip,
    /// A credentials file: a service-account key (`GOOGLE_APPLICATION_CREDENTIALS`) or
    /// gcloud's user credentials (`gcloud auth application-default login`).
    File(PathBuf),
    /// The GCE metadata server's token for the instance's service account.
    Metadata {
        /// `host[:port]`: `GCE_METADATA_HOST`, else `169.254.169.254`.
        host: String,
    },
}

/// Where Bedrock runs and how its requests are signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedrockOptions {
    /// The AWS region (`AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's, or `us-east-1`).
    pub region: String,
    /// The credentials that sign requests.
    pub credentials: AwsCredentialSource,
}

impl Backend {
    /// The backend's name, for `--verbose` and `/status`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Anthropic(_) => "Anthropic API",
            Self::Bedrock(_) => "Amazon Bedrock",
            Self::Vertex(_) => "Google Vertex AI",
        }
    }

    /// Where its credentials come from (never the secret).
    #[must_use]
    pub fn credential_source(&self) -> String {
        match self {
            Self::Anthropic(credential) => credential.source(),
            Self::Bedrock(options) => options.credentials.describe(),
            Self::Vertex(options) => match &options.credentials {
                GoogleCredentialSource::File(file) => {
                    format!("Google credentials {}", file.display())
                }
                GoogleCredentialSource::Metadata { host } => {
                    format!("GCE metadata server {host} (the instance's service account)")
                }
                GoogleCredentialSource::Skip => "none (CLAUDE_CODE_SKIP_VERTEX_AUTH)".to_owned(),
            },
        }
    }

    /// The secret when it is known up front (a fixture recording redacts it).
    #[must_use]
    pub fn static_secret(&self) -> Option<&str> {
        match self {
            Self::Anthropic(credential) => credential.static_secret(),
            Self::Bedrock(options) => match &options.credentials {
                AwsCredentialSource::Environment(c) => Some(&c.secret_access_key),
                _ => None,
            },
            Self::Vertex(_) => None,
        }
    }
}

impl BedrockOptions {
    /// Reads `AWS_REGION`/`AWS_DEFAULT_REGION`, `CLAUDE_CODE_SKIP_BEDROCK_AUTH` and the
    /// AWS credential variables through `var` (blank counts as unset): see
    /// [`AwsCredentialSource::from_lookup`] for the order they are tried in. Without a
    /// region variable the profile's `region` in the config file is used, else
    /// `us-east-1`.
    #[must_use]
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Self {
        let profile = AwsProfile::from_lookup(&var);
        let region = var("AWS_REGION")
            .or_else(|| var("AWS_DEFAULT_REGION"))
            .or_else(|| crate::aws_profile::region(&profile))
            .unwrap_or_else(|| "us-east-1".to_owned());
        let credentials = if switched_on(var("CLAUDE_CODE_SKIP_BEDROCK_AUTH")) {
            AwsCredentialSource::Skip
        } else {
            AwsCredentialSource::from_lookup(&var, profile, &region)
        };
        Self {
            region,
            credentials,
        }
    }
}

/// GCE's metadata server when `GCE_METADATA_HOST` does not name another.
const GCE_METADATA_DEFAULT_HOST: &str = "169.254.169.254";

impl VertexOptions {
    /// Reads `CLOUD_ML_REGION`, `ANTHROPIC_VERTEX_PROJECT_ID` (or `GOOGLE_CLOUD_PROJECT`,
    /// `GCLOUD_PROJECT`), `CLAUDE_CODE_SKIP_VERTEX_AUTH` and the Application Default
    /// Credentials in their order: `GOOGLE_APPLICATION_CREDENTIALS`; gcloud's
    /// `~/.config/gcloud/application_default_credentials.json` when it exists
    /// (`CLOUDSDK_CONFIG` moves `~/.config/gcloud`); else the GCE metadata server
    /// (`GCE_METADATA_HOST`, default `169.254.169.254`).
    #[must_use]
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Self {
        let credentials = if switched_on(var("CLAUDE_CODE_SKIP_VERTEX_AUTH")) {
            GoogleCredentialSource::Skip
        } else if let Some(file) = var("GOOGLE_APPLICATION_CREDENTIALS") {
            GoogleCredentialSource::File(PathBuf::from(file))
        } else {
            let gcloud = var("CLOUDSDK_CONFIG")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(var("HOME").unwrap_or_default())
                        .join(".config")
                        .join("gcloud")
                })
                .join("application_default_credentials.json");
            if gcloud.is_file() {
                GoogleCredentialSource::File(gcloud)
            } else {
                GoogleCredentialSource::Metadata {
                    host: var("GCE_METADATA_HOST")
                        .unwrap_or_else(|| GCE_METADATA_DEFAULT_HOST.to_owned()),
                }
            }
        };
        Self {
            region: var("CLOUD_ML_REGION").unwrap_or_else(|| "us-east5".to_owned()),
            project_id: var("ANTHROPIC_VERTEX_PROJECT_ID")
                .or_else(|| var("GOOGLE_CLOUD_PROJECT"))
                .or_else(|| var("GCLOUD_PROJECT"))
                .unwrap_or_default(),
            credentials,
        }
    }
}

/// Where and how to reach the API. `Debug` never shows a secret.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Scheme, host and optional path prefix; `/v1/messages` is appended.
    pub base_url: String,
    /// The service, and its credentials.
    pub backend: Backend,
    /// Proxies and extra CA certificates.
    pub network: NetworkOptions,
    /// The `user-agent` header (`gyre/<version>` by default).
    pub user_agent: String,
    /// How long to wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Beta features to ask for (`--betas`): the `anthropic-beta` header.
    pub betas: Vec<String>,
}

impl ClientConfig {
    /// A configuration for the public API with this key.
    #[must_use]
    pub fn new(api_key: impl Into<String>) -> Self {
        Self::with_credential(Credential::ApiKey(api_key.into()))
    }

    /// A configuration for the public API with this credential.
    #[must_use]
    pub fn with_credential(credential: Credential) -> Self {
        Self::for_backend(Backend::Anthropic(credential))
    }

    /// A configuration for `backend`, at the public API's URL until
    /// [`ClientConfig::with_base_url`] says otherwise.
    #[must_use]
    pub fn for_backend(backend: Backend) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            backend,
            network: NetworkOptions::default(),
            user_agent: default_user_agent(),
            connect_timeout: Duration::from_secs(30),
            betas: Vec::new(),
        }
    }

    /// Same, with another base URL (a proxy, gyre-testkit…).
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Same, with these proxies and CAs.
    #[must_use]
    pub fn with_network(mut self, network: NetworkOptions) -> Self {
        self.network = network;
        self
    }

    /// Reads the configuration from the process environment; see [`ClientConfig::from_lookup`].
    ///
    /// # Errors
    /// As [`ClientConfig::from_lookup`].
    pub fn from_env() -> Result<Self, ApiError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration these variables describe: `ANTHROPIC_AUTH_TOKEN` (a bearer
    /// token) else `ANTHROPIC_API_KEY`, `ANTHROPIC_BASE_URL`, and the proxies and CA
    /// bundles of [`NetworkOptions::from_lookup`].
    ///
    /// # Errors
    /// [`ApiError::MissingApiKey`] when neither credential is set.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ApiError> {
        Self::from_lookup_with_helper(lookup, None)
    }

    /// [`ClientConfig::from_lookup`], with an `apiKeyHelper` from settings: it comes
    /// after `ANTHROPIC_AUTH_TOKEN` and before `ANTHROPIC_API_KEY`.
    ///
    /// # Errors
    /// [`ApiError::MissingApiKey`] when no credential is set.
    pub fn from_lookup_with_helper(
        lookup: impl Fn(&str) -> Option<String>,
        helper: Option<KeyHelper>,
    ) -> Result<Self, ApiError> {
        let var = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if switched_on(var("CLAUDE_CODE_USE_BEDROCK")) {
            let options = BedrockOptions::from_lookup(var);
            let base_url = var("ANTHROPIC_BEDROCK_BASE_URL").unwrap_or_else(|| {
                format!("https://bedrock-runtime.{}.amazonaws.com", options.region)
            });
            let mut config = Self::for_backend(Backend::Bedrock(options));
            config.base_url = base_url;
            config.network = NetworkOptions::from_lookup(&lookup);
            return Ok(config);
        }
        if switched_on(var("CLAUDE_CODE_USE_VERTEX")) {
            let options = VertexOptions::from_lookup(var);
            let base_url = var("ANTHROPIC_VERTEX_BASE_URL").unwrap_or_else(|| {
                if options.region == "global" {
                    "https://aiplatform.googleapis.com/v1".to_owned()
                } else {
                    format!("https://{}-aiplatform.googleapis.com/v1", options.region)
                }
            });
            let mut config = Self::for_backend(Backend::Vertex(options));
            config.base_url = base_url;
            config.network = NetworkOptions::from_lookup(&lookup);
            return Ok(config);
        }
        let credential = var("ANTHROPIC_AUTH_TOKEN")
            .map(Credential::BearerToken)
            .or_else(|| helper.map(Credential::KeyHelper))
            .or_else(|| var("ANTHROPIC_API_KEY").map(Credential::ApiKey))
            .ok_or(ApiError::MissingApiKey)?;
        let mut config = Self::with_credential(credential);
        if let Some(base) = var("ANTHROPIC_BASE_URL") {
            config.base_url = base;
        }
        config.network = NetworkOptions::from_lookup(&lookup);
        Ok(config)
    }

    /// `{base_url}/v1/messages` (the Anthropic API's path).
    #[must_use]
    pub fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.base_url.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn from_lookup_requires_a_key() {
        let env: HashMap<&str, &str> = HashMap::new();
        let got = ClientConfig::from_lookup(|k| env.get(k).map(|v| (*v).to_owned()));
        assert_eq!(got.unwrap_err(), ApiError::MissingApiKey);
        let blank = ClientConfig::from_lookup(|_| Some("  ".to_owned()));
        assert_eq!(blank.unwrap_err(), ApiError::MissingApiKey);
    }

    #[test]
    fn from_lookup_reads_base_url_with_default() {
        let c =
            ClientConfig::from_lookup(|k| (k == "ANTHROPIC_API_KEY").then(|| "sk-1".to_owned()))
                .unwrap();
        assert_eq!(c.base_url, DEFAULT_BASE_URL);
        assert_eq!(
            c.backend,
            Backend::Anthropic(Credential::ApiKey("sk-1".to_owned()))
        );
        assert_eq!(c.messages_url(), "https://api.anthropic.com/v1/messages");
        let c = ClientConfig::from_lookup(|k| match k {
            "ANTHROPIC_API_KEY" => Some("sk-1".to_owned()),
            "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/".to_owned()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.messages_url(), "http://127.0.0.1:9/v1/messages");
    }

    #[test]
    fn a_bearer_token_wins_over_the_helper_and_the_helper_over_the_key() {
        let vars = |names: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                names
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let helper = KeyHelper::new("vault read key", "/", |_| None);
        const BOTH: &[(&str, &str)] =
            &[("ANTHROPIC_AUTH_TOKEN", "tok"), ("ANTHROPIC_API_KEY", "sk")];
        let c = ClientConfig::from_lookup_with_helper(vars(BOTH), Some(helper.clone())).unwrap();
        assert_eq!(
            c.backend,
            Backend::Anthropic(Credential::BearerToken("tok".to_owned()))
        );
        assert_eq!(
            c.backend.credential_source(),
            "ANTHROPIC_AUTH_TOKEN (bearer)"
        );
        const KEY_ONLY: &[(&str, &str)] = &[("ANTHROPIC_API_KEY", "sk")];
        let c =
            ClientConfig::from_lookup_with_helper(vars(KEY_ONLY), Some(helper.clone())).unwrap();
        assert_eq!(
            c.backend,
            Backend::Anthropic(Credential::KeyHelper(helper.clone()))
        );
        assert_eq!(c.backend.credential_source(), "apiKeyHelper (settings)");
        assert_eq!(helper.ttl, KeyHelper::DEFAULT_TTL);
        let ttl = KeyHelper::new("k", "/", |k| {
            (k == "CLAUDE_CODE_API_KEY_HELPER_TTL_MS").then(|| "1500".to_owned())
        });
        assert_eq!(ttl.ttl, Duration::from_millis(1500));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = ClientConfig::new("sk-ant-secret");
        assert!(!format!("{c:?}").contains("secret"));
        let bearer = ClientConfig::with_credential(Credential::BearerToken("tok-secret".into()));
        assert!(!format!("{bearer:?}").contains("secret"));
        #[cfg(feature = "client")]
        {
            let client = crate::AnthropicClient::new(c).unwrap();
            assert!(!format!("{client:?}").contains("secret"));
        }
    }

    #[test]
    fn user_agent_names_gyre() {
        assert!(default_user_agent().starts_with("gyre/"));
    }

    #[cfg(feature = "client")]
    #[test]
    fn bad_base_url_is_a_config_error() {
        let err =
            crate::AnthropicClient::new(ClientConfig::new("k").with_base_url("api.anthropic.com"))
                .unwrap_err();
        assert_eq!(err.category(), "invalid_config");
    }
}
