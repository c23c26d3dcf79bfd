//! Settings files (`~/.gyre/settings.json`, `.gyre/settings*.json`): `Settings::parse`
//! never panics, every error names the file with a line and column, and merging works on
//! whatever parsed.
#![no_main]

use std::path::Path;

use gyre_core::settings::{Settings, SettingsError};
use libfuzzer_sys::fuzz_target;

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
        Err(e) => panic!("parse can only fail on the text: {e}"),
    }
});
