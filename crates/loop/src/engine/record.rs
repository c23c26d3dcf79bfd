//! The transcript of a conversation: every message as it joins, and compaction
//! boundaries with the history after them, each line linked to the one before.

use std::path::Path;

use gyre_protocol::{Message, Role};

use crate::compaction::CompactionOutcome;
use crate::deps::QueryDeps;
use crate::transcript::{TranscriptEntry, TranscriptStore, timestamp};

/// Writes a conversation's transcript lines, chained by `parent_uuid`.
pub(crate) struct Recorder {
    store: Box<dyn TranscriptStore>,
    session_id: String,
    cwd: String,
    last_uuid: Option<String>,
    /// The first line carries the model; later ones do not.
    wrote_header: bool,
}

impl Recorder {
    pub(crate) fn new(store: Box<dyn TranscriptStore>, session_id: &str, cwd: &Path) -> Self {
        Self {
            store,
            session_id: session_id.to_owned(),
            cwd: cwd.to_string_lossy().into_owned(),
            last_uuid: None,
            wrote_header: false,
        }
    }

    /// Goes on from an earlier transcript whose last line is `last_uuid`.
    pub(super) fn resume(&mut self, last_uuid: Option<String>) {
        self.last_uuid = last_uuid;
        self.wrote_header = true;
    }

    /// Writes `message`; returns the uuid of its line. The first line names `model`.
    pub(crate) fn message(
        &mut self,
        deps: &dyn QueryDeps,
        message: &Message,
        is_meta: bool,
        model: &str,
    ) -> String {
        let kind = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let uuid = deps.uuid();
        let entry = TranscriptEntry {
            kind: kind.to_owned(),
            subtype: None,
            uuid: uuid.clone(),
            parent_uuid: self.last_uuid.clone(),
            session_id: self.session_id.clone(),
            timestamp: timestamp(deps.now()),
            cwd: Some(self.cwd.clone()),
            is_meta,
            message: Some(message.clone()),
            compact_metadata: None,
            history: None,
            model: (!self.wrote_header).then(|| model.to_owned()),
        };
        self.wrote_header = true;
        self.append(&entry);
        uuid
    }

    /// Writes a `compact_boundary` line with the history that now starts the conversation.
    pub(super) fn boundary(
        &mut self,
        deps: &dyn QueryDeps,
        outcome: &CompactionOutcome,
        history: &[Message],
    ) {
        let entry = TranscriptEntry {
            kind: "system".to_owned(),
            subtype: Some("compact_boundary".to_owned()),
            uuid: deps.uuid(),
            parent_uuid: self.last_uuid.clone(),
            session_id: self.session_id.clone(),
            timestamp: timestamp(deps.now()),
            cwd: None,
            is_meta: false,
            message: None,
            compact_metadata: Some(outcome.clone()),
            history: Some(history.to_vec()),
            model: None,
        };
        self.append(&entry);
    }

    /// A line that cannot be written is logged; the conversation goes on.
    fn append(&mut self, entry: &TranscriptEntry) {
        if let Err(e) = self.store.append(entry) {
            tracing::error!(error = %e, "could not write the transcript");
        }
        self.last_uuid = Some(entry.uuid.clone());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use gyre_compact::Trigger;

    use super::*;
    use crate::deps::ModelStream;

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
    fn lines_chain_by_parent_and_only_the_first_names_the_model() {
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
        assert_eq!(
            links,
            [("u1", None), ("u2", Some("u1")), ("u3", Some("u2"))]
        );
        let kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["user", "system", "assistant"]);
        assert_eq!(entries[0].model.as_deref(), Some("m1"));
        assert_eq!(entries[2].model, None);
        assert!(entries[2].is_meta);
        assert_eq!(entries[1].history.as_ref().map(Vec::len), Some(1));
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
