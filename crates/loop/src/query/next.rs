//! Phases 9 and 10: the max-turns check, then the next state, replaced whole.

use super::{QueryRun, Step};
use crate::state::{State, TerminalReason, Transition};

impl QueryRun<'_> {
    /// After a round of tools: the query ends past `max_turns`, else the next turn
    /// starts with the per-turn recovery state reset.
    pub(super) fn next_state(&mut self) -> Step {
        self.advance(Transition::NextTurn)
    }

    /// After a `pause_turn` stop: the history, ending with the paused response, goes
    /// back as it is so that the server carries on. A turn like any other.
    pub(super) fn continue_paused_turn(&mut self) -> Step {
        self.advance(Transition::PauseTurnContinue)
    }

    fn advance(&mut self, transition: Transition) -> Step {
        let next_turn = self.state.turn_count + 1;
        if let Some(max) = self.max_turns
            && next_turn > max
        {
            return Step::terminal(
                TerminalReason::MaxTurns,
                format!("Reached maximum number of turns ({max})"),
            );
        }
        let State {
            budget_continuations,
            ..
        } = self.take_state();
        Step::Continue {
            state: State {
                turn_count: next_turn,
                max_output_tokens_recovery_count: 0,
                has_attempted_reactive_compact: false,
                max_output_tokens_override: None,
                stop_hook_active: false,
                budget_continuations,
                transition: None,
            },
            transition,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeModel, params};

    #[test]
    fn the_next_turn_resets_what_recovers_within_a_turn() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        run.state = State {
            turn_count: 3,
            max_output_tokens_recovery_count: 2,
            has_attempted_reactive_compact: true,
            max_output_tokens_override: Some(64_000),
            stop_hook_active: true,
            budget_continuations: vec![700],
            ..run.take_state()
        };
        let Step::Continue { state, transition } = run.next_state() else {
            panic!("no continue")
        };
        assert_eq!(transition, Transition::NextTurn);
        assert_eq!(state.turn_count, 4);
        assert_eq!(state.max_output_tokens_recovery_count, 0);
        assert!(!state.has_attempted_reactive_compact);
        assert_eq!(state.max_output_tokens_override, None);
        assert!(!state.stop_hook_active);
        assert_eq!(
            state.budget_continuations,
            [700],
            "kept for the whole query"
        );
        assert_eq!(run.conversation().messages().len(), 1);
    }

    #[test]
    fn a_paused_turn_goes_on_as_a_new_turn_and_respects_max_turns() {
        let mut p = params(FakeModel::new([]));
        p.max_turns = Some(2);
        let mut run = QueryRun::new(p);
        let Step::Continue { state, transition } = run.continue_paused_turn() else {
            panic!("no continue")
        };
        assert_eq!(transition, Transition::PauseTurnContinue);
        assert_eq!(state.turn_count, 2);
        run.state = state;
        assert!(matches!(
            run.continue_paused_turn(),
            Step::Terminal {
                reason: TerminalReason::MaxTurns,
                ..
            }
        ));
    }

    #[test]
    fn past_max_turns_the_query_ends_with_the_documented_message() {
        let mut p = params(FakeModel::new([]));
        p.max_turns = Some(2);
        let mut run = QueryRun::new(p);
        run.state.turn_count = 2;
        let Step::Terminal { reason, error } = run.next_state() else {
            panic!("no terminal")
        };
        assert_eq!(reason, TerminalReason::MaxTurns);
        assert_eq!(
            error.as_deref(),
            Some("Reached maximum number of turns (2)")
        );
    }
}
