//! The transcript of a conversation: every message as it joins, and compaction
//! boundaries with the history after them, each line linked to the one before, in the
//! reference CLI's line layout.

use std::collections::HashMap;
use std::path::Path;

use gyre_protocol::{ContentBlock, Message, Role};
use serde_json::{Value, json};

use crate::agents::is_agent_tool;
use crate::compaction::CompactionOutcome;
use crate::deps::QueryDeps;
use crate::transcript::{
    CompactMetadata, ResponseInfo, TranscriptEntry, TranscriptMessage, TranscriptStore, USER_TYPE,
    VERSION, git_branch, timestamp,
};

/// Writes a conversation's transcript lines, chained by `parent_uuid`.
pub(crate) struct Recorder {
    store: Box<dyn TranscriptStore>,
    session_id: String,
    cwd: String,
    /// Read at the first line (not at start-up), then kept.
    git_branch: Option<Option<String>>,
    /// On a sub-agent's recorder: its id, and every line is a sidechain line.
    agent_id: Option<String>,
    last_uuid: Option<String>,
    /// The first line carries the model; later ones do not.
    wrote_header: bool,
    /// The response whose assistant message is written next.
    response: Option<ResponseInfo>,
    /// The Agent calls of the last assistant message, by id: their results name the
    /// sub-agent.
    spawns: HashMap<String, Value>,
    /// The uuid the next line takes (a prompt the SDK named), instead of a fresh one.
    next_uuid: Option<String>,
}

impl Recorder {
    pub(crate) fn new(store: Box<dyn TranscriptStore>, session_id: &str, cwd: &Path) -> Self {
        Self {
            store,
            session_id: session_id.to_owned(),
            cwd: cwd.to_string_lossy().into_owned(),
            git_branch: None,
            agent_id: None,
            last_uuid: None,
            wrote_header: false,
            response: None,
            spawns: HashMap::new(),
            next_uuid: None,
        }
    }

    /// The next line takes `uuid` (an SDK's own id of the prompt it sent).
    pub(crate) fn name_next(&mut self, uuid: String) {
        self.next_uuid = Some(uuid);
    }

    /// A recorder of the sub-agent `agent_id`: its lines are sidechain lines.
    pub(crate) fn sidechain(mut self, agent_id: &str) -> Self {
        self.agent_id = Some(agent_id.to_owned());
        self
    }

    /// Goes on from an earlier transcript whose last line is `last_uuid`.
    pub(super) fn resume(&mut self, last_uuid: Option<String>) {
        self.last_uuid = last_uuid;
        self.wrote_header = true;
    }

    /// The next assistant message comes from this response: its line carries the
    /// response's id, model, stop reason and usage.
    pub(crate) fn response(&mut self, response: ResponseInfo) {
        self.response = Some(response);
    }

    /// A line with the fields every line has.
    fn line(&mut self, deps: &dyn QueryDeps, kind: &str) -> TranscriptEntry {
        let cwd = &self.cwd;
        let branch = self
            .git_branch
            .get_or_insert_with(|| git_branch(Path::new(cwd)))
            .clone();
        TranscriptEntry {
            parent_uuid: self.last_uuid.clone(),
            is_sidechain: self.agent_id.is_some(),
            user_type: Some(USER_TYPE.to_owned()),
            cwd: Some(self.cwd.clone()),
            session_id: self.session_id.clone(),
            version: Some(VERSION.to_owned()),
            git_branch: branch,
            agent_id: self.agent_id.clone(),
            kind: kind.to_owned(),
            subtype: None,
            message: None,
            request_id: None,
            uuid: self.next_uuid.take().unwrap_or_else(|| deps.uuid()),
            timestamp: timestamp(deps.now()),
            is_meta: false,
            tool_use_result: None,
            content: None,
            level: None,
            logical_parent_uuid: None,
            compact_metadata: None,
            history: None,
            is_compact_summary: false,
            is_api_error_message: false,
            model: None,
            rewound_to: None,
        }
    }

    /// Writes `message`; returns the uuid of its line. The first line names `model`.
    pub(crate) fn message(
        &mut self,
        deps: &dyn QueryDeps,
        message: &Message,
        is_meta: bool,
        model: &str,
    ) -> String {
        // A response's fields belong to the assistant message that follows them, and
        // to no later one (a response the loop withheld is never written).
        let response = self.response.take();
        let mut request_id = None;
        let (kind, body, tool_use_result) = match message.role {
            Role::User => (
                "user",
                TranscriptMessage::plain(message.clone()),
                self.tool_use_result(message),
            ),
            Role::Assistant => {
                self.spawns = spawns(message);
                request_id = response.as_ref().and_then(|r| r.request_id.clone());
                let body = match &response {
                    Some(r) => TranscriptMessage::response(message.clone(), r),
                    None => TranscriptMessage::plain(message.clone()),
                };
                ("assistant", body, None)
            }
        };
        let mut entry = self.line(deps, kind);
        entry.message = Some(body);
        entry.is_meta = is_meta;
        entry.tool_use_result = tool_use_result;
        entry.request_id = request_id;
        entry.model = (!self.wrote_header).then(|| model.to_owned());
        self.wrote_header = true;
        let uuid = entry.uuid.clone();
        self.append(&entry);
        uuid
    }

    /// Writes a `compact_boundary` line with the history that now starts the
    /// conversation. As the reference CLI's, it starts a new chain and names the line
    /// it went on from.
    pub(super) fn boundary(
        &mut self,
        deps: &dyn QueryDeps,
        outcome: &CompactionOutcome,
        history: &[Message],
    ) {
        let mut entry = self.line(deps, "system");
        entry.logical_parent_uuid = entry.parent_uuid.take();
        entry.subtype = Some("compact_boundary".to_owned());
        entry.content = Some("Conversation compacted".to_owned());
        entry.level = Some("info".to_owned());
        entry.compact_metadata = Some(CompactMetadata::from(outcome));
        entry.history = Some(history.to_vec());
        self.append(&entry);
    }

    /// Writes a `rewind` line: the conversation went back to before the prompt
    /// `rewound_to` (`text`), and `history` is what it holds now. Like a compaction
    /// boundary, the line carries the whole history, so a kill never leaves half a
    /// rewind; it goes on from the line before it.
    /// The conversation's system prompt, recorded so a resume sends it again.
    pub(super) fn system_prompt(&mut self, deps: &dyn QueryDeps, text: &str) {
        let mut entry = self.line(deps, "system");
        entry.subtype = Some(crate::transcript::SYSTEM_PROMPT_SUBTYPE.to_owned());
        entry.content = Some(text.to_owned());
        entry.level = Some("info".to_owned());
        self.append(&entry);
    }

    pub(super) fn rewind(
        &mut self,
        deps: &dyn QueryDeps,
        rewound_to: &str,
        text: &str,
        history: &[Message],
    ) {
        let mut entry = self.line(deps, "system");
        entry.subtype = Some(crate::transcript::REWIND_SUBTYPE.to_owned());
        entry.content = Some(format!("Conversation rewound to before: {text}"));
        entry.level = Some("info".to_owned());
        entry.rewound_to = Some(rewound_to.to_owned());
        entry.history = Some(history.to_vec());
        self.append(&entry);
    }

    /// What the tools of a user line of tool results returned: each result's text, or
    /// for a sub-agent the reference's record of it (status, agent id, prompt, answer).
    fn tool_use_result(&self, message: &Message) -> Option<Value> {
        let results: Vec<Value> = message
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    ..
                } => Some(match self.spawns.get(tool_use_id) {
                    Some(prompt) => json!({
                        "status": if *is_error { "failed" } else { "completed" },
                        "agentId": tool_use_id,
                        "prompt": prompt,
                        "content": [{"type": "text", "text": content.text()}],
                    }),
                    None => Value::String(content.text()),
                }),
                _ => None,
            })
            .collect();
        match results.len() {
            0 => None,
            1 => results.into_iter().next(),
            _ => Some(Value::Array(results)),
        }
    }

    /// A line that cannot be written is logged; the conversation goes on.
    fn append(&mut self, entry: &TranscriptEntry) {
        if let Err(e) = self.store.append(entry) {
            tracing::error!(error = %e, "could not write the transcript");
        }
        self.last_uuid = Some(entry.uuid.clone());
    }
}

/// The Agent calls of an assistant message: id to prompt.
fn spawns(message: &Message) -> HashMap<String, Value> {
    message
        .tool_uses()
        .filter(|(_, name, _)| is_agent_tool(name))
        .map(|(id, _, input)| {
            let prompt = input.get("prompt").cloned().unwrap_or(Value::Null);
            (id.to_owned(), prompt)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use gyre_compact::Trigger;

    use super::*;
    use crate::deps::ModelStream;
    use crate::transcript::ResponseInfo;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<TranscriptEntry>>>);

    impl TranscriptStore for Shared {
        fn append(&mut self, entry: &TranscriptEntry) -> std::io::Result<()> {
            self.0.lock().unwrap().push(entry.clone());
            Ok(())
        }
    }

    struct Broken;

    impl TranscriptStore for Broken {
        fn append(&mut self, _entry: &TranscriptEntry) -> std::io::Result<()> {
            Err(std::io::Error::other("disk full"))
        }
    }

    /// Numbered uuids; no model.
    #[derive(Default)]
    struct Ids(Mutex<u32>);

    impl QueryDeps for Ids {
        fn call_model(
            &self,
            _request: &mut Arc<gyre_protocol::MessagesRequest>,
            _fallback_model: Option<String>,
            _cancel: tokio_util::sync::CancellationToken,
        ) -> ModelStream {
            Box::pin(futures::stream::empty())
        }
        fn uuid(&self) -> String {
            let mut n = self.0.lock().unwrap();
            *n += 1;
            format!("u{n}")
        }
    }

    #[test]
    fn lines_chain_by_parent_a_boundary_starts_a_new_chain_and_only_the_first_names_the_model() {
        let store = Shared::default();
        let mut recorder = Recorder::new(Box::new(store.clone()), "s1", Path::new("/p"));
        let deps = Ids::default();
        recorder.message(&deps, &Message::user_text("hi"), false, "m1");
        let outcome = CompactionOutcome {
            trigger: Trigger::Manual,
            pre_tokens: 9,
            post_tokens: 1,
        };
        recorder.boundary(&deps, &outcome, &[Message::user_text("summary")]);
        recorder.message(&deps, &Message::assistant(vec![]), true, "m1");
        let entries = store.0.lock().unwrap().clone();
        let links: Vec<(&str, Option<&str>)> = entries
            .iter()
            .map(|e| (e.uuid.as_str(), e.parent_uuid.as_deref()))
            .collect();
        assert_eq!(links, [("u1", None), ("u2", None), ("u3", Some("u2"))]);
        assert_eq!(entries[1].logical_parent_uuid.as_deref(), Some("u1"));
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["user", "system", "assistant"]);
        assert_eq!(entries[0].model.as_deref(), Some("m1"));
        assert_eq!(entries[2].model, None);
        assert!(entries[2].is_meta);
        assert_eq!(entries[1].history.as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn lines_carry_the_reference_fields_and_the_response_goes_to_the_next_assistant_line() {
        let store = Shared::default();
        let mut recorder = Recorder::new(Box::new(store.clone()), "s1", Path::new("/p"));
        let deps = Ids::default();
        let usage = gyre_protocol::Usage {
            input_tokens: 7,
            output_tokens: 3,
            ..gyre_protocol::Usage::default()
        };
        recorder.response(ResponseInfo {
            id: "msg_1".into(),
            request_id: Some("req_1".into()),
            model: "claude-x".into(),
            stop_reason: Some(gyre_protocol::StopReason::ToolUse),
            usage,
        });
        let call = ContentBlock::tool_use("toolu_1", "Agent", json!({"prompt": "look"}));
        recorder.message(&deps, &Message::assistant(vec![call]), false, "m");
        let result = ContentBlock::tool_result("toolu_1", "found it", false);
        recorder.message(&deps, &Message::user(vec![result]), false, "m");
        // No response before it: a plain message.
        recorder.message(&deps, &Message::assistant(vec![]), false, "m");
        let lines: Vec<Value> = store
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .collect();
        for line in &lines {
            assert_eq!(line["isSidechain"], false);
            assert_eq!(line["userType"], "external");
            assert_eq!(line["version"], crate::transcript::VERSION);
            assert_eq!(line["cwd"], "/p");
        }
        let first = &lines[0]["message"];
        assert_eq!(first["id"], "msg_1");
        assert_eq!(first["type"], "message");
        assert_eq!(first["model"], "claude-x");
        assert_eq!(first["stop_reason"], "tool_use");
        assert_eq!(first["usage"]["input_tokens"], 7);
        assert_eq!(lines[0]["requestId"], "req_1");
        assert_eq!(
            lines[1]["toolUseResult"],
            json!({"status": "completed", "agentId": "toolu_1", "prompt": "look",
                   "content": [{"type": "text", "text": "found it"}]})
        );
        assert!(lines[2]["message"].get("usage").is_none());
    }

    #[test]
    fn a_sub_agents_lines_are_sidechain_lines_naming_it() {
        let store = Shared::default();
        let mut recorder =
            Recorder::new(Box::new(store.clone()), "s1", Path::new("/p")).sidechain("toolu_9");
        recorder.message(&Ids::default(), &Message::user_text("task"), false, "m");
        let entries = store.0.lock().unwrap().clone();
        assert!(entries[0].is_sidechain);
        assert_eq!(entries[0].agent_id.as_deref(), Some("toolu_9"));
    }

    #[test]
    fn a_resumed_transcript_goes_on_from_its_last_line_without_a_header() {
        let store = Shared::default();
        let mut recorder = Recorder::new(Box::new(store.clone()), "s1", Path::new("/p"));
        recorder.resume(Some("old".into()));
        recorder.message(&Ids::default(), &Message::user_text("again"), false, "m1");
        let entries = store.0.lock().unwrap().clone();
        assert_eq!(entries[0].parent_uuid.as_deref(), Some("old"));
        assert_eq!(entries[0].model, None);
    }

    #[test]
    fn a_line_that_cannot_be_written_still_moves_the_chain_on() {
        let mut recorder = Recorder::new(Box::new(Broken), "s1", Path::new("/p"));
        let uuid = recorder.message(&Ids::default(), &Message::user_text("hi"), false, "m");
        assert_eq!(recorder.last_uuid.as_deref(), Some(uuid.as_str()));
    }
}
