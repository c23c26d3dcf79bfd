//! Fetching and keeping the AWS credentials an [`AwsCredentialSource`] names: run at
//! the first Bedrock request, kept in this process's memory only (never put in an
//! environment variable, so no program gyre starts can see them), and fetched anew
//! [`REFRESH_MARGIN`](crate::REFRESH_MARGIN) before they expire, or after Bedrock
//! refused them.
//!
//! - `credential_process`: `sh -c` the command, read `{"Version": 1, "AccessKeyId", …}`.
//! - Web identity: STS `AssumeRoleWithWebIdentity` (an unsigned form POST), XML back.
//! - Container: `GET` the endpoint with the `Authorization` token, JSON back.
//! - IMDSv2: `PUT /latest/api/token`, then the role's credentials with that token.
//! - SSO: the token `aws sso login` cached, exchanged at the portal's
//!   `/federation/credentials`.

use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::ApiError;
use crate::NetworkOptions;
use crate::aws_profile::AwsCredentials;
use crate::aws_source::{AwsContainer, AwsCredentialSource, AwsSso, AwsWebIdentity};

/// The AWS CLI gives a `credential_process` this long.
const PROCESS_TIMEOUT: Duration = Duration::from_secs(60);
/// The session length IMDSv2 tokens are asked for (the SDKs' six hours).
const IMDS_TOKEN_TTL: &str = "21600";

/// Credentials and when they expire (`None`: never).
#[derive(Debug, Clone)]
struct Fetched {
    credentials: AwsCredentials,
    expires: Option<SystemTime>,
}

/// The credentials of one source, fetched when first needed and kept until they near
/// their expiry.
pub(crate) struct AwsCredentialProvider {
    source: AwsCredentialSource,
    network: NetworkOptions,
    /// The proxy-less client for metadata endpoints, made at their first use.
    metadata: OnceLock<reqwest::Client>,
    current: tokio::sync::Mutex<Option<Fetched>>,
}

impl std::fmt::Debug for AwsCredentialProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentialProvider")
            .field("source", &self.source.describe())
            .finish_non_exhaustive()
    }
}

fn failed(source: &str, message: impl Into<String>) -> ApiError {
    ApiError::Credentials {
        source_name: source.to_owned(),
        message: message.into(),
    }
}

/// An RFC 3339 time (`2026-12-02T14:00:00Z`).
fn parse_time(text: &str) -> Option<SystemTime> {
    let parsed = aws_smithy_types::DateTime::from_str(
        text.trim(),
        aws_smithy_types::date_time::Format::DateTime,
    )
    .ok()?;
    SystemTime::try_from(parsed).ok()
}

/// The keys the container endpoint, IMDS and `credential_process` answer with.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct KeysJson {
    access_key_id: String,
    secret_access_key: String,
    #[serde(alias = "SessionToken")]
    token: Option<String>,
    expiration: Option<String>,
}

impl KeysJson {
    fn fetched(self, source: &str) -> Result<Fetched, ApiError> {
        let expires = match self.expiration.as_deref() {
            None => None,
            Some(text) => Some(parse_time(text).ok_or_else(|| {
                failed(
                    source,
                    format!("its Expiration `{text}` is not an RFC 3339 time"),
                )
            })?),
        };
        Ok(Fetched {
            credentials: AwsCredentials {
                access_key_id: self.access_key_id,
                secret_access_key: self.secret_access_key,
                session_token: self.token.filter(|t| !t.is_empty()),
            },
            expires,
        })
    }
}

/// The text of `<tag>…</tag>` in `xml`, with the five XML entities decoded.
fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let start = xml.find(&format!("<{tag}>"))? + tag.len() + 2;
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(
        xml[start..end]
            .trim()
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// The first 300 characters of a body, for an error message.
fn said(body: &str) -> String {
    body.trim().chars().take(300).collect()
}

impl AwsCredentialProvider {
    pub(crate) fn new(source: AwsCredentialSource, network: NetworkOptions) -> Self {
        Self {
            source,
            network,
            metadata: OnceLock::new(),
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The credentials to sign with (`None` when requests go unsigned): the kept ones
    /// unless they expire within the refresh margin.
    pub(crate) async fn get(
        &self,
        http: &reqwest::Client,
    ) -> Result<Option<AwsCredentials>, ApiError> {
        if self.source == AwsCredentialSource::Skip {
            return Ok(None);
        }
        let mut current = self.current.lock().await;
        if let Some(kept) = current.as_ref() {
            let fresh = kept.expires.is_none_or(|at| {
                at.duration_since(SystemTime::now())
                    .is_ok_and(|left| left > crate::REFRESH_MARGIN)
            });
            if fresh {
                return Ok(Some(kept.credentials.clone()));
            }
        }
        let fetched = self.fetch(http).await?;
        let credentials = fetched.credentials.clone();
        *current = Some(fetched);
        Ok(Some(credentials))
    }

    /// Forgets the credentials (Bedrock refused them): the next request fetches anew.
    pub(crate) async fn invalidate(&self) {
        *self.current.lock().await = None;
    }

    fn metadata_client(&self, source: &str) -> Result<&reqwest::Client, ApiError> {
        if let Some(client) = self.metadata.get() {
            return Ok(client);
        }
        let client = crate::network::metadata_client(&self.network)
            .map_err(|e| failed(source, e.to_string()))?;
        Ok(self.metadata.get_or_init(|| client))
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<Fetched, ApiError> {
        match &self.source {
            AwsCredentialSource::Skip => Err(failed("no source", "requests go unsigned")),
            AwsCredentialSource::Environment(credentials) => Ok(Fetched {
                credentials: credentials.clone(),
                expires: None,
            }),
            AwsCredentialSource::Profile(profile) => {
                let credentials = crate::aws_profile::credentials(profile).map_err(|message| {
                    failed(&format!("AWS profile `{}`", profile.name), message)
                })?;
                Ok(Fetched {
                    credentials,
                    expires: None,
                })
            }
            AwsCredentialSource::Process { profile, command } => {
                process(&profile.name, command).await
            }
            AwsCredentialSource::WebIdentity(web) => web_identity(http, web).await,
            AwsCredentialSource::Container(container) => {
                let source = format!("the container credentials endpoint {}", container.url);
                let client = self.metadata_client(&source)?;
                self::container(client, container, &source).await
            }
            AwsCredentialSource::InstanceMetadata { endpoint } => {
                let source = format!("EC2 instance metadata at {endpoint}");
                let client = self.metadata_client(&source)?;
                instance_metadata(client, endpoint, &source).await
            }
            AwsCredentialSource::Sso(sso) => self::sso(http, sso).await,
        }
    }
}

/// Runs a profile's `credential_process` and reads the keys it prints.
async fn process(profile: &str, command: &str) -> Result<Fetched, ApiError> {
    let source = format!("the credential_process of AWS profile `{profile}`");
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| failed(&source, format!("it could not be started: {e}")))?;
    let output = tokio::time::timeout(PROCESS_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| {
            failed(
                &source,
                format!(
                    "it printed no credentials within {} s",
                    PROCESS_TIMEOUT.as_secs()
                ),
            )
        })?
        .map_err(|e| failed(&source, format!("it could not be run: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(failed(
            &source,
            format!(
                "it exited with {} and said: {}; fix credential_process in your AWS config",
                output.status,
                said(&stderr)
            ),
        ));
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Versioned {
        version: Option<u64>,
    }
    let version: Versioned = serde_json::from_slice(&output.stdout).map_err(|e| {
        failed(
            &source,
            format!("its output is not the JSON credential_process prints: {e}"),
        )
    })?;
    if version.version != Some(1) {
        return Err(failed(
            &source,
            format!(
                "its output says Version {:?}; only Version 1 is known",
                version.version
            ),
        ));
    }
    let keys: KeysJson = serde_json::from_slice(&output.stdout).map_err(|e| {
        failed(
            &source,
            format!("its output has no AccessKeyId and SecretAccessKey: {e}"),
        )
    })?;
    keys.fetched(&source)
}

/// `application/x-www-form-urlencoded` of name-value pairs.
fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", crate::encode::percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// STS `AssumeRoleWithWebIdentity`: the token file's token for the role's keys.
async fn web_identity(http: &reqwest::Client, web: &AwsWebIdentity) -> Result<Fetched, ApiError> {
    let source = format!("STS AssumeRoleWithWebIdentity at {}", web.sts_url);
    let token = std::fs::read_to_string(&web.token_file).map_err(|e| {
        failed(
            &source,
            format!(
                "the web identity token file {} ({}) cannot be read: {e}",
                web.token_file.display(),
                web.origin
            ),
        )
    })?;
    let body = form(&[
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", &web.role_arn),
        ("RoleSessionName", &web.session_name),
        ("WebIdentityToken", token.trim()),
    ]);
    let response = http
        .post(&web.sts_url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body)
        .send()
        .await
        .map_err(|e| failed(&source, format!("STS could not be reached: {e}")))?;
    let status = response.status();
    let xml = response.text().await.unwrap_or_default();
    if !status.is_success() {
        let code = xml_text(&xml, "Code").unwrap_or_default();
        let message = xml_text(&xml, "Message").unwrap_or_else(|| said(&xml));
        return Err(failed(
            &source,
            format!(
                "STS answered {status} {code}: {message}; check AWS_ROLE_ARN ({}) and the \
                 token in {}",
                web.role_arn,
                web.token_file.display()
            ),
        ));
    }
    let field = |tag: &str| {
        xml_text(&xml, tag).ok_or_else(|| failed(&source, format!("STS's answer has no {tag}")))
    };
    let expires = field("Expiration")?;
    Ok(Fetched {
        credentials: AwsCredentials {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: Some(field("SessionToken")?),
        },
        expires: Some(parse_time(&expires).ok_or_else(|| {
            failed(
                &source,
                format!("STS's Expiration `{expires}` is not a time"),
            )
        })?),
    })
}

/// Whether an `http://` container endpoint is one the SDKs accept: loopback, or the
/// ECS and EKS link-local hosts.
fn container_host_allowed(url: &str) -> bool {
    if url.starts_with("https://") {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    if host == "localhost" || host == "169.254.170.2" || host == "169.254.170.23" {
        return true;
    }
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// The container credentials endpoint (ECS task role, EKS Pod Identity).
async fn container(
    client: &reqwest::Client,
    container: &AwsContainer,
    source: &str,
) -> Result<Fetched, ApiError> {
    if !container_host_allowed(&container.url) {
        return Err(failed(
            source,
            format!(
                "{} must be https://, or http:// to a loopback address or the ECS/EKS \
                 credentials host",
                container.url_var
            ),
        ));
    }
    let token = match (&container.token_file, &container.token) {
        (Some(file), _) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| {
                    failed(
                        source,
                        format!(
                            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE {} cannot be read: {e}",
                            file.display()
                        ),
                    )
                })?
                .trim()
                .to_owned(),
        ),
        (None, token) => token.clone(),
    };
    let mut request = client.get(&container.url);
    if let Some(token) = token {
        let mut value = reqwest::header::HeaderValue::from_str(&token).map_err(|_| {
            failed(
                source,
                "the authorization token has characters not allowed in a header",
            )
        })?;
        value.set_sensitive(true);
        request = request.header(reqwest::header::AUTHORIZATION, value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| failed(source, format!("it could not be reached: {e}")))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(failed(
            source,
            format!("it answered {status}: {}", said(&body)),
        ));
    }
    serde_json::from_str::<KeysJson>(&body)
        .map_err(|e| failed(source, format!("its answer has no credentials: {e}")))?
        .fetched(source)
}

/// EC2 instance metadata, IMDSv2: a session token, the instance role's name, its keys.
async fn instance_metadata(
    client: &reqwest::Client,
    endpoint: &str,
    source: &str,
) -> Result<Fetched, ApiError> {
    let unreachable = |e: reqwest::Error| {
        failed(
            source,
            format!(
                "it could not be reached ({e}); off EC2, set AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or AWS_EC2_METADATA_DISABLED=true"
            ),
        )
    };
    let answered = |what: &str, status: reqwest::StatusCode, body: &str| {
        failed(source, format!("{what} answered {status}: {}", said(body)))
    };
    let response = client
        .put(format!("{endpoint}/latest/api/token"))
        .header("x-aws-ec2-metadata-token-ttl-seconds", IMDS_TOKEN_TTL)
        .send()
        .await
        .map_err(unreachable)?;
    let status = response.status();
    let token = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(answered("the token request", status, &token));
    }
    let base = format!("{endpoint}/latest/meta-data/iam/security-credentials/");
    let get = |url: String| {
        client
            .get(url)
            .header("x-aws-ec2-metadata-token", token.trim())
            .send()
    };
    let response = get(base.clone()).await.map_err(unreachable)?;
    let status = response.status();
    let roles = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(answered(
            "the role listing (has the instance an IAM role?)",
            status,
            &roles,
        ));
    }
    let Some(role) = roles.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(failed(source, "the instance has no IAM role"));
    };
    let response = get(format!("{base}{role}")).await.map_err(unreachable)?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(answered("the role's credentials", status, &body));
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Coded {
        code: Option<String>,
    }
    if let Ok(Coded { code: Some(code) }) = serde_json::from_str::<Coded>(&body)
        && code != "Success"
    {
        return Err(failed(source, format!("the role's credentials say {code}")));
    }
    serde_json::from_str::<KeysJson>(&body)
        .map_err(|e| failed(source, format!("its answer has no credentials: {e}")))?
        .fetched(source)
}

/// The cache file `aws sso login` writes: named for the SHA-1 of the session's name
/// (or, for a profile without `sso_session`, of the start URL).
fn sso_cache_file(sso: &AwsSso) -> std::path::PathBuf {
    let key = sso.session.as_deref().unwrap_or(&sso.start_url);
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, key.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    sso.cache_dir.join(format!("{hex}.json"))
}

/// The SSO role's keys, for the token `aws sso login` cached.
async fn sso(http: &reqwest::Client, sso: &AwsSso) -> Result<Fetched, ApiError> {
    let source = format!("AWS SSO for profile `{}`", sso.profile);
    let login = format!("run `aws sso login --profile {}`", sso.profile);
    let file = sso_cache_file(sso);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        failed(
            &source,
            format!("no cached SSO token at {} ({e}); {login}", file.display()),
        )
    })?;
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Cached {
        access_token: String,
        expires_at: String,
    }
    let cached: Cached = serde_json::from_str(&text).map_err(|e| {
        failed(
            &source,
            format!(
                "the cached SSO token {} is unreadable ({e}); {login}",
                file.display()
            ),
        )
    })?;
    if parse_time(&cached.expires_at).is_none_or(|at| at <= SystemTime::now()) {
        return Err(failed(
            &source,
            format!(
                "the cached SSO token expired at {}; {login}",
                cached.expires_at
            ),
        ));
    }
    let mut token = reqwest::header::HeaderValue::from_str(&cached.access_token).map_err(|_| {
        failed(
            &source,
            format!("the cached SSO token is malformed; {login}"),
        )
    })?;
    token.set_sensitive(true);
    let url = format!(
        "{}/federation/credentials?{}",
        sso.portal_url.trim_end_matches('/'),
        form(&[
            ("account_id", &sso.account_id),
            ("role_name", &sso.role_name)
        ])
    );
    let response = http
        .get(&url)
        .header("x-amz-sso_bearer_token", token)
        .send()
        .await
        .map_err(|e| failed(&source, format!("the SSO portal could not be reached: {e}")))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(failed(
            &source,
            format!("the SSO portal answered {status}: {}; {login}", said(&body)),
        ));
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Role {
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
        /// Milliseconds since the epoch.
        expiration: Option<u64>,
    }
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        role_credentials: Role,
    }
    let role = serde_json::from_str::<Answer>(&body)
        .map_err(|e| {
            failed(
                &source,
                format!("the SSO portal's answer has no credentials: {e}"),
            )
        })?
        .role_credentials;
    Ok(Fetched {
        credentials: AwsCredentials {
            access_key_id: role.access_key_id,
            secret_access_key: role.secret_access_key,
            session_token: role.session_token,
        },
        expires: role
            .expiration
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sts_xml_fields_are_read_and_unescaped() {
        let xml = "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>\
                   <Credentials><AccessKeyId>ASIA1</AccessKeyId>\
                   <SecretAccessKey>a/b+c&amp;d</SecretAccessKey>\
                   <SessionToken>tok</SessionToken>\
                   <Expiration>2030-01-01T00:00:00Z</Expiration></Credentials>\
                   </AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>";
        assert_eq!(xml_text(xml, "AccessKeyId").as_deref(), Some("ASIA1"));
        assert_eq!(xml_text(xml, "SecretAccessKey").as_deref(), Some("a/b+c&d"));
        assert_eq!(xml_text(xml, "Missing"), None);
        let at = parse_time("2030-01-01T00:00:00Z").unwrap();
        assert_eq!(
            at.duration_since(UNIX_EPOCH).unwrap().as_secs(),
            1_893_456_000
        );
    }

    #[test]
    fn container_endpoints_over_http_must_be_local() {
        assert!(container_host_allowed("http://127.0.0.1:8080/creds"));
        assert!(container_host_allowed("http://[::1]:8080/creds"));
        assert!(container_host_allowed(
            "http://169.254.170.23/v1/credentials"
        ));
        assert!(container_host_allowed("https://creds.example.com/x"));
        assert!(!container_host_allowed("http://creds.example.com/x"));
        assert!(!container_host_allowed("http://10.0.0.1/x"));
    }

    #[test]
    fn the_sso_cache_file_is_named_for_the_sha1_of_the_session() {
        let sso = AwsSso {
            profile: "dev".into(),
            start_url: "https://d-123.awsapps.com/start".into(),
            session: Some("my-sso".into()),
            account_id: "1".into(),
            role_name: "r".into(),
            cache_dir: "/c".into(),
            portal_url: "https://portal".into(),
        };
        // sha1("my-sso"), as `aws sso login` names the file.
        assert_eq!(
            sso_cache_file(&sso),
            std::path::PathBuf::from("/c/0ad374308c5a4e22f723adf10145eafad7c4031c.json")
        );
    }

    #[tokio::test]
    async fn a_credential_process_prints_keys_that_are_read_with_their_expiry() {
        let fetched = process(
            "p",
            r#"printf '{"Version":1,"AccessKeyId":"AKP","SecretAccessKey":"s","SessionToken":"t","Expiration":"2030-01-01T00:00:00Z"}'"#,
        )
        .await
        .unwrap();
        assert_eq!(fetched.credentials.access_key_id, "AKP");
        assert_eq!(fetched.credentials.session_token.as_deref(), Some("t"));
        assert!(fetched.expires.is_some());
        let err = process("p", "echo 'sealed' >&2; exit 2").await.unwrap_err();
        assert_eq!(err.category(), "credentials");
        assert!(err.to_string().contains("sealed"), "{err}");
        let err = process("p", r#"echo '{"Version":2}'"#).await.unwrap_err();
        assert!(err.to_string().contains("Version"), "{err}");
    }
}
