//! Finds secrets in fixture text: Anthropic API keys (`sk-ant-…`) and the values of
//! `x-api-key` / `authorization` headers, wherever they appear (raw text, JSON strings,
//! and the text and tool input a recorded SSE stream spreads over many deltas).

use std::sync::LazyLock;

use regex::Regex;

/// What a redacted value reads as (gyre-api's `RecordingClient` writes this).
pub const REDACTED: &str = "[REDACTED]";

// Same shape gyre-api redacts: `sk-ant-` then at least 4 key characters.
static KEY: LazyLock<Result<Regex, regex::Error>> =
    LazyLock::new(|| Regex::new(r"sk-ant-[A-Za-z0-9_\-]{4,}"));

// `x-api-key: v`, `"authorization": "Bearer v"`, `x-api-key=v`, any case.
static HEADER: LazyLock<Result<Regex, regex::Error>> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b(x-api-key|authorization)\\?["']?\s*[:=]\s*\\?["']?(?:bearer\s+|basic\s+)?([^\s"'\\,}]*)"#,
    )
});

/// One secret found: where, what kind, and a masked preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub line: usize,
    pub kind: &'static str,
    pub preview: String,
}

fn mask(secret: &str) -> String {
    let shown: String = secret.chars().take(10).collect();
    format!("{shown}…")
}

/// Placeholders that are not secrets: redacted values, `$VARS`, `<key>`, `...`.
fn is_placeholder(value: &str) -> bool {
    value.is_empty()
        || value.starts_with(REDACTED)
        || value.starts_with('$')
        || value.starts_with('<')
        || value.starts_with("...")
        || value.starts_with('…')
}

/// Secrets in one piece of text, reported on `line`.
fn scan_text(text: &str, line: usize, out: &mut Vec<Finding>) {
    if let Ok(key) = KEY.as_ref() {
        for m in key.find_iter(text) {
            out.push(Finding {
                line,
                kind: "Anthropic API key (sk-ant-…)",
                preview: mask(m.as_str()),
            });
        }
    }
    if let Ok(header) = HEADER.as_ref() {
        for c in header.captures_iter(text) {
            let (Some(name), Some(value)) = (c.get(1), c.get(2)) else {
                continue;
            };
            if !is_placeholder(value.as_str()) {
                out.push(Finding {
                    line,
                    kind: if name.as_str().eq_ignore_ascii_case("x-api-key") {
                        "x-api-key header value"
                    } else {
                        "authorization header value"
                    },
                    preview: mask(value.as_str()),
                });
            }
        }
    }
}

/// Every string inside a JSON value, and for SSE text the deltas of each block joined,
/// so a key split over two `input_json_delta`s is still found.
fn strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(s) => {
            if s.contains("event: ") && s.contains("data: ") {
                out.extend(joined_deltas(s));
            }
            out.push(s.clone());
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                strings(v, out);
            }
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {}
    }
}

/// The text of each content block of an SSE stream, deltas concatenated.
fn joined_deltas(sse: &str) -> Vec<String> {
    let mut blocks: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    for data in sse.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(data) else {
            continue;
        };
        let Some(index) = event["index"].as_u64() else {
            continue;
        };
        let delta = &event["delta"];
        for field in ["text", "partial_json", "thinking"] {
            if let Some(piece) = delta[field].as_str() {
                blocks.entry(index).or_default().push_str(piece);
            }
        }
    }
    blocks.into_values().collect()
}

/// Scans a whole file: each line as text, and each JSON line's strings decoded.
pub fn scan(text: &str) -> Vec<Finding> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut here = Vec::new();
        scan_text(line, i + 1, &mut here);
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
            let mut all = Vec::new();
            strings(&value, &mut all);
            for s in &all {
                scan_text(s, i + 1, &mut here);
            }
        }
        here.sort_by(|a, b| (a.kind, &a.preview).cmp(&(b.kind, &b.preview)));
        here.dedup();
        found.extend(here);
    }
    // A pretty-printed JSON file: decode it whole as well.
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        let mut all = Vec::new();
        strings(&value, &mut all);
        for s in &all {
            let mut here = Vec::new();
            scan_text(s, 0, &mut here);
            for f in here {
                if !found
                    .iter()
                    .any(|g| g.kind == f.kind && g.preview == f.preview)
                {
                    found.push(f);
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_planted_key() {
        let found = scan(r#"{"request":{"messages":[{"content":"key sk-ant-api03-AbCdEf"}]}}"#);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].line, 1);
    }

    #[test]
    fn finds_a_key_split_over_deltas() {
        let sse = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"k\\\": \\\"sk-an\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"t-api03-XyZw\\\"}\"}}\n\n";
        let line = serde_json::json!({ "sse": sse }).to_string();
        assert!(!scan(&line).is_empty());
    }

    #[test]
    fn finds_header_values_but_not_placeholders() {
        assert_eq!(scan(r#"{"x-api-key": "abc123secret"}"#).len(), 1);
        assert_eq!(scan("curl -H 'Authorization: Bearer tok_live_1'").len(), 1);
        assert!(scan(r#"{"x-api-key": "[REDACTED]"}"#).is_empty());
        assert!(scan("export x-api-key=$ANTHROPIC_API_KEY").is_empty());
        assert!(scan("the x-api-key header carries the key").is_empty());
        assert!(scan(r#"{"text":"[REDACTED] sk-ant-"}"#).is_empty());
    }
}
