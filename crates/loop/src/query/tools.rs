//! Phases 6 to 8: the response joins the history, the remaining tools run (some may be
//! done already), the abort check after tools, and the attachments that go with the
//! results.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::SystemTime;

use futures::StreamExt;
use gyre_api::invalid_tool_input;
use gyre_protocol::{AssistantResponse, ContentBlock, Message};
use gyre_tools::{StreamingToolExecutor, ToolCall, ToolCallOutcome, ToolContext};

use super::stream::{result_for, tool_calls_of};
use super::{INTERRUPT_MESSAGE_FOR_TOOL_USE, Phase, QueryRun, Step};
use crate::event::LoopEvent;
use crate::hooks::AfterToolOutcome;
use crate::state::TerminalReason;

/// The same call in this many consecutive turns is a loop worth telling the model about.
const REPEAT_GUARD_TURNS: usize = 3;
/// How many of the most recently seen files are checked for changes on disk.
const CHECKED_FILES: usize = 20;

impl QueryRun<'_> {
    /// The response joins the history; its calls that did not start while streaming
    /// (a client that does not stream blocks, calls held back) are announced
    /// ([`LoopEvent::ToolStarted`]) and go to the executor.
    pub(super) async fn accept_response(
        &mut self,
        response: &AssistantResponse,
        executor: &StreamingToolExecutor,
        started: &[String],
    ) -> Vec<ToolCall> {
        let calls = tool_calls_of(response);
        // Every call is announced as it is handed on, as the streamed ones were: front-ends
        // show a call line for Bash, Edit and Write (which never start while streaming)
        // and for a call refused before it runs, too.
        for call in calls.iter().filter(|call| !started.contains(&call.id)) {
            self.emit(LoopEvent::ToolStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            })
            .await;
        }
        self.push_response(response.to_message(), response).await;
        for call in &calls {
            if !started.contains(&call.id) && invalid_tool_input(&call.input).is_none() {
                executor.add_tool(call.clone());
            }
        }
        calls
    }

    /// Phase 6: waits for every call, then the tool hooks; returns one result per call
    /// (in call order), then what the hooks said about them (additional context, a
    /// block's reason) as text, and the first hook's reason to stop, if any.
    pub(super) async fn run_remaining_tools(
        &mut self,
        executor: &StreamingToolExecutor,
        calls: &[ToolCall],
    ) -> (Vec<ContentBlock>, Option<String>) {
        let mut outcomes: Vec<ToolCallOutcome> = Vec::with_capacity(calls.len());
        let remaining = executor.get_remaining_results();
        futures::pin_mut!(remaining);
        while let Some(outcome) = remaining.next().await {
            if let Some(denial) = &outcome.denial {
                self.emit(LoopEvent::PermissionDenied {
                    denial: denial.clone(),
                    message: outcome.output.content.clone(),
                })
                .await;
            }
            tracing::debug!(tool = %outcome.tool_name, id = %outcome.tool_use_id, is_error = outcome.output.is_error, "tool call finished");
            outcomes.push(outcome);
        }
        let mut hook_stop: Option<String> = None;
        let mut notes = Vec::new();
        for outcome in &outcomes {
            for hook in &self.tool_hooks {
                let after = hook.after_tool(outcome).await;
                notes.extend(hook_notes(&outcome.tool_name, &after));
                if let Some(reason) = after.stop {
                    hook_stop.get_or_insert(reason);
                }
            }
        }
        let mut results = self.tool_results(calls, &outcomes);
        results.extend(notes.into_iter().map(ContentBlock::text));
        (results, hook_stop)
    }

    /// The result block of every call: a call whose input was not valid JSON is told
    /// so, and a call repeated over [`REPEAT_GUARD_TURNS`] turns gets a loop warning.
    fn tool_results(
        &mut self,
        calls: &[ToolCall],
        outcomes: &[ToolCallOutcome],
    ) -> Vec<ContentBlock> {
        self.call_history.push(calls.iter().map(call_key).collect());
        calls
            .iter()
            .map(|call| {
                let mut block = if let Some(bad) = invalid_tool_input(&call.input) {
                    ContentBlock::tool_result(
                        call.id.clone(),
                        format!("<tool_use_error>InputValidationError: the input of this {} call is not valid JSON ({}); send the input again as a JSON object</tool_use_error>", call.name, bad.error),
                        true,
                    )
                } else {
                    result_for(call, outcomes)
                };
                if let (Some(warning), ContentBlock::ToolResult { content, .. }) =
                    (repeat_warning(&self.call_history, call), &mut block)
                {
                    *content = format!("{}{warning}", content.text()).into();
                }
                block
            })
            .collect()
    }

    /// Phase 7: when the user interrupted while tools ran, the results join the history
    /// with the interruption and the query ends.
    pub(super) async fn abort_after_tools(
        &mut self,
        mut results: Vec<ContentBlock>,
    ) -> Phase<Vec<ContentBlock>> {
        if !self.cancel.is_cancelled() {
            return ControlFlow::Continue(results);
        }
        results.push(ContentBlock::text(INTERRUPT_MESSAGE_FOR_TOOL_USE));
        self.push_message(Message::user(results), false).await;
        ControlFlow::Break(Step::interrupted(TerminalReason::AbortedTools))
    }

    /// Phase 8: attachments (files changed on disk since the model read them) go with
    /// the results; a tool hook's stop ends the query once they are in the history.
    pub(super) async fn attach(
        &mut self,
        mut results: Vec<ContentBlock>,
        hook_stop: Option<String>,
    ) -> Phase<()> {
        results.extend(
            changed_files_reminders(&self.tool_context, &mut self.reminded)
                .into_iter()
                .map(ContentBlock::text),
        );
        self.push_message(Message::user(results), false).await;
        match hook_stop {
            Some(reason) => ControlFlow::Break(Step::terminal(TerminalReason::HookStopped, reason)),
            None => ControlFlow::Continue(()),
        }
    }
}

/// A tool hook's context and objection as the model reads them, after the results
/// (Claude Code's wording for PostToolUse hook output).
fn hook_notes(tool_name: &str, after: &AfterToolOutcome) -> Vec<String> {
    let context = |event: &'static str| {
        move |text: &String| {
            format!(
                "<system-reminder>{event}:{tool_name} hook additional context: {text}</system-reminder>"
            )
        }
    };
    let pre = after.pre_tool_context.iter().map(context("PreToolUse"));
    let post = after.additional_context.iter().map(context("PostToolUse"));
    let block = after.block_reason.iter().map(|reason| {
        format!("<system-reminder>PostToolUse:{tool_name} hook blocking error: {reason}</system-reminder>")
    });
    pre.chain(post).chain(block).collect()
}

fn call_key(call: &ToolCall) -> String {
    format!("{}:{}", call.name, call.input)
}

fn repeat_warning(history: &[Vec<String>], call: &ToolCall) -> Option<String> {
    let key = call_key(call);
    let recent = history.iter().rev().take(REPEAT_GUARD_TURNS);
    (history.len() >= REPEAT_GUARD_TURNS && recent.clone().all(|turn| turn.contains(&key))).then(
        || {
            format!(
                "\n\n<system-reminder>You have made this exact {} call in {REPEAT_GUARD_TURNS} consecutive turns with the same input. You appear to be looping: use the result above, or try a different approach.</system-reminder>",
                call.name
            )
        },
    )
}

/// Files changed on disk since they were last read: seen files recorded
/// by Read/Edit/Write in the file-state cache, compared by mtime. Each change is
/// reported once (as Claude Code's `edited_text_file` attachment).
fn changed_files_reminders(
    ctx: &ToolContext,
    reminded: &mut HashMap<PathBuf, SystemTime>,
) -> Vec<String> {
    let mut out = Vec::new();
    for path in ctx.file_state.recent(CHECKED_FILES) {
        let Some(seen) = ctx.file_state.get(&path) else {
            continue;
        };
        let Ok(mtime) = std::fs::metadata(&path).and_then(|m| m.modified()) else {
            continue;
        };
        if seen.mtime == Some(mtime) || reminded.get(&path) == Some(&mtime) {
            continue;
        }
        reminded.insert(path.clone(), mtime);
        out.push(format!(
            "<system-reminder>{} was modified on disk since you last read it (by the user or another program). Read it again before you edit it.</system-reminder>",
            path.display()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use gyre_protocol::StopReason;
    use serde_json::json;

    use super::super::emit::run_phase;
    use super::*;
    use crate::testing::{FakeModel, Reply, params, response};

    fn calls_response(calls: &[(&str, &str)]) -> AssistantResponse {
        let blocks = calls
            .iter()
            .map(|(id, name)| ContentBlock::tool_use(*id, *name, json!({})))
            .collect();
        let Reply::Response(r) = response(blocks, StopReason::ToolUse) else {
            unreachable!()
        };
        r
    }

    fn result_text(block: &ContentBlock) -> String {
        match block {
            ContentBlock::ToolResult { content, .. } => content.text(),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[tokio::test]
    async fn calls_not_started_while_streaming_run_after_the_response_in_call_order() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let response = calls_response(&[("a", "Echo"), ("b", "Echo")]);
        let emitter = run.events.clone();
        let (events, calls) =
            run_phase(&emitter, run.accept_response(&response, &executor, &[])).await;
        assert_eq!(calls.len(), 2);
        // Each call is announced before the message joins the history, as streamed
        // calls are.
        assert!(matches!(
            events.as_slice(),
            [
                LoopEvent::ToolStarted { id: a, .. },
                LoopEvent::ToolStarted { id: b, .. },
                LoopEvent::Message { is_meta: false, .. },
            ] if a == "a" && b == "b"
        ));
        assert_eq!(
            run.conversation().anchor().map(|a| a.message_index),
            Some(1)
        );
        let (_, (results, stop)) =
            run_phase(&emitter, run.run_remaining_tools(&executor, &calls)).await;
        assert_eq!(stop, None);
        let ids: Vec<&str> = results
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolResult { tool_use_id, .. } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(result_text(&results[0]).starts_with("echo:"));
    }

    #[test]
    fn invalid_json_input_is_answered_with_an_input_error() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let call = ToolCall {
            id: "a".into(),
            name: "Echo".into(),
            input: json!({ gyre_api::INVALID_JSON_KEY: "{", gyre_api::INVALID_JSON_ERROR_KEY: "EOF" }),
        };
        let results = run.tool_results(&[call], &[]);
        assert!(result_text(&results[0]).contains("InputValidationError"));
        assert!(result_text(&results[0]).contains("(EOF)"));
    }

    #[test]
    fn the_same_call_three_turns_running_gets_a_loop_warning() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let call = ToolCall {
            id: "a".into(),
            name: "Echo".into(),
            input: json!({"x": 1}),
        };
        let warned: Vec<bool> = (0..3)
            .map(|_| {
                result_text(&run.tool_results(std::slice::from_ref(&call), &[])[0])
                    .contains("looping")
            })
            .collect();
        assert_eq!(warned, [false, false, true]);
    }

    #[tokio::test]
    async fn an_interrupt_while_tools_ran_ends_the_query_with_the_results() {
        let p = params(FakeModel::new([]));
        p.cancel.cancel();
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let results = vec![ContentBlock::tool_result("a", "partial", true)];
        let (events, flow) = run_phase(&emitter, run.abort_after_tools(results)).await;
        assert!(matches!(
            flow,
            ControlFlow::Break(Step::Terminal {
                reason: TerminalReason::AbortedTools,
                ..
            })
        ));
        assert_eq!(events.len(), 1);
        let last = run.conversation().messages().last().unwrap();
        assert_eq!(
            last.content[1],
            ContentBlock::text(INTERRUPT_MESSAGE_FOR_TOOL_USE)
        );
    }

    #[tokio::test]
    async fn a_tool_hook_stop_ends_the_query_after_the_results_are_in() {
        let p = params(FakeModel::new([]));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let results = vec![ContentBlock::tool_result("a", "ok", false)];
        let (events, flow) =
            run_phase(&emitter, run.attach(results, Some("hook said stop".into()))).await;
        assert_eq!(events.len(), 1);
        let ControlFlow::Break(Step::Terminal { reason, error }) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(reason, TerminalReason::HookStopped);
        assert_eq!(error.as_deref(), Some("hook said stop"));
    }

    struct Remarks;

    impl crate::hooks::ToolHook for Remarks {
        fn after_tool<'a>(
            &'a self,
            outcome: &'a ToolCallOutcome,
        ) -> gyre_tools::BoxFuture<'a, AfterToolOutcome> {
            Box::pin(async move {
                AfterToolOutcome {
                    pre_tool_context: (outcome.tool_use_id == "a")
                        .then(|| "a was expected".to_owned())
                        .into_iter()
                        .collect(),
                    additional_context: vec![format!("{} looked fine", outcome.tool_use_id)],
                    block_reason: (outcome.tool_use_id == "b").then(|| "b wrote too much".into()),
                    stop: None,
                }
            })
        }
    }

    #[tokio::test]
    async fn tool_hook_context_and_objections_follow_the_results_for_the_model() {
        let mut p = params(FakeModel::new([]));
        p.tool_hooks = vec![std::sync::Arc::new(Remarks)];
        let mut run = QueryRun::new(p);
        let executor = run.executor();
        let response = calls_response(&[("a", "Echo"), ("b", "Echo")]);
        let emitter = run.events.clone();
        let (_, calls) = run_phase(&emitter, run.accept_response(&response, &executor, &[])).await;
        let (_, (results, stop)) =
            run_phase(&emitter, run.run_remaining_tools(&executor, &calls)).await;
        assert_eq!(stop, None);
        assert!(matches!(results[0], ContentBlock::ToolResult { .. }));
        assert!(matches!(results[1], ContentBlock::ToolResult { .. }));
        let notes: Vec<String> = results[2..]
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text, .. } => text.clone(),
                other => panic!("not text: {other:?}"),
            })
            .collect();
        assert_eq!(
            notes,
            [
                "<system-reminder>PreToolUse:Echo hook additional context: a was expected</system-reminder>",
                "<system-reminder>PostToolUse:Echo hook additional context: a looked fine</system-reminder>",
                "<system-reminder>PostToolUse:Echo hook additional context: b looked fine</system-reminder>",
                "<system-reminder>PostToolUse:Echo hook blocking error: b wrote too much</system-reminder>",
            ]
        );
    }

    #[tokio::test]
    async fn a_file_changed_on_disk_since_its_read_is_attached_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        std::fs::write(&path, "one").unwrap();
        let mut p = params(FakeModel::new([]));
        p.tool_context = ToolContext::new(dir.path().to_path_buf());
        p.tool_context
            .file_state
            .record(&path, gyre_tools::FileState::of(b"one", None));
        let mut run = QueryRun::new(p);
        let emitter = run.events.clone();
        let (_, flow) = run_phase(&emitter, run.attach(Vec::new(), None)).await;
        assert_eq!(flow, ControlFlow::Continue(()));
        assert!(
            run.conversation()
                .messages()
                .last()
                .unwrap()
                .text()
                .contains("a.txt was modified")
        );
        let (_, _) = run_phase(&emitter, run.attach(Vec::new(), None)).await;
        assert!(
            !run.conversation()
                .messages()
                .last()
                .unwrap()
                .text()
                .contains("modified")
        );
    }
}
