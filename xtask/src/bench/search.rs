//! Grep and Glob against `rg` on a real tree, both timed the same way: a process started,
//! its stdout read to the end, the wall time from spawn to exit. gyre's side is one call
//! of the tool through the public gyre-tools API (`xtask-bench-probe tool`), so process
//! start, runtime start, the walk, the search and the formatting of the result all
//! count, as they do for `rg`. The runs alternate (gyre, rg, rg, gyre, …) so that load
//! from elsewhere falls on both. Before a time is reported the answers are compared.
//!
//! Semantics made equal on purpose: `rg --hidden --no-require-git` (gyre searches
//! hidden files and honours `.gitignore` outside git repositories), `head_limit: 0`
//! (gyre's default 250 would print less than `rg`). Differences kept on purpose and
//! left out of the comparison: files_with_matches and Glob list newest first (one
//! `stat` per hit), content lines are cut at 500 characters, Glob returns at most 100
//! paths (its whole set is compared through `glob::find`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::{Plan, Row, STABLE_SPREAD, Spawner, median, ms, rg_version, spread};

/// The pattern files_with_matches and count look for, and content prints.
const FILES_PATTERN: &str = "unsafe impl";
const CONTENT_PATTERN: &str = "TODO|FIXME";
const GLOB_PATTERN: &str = "**/*.rs";

/// `$CARGO_HOME/registry/src`: every crate gyre builds with, unpacked (about 200 MB in
/// 13k files after a build). Real code, not generated; the same for everyone on one
/// `Cargo.lock`.
pub(super) fn registry_tree() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    src.is_dir().then_some(src)
}

/// Files and bytes under `dir` that `rg --files` lists.
fn tree_size(dir: &Path) -> Result<(usize, u64)> {
    let out = Command::new("rg")
        .args(["--files", "--hidden", "--no-require-git"])
        .current_dir(dir)
        .output()?;
    let list = String::from_utf8_lossy(&out.stdout);
    let mut bytes = 0;
    let mut files = 0;
    for line in list.lines() {
        files += 1;
        bytes += std::fs::metadata(dir.join(line)).map_or(0, |m| m.len());
    }
    Ok((files, bytes))
}

/// One case: the tool and its input, `rg`'s arguments, and how answers are compared.
struct Case {
    id: &'static str,
    label: &'static str,
    tool: &'static str,
    input: serde_json::Value,
    rg: Vec<&'static str>,
    rg_label: &'static str,
    answer: fn(&str, &Path) -> BTreeSet<String>,
}

/// Runs `command` to its end (through the spawner, as every measured process); wall
/// and CPU time in ms, and stdout.
fn run_timed(spawner: &Spawner, command: &Command) -> Result<(f64, f64, String)> {
    let (m, out) = spawner.output(command)?;
    // rg exits 1 when nothing matched.
    if !(0..=1).contains(&m.code) {
        bail!("{command:?} failed with {}", m.code);
    }
    Ok((ms(m.wall), ms(m.cpu), out))
}

fn relative(path: &str, tree: &Path) -> String {
    Path::new(path)
        .strip_prefix(tree)
        .map_or_else(|_| path.to_owned(), |p| p.display().to_string())
}

/// Paths, one per line; gyre's "Found N files" header dropped.
fn path_set(out: &str, tree: &Path) -> BTreeSet<String> {
    out.lines()
        .filter(|l| !l.is_empty() && !l.starts_with("Found ") && !l.starts_with('('))
        .map(|l| relative(l, tree))
        .collect()
}

/// `path:line` of each `path:line:text` line.
fn line_set(out: &str, tree: &Path) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (path, line) = (parts.next()?, parts.next()?);
            line.parse::<u64>().ok()?;
            Some(format!("{}:{line}", relative(path, tree)))
        })
        .collect()
}

/// `path:count` lines; gyre's summary and pagination notes dropped.
fn count_set(out: &str, tree: &Path) -> BTreeSet<String> {
    out.lines()
        .filter_map(|l| {
            let (path, n) = l.rsplit_once(':')?;
            n.parse::<u64>().ok()?;
            Some(format!("{}:{n}", relative(path, tree)))
        })
        .collect()
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            id: "grep_files",
            label: "Grep files_with_matches",
            tool: "Grep",
            input: json!({"pattern": FILES_PATTERN, "head_limit": 0}),
            rg: vec!["-l", FILES_PATTERN],
            rg_label: "rg -l",
            answer: path_set,
        },
        Case {
            id: "grep_content",
            label: "Grep content",
            tool: "Grep",
            input: json!({"pattern": CONTENT_PATTERN, "output_mode": "content", "head_limit": 0}),
            rg: vec!["-n", CONTENT_PATTERN],
            rg_label: "rg -n",
            answer: line_set,
        },
        Case {
            id: "grep_count",
            label: "Grep count",
            tool: "Grep",
            input: json!({"pattern": CONTENT_PATTERN, "output_mode": "count", "head_limit": 0}),
            rg: vec!["-c", CONTENT_PATTERN],
            rg_label: "rg -c",
            answer: count_set,
        },
        Case {
            id: "glob",
            label: "Glob **/*.rs",
            tool: "Glob",
            input: json!({"pattern": GLOB_PATTERN}),
            rg: vec!["--files", "-g", "*.rs"],
            rg_label: "rg --files",
            answer: path_set,
        },
    ]
}

/// What differs between two answers, in a few words (empty when they agree).
fn difference(gyre: &BTreeSet<String>, rg: &BTreeSet<String>) -> String {
    if gyre == rg {
        return String::new();
    }
    let only_gyre: Vec<_> = gyre.difference(rg).take(3).collect();
    let only_rg: Vec<_> = rg.difference(gyre).take(3).collect();
    format!(
        "ANSWERS DIFFER: {} only in gyre (e.g. {only_gyre:?}), {} only in rg (e.g. {only_rg:?})",
        gyre.difference(rg).count(),
        rg.difference(gyre).count()
    )
}

pub(super) fn rows(spawner: &Spawner, probe: &Path, plan: &Plan) -> Result<Vec<Row>> {
    let cases = cases();
    let Some(tree) = registry_tree() else {
        return Ok(cases
            .iter()
            .map(|c| {
                Row::missing(
                    c.id,
                    c.label,
                    "ms",
                    "no ~/.cargo/registry/src: build the workspace once",
                )
            })
            .collect());
    };
    if rg_version().is_none() {
        return Ok(cases
            .iter()
            .map(|c| {
                Row::missing(
                    c.id,
                    c.label,
                    "ms",
                    "rg not installed: apt-get install ripgrep (or cargo install ripgrep)",
                )
            })
            .collect());
    }
    let (files, bytes) = tree_size(&tree)?;
    let tree_note = format!(
        "~/.cargo/registry/src, {files} files, {:.0} MB",
        bytes as f64 / 1e6
    );
    let mut rows = Vec::new();
    for case in cases {
        let gyre_cmd = || {
            let mut c = Command::new(probe);
            c.arg("tool")
                .arg(case.tool)
                .arg(&tree)
                .arg(case.input.to_string())
                .current_dir(&tree);
            c
        };
        let rg_cmd = || {
            let mut c = Command::new("rg");
            c.args(["--hidden", "--no-require-git"])
                .args(&case.rg)
                .current_dir(&tree);
            c
        };
        let mut gyre_ms = Vec::new();
        let mut rg_ms = Vec::new();
        let mut gyre_cpu = Vec::new();
        let mut rg_cpu = Vec::new();
        let mut answers = (String::new(), String::new());
        // Run 0 warms the page cache for both and is not counted.
        for i in 0..=plan.search_runs {
            let (g, r) = if i % 2 == 0 {
                let g = run_timed(spawner, &gyre_cmd())?;
                (g, run_timed(spawner, &rg_cmd())?)
            } else {
                let r = run_timed(spawner, &rg_cmd())?;
                (run_timed(spawner, &gyre_cmd())?, r)
            };
            if i > 0 {
                gyre_ms.push(g.0);
                rg_ms.push(r.0);
                gyre_cpu.push(g.1);
                rg_cpu.push(r.1);
            }
            answers = (g.2, r.2);
        }
        let cpu = format!(
            "CPU {:.0} vs {:.0} ms",
            median(gyre_cpu).unwrap_or(f64::NAN),
            median(rg_cpu).unwrap_or(f64::NAN)
        );
        let gyre_answer = if case.tool == "Glob" {
            let out = Command::new(probe)
                .args(["glob-all"])
                .arg(&tree)
                .arg(GLOB_PATTERN)
                .output()
                .context("could not run xtask-bench-probe glob-all")?;
            path_set(&String::from_utf8_lossy(&out.stdout), &tree)
        } else {
            (case.answer)(&answers.0, &tree)
        };
        let rg_answer = (case.answer)(&answers.1, &tree);
        let diff = difference(&gyre_answer, &rg_answer);
        let ratios: Vec<f64> = gyre_ms.iter().zip(&rg_ms).map(|(g, r)| g / r).collect();
        let label = format!("{} ({tree_note})", case.label);
        let mut row = Row::new(case.id, &label, "ms")
            .samples(&gyre_ms)
            .against_samples(&rg_ms, case.rg_label)
            .ratio_at_most(plan.loosen(1.1))
            .stable_if(spread(&ratios) <= STABLE_SPREAD);
        if !diff.is_empty() {
            row = row.fail("the same answer as rg");
        }
        let note = if diff.is_empty() {
            format!(
                "{cpu}; same {} {} as rg",
                rg_answer.len(),
                match case.id {
                    "grep_content" => "lines",
                    "grep_count" => "counts",
                    _ => "files",
                }
            )
        } else {
            diff
        };
        rows.push(row.note(note));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_compared_as_sets_of_relative_paths_lines_and_counts() {
        let tree = Path::new("/reg");
        let gyre = "Found 2 files\n/reg/b/x.rs\n/reg/a.rs";
        let rg = "a.rs\nb/x.rs\n";
        assert_eq!(path_set(gyre, tree), path_set(rg, tree));
        // Text is left out: gyre cuts long lines, rg does not.
        assert_eq!(
            line_set("a.rs:3:TODO fix\nb.rs:10:FIXME: x", tree),
            line_set(
                "a.rs:3:TODO fix, and a very long tail\nb.rs:10:FIXME: x",
                tree
            )
        );
        let counts = count_set(
            "a.rs:3\nb.rs:1\n\nFound 4 total occurrences across 2 files.",
            tree,
        );
        assert_eq!(counts, count_set("b.rs:1\na.rs:3\n", tree));
        assert_ne!(counts, count_set("a.rs:2\nb.rs:1\n", tree));
    }

    #[test]
    fn a_difference_names_what_each_side_alone_has() {
        let gyre: BTreeSet<String> = ["a", "b"].map(String::from).into();
        let rg: BTreeSet<String> = ["b", "c"].map(String::from).into();
        let diff = difference(&gyre, &rg);
        assert!(diff.starts_with("ANSWERS DIFFER: 1 only in gyre"), "{diff}");
        assert!(diff.contains("1 only in rg"), "{diff}");
        assert_eq!(difference(&gyre, &gyre), "");
    }
}
