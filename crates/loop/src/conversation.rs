//! One conversation's state, with one owner: the history, the model it goes to (and the
//! fallback), and the usage anchor. The engine keeps its conversation across turns and
//! lends it to each query, which adds to it as it goes; a query run on its own (a
//! sub-agent) owns one.

use gyre_compact::UsageAnchor;
use gyre_protocol::{Message, Usage};

/// A conversation: its messages, the model requests go to, the model to switch to after
/// repeated overloads, and the usage anchor — the usage of the last response and where
/// that response sits in the history — kept in step with the history here, and only here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    messages: Vec<Message>,
    model: String,
    /// `None` once the fallback was taken.
    fallback_model: Option<String>,
    anchor: Option<UsageAnchor>,
}

impl Conversation {
    /// A conversation over `messages` with `model`, without a usage anchor.
    #[must_use]
    pub fn new(
        messages: Vec<Message>,
        model: impl Into<String>,
        fallback_model: Option<String>,
    ) -> Self {
        Self {
            messages,
            model: model.into(),
            fallback_model,
            anchor: None,
        }
    }

    /// The history.
    #[must_use]
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The model requests go to (the fallback once switched).
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The model to switch to after repeated overloads; `None` once switched.
    #[must_use]
    pub fn fallback_model(&self) -> Option<&str> {
        self.fallback_model.as_deref()
    }

    /// The usage of the last response that joined the history, and its position.
    #[must_use]
    pub fn anchor(&self) -> Option<UsageAnchor> {
        self.anchor
    }

    /// Adds `message` to the history (the next prompt, say).
    pub fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// A response joins the history as `message` (what is kept of it) and its `usage`
    /// becomes the usage anchor.
    pub(crate) fn push_response(&mut self, message: Message, usage: Usage) {
        self.messages.push(message);
        self.anchor = Some(UsageAnchor {
            message_index: self.messages.len() - 1,
            usage,
        });
    }

    /// The history is replaced (compaction, persisted tool results): the anchor's
    /// position no longer holds, so it is forgotten.
    pub(crate) fn replace_history(&mut self, history: Vec<Message>) {
        self.messages = history;
        self.anchor = None;
    }

    /// The messages, to change in place; their number stays, and so does the anchor.
    pub(crate) fn messages_mut(&mut self) -> &mut [Message] {
        &mut self.messages
    }

    /// Switches to `fallback` for the rest of the conversation; no further fallback.
    pub(crate) fn fall_back_to(&mut self, fallback: String) {
        self.model = fallback;
        self.fallback_model = None;
    }

    /// Switches the model for the following requests (`/model`).
    pub(crate) fn set_model(&mut self, model: String) {
        self.model = model;
    }

    /// Forgets the history and the anchor (`/clear`).
    pub(crate) fn clear(&mut self) {
        self.messages.clear();
        self.anchor = None;
    }

    #[cfg(test)]
    pub(crate) fn with_anchor(mut self, anchor: UsageAnchor) -> Self {
        self.anchor = Some(anchor);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(output_tokens: u64) -> Usage {
        Usage {
            output_tokens,
            ..Usage::default()
        }
    }

    #[test]
    fn the_anchor_follows_the_last_response_and_is_forgotten_with_the_history() {
        let mut c = Conversation::new(vec![Message::user_text("hi")], "m", None);
        assert_eq!(c.anchor(), None);
        c.push_response(
            Message::assistant(vec![gyre_protocol::ContentBlock::text("hello")]),
            usage(7),
        );
        assert_eq!(
            c.anchor(),
            Some(UsageAnchor {
                message_index: 1,
                usage: usage(7)
            })
        );
        // A prompt after it leaves the anchor on the response.
        c.push(Message::user_text("more"));
        assert_eq!(c.anchor().map(|a| a.message_index), Some(1));
        c.replace_history(vec![Message::user_text("summary")]);
        assert_eq!(c.anchor(), None);
        assert_eq!(c.messages().len(), 1);
    }

    #[test]
    fn a_fallback_is_taken_once() {
        let mut c = Conversation::new(Vec::new(), "big", Some("small".into()));
        assert_eq!((c.model(), c.fallback_model()), ("big", Some("small")));
        c.fall_back_to("small".into());
        assert_eq!((c.model(), c.fallback_model()), ("small", None));
    }
}
