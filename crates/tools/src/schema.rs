//! Tool input schemas: derived from the input structs, and checked.
//!
//! A built-in tool's input schema is not written by hand: it is [`input_schema`] of the
//! struct its `call` parses (`#[derive(Deserialize, JsonSchema)]`), so the two cannot
//! drift. Field descriptions are the fields' doc comments; `#[serde(deny_unknown_fields)]`
//! publishes `additionalProperties: false`. Subschemas are inlined, and the keys the
//! API has no use for (`$schema`, `title`, `format`) are left out.
//!
//! Gyre's one rule beyond JSON Schema: a `null` value counts as an absent field (models
//! write `null` for the optional fields they leave out, and serde reads it as `None`), so
//! an optional field publishes its type without `"null"`.
//!
//! Two checks: [`validate`], the whole schema down to nested items (the conformance
//! tests hold every built-in schema to its parser with it), and `schema_issues`, what
//! `run_tool_call` checks before a call, with messages naming the field (the top level:
//! nested shapes are left to the tool's parser).

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::{Deserialize, Deserializer, de::Error as _};
use serde_json::{Map, Value};

/// The input schema of a tool whose input parses as `T`: an inlined object schema with
/// the fields' doc comments as descriptions.
#[must_use]
pub fn input_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Some(root) = schema.as_object_mut() {
        // The type's own doc comment is for readers of the code, not for the model.
        root.remove("title");
        root.remove("description");
    }
    simplify(&mut schema);
    schema
}

/// Reads an optional number that must be whole (`10` or `10.0`, not `1.5`): the parser
/// of a field published as `integer` (`#[schemars(with = "Option<i64>")]`), which serde
/// alone would read as any number.
pub(crate) fn whole_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    match Option::<f64>::deserialize(deserializer)? {
        Some(number) if number.fract() != 0.0 => Err(D::Error::custom(format!(
            "invalid value: {number}, expected an integer"
        ))),
        whole => Ok(whole),
    }
}

/// For `#[schemars(transform = …)]` on a type whose doc comments are for readers of the
/// code only: drops the descriptions of the type and of its fields.
pub(crate) fn undocumented(schema: &mut schemars::Schema) {
    schema.remove("description");
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        for property in properties.values_mut() {
            if let Some(property) = property.as_object_mut() {
                property.remove("description");
            }
        }
    }
}

/// Drops `format` (`double`, `int64`: the API wants none) and an optional field's
/// `"default": null`, makes its `["T", "null"]` plain `T` and takes `null` out of its
/// `enum` (null is absence, see the module docs), and turns a `oneOf` of documented
/// constants into `enum`.
fn simplify(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            object.remove("format");
            // `Option<T>` of a `T` that is not one plain type: `anyOf: [T, {"type": "null"}]`.
            if let Some(some) = optional_branch(object.get("anyOf")) {
                object.remove("anyOf");
                for (key, value) in some {
                    object.entry(key).or_insert(value);
                }
            }
            if object.get("default") == Some(&Value::Null) {
                object.remove("default");
            }
            if let Some(Value::Array(values)) = object.get_mut("enum")
                && values.len() > 1
            {
                values.retain(|v| !v.is_null());
            }
            if let Some(Value::Array(types)) = object.get("type")
                && types.len() == 2
                && types.contains(&Value::from("null"))
                && let Some(one) = types.iter().find(|t| *t != "null").cloned()
            {
                object.insert("type".to_owned(), one);
            }
            if let Some(values) = object.get("oneOf").and_then(constants) {
                object.remove("oneOf");
                if values.iter().all(Value::is_string) {
                    object.insert("type".to_owned(), Value::from("string"));
                }
                object.insert("enum".to_owned(), Value::Array(values));
            }
            object.values_mut().for_each(simplify);
        }
        Value::Array(items) => items.iter_mut().for_each(simplify),
        _ => {}
    }
}

/// The `T` of an `anyOf: [T, {"type": "null"}]` (either order), when `T` is an object.
fn optional_branch(any_of: Option<&Value>) -> Option<Map<String, Value>> {
    let is_null = |schema: &Value| {
        schema
            .as_object()
            .is_some_and(|o| o.len() == 1 && o.get("type") == Some(&Value::from("null")))
    };
    match any_of?.as_array()?.as_slice() {
        [some, null] | [null, some] if is_null(null) && !is_null(some) => some.as_object().cloned(),
        _ => None,
    }
}

/// The values of a `oneOf` whose every branch is one `const` (an enum with documented
/// variants); `None` for any other `oneOf`.
fn constants(one_of: &Value) -> Option<Vec<Value>> {
    one_of
        .as_array()?
        .iter()
        .map(|branch| branch.get("const").cloned())
        .collect()
}

/// A value that breaks its schema (or a schema [`validate`] cannot check): where, and
/// what is wrong. Shown as `input.todos[0].status: "x" is not one of [...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SchemaError {
    /// The JSON path of the value at fault (`input.todos[0].status`).
    pub path: String,
    /// What is wrong with it.
    pub problem: String,
}

impl SchemaError {
    fn at(path: &str, problem: impl Into<String>) -> Self {
        Self {
            path: path.to_owned(),
            problem: problem.into(),
        }
    }
}

/// Checks `input` against `schema` all the way down: `type` (one or a list), `enum`,
/// `const`, `properties`, `required`, `additionalProperties`, `items`, `minLength`,
/// `maxLength`, `minimum`, `maximum`; `description`, `default` and `examples` are
/// annotations. A keyword outside this list is itself an error, so a schema is never
/// passed by a check that did not understand it.
///
/// # Errors
/// The first problem found, with the JSON path of the value (`todos[0].status`).
pub fn validate(schema: &Value, input: &Value) -> Result<(), SchemaError> {
    validate_at(schema, input, "input")
}

fn validate_at(schema: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let Some(schema) = schema.as_object() else {
        return match schema {
            Value::Bool(true) => Ok(()),
            Value::Bool(false) => Err(SchemaError::at(path, "no value is allowed here")),
            _ => Err(SchemaError::at(path, "the schema is not an object")),
        };
    };
    for (keyword, rule) in schema {
        match keyword.as_str() {
            "type" => check_type(rule, value, path)?,
            "enum" => {
                let allowed = rule.as_array().map_or(&[][..], Vec::as_slice);
                if !allowed.iter().any(|a| same_value(a, value)) {
                    return Err(SchemaError::at(
                        path,
                        format!("{value} is not one of {rule}"),
                    ));
                }
            }
            "const" if !same_value(rule, value) => {
                return Err(SchemaError::at(path, format!("{value} is not {rule}")));
            }
            "properties" | "required" | "additionalProperties" => {
                if let Some(object) = value.as_object() {
                    check_object(schema, object, path)?;
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    validate_at(rule, item, &format!("{path}[{i}]"))?;
                }
            }
            "minLength" | "maxLength" => {
                if let (Some(text), Some(bound)) = (value.as_str(), rule.as_u64()) {
                    let chars = text.chars().count() as u64;
                    let fits = if keyword == "minLength" {
                        chars >= bound
                    } else {
                        chars <= bound
                    };
                    if !fits {
                        return Err(SchemaError::at(
                            path,
                            format!("{chars} characters break {keyword} {bound}"),
                        ));
                    }
                }
            }
            "minimum" | "maximum" => {
                if let (Some(number), Some(bound)) = (value.as_f64(), rule.as_f64()) {
                    let fits = if keyword == "minimum" {
                        number >= bound
                    } else {
                        number <= bound
                    };
                    if !fits {
                        return Err(SchemaError::at(
                            path,
                            format!("{number} breaks {keyword} {bound}"),
                        ));
                    }
                }
            }
            "const" | "description" | "default" | "examples" => {}
            other => {
                return Err(SchemaError::at(
                    path,
                    format!("the schema keyword `{other}` is not checked"),
                ));
            }
        }
    }
    Ok(())
}

/// `properties`, `required` and `additionalProperties` of an object value (once, from
/// whichever of the three keywords comes first; a repeat finds nothing new).
fn check_object(
    schema: &Map<String, Value>,
    object: &Map<String, Value>,
    path: &str,
) -> Result<(), SchemaError> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for field in &required {
        if object.get(*field).is_none_or(Value::is_null) {
            return Err(SchemaError::at(
                path,
                format!("the required field `{field}` is missing"),
            ));
        }
    }
    for (field, value) in object {
        let field_path = format!("{path}.{field}");
        match properties.and_then(|p| p.get(field)) {
            // null is an absent field (see the module docs)
            Some(_) if value.is_null() => {}
            Some(spec) => validate_at(spec, value, &field_path)?,
            None => match schema.get("additionalProperties") {
                None | Some(Value::Bool(true)) => {}
                Some(rule) => validate_at(rule, value, &field_path).map_err(|_| {
                    SchemaError::at(path, format!("the field `{field}` is not allowed"))
                })?,
            },
        }
    }
    Ok(())
}

fn check_type(rule: &Value, value: &Value, path: &str) -> Result<(), SchemaError> {
    let fits = match rule {
        Value::String(name) => is_type(name, value),
        Value::Array(names) => names
            .iter()
            .filter_map(Value::as_str)
            .any(|name| is_type(name, value)),
        _ => false,
    };
    if fits {
        Ok(())
    } else {
        Err(SchemaError::at(
            path,
            format!("a {} where the schema wants {rule}", type_name(value)),
        ))
    }
}

/// The full type check: unlike the runtime check, an unknown type name fits nothing.
fn is_type(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "string" | "boolean" | "number" | "integer" | "object" | "array" => {
            matches_type(name, value)
        }
        _ => false,
    }
}

/// JSON equality with numbers compared by value (`1` is `1.0`).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// The problems of `input` against `schema`, one line each; empty when it conforms.
/// Only what the built-in schemas use at the top level: an object with `properties`,
/// `required`, `additionalProperties: false`, and per field `type` and `enum`.
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
    fn validate_names_the_path_of_a_nested_problem() {
        let schema = json!({
            "type": "object",
            "properties": {"todos": {"type": "array", "items": {
                "type": "object",
                "properties": {"status": {"type": "string", "enum": ["pending", "completed"]}},
                "additionalProperties": false
            }}}
        });
        let input = json!({"todos": [{"status": "pending"}, {"status": "done"}]});
        let error = validate(&schema, &input).unwrap_err();
        assert_eq!(error.path, "input.todos[1].status");
        assert!(
            error.to_string().starts_with("input.todos[1].status:"),
            "{error}"
        );
        let input = json!({"todos": [{"status": "pending", "due": "today"}]});
        let error = validate(&schema, &input).unwrap_err().to_string();
        assert!(error.contains("`due` is not allowed"), "{error}");
    }

    #[test]
    fn validate_refuses_a_keyword_it_does_not_check() {
        let schema = json!({"type": "object", "patternProperties": {"^x": {"type": "string"}}});
        let error = validate(&schema, &json!({"x1": 1}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("`patternProperties` is not checked"),
            "{error}"
        );
    }

    #[test]
    fn validate_takes_null_as_an_absent_optional_field_only() {
        assert_eq!(
            validate(&schema(), &json!({"file_path": "/a", "limit": null})),
            Ok(())
        );
        assert!(validate(&schema(), &json!({"file_path": null})).is_err());
        assert!(validate(&json!({"type": "string"}), &Value::Null).is_err());
    }

    #[test]
    fn derived_schema_is_inline_and_without_format_or_null() {
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        /// Not for the model.
        struct Input {
            /// Where to look
            path: String,
            /// How many
            #[serde(default)]
            limit: Option<f64>,
            /// Which way
            #[serde(default)]
            order: Option<Order>,
        }
        #[derive(serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        enum Order {
            /// First to last
            Forward,
            /// Last to first
            Backward,
        }
        assert_eq!(
            input_schema::<Input>(),
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Where to look"},
                    "limit": {"type": "number", "description": "How many"},
                    "order": {"type": "string", "enum": ["forward", "backward"], "description": "Which way"}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn accepts_integral_floats_as_integers() {
        assert!(schema_issues(&schema(), &json!({"file_path": "/a", "limit": 10.0})).is_empty());
    }
}
