//! Phase 5, no tool calls: the model is done unless the server paused the turn, or a
//! stop hook or the token budget sends it on. A refusal ends the query at once.

use std::ops::ControlFlow;

use gyre_protocol::{AssistantResponse, ContentBlock, Message, StopReason};
use gyre_tools::StreamingToolExecutor;

use super::{Phase, QueryRun, Step};
use crate::hooks::StopHookOutcome;
use crate::state::{State, TerminalReason, Transition};

/// Token-budget nudges stop once this share of the budget (90%) is spent.
const TOKEN_BUDGET_COMPLETION: f64 = 0.9;
/// Two continuations under this many output tokens each are diminishing returns.
const DIMINISHING_RETURNS_TOKENS: u64 = 500;
/// What a refused response says when the model wrote nothing.
pub const REFUSAL_MESSAGE: &str = "The model declined to respond to this request (stop reason: refusal). Rephrase the request or start a new session.";

impl QueryRun<'_> {
    /// A `refusal` stop ends the query cleanly (`completed`): what the model wrote joins
    /// the history and is the turn's result, with [`REFUSAL_MESSAGE`] when it wrote
    /// nothing. Its tool calls never run and are dropped, so the history stays paired.
    /// Stop hooks and the token budget do not run: nudging a refusal on goes nowhere
    /// (Claude Code likewise ends the turn on the refusal's error message without them).
    pub(super) async fn end_if_refused(
        &mut self,
        response: &AssistantResponse,
        executor: &StreamingToolExecutor,
    ) -> Phase<()> {
        if response.stop_reason != Some(StopReason::Refusal) {
            return ControlFlow::Continue(());
        }
        executor.discard();
        let mut refused = response.to_message();
        refused.content.retain(|b| b.as_tool_use().is_none());
        if refused.text().trim().is_empty() {
            refused.content.push(ContentBlock::text(REFUSAL_MESSAGE));
        }
        self.push_response(refused, response).await;
        ControlFlow::Break(Step::terminal(TerminalReason::Completed, None))
    }

    /// A paused turn goes on; else stop hooks, then the token budget, then done.
    pub(super) async fn end_without_tools(&mut self, response: &AssistantResponse) -> Step {
        if response.stop_reason == Some(StopReason::PauseTurn) {
            return self.continue_paused_turn();
        }
        if let Some(step) = self.run_stop_hooks().await {
            return step;
        }
        if let Some(step) = self
            .token_budget_continuation(response.usage.output_tokens)
            .await
        {
            return step;
        }
        Step::terminal(TerminalReason::Completed, None)
    }

    /// A preventing hook ends the query; blocking hooks send their errors to the model.
    async fn run_stop_hooks(&mut self) -> Option<Step> {
        let mut blocking: Vec<String> = Vec::new();
        for hook in &self.stop_hooks {
            match hook
                .on_stop(self.conversation().messages(), self.state.stop_hook_active)
                .await
            {
                StopHookOutcome::Allow => {}
                StopHookOutcome::Block(errors) => blocking.extend(errors),
                StopHookOutcome::Prevent(reason) => {
                    return Some(Step::terminal(TerminalReason::StopHookPrevented, reason));
                }
            }
        }
        if blocking.is_empty() {
            return None;
        }
        let feedback = format!("Stop hook feedback:\n{}", blocking.join("\n"));
        self.push_message(Message::user_text(feedback), true).await;
        Some(Step::Continue {
            state: State {
                stop_hook_active: true,
                turn_count: self.state.turn_count + 1,
                ..self.take_state()
            },
            transition: Transition::StopHookBlocking,
        })
    }

    /// With a token budget, a nudge to go on while it is not spent and the last two
    /// continuations were not diminishing returns.
    async fn token_budget_continuation(&mut self, output_tokens: u64) -> Option<Step> {
        let budget = self.token_budget?;
        let continuations = &self.state.budget_continuations;
        let diminishing = continuations.len() >= 2
            && continuations
                .iter()
                .rev()
                .take(2)
                .all(|t| *t < DIMINISHING_RETURNS_TOKENS);
        #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
        let spent = self.budget_output_tokens as f64 / budget.max(1) as f64;
        if diminishing || spent >= TOKEN_BUDGET_COMPLETION {
            return None;
        }
        let pct = (spent * 100.0).round();
        let nudge = format!(
            "Token budget: {pct}% of {budget} output tokens used. Keep working on the task; do not stop to summarise until it is done."
        );
        self.push_message(Message::user_text(nudge), true).await;
        let mut state = self.take_state();
        state.budget_continuations.push(output_tokens);
        Some(Step::Continue {
            state: State {
                turn_count: state.turn_count + 1,
                ..state
            },
            transition: Transition::TokenBudgetContinuation,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gyre_protocol::{ContentBlock, StopReason};
    use gyre_tools::BoxFuture;

    use super::super::emit::run_phase;
    use super::*;
    use crate::hooks::StopHook;
    use crate::testing::{FakeModel, Reply, params, response};

    struct Hook(StopHookOutcome);

    impl StopHook for Hook {
        fn on_stop<'a>(
            &'a self,
            _messages: &'a [Message],
            _stop_hook_active: bool,
        ) -> BoxFuture<'a, StopHookOutcome> {
            Box::pin(async move { self.0.clone() })
        }
    }

    fn done(output_tokens: u64) -> AssistantResponse {
        let Reply::Response(mut r) =
            response(vec![ContentBlock::text("done")], StopReason::EndTurn)
        else {
            unreachable!()
        };
        r.usage.output_tokens = output_tokens;
        r
    }

    async fn end(run: &mut QueryRun<'_>, output_tokens: u64) -> Step {
        let emitter = run.events.clone();
        run_phase(&emitter, run.end_without_tools(&done(output_tokens)))
            .await
            .1
    }

    #[tokio::test]
    async fn a_refusal_completes_with_its_text_and_without_its_tool_calls() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let Reply::Response(refused) = response(
            vec![
                ContentBlock::text("No."),
                ContentBlock::tool_use("t1", "Echo", serde_json::json!({})),
            ],
            StopReason::Refusal,
        ) else {
            unreachable!()
        };
        let emitter = run.events.clone();
        let (events, flow) = run_phase(&emitter, run.end_if_refused(&refused, &executor)).await;
        assert!(matches!(
            flow,
            ControlFlow::Break(Step::Terminal {
                reason: TerminalReason::Completed,
                error: None
            })
        ));
        assert_eq!(events.len(), 1);
        let kept = run.conversation().messages().last().unwrap();
        assert_eq!(kept.content, [ContentBlock::text("No.")]);
    }

    #[tokio::test]
    async fn other_stop_reasons_are_not_refusals() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let emitter = run.events.clone();
        let (events, flow) = run_phase(&emitter, run.end_if_refused(&done(5), &executor)).await;
        assert_eq!(flow, ControlFlow::Continue(()));
        assert!(events.is_empty());
    }

    #[tokio::test]
    async fn a_paused_turn_continues_without_asking_the_stop_hooks() {
        let mut p = params(FakeModel::new([]));
        p.stop_hooks = vec![Arc::new(Hook(StopHookOutcome::Prevent("no".into())))];
        let mut run = QueryRun::new(p);
        let mut paused = done(5);
        paused.stop_reason = Some(StopReason::PauseTurn);
        let emitter = run.events.clone();
        let (_, step) = run_phase(&emitter, run.end_without_tools(&paused)).await;
        assert!(matches!(
            step,
            Step::Continue {
                transition: Transition::PauseTurnContinue,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn without_hooks_or_budget_the_query_completes() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        assert!(matches!(
            end(&mut run, 10).await,
            Step::Terminal {
                reason: TerminalReason::Completed,
                error: None
            }
        ));
    }

    #[tokio::test]
    async fn blocking_hooks_send_their_errors_and_count_a_turn() {
        let mut p = params(FakeModel::new([]));
        p.stop_hooks = vec![
            Arc::new(Hook(StopHookOutcome::Block(vec!["tests fail".into()]))),
            Arc::new(Hook(StopHookOutcome::Block(vec!["lint fails".into()]))),
        ];
        let mut run = QueryRun::new(p);
        let Step::Continue { state, transition } = end(&mut run, 10).await else {
            panic!("no continue")
        };
        assert_eq!(transition, Transition::StopHookBlocking);
        assert!(state.stop_hook_active);
        assert_eq!(state.turn_count, 2);
        assert_eq!(
            run.conversation().messages().last().unwrap().text(),
            "Stop hook feedback:\ntests fail\nlint fails"
        );
    }

    #[tokio::test]
    async fn a_preventing_hook_wins_over_blocking_ones() {
        let mut p = params(FakeModel::new([]));
        p.stop_hooks = vec![
            Arc::new(Hook(StopHookOutcome::Block(vec!["x".into()]))),
            Arc::new(Hook(StopHookOutcome::Prevent("stop now".into()))),
        ];
        let mut run = QueryRun::new(p);
        let Step::Terminal { reason, error } = end(&mut run, 10).await else {
            panic!("no terminal")
        };
        assert_eq!(reason, TerminalReason::StopHookPrevented);
        assert_eq!(error.as_deref(), Some("stop now"));
    }

    #[tokio::test]
    async fn the_budget_nudges_until_it_is_nearly_spent() {
        let mut p = params(FakeModel::new([]));
        p.token_budget = Some(1000);
        let mut run = QueryRun::new(p);
        run.budget_output_tokens = 500;
        let Step::Continue { state, transition } = end(&mut run, 500).await else {
            panic!("no continue")
        };
        assert_eq!(transition, Transition::TokenBudgetContinuation);
        assert_eq!(state.budget_continuations, [500]);
        assert!(
            run.conversation()
                .messages()
                .last()
                .unwrap()
                .text()
                .starts_with("Token budget: 50% of 1000")
        );
        run.state = state;
        run.budget_output_tokens = 900;
        assert!(matches!(
            end(&mut run, 400).await,
            Step::Terminal {
                reason: TerminalReason::Completed,
                ..
            }
        ));
    }

    #[tokio::test]
    async fn two_small_continuations_in_a_row_stop_the_nudges() {
        let mut p = params(FakeModel::new([]));
        p.token_budget = Some(100_000);
        let mut run = QueryRun::new(p);
        run.state.budget_continuations = vec![100, 200];
        assert!(matches!(
            end(&mut run, 100).await,
            Step::Terminal {
                reason: TerminalReason::Completed,
                ..
            }
        ));
    }
}
