//! Read: a text file with numbered lines.

use std::borrow::Cow;
use std::path::Path;

use base64::Engine as _;
use gyre_protocol::ImageSource;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::file_state::FileState;
use crate::{
    BoxFuture, PermissionDecision, ProgressFn, Tool, ToolContext, ToolInputError, ToolOutput,
};

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

/// The Read tool: numbered lines of a text file, or an image.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadInput {
    /// The absolute path to the file to read
    pub(crate) file_path: String,
    /// The line number to start reading from (1-based). Only provide if the file is too large to read at once
    #[serde(default, deserialize_with = "crate::schema::whole_number")]
    #[schemars(with = "Option<i64>")]
    pub(crate) offset: Option<f64>,
    /// The number of lines to read. Only provide if the file is too large to read at once.
    #[serde(default, deserialize_with = "crate::schema::whole_number")]
    #[schemars(with = "Option<i64>")]
    pub(crate) limit: Option<f64>,
}

impl Tool for ReadTool {
    fn name(&self) -> Cow<'static, str> {
        "Read".into()
    }

    fn description(&self) -> Cow<'static, str> {
        "Reads a file from the local filesystem.\n\n\
Usage:\n\
- The file_path parameter must be an absolute path, not a relative path\n\
- By default, it reads up to 2000 lines starting from the beginning of the file\n\
- You can optionally specify a line offset and limit (especially handy for long files); files over 256 KB must be read with offset and limit\n\
- Any lines longer than 2000 characters will be truncated\n\
- Results are returned with line numbers starting at 1, as `N<TAB>line`\n\
- Images (PNG, JPEG, GIF, WebP, up to 3.75 MB) are shown to you as images\n\
- This tool cannot read directories or other binary files; use Glob or Bash `ls` for directories\n\
- Read a file before editing it with Edit or overwriting it with Write".into()
    }

    fn input_schema(&self) -> Value {
        crate::schema::input_schema::<ReadInput>()
    }

    fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolInputError> {
        if let Some(offset) = input.get("offset").and_then(Value::as_f64)
            && offset < 0.0
        {
            return Err("offset must be a line number of 1 or more".into());
        }
        if let Some(limit) = input.get("limit").and_then(Value::as_f64)
            && limit < 1.0
        {
            return Err("limit must be a positive number of lines".into());
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
        Err(changed) => return ToolOutput::error(changed.to_string()),
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
    // Saturating float-to-int casts: negatives were refused by validate_input.
    let offset = input.offset.map_or(1, |o| (o as usize).max(1));
    let limit = input
        .limit
        .map_or(DEFAULT_LINE_LIMIT, |l| (l as usize).max(1));
    // Read at most what fstat promised (256 KB for a file that says it is empty, as
    // procfs files do): a file that grows while it is read cannot fill memory.
    let cap = if paged {
        metadata.len().max(MAX_FILE_BYTES)
    } else {
        MAX_FILE_BYTES
    };
    // An editor's buffer, unsaved changes included, is what the user sees: it wins over
    // the disk (asked off the async threads, as the editor's answer is waited for).
    let editor = ctx.editor_files.clone();
    let from = path.clone();
    let disk_len = metadata.len();
    let scanned =
        tokio::task::spawn_blocking(move || match editor.and_then(|e| e.read_text(&from)) {
            Some(text) => {
                let len = text.len() as u64;
                read_page(std::io::Cursor::new(text.into_bytes()), offset, limit).map(|p| (p, len))
            }
            None => read_page(std::io::Read::take(file, cap), offset, limit).map(|p| (p, disk_len)),
        })
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    let (page, text_len) = match scanned {
        Ok(page) => page,
        Err(e) => return ToolOutput::error(format!("Cannot read {}: {e}", path.display())),
    };
    if page.binary {
        let ext = path
            .extension()
            .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
        return binary_error(&ext);
    }
    let mtime = metadata.modified().ok();
    let state = match page.hash {
        Some(hash) if page.bytes == text_len => FileState {
            mtime,
            content_hash: Some(hash),
            len: page.bytes,
        },
        Some(_) | None => FileState::partial(text_len, mtime),
    };
    ctx.file_state.record(&path, state);

    if page.too_long {
        return ToolOutput::error(format!(
            "File content (over {MAX_OUTPUT_CHARS} characters) exceeds the maximum of {MAX_OUTPUT_CHARS} characters per read. Please use offset and limit parameters to read specific portions of the file, or use the Grep tool to search for specific content."
        ));
    }
    if page.bytes == 0 {
        return ToolOutput::ok(
            "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>",
        );
    }
    if offset > page.lines_seen {
        return ToolOutput::ok(format!(
            "<system-reminder>Warning: the file exists but is shorter than the provided offset ({offset}). The file has {} lines.</system-reminder>",
            page.lines_seen
        ));
    }
    ToolOutput::ok(page.text)
}

/// Bytes of one line kept for the output: enough for [`MAX_LINE_CHARS`] characters of
/// any UTF-8 text, whatever the length of the line.
const LINE_KEEP_BYTES: usize = MAX_LINE_CHARS * 4 + 4;

/// What one streaming pass over a text file found.
#[derive(Debug, Default)]
struct Page {
    /// Lines `offset..offset + limit`, numbered (`N\tline`), cut, joined by `\n`.
    text: String,
    /// Lines seen: all of them when the file was read to its end.
    lines_seen: usize,
    /// Bytes read.
    bytes: u64,
    /// The content hash, when the file was read to its end.
    hash: Option<u64>,
    /// A NUL byte in the first 8 KiB (as git and ripgrep decide).
    binary: bool,
    /// The text passed [`MAX_OUTPUT_CHARS`]; reading stopped there.
    too_long: bool,
}

/// The line being read: its first bytes, and its length in characters.
#[derive(Debug, Default)]
struct PartLine {
    kept: Vec<u8>,
    chars: usize,
    last: Option<u8>,
}

impl PartLine {
    fn push(&mut self, bytes: &[u8], keep: bool) {
        if keep {
            let room = LINE_KEEP_BYTES.saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        // A UTF-8 character has exactly one byte that is not a continuation byte.
        self.chars += bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count();
        if let Some(&b) = bytes.last() {
            self.last = Some(b);
        }
    }
}

/// Lines `offset..offset + limit` (1-based) of `reader`, read as a stream: memory holds
/// the wanted lines (each cut to [`MAX_LINE_CHARS`]) and one buffer, never the file, and
/// reading stops after the last wanted line.
fn read_page(reader: impl std::io::Read, offset: usize, limit: usize) -> std::io::Result<Page> {
    use std::io::BufRead as _;
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, reader);
    let first = offset.saturating_sub(1);
    let end = first.saturating_add(limit);
    let mut page = Page::default();
    let mut hasher = crate::file_state::ContentHasher::default();
    let mut line = PartLine::default();
    let mut in_line = false;
    let mut stopped = false;
    while !stopped {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let sniffed = usize::try_from(page.bytes).unwrap_or(usize::MAX);
        if sniffed < 8192 && buf[..buf.len().min(8192 - sniffed)].contains(&0) {
            page.binary = true;
            return Ok(page);
        }
        let mut used = 0;
        while used < buf.len() {
            let rest = &buf[used..];
            let wanted = (first..end).contains(&page.lines_seen);
            match rest.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    line.push(&rest[..i], wanted);
                    used += i + 1;
                    finish_line(&mut page, std::mem::take(&mut line), wanted);
                    in_line = false;
                    if page.lines_seen >= end || page.too_long {
                        stopped = true;
                        break;
                    }
                }
                None => {
                    line.push(rest, wanted);
                    used = buf.len();
                    in_line = true;
                }
            }
        }
        hasher.update(&buf[..used]);
        page.bytes += used as u64;
        reader.consume(used);
    }
    let at_end = !stopped || reader.fill_buf()?.is_empty();
    if at_end {
        if in_line {
            let wanted = (first..end).contains(&page.lines_seen);
            finish_line(&mut page, line, wanted);
        }
        page.hash = Some(hasher.finish());
    }
    if page.text.ends_with('\n') {
        page.text.pop();
    }
    Ok(page)
}

fn finish_line(page: &mut Page, mut line: PartLine, wanted: bool) {
    page.lines_seen += 1;
    if !wanted {
        return;
    }
    if line.last == Some(b'\r') {
        line.chars -= 1;
        if line.kept.last() == Some(&b'\r') {
            line.kept.pop();
        }
    }
    let text = String::from_utf8_lossy(&line.kept);
    page.text.push_str(&page.lines_seen.to_string());
    page.text.push('\t');
    push_cut_counted(&mut page.text, &text, MAX_LINE_CHARS, line.chars);
    page.text.push('\n');
    if page.text.len() > MAX_OUTPUT_CHARS {
        page.too_long = true;
    }
}

/// Appends `line`, cut to `max` characters with a marker saying how long it was.
pub(crate) fn push_cut(out: &mut String, line: &str, max: usize) {
    push_cut_counted(out, line, max, line.chars().count());
}

/// [`push_cut`] for a line of which only the start is at hand: `total` is its length
/// in characters.
fn push_cut_counted(out: &mut String, line: &str, max: usize, total: usize) {
    match line.char_indices().nth(max) {
        None if total <= max => out.push_str(line),
        None => {
            out.push_str(line);
            out.push_str(&format!("… [line truncated, {total} chars total]"));
        }
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            out.push_str(&format!("… [line truncated, {total} chars total]"));
        }
    }
}

fn binary_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_string_lossy().to_ascii_lowercase();
    BINARY_EXTENSIONS
        .contains(&ext.as_str())
        .then(|| format!(".{ext}"))
}

/// The rest of `file`, at most `max` bytes, read off the async threads.
async fn read_all(file: std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, max), &mut bytes).map(|_| bytes)
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
    let bytes = read_all(file, MAX_IMAGE_BYTES).await;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn page(text: &[u8], offset: usize, limit: usize) -> Page {
        read_page(text, offset, limit).unwrap()
    }

    #[test]
    fn lines_are_numbered_with_crlf_and_a_missing_last_newline() {
        let p = page(b"a\r\nb\n\nc", 1, 10);
        assert_eq!(p.text, "1\ta\n2\tb\n3\t\n4\tc");
        assert_eq!(p.lines_seen, 4);
        assert_eq!(
            p.hash,
            Some(crate::file_state::content_hash(b"a\r\nb\n\nc"))
        );
    }

    #[test]
    fn reading_stops_after_the_last_wanted_line() {
        let text = b"1\n2\n3\n4\n5\n";
        let p = page(text, 2, 2);
        assert_eq!(p.text, "2\t2\n3\t3");
        assert_eq!(p.bytes, 6);
        assert_eq!(p.hash, None, "only part was read");
        let p = page(text, 4, 2);
        assert_eq!(p.text, "4\t4\n5\t5");
        assert!(p.hash.is_some(), "the last wanted line ends the file");
    }

    #[test]
    fn a_long_line_is_cut_and_its_full_length_counted_without_keeping_it() {
        let line = "é".repeat(3 * MAX_LINE_CHARS);
        let p = page(line.as_bytes(), 1, 1);
        assert!(
            p.text
                .starts_with(&format!("1\t{}", "é".repeat(MAX_LINE_CHARS)))
        );
        assert!(
            p.text.ends_with(&format!(
                "… [line truncated, {} chars total]",
                3 * MAX_LINE_CHARS
            )),
            "{}",
            &p.text[p.text.len() - 60..]
        );
    }

    #[test]
    fn a_nul_in_the_first_8k_is_binary() {
        assert!(page(b"abc\0def", 1, 10).binary);
        let mut late = vec![b'a'; 9000];
        late.push(0);
        assert!(!page(&late, 1, 10).binary);
    }
}
