//! `query()`: the agent loop (seed 000 §3.2.3, seed 001).
//!
//! Each iteration runs the phases in order: prepare the context (compaction pipeline),
//! `stream_request_start`, the streaming model call with tools starting as their blocks
//! complete, an abort check, termination or recovery, the remaining tools, another abort
//! check, attachments, the max-turns check, and the next state.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use futures::{Stream, StreamExt};
use gyre_api::{ApiError, ModelEvent, add_cache_markers, invalid_tool_input};
use gyre_protocol::{
    AssistantResponse, ContentBlock, Message, MessagesRequest, StopReason, SystemBlock,
};
use gyre_tools::{
    CanUseTool, StreamingToolExecutor, ToolCall, ToolCallOutcome, ToolContext, ToolRegistry,
};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use gyre_compact::{Trigger, UsageAnchor};

use crate::compaction::ContextCompactor;
use crate::deps::QueryDeps;
use crate::event::LoopEvent;
use crate::hooks::{StopHook, StopHookOutcome, ToolHook};
use crate::state::{State, Terminal, TerminalReason, Transition};

/// Default `max_tokens` of a request (SPEC §8).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8192;
/// `max_tokens` after the first max_tokens stop: seed 000, ESCALATED_MAX_TOKENS.
pub const ESCALATED_MAX_OUTPUT_TOKENS: u32 = 64_000;
/// Recovery messages after escalation: seed 001, MAX_OUTPUT_TOKENS_RECOVERY_LIMIT.
pub const MAX_OUTPUT_TOKENS_RECOVERY_LIMIT: u32 = 3;
/// The meta message that asks the model to resume after a max_tokens stop (SPEC §8).
pub const MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE: &str = "Output token limit hit. Resume directly — no apology, no recap of what you were doing. Pick up mid-thought if that is where the cut happened. Break remaining work into smaller pieces.";
/// Appended when the user interrupts while the model streams.
pub const INTERRUPT_MESSAGE: &str = "[Request interrupted by user]";
/// Appended when the user interrupts while tools run.
pub const INTERRUPT_MESSAGE_FOR_TOOL_USE: &str = "[Request interrupted by user for tool use]";
/// The result of a tool call the user interrupted.
pub const INTERRUPTED_TOOL_RESULT: &str = gyre_tools::INTERRUPTED_MESSAGE;
/// Token-budget nudges stop at this share of the budget (SPEC §8).
const TOKEN_BUDGET_COMPLETION: f64 = 0.9;
/// Two continuations under this many output tokens each are diminishing returns.
const DIMINISHING_RETURNS_TOKENS: u64 = 500;
/// The same call in this many consecutive turns is a loop worth telling the model about.
const REPEAT_GUARD_TURNS: usize = 3;

/// Everything one query needs.
pub struct QueryParams {
    pub messages: Vec<Message>,
    pub system: Vec<SystemBlock>,
    pub model: String,
    pub fallback_model: Option<String>,
    pub max_turns: Option<u32>,
    /// `GYRE_MAX_OUTPUT_TOKENS`: a fixed limit that also disables escalation.
    pub max_output_tokens: Option<u32>,
    /// Opt-in output-token budget for continuation nudges.
    pub token_budget: Option<u64>,
    pub deps: Arc<dyn QueryDeps>,
    pub tools: Arc<ToolRegistry>,
    pub tool_context: ToolContext,
    pub can_use_tool: Arc<dyn CanUseTool>,
    pub compactor: Arc<Mutex<Box<dyn ContextCompactor>>>,
    pub stop_hooks: Vec<Arc<dyn StopHook>>,
    pub tool_hooks: Vec<Arc<dyn ToolHook>>,
    /// The usage of the last response before this query, if any.
    pub anchor: Option<UsageAnchor>,
    pub cancel: CancellationToken,
}

impl std::fmt::Debug for QueryParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryParams")
            .field("model", &self.model)
            .field("messages", &self.messages.len())
            .field("max_turns", &self.max_turns)
            .finish_non_exhaustive()
    }
}

/// Runs the agent loop. The stream's last item is always [`LoopEvent::Terminal`].
///
/// This is the outer layer of seed 000 §3.2.1: it only adds the guarantee that a
/// terminal is reported exactly once, however the inner loop ends.
pub fn query(params: QueryParams) -> impl Stream<Item = LoopEvent> + Send {
    async_stream::stream! {
        let mut saw_terminal = false;
        let inner = query_loop(params);
        futures::pin_mut!(inner);
        while let Some(event) = inner.next().await {
            saw_terminal |= matches!(event, LoopEvent::Terminal(_));
            yield event;
            if saw_terminal {
                break;
            }
        }
        if !saw_terminal {
            yield LoopEvent::Terminal(Terminal {
                reason: TerminalReason::ModelError,
                turn_count: 0,
                transitions: Vec::new(),
                error: Some("the query loop ended without a result".to_owned()),
            });
        }
    }
}

fn terminal(
    reason: TerminalReason,
    state: &State,
    transitions: &[Transition],
    error: Option<String>,
) -> LoopEvent {
    LoopEvent::Terminal(Terminal {
        reason,
        turn_count: state.turn_count,
        transitions: transitions.to_vec(),
        error,
    })
}

/// Removes thinking blocks: their signatures are bound to the model that wrote them
/// and another model rejects them (seed 001, stripSignatureBlocks).
fn strip_thinking(messages: &mut [Message]) {
    for m in messages.iter_mut() {
        m.content.retain(|b| {
            !matches!(
                b,
                ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. }
            )
        });
        if m.content.is_empty() {
            m.content.push(ContentBlock::text("(thinking omitted)"));
        }
    }
}

fn tool_calls_of(response: &AssistantResponse) -> Vec<ToolCall> {
    response
        .content
        .iter()
        .filter_map(ContentBlock::as_tool_use)
        .map(|(id, name, input)| ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input: input.clone(),
        })
        .collect()
}

/// Files changed on disk since they were last read: seen files recorded
/// by Read/Edit/Write in the file-state cache, compared by mtime. Each change is
/// reported once (seed 000 §3.9, the `edited_text_file` attachment).
fn changed_files_reminders(
    ctx: &ToolContext,
    reminded: &mut HashMap<PathBuf, SystemTime>,
) -> Vec<String> {
    const CHECKED_FILES: usize = 20;
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

/// An image the API could not take (too large, bad format): seed 001, image_error.
fn is_image_error(error: &ApiError) -> bool {
    match error {
        ApiError::InvalidRequest { message, .. } | ApiError::RequestTooLarge { message, .. } => {
            message.to_ascii_lowercase().contains("image")
        }
        _ => false,
    }
}

/// The result block answering `call`: its outcome, or "Interrupted by user" when the
/// call never finished (abort, discard).
fn result_for(call: &ToolCall, outcomes: &[ToolCallOutcome]) -> ContentBlock {
    outcomes
        .iter()
        .find(|o| o.tool_use_id == call.id)
        .map_or_else(
            || ContentBlock::tool_result(call.id.clone(), INTERRUPTED_TOOL_RESULT, true),
            ToolCallOutcome::to_block,
        )
}

/// What one streaming attempt produced.
enum Attempt {
    Response(AssistantResponse),
    Aborted,
    Failed(ApiError),
}

fn repeat_warning(history: &[Vec<String>], call: &ToolCall) -> Option<String> {
    let key = format!("{}:{}", call.name, call.input);
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

#[allow(clippy::too_many_lines)] // the phases read best in one place, as in the seeds
fn query_loop(params: QueryParams) -> impl Stream<Item = LoopEvent> + Send {
    async_stream::stream! {
        let QueryParams {
            messages,
            system,
            mut model,
            mut fallback_model,
            max_turns,
            max_output_tokens,
            token_budget,
            deps,
            tools,
            tool_context,
            can_use_tool,
            compactor,
            stop_hooks,
            tool_hooks,
            mut anchor,
            cancel,
        } = params;
        // Tools stop when the query is aborted.
        let tool_context = tool_context.with_cancel(cancel.clone());
        let tool_definitions = tools.definitions();
        compactor.lock().await.reset_turn();
        let mut state = State::initial(messages);
        let mut transitions: Vec<Transition> = Vec::new();
        let mut budget_output_tokens: u64 = 0;
        // Tool-call keys per turn, for the repeat guard.
        let mut call_history: Vec<Vec<String>> = Vec::new();
        // Files already reported as changed, with the mtime reported.
        let mut reminded: HashMap<PathBuf, SystemTime> = HashMap::new();

        loop {
            // Phase 1: the compaction pipeline.
            let prepared = {
                let mut c = compactor.lock().await;
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => None,
                    p = c.prepare(&state.messages, anchor) => Some(p),
                }
            };
            let Some(prepared) = prepared else {
                // Interrupted while compacting (the summary request is dropped with it).
                let message = Message::user_text(INTERRUPT_MESSAGE);
                state.messages.push(message.clone());
                yield LoopEvent::Message { message, is_meta: true };
                yield terminal(TerminalReason::AbortedStreaming, &state, &transitions, Some("Interrupted by user".to_owned()));
                return;
            };
            let messages_for_api = match prepared {
                Ok(p) => {
                    if let Some(history) = p.history {
                        state.messages = history;
                        anchor = None;
                        yield LoopEvent::HistoryReplaced(state.messages.clone());
                    }
                    if let Some(outcome) = p.compacted {
                        yield LoopEvent::Compacted(outcome);
                    }
                    if p.at_blocking_limit {
                        yield terminal(
                            TerminalReason::BlockingLimit,
                            &state,
                            &transitions,
                            Some("Context limit reached: the conversation is too long to continue. Run /compact or start a new session.".to_owned()),
                        );
                        return;
                    }
                    p.messages
                }
                Err(e) => {
                    tracing::warn!(error = %e, "compaction failed; sending the history as it is");
                    state.messages.clone()
                }
            };

            // Phase 2: stream_request_start.
            let max_tokens = state
                .max_output_tokens_override
                .or(max_output_tokens)
                .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
            // Built once and shared with every attempt (retries and a fallback included):
            // the history is not copied per attempt.
            let mut request = {
                let mut r = MessagesRequest::new(model.clone(), max_tokens, messages_for_api);
                r.system.clone_from(&system);
                r.tools.clone_from(&tool_definitions);
                add_cache_markers(&mut r);
                Arc::new(r)
            };

            // Phase 3: the streaming call; a fallback restarts it on the other model.
            let (attempt, executor, started) = loop {
                tracing::debug!(
                    model = %model,
                    max_tokens,
                    messages = request.messages.len(),
                    turn = state.turn_count,
                    "model request"
                );
                yield LoopEvent::RequestStart { model: model.clone(), max_tokens };

                let mut executor = StreamingToolExecutor::new(
                    Arc::clone(&tools),
                    tool_context.clone(),
                    Arc::clone(&can_use_tool),
                );
                let mut blocks: BTreeMap<usize, ContentBlock> = BTreeMap::new();
                // Tool calls handed to the executor during the stream.
                let mut started: Vec<String> = Vec::new();
                // Set at the first call that may not start before the message completes.
                let mut held_back = false;
                let mut outcome: Option<Attempt> = None;
                let mut stream = deps.call_model(Arc::clone(&request), fallback_model.clone(), cancel.clone());
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(ModelEvent::Stream(event)) => yield LoopEvent::Stream(event),
                        Ok(ModelEvent::BlockComplete { index, block }) => {
                            // Only concurrency-safe calls start while the response
                            // streams: a cut stream voids the attempt, and a call that
                            // changed something must not run for a message the model
                            // never sees. From the first unsafe call on, the rest wait
                            // for the whole message, so call order is kept.
                            let safe = block.as_tool_use().is_some_and(|(_, name, input)| {
                                tools.get(name).is_some_and(|t| t.is_concurrency_safe(input))
                            });
                            held_back |= block.as_tool_use().is_some() && !safe;
                            if let Some((id, name, input)) = block.as_tool_use()
                                && !held_back
                                && invalid_tool_input(input).is_none()
                            {
                                started.push(id.to_owned());
                                executor.add_tool(ToolCall {
                                    id: id.to_owned(),
                                    name: name.to_owned(),
                                    input: input.clone(),
                                });
                                yield LoopEvent::ToolStarted {
                                    id: id.to_owned(),
                                    name: name.to_owned(),
                                    input: input.clone(),
                                };
                            }
                            blocks.insert(index, block);
                        }
                        Ok(ModelEvent::Retry(status)) => {
                            tracing::debug!(attempt = status.attempt, delay_ms = status.delay_ms, error = %status.error, "retrying the model request");
                            // Everything since the attempt began is void.
                            if !blocks.is_empty() {
                                executor.discard();
                                executor = StreamingToolExecutor::new(
                                    Arc::clone(&tools),
                                    tool_context.clone(),
                                    Arc::clone(&can_use_tool),
                                );
                                blocks.clear();
                                started.clear();
                                held_back = false;
                                yield LoopEvent::Tombstone;
                            }
                            yield LoopEvent::Retry(status);
                        }
                        Ok(ModelEvent::Message(response)) => {
                            outcome = Some(Attempt::Response(response));
                        }
                        Err(ApiError::Aborted) => {
                            outcome = Some(Attempt::Aborted);
                            break;
                        }
                        Err(e) => {
                            outcome = Some(Attempt::Failed(e));
                            break;
                        }
                    }
                }
                drop(stream);
                let attempt = if cancel.is_cancelled() {
                    Attempt::Aborted
                } else {
                    outcome.unwrap_or(Attempt::Failed(ApiError::StreamCut { events: 0 }))
                };
                if let Attempt::Failed(ApiError::FallbackTriggered { original, fallback }) = &attempt {
                    // Abandon the attempt: its tools, its blocks, its signatures.
                    executor.discard();
                    if !blocks.is_empty() {
                        yield LoopEvent::Tombstone;
                    }
                    strip_thinking(&mut state.messages);
                    let retry = Arc::make_mut(&mut request);
                    strip_thinking(&mut retry.messages);
                    retry.model.clone_from(fallback);
                    add_cache_markers(retry);
                    yield LoopEvent::Fallback { original: original.clone(), fallback: fallback.clone() };
                    model.clone_from(fallback);
                    fallback_model = None;
                    continue;
                }
                if let Attempt::Aborted = attempt {
                    // Keep what completed before the interruption.
                    let partial: Vec<ContentBlock> = blocks.into_values().collect();
                    break (Attempt::Response(AssistantResponse {
                        id: String::new(),
                        model: model.clone(),
                        role: gyre_protocol::Role::Assistant,
                        content: partial,
                        stop_reason: None,
                        stop_sequence: None,
                        usage: gyre_protocol::Usage::default(),
                    }), executor, started);
                }
                break (attempt, executor, started);
            };
            // The attempt is over and the request ours alone again: its messages seed the
            // next prepare, which then copies only what changed instead of the history.
            if let Ok(sent) = Arc::try_unwrap(request) {
                compactor.lock().await.recycle(sent.messages);
            }

            // Phase 4: abort check after streaming.
            if cancel.is_cancelled() {
                let Attempt::Response(partial) = attempt else { return; };
                let mut results: Vec<ContentBlock> = Vec::new();
                if !partial.content.is_empty() {
                    let calls = tool_calls_of(&partial);
                    state.messages.push(partial.to_message());
                    yield LoopEvent::Message { message: partial.to_message(), is_meta: false };
                    let outcomes: Vec<ToolCallOutcome> = executor.get_remaining_results().collect().await;
                    for call in &calls {
                        results.push(result_for(call, &outcomes));
                    }
                } else {
                    executor.discard();
                }
                results.push(ContentBlock::text(INTERRUPT_MESSAGE));
                let message = Message::user(results);
                state.messages.push(message.clone());
                yield LoopEvent::Message { message, is_meta: true };
                yield terminal(TerminalReason::AbortedStreaming, &state, &transitions, Some("Interrupted by user".to_owned()));
                return;
            }

            // Phase 5: terminate or recover.
            if let Attempt::Failed(error) = &attempt {
                tracing::debug!(error = %error, "model request failed");
            }
            let response = match attempt {
                Attempt::Response(r) => r,
                Attempt::Aborted => return,
                Attempt::Failed(error) => {
                    executor.discard();
                    if error.is_prompt_too_long() {
                        // Withheld: try to recover before anyone sees it.
                        let drained = state.transition != Some(Transition::CollapseDrainRetry)
                            && compactor.lock().await.recover_from_overflow();
                        if drained {
                            transitions.push(Transition::CollapseDrainRetry);
                            yield LoopEvent::Transition(Transition::CollapseDrainRetry);
                            state = State { transition: Some(Transition::CollapseDrainRetry), ..state };
                            continue;
                        }
                        if !state.has_attempted_reactive_compact {
                            let compacted = {
                                let mut c = compactor.lock().await;
                                tokio::select! {
                                    biased;
                                    () = cancel.cancelled() => Ok(None),
                                    r = c.compact_now(&state.messages, Trigger::Reactive) => r,
                                }
                            };
                            if let Ok(Some((history, outcome))) = compacted {
                                anchor = None;
                                yield LoopEvent::HistoryReplaced(history.clone());
                                yield LoopEvent::Compacted(outcome);
                                transitions.push(Transition::ReactiveCompactRetry);
                                yield LoopEvent::Transition(Transition::ReactiveCompactRetry);
                                state = State {
                                    messages: history,
                                    has_attempted_reactive_compact: true,
                                    transition: Some(Transition::ReactiveCompactRetry),
                                    ..state
                                };
                                continue;
                            }
                        }
                        yield terminal(
                            TerminalReason::PromptTooLong,
                            &state,
                            &transitions,
                            Some(format!("{error} The conversation is too long for the model's context window even after compaction; start a new session or run /compact with fewer files in view.")),
                        );
                        return;
                    }
                    let reason = if is_image_error(&error) { TerminalReason::ImageError } else { TerminalReason::ModelError };
                    yield terminal(reason, &state, &transitions, Some(error.to_string()));
                    return;
                }
            };
            yield LoopEvent::Usage {
                id: response.id.clone(),
                model: if response.model.is_empty() { model.clone() } else { response.model.clone() },
                stop_reason: response.stop_reason.clone(),
                usage: response.usage,
            };
            budget_output_tokens += response.usage.output_tokens;

            if response.stop_reason == Some(StopReason::MaxTokens) {
                // Tools of a cut response may be incomplete: never run them.
                executor.discard();
                if max_output_tokens.is_none() && state.max_output_tokens_override.is_none() {
                    // Withheld and retried silently at the escalated limit.
                    transitions.push(Transition::MaxOutputTokensEscalate);
                    yield LoopEvent::Transition(Transition::MaxOutputTokensEscalate);
                    state = State {
                        max_output_tokens_override: Some(ESCALATED_MAX_OUTPUT_TOKENS),
                        transition: Some(Transition::MaxOutputTokensEscalate),
                        ..state
                    };
                    continue;
                }
                let mut cut = response.to_message();
                cut.content.retain(|b| !matches!(b, ContentBlock::ToolUse { .. }));
                if cut.content.is_empty() {
                    cut.content.push(ContentBlock::text("(output cut at the token limit)"));
                }
                state.messages.push(cut.clone());
                yield LoopEvent::Message { message: cut, is_meta: false };
                anchor = Some(UsageAnchor { usage: response.usage, message_index: state.messages.len() - 1 });
                if state.max_output_tokens_recovery_count < MAX_OUTPUT_TOKENS_RECOVERY_LIMIT {
                    let attempt = state.max_output_tokens_recovery_count + 1;
                    let nudge = Message::user_text(MAX_OUTPUT_TOKENS_RECOVERY_MESSAGE);
                    state.messages.push(nudge.clone());
                    yield LoopEvent::Message { message: nudge, is_meta: true };
                    let transition = Transition::MaxOutputTokensRecovery { attempt };
                    transitions.push(transition);
                    yield LoopEvent::Transition(transition);
                    state = State {
                        max_output_tokens_recovery_count: attempt,
                        transition: Some(transition),
                        ..state
                    };
                    continue;
                }
                let limit = state.max_output_tokens_override.or(max_output_tokens).unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
                yield terminal(
                    TerminalReason::ModelError,
                    &state,
                    &transitions,
                    Some(format!("The model's response exceeded the {limit} output token maximum {MAX_OUTPUT_TOKENS_RECOVERY_LIMIT} times in a row. Ask for the work in smaller pieces, or set GYRE_MAX_OUTPUT_TOKENS higher.")),
                );
                return;
            }

            let assistant = response.to_message();
            state.messages.push(assistant.clone());
            yield LoopEvent::Message { message: assistant, is_meta: false };
            anchor = Some(UsageAnchor { usage: response.usage, message_index: state.messages.len() - 1 });

            let calls = tool_calls_of(&response);
            // A client that does not stream blocks still gets its tools run.
            for call in &calls {
                if !started.contains(&call.id) && invalid_tool_input(&call.input).is_none() {
                    executor.add_tool(call.clone());
                }
            }
            if calls.is_empty() {
                executor.discard();
                // No follow-up: stop hooks, then the token budget, then done.
                let mut blocking: Vec<String> = Vec::new();
                for hook in &stop_hooks {
                    match hook.on_stop(&state.messages, state.stop_hook_active).await {
                        StopHookOutcome::Allow => {}
                        StopHookOutcome::Block(errors) => blocking.extend(errors),
                        StopHookOutcome::Prevent(reason) => {
                            yield terminal(TerminalReason::StopHookPrevented, &state, &transitions, Some(reason));
                            return;
                        }
                    }
                }
                if !blocking.is_empty() {
                    let message = Message::user_text(format!("Stop hook feedback:\n{}", blocking.join("\n")));
                    state.messages.push(message.clone());
                    yield LoopEvent::Message { message, is_meta: true };
                    transitions.push(Transition::StopHookBlocking);
                    yield LoopEvent::Transition(Transition::StopHookBlocking);
                    state = State {
                        stop_hook_active: true,
                        turn_count: state.turn_count + 1,
                        transition: Some(Transition::StopHookBlocking),
                        ..state
                    };
                    continue;
                }
                if let Some(budget) = token_budget {
                    let continuations = &state.budget_continuations;
                    let diminishing = continuations.len() >= 2
                        && continuations.iter().rev().take(2).all(|t| *t < DIMINISHING_RETURNS_TOKENS);
                    #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
                    let spent = budget_output_tokens as f64 / budget.max(1) as f64;
                    if !diminishing && spent < TOKEN_BUDGET_COMPLETION {
                        let pct = (spent * 100.0).round();
                        let nudge = Message::user_text(format!(
                            "Token budget: {pct}% of {budget} output tokens used. Keep working on the task; do not stop to summarise until it is done."
                        ));
                        state.messages.push(nudge.clone());
                        yield LoopEvent::Message { message: nudge, is_meta: true };
                        transitions.push(Transition::TokenBudgetContinuation);
                        yield LoopEvent::Transition(Transition::TokenBudgetContinuation);
                        let mut budget_continuations = state.budget_continuations.clone();
                        budget_continuations.push(response.usage.output_tokens);
                        state = State {
                            budget_continuations,
                            turn_count: state.turn_count + 1,
                            transition: Some(Transition::TokenBudgetContinuation),
                            ..state
                        };
                        continue;
                    }
                }
                yield terminal(TerminalReason::Completed, &state, &transitions, None);
                return;
            }

            // Phase 6: the remaining tools (some may be done already).
            let mut outcomes: Vec<ToolCallOutcome> = Vec::with_capacity(calls.len());
            {
                let remaining = executor.get_remaining_results();
                futures::pin_mut!(remaining);
                while let Some(outcome) = remaining.next().await {
                    if let Some(denial) = &outcome.denial {
                        yield LoopEvent::PermissionDenied {
                            denial: denial.clone(),
                            message: outcome.output.content.clone(),
                        };
                    }
                    tracing::debug!(tool = %outcome.tool_name, id = %outcome.tool_use_id, is_error = outcome.output.is_error, "tool call finished");
                    outcomes.push(outcome);
                }
            }
            let mut hook_stop: Option<String> = None;
            for outcome in &outcomes {
                for hook in &tool_hooks {
                    if let Some(reason) = hook.after_tool(outcome).await {
                        hook_stop.get_or_insert(reason);
                    }
                }
            }
            let keys: Vec<String> = calls.iter().map(|c| format!("{}:{}", c.name, c.input)).collect();
            call_history.push(keys);
            let mut results: Vec<ContentBlock> = calls
                .iter()
                .map(|call| {
                    let mut block = if let Some(bad) = invalid_tool_input(&call.input) {
                        ContentBlock::tool_result(
                            call.id.clone(),
                            format!("<tool_use_error>InputValidationError: the input of this {} call is not valid JSON ({}); send the input again as a JSON object</tool_use_error>", call.name, bad.error),
                            true,
                        )
                    } else {
                        result_for(call, &outcomes)
                    };
                    if let (Some(warning), ContentBlock::ToolResult { content, .. }) = (repeat_warning(&call_history, call), &mut block) {
                        *content = format!("{}{warning}", content.text()).into();
                    }
                    block
                })
                .collect();

            // Phase 7: abort check after tools.
            if cancel.is_cancelled() {
                results.push(ContentBlock::text(INTERRUPT_MESSAGE_FOR_TOOL_USE));
                let message = Message::user(results);
                state.messages.push(message.clone());
                yield LoopEvent::Message { message, is_meta: false };
                yield terminal(TerminalReason::AbortedTools, &state, &transitions, Some("Interrupted by user".to_owned()));
                return;
            }
            // Phase 8: attachments — files changed on disk since the model read them.
            results.extend(changed_files_reminders(&tool_context, &mut reminded).into_iter().map(ContentBlock::text));
            let message = Message::user(results);
            state.messages.push(message.clone());
            yield LoopEvent::Message { message, is_meta: false };
            if let Some(reason) = hook_stop {
                yield terminal(TerminalReason::HookStopped, &state, &transitions, Some(reason));
                return;
            }

            // Phase 9: max turns.
            let next_turn = state.turn_count + 1;
            if let Some(max) = max_turns
                && next_turn > max
            {
                yield terminal(
                    TerminalReason::MaxTurns,
                    &state,
                    &transitions,
                    Some(format!("Reached maximum number of turns ({max})")),
                );
                return;
            }

            // Phase 10: the next state, replaced whole.
            transitions.push(Transition::NextTurn);
            yield LoopEvent::Transition(Transition::NextTurn);
            state = State {
                messages: state.messages,
                turn_count: next_turn,
                max_output_tokens_recovery_count: 0,
                has_attempted_reactive_compact: false,
                max_output_tokens_override: None,
                stop_hook_active: false,
                budget_continuations: state.budget_continuations,
                transition: Some(Transition::NextTurn),
            };
        }
    }
}
