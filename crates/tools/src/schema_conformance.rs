//! The published input schema of every built-in tool against its input parser: what
//! one accepts the other accepts, what one rejects the other rejects.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::schema::{schema_issues, validate};
use crate::{ModeHandle, PermissionMode, ToolRegistry};

/// Every built-in tool of this crate: the default registry plus ExitPlanMode.
fn registry() -> ToolRegistry {
    ToolRegistry::with_default_tools().with(Arc::new(crate::plan::ExitPlanModeTool::new(
        ModeHandle::new(PermissionMode::Plan),
    )))
}

fn parses<T: DeserializeOwned>(input: &Value) -> bool {
    serde_json::from_value::<T>(input.clone()).is_ok()
}

/// A tool's parser and inputs on either side of it. The first valid input has every
/// required field; the test adds the generic cases (an unknown field, each required
/// field left out, a non-object input).
struct Case {
    parser: fn(&Value) -> bool,
    valid: Vec<Value>,
    invalid: Vec<Value>,
}

fn case(tool: &str) -> Option<Case> {
    let (parser, valid, invalid): (fn(&Value) -> bool, _, _) = match tool {
        "Read" => (
            parses::<crate::read::ReadInput>,
            vec![
                json!({"file_path": "/a"}),
                json!({"file_path": "/a", "offset": 10, "limit": 20.0}),
                json!({"file_path": "/a", "offset": null}),
            ],
            vec![
                json!({"file_path": 7}),
                json!({"file_path": "/a", "offset": 1.5}),
                json!({"file_path": "/a", "limit": "ten"}),
            ],
        ),
        "Edit" => (
            parses::<crate::edit::EditInput>,
            vec![
                json!({"file_path": "/a", "old_string": "x", "new_string": "y"}),
                json!({"file_path": "/a", "old_string": "x", "new_string": "y", "replace_all": true}),
            ],
            vec![
                json!({"file_path": "/a", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
            ],
        ),
        "Write" => (
            parses::<crate::write::WriteInput>,
            vec![json!({"file_path": "/a", "content": ""})],
            vec![json!({"file_path": "/a", "content": ["x"]})],
        ),
        "Grep" => (
            parses::<crate::grep::GrepInput>,
            vec![
                json!({"pattern": "fn"}),
                json!({"pattern": "fn", "path": "src", "glob": "*.rs", "type": "rust",
                       "output_mode": "content", "-A": 1, "-B": 2.5, "-C": 3, "-n": false,
                       "-i": true, "multiline": true, "head_limit": 0, "offset": 4}),
                json!({"pattern": "fn", "output_mode": "count"}),
                json!({"pattern": "fn", "output_mode": null}),
            ],
            vec![
                json!({"pattern": "fn", "output_mode": "lines"}),
                json!({"pattern": "fn", "-A": "1"}),
                json!({"pattern": "fn", "-i": 1}),
            ],
        ),
        "Glob" => (
            parses::<crate::glob::GlobInput>,
            vec![
                json!({"pattern": "**/*.rs"}),
                json!({"pattern": "*", "path": "src"}),
            ],
            vec![json!({"pattern": "*", "path": false})],
        ),
        "Bash" => (
            |input| {
                parses::<crate::background::BackgroundFlag>(input)
                    && parses::<crate::bash::BashInput>(&crate::background::foreground(input))
            },
            vec![
                json!({"command": "ls"}),
                json!({"command": "ls", "timeout": 1000, "description": "Lists files"}),
                json!({"command": "sleep 9", "run_in_background": true}),
                json!({"command": "ls", "run_in_background": null}),
            ],
            vec![
                json!({"command": "ls", "run_in_background": "yes"}),
                json!({"command": "ls", "timeout": "1s"}),
                json!({"command": "ls", "description": 3}),
            ],
        ),
        "BashOutput" => (
            parses::<crate::background::OutputInput>,
            vec![
                json!({"bash_id": "bash_1"}),
                json!({"bash_id": "bash_1", "filter": "err"}),
            ],
            vec![json!({"bash_id": 1})],
        ),
        "KillShell" => (
            parses::<crate::background::KillInput>,
            vec![json!({"shell_id": "bash_1"})],
            vec![json!({"shell_id": ["bash_1"]})],
        ),
        "TodoWrite" => (
            parses::<crate::todo::TodoInput>,
            vec![
                json!({"todos": [{"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"}]}),
                json!({"todos": []}),
            ],
            vec![
                json!({"todos": [{"content": "x", "status": "done", "activeForm": "x"}]}),
                json!({"todos": [{"content": "", "status": "pending", "activeForm": "x"}]}),
                json!({"todos": [{"content": "x", "status": "pending"}]}),
                json!({"todos": [{"content": "x", "status": "pending", "activeForm": "x", "priority": "high"}]}),
                json!({"todos": {"content": "x"}}),
            ],
        ),
        "ExitPlanMode" => (
            parses::<crate::plan::ExitPlanInput>,
            vec![json!({"plan": "1. edit\n2. test"})],
            vec![json!({"plan": 1})],
        ),
        _ => return None,
    };
    Some(Case {
        parser,
        valid,
        invalid,
    })
}

/// The table's inputs plus the generic invalid ones built from the first valid input.
fn with_generic_cases(schema: &Value, mut case: Case) -> Case {
    let full = case.valid[0].clone();
    let mut unknown = full.clone();
    unknown["no_such_field"] = json!(1);
    case.invalid
        .extend([unknown, json!("text"), json!([full.clone()]), Value::Null]);
    for field in schema["required"].as_array().into_iter().flatten() {
        let mut missing = full.clone();
        if let (Some(object), Some(field)) = (missing.as_object_mut(), field.as_str()) {
            object.remove(field);
        }
        case.invalid.push(missing);
    }
    case
}

#[test]
fn every_published_schema_accepts_exactly_what_its_parser_accepts() {
    for tool in registry().iter() {
        let name = tool.name();
        let schema = tool.input_schema();
        let case = case(&name).unwrap_or_else(|| panic!("no conformance case for {name}"));
        let case = with_generic_cases(&schema, case);
        for input in &case.valid {
            assert!((case.parser)(input), "{name}: the parser rejects {input}");
            assert_eq!(validate(&schema, input), Ok(()), "{name}: {input}");
            assert_eq!(
                schema_issues(&schema, input),
                Vec::<String>::new(),
                "{name}: {input}"
            );
        }
        for input in &case.invalid {
            assert!(!(case.parser)(input), "{name}: the parser accepts {input}");
            assert!(
                validate(&schema, input).is_err(),
                "{name}: the schema accepts {input}"
            );
        }
    }
}

#[test]
fn published_schemas_are_closed_and_inline() {
    for tool in registry().iter() {
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object", "{}", tool.name());
        assert_eq!(schema["additionalProperties"], false, "{}", tool.name());
        let text = schema.to_string();
        for noise in [
            "$schema",
            "$defs",
            "definitions",
            "$ref",
            "\"title\"",
            "\"format\"",
        ] {
            assert!(!text.contains(noise), "{}: {noise} in {text}", tool.name());
        }
    }
}

#[test]
fn published_schemas_are_unchanged() {
    let schemas: serde_json::Map<String, Value> = registry()
        .iter()
        .map(|tool| (tool.name().into_owned(), tool.input_schema()))
        .collect();
    insta::assert_json_snapshot!("tool_input_schemas", json!(schemas));
}
