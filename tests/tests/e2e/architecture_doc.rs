//! docs/ARCHITECTURE.md stays true: every path it names exists, and every item of its
//! "Where things live" table is defined in the file the table gives.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap_or_default()
}

/// The text between backticks, in order.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_path_the_architecture_doc_names_exists() {
    let doc = doc();
    assert!(!doc.is_empty(), "docs/ARCHITECTURE.md is missing");
    let prefixes = [
        "crates/", "docs/", "tests/", "xtask/", "fuzz/", ".ci/", ".cargo/",
    ];
    let mut checked = 0;
    let mut missing = Vec::new();
    for span in code_spans(&doc) {
        // Placeholders (`<session dir>/…`) and commands are not paths.
        if span.contains(['<', ' ', '*']) || !prefixes.iter().any(|p| span.starts_with(p)) {
            continue;
        }
        checked += 1;
        if !root().join(span.trim_end_matches('/')).exists() {
            missing.push(span.to_owned());
        }
    }
    assert!(
        checked >= 10,
        "only {checked} paths found: did the doc's format change?"
    );
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

/// Whether `source` defines `item` (a type, trait, function, constant or module).
fn defines(source: &str, item: &str) -> bool {
    let name = item.trim_end_matches("()");
    [
        "struct",
        "enum",
        "trait",
        "fn",
        "type",
        "const",
        "static",
        "mod",
        "macro_rules!",
    ]
    .iter()
    .any(|kind| {
        source
            .match_indices(&format!("{kind} {name}"))
            .any(|(i, m)| {
                let after = source[i + m.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    })
}

#[test]
fn every_item_in_the_where_things_live_table_is_defined_where_it_says() {
    let doc = doc();
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Where things live"))
        .expect("docs/ARCHITECTURE.md has a '## Where things live' table");
    let mut rows = 0;
    let mut wrong = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells = code_spans(line);
        let [item, file, ..] = cells.as_slice() else {
            continue; // the header and the separator row
        };
        rows += 1;
        let source = std::fs::read_to_string(root().join(file)).unwrap_or_default();
        if !defines(&source, item) {
            wrong.push(format!("{item} is not defined in {file}"));
        }
    }
    assert!(rows >= 20, "the table has only {rows} rows");
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md is out of date: {wrong:#?}"
    );
}
