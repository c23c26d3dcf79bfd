//! Read: a text file with numbered lines.

use std::path::Path;

use base64::Engine as _;
use gyre_protocol::ImageSource;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::file_state::FileState;
use crate::{BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolOutput};

/// Lines returned when no `limit` is given.
pub const DEFAULT_LINE_LIMIT: usize = 2000;
/// Longer lines are cut (Claude Code's Read).
pub const MAX_LINE_CHARS: usize = 2000;
/// Files over this size need `offset` or `limit`.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// About 25000 tokens: a longer result asks for a narrower read (Claude Code's Read).
pub const MAX_OUTPUT_CHARS: usize = 100_000;

/// Extensions read as binary without looking at the bytes.
const BINARY_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tiff", "psd", "pdf", "zip", "gz", "tgz",
    "bz2", "xz", "zst", "7z", "rar", "tar", "jar", "war", "exe", "dll", "so", "dylib", "a", "o",
    "obj", "lib", "bin", "dat", "class", "pyc", "pyo", "wasm", "rlib", "mp3", "mp4", "wav", "ogg",
    "flac", "avi", "mov", "mkv", "webm", "ttf", "otf", "woff", "woff2", "eot", "sqlite", "db",
    "doc", "docx", "xls", "xlsx", "ppt", "pptx", "iso", "dmg",
];

/// Extensions of the images Read shows to the model (the formats the API accepts).
const IMAGE_EXTENSIONS: &[&str] = &["png", "jpg", "jpeg", "gif", "webp"];
/// The largest image sent: 3.75 MiB, 5 MiB once base64-encoded (the API's limit).
pub const MAX_IMAGE_BYTES: u64 = 3 * 1024 * 1024 + 768 * 1024;

#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Debug, Deserialize)]
struct ReadInput {
    file_path: String,
    #[serde(default)]
    offset: Option<f64>,
    #[serde(default)]
    limit: Option<f64>,
}

impl Tool for ReadTool {
    fn name(&self) -> &'static str {
        "Read"
    }

    fn description(&self) -> &'static str {
        "Reads a file from the local filesystem.\n\n\
Usage:\n\
- The file_path parameter must be an absolute path, not a relative path\n\
- By default, it reads up to 2000 lines starting from the beginning of the file\n\
- You can optionally specify a line offset and limit (especially handy for long files); files over 256 KB must be read with offset and limit\n\
- Any lines longer than 2000 characters will be truncated\n\
- Results are returned with line numbers starting at 1, as `N<TAB>line`\n\
- Images (PNG, JPEG, GIF, WebP, up to 3.75 MB) are shown to you as images\n\
- This tool cannot read directories or other binary files; use Glob or Bash `ls` for directories\n\
- Read a file before editing it with Edit or overwriting it with Write"
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file to read"},
                "offset": {"type": "integer", "description": "The line number to start reading from (1-based). Only provide if the file is too large to read at once"},
                "limit": {"type": "integer", "description": "The number of lines to read. Only provide if the file is too large to read at once."}
            },
            "required": ["file_path"],
            "additionalProperties": false
        })
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), String> {
        if let Some(offset) = input.get("offset").and_then(Value::as_f64)
            && offset < 0.0
        {
            return Err("offset must be a line number of 1 or more".to_owned());
        }
        if let Some(limit) = input.get("limit").and_then(Value::as_f64)
            && limit < 1.0
        {
            return Err("limit must be a positive number of lines".to_owned());
        }
        Ok(())
    }

    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        true
    }

    fn is_read_only(&self, _input: &Value) -> bool {
        true
    }

    fn check_permissions(&self, _input: &Value, _ctx: &ToolContext) -> PermissionDecision {
        PermissionDecision::Allow
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
        Box::pin(async move {
            let input: ReadInput = match serde_json::from_value(input) {
                Ok(i) => i,
                Err(e) => return ToolOutput::tool_use_error(e),
            };
            read_file(&input, ctx).await
        })
    }
}

async fn read_file(input: &ReadInput, ctx: &ToolContext) -> ToolOutput {
    let path = match ctx.resolve_as_checked(&input.file_path) {
        Ok(p) => p,
        Err(changed) => return ToolOutput::error(changed),
    };
    // Opened once, as checked; metadata and content come from that one open file.
    let opened = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || {
            let file = crate::paths::open_as_checked(&path)?;
            let metadata = file.metadata()?;
            Ok::<_, std::io::Error>((file, metadata))
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
    };
    let (file, metadata) = match opened {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error(format!(
                "File does not exist. Current working directory: {}",
                ctx.cwd.display()
            ));
        }
        Err(e) => return ToolOutput::error(format!("Cannot read {}: {e}", path.display())),
    };
    if metadata.is_dir() {
        return ToolOutput::error(format!(
            "{} is a directory, not a file. Use Glob to find files in it or Bash `ls` to list it.",
            path.display()
        ));
    }
    if let Some(ext) = binary_extension(&path) {
        if IMAGE_EXTENSIONS.contains(&&ext[1..]) {
            return read_image(file, metadata.len(), &ext).await;
        }
        return binary_error(&ext);
    }
    let paged = input.offset.is_some() || input.limit.is_some();
    if !paged && metadata.len() > MAX_FILE_BYTES {
        return ToolOutput::error(format!(
            "File content ({}) exceeds maximum allowed size ({}). Please use offset and limit parameters to read specific portions of the file, or use the Grep tool to search for specific content.",
            format_size(metadata.len()),
            format_size(MAX_FILE_BYTES)
        ));
    }
    let bytes = read_all(file).await;
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("Cannot read {}: {e}", path.display())),
    };
    if looks_binary(&bytes) {
        let ext = path
            .extension()
            .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
        return binary_error(&ext);
    }
    ctx.file_state
        .record(&path, FileState::of(&bytes, metadata.modified().ok()));

    let text = String::from_utf8_lossy(&bytes);
    if text.is_empty() {
        return ToolOutput::ok(
            "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
        );
    }
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(&text)
        .split('\n')
        .collect();
    // Saturating float-to-int casts: negatives were refused by validate_input.
    let offset = input.offset.map_or(1, |o| (o as usize).max(1));
    let limit = input
        .limit
        .map_or(DEFAULT_LINE_LIMIT, |l| (l as usize).max(1));
    if offset > lines.len() {
        return ToolOutput::ok(format!(
            "<system-reminder>Warning: the file exists but is shorter than the provided offset ({offset}). The file has {} lines.</system-reminder>",
            lines.len()
        ));
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate().skip(offset - 1).take(limit) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&(i + 1).to_string());
        out.push('\t');
        push_cut(&mut out, line, MAX_LINE_CHARS);
        out.push('\n');
    }
    if out.ends_with('\n') {
        out.pop();
    }
    if out.len() > MAX_OUTPUT_CHARS {
        return ToolOutput::error(format!(
            "File content ({} characters) exceeds the maximum of {MAX_OUTPUT_CHARS} characters per read. Please use offset and limit parameters to read specific portions of the file, or use the Grep tool to search for specific content.",
            out.len()
        ));
    }
    ToolOutput::ok(out)
}

/// Appends `line`, cut to `max` characters with a marker saying how long it was.
pub(crate) fn push_cut(out: &mut String, line: &str, max: usize) {
    match line.char_indices().nth(max) {
        None => out.push_str(line),
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            out.push_str(&format!(
                "… [line truncated, {} chars total]",
                line.chars().count()
            ));
        }
    }
}

fn binary_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
    BINARY_EXTENSIONS
        .contains(&ext.as_str())
        .then(|| format!(".{ext}"))
}

/// The rest of `file`, read off the async threads.
async fn read_all(file: std::fs::File) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        let mut file = file;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}

/// An image file as a base64 image part. The media type comes from the bytes; a file
/// named like an image that is not one is an ordinary binary file.
async fn read_image(file: std::fs::File, len: u64, ext: &str) -> ToolOutput {
    if len > MAX_IMAGE_BYTES {
        return ToolOutput::error(format!(
            "Image is {} but at most {:.2}MB can be sent to the model. Make a smaller copy (e.g. `convert in{ext} -resize 50% small{ext}`) and read that.",
            format_size(len),
            MAX_IMAGE_BYTES as f64 / (1024.0 * 1024.0)
        ));
    }
    let bytes = read_all(file).await;
    let bytes = match bytes {
        Ok(b) => b,
        Err(e) => return ToolOutput::error(format!("Cannot read the image: {e}")),
    };
    let Some(media_type) = image_media_type(&bytes) else {
        return binary_error(ext);
    };
    ToolOutput::image(ImageSource::Base64 {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(&bytes),
    })
}

/// The media type of a PNG, JPEG, GIF or WebP image, from its first bytes.
fn image_media_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn binary_error(ext: &str) -> ToolOutput {
    let kind = if ext.is_empty() {
        String::new()
    } else {
        format!(" {ext}")
    };
    ToolOutput::error(format!(
        "This tool cannot read binary files. The file appears to be a binary{kind} file. Please use appropriate tools for binary file analysis."
    ))
}

/// A NUL byte in the first 8 KiB marks a binary file (as git and ripgrep decide).
fn looks_binary(bytes: &[u8]) -> bool {
    bytes.iter().take(8192).any(|&b| b == 0)
}

fn format_size(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if bytes < 1024 * 1024 {
        let kb = bytes as f64 / 1024.0;
        if bytes.is_multiple_of(1024) {
            format!("{}KB", bytes / 1024)
        } else {
            format!("{kb:.1}KB")
        }
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}
