//! Deterministic source trees for benchmarks (`benches/search.rs`, `cargo xtask bench`):
//! the same size always gives the same files, so runs compare.

use std::io;
use std::path::Path;

const WORDS: &[&str] = &[
    "let", "fn", "struct", "impl", "match", "value", "result", "error", "config", "parse",
    "stream", "token", "buffer", "index", "return", "async", "await", "self", "vec", "map",
];

/// Writes `files` files of about `bytes_per_file` bytes under `root`, spread over nested
/// directories, four in five `.rs` and the rest `.txt`; one line in 50 holds
/// `needle_<n>`. Returns the bytes written.
pub fn generate_tree(root: &Path, files: usize, bytes_per_file: usize) -> io::Result<u64> {
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64: deterministic, no dependency.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut total = 0u64;
    for i in 0..files {
        let dir = root.join(format!("d{:02}/s{}", i % 50, i % 7));
        std::fs::create_dir_all(&dir)?;
        let ext = if i % 5 == 4 { "txt" } else { "rs" };
        let mut text = String::with_capacity(bytes_per_file + 100);
        let mut line_no = 0usize;
        while text.len() < bytes_per_file {
            line_no += 1;
            if line_no.is_multiple_of(50) {
                text.push_str(&format!(
                    "    // needle_{} marks this line\n",
                    next() % 1000
                ));
                continue;
            }
            let words = 4 + (next() % 8) as usize;
            text.push_str("    ");
            for w in 0..words {
                if w > 0 {
                    text.push(' ');
                }
                text.push_str(WORDS[(next() % WORDS.len() as u64) as usize]);
            }
            text.push_str(";\n");
        }
        std::fs::write(dir.join(format!("file{i:05}.{ext}")), &text)?;
        total += text.len() as u64;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_size_gives_the_same_tree() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let size_a = generate_tree(a.path(), 20, 2000).unwrap();
        let size_b = generate_tree(b.path(), 20, 2000).unwrap();
        assert_eq!(size_a, size_b);
        assert!(size_a >= 40_000);
        let f = "d03/s3/file00003.rs";
        assert_eq!(
            std::fs::read(a.path().join(f)).unwrap(),
            std::fs::read(b.path().join(f)).unwrap()
        );
    }
}
