//! SPEC §2: the layering of the crates, read from `cargo metadata`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// Which gyre crates each gyre crate may depend on (normal and build dependencies).
fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let rules: [(&str, &[&str]); 8] = [
        ("gyre-protocol", &[]),
        ("gyre-api", &["gyre-protocol"]),
        ("gyre-compact", &["gyre-protocol"]),
        ("gyre-tools", &["gyre-protocol"]),
        ("gyre-mcp", &["gyre-protocol", "gyre-tools"]),
        (
            "gyre-loop",
            &["gyre-protocol", "gyre-api", "gyre-compact", "gyre-tools"],
        ),
        (
            "gyre-cli",
            &[
                "gyre-protocol",
                "gyre-api",
                "gyre-compact",
                "gyre-tools",
                "gyre-loop",
                "gyre-mcp",
            ],
        ),
        ("gyre-testkit", &["gyre-protocol"]),
    ];
    rules
        .into_iter()
        .map(|(k, v)| (k, v.iter().copied().collect()))
        .collect()
}

#[test]
fn crates_depend_only_on_the_layers_below_them() {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = allowed();
    let mut seen = BTreeSet::new();
    for package in meta["packages"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap();
        let Some(allowed) = rules.get(name) else {
            continue;
        };
        seen.insert(name);
        for dep in package["dependencies"].as_array().unwrap() {
            let dep_name = dep["name"].as_str().unwrap();
            let is_dev = dep["kind"].as_str() == Some("dev");
            if !dep_name.starts_with("gyre-") || is_dev {
                continue;
            }
            assert!(
                allowed.contains(dep_name),
                "{name} must not depend on {dep_name} (SPEC §2); allowed: {allowed:?}"
            );
        }
    }
    assert_eq!(
        seen.len(),
        rules.len(),
        "every gyre crate was checked: {seen:?}"
    );
}

#[test]
fn the_rules_themselves_forbid_upward_dependencies() {
    let rules = allowed();
    assert!(!rules["gyre-api"].contains("gyre-compact"));
    assert!(!rules["gyre-compact"].contains("gyre-api"));
    assert!(!rules["gyre-tools"].contains("gyre-loop"));
    assert!(!rules["gyre-mcp"].contains("gyre-loop"));
    assert!(rules["gyre-protocol"].is_empty());
}
