//! Recognising compaction (summary) requests, which take no turn of the script.
//!
//! A session that compacts sends, between two turns of the conversation, a request of
//! its own: the history with a summary prompt appended to the last message. A script
//! that scripts every turn of the conversation cannot know when that request comes; with
//! a [`SummaryAnswer`](crate::SummaryAnswer) the server recognises it by its prompt and
//! answers it on the side.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Whether `body` (a Messages API request) has `prompt` in a text block of its last
/// message. Tool results are not looked at, so a file that quotes the prompt does not
/// count.
pub(crate) fn last_message_contains(body: &[u8], prompt: &str) -> bool {
    serde_json::from_slice::<LastMessage>(body)
        .is_ok_and(|last| last.texts.iter().any(|t| t.contains(prompt)))
}

/// The text blocks of a request's last message; every other message is skipped unread.
#[derive(Default)]
struct LastMessage {
    texts: Vec<String>,
}

impl<'de> Deserialize<'de> for LastMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Body {
            #[serde(default)]
            messages: Messages,
        }
        Body::deserialize(deserializer).map(|b| Self {
            texts: b.messages.0,
        })
    }
}

/// The texts of the last element of `messages`. Each message is read as its texts and
/// dropped when the next one comes; tool results and inputs are skipped without copying.
#[derive(Default)]
struct Messages(Vec<String>);

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Last;
        impl<'de> Visitor<'de> for Last {
            type Value = Messages;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Messages, A::Error> {
                let mut last = Messages::default();
                while let Some(message) = seq.next_element::<Message>()? {
                    last = Messages(message.content.0);
                }
                Ok(last)
            }
        }
        deserializer.deserialize_seq(Last)
    }
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Texts,
}

/// The text of a message's content: the string itself, or its `text` blocks.
#[derive(Default)]
struct Texts(Vec<String>);

impl<'de> Deserialize<'de> for Texts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Content;
        impl<'de> Visitor<'de> for Content {
            type Value = Texts;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Texts, E> {
                Ok(Texts(vec![text.to_owned()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Texts, A::Error> {
                let mut texts = Vec::new();
                while let Some(block) = seq.next_element::<Block>()? {
                    texts.extend(block.0);
                }
                Ok(Texts(texts))
            }
        }
        deserializer.deserialize_any(Content)
    }
}

/// A content block's text, if it is a `text` block.
struct Block(Option<String>);

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Block;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a content block")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
                let mut kind: Option<String> = None;
                let mut text: Option<String> = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "type" => kind = Some(map.next_value()?),
                        "text" => text = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(Block(text.filter(|_| kind.as_deref() == Some("text"))))
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use crate::script::{SummaryAnswer, Turn};
    use serde_json::json;

    fn answer() -> SummaryAnswer {
        SummaryAnswer::new("Write a summary", Turn::text("<summary>s</summary>"))
    }

    fn matches(body: &serde_json::Value) -> bool {
        answer().matches(body.to_string().as_bytes())
    }

    #[test]
    fn the_prompt_in_a_text_block_of_the_last_message_matches() {
        assert!(matches(&json!({"messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Read", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "x"},
                {"type": "text", "text": "Now: Write a summary of it all."}
            ]}
        ]})));
        assert!(matches(
            &json!({"messages": [{"role": "user", "content": "Write a summary."}]})
        ));
    }

    #[test]
    fn earlier_messages_and_tool_results_do_not_match() {
        assert!(!matches(&json!({"messages": [
            {"role": "user", "content": "Write a summary."},
            {"role": "assistant", "content": [{"type": "text", "text": "Write a summary"}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "Write a summary"},
                {"type": "tool_result", "tool_use_id": "u", "content": [{"type": "text", "text": "Write a summary"}]}
            ]}
        ]})));
        assert!(!matches(&json!({"messages": []})));
        assert!(!matches(&json!({"model": "m"})));
        assert!(!answer().matches(b"not json"));
    }
}
