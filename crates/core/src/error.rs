//! Why a session could not be put together.

use std::path::PathBuf;

use crate::folder_rules::FolderRulesError;
use crate::settings::SettingsError;
use crate::trust::TrustError;

/// A session that cannot start, said so the user knows what to change.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A value the user gave (a flag, an option, a rule, a session id) that cannot be
    /// used: the text names it and says what would work.
    #[error("{0}")]
    Invalid(String),
    /// A file or directory gyre needed could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What gyre was doing (`could not read the transcript`).
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The model client could not be set up (no API key, a bad base URL, a fixture).
    #[error("{0}")]
    Client(String),
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    FolderRules(#[from] FolderRulesError),
    #[error(transparent)]
    Trust(#[from] TrustError),
}

impl CoreError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { what, path, source }
    }
}
