//! WebSearch: the API's own `web_search` server tool. The API runs the searches, so
//! there is no call to ask permission for: it is offered only when the rules allow it
//! up front (`--allowedTools WebSearch`, or `WebSearch(domain:…)` to limit it to those
//! domains; deny rules `WebSearch(domain:…)` block domains, a bare `WebSearch` deny
//! removes it), or in bypassPermissions mode.

use gyre_protocol::ToolDefinition;
use gyre_tools::PermissionRule;
use serde_json::{Value, json};

/// The server tool's type (the version of the API's web search).
pub const WEB_SEARCH_TYPE: &str = "web_search_20250305";
/// Searches per request: the API's limit on what one response may spend.
const MAX_USES: u32 = 8;

fn web_search_rules(rules: &[String]) -> Vec<PermissionRule> {
    rules
        .iter()
        .filter_map(|r| r.parse::<PermissionRule>().ok())
        .filter(|r| r.tool == "WebSearch")
        .collect()
}

fn domains(rules: &[PermissionRule]) -> Vec<String> {
    rules
        .iter()
        .filter_map(|r| r.specifier.as_deref()?.strip_prefix("domain:"))
        .map(|d| d.trim().to_owned())
        .collect()
}

/// The definition to offer, or `None` when the rules do not allow web search.
#[must_use]
pub fn definition(allow: &[String], deny: &[String], bypass: bool) -> Option<ToolDefinition> {
    let (allow, deny) = (web_search_rules(allow), web_search_rules(deny));
    if deny.iter().any(|r| r.specifier.is_none()) || (allow.is_empty() && !bypass) {
        return None;
    }
    let mut options = serde_json::Map::new();
    options.insert("max_uses".to_owned(), json!(MAX_USES));
    let (allowed, blocked) = (domains(&allow), domains(&deny));
    // The API takes one list or the other; an allow list already excludes the rest.
    if allow.iter().all(|r| r.specifier.is_some()) && !allowed.is_empty() {
        options.insert("allowed_domains".to_owned(), Value::from(allowed));
    } else if !blocked.is_empty() {
        options.insert("blocked_domains".to_owned(), Value::from(blocked));
    }
    Some(ToolDefinition::server(
        WEB_SEARCH_TYPE,
        "web_search",
        options,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn it_is_offered_only_when_a_rule_or_bypass_allows_it() {
        assert!(definition(&[], &[], false).is_none());
        assert!(definition(&rules(&["Read"]), &[], false).is_none());
        assert!(definition(&[], &[], true).is_some());
        assert!(definition(&rules(&["WebSearch"]), &rules(&["WebSearch"]), false).is_none());
    }

    #[test]
    fn domain_rules_become_allowed_or_blocked_domains() {
        let d = definition(&rules(&["WebSearch(domain:docs.rs)"]), &[], false).unwrap();
        assert_eq!(d.options["allowed_domains"], json!(["docs.rs"]));
        let d = definition(
            &rules(&["WebSearch"]),
            &rules(&["WebSearch(domain:spam.example)"]),
            false,
        )
        .unwrap();
        assert_eq!(d.options["blocked_domains"], json!(["spam.example"]));
        assert_eq!(d.options["max_uses"], json!(MAX_USES));
        assert!(!d.options.contains_key("allowed_domains"));
    }
}
