//! No import circles between the modules of a crate. A module is a top-level file or
//! folder under `src/` (`src/query/stream.rs` is part of `query`); a module that names
//! another through `crate::…` must not be named back by it, directly or around a longer
//! circle. A name the crate root re-exports (`crate::AgentCatalog`) counts for the module
//! it comes from. The scan reads tokens, not Rust: comments and literals are skipped,
//! `use crate::{a::B, c}` counts `a` and `c`; `super::` paths and macros are not followed.
//! Items under `#[cfg(test)]` are left out: a test module is a leaf nothing imports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

/// One source file: its path under `src/` (`query/stream.rs`) and its text.
type File = (String, String);

/// Where `chars[i..]` ends if it starts a comment or a string or char literal.
fn literal_end(chars: &[char], i: usize) -> Option<usize> {
    let at = |k: usize| chars.get(k).copied();
    let ident_before = |k: usize| k > 0 && at(k - 1).is_some_and(is_ident);
    let find = |from: usize, what: char| {
        (from..chars.len())
            .find(|&k| chars[k] == what)
            .unwrap_or(chars.len())
    };
    match (chars[i], at(i + 1), at(i + 2)) {
        ('/', Some('/'), _) => Some(find(i, '\n')),
        ('/', Some('*'), _) => {
            let (mut depth, mut k) = (0, i);
            while k < chars.len() {
                match (chars[k], at(k + 1)) {
                    ('/', Some('*')) => (depth, k) = (depth + 1, k + 2),
                    ('*', Some('/')) if depth == 1 => return Some(k + 2),
                    ('*', Some('/')) => (depth, k) = (depth - 1, k + 2),
                    _ => k += 1,
                }
            }
            Some(k)
        }
        // r"…", r#"…"#, br"…"
        ('r', Some('"' | '#'), _)
            if !ident_before(i) || (at(i - 1) == Some('b') && !ident_before(i - 1)) =>
        {
            let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
            if at(i + 1 + hashes) != Some('"') {
                return None;
            }
            let closes = |k: usize| chars[k] == '"' && (1..=hashes).all(|h| at(k + h) == Some('#'));
            let close = (i + 2 + hashes..chars.len()).find(|&k| closes(k));
            Some(close.map_or(chars.len(), |k| k + 1 + hashes))
        }
        ('"', _, _) => {
            let mut k = i + 1;
            while k < chars.len() && chars[k] != '"' {
                k += if chars[k] == '\\' { 2 } else { 1 };
            }
            Some(k + 1)
        }
        // '"', '\'', '\u{0}'; not a lifetime ('a).
        ('\'', Some('\\'), _) => Some(find(i + 3, '\'') + 1),
        ('\'', Some(_), Some('\'')) => Some(i + 3),
        _ => None,
    }
}

/// `text` without comments and literals, its line breaks kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        match literal_end(&chars, i) {
            Some(end) => {
                let end = end.min(chars.len());
                out.extend(chars[i..end].iter().filter(|&&c| c == '\n'));
                out.push(' ');
                i = end;
            }
            None => {
                out.push(chars[i]);
                i += 1;
            }
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The words and punctuation of `code`, each with its line number.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let mut word = String::new();
        for c in line.chars().chain([' ']) {
            if is_ident(c) {
                word.push(c);
                continue;
            }
            if !word.is_empty() {
                out.push((std::mem::take(&mut word), n + 1));
            }
            if !c.is_whitespace() {
                out.push((c.to_string(), n + 1));
            }
        }
    }
    out
}

/// `tokens` without the items under `#[cfg(test)]`: a test module is a leaf nothing
/// imports, so what it imports makes no circle.
fn without_tests(tokens: &[(String, usize)]) -> Vec<(String, usize)> {
    const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let is_cfg_test = tokens.len() - i >= CFG_TEST.len()
            && CFG_TEST.iter().zip(&tokens[i..]).all(|(c, (t, _))| c == t);
        if !is_cfg_test {
            out.push(tokens[i].clone());
            i += 1;
            continue;
        }
        // The item ends at its `;` or its closing brace.
        let mut depth = 0;
        i += CFG_TEST.len();
        while i < tokens.len() {
            let t = tokens[i].0.as_str();
            i += 1;
            match t {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" => depth -= 1,
                "}" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ";" if depth == 0 => break,
                _ => {}
            }
        }
    }
    out
}

/// The first segment of each path after `crate::`, with its line: `crate::a::B` gives
/// `a`; `crate::{a::B, C}` gives `a` and `C`.
fn crate_heads(tokens: &[(String, usize)]) -> Vec<(&str, usize)> {
    let tok = |k: usize| tokens.get(k).map_or("", |(t, _)| t.as_str());
    let mut heads = Vec::new();
    for i in 0..tokens.len() {
        if tok(i) != "crate" || tok(i + 1) != ":" || tok(i + 2) != ":" {
            continue;
        }
        if tok(i + 3) != "{" {
            heads.push((tok(i + 3), tokens.get(i + 3).map_or(0, |t| t.1)));
            continue;
        }
        let group = &tokens[i + 3..];
        let mut depth = 0;
        for (k, (word, line)) in group.iter().enumerate() {
            match word.as_str() {
                "{" => depth += 1,
                "}" if depth == 1 => break,
                "}" => depth -= 1,
                // The first word of each path in the group; `{` came first, so k > 0.
                word if depth == 1 && matches!(group[k - 1].0.as_str(), "{" | ",") => {
                    heads.push((word, *line));
                }
                _ => {}
            }
        }
    }
    heads.retain(|(h, _)| h.chars().all(is_ident) && !h.is_empty());
    heads
}

/// The crate root's `use` items: each name it brings in → the module it comes from
/// (`pub use agents::{AgentCatalog, merge}` gives `AgentCatalog` → `agents`).
fn reexports(root: &str, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    let tokens = tokens(&code_only(root));
    let words: Vec<&str> = tokens.iter().map(|(t, _)| t.as_str()).collect();
    let mut names = BTreeMap::new();
    for (i, _) in words.iter().enumerate().filter(|(_, w)| **w == "use") {
        // Up to and with the `;`.
        let end = words[i..]
            .iter()
            .position(|w| *w == ";")
            .map_or(words.len(), |e| i + e + 1);
        let mut item = &words[i + 1..end];
        while let [first, ":", ":", rest @ ..] = item
            && matches!(*first, "crate" | "self")
        {
            item = rest;
        }
        let Some(module) = item.first().filter(|m| modules.contains(**m)) else {
            continue;
        };
        for pair in item.windows(2).skip(1) {
            if matches!(pair[1], "," | "}" | ";") && pair[0].chars().all(is_ident) {
                names.insert(pair[0].to_owned(), (*module).to_owned());
            }
        }
    }
    names.remove("self");
    names
}

/// The module of a file under `src/`: `query/stream.rs` → `query`, `agents.rs` →
/// `agents`; `None` for the crate roots (`lib.rs`, `main.rs`) and `bin/`.
fn module_of(path: &str) -> Option<&str> {
    match path.split_once('/') {
        Some(("bin", _)) => None,
        Some((dir, _)) => Some(dir),
        None if matches!(path, "lib.rs" | "main.rs") => None,
        None => path.strip_suffix(".rs"),
    }
}

/// Which module imports which, each import with the first place it is made.
fn imports(files: &[File]) -> BTreeMap<String, BTreeMap<String, String>> {
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|(path, _)| module_of(path))
        .map(str::to_owned)
        .collect();
    let root = files
        .iter()
        .find(|(p, _)| p == "lib.rs")
        .or_else(|| files.iter().find(|(p, _)| p == "main.rs"));
    let reexported = root.map_or_else(BTreeMap::new, |(_, text)| reexports(text, &modules));
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (path, text) in files {
        let Some(from) = module_of(path) else {
            continue;
        };
        let tokens = without_tests(&tokens(&code_only(text)));
        for (head, line) in crate_heads(&tokens) {
            let to = if modules.contains(head) {
                Some(head)
            } else {
                reexported.get(head).map(String::as_str)
            };
            if let Some(to) = to.filter(|to| *to != from) {
                graph
                    .entry(from.to_owned())
                    .or_default()
                    .entry(to.to_owned())
                    .or_insert_with(|| format!("{path}:{line} ({head})"));
            }
        }
    }
    graph
}

/// Every circle in `graph`, as `a → b → a` followed by where each import is made; one
/// per import that is part of a circle (its shortest), without repeats.
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut found = BTreeSet::new();
    for (a, targets) in graph {
        for b in targets.keys() {
            // The shortest way back from b to a.
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = VecDeque::from([b.as_str()]);
            while let Some(m) = queue.pop_front() {
                if m == a {
                    break;
                }
                for next in graph.get(m).into_iter().flat_map(BTreeMap::keys) {
                    if next != b && !came_from.contains_key(next.as_str()) {
                        came_from.insert(next, m);
                        queue.push_back(next);
                    }
                }
            }
            if !came_from.contains_key(a.as_str()) {
                continue;
            }
            // a, then the way from b back to a (a not repeated).
            let mut back = Vec::new();
            let mut m = came_from[a.as_str()];
            while m != b {
                back.push(m);
                m = came_from[m];
            }
            let mut path = vec![a.as_str(), b.as_str()];
            path.extend(back.into_iter().rev());
            // The same circle found from another of its imports starts at the same place.
            let least = (0..path.len()).min_by_key(|&k| path[k]).unwrap_or(0);
            path.rotate_left(least);
            found.insert(path.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>());
        }
    }
    found
        .into_iter()
        .map(|path| {
            let steps: Vec<String> = (0..path.len())
                .map(|k| {
                    let (from, to) = (&path[k], &path[(k + 1) % path.len()]);
                    format!("    {from} → {to}: {}", graph[from][to])
                })
                .collect();
            format!("{} → {}\n{}", path.join(" → "), path[0], steps.join("\n"))
        })
        .collect()
}

/// The `.rs` files under `dir`, with their paths relative to it.
fn sources(dir: &Path, prefix: &str, out: &mut Vec<File>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            sources(&path, &format!("{prefix}{name}/"), out);
        } else if name.ends_with(".rs") {
            out.push((
                format!("{prefix}{name}"),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

#[test]
fn no_import_circles_between_the_modules_of_a_crate() {
    let crates = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../crates"));
    let mut dirs: Vec<_> = std::fs::read_dir(crates)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    let mut report = Vec::new();
    let mut scanned = 0;
    for dir in dirs {
        let mut files = Vec::new();
        sources(&dir.join("src"), "", &mut files);
        scanned += files.len();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        for circle in circles(&imports(&files)) {
            report.push(format!("crates/{name}/src: {circle}"));
        }
    }
    assert!(scanned > 100, "only {scanned} files scanned");
    assert!(
        report.is_empty(),
        "modules that import each other (move the shared item to the module it belongs to):\n{}",
        report.join("\n")
    );
}

#[test]
fn the_scan_finds_circles_through_groups_reexports_and_folders() {
    let file = |path: &str, text: &str| (path.to_owned(), text.to_owned());
    let lib = file(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use c::{Gamma, nested::{Delta as D}};\n",
    );
    let a = file(
        "a/mod.rs",
        "// crate::c in a comment\nuse crate::{\n    b::Beta,\n    x,\n};\n",
    );
    let b = file(
        "b.rs",
        "fn f() -> crate::D { let s = \"crate::c\"; todo!() }\n\
         #[cfg(test)]\nmod tests {\n    use crate::a::Alpha;\n}\n",
    );
    let c_back = file(
        "c/nested.rs",
        "use crate::a::Alpha; // '\"'\nconst Q: char = '\"';\n",
    );
    let c_alone = file("c/nested.rs", "const Q: char = '\"'; // crate::a\n");

    let files = [lib.clone(), a.clone(), b.clone(), c_back];
    assert_eq!(
        circles(&imports(&files)),
        [
            "a → b → c → a\n    a → b: a/mod.rs:3 (b)\n    b → c: b.rs:1 (D)\n    c → a: c/nested.rs:1 (a)"
        ]
    );
    // Comments, strings and test modules import nothing: without c's import back there
    // is no circle (b's tests import a).
    let files = [lib, a, b, c_alone];
    let graph = imports(&files);
    assert_eq!(circles(&graph), Vec::<String>::new());
    assert_eq!(graph["a"].keys().collect::<Vec<_>>(), ["b"]);
    assert_eq!(graph["b"].keys().collect::<Vec<_>>(), ["c"]);
    assert!(!graph.contains_key("c"), "{graph:?}");
}
