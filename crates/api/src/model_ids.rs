//! The model ids Bedrock and Vertex AI know gyre's model names by.
//!
//! gyre (and the user's `--model`, `ANTHROPIC_MODEL`, `ANTHROPIC_SMALL_FAST_MODEL`,
//! `--fallback-model`) names models as the Anthropic API does: `claude-sonnet-4-5`, or
//! dated, `claude-sonnet-4-5-20250929`. Bedrock wants a cross-region inference profile,
//! `us.anthropic.claude-sonnet-4-5-20250929-v1:0`; Vertex AI wants
//! `claude-sonnet-4-5@20250929`. A name already in the backend's form (a Bedrock id, an
//! inference profile or its ARN; a Vertex id with `@`) and any name gyre does not know
//! pass through unchanged.

/// The models gyre knows, each with the snapshot date its undated name stands for (the
/// dates the reference pins).
const SNAPSHOTS: &[(&str, &str)] = &[
    ("claude-opus-4-5", "20251101"),
    ("claude-haiku-4-5", "20251001"),
    ("claude-sonnet-4-5", "20250929"),
    ("claude-opus-4-1", "20250805"),
    ("claude-opus-4", "20250514"),
    ("claude-sonnet-4", "20250514"),
    ("claude-3-7-sonnet", "20250219"),
    ("claude-3-5-haiku", "20241022"),
];

/// `(base, date)` of a known name, undated or dated; `[1m]` (the long-context marker)
/// is dropped.
fn snapshot(model: &str) -> Option<(&'static str, String)> {
    let model = model.strip_suffix("[1m]").unwrap_or(model);
    SNAPSHOTS.iter().find_map(|(base, date)| {
        if model == *base {
            return Some((*base, (*date).to_owned()));
        }
        let dated = model.strip_prefix(base)?.strip_prefix('-')?;
        (dated.len() == 8 && dated.bytes().all(|b| b.is_ascii_digit()))
            .then(|| (*base, dated.to_owned()))
    })
}

/// The geography prefix of Bedrock's cross-region inference profiles for a region:
/// `eu` for `eu-*`, `apac` for `ap-*`, `us-gov` for `us-gov-*`, else `us`.
#[must_use]
pub fn bedrock_region_prefix(region: &str) -> &'static str {
    if region.starts_with("us-gov-") {
        "us-gov"
    } else if region.starts_with("eu-") {
        "eu"
    } else if region.starts_with("ap-") {
        "apac"
    } else {
        "us"
    }
}

/// The Bedrock model id (an inference profile) for `model` in `region`.
///
/// ```
/// use gyre_api::bedrock_model_id;
/// assert_eq!(
///     bedrock_model_id("claude-sonnet-4-5", "eu-west-1"),
///     "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
/// );
/// let arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x1";
/// assert_eq!(bedrock_model_id(arn, "us-east-1"), arn);
/// ```
#[must_use]
pub fn bedrock_model_id(model: &str, region: &str) -> String {
    if model.starts_with("arn:") || model.contains("anthropic.") {
        return model.to_owned();
    }
    match snapshot(model) {
        Some((base, date)) => format!(
            "{}.anthropic.{base}-{date}-v1:0",
            bedrock_region_prefix(region)
        ),
        None => model.to_owned(),
    }
}

/// The Vertex AI model id for `model`.
///
/// ```
/// use gyre_api::vertex_model_id;
/// assert_eq!(vertex_model_id("claude-opus-4-1"), "claude-opus-4-1@20250805");
/// assert_eq!(vertex_model_id("claude-sonnet-4-5@20250929"), "claude-sonnet-4-5@20250929");
/// ```
#[must_use]
pub fn vertex_model_id(model: &str) -> String {
    if model.contains('@') {
        return model.to_owned();
    }
    match snapshot(model) {
        Some((base, date)) => format!("{base}@{date}"),
        None => model.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_names_map_to_bedrock_inference_profiles_by_region() {
        for (model, region, id) in [
            (
                "claude-sonnet-4-5",
                "us-east-1",
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            (
                "claude-sonnet-4-5-20250929",
                "ap-southeast-2",
                "apac.anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            (
                "claude-sonnet-4-5[1m]",
                "eu-central-1",
                "eu.anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            (
                "claude-haiku-4-5",
                "us-gov-west-1",
                "us-gov.anthropic.claude-haiku-4-5-20251001-v1:0",
            ),
            (
                "claude-opus-4",
                "us-west-2",
                "us.anthropic.claude-opus-4-20250514-v1:0",
            ),
            (
                "claude-opus-4-1",
                "us-west-2",
                "us.anthropic.claude-opus-4-1-20250805-v1:0",
            ),
            // Already Bedrock's: passes through.
            (
                "anthropic.claude-3-haiku-20240307-v1:0",
                "eu-west-1",
                "anthropic.claude-3-haiku-20240307-v1:0",
            ),
            (
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "eu-west-1",
                "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            // Unknown to gyre: passes through.
            ("my-custom-model", "us-east-1", "my-custom-model"),
            (
                "claude-sonnet-4-5-preview",
                "us-east-1",
                "claude-sonnet-4-5-preview",
            ),
        ] {
            assert_eq!(bedrock_model_id(model, region), id, "{model} in {region}");
        }
    }

    #[test]
    fn anthropic_names_map_to_vertex_ids() {
        assert_eq!(
            vertex_model_id("claude-sonnet-4-5"),
            "claude-sonnet-4-5@20250929"
        );
        assert_eq!(
            vertex_model_id("claude-haiku-4-5-20251001"),
            "claude-haiku-4-5@20251001"
        );
        assert_eq!(
            vertex_model_id("claude-3-5-haiku"),
            "claude-3-5-haiku@20241022"
        );
        assert_eq!(vertex_model_id("other-model"), "other-model");
    }
}
