//! The layering of the crates, read from `cargo metadata`: each gyre crate depends only
//! on the layers below it (the libraries, then gyre-core, then the front-ends, then
//! gyre-cli).

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

/// The libraries anyone may build on: the loop and what it stands on.
const LIBRARIES: [&str; 6] = [
    "gyre-protocol",
    "gyre-api",
    "gyre-compact",
    "gyre-tools",
    "gyre-loop",
    "gyre-mcp",
];

/// The front-ends: each drives a session of gyre-core, none knows another.
const FRONT_ENDS: [&str; 3] = ["gyre-exec", "gyre-tui", "gyre-acp"];

/// Which gyre crates each gyre crate may depend on (normal and build dependencies).
fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let mut with_core: Vec<&str> = LIBRARIES.to_vec();
    with_core.push("gyre-core");
    let mut front_end = with_core.clone();
    front_end.push("gyre-term");
    let mut cli = front_end.clone();
    cli.extend(FRONT_ENDS);
    let rules: [(&str, Vec<&str>); 13] = [
        ("gyre-protocol", vec![]),
        ("gyre-api", vec!["gyre-protocol"]),
        ("gyre-compact", vec!["gyre-protocol"]),
        ("gyre-tools", vec!["gyre-protocol"]),
        // gyre-api for its `text/event-stream` decoder: one SSE parser in gyre.
        ("gyre-mcp", vec!["gyre-protocol", "gyre-api", "gyre-tools"]),
        (
            "gyre-loop",
            vec!["gyre-protocol", "gyre-api", "gyre-compact", "gyre-tools"],
        ),
        ("gyre-core", LIBRARIES.to_vec()),
        ("gyre-term", vec![]),
        ("gyre-exec", front_end.clone()),
        ("gyre-tui", front_end.clone()),
        ("gyre-acp", front_end),
        ("gyre-cli", cli),
        ("gyre-testkit", vec!["gyre-protocol"]),
    ];
    rules
        .into_iter()
        .map(|(k, v)| (k, v.into_iter().collect()))
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
                "{name} must not depend on {dep_name}; allowed: {allowed:?}"
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
    assert!(
        !rules["gyre-api"].contains("gyre-mcp"),
        "no cycle with gyre-mcp"
    );
    assert!(rules["gyre-protocol"].is_empty());
    // Libraries never on core, core never on a front-end, front-ends never on each other.
    for library in LIBRARIES {
        assert!(!rules[library].contains("gyre-core"), "{library}");
    }
    for front_end in FRONT_ENDS {
        assert!(!rules["gyre-core"].contains(front_end));
        for other in FRONT_ENDS {
            assert!(!rules[front_end].contains(other), "{front_end} on {other}");
        }
    }
    assert!(
        !rules["gyre-core"].contains("gyre-term"),
        "core knows no terminal"
    );
}

/// Settings' `env` reaches the libraries through gyre-core's `Environment` and the
/// programs gyre starts through their own environment, never through `set_var` (which
/// races every thread and changes the process behind the libraries' backs). The one
/// `set_var` left moves gyre's own secrets out of `/proc/<pid>/environ` at start.
#[test]
fn only_the_secret_scrubbing_sets_process_variables() {
    fn visit(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.contains("env::set_var(") || text.contains("env::remove_var(") {
                    found.push(path.display().to_string());
                }
            }
        }
    }
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates");
    let mut found = Vec::new();
    visit(std::path::Path::new(crates), &mut found);
    let found: Vec<&str> = found
        .iter()
        .map(|p| p.split("/crates/").nth(1).unwrap_or(p))
        .collect();
    assert_eq!(found, ["tools/src/sandbox.rs"]);
}
