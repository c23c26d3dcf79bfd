//! The binary's size per crate (issue 31): which crates the code of `gyre` comes from,
//! so that a new dependency's cost shows in the report.
//!
//! The shipped binary is stripped, so the bench builds it again with its symbols
//! (profile `release-symbols`: `release` with `strip = false`, the same code) and reads
//! them with binutils' `nm -S -C`: each function's size (`t`/`T` symbols, `.text`)
//! goes to the crate its demangled path starts with; a trait impl
//! (`<Type as Trait>::f`) to the type's crate, or the trait's when the type is a
//! primitive; a generic function to the crate that defines it (`core::ptr::
//! drop_in_place<gyre_core::X>` is `core`'s), as cargo-bloat counts them; symbols
//! without a path (C code, the linker's) to "C and other". `.text`'s own size (`size
//! -A`) gives the total, so what no symbol covers shows as the difference.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::{Plan, Row};
use crate::{cargo, run_cmd, target_dir};

/// The profile with symbols (see the root `Cargo.toml`).
const PROFILE: &str = "release-symbols";
/// Crates listed by name in the table; the rest are summed.
const TOP: usize = 25;
/// What symbols without a crate path are counted as.
const OTHER: &str = "C and other";

/// One line of the size table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrateSize {
    pub name: String,
    /// Bytes of `.text`.
    pub text: u64,
}

/// The size rows, and the per-crate table (largest first) for the report.
pub fn rows(shipped: &Path, plan: &Plan) -> (Vec<Row>, Vec<CrateSize>) {
    let mut rows = Vec::new();
    match std::fs::metadata(shipped) {
        #[allow(clippy::cast_precision_loss)]
        Ok(m) => rows.push(
            Row::new(
                "binary_size",
                "gyre release binary (stripped, as shipped)",
                "MB",
            )
            .value(m.len() as f64 / 1e6),
        ),
        Err(e) => rows.push(Row::missing(
            "binary_size",
            "gyre release binary (stripped, as shipped)",
            "MB",
            format!("{}: {e}", shipped.display()),
        )),
    }
    let (id, label) = ("binary_text", "  .text, by crate in the table below");
    if plan.quick {
        rows.push(Row::missing(
            id,
            label,
            "MB",
            "full run only (a second release build, with symbols); `--only size` runs it",
        ));
        return (rows, Vec::new());
    }
    match per_crate() {
        Ok((total, crates)) => {
            let ours: u64 = crates
                .iter()
                .filter(|c| c.name.starts_with("gyre"))
                .map(|c| c.text)
                .sum();
            #[allow(clippy::cast_precision_loss)]
            rows.push(
                Row::new(id, label, "MB")
                    .value(total as f64 / 1e6)
                    .note(format!(
                        "gyre's own crates {:.1}%; from `nm` on the {PROFILE} build",
                        ours as f64 * 100.0 / total.max(1) as f64
                    )),
            );
            (rows, crates)
        }
        Err(e) => {
            rows.push(Row::missing(id, label, "MB", format!("{e:#}")));
            (rows, Vec::new())
        }
    }
}

/// Builds gyre with symbols; `.text`'s size and each crate's share, largest first.
fn per_crate() -> Result<(u64, Vec<CrateSize>)> {
    eprintln!("  building gyre with symbols (profile {PROFILE}) for the size table");
    run_cmd(
        &cargo(),
        &[
            "build",
            "--profile",
            PROFILE,
            "-p",
            "gyre-cli",
            "--bin",
            "gyre",
        ],
    )?;
    let binary = target_dir().join(PROFILE).join("gyre");
    let output = |program: &str, args: &[&str]| -> Result<String> {
        let out = Command::new(program)
            .args(args)
            .arg(&binary)
            .output()
            .with_context(|| format!("could not run {program} (binutils)"))?;
        if !out.status.success() {
            bail!(
                "{program} {} failed: {}",
                binary.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let total =
        text_size(&output("size", &["-A", "-d"])?).context("`size -A` listed no .text section")?;
    let symbols = output("nm", &["-S", "--size-sort", "-C", "-t", "d"])?;
    Ok((total, attribute(&symbols, total)))
}

/// `.text`'s size in `size -A -d`'s table.
fn text_size(table: &str) -> Option<u64> {
    table.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == ".text").then_some(())?;
        f.next()?.parse().ok()
    })
}

/// Sums the code symbols of `nm -S -C -t d` (`<address> <size> <type> <name>`) by crate,
/// largest first, the smaller ones past [`TOP`] summed as one line; what `total` has
/// that no symbol covers is a line of its own.
fn attribute(nm: &str, total: u64) -> Vec<CrateSize> {
    let mut by_crate: BTreeMap<String, u64> = BTreeMap::new();
    // Aliases (two names for one function, e.g. folded identical code) count once.
    let mut seen = std::collections::HashSet::new();
    for line in nm.lines() {
        let mut f = line.splitn(4, ' ');
        let (Some(address), Some(size), Some(kind), Some(name)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if !matches!(kind, "t" | "T") || !seen.insert(address) {
            continue;
        }
        let Ok(size) = size.parse::<u64>() else {
            continue;
        };
        *by_crate.entry(crate_of(name)).or_default() += size;
    }
    let mut crates: Vec<CrateSize> = by_crate
        .into_iter()
        .map(|(name, text)| CrateSize { name, text })
        .collect();
    crates.sort_by(|a, b| b.text.cmp(&a.text).then_with(|| a.name.cmp(&b.name)));
    let covered: u64 = crates.iter().map(|c| c.text).sum();
    if crates.len() > TOP {
        let rest = crates.split_off(TOP);
        crates.push(CrateSize {
            name: format!("{} more crates", rest.len()),
            text: rest.iter().map(|c| c.text).sum(),
        });
    }
    if total > covered {
        crates.push(CrateSize {
            name: "no symbol (padding, PLT)".to_owned(),
            text: total - covered,
        });
    }
    crates
}

/// The crate a demangled symbol's code belongs to (see the module docs).
fn crate_of(name: &str) -> String {
    let first = |path: &str| -> Option<String> {
        let path = path.trim_start_matches(['&', '*', '[', '(']);
        let path = path
            .strip_prefix("mut ")
            .or_else(|| path.strip_prefix("const "))
            .or_else(|| path.strip_prefix("dyn "))
            .unwrap_or(path);
        let (head, _) = path.split_once("::")?;
        let head = head.split('<').next()?;
        let ident = !head.is_empty() && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        ident.then(|| head.to_owned())
    };
    if let Some(inner) = name.strip_prefix('<') {
        // `<Type as Trait>::f`: the type's crate, else the trait's.
        let (ty, rest) = inner.split_once(" as ").unwrap_or((inner, ""));
        return first(ty)
            .or_else(|| first(rest))
            .unwrap_or_else(|| OTHER.to_owned());
    }
    first(name).unwrap_or_else(|| OTHER.to_owned())
}

/// The table for `report.md`.
pub fn markdown(crates: &[CrateSize]) -> String {
    let total: u64 = crates.iter().map(|c| c.text).sum();
    let mut out = format!(
        "\n## gyre's `.text` by crate\n\n{:.2} MB of code; symbols attributed by their \
         path's first segment (see `xtask/src/bench/size.rs`).\n\n| crate | .text | share |\n|---|---:|---:|\n",
        total as f64 / 1e6
    );
    for c in crates {
        #[allow(clippy::cast_precision_loss)]
        out.push_str(&format!(
            "| {} | {:.1} KB | {:.1}% |\n",
            c.name,
            c.text as f64 / 1e3,
            c.text as f64 * 100.0 / total.max(1) as f64
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_go_to_the_crate_their_path_starts_with() {
        assert_eq!(crate_of("gyre_core::session::Session::new"), "gyre_core");
        assert_eq!(
            crate_of("<gyre_api::Client as core::fmt::Debug>::fmt"),
            "gyre_api"
        );
        // A primitive's impl: the trait's crate.
        assert_eq!(crate_of("<str as serde::Serialize>::serialize"), "serde");
        assert_eq!(
            crate_of("<&mut serde_json::Serializer<W> as serde::Serializer>::serialize_str"),
            "serde_json"
        );
        assert_eq!(crate_of("core::ptr::drop_in_place<gyre_core::X>"), "core");
        assert_eq!(
            crate_of("rmcp::handler::server::<impl rmcp::Service for H>::handle::{{closure}}"),
            "rmcp"
        );
        assert_eq!(
            crate_of("hashbrown::raw::RawTable<T,A>::reserve_rehash"),
            "hashbrown"
        );
        assert_eq!(crate_of("memcpy"), OTHER);
        assert_eq!(crate_of("<[u8] as core::fmt::Debug>::fmt"), "core");
    }

    #[test]
    fn sizes_are_summed_by_crate_largest_first_with_the_uncovered_rest() {
        let nm = "\
0000000000001000 0000000000000100 T gyre_core::a
0000000000002000 0000000000000050 t gyre_core::b
0000000000003000 0000000000000300 t <serde_json::Value as core::fmt::Debug>::fmt
0000000000004000 0000000000000900 R gyre_core::TABLE
0000000000005000 0000000000000020 T memcpy
0000000000005000 0000000000000020 T memcpy_alias
not a symbol line
";
        let crates = attribute(nm, 500);
        let got: Vec<(&str, u64)> = crates.iter().map(|c| (c.name.as_str(), c.text)).collect();
        assert_eq!(
            got,
            [
                ("serde_json", 300),
                ("gyre_core", 150),
                (OTHER, 20),
                ("no symbol (padding, PLT)", 30)
            ]
        );
        let table = markdown(&crates);
        assert!(table.contains("| serde_json | 0.3 KB | 60.0% |"), "{table}");
    }

    #[test]
    fn past_the_top_crates_the_rest_are_one_line() {
        let nm: String = (0..TOP + 3)
            .map(|i| format!("{i} {} t crate{i:02}::f\n", 1000 - i))
            .collect();
        let crates = attribute(&nm, 0);
        assert_eq!(crates.len(), TOP + 1);
        assert_eq!(crates[TOP].name, "3 more crates");
        assert_eq!(crates[TOP].text, 1000 - 25 + 1000 - 26 + 1000 - 27);
    }

    #[test]
    fn the_text_section_size_comes_from_size_a() {
        let table = "gyre  :\nsection  size  addr\n.rodata  422628  1008384\n.text  6457524  2624816\nTotal 1\n";
        assert_eq!(text_size(table), Some(6_457_524));
        assert_eq!(text_size("nothing"), None);
    }
}
