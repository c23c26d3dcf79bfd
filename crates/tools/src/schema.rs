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
//! Two checks, both the `jsonschema` crate's on the input less the `null` fields its
//! schema declares: [`validate`], the first problem and its path (the conformance tests
//! hold every built-in schema to its parser with it), and [`schema_issues`], what
//! `run_tool_call` checks before a call (with the schema compiled once per tool), every
//! problem of the input and of its fields as a line naming the field (nested shapes are
//! left to the tool's parser).

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::{Location, LocationSegment};
use jsonschema::{JsonType, ValidationError, Validator};
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

/// A value that breaks its schema (or a schema [`validate`] cannot compile): where, and
/// what is wrong. Shown as `input.todos[0].status: "x" is not one of [...]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SchemaError {
    /// The JSON path of the value at fault (`input.todos[0].status`).
    pub path: String,
    /// What is wrong with it.
    pub problem: String,
}

/// Checks `input` against `schema` all the way down, every keyword of the schema's draft
/// (the `jsonschema` crate), with gyre's null rule.
///
/// # Errors
/// The first problem found, with the JSON path of the value (`input.todos[0].status`);
/// for a schema that is not valid JSON Schema, the path into the schema.
pub fn validate(schema: &Value, input: &Value) -> Result<(), SchemaError> {
    let validator = jsonschema::validator_for(schema).map_err(|error| SchemaError {
        path: dotted("schema", error.instance_path()),
        problem: error.to_string(),
    })?;
    let input = without_nulls(schema, input);
    validator.validate(&input).map_err(|error| {
        let problem = match error.kind() {
            ValidationErrorKind::Required { property } => {
                format!("the required field `{}` is missing", text(property))
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                format!("the field `{}` is not allowed", unexpected.join("`, `"))
            }
            _ => error.to_string(),
        };
        SchemaError {
            path: dotted("input", error.instance_path()),
            problem,
        }
    })
}

/// The problems of `input` and of its fields against `schema`, one line each naming the
/// field; empty when they conform (nested shapes are left to the tool's parser). Compiles
/// the schema for this one check: `run_tool_call` uses the one its registry keeps.
#[must_use]
pub fn schema_issues(schema: &Value, input: &Value) -> Vec<String> {
    InputCheck::new(schema.clone()).issues(input)
}

/// A tool's input schema compiled once: what `run_tool_call` checks each call against.
pub(crate) struct InputCheck {
    schema: Value,
    /// `None` for a schema that does not compile: the tool (an MCP server's) is left to
    /// check its own input.
    validator: Option<Validator>,
}

impl InputCheck {
    pub(crate) fn new(schema: Value) -> Self {
        let validator = jsonschema::validator_for(&schema)
            .inspect_err(|error| tracing::warn!(%error, "an input schema that does not compile"))
            .ok();
        Self { schema, validator }
    }

    /// The problems of `input` and of its fields, one line each naming the field; empty
    /// when it conforms.
    pub(crate) fn issues(&self, input: &Value) -> Vec<String> {
        let Some(validator) = &self.validator else {
            return Vec::new();
        };
        let input = without_nulls(&self.schema, input);
        validator
            .iter_errors(&input)
            // The top level: nested shapes are left to the tool's parser.
            .filter(|e| e.instance_path().segments().nth(1).is_none())
            .flat_map(|e| issue(&e))
            .collect()
    }
}

/// What `run_tool_call` reports of one error, naming the field (`todos[0].status`).
fn issue(error: &ValidationError) -> Vec<String> {
    let field = dotted("", error.instance_path());
    let line = match error.kind() {
        ValidationErrorKind::Required { property } => format!(
            "The required parameter `{}` is missing",
            join(&field, &text(property))
        ),
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            return unexpected
                .iter()
                .map(|u| format!("An unexpected parameter `{}` was provided", join(&field, u)))
                .collect();
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(one) => one.as_str().to_owned(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(JsonType::as_str)
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            let provided = type_name(error.instance());
            if field.is_empty() {
                format!("The input is expected as `{expected}` but provided as `{provided}`")
            } else {
                format!(
                    "The parameter `{field}` type is expected as `{expected}` but provided as `{provided}`"
                )
            }
        }
        ValidationErrorKind::Enum { options } => {
            let names: Vec<String> = options.as_array().into_iter().flatten().map(text).collect();
            format!(
                "The parameter `{field}` must be one of: {} (got {})",
                names.join(", "),
                error.instance()
            )
        }
        _ if field.is_empty() => format!("The input is invalid: {error}"),
        _ => format!("The parameter `{field}` is invalid: {error}"),
    };
    vec![line]
}

/// `value` under gyre's null rule: each `null` field its schema declares in `properties`
/// left out, at every depth the schema describes (`properties`, `items`).
fn without_nulls(schema: &Value, value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let fields = object.iter().filter_map(|(field, value)| {
                match properties.and_then(|p| p.get(field)) {
                    Some(_) if value.is_null() => None,
                    Some(spec) => Some((field.clone(), without_nulls(spec, value))),
                    None => Some((field.clone(), value.clone())),
                }
            });
            Value::Object(fields.collect())
        }
        Value::Array(items) => match schema.get("items") {
            Some(spec) => {
                Value::Array(items.iter().map(|item| without_nulls(spec, item)).collect())
            }
            None => value.clone(),
        },
        _ => value.clone(),
    }
}

/// `path`, a JSON pointer, written as fields after `base`: `input.todos[0].status`.
fn dotted(base: &str, path: &Location) -> String {
    path.segments()
        .fold(base.to_owned(), |written, segment| match segment {
            LocationSegment::Index(i) => format!("{written}[{i}]"),
            LocationSegment::Property(field) => join(&written, &field),
        })
}

fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_owned()
    } else {
        format!("{parent}.{field}")
    }
}

/// A string as itself, any other value as JSON.
fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
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
        assert!(
            issues.contains(&"The parameter `mode` must be one of: a, b (got \"c\")".to_owned())
        );
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
    fn validate_checks_every_keyword_of_the_draft() {
        let schema = json!({"type": "object", "patternProperties": {"^x": {"type": "string"}}});
        assert_eq!(validate(&schema, &json!({"x1": "a"})), Ok(()));
        let error = validate(&schema, &json!({"x1": 1})).unwrap_err();
        assert_eq!(error.path, "input.x1");
        let error = validate(&json!({"type": "text"}), &json!("a")).unwrap_err();
        assert_eq!(error.path, "schema.type");
    }

    #[test]
    fn schema_issues_check_every_keyword_of_a_field() {
        let schema =
            json!({"type": "object", "properties": {"limit": {"type": "integer", "minimum": 1}}});
        assert_eq!(
            schema_issues(&schema, &json!({"limit": 0})),
            vec!["The parameter `limit` is invalid: 0 is less than the minimum of 1"]
        );
    }

    #[test]
    fn schema_issues_leave_a_schema_that_does_not_compile_to_the_tool() {
        assert!(schema_issues(&json!({"type": "text"}), &json!({"a": 1})).is_empty());
    }

    #[test]
    fn validate_takes_null_as_an_absent_optional_field_only() {
        assert_eq!(
            validate(&schema(), &json!({"file_path": "/a", "limit": null})),
            Ok(())
        );
        assert!(validate(&schema(), &json!({"file_path": null})).is_err());
        assert!(validate(&schema(), &json!({"file_path": "/a", "x": null})).is_err());
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
