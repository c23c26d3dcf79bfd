//! `WebFetch(domain:example.com)` rules: the host of a call's `url`.

use serde_json::Value;

/// The host of `url` (`https://user@Example.com:8080/x` → `example.com`), lower-cased.
#[must_use]
pub fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// Whether the call's `url` is on `domain` (the same host, case-insensitive).
#[must_use]
pub fn domain_rule_matches(domain: &str, input: &Value) -> bool {
    input
        .get("url")
        .and_then(Value::as_str)
        .and_then(url_host)
        .is_some_and(|host| host == domain.trim().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_host_is_taken_from_the_authority() {
        assert_eq!(
            url_host("https://user@Example.com:8080/x?y").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(url_host("not a url"), None);
    }

    #[test]
    fn a_domain_rule_matches_its_host_only() {
        let on = json!({"url": "https://docs.example.com/a"});
        assert!(domain_rule_matches("docs.example.com", &on));
        assert!(!domain_rule_matches("example.com", &on));
        assert!(!domain_rule_matches(
            "example.com",
            &json!({"url": "https://example.com.evil.io/"})
        ));
    }
}
