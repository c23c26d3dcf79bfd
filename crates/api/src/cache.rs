//! Prompt caching: where the `cache_control` breakpoints go (the last system block, the
//! last tool, the last cleared tool result, the last message).

use gyre_protocol::{
    CLEARED_TOOL_RESULT, CacheControl, ContentBlock, Message, MessagesRequest, ToolResultContent,
};

/// Puts `cache_control: {type: ephemeral}` on the last system block, the last tool
/// definition, the last content block of the last message and, before that, the message
/// holding the last tool result compaction cleared; removes every other marker so
/// breakpoints from earlier turns do not pile up (the API allows four).
///
/// The cleared-result breakpoint is what keeps a batch of clears cheap: the API reads an
/// earlier cache entry only within 20 blocks before a breakpoint, and the next batch
/// starts right after the last cleared result. With a breakpoint there, each batch reads
/// the prefix the previous batch left and rewrites only what follows it.
///
/// Blocks that cannot carry a marker (thinking, redacted thinking, unknown, empty
/// text) are skipped: the marker goes on the last block of the last message that can.
pub fn add_cache_markers(request: &mut MessagesRequest) {
    for block in &mut request.system {
        block.cache_control = None;
    }
    for tool in &mut request.tools {
        tool.cache_control = None;
    }
    // Only the messages that carry a marker are written to: writing to a message's
    // blocks copies them when the history shares them (`gyre_protocol::Blocks`).
    for message in &mut request.messages {
        if message.content.iter().any(|b| b.cache_control().is_some()) {
            for block in &mut message.content {
                block.set_cache_control(None);
            }
        }
    }
    if let Some(last) = request.system.iter_mut().rev().find(|b| !b.text.is_empty()) {
        last.cache_control = Some(CacheControl::ephemeral());
    }
    if let Some(last) = request.tools.last_mut() {
        last.cache_control = Some(CacheControl::ephemeral());
    }
    let last = request.messages.len().saturating_sub(1);
    if let Some(cleared) = request.messages[..last]
        .iter()
        .rposition(holds_cleared_result)
    {
        mark_last_block(&mut request.messages[cleared]);
    }
    if let Some(message) = request.messages.last_mut() {
        mark_last_block(message);
    }
}

fn mark_last_block(message: &mut Message) {
    for block in message.content.iter_mut().rev() {
        if cacheable(block) && block.set_cache_control(Some(CacheControl::ephemeral())) {
            break;
        }
    }
}

fn holds_cleared_result(message: &Message) -> bool {
    message.content.iter().any(|b| {
        matches!(b, ContentBlock::ToolResult { content: ToolResultContent::Text(t), .. } if &**t == CLEARED_TOOL_RESULT)
    })
}

fn cacheable(block: &ContentBlock) -> bool {
    !matches!(block, ContentBlock::Text { text, .. } if text.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gyre_protocol::{Message, SystemBlock, ToolDefinition};
    use serde_json::json;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
            cache_control: None,
            kind: None,
            options: serde_json::Map::new(),
        }
    }

    fn markers(r: &MessagesRequest) -> Vec<String> {
        let v = serde_json::to_value(r).unwrap();
        let mut out = Vec::new();
        collect("", &v, &mut out);
        out
    }

    fn collect(path: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                if m.contains_key("cache_control") {
                    out.push(path.to_owned());
                }
                for (k, v) in m {
                    collect(&format!("{path}/{k}"), v, out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    collect(&format!("{path}/{i}"), v, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn moving_the_marker_copies_only_the_messages_it_changes() {
        let history: Vec<Message> = (0..6)
            .map(|i| Message::user_text(format!("message {i}")))
            .collect();
        let mut request = MessagesRequest::new("m", 100, history.clone());
        add_cache_markers(&mut request);
        // The history grows by one; the last request's marked message is still in it.
        let mut history = history;
        history.push(Message::user_text("message 6"));
        let mut next = MessagesRequest::new("m", 100, request.messages.clone());
        next.messages.push(history[6].clone());
        add_cache_markers(&mut next);
        let copied: Vec<usize> = (0..history.len())
            .filter(|&i| !next.messages[i].content.shares(&history[i].content))
            .collect();
        // Message 5 lost its marker, message 6 got it: the others are the history's.
        assert_eq!(copied, [5, 6]);
        assert_eq!(markers(&next), ["/messages/6/content/0"]);
    }

    #[test]
    fn markers_go_on_last_system_tool_and_message_block() {
        let mut r = MessagesRequest::new(
            "m",
            1000,
            vec![
                Message::user_text("first"),
                Message::assistant(vec![ContentBlock::text("reply")]),
                Message::user(vec![ContentBlock::text("a"), ContentBlock::text("b")]),
            ],
        );
        r.system = vec![SystemBlock::text("one"), SystemBlock::text("two")];
        r.tools = vec![tool("Read"), tool("Bash")];
        add_cache_markers(&mut r);
        assert_eq!(
            markers(&r),
            vec!["/messages/2/content/1", "/system/1", "/tools/1"]
        );
    }

    #[test]
    fn old_markers_are_moved_not_added() {
        let mut r = MessagesRequest::new("m", 1000, vec![Message::user_text("q1")]);
        add_cache_markers(&mut r);
        r.messages
            .push(Message::assistant(vec![ContentBlock::text("a1")]));
        r.messages.push(Message::user_text("q2"));
        add_cache_markers(&mut r);
        assert_eq!(markers(&r), vec!["/messages/2/content/0"]);
    }

    #[test]
    fn blocks_that_cannot_carry_a_marker_are_skipped() {
        let mut r = MessagesRequest::new(
            "m",
            1000,
            vec![Message::assistant(vec![
                ContentBlock::text("visible"),
                ContentBlock::thinking("hmm", "sig"),
                ContentBlock::text(""),
            ])],
        );
        add_cache_markers(&mut r);
        assert_eq!(markers(&r), vec!["/messages/0/content/0"]);
    }

    #[test]
    fn the_last_cleared_tool_result_gets_the_fourth_marker() {
        let round = |id: &str, result: &str| {
            [
                Message::assistant(vec![ContentBlock::tool_use(id, "Read", json!({}))]),
                Message::user(vec![ContentBlock::tool_result(id, result, false)]),
            ]
        };
        let mut messages = vec![Message::user_text("read them")];
        messages.extend(round("t1", CLEARED_TOOL_RESULT));
        messages.extend(round("t2", CLEARED_TOOL_RESULT));
        messages.extend(round("t3", "fn main() {}"));
        let mut r = MessagesRequest::new("m", 1000, messages);
        r.system = vec![SystemBlock::text("one")];
        r.tools = vec![tool("Read")];
        add_cache_markers(&mut r);
        assert_eq!(
            markers(&r),
            [
                "/messages/4/content/0",
                "/messages/6/content/0",
                "/system/0",
                "/tools/0"
            ]
        );
        // When the last message holds a cleared result, the one before it gets the marker.
        r.messages.truncate(5);
        add_cache_markers(&mut r);
        assert_eq!(
            markers(&r),
            [
                "/messages/2/content/0",
                "/messages/4/content/0",
                "/system/0",
                "/tools/0"
            ]
        );
    }

    #[test]
    fn empty_request_is_left_alone() {
        let mut r = MessagesRequest::new("m", 1000, vec![]);
        add_cache_markers(&mut r);
        assert!(markers(&r).is_empty());
    }
}
