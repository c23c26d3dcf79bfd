//! [`Environment`]: the variables a session sees, read once at start.
//!
//! The process's own variables win; a settings file's `env` fills in the ones the process
//! does not set. gyre never writes them into its own process (`set_var` would race the
//! threads and reach every library behind the session's back): the libraries get their
//! configuration from [`Environment::var`] through their `from_lookup` constructors, and
//! the programs gyre starts (Bash, hooks, MCP servers) get [`Environment::child_vars`] on
//! top of the environment they inherit.

use std::collections::BTreeMap;

/// See the module docs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    process: BTreeMap<String, String>,
    settings: BTreeMap<String, String>,
}

impl Environment {
    /// The process's variables now (those that are valid UTF-8).
    #[must_use]
    pub fn capture() -> Self {
        Self::from_vars(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// An environment of exactly these process variables (tests, embedders).
    #[must_use]
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            process: vars.into_iter().collect(),
            settings: BTreeMap::new(),
        }
    }

    /// This environment with a settings file's `env` under the process's variables.
    #[must_use]
    pub fn with_settings(mut self, env: &BTreeMap<String, String>) -> Self {
        self.settings = env
            .iter()
            .filter(|(key, _)| !self.process.contains_key(*key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self
    }

    /// `$GYRE_HOME`, default `~/.gyre`: where the user's settings, trust, history and
    /// transcripts live. From the process's variables only: a settings file cannot move
    /// the folder its own trust is recorded in.
    #[must_use]
    pub fn gyre_home(&self) -> std::path::PathBuf {
        use std::path::PathBuf;
        self.process
            .get("GYRE_HOME")
            .map(PathBuf::from)
            .or_else(|| self.home().map(|h| h.join(".gyre")))
            .unwrap_or_else(|| PathBuf::from(".gyre"))
    }

    /// The user's home directory (`$HOME`, from the process's variables).
    #[must_use]
    pub fn home(&self) -> Option<std::path::PathBuf> {
        self.process.get("HOME").map(std::path::PathBuf::from)
    }

    /// The value of `name`: the process's, else the settings'.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<String> {
        self.process
            .get(name)
            .or_else(|| self.settings.get(name))
            .cloned()
    }

    /// What a program gyre starts gets on top of gyre's own environment: the settings'
    /// variables the process does not set.
    #[must_use]
    pub fn child_vars(&self) -> Vec<(String, String)> {
        self.settings
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_wins_and_settings_fill_in_for_children_too() {
        let settings: BTreeMap<String, String> = [
            ("GYRE_MAX_OUTPUT_TOKENS".to_owned(), "999".to_owned()),
            ("FROM_SETTINGS".to_owned(), "yes".to_owned()),
        ]
        .into();
        let env = Environment::from_vars([("GYRE_MAX_OUTPUT_TOKENS".to_owned(), "5".to_owned())])
            .with_settings(&settings);
        assert_eq!(env.var("GYRE_MAX_OUTPUT_TOKENS").as_deref(), Some("5"));
        assert_eq!(env.var("FROM_SETTINGS").as_deref(), Some("yes"));
        assert_eq!(env.var("UNSET"), None);
        assert_eq!(
            env.child_vars(),
            [("FROM_SETTINGS".to_owned(), "yes".to_owned())]
        );
    }
}
