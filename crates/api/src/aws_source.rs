//! Where the AWS credentials that sign Bedrock requests come from, decided from the
//! environment and the shared files alone: nothing here touches the network or runs a
//! program. Fetching them is `aws_credentials`' job, at the first request.
//!
//! The order is the AWS SDKs' default chain: the environment's keys; the profile
//! (its keys, its `credential_process`, its SSO role, its web identity); web identity
//! from the environment; the ECS/EKS container endpoint; EC2 instance metadata.

use std::fmt;
use std::path::PathBuf;

use crate::aws_profile::{AwsCredentials, AwsProfile};

/// Whether a `CLAUDE_CODE_USE_…`-style switch is on: `1`, `true`, `yes`, `on`.
pub(crate) fn switched_on(value: Option<String>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// Where the AWS credentials that sign Bedrock requests come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsCredentialSource {
    /// None: requests go unsigned, for a gateway that signs them
    /// (`CLAUDE_CODE_SKIP_BEDROCK_AUTH=1`).
    Skip,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`.
    Environment(AwsCredentials),
    /// A profile's keys in the shared `credentials` and `config` files (`AWS_PROFILE`).
    Profile(AwsProfile),
    /// A profile's `credential_process`: a command of the user's AWS config that prints
    /// the keys as JSON. Run by gyre, its output kept in memory only.
    Process {
        /// The profile that names it.
        profile: AwsProfile,
        /// The shell command (never shown: it may hold a secret).
        command: String,
    },
    /// A profile's IAM Identity Center (SSO) role, with the token `aws sso login` cached.
    Sso(AwsSso),
    /// STS `AssumeRoleWithWebIdentity` with a token file (EKS, GitHub Actions, …).
    WebIdentity(AwsWebIdentity),
    /// The ECS/EKS container credentials endpoint.
    Container(AwsContainer),
    /// EC2 instance metadata (IMDSv2).
    InstanceMetadata {
        /// `AWS_EC2_METADATA_SERVICE_ENDPOINT`, else `http://169.254.169.254`.
        endpoint: String,
    },
}

/// A profile's SSO role and where `aws sso login` cached its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSso {
    /// The profile's name.
    pub profile: String,
    /// `sso_start_url` (the profile's or its `sso-session`'s).
    pub start_url: String,
    /// The `sso_session` the profile names, if any: the cache file is named for it.
    pub session: Option<String>,
    /// `sso_account_id`.
    pub account_id: String,
    /// `sso_role_name`.
    pub role_name: String,
    /// `$HOME/.aws/sso/cache`.
    pub cache_dir: PathBuf,
    /// The SSO portal: `AWS_ENDPOINT_URL_SSO`, else `https://portal.sso.{sso_region}.amazonaws.com`.
    pub portal_url: String,
}

/// STS `AssumeRoleWithWebIdentity`: the role, the token file, where STS is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsWebIdentity {
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` or the profile's `web_identity_token_file`; read
    /// anew at each refresh (the token rotates).
    pub token_file: PathBuf,
    /// `AWS_ROLE_ARN` or the profile's `role_arn`.
    pub role_arn: String,
    /// `AWS_ROLE_SESSION_NAME` or the profile's `role_session_name`, else `gyre`.
    pub session_name: String,
    /// `AWS_ENDPOINT_URL_STS`, else `AWS_ENDPOINT_URL`, else `https://sts.{region}.amazonaws.com`.
    pub sts_url: String,
    /// What named it (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS profile ci`).
    pub origin: String,
}

/// The container credentials endpoint and its authorization.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsContainer {
    /// `http://169.254.170.2` + `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, or
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI`.
    pub url: String,
    /// The variable that gave the URL.
    pub url_var: &'static str,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN` (sent as `Authorization`).
    pub token: Option<String>,
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE` (read at each fetch; wins over the token).
    pub token_file: Option<PathBuf>,
}

impl fmt::Debug for AwsContainer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsContainer")
            .field("url", &self.url)
            .field("url_var", &self.url_var)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("token_file", &self.token_file)
            .finish()
    }
}

/// EC2's instance metadata service when `AWS_EC2_METADATA_SERVICE_ENDPOINT` names none.
const IMDS_DEFAULT_ENDPOINT: &str = "http://169.254.169.254";
/// ECS's credentials host, for `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
const ECS_CREDENTIALS_HOST: &str = "http://169.254.170.2";

impl AwsCredentialSource {
    /// The first source of the chain that is configured: `AWS_ACCESS_KEY_ID` and
    /// `AWS_SECRET_ACCESS_KEY` (with `AWS_SESSION_TOKEN`); the profile's keys,
    /// `credential_process`, SSO role or web identity; `AWS_WEB_IDENTITY_TOKEN_FILE`
    /// with `AWS_ROLE_ARN`; `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` or `_FULL_URI`;
    /// EC2 instance metadata unless `AWS_EC2_METADATA_DISABLED=true`. A profile named
    /// by `AWS_PROFILE` that neither file has stops the chain (its keys are then what
    /// is missing), as do no source at all.
    #[must_use]
    pub fn from_lookup(
        var: impl Fn(&str) -> Option<String>,
        profile: AwsProfile,
        region: &str,
    ) -> Self {
        if let (Some(access_key_id), Some(secret_access_key)) =
            (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY"))
        {
            return Self::Environment(AwsCredentials {
                access_key_id,
                secret_access_key,
                session_token: var("AWS_SESSION_TOKEN"),
            });
        }
        let sts_url = var("AWS_ENDPOINT_URL_STS")
            .or_else(|| var("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://sts.{region}.amazonaws.com"));
        if let Some(source) = Self::of_profile(&var, &profile, &sts_url) {
            return source;
        }
        if var("AWS_PROFILE").is_some() {
            return Self::Profile(profile);
        }
        if let (Some(token_file), Some(role_arn)) =
            (var("AWS_WEB_IDENTITY_TOKEN_FILE"), var("AWS_ROLE_ARN"))
        {
            return Self::WebIdentity(AwsWebIdentity {
                token_file: PathBuf::from(token_file),
                role_arn,
                session_name: var("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| "gyre".to_owned()),
                sts_url,
                origin: "AWS_WEB_IDENTITY_TOKEN_FILE".to_owned(),
            });
        }
        let container = var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
            .map(|relative| {
                (
                    format!("{ECS_CREDENTIALS_HOST}{relative}"),
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                )
            })
            .or_else(|| {
                var("AWS_CONTAINER_CREDENTIALS_FULL_URI")
                    .map(|full| (full, "AWS_CONTAINER_CREDENTIALS_FULL_URI"))
            });
        if let Some((url, url_var)) = container {
            return Self::Container(AwsContainer {
                url,
                url_var,
                token: var("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
                token_file: var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE").map(PathBuf::from),
            });
        }
        if !switched_on(var("AWS_EC2_METADATA_DISABLED")) {
            return Self::InstanceMetadata {
                endpoint: var("AWS_EC2_METADATA_SERVICE_ENDPOINT")
                    .unwrap_or_else(|| IMDS_DEFAULT_ENDPOINT.to_owned())
                    .trim_end_matches('/')
                    .to_owned(),
            };
        }
        Self::Profile(profile)
    }

    /// What the profile's settings say, if it has any that give credentials.
    fn of_profile(
        var: &impl Fn(&str) -> Option<String>,
        profile: &AwsProfile,
        sts_url: &str,
    ) -> Option<Self> {
        let mut settings = crate::aws_profile::settings(profile)?;
        let mut take = |key: &str| settings.remove(key).filter(|v| !v.is_empty());
        if take("aws_access_key_id").is_some() {
            return Some(Self::Profile(profile.clone()));
        }
        if let Some(command) = take("credential_process") {
            return Some(Self::Process {
                profile: profile.clone(),
                command,
            });
        }
        if let (Some(account_id), Some(role_name)) = (take("sso_account_id"), take("sso_role_name"))
        {
            let session = take("sso_session");
            let mut session_settings = session
                .as_deref()
                .and_then(|name| crate::aws_profile::sso_session(profile, name))
                .unwrap_or_default();
            let mut either = |key: &str| session_settings.remove(key).or_else(|| take(key));
            let start_url = either("sso_start_url")?;
            let sso_region = either("sso_region").unwrap_or_else(|| "us-east-1".to_owned());
            let home = var("HOME").map(PathBuf::from).unwrap_or_default();
            return Some(Self::Sso(AwsSso {
                profile: profile.name.clone(),
                start_url,
                session,
                account_id,
                role_name,
                cache_dir: home.join(".aws").join("sso").join("cache"),
                portal_url: var("AWS_ENDPOINT_URL_SSO")
                    .unwrap_or_else(|| format!("https://portal.sso.{sso_region}.amazonaws.com")),
            }));
        }
        if let (Some(token_file), Some(role_arn)) =
            (take("web_identity_token_file"), take("role_arn"))
        {
            return Some(Self::WebIdentity(AwsWebIdentity {
                token_file: PathBuf::from(token_file),
                role_arn,
                session_name: take("role_session_name").unwrap_or_else(|| "gyre".to_owned()),
                sts_url: sts_url.to_owned(),
                origin: format!("AWS profile {}", profile.name),
            }));
        }
        None
    }

    /// Where the credentials come from, for `--verbose` and `/status`: never a secret,
    /// nor a `credential_process` command.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Skip => "none (CLAUDE_CODE_SKIP_BEDROCK_AUTH)".to_owned(),
            Self::Environment(c) => format!("AWS_ACCESS_KEY_ID {}", c.access_key_id),
            Self::Profile(p) => format!(
                "AWS profile {} ({}, {})",
                p.name,
                p.credentials_file.display(),
                p.config_file.display()
            ),
            Self::Process { profile, .. } => format!(
                "AWS profile {} credential_process ({})",
                profile.name,
                profile.config_file.display()
            ),
            Self::Sso(sso) => format!(
                "AWS profile {} SSO (account {}, role {})",
                sso.profile, sso.account_id, sso.role_name
            ),
            Self::WebIdentity(w) => format!(
                "web identity {} for role {} via STS {}",
                w.origin, w.role_arn, w.sts_url
            ),
            Self::Container(c) => format!("container credentials {}={}", c.url_var, c.url),
            Self::InstanceMetadata { endpoint } => {
                format!("EC2 instance metadata (IMDSv2) at {endpoint}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn source(dir: &std::path::Path, vars: &[(&str, &str)]) -> AwsCredentialSource {
        let mut env: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.insert("HOME".to_owned(), dir.display().to_string());
        let var = |k: &str| env.get(k).cloned();
        let profile = AwsProfile::from_lookup(var);
        AwsCredentialSource::from_lookup(var, profile, "eu-west-1")
    }

    #[test]
    fn the_chain_takes_the_first_configured_source() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        std::fs::create_dir_all(&aws).unwrap();
        std::fs::write(
            aws.join("config"),
            "[profile proc]\ncredential_process = vault aws --json\n\
             [profile sso]\nsso_session = corp\nsso_account_id = 111122223333\n\
             sso_role_name = Dev\n[sso-session corp]\nsso_start_url = https://corp.awsapps.com/start\n\
             sso_region = eu-central-1\n\
             [profile ci]\nrole_arn = arn:aws:iam::1:role/ci\nweb_identity_token_file = /t\n",
        )
        .unwrap();
        assert!(matches!(
            source(
                dir.path(),
                &[
                    ("AWS_ACCESS_KEY_ID", "A"),
                    ("AWS_SECRET_ACCESS_KEY", "s"),
                    ("AWS_PROFILE", "proc")
                ]
            ),
            AwsCredentialSource::Environment(_)
        ));
        assert!(matches!(
            source(dir.path(), &[("AWS_PROFILE", "proc")]),
            AwsCredentialSource::Process { command, .. } if command == "vault aws --json"
        ));
        let AwsCredentialSource::Sso(sso) = source(dir.path(), &[("AWS_PROFILE", "sso")]) else {
            panic!("not SSO");
        };
        assert_eq!(sso.start_url, "https://corp.awsapps.com/start");
        assert_eq!(
            sso.portal_url,
            "https://portal.sso.eu-central-1.amazonaws.com"
        );
        assert_eq!(sso.session.as_deref(), Some("corp"));
        let AwsCredentialSource::WebIdentity(ci) = source(dir.path(), &[("AWS_PROFILE", "ci")])
        else {
            panic!("not web identity");
        };
        assert_eq!(ci.sts_url, "https://sts.eu-west-1.amazonaws.com");
        // A named profile that is nowhere stops the chain.
        assert!(matches!(
            source(dir.path(), &[("AWS_PROFILE", "nope"), ("AWS_ROLE_ARN", "r"), ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t")]),
            AwsCredentialSource::Profile(p) if p.name == "nope"
        ));
        let AwsCredentialSource::WebIdentity(env) = source(
            dir.path(),
            &[
                ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
                ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
                ("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:9"),
            ],
        ) else {
            panic!("not web identity");
        };
        assert_eq!(env.sts_url, "http://127.0.0.1:9");
        let AwsCredentialSource::Container(c) = source(
            dir.path(),
            &[
                ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds"),
                ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "tok-secret"),
            ],
        ) else {
            panic!("not container");
        };
        assert_eq!(c.url, "http://169.254.170.2/v2/creds");
        assert!(!format!("{c:?}").contains("tok-secret"));
        assert_eq!(
            source(
                dir.path(),
                &[("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:7/")]
            ),
            AwsCredentialSource::InstanceMetadata {
                endpoint: "http://127.0.0.1:7".to_owned()
            }
        );
        assert!(matches!(
            source(dir.path(), &[("AWS_EC2_METADATA_DISABLED", "true")]),
            AwsCredentialSource::Profile(p) if p.name == "default"
        ));
    }

    #[test]
    fn the_description_names_the_source_but_no_secret_or_command() {
        let dir = tempfile::tempdir().unwrap();
        let aws = dir.path().join(".aws");
        std::fs::create_dir_all(&aws).unwrap();
        std::fs::write(
            aws.join("config"),
            "[default]\ncredential_process = print-keys --password hunter2\n",
        )
        .unwrap();
        let told = source(dir.path(), &[]).describe();
        assert!(
            told.starts_with("AWS profile default credential_process"),
            "{told}"
        );
        assert!(!told.contains("hunter2"), "{told}");
    }
}
