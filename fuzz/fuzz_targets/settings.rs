//! Settings files (`~/.gyre/settings.json`, `.gyre/settings*.json`): `Settings::parse`
//! never panics, every error names the file with a line and column, and merging works on
//! whatever parsed.
//!
//! The parser lives in the `gyre` binary crate, which has no library target, so the
//! module is compiled here from its own source file (the same code, not a copy).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/cli/src/settings.rs"]
mod settings;

use settings::{Settings, SettingsError};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/project/.gyre/settings.json");
    match Settings::parse(path, text) {
        Ok(parsed) => {
            let mut merged = Settings::default();
            merged.merge(parsed.clone());
            merged.merge(parsed);
        }
        Err(e @ SettingsError::Invalid { .. }) => {
            let message = e.to_string();
            assert!(
                message.starts_with("/project/.gyre/settings.json:"),
                "{message}"
            );
        }
        Err(e @ SettingsError::Read { .. }) => panic!("parse cannot fail to read: {e}"),
    }
});
