//! WebFetch's rules: `WebFetch(domain:example.com)` matches the host of a call's `url`
//! as the fetcher parses it — the `url` crate, whose WHATWG rules reqwest uses — so the
//! host a rule is judged on is the host the fetch connects to (`https://127.0.0.1\@a.com/`
//! is 127.0.0.1: a backslash ends the authority). [`is_local_url`] names the hosts that
//! need permission whatever rule allows the call: this machine and private networks.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde_json::Value;
use url::{Host, Url};

/// The host a fetch of `url` connects to, lower-cased, without a trailing dot:
/// `https://user@Example.com:8080/x` → `example.com`, `http://2130706433/` →
/// `127.0.0.1`, `http://[::1]/` → `::1`.
#[must_use]
pub fn url_host(url: &str) -> Option<String> {
    let parsed = Url::parse(url).ok()?;
    let host = match parsed.host()? {
        Host::Domain(d) => d.trim_end_matches('.').to_ascii_lowercase(),
        Host::Ipv4(ip) => ip.to_string(),
        Host::Ipv6(ip) => ip.to_string(),
    };
    (!host.is_empty()).then_some(host)
}

/// Whether the call's `url` is on `domain` (the same host, case-insensitive).
#[must_use]
pub fn domain_rule_matches(domain: &str, input: &Value) -> bool {
    input
        .get("url")
        .and_then(Value::as_str)
        .and_then(url_host)
        .is_some_and(|host| host == domain.trim().trim_end_matches('.').to_ascii_lowercase())
}

/// Whether `url` reaches this machine or a private network — loopback, link-local,
/// private, shared (100.64/10) and unspecified addresses in any spelling
/// (`http://0x7f.1/`, `http://[::ffff:127.0.0.1]/`), `localhost` and its subdomains —
/// or has no host at all. A name that resolves to such an address is not seen here.
#[must_use]
pub fn is_local_url(url: &str) -> bool {
    let Ok(parsed) = Url::parse(url) else {
        return false;
    };
    match parsed.host() {
        None => true,
        Some(Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => local_v4(ip),
        Some(Host::Ipv6(ip)) => local_v6(ip),
    }
}

/// Whether an address a name resolved to reaches this machine or a private network (the
/// addresses [`is_local_url`] names): WebFetch's resolver refuses a name that resolves
/// to one, since the rule judged the name, not where it leads.
#[must_use]
pub fn is_local_address(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => local_v4(v4),
        std::net::IpAddr::V6(v6) => local_v6(v6),
    }
}

fn local_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        // 0.0.0.0/8 reaches this host; 100.64.0.0/10 is carrier-grade NAT.
        || a == 0
        || (a == 100 && (b & 0xc0) == 64)
}

fn local_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = Ipv4Addr::from(ip.to_bits() as u32);
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // unique local fc00::/7, link-local fe80::/10, site-local fec0::/10
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // IPv4-mapped, IPv4-compatible and NAT64 forms carry an IPv4 address.
        || ip.to_ipv4_mapped().is_some_and(local_v4)
        || (s[..6] == [0; 6] && local_v4(embedded))
        || (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] && local_v4(embedded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_host_is_the_one_the_url_parser_connects_to() {
        assert_eq!(
            url_host("https://user@Example.com:8080/x?y").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(url_host("not a url"), None);
        assert_eq!(
            url_host("https://127.0.0.1\\@allowed.com/").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(url_host("http://0x7f.1/").as_deref(), Some("127.0.0.1"));
        assert_eq!(
            url_host("http://Allowed.COM./").as_deref(),
            Some("allowed.com")
        );
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
        assert!(!domain_rule_matches(
            "allowed.com",
            &json!({"url": "https://127.0.0.1\\@allowed.com/"})
        ));
    }

    #[test]
    fn local_and_private_hosts_are_recognised_in_every_spelling() {
        for url in [
            "http://127.0.0.1/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://0.0.0.0/",
            "http://10.0.0.1/",
            "http://172.31.255.255/",
            "http://192.168.0.1/",
            "http://169.254.169.254/",
            "http://100.100.100.200/",
            "http://[::1]/",
            "http://[::]/",
            "http://[fe80::1]/",
            "http://[fc00::1]/",
            "http://[::ffff:10.0.0.1]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://localhost/",
            "http://LocalHost./",
            "http://a.localhost/",
            "file:///etc/passwd",
        ] {
            assert!(is_local_url(url), "{url}");
        }
        for url in [
            "https://example.com/",
            "http://8.8.8.8/",
            "http://[2001:4860::8888]/",
            "http://localhost.example.com/",
            "http://100.128.0.1/",
        ] {
            assert!(!is_local_url(url), "{url}");
        }
    }
}
