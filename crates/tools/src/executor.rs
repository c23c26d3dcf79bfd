//! The streaming tool executor.
//!
//! Tool calls are added while the model is still streaming and start at once when the
//! concurrency rules allow: a safe call may start while only safe calls run, an unsafe
//! call waits for every running call and then runs alone, and later calls queue behind
//! it. Each call moves queued → executing → completed → yielded; results come out in
//! the order the calls were added, whatever order they finish in.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::Stream;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use crate::tool::ExecutorProgressFn;
use crate::{
    CanUseTool, INTERRUPTED_MESSAGE, SIBLING_CANCELLED_MESSAGE, ToolCall, ToolCallOutcome,
    ToolContext, ToolOutput, ToolProgress, ToolRegistry, run_tool_call,
};

/// Calls running at once when `GYRE_MAX_TOOL_CONCURRENCY` is unset (as Claude Code: 10).
pub const DEFAULT_MAX_CONCURRENCY: usize = 10;

/// How an executor runs.
#[derive(Clone)]
pub struct ExecutorOptions {
    /// At most this many calls run at once (at least 1).
    pub max_concurrency: usize,
    /// Receives the progress of every call.
    pub progress: Option<Arc<ExecutorProgressFn>>,
}

impl std::fmt::Debug for ExecutorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorOptions")
            .field("max_concurrency", &self.max_concurrency)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

impl Default for ExecutorOptions {
    fn default() -> Self {
        Self {
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            progress: None,
        }
    }
}

impl ExecutorOptions {
    /// The defaults, with `GYRE_MAX_TOOL_CONCURRENCY` looked up through `lookup`.
    #[must_use]
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let max_concurrency = max_concurrency_from(lookup).unwrap_or(DEFAULT_MAX_CONCURRENCY);
        Self {
            max_concurrency,
            progress: None,
        }
    }
}

/// `GYRE_MAX_TOOL_CONCURRENCY` as a positive number, if it is one.
#[must_use]
pub fn max_concurrency_from(lookup: impl Fn(&str) -> Option<String>) -> Option<usize> {
    lookup("GYRE_MAX_TOOL_CONCURRENCY")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
}

/// Where a call is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    /// Waiting for its turn (a non-concurrent call waits for the ones before it).
    Queued,
    /// Running.
    Executing,
    /// Finished, its result held until the calls before it are yielded.
    Completed,
    /// Its result handed to the loop.
    Yielded,
}

struct Entry {
    call: ToolCall,
    safe: bool,
    status: ToolStatus,
    outcome: Option<ToolCallOutcome>,
    cancel: Option<CancellationToken>,
    task: Option<AbortHandle>,
}

impl Entry {
    fn is_unfinished(&self) -> bool {
        matches!(self.status, ToolStatus::Queued | ToolStatus::Executing)
    }

    /// Ends the call now with `output`, stopping its task if it runs.
    fn finish_with(&mut self, output: ToolOutput) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.outcome = Some(ToolCallOutcome::new(&self.call, output));
        self.status = ToolStatus::Completed;
    }
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    sibling_failed: bool,
    interrupted: bool,
    discarded: bool,
}

struct Shared {
    state: Mutex<State>,
    registry: Arc<ToolRegistry>,
    ctx: ToolContext,
    can_use: Arc<dyn CanUseTool>,
    options: ExecutorOptions,
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// Runs tool calls as they arrive; see the module docs. Must be used inside a tokio
/// runtime (calls run as spawned tasks).
pub struct StreamingToolExecutor {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StreamingToolExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamingToolExecutor")
            .field("statuses", &self.statuses())
            .finish_non_exhaustive()
    }
}

impl StreamingToolExecutor {
    /// An executor with the default options, at most `ctx.max_tool_concurrency`
    /// concurrency-safe calls at once. `ctx.cancel` aborts every call.
    #[must_use]
    pub fn new(
        registry: Arc<ToolRegistry>,
        ctx: ToolContext,
        can_use: Arc<dyn CanUseTool>,
    ) -> Self {
        let mut options = ExecutorOptions::default();
        if let Some(n) = ctx.max_tool_concurrency.filter(|&n| n > 0) {
            options.max_concurrency = n;
        }
        options.progress = ctx.progress.as_ref().map(|sink| Arc::clone(&sink.0));
        Self::with_options(registry, ctx, can_use, options)
    }

    /// An executor with explicit options (the concurrency cap) instead of the environment's.
    #[must_use]
    pub fn with_options(
        registry: Arc<ToolRegistry>,
        ctx: ToolContext,
        can_use: Arc<dyn CanUseTool>,
        options: ExecutorOptions,
    ) -> Self {
        let (changed, _) = watch::channel(0);
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                registry,
                ctx,
                can_use,
                options: ExecutorOptions {
                    max_concurrency: options.max_concurrency.max(1),
                    ..options
                },
                changed,
            }),
        }
    }

    /// Queues a call and starts it if the concurrency rules allow.
    pub fn add_tool(&self, call: ToolCall) {
        let shared = &self.shared;
        {
            let mut state = shared.lock();
            if state.discarded {
                return;
            }
            let safe = shared.registry.is_concurrency_safe(&call.name, &call.input);
            let mut entry = Entry {
                call,
                safe,
                status: ToolStatus::Queued,
                outcome: None,
                cancel: None,
                task: None,
            };
            if state.interrupted || shared.ctx.cancel.is_cancelled() {
                entry.finish_with(ToolOutput::error(INTERRUPTED_MESSAGE));
            } else if state.sibling_failed {
                entry.finish_with(ToolOutput::error(SIBLING_CANCELLED_MESSAGE));
            }
            state.entries.push(entry);
            process_queue(shared, &mut state);
        }
        shared.notify();
    }

    /// The results ready now, in call order: the finished prefix of the calls not yet
    /// yielded. Never waits.
    #[must_use]
    pub fn get_completed_results(&self) -> Vec<ToolCallOutcome> {
        let mut state = self.shared.lock();
        take_ready(&self.shared, &mut state).0
    }

    /// Every result not yet yielded, in call order, waiting for running calls. Ends when
    /// all calls added so far are yielded, at once after [`discard`](Self::discard), and
    /// on abort (`ctx.cancel`) after yielding "Interrupted by user" for unfinished calls.
    pub fn get_remaining_results(&self) -> impl Stream<Item = ToolCallOutcome> + Send + 'static {
        let shared = Arc::clone(&self.shared);
        async_stream::stream! {
            let mut changed = shared.changed.subscribe();
            loop {
                let (ready, done) = {
                    let mut state = shared.lock();
                    take_ready(&shared, &mut state)
                };
                for outcome in ready {
                    yield outcome;
                }
                if done {
                    break;
                }
                tokio::select! {
                    _ = changed.changed() => {}
                    () = shared.ctx.cancel.cancelled() => {}
                }
            }
        }
    }

    /// Abandons every call (model fallback): running calls are stopped, nothing more is
    /// yielded, later `add_tool` calls are ignored.
    pub fn discard(&self) {
        {
            let mut state = self.shared.lock();
            state.discarded = true;
            for entry in &mut state.entries {
                if let Some(cancel) = entry.cancel.take() {
                    cancel.cancel();
                }
                if let Some(task) = entry.task.take() {
                    task.abort();
                }
            }
        }
        self.shared.notify();
    }

    /// The status of every call, in call order.
    #[must_use]
    pub fn statuses(&self) -> Vec<ToolStatus> {
        self.shared
            .lock()
            .entries
            .iter()
            .map(|e| e.status)
            .collect()
    }

    /// Whether some call is still queued or executing.
    #[must_use]
    pub fn has_unfinished(&self) -> bool {
        self.shared.lock().entries.iter().any(Entry::is_unfinished)
    }
}

/// Takes the finished prefix of unyielded calls; `true` when every call is yielded (or
/// the executor was discarded). Applies a pending abort first.
fn take_ready(shared: &Shared, state: &mut State) -> (Vec<ToolCallOutcome>, bool) {
    if state.discarded {
        return (Vec::new(), true);
    }
    if shared.ctx.cancel.is_cancelled() && !state.interrupted {
        state.interrupted = true;
        for entry in state.entries.iter_mut().filter(|e| e.is_unfinished()) {
            entry.finish_with(ToolOutput::error(INTERRUPTED_MESSAGE));
        }
    }
    let mut ready = Vec::new();
    for entry in &mut state.entries {
        match entry.status {
            ToolStatus::Yielded => {}
            ToolStatus::Completed => {
                entry.status = ToolStatus::Yielded;
                if let Some(outcome) = entry.outcome.take() {
                    ready.push(outcome);
                }
            }
            ToolStatus::Queued | ToolStatus::Executing => return (ready, false),
        }
    }
    (ready, true)
}

/// Starts queued calls in order while the rules allow; the first that cannot start
/// blocks the ones behind it, so an unsafe call is never overtaken.
fn process_queue(shared: &Arc<Shared>, state: &mut State) {
    if state.discarded || state.interrupted {
        return;
    }
    let mut executing = 0;
    let mut all_safe = true;
    for entry in &state.entries {
        if entry.status == ToolStatus::Executing {
            executing += 1;
            all_safe &= entry.safe;
        }
    }
    for index in 0..state.entries.len() {
        let entry = &state.entries[index];
        if entry.status != ToolStatus::Queued {
            continue;
        }
        let fits = executing == 0 || (entry.safe && all_safe);
        if !fits || executing >= shared.options.max_concurrency {
            break;
        }
        executing += 1;
        all_safe &= entry.safe;
        start(shared, state, index);
    }
}

fn start(shared: &Arc<Shared>, state: &mut State, index: usize) {
    let cancel = shared.ctx.cancel.child_token();
    let entry = &mut state.entries[index];
    entry.status = ToolStatus::Executing;
    entry.cancel = Some(cancel.clone());
    let call = entry.call.clone();
    let task_shared = Arc::clone(shared);
    let handle = tokio::spawn(async move {
        let ctx = task_shared.ctx.with_cancel(cancel);
        let progress_sink = task_shared.options.progress.clone();
        let id = call.id.clone();
        let progress = move |p: ToolProgress| {
            if let Some(sink) = &progress_sink {
                sink(&id, p);
            }
        };
        let outcome = run_tool_call(
            &task_shared.registry,
            &call,
            &ctx,
            task_shared.can_use.as_ref(),
            &progress,
        )
        .await;
        finish(&task_shared, index, outcome);
    });
    entry.task = Some(handle.abort_handle());
}

fn finish(shared: &Arc<Shared>, index: usize, mut outcome: ToolCallOutcome) {
    {
        let mut state = shared.lock();
        let Some(entry) = state.entries.get_mut(index) else {
            return;
        };
        if entry.status != ToolStatus::Executing {
            // Already ended by an abort, a sibling failure or a discard.
            return;
        }
        if shared.ctx.cancel.is_cancelled() {
            outcome.output = ToolOutput::error(INTERRUPTED_MESSAGE);
        }
        // A failing Bash call cancels its siblings: Bash commands often depend on each
        // other, independent reads do not.
        let cascades = outcome.tool_name == "Bash"
            && outcome.output.is_error
            && outcome.denial.is_none()
            && !shared.ctx.cancel.is_cancelled();
        entry.task = None;
        entry.cancel = None;
        entry.outcome = Some(outcome);
        entry.status = ToolStatus::Completed;
        if cascades {
            state.sibling_failed = true;
            for other in state.entries.iter_mut().filter(|e| e.is_unfinished()) {
                other.finish_with(ToolOutput::error(SIBLING_CANCELLED_MESSAGE));
            }
        }
        process_queue(shared, &mut state);
    }
    shared.notify();
}
