//! Phases 1 and 2: the compaction pipeline, then the request (`stream_request_start`).

use std::ops::ControlFlow;
use std::sync::Arc;

use gyre_api::add_cache_markers;
use gyre_protocol::{Message, MessagesRequest};

use super::{INTERRUPT_MESSAGE, Phase, QueryRun, Step};
use crate::event::LoopEvent;
use crate::state::TerminalReason;

const BLOCKING_LIMIT_ERROR: &str = "Context limit reached: the conversation is too long to continue. Run /compact or start a new session.";

impl QueryRun<'_> {
    /// Phase 1: the messages to send this iteration, after the compaction pipeline.
    /// Ends the query when interrupted while compacting or past the blocking limit; a
    /// failed compaction sends the history as it is.
    pub(super) async fn prepare_context(&mut self) -> Phase<Vec<Message>> {
        let prepared = {
            let mut c = self.compactor.lock().await;
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => None,
                p = c.prepare(self.conversation().messages(), self.conversation().anchor()) => Some(p),
            }
        };
        let Some(prepared) = prepared else {
            // Interrupted while compacting (the summary request is dropped with it).
            self.push_message(Message::user_text(INTERRUPT_MESSAGE), true)
                .await;
            return ControlFlow::Break(Step::interrupted(TerminalReason::AbortedStreaming));
        };
        match prepared {
            Ok(p) => {
                if let Some(history) = p.history {
                    self.conversation_mut().replace_history(history.clone());
                    self.emit(LoopEvent::HistoryReplaced(history)).await;
                }
                if let Some(outcome) = p.compacted {
                    self.emit(LoopEvent::Compacted(outcome)).await;
                }
                if p.at_blocking_limit {
                    return ControlFlow::Break(Step::terminal(
                        TerminalReason::BlockingLimit,
                        BLOCKING_LIMIT_ERROR.to_owned(),
                    ));
                }
                ControlFlow::Continue(p.messages)
            }
            Err(e) => {
                tracing::warn!(error = %e, "compaction failed; sending the history as it is");
                ControlFlow::Continue(self.conversation().messages().to_vec())
            }
        }
    }

    /// Phase 2: the request, built once and shared with every attempt (retries and a
    /// fallback included): the history is not copied per attempt.
    pub(super) fn request(&self, messages: Vec<Message>) -> Arc<MessagesRequest> {
        let mut r = MessagesRequest::new(
            self.conversation().model().to_owned(),
            self.max_tokens(),
            messages,
        );
        r.system.clone_from(&self.system);
        r.tools.clone_from(&self.tool_definitions);
        add_cache_markers(&mut r);
        Arc::new(r)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gyre_protocol::Message;

    use super::super::emit::run_phase;
    use super::super::{QueryRun, Step};
    use super::*;
    use crate::compaction::{CompactionError, CompactionOutcome, PreparedContext};
    use crate::testing::{FakeCompactor, FakeModel, params, params_with};
    use gyre_compact::UsageAnchor;

    fn prepared(prepared: Result<PreparedContext, CompactionError>) -> FakeCompactor {
        FakeCompactor {
            prepared: Some(prepared),
            ..FakeCompactor::default()
        }
    }

    fn ended(flow: Phase<Vec<Message>>) -> (TerminalReason, Option<String>) {
        match flow {
            ControlFlow::Break(Step::Terminal { reason, error }) => (reason, error),
            other => panic!("expected a terminal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn an_untouched_history_is_sent_as_it_is_and_nothing_is_emitted() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (events, flow) = run_phase(&emitter, run.prepare_context()).await;
        assert!(events.is_empty());
        assert_eq!(
            flow,
            ControlFlow::Continue(run.conversation().messages().to_vec())
        );
    }

    #[tokio::test]
    async fn a_replaced_history_is_kept_emitted_and_forgets_the_anchor() {
        let history = vec![Message::user_text("summary")];
        let compactor = prepared(Ok(PreparedContext {
            messages: history.clone(),
            history: Some(history.clone()),
            compacted: Some(CompactionOutcome {
                trigger: gyre_compact::Trigger::Auto,
                pre_tokens: 10,
                post_tokens: 2,
            }),
            at_blocking_limit: false,
        }));
        let mut p = params_with(FakeModel::new([]), Box::new(compactor));
        p.conversation = p.conversation.with_anchor(UsageAnchor {
            message_index: 0,
            usage: gyre_protocol::Usage::default(),
        });
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (events, flow) = run_phase(&emitter, run.prepare_context()).await;
        assert_eq!(flow, ControlFlow::Continue(history.clone()));
        assert_eq!(run.conversation().messages(), history);
        assert_eq!(run.conversation().anchor(), None);
        assert!(matches!(
            events.as_slice(),
            [LoopEvent::HistoryReplaced(h), LoopEvent::Compacted(_)] if *h == history
        ));
    }

    #[tokio::test]
    async fn past_the_blocking_limit_the_query_ends() {
        let compactor = prepared(Ok(PreparedContext {
            at_blocking_limit: true,
            ..PreparedContext::default()
        }));
        let p = params_with(FakeModel::new([]), Box::new(compactor));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (_, flow) = run_phase(&emitter, run.prepare_context()).await;
        let (reason, error) = ended(flow);
        assert_eq!(reason, TerminalReason::BlockingLimit);
        assert!(error.unwrap().contains("/compact"));
    }

    #[tokio::test]
    async fn a_failed_compaction_sends_the_history_as_it_is() {
        let p = params_with(
            FakeModel::new([]),
            Box::new(prepared(Err("summarizer down".into()))),
        );
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (_, flow) = run_phase(&emitter, run.prepare_context()).await;
        assert_eq!(
            flow,
            ControlFlow::Continue(run.conversation().messages().to_vec())
        );
    }

    #[tokio::test]
    async fn an_interrupt_while_compacting_says_so_and_ends_the_query() {
        let p = params(FakeModel::new([]));
        p.cancel.cancel();
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (events, flow) = run_phase(&emitter, run.prepare_context()).await;
        assert_eq!(ended(flow).0, TerminalReason::AbortedStreaming);
        assert_eq!(
            run.conversation()
                .messages()
                .last()
                .map(Message::text)
                .as_deref(),
            Some(INTERRUPT_MESSAGE)
        );
        assert!(matches!(
            events.as_slice(),
            [LoopEvent::Message { is_meta: true, .. }]
        ));
    }

    #[test]
    fn the_request_carries_the_model_limit_system_and_tools() {
        let mut p = params(FakeModel::new([]));
        p.system = vec![gyre_protocol::SystemBlock::text("be brief")];
        let run = QueryRun::new(p);
        let request = run.request(vec![Message::user_text("hi")]);
        assert_eq!(request.model, run.conversation().model());
        assert_eq!(request.max_tokens, super::super::DEFAULT_MAX_OUTPUT_TOKENS);
        assert_eq!(request.system[0].text, "be brief");
        assert_eq!(request.tools.len(), run.tools.definitions().len());
        assert_eq!(Arc::strong_count(&request), 1);
    }
}
