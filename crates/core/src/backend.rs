//! Which service the session's model client talks to, built from the environment
//! snapshot and the settings' `apiKeyHelper`, and what `--verbose` and `/status` say
//! about it ([`BackendFacts`]: never a secret).

use std::fmt;
use std::path::Path;

use gyre_api::{ApiError, ClientConfig, KeyHelper, NetworkOptions};

use crate::env::Environment;

/// The proxies and extra CAs of every HTTP client of the session (API, WebFetch, MCP).
#[must_use]
pub fn network(env: &Environment) -> NetworkOptions {
    NetworkOptions::from_lookup(|name| env.var(name))
}

/// The model client's configuration: the backend and its credentials, base URL,
/// proxies and CAs. `api_key_helper` is the merged settings' `apiKeyHelper` (the
/// settings keep it only from the user's own file or a trusted project's); it runs in
/// `cwd`.
///
/// # Errors
/// [`ApiError::MissingApiKey`] when no credential is configured.
pub fn client_config(
    env: &Environment,
    api_key_helper: Option<&str>,
    cwd: &Path,
) -> Result<ClientConfig, ApiError> {
    let lookup = |name: &str| env.var(name);
    let helper = api_key_helper
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|command| KeyHelper::new(command, cwd, lookup));
    ClientConfig::from_lookup_with_helper(lookup, helper)
}

/// What the session says about its backend: which service, where, through which proxy,
/// with credentials from where. No secret is ever part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendFacts {
    /// `Anthropic API`, …
    pub backend: String,
    /// Where requests go.
    pub base_url: String,
    /// The proxy requests go through (password hidden), if any.
    pub proxy: Option<String>,
    /// Where the credentials come from (`ANTHROPIC_API_KEY`, `apiKeyHelper …`).
    pub credentials: String,
    /// The extra CA bundles trusted on top of the system's roots.
    pub extra_cas: Vec<String>,
}

impl BackendFacts {
    /// The facts of `config`.
    #[must_use]
    pub fn of(config: &ClientConfig) -> Self {
        Self {
            backend: config.backend.name().to_owned(),
            base_url: config.base_url.clone(),
            proxy: config.network.proxy_for(&config.base_url),
            credentials: config.backend.credential_source(),
            extra_cas: config
                .network
                .extra_cas
                .iter()
                .map(|b| format!("{}={}", b.var, b.path.display()))
                .collect(),
        }
    }

    /// The facts of a session whose answers come from a recorded fixture.
    #[must_use]
    pub fn fixture(path: &str) -> Self {
        Self {
            backend: "recorded fixture".to_owned(),
            base_url: path.to_owned(),
            proxy: None,
            credentials: "none".to_owned(),
            extra_cas: Vec::new(),
        }
    }
}

impl fmt::Display for BackendFacts {
    /// `backend: Anthropic API at https://…, proxy: none, credentials: ANTHROPIC_API_KEY`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "backend: {} at {}, proxy: {}, credentials: {}",
            self.backend,
            self.base_url,
            self.proxy.as_deref().unwrap_or("none"),
            self.credentials
        )?;
        if !self.extra_cas.is_empty() {
            write!(f, ", extra CAs: {}", self.extra_cas.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Environment {
        Environment::from_vars(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
    }

    #[test]
    fn the_facts_name_the_proxy_and_credential_source_but_no_secret() {
        let env = env(&[
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("HTTPS_PROXY", "http://me:pw-secret@proxy.corp:3128"),
            ("NODE_EXTRA_CA_CERTS", "/etc/corp-ca.pem"),
        ]);
        let config = client_config(&env, None, Path::new("/")).unwrap();
        let line = BackendFacts::of(&config).to_string();
        assert_eq!(
            line,
            "backend: Anthropic API at https://api.anthropic.com, proxy: \
             http://me:***@proxy.corp:3128, credentials: ANTHROPIC_API_KEY, extra CAs: \
             NODE_EXTRA_CA_CERTS=/etc/corp-ca.pem"
        );
        assert!(!line.contains("secret"));
    }

    #[test]
    fn a_key_helper_from_settings_is_the_credential_unless_a_bearer_token_is_set() {
        let config = client_config(
            &env(&[("ANTHROPIC_API_KEY", "sk")]),
            Some("print-key"),
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            BackendFacts::of(&config).credentials,
            "apiKeyHelper (settings)"
        );
        let config = client_config(
            &env(&[("ANTHROPIC_AUTH_TOKEN", "t")]),
            Some("print-key"),
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            BackendFacts::of(&config).credentials,
            "ANTHROPIC_AUTH_TOKEN (bearer)"
        );
    }
}
