//! An MCP `CallToolResult` as a gyre tool output: text parts joined, images kept as
//! images, embedded resources as their text (or as an image when they are one),
//! structured content as JSON when the server sent nothing else, `isError` kept.

use gyre_protocol::ImageSource;
use gyre_tools::ToolOutput;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// What the model reads when a tool returned nothing at all.
pub const NO_CONTENT: &str = "(the tool returned no content)";

/// The tool output for `result`.
pub fn to_output(result: CallToolResult) -> ToolOutput {
    let mut texts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in result.content {
        match block {
            ContentBlock::Text(text) => texts.push(text.text),
            ContentBlock::Image(image) => images.push(ImageSource::Base64 {
                media_type: image.mime_type,
                data: image.data,
            }),
            ContentBlock::Audio(audio) => texts.push(format!(
                "[audio ({}, {} base64 characters) not shown: the model reads text and images only]",
                audio.mime_type,
                audio.data.len()
            )),
            ContentBlock::Resource(embedded) => match show_resource(embedded.resource) {
                Shown::Text(text) => texts.push(text),
                Shown::Image(image) => images.push(image),
            },
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("[Resource link {}] {}", link.uri, link.name);
                if let Some(description) = &link.description {
                    line.push_str(": ");
                    line.push_str(description);
                }
                texts.push(line);
            }
            other => texts.push(unknown_block(&other)),
        }
    }
    if texts.is_empty()
        && images.is_empty()
        && let Some(structured) = &result.structured_content
    {
        texts.push(structured.to_string());
    }
    let mut content = texts.join("\n");
    if content.is_empty() && images.is_empty() {
        content = NO_CONTENT.to_owned();
    }
    ToolOutput {
        content,
        is_error: result.is_error == Some(true),
        images,
    }
}

/// How one resource's contents reach the model.
pub(crate) enum Shown {
    Text(String),
    Image(ImageSource),
}

/// A resource's contents: its text under its URI, an image as an image, other binary
/// data described (the model reads text and images only).
pub(crate) fn show_resource(contents: ResourceContents) -> Shown {
    match contents {
        ResourceContents::TextResourceContents { uri, text, .. } => {
            Shown::Text(format!("[Resource {uri}]\n{text}"))
        }
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => match mime_type {
            Some(media_type) if media_type.starts_with("image/") => {
                Shown::Image(ImageSource::Base64 {
                    media_type,
                    data: blob,
                })
            }
            mime_type => Shown::Text(format!(
                "[Resource {uri}: binary {}, {} base64 characters, not shown]",
                mime_type.as_deref().unwrap_or("data"),
                blob.len()
            )),
        },
        other => Shown::Text(unknown_block(&other)),
    }
}

/// A content kind newer than this client: shown as its JSON rather than lost.
fn unknown_block(block: &impl serde::Serialize) -> String {
    serde_json::to_string(block).unwrap_or_else(|e| format!("[content not shown: {e}]"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_parts_are_joined_and_images_kept() {
        let out = to_output(result(json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "iVBORw0K", "mimeType": "image/png"},
            {"type": "text", "text": "two"}
        ]})));
        assert_eq!(out.content, "one\ntwo");
        assert!(!out.is_error);
        assert_eq!(
            out.images,
            vec![ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0K".into()
            }]
        );
    }

    #[test]
    fn is_error_is_kept() {
        let out = to_output(result(
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
        ));
        assert_eq!(out, ToolOutput::error("bad"));
    }

    #[test]
    fn resources_show_their_text_or_their_kind() {
        let out = to_output(result(json!({"content": [
            {"type": "resource", "resource": {"uri": "test://a", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "test://b", "mimeType": "application/pdf", "blob": "AAAA"}},
            {"type": "resource_link", "uri": "test://c", "name": "c.txt", "description": "a file"}
        ]})));
        assert_eq!(
            out.content,
            "[Resource test://a]\nhello\n[Resource test://b: binary application/pdf, 4 base64 characters, not shown]\n[Resource link test://c] c.txt: a file"
        );
    }

    #[test]
    fn structured_content_is_the_answer_when_nothing_else_came() {
        let out = to_output(result(
            json!({"content": [], "structuredContent": {"sum": 5}}),
        ));
        assert_eq!(out.content, r#"{"sum":5}"#);
        let out = to_output(result(
            json!({"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}}),
        ));
        assert_eq!(out.content, "5");
    }

    #[test]
    fn an_empty_result_says_so() {
        assert_eq!(
            to_output(result(json!({"content": []}))).content,
            NO_CONTENT
        );
    }
}
