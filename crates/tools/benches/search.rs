//! Grep (content and files modes) and Glob `**/*.rs` on a generated tree.
//!
//! `GYRE_BENCH_FULL=1` uses 5000 files of 10 KiB (about 51 MB); otherwise 500 files of
//! 4 KiB. Compare with `rg needle_ <dir>` and `rg --files -g '*.rs' <dir>`.

// A bench that cannot set up its tree should stop loudly, like a test.
#![allow(clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use gyre_tools::bench_support::generate_tree;
use gyre_tools::{Tool, ToolContext};
use serde_json::json;

fn bench_search(c: &mut Criterion) {
    let full = std::env::var_os("GYRE_BENCH_FULL").is_some();
    let (files, bytes) = if full {
        (5000, 10 * 1024)
    } else {
        (500, 4 * 1024)
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let total = generate_tree(dir.path(), files, bytes).expect("generate tree");
    eprintln!(
        "tree: {files} files, {total} bytes at {}",
        dir.path().display()
    );
    let ctx = ToolContext::new(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let run = |tool: &dyn Tool, input: serde_json::Value| {
        let out = runtime.block_on(tool.call(input, &ctx, &|_| {}));
        assert!(!out.is_error, "{}", out.content);
        out.content.len()
    };

    let mut group = c.benchmark_group("search");
    group.sample_size(if full { 10 } else { 20 });
    group.bench_function("grep_files_with_matches", |b| {
        b.iter(|| {
            run(
                &gyre_tools::grep::GrepTool,
                json!({"pattern": "needle_[0-9]+"}),
            )
        });
    });
    group.bench_function("grep_content", |b| {
        b.iter(|| {
            run(
                &gyre_tools::grep::GrepTool,
                json!({"pattern": "needle_[0-9]+", "output_mode": "content", "head_limit": 0}),
            )
        });
    });
    group.bench_function("glob_rs", |b| {
        b.iter(|| run(&gyre_tools::glob::GlobTool, json!({"pattern": "**/*.rs"})));
    });
    group.finish();
}

criterion_group!(benches, bench_search);
criterion_main!(benches);
