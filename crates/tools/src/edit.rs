//! Edit: exact string replacement in a file that was read.

use std::borrow::Cow;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use similar::TextDiff;

use crate::file_state::Freshness;
use crate::tool::call_blocking;
use crate::write::{
    MODIFIED_MESSAGE, NOT_READ_MESSAGE, read_with_freshness, record_written, store,
};
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

/// Diff lines shown in the result; the rest is summarised.
const MAX_DIFF_LINES: usize = 80;

/// The Edit tool: replaces an exact string in a file read before.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditInput {
    /// The absolute path to the file to modify
    file_path: String,
    /// The text to replace
    old_string: String,
    /// The text to replace it with (must be different from old_string)
    new_string: String,
    /// Replace all occurrences of old_string (default false)
    #[serde(default)]
    #[schemars(extend("default" = false))]
    replace_all: Option<bool>,
}

impl Tool for EditTool {
    fn name(&self) -> Cow<'static, str> {
        "Edit".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Performs exact string replacements in files.\n\n\
Usage:\n\
- You must use the Read tool at least once in the conversation before editing. This tool will error if you attempt an edit without reading the file.\n\
- When editing text from Read tool output, preserve the exact indentation (tabs/spaces) as it appears AFTER the line number prefix (`N<TAB>`). Never include any part of the line number prefix in old_string or new_string.\n\
- The edit will FAIL if old_string is not unique in the file. Either provide a larger string with more surrounding context to make it unique or use replace_all to change every instance of old_string.\n\
- Use replace_all for replacing and renaming strings across the file.\n\
- Line endings (LF or CRLF) and file permissions are kept. An empty old_string creates a new file.".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<EditInput>()
    }

    fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolInputError> {
        if input.get("old_string") == input.get("new_string") {
            return Err(
                "No changes to make: old_string and new_string are exactly the same.".into(),
            );
        }
        // The model's own mistakes are told before anyone is asked to approve the edit,
        // as Claude Code's Edit does. Only a file the session read is looked at: whether
        // some other path exists is not the model's to learn before the permission check.
        let Ok(input) = serde_json::from_value::<EditInput>(input.clone()) else {
            return Ok(());
        };
        if input.old_string.is_empty() {
            return Ok(());
        }
        let path = ctx.resolve(&input.file_path);
        if ctx.file_state.get(&path).is_none() {
            return Err(NOT_READ_MESSAGE.into());
        }
        // The editor's text is read where blocking is allowed: when the call runs.
        if ctx.editor_files.is_some() {
            return Ok(());
        }
        match plan_edit(&path, &input, ctx) {
            Err(Refused::Mistake(message)) => Err(message.into()),
            Ok(_) | Err(Refused::Disk(_)) => Ok(()),
        }
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        false
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Ask {
            reason: "Edit changes files".to_owned(),
        }
    }

    fn max_result_size_chars(&self) -> usize {
        50_000
    }

    fn path_field(&self) -> Option<&'static str> {
        Some("file_path")
    }

    fn call<'a>(
        &'a self,
        input: Value,
        ctx: &'a ToolContext,
        _progress: &'a ProgressFn,
    ) -> BoxFuture<'a, ToolOutput> {
        call_blocking(input, ctx, |input: EditInput, ctx| {
            match ctx.resolve_as_checked(&input.file_path) {
                Ok(path) => edit_file(&path, &input, ctx),
                Err(changed) => ToolOutput::error(changed.to_string()),
            }
        })
    }
}

fn edit_file(path: &Path, input: &EditInput, ctx: &ToolContext) -> ToolOutput {
    match plan_edit(path, input, ctx) {
        Ok(Plan::Create) => create_file(path, &input.new_string, ctx),
        Ok(Plan::Replace { original, updated }) => save(path, &original, &updated, ctx),
        Err(Refused::Mistake(message)) => ToolOutput::tool_use_error(message),
        Err(Refused::Disk(output)) => output,
    }
}

/// What an edit would write.
enum Plan {
    /// A new file holding `new_string`.
    Create,
    /// The file's text now, and with the edit made.
    Replace { original: String, updated: String },
}

/// Why an edit cannot be made.
enum Refused {
    /// The model's mistake (not read, changed since, no such string, …): told before
    /// anyone is asked to approve the edit, and again should it happen by the time it runs.
    Mistake(String),
    /// The file could not be read.
    Disk(ToolOutput),
}

fn plan_edit(path: &Path, input: &EditInput, ctx: &ToolContext) -> Result<Plan, Refused> {
    let metadata = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if input.old_string.is_empty() {
                return Ok(Plan::Create);
            }
            return Err(Refused::Mistake(format!(
                "File does not exist. Current working directory: {}",
                ctx.cwd.display()
            )));
        }
        Err(e) => {
            return Err(Refused::Disk(ToolOutput::error(format!(
                "Cannot read {}: {e}",
                path.display()
            ))));
        }
    };
    if metadata.is_dir() {
        return Err(Refused::Mistake(format!(
            "{} is a directory; Edit needs a file path.",
            path.display()
        )));
    }
    if let Err(e) = crate::paths::refuse_special(path, &metadata) {
        return Err(Refused::Mistake(e.to_string()));
    }
    let bytes = match read_with_freshness(path, &metadata, ctx) {
        Err(e) => {
            return Err(Refused::Disk(ToolOutput::error(format!(
                "Cannot read {}: {e}",
                path.display()
            ))));
        }
        Ok((_, Freshness::NotRead)) => return Err(Refused::Mistake(NOT_READ_MESSAGE.to_owned())),
        Ok((_, Freshness::Stale)) => return Err(Refused::Mistake(MODIFIED_MESSAGE.to_owned())),
        Ok((bytes, Freshness::Fresh)) => bytes,
    };
    let Ok(original) = String::from_utf8(bytes) else {
        return Err(Refused::Mistake(
            "The file is not valid UTF-8 text; Edit cannot change it. Use Write or Bash instead."
                .to_owned(),
        ));
    };
    if input.old_string.is_empty() {
        if !original.trim().is_empty() {
            return Err(Refused::Mistake(
                "Cannot create new file - file already exists.".to_owned(),
            ));
        }
        return Ok(Plan::Replace {
            original,
            updated: input.new_string.clone(),
        });
    }

    // Match and replace on LF text; a CRLF file is written back with CRLF.
    let crlf = original.contains("\r\n");
    let content = if crlf {
        original.replace("\r\n", "\n")
    } else {
        original.clone()
    };
    let mut old = input.old_string.replace("\r\n", "\n");
    let mut new = input.new_string.replace("\r\n", "\n");
    let mut matches = content.matches(old.as_str()).count();
    if matches == 0
        && let Some(actual) = match_ignoring_quote_style(&content, &old)
    {
        new = with_quote_style_of(&actual, &new);
        old = actual;
        matches = content.matches(old.as_str()).count();
    }
    if matches == 0 {
        return Err(Refused::Mistake(format!(
            "String to replace not found in file.\nString: {}",
            input.old_string
        )));
    }
    let replace_all = input.replace_all.unwrap_or(false);
    if matches > 1 && !replace_all {
        return Err(Refused::Mistake(format!(
            "Found {matches} matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: {}",
            input.old_string
        )));
    }
    let updated = if replace_all {
        content.replace(old.as_str(), &new)
    } else {
        content.replacen(old.as_str(), &new, 1)
    };
    let updated = if crlf {
        updated.replace('\n', "\r\n")
    } else {
        updated
    };
    Ok(Plan::Replace { original, updated })
}

const CURLY_QUOTES: [char; 4] = ['\u{2018}', '\u{2019}', '\u{201C}', '\u{201D}'];

/// `‘’` → `'`, `“”` → `"`.
fn straighten(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' => '\'',
        '\u{201C}' | '\u{201D}' => '"',
        c => c,
    }
}

/// The text of `content` that `old` names once typographic quotes count as straight
/// ones (a model types `"` where the file has `“`), as it is in the file.
fn match_ignoring_quote_style(content: &str, old: &str) -> Option<String> {
    if !content.contains(CURLY_QUOTES) && !old.contains(CURLY_QUOTES) {
        return None;
    }
    let straight: String = content.chars().map(straighten).collect();
    let needle: String = old.chars().map(straighten).collect();
    let at = straight.find(&needle)?;
    // Straightening maps one char to one char: char positions agree.
    let first = straight[..at].chars().count();
    let len = needle.chars().count();
    let mut starts = content.char_indices().map(|(i, _)| i).skip(first);
    let start = starts.next()?;
    let end = starts.nth(len - 1).unwrap_or(content.len());
    Some(content[start..end].to_owned())
}

/// `new` with its straight quotes made typographic where `actual` (the text it
/// replaces) uses typographic ones: opening after a space or bracket, closing (and
/// apostrophes) elsewhere.
fn with_quote_style_of(actual: &str, new: &str) -> String {
    let double = actual.contains(['\u{201C}', '\u{201D}']);
    let single = actual.contains(['\u{2018}', '\u{2019}']);
    let mut out = String::with_capacity(new.len());
    let mut previous: Option<char> = None;
    for c in new.chars() {
        let opens = previous.is_none_or(|p| p.is_whitespace() || "([{".contains(p));
        let styled = match c {
            '"' if double => {
                if opens {
                    '\u{201C}'
                } else {
                    '\u{201D}'
                }
            }
            '\'' if single => {
                if opens {
                    '\u{2018}'
                } else {
                    '\u{2019}'
                }
            }
            c => c,
        };
        out.push(styled);
        previous = Some(c);
    }
    out
}

fn create_file(path: &Path, content: &str, ctx: &ToolContext) -> ToolOutput {
    if let Some(parent) = path.parent()
        && let Err(e) = crate::paths::create_dir_all_as_checked(parent)
    {
        return ToolOutput::error(format!("Cannot create {}: {e}", parent.display()));
    }
    if let Err(e) = store(path, None, content, ctx) {
        return ToolOutput::error(format!("Cannot write {}: {e}", path.display()));
    }
    record_written(ctx, path, content.as_bytes());
    ToolOutput::ok(format!("File created successfully at: {}", path.display()))
}

fn save(path: &Path, original: &str, updated: &str, ctx: &ToolContext) -> ToolOutput {
    if let Err(e) = store(path, Some(original.as_bytes()), updated, ctx) {
        return ToolOutput::error(format!("Cannot write {}: {e}", path.display()));
    }
    record_written(ctx, path, updated.as_bytes());
    ToolOutput::ok(format!(
        "The file {} has been updated. Here's the diff:\n{}",
        path.display(),
        short_diff(original, updated)
    ))
}

/// A unified diff with 3 lines of context, at most [`MAX_DIFF_LINES`] lines.
fn short_diff(old: &str, new: &str) -> String {
    let old = old.replace("\r\n", "\n");
    let new = new.replace("\r\n", "\n");
    let diff = TextDiff::from_lines(&old, &new);
    let text = diff.unified_diff().context_radius(3).to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_DIFF_LINES {
        return text.trim_end().to_owned();
    }
    format!(
        "{}\n… ({} more diff lines)",
        lines[..MAX_DIFF_LINES].join("\n"),
        lines.len() - MAX_DIFF_LINES
    )
}
