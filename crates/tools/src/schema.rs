//! Checking a tool input against the tool's JSON schema, with messages that name the field.
//!
//! Only what the built-in schemas use: an object with `properties`, `required`,
//! `additionalProperties: false`, and per field `type` and `enum`.

use serde_json::Value;

/// The problems of `input` against `schema`, one line each; empty when it conforms.
#[must_use]
pub fn schema_issues(schema: &Value, input: &Value) -> Vec<String> {
    let mut issues = Vec::new();
    let Some(object) = input.as_object() else {
        issues.push(format!(
            "The input is expected as `object` but provided as `{}`",
            type_name(input)
        ));
        return issues;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            if object.get(field).is_none_or(Value::is_null) {
                issues.push(format!("The required parameter `{field}` is missing"));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (field, value) in object {
        let Some(spec) = properties.and_then(|p| p.get(field)) else {
            if closed {
                issues.push(format!("An unexpected parameter `{field}` was provided"));
            }
            continue;
        };
        if value.is_null() {
            continue;
        }
        if let Some(expected) = spec.get("type").and_then(Value::as_str)
            && !matches_type(expected, value)
        {
            issues.push(format!(
                "The parameter `{field}` type is expected as `{expected}` but provided as `{}`",
                type_name(value)
            ));
            continue;
        }
        if let Some(allowed) = spec.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            let names: Vec<String> = allowed
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect();
            issues.push(format!(
                "The parameter `{field}` must be one of: {}",
                names.join(", ")
            ));
        }
    }
    issues
}

fn matches_type(expected: &str, value: &Value) -> bool {
    match expected {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        // 10.0 is an integer too: models sometimes write numbers that way.
        "integer" => {
            value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "object" => value.is_object(),
        "array" => value.is_array(),
        _ => true,
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "limit": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"]}
            },
            "required": ["file_path"],
            "additionalProperties": false
        })
    }

    #[test]
    fn names_the_missing_field() {
        assert_eq!(
            schema_issues(&schema(), &json!({})),
            vec!["The required parameter `file_path` is missing"]
        );
    }

    #[test]
    fn names_the_mistyped_field() {
        assert_eq!(
            schema_issues(&schema(), &json!({"file_path": "/a", "limit": "ten"})),
            vec!["The parameter `limit` type is expected as `integer` but provided as `string`"]
        );
    }

    #[test]
    fn rejects_unknown_fields_and_enum_values() {
        let issues = schema_issues(&schema(), &json!({"file_path": "/a", "x": 1, "mode": "c"}));
        assert!(issues.contains(&"An unexpected parameter `x` was provided".to_owned()));
        assert!(issues.contains(&"The parameter `mode` must be one of: a, b".to_owned()));
    }

    #[test]
    fn accepts_integral_floats_as_integers() {
        assert!(schema_issues(&schema(), &json!({"file_path": "/a", "limit": 10.0})).is_empty());
    }
}
