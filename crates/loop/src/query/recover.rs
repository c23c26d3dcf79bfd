//! Phase 5, recovery: the errors the loop withholds and recovers from before anyone
//! sees them (prompt too long, the max_output_tokens stop), and the end of the query for
//! the rest.

use std::ops::ControlFlow;

use gyre_api::ApiError;
use gyre_compact::Trigger;
use gyre_protocol::{AssistantResponse, ContentBlock, Message, StopReason};
use gyre_tools::StreamingToolExecutor;

use super::stream::Attempt;
use super::{
    ESCALATED_MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS_RECOVERY_LIMIT,
    MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE, Phase, QueryRun, Step,
};
use crate::event::LoopEvent;
use crate::state::{State, TerminalReason, Transition};

impl QueryRun<'_> {
    /// A response goes on; a failed attempt ends the iteration, recovered or not.
    pub(super) async fn recover_from_failure(
        &mut self,
        attempt: Attempt,
        executor: &StreamingToolExecutor,
    ) -> Phase<AssistantResponse> {
        match attempt {
            Attempt::Response(response) => ControlFlow::Continue(response),
            Attempt::Failed(error) => {
                tracing::debug!(error = %error, "model request failed");
                executor.discard();
                ControlFlow::Break(self.recover_from_error(error).await)
            }
        }
    }

    async fn recover_from_error(&mut self, error: ApiError) -> Step {
        if error.is_prompt_too_long() {
            return self.recover_from_prompt_too_long(&error.to_string()).await;
        }
        let reason = if is_image_error(&error) {
            TerminalReason::ImageError
        } else {
            TerminalReason::ModelError
        };
        Step::terminal(reason, error.to_string())
    }

    /// Prompt too long, withheld: commit the staged collapses (once in a row), else
    /// compact reactively (once per turn), else end. `cause` opens the terminal error.
    async fn recover_from_prompt_too_long(&mut self, cause: &str) -> Step {
        let drained = self.state.transition != Some(Transition::CollapseDrainRetry)
            && self.compactor.lock().await.recover_from_overflow();
        if drained {
            return Step::Continue {
                state: self.take_state(),
                transition: Transition::CollapseDrainRetry,
            };
        }
        if !self.state.has_attempted_reactive_compact {
            let compacted = {
                let mut c = self.compactor.lock().await;
                tokio::select! {
                    biased;
                    () = self.cancel.cancelled() => Ok(None),
                    r = c.compact_now(self.conversation().messages(), Trigger::Reactive) => r,
                }
            };
            if let Ok(Some((history, outcome))) = compacted {
                self.conversation_mut().replace_history(history.clone());
                self.emit(LoopEvent::HistoryReplaced(history)).await;
                self.emit(LoopEvent::Compacted(outcome)).await;
                return Step::Continue {
                    state: State {
                        has_attempted_reactive_compact: true,
                        ..self.take_state()
                    },
                    transition: Transition::ReactiveCompactRetry,
                };
            }
        }
        Step::terminal(
            TerminalReason::PromptTooLong,
            format!(
                "{cause} The conversation is too long for the model's context window even after compaction; start a new session or run /compact with fewer files in view."
            ),
        )
    }

    /// A `model_context_window_exceeded` stop: the response filled what was left of the
    /// window. Withheld and recovered from like prompt-too-long: its tools never run and
    /// the same request goes again once the context is smaller.
    pub(super) async fn recover_from_context_window_exceeded(
        &mut self,
        response: &AssistantResponse,
        executor: &StreamingToolExecutor,
    ) -> Phase<()> {
        if response.stop_reason != Some(StopReason::ModelContextWindowExceeded) {
            return ControlFlow::Continue(());
        }
        executor.discard();
        ControlFlow::Break(
            self.recover_from_prompt_too_long(
                "The response stopped at the end of the model's context window (model_context_window_exceeded).",
            )
            .await,
        )
    }

    /// A max_tokens stop, withheld: retry silently at the escalated limit the first
    /// time, then keep what was written and ask the model to resume, up to the limit.
    pub(super) async fn recover_from_max_tokens(
        &mut self,
        response: &AssistantResponse,
        executor: &StreamingToolExecutor,
    ) -> Phase<()> {
        if response.stop_reason != Some(StopReason::MaxTokens) {
            return ControlFlow::Continue(());
        }
        // Tools of a cut response may be incomplete: never run them.
        executor.discard();
        if self.max_output_tokens.is_none() && self.state.max_output_tokens_override.is_none() {
            return ControlFlow::Break(Step::Continue {
                state: State {
                    max_output_tokens_override: Some(ESCALATED_MAX_OUTPUT_TOKENS),
                    ..self.take_state()
                },
                transition: Transition::MaxOutputTokensEscalate,
            });
        }
        let mut cut = response.to_message();
        cut.content
            .retain(|b| !matches!(b, ContentBlock::ToolUse { .. }));
        if cut.content.is_empty() {
            cut.content
                .push(ContentBlock::text("(output cut at the token limit)"));
        }
        self.push_response(cut, response).await;
        if self.state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT {
            let attempt = self.state.max_output_tokens_recovery_count + 1;
            self.push_message(Message::user_text(MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE), true)
                .await;
            return ControlFlow::Break(Step::Continue {
                state: State {
                    max_output_tokens_recovery_count: attempt,
                    ..self.take_state()
                },
                transition: Transition::MaxOutputTokensRecovery { attempt },
            });
        }
        let limit = self.max_tokens();
        ControlFlow::Break(Step::terminal(
            TerminalReason::ModelError,
            format!(
                "The model's response exceeded the {limit} output token maximum {MAX_OUTPUT_TOKENS_RECOVERY_LIMIT} times in a row. Ask for the work in smaller pieces, or set GYRE_MAX_OUTPUT_TOKENS higher."
            ),
        ))
    }
}

/// An image the API could not take (too large, bad format): the query ends with
/// [`TerminalReason::ImageError`].
fn is_image_error(error: &ApiError) -> bool {
    match error {
        ApiError::InvalidRequest { message, .. } | ApiError::RequestTooLarge { message, .. } => {
            message.to_ascii_lowercase().contains("image")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {

    use super::super::emit::run_phase;
    use super::*;
    use crate::testing::{
        FakeCompactor, FakeModel, Reply, params, params_with, prompt_too_long_error, response,
    };

    fn cut_response(text: &str) -> AssistantResponse {
        match response(vec![ContentBlock::text(text)], StopReason::MaxTokens) {
            Reply::Response(r) => r,
            other => panic!("not a response: {other:?}"),
        }
    }

    fn continued(step: &Step) -> Option<Transition> {
        match step {
            Step::Continue { transition, .. } => Some(*transition),
            Step::Terminal { .. } => None,
        }
    }

    #[tokio::test]
    async fn prompt_too_long_drains_staged_collapses_but_not_twice_in_a_row() {
        let compactor = FakeCompactor {
            drain_available: true,
            ..FakeCompactor::default()
        };
        let p = params_with(FakeModel::new([]), Box::new(compactor));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (_, step) = run_phase(&emitter, run.recover_from_error(prompt_too_long_error())).await;
        assert_eq!(continued(&step), Some(Transition::CollapseDrainRetry));
        let Step::Continue { state, .. } = step else {
            unreachable!()
        };
        run.state = State {
            transition: Some(Transition::CollapseDrainRetry),
            ..state
        };
        let (_, step) = run_phase(&emitter, run.recover_from_error(prompt_too_long_error())).await;
        assert!(
            matches!(
                step,
                Step::Terminal {
                    reason: TerminalReason::PromptTooLong,
                    ..
                }
            ),
            "{step:?}"
        );
    }

    #[tokio::test]
    async fn prompt_too_long_compacts_reactively_once_per_turn() {
        let compactor = FakeCompactor {
            can_compact: true,
            ..FakeCompactor::default()
        };
        let p = params_with(FakeModel::new([]), Box::new(compactor));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (events, step) =
            run_phase(&emitter, run.recover_from_error(prompt_too_long_error())).await;
        let Step::Continue { state, transition } = step else {
            panic!("{step:?}")
        };
        assert_eq!(transition, Transition::ReactiveCompactRetry);
        assert!(state.has_attempted_reactive_compact);
        assert_eq!(
            run.conversation().messages()[0].text(),
            "Summary of the conversation so far."
        );
        assert!(matches!(
            events.as_slice(),
            [LoopEvent::HistoryReplaced(_), LoopEvent::Compacted(o)] if o.trigger == Trigger::Reactive
        ));
        run.state = state;
        let (_, step) = run_phase(&emitter, run.recover_from_error(prompt_too_long_error())).await;
        assert!(matches!(
            step,
            Step::Terminal {
                reason: TerminalReason::PromptTooLong,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn other_errors_end_the_query_as_model_or_image_errors() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let image = ApiError::InvalidRequest {
            message: "Image exceeds 5 MB".into(),
            hints: Default::default(),
        };
        let (_, step) = run_phase(&emitter, run.recover_from_error(image)).await;
        assert!(matches!(
            step,
            Step::Terminal {
                reason: TerminalReason::ImageError,
                ..
            }
        ));
        let other = ApiError::InvalidResponse {
            message: "bad".into(),
        };
        let (_, step) = run_phase(&emitter, run.recover_from_error(other)).await;
        assert!(matches!(
            step,
            Step::Terminal {
                reason: TerminalReason::ModelError,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn the_first_max_tokens_stop_escalates_silently() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let emitter = run.events.clone();
        let (events, flow) = run_phase(
            &emitter,
            run.recover_from_max_tokens(&cut_response("part"), &executor),
        )
        .await;
        assert!(events.is_empty(), "the cut response is withheld");
        let ControlFlow::Break(Step::Continue { state, transition }) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(transition, Transition::MaxOutputTokensEscalate);
        assert_eq!(
            state.max_output_tokens_override,
            Some(ESCALATED_MAX_OUTPUT_TOKENS)
        );
    }

    #[tokio::test]
    async fn later_max_tokens_stops_keep_the_text_and_ask_to_resume_up_to_the_limit() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        run.state.max_output_tokens_override = Some(ESCALATED_MAX_OUTPUT_TOKENS);
        let executor = run.executor();
        let emitter = run.events.clone();
        let (events, flow) = run_phase(
            &emitter,
            run.recover_from_max_tokens(&cut_response("part 1"), &executor),
        )
        .await;
        assert_eq!(events.len(), 2);
        let ControlFlow::Break(Step::Continue { state, transition }) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(
            transition,
            Transition::MaxOutputTokensRecovery { attempt: 1 }
        );
        let messages = run.conversation().messages();
        assert_eq!(messages[1].text(), "part 1");
        assert_eq!(messages[2].text(), MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE);
        run.state = State {
            max_output_tokens_recovery_count: MAX_OUTPUT_TOKENS_RECOVERY_LIMIT,
            ..state
        };
        let (_, flow) = run_phase(
            &emitter,
            run.recover_from_max_tokens(&cut_response("part 4"), &executor),
        )
        .await;
        let ControlFlow::Break(Step::Terminal { reason, error }) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(reason, TerminalReason::ModelError);
        assert!(
            error
                .unwrap()
                .contains("64000 output token maximum 3 times")
        );
    }

    #[tokio::test]
    async fn a_context_window_exceeded_stop_is_withheld_and_recovered_like_prompt_too_long() {
        let compactor = FakeCompactor {
            drain_available: true,
            ..FakeCompactor::default()
        };
        let p = params_with(FakeModel::new([]), Box::new(compactor));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let Reply::Response(full) = response(
            vec![ContentBlock::text("half")],
            StopReason::ModelContextWindowExceeded,
        ) else {
            unreachable!()
        };
        let emitter = run.events.clone();
        let (events, flow) = run_phase(
            &emitter,
            run.recover_from_context_window_exceeded(&full, &executor),
        )
        .await;
        assert!(events.is_empty(), "withheld");
        let ControlFlow::Break(Step::Continue { transition, .. }) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(transition, Transition::CollapseDrainRetry);
    }

    #[tokio::test]
    async fn other_stop_reasons_go_on() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let Reply::Response(done) = response(vec![ContentBlock::text("ok")], StopReason::EndTurn)
        else {
            unreachable!()
        };
        let emitter = run.events.clone();
        let (_, flow) = run_phase(&emitter, run.recover_from_max_tokens(&done, &executor)).await;
        assert_eq!(flow, ControlFlow::Continue(()));
    }
}
