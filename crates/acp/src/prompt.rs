//! An editor's prompt as gyre's user message, and the slash commands gyre runs itself.

use agent_client_protocol as acp;
use gyre_protocol::{ContentBlock, ImageSource};

/// What a prompt asks for: a turn, or one of gyre's own commands.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// A user turn with these blocks.
    Turn(Vec<ContentBlock>),
    /// `/compact [instructions]`.
    Compact(Option<String>),
    /// `/clear`.
    Clear,
}

/// gyre's own commands a prompt may be ([`request`]).
pub const BUILTIN_COMMANDS: &[&str] = &["compact", "clear"];

/// The commands an editor offers in its `/` menu: gyre's own, the custom commands and
/// the skills (which the session expands from a prompt `/name args`).
#[must_use]
pub fn available_commands(
    commands: &[gyre_core::commands::CommandInfo],
) -> Vec<acp::AvailableCommand> {
    commands
        .iter()
        .map(|c| {
            let command = acp::AvailableCommand::new(c.name.clone(), c.description.clone());
            if c.argument_hint.is_empty() {
                command
            } else {
                command.input(acp::AvailableCommandInput::Unstructured(
                    acp::UnstructuredCommandInput::new(c.argument_hint.clone()),
                ))
            }
        })
        .collect()
}

/// The prompt's blocks as gyre's: text as text, images inline, an embedded file as its
/// text inside a `<context>` tag naming it, a link to a file as a reference the model
/// can Read.
#[must_use]
pub fn request(prompt: Vec<acp::ContentBlock>) -> Request {
    if let [acp::ContentBlock::Text(text)] = prompt.as_slice() {
        let trimmed = text.text.trim();
        if let Some(rest) = trimmed.strip_prefix("/compact")
            && (rest.is_empty() || rest.starts_with(char::is_whitespace))
        {
            let rest = rest.trim();
            return Request::Compact((!rest.is_empty()).then(|| rest.to_owned()));
        }
        if trimmed == "/clear" {
            return Request::Clear;
        }
    }
    Request::Turn(prompt.into_iter().filter_map(block).collect())
}

fn block(block: acp::ContentBlock) -> Option<ContentBlock> {
    match block {
        acp::ContentBlock::Text(text) => Some(ContentBlock::text(text.text)),
        acp::ContentBlock::Image(image) => Some(ContentBlock::Image {
            source: ImageSource::Base64 {
                media_type: image.mime_type,
                data: image.data,
            },
            cache_control: None,
        }),
        acp::ContentBlock::ResourceLink(link) => {
            Some(ContentBlock::text(format!("@{} ({})", link.name, link.uri)))
        }
        acp::ContentBlock::Resource(resource) => match resource.resource {
            acp::EmbeddedResourceResource::TextResourceContents(file) => Some(ContentBlock::text(
                format!("<context uri=\"{}\">\n{}\n</context>", file.uri, file.text),
            )),
            // Binary resources are not something the model reads as text.
            _ => None,
        },
        // Audio (not offered in gyre's prompt capabilities) and later kinds.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> acp::ContentBlock {
        acp::ContentBlock::from(s.to_owned())
    }

    #[test]
    fn slash_commands_are_gyres_own() {
        assert_eq!(request(vec![text("/compact")]), Request::Compact(None));
        assert_eq!(
            request(vec![text("/compact keep the plan")]),
            Request::Compact(Some("keep the plan".into()))
        );
        assert_eq!(request(vec![text(" /clear ")]), Request::Clear);
        assert_eq!(
            request(vec![text("/compactly")]),
            Request::Turn(vec![ContentBlock::text("/compactly")])
        );
    }

    #[test]
    fn an_embedded_file_is_context_the_model_reads() {
        let file = acp::ContentBlock::Resource(acp::EmbeddedResource::new(
            acp::EmbeddedResourceResource::TextResourceContents(acp::TextResourceContents::new(
                "fn main() {}",
                "file:///p/main.rs",
            )),
        ));
        let Request::Turn(blocks) = request(vec![text("explain"), file]) else {
            panic!("a turn");
        };
        assert_eq!(blocks[0], ContentBlock::text("explain"));
        assert_eq!(
            blocks[1],
            ContentBlock::text("<context uri=\"file:///p/main.rs\">\nfn main() {}\n</context>")
        );
    }
}
