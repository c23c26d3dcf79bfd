//! The AWS shared `credentials` and `config` files: a profile's region and keys.
//!
//! The INI dialect the AWS CLI writes: `[name]` sections in `credentials`, `[profile
//! name]` (or `[default]`) in `config`, `key = value` lines, `#` and `;` comments.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// An AWS access key. `Debug` shows the key id only.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AKIA…` / `ASIA…`.
    pub access_key_id: String,
    /// The secret key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// A named profile of the AWS shared files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsProfile {
    /// `AWS_PROFILE`, else `default`.
    pub name: String,
    /// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`.
    pub credentials_file: PathBuf,
    /// `AWS_CONFIG_FILE`, else `~/.aws/config`.
    pub config_file: PathBuf,
}

impl AwsProfile {
    /// `AWS_PROFILE` (else `default`), `AWS_SHARED_CREDENTIALS_FILE` and
    /// `AWS_CONFIG_FILE` (else under `$HOME/.aws`), through `var`.
    #[must_use]
    pub fn from_lookup(var: impl Fn(&str) -> Option<String>) -> Self {
        let home = var("HOME").map(PathBuf::from).unwrap_or_default();
        Self {
            name: var("AWS_PROFILE").unwrap_or_else(|| "default".to_owned()),
            credentials_file: var("AWS_SHARED_CREDENTIALS_FILE")
                .map_or_else(|| home.join(".aws").join("credentials"), PathBuf::from),
            config_file: var("AWS_CONFIG_FILE")
                .map_or_else(|| home.join(".aws").join("config"), PathBuf::from),
        }
    }
}

/// The `key = value` pairs of `section` in the INI file at `path`; `None` when the file
/// cannot be read or has no such section.
fn section(path: &Path, section: &str) -> Option<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut found = None;
    let mut current: Option<BTreeMap<String, String>> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if let Some(done) = current.take() {
                found = Some(done);
                break;
            }
            if name.trim() == section {
                current = Some(BTreeMap::new());
            }
            continue;
        }
        if let (Some(pairs), Some((key, value))) = (current.as_mut(), line.split_once('=')) {
            pairs.insert(key.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    found.or(current)
}

/// The profile's section of the config file: `[default]` or `[profile NAME]`.
fn config_section(profile: &AwsProfile) -> Option<BTreeMap<String, String>> {
    let name = if profile.name == "default" {
        "default".to_owned()
    } else {
        format!("profile {}", profile.name)
    };
    section(&profile.config_file, &name)
}

/// Every `key = value` of the profile: the config file's section, overlaid by the
/// credentials file's (which holds the keys). `None` when neither file has the profile.
#[must_use]
pub(crate) fn settings(profile: &AwsProfile) -> Option<BTreeMap<String, String>> {
    let config = config_section(profile);
    let credentials = section(&profile.credentials_file, &profile.name);
    if config.is_none() && credentials.is_none() {
        return None;
    }
    let mut all = config.unwrap_or_default();
    all.extend(credentials.unwrap_or_default());
    Some(all)
}

/// The `[sso-session NAME]` section of the profile's config file.
#[must_use]
pub(crate) fn sso_session(profile: &AwsProfile, name: &str) -> Option<BTreeMap<String, String>> {
    section(&profile.config_file, &format!("sso-session {name}"))
}

/// The profile's `region` in the config file.
#[must_use]
pub(crate) fn region(profile: &AwsProfile) -> Option<String> {
    config_section(profile)?
        .remove("region")
        .filter(|r| !r.is_empty())
}

#[cfg(feature = "bedrock")]
/// The profile's static keys: the credentials file's section, else the config file's.
///
/// # Errors
/// What to do when neither file has keys for the profile.
pub(crate) fn credentials(profile: &AwsProfile) -> Result<AwsCredentials, String> {
    let keys = |mut pairs: BTreeMap<String, String>| {
        Some(AwsCredentials {
            access_key_id: pairs.remove("aws_access_key_id")?,
            secret_access_key: pairs.remove("aws_secret_access_key")?,
            session_token: pairs.remove("aws_session_token"),
        })
    };
    section(&profile.credentials_file, &profile.name)
        .and_then(keys)
        .or_else(|| config_section(profile).and_then(keys))
        .ok_or_else(|| {
            let assumes_role = settings(profile)
                .is_some_and(|s| s.contains_key("role_arn") && s.contains_key("source_profile"));
            let why = if assumes_role {
                format!(
                    "profile `{}` assumes a role (role_arn with source_profile), which gyre does \
                     not do yet; give it a credential_process (such as `aws configure \
                     export-credentials --profile {} --format process`)",
                    profile.name, profile.name
                )
            } else {
                format!(
                    "no credentials for profile `{}` in {} or {}",
                    profile.name,
                    profile.credentials_file.display(),
                    profile.config_file.display()
                )
            };
            format!(
                "{why}; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE to a \
                 profile with keys, a credential_process or an SSO role (after `aws sso \
                 login`), or AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN"
            )
        })
}

#[cfg(all(test, feature = "bedrock"))]
mod tests {
    use super::*;

    fn profile(name: &str, dir: &Path) -> AwsProfile {
        AwsProfile {
            name: name.to_owned(),
            credentials_file: dir.join("credentials"),
            config_file: dir.join("config"),
        }
    }

    #[test]
    fn keys_come_from_the_credentials_file_and_the_region_from_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("credentials"),
            "[default]\naws_access_key_id = AKIDEFAULT\naws_secret_access_key = s1\n\n\
             # work account\n[work]\naws_access_key_id=AKIWORK\naws_secret_access_key=s2\n\
             aws_session_token = tok\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config"),
            "[default]\nregion = eu-west-1\n[profile work]\nregion = us-west-2\n\
             [profile config-only]\naws_access_key_id = AKICONF\naws_secret_access_key = s3\n",
        )
        .unwrap();
        let work = credentials(&profile("work", dir.path())).unwrap();
        assert_eq!(work.access_key_id, "AKIWORK");
        assert_eq!(work.session_token.as_deref(), Some("tok"));
        assert_eq!(
            region(&profile("work", dir.path())).as_deref(),
            Some("us-west-2")
        );
        assert_eq!(
            region(&profile("default", dir.path())).as_deref(),
            Some("eu-west-1")
        );
        let default = credentials(&profile("default", dir.path())).unwrap();
        assert_eq!(default.access_key_id, "AKIDEFAULT");
        assert_eq!(default.session_token, None);
        let conf = credentials(&profile("config-only", dir.path())).unwrap();
        assert_eq!(conf.access_key_id, "AKICONF");
        let missing = credentials(&profile("nope", dir.path())).unwrap_err();
        assert!(missing.contains("profile `nope`"), "{missing}");
        assert!(missing.contains("AWS_ACCESS_KEY_ID"), "{missing}");
        std::fs::write(
            dir.path().join("config"),
            "[profile admin]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = default\n",
        )
        .unwrap();
        let assume = credentials(&profile("admin", dir.path())).unwrap_err();
        assert!(
            assume.contains("assumes a role") && assume.contains("credential_process"),
            "{assume}"
        );
    }
}
