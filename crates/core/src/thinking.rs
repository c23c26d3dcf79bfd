//! `--max-thinking-tokens` / `--thinking`: extended thinking on every main-loop request;
//! `--effort` and `--task-budget`: its `output_config`.
//!
//! The loop builds requests without these parameters; [`ThinkingDeps`] wraps the
//! model seam and adds them to the request in place (the loop holds the only reference,
//! so nothing is copied), with the budget kept below each request's `max_tokens` (the
//! API refuses a budget at or above it). Thinking blocks and their signatures come back
//! in the assistant message and are sent again as they were.

use std::sync::Arc;

use gyre_loop::{ModelStream, QueryDeps};
use gyre_protocol::{MessagesRequest, OutputConfig, TaskBudget, ThinkingConfig};
use tokio_util::sync::CancellationToken;

/// The smallest budget the API accepts.
const MIN_BUDGET: u32 = 1024;

/// The budget of `--thinking enabled` without `--max-thinking-tokens`.
const DEFAULT_BUDGET: u32 = 10_000;

/// A `--thinking` value gyre does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--thinking {mode:?}: use adaptive, enabled or disabled")]
pub struct UnknownThinkingMode {
    /// The value given.
    pub mode: String,
}

/// A `--thinking-display` value the API does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--thinking-display {display:?}: use summarized or omitted")]
pub struct UnknownThinkingDisplay {
    /// The value given.
    pub display: String,
}

/// `--thinking-display`: the `display` of the request's `thinking` parameter, whether
/// the thinking comes back summarized or is left out of the answer (its signature
/// still comes, so it goes back to the API as before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingDisplay {
    /// `"summarized"`.
    Summarized,
    /// `"omitted"`.
    Omitted,
}

impl ThinkingDisplay {
    /// From the flag's value; `None` when it is not given.
    ///
    /// # Errors
    /// [`UnknownThinkingDisplay`] for another value.
    pub fn from_flag(value: Option<&str>) -> Result<Option<Self>, UnknownThinkingDisplay> {
        match value {
            None => Ok(None),
            Some("summarized") => Ok(Some(Self::Summarized)),
            Some("omitted") => Ok(Some(Self::Omitted)),
            Some(other) => Err(UnknownThinkingDisplay {
                display: other.to_owned(),
            }),
        }
    }

    fn wire(self) -> &'static str {
        match self {
            Self::Summarized => "summarized",
            Self::Omitted => "omitted",
        }
    }
}

/// An `--effort` value the API does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--effort {effort:?}: use low, medium, high, xhigh or max")]
pub struct UnknownEffort {
    /// The value given.
    pub effort: String,
}

/// The request's `output_config` from `--effort` and `--task-budget`; `None` when
/// neither is given.
///
/// # Errors
/// [`UnknownEffort`] for an effort level the API does not take.
pub fn output_config(
    effort: Option<&str>,
    task_budget: Option<u64>,
) -> Result<Option<OutputConfig>, UnknownEffort> {
    const LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];
    if let Some(effort) = effort
        && !LEVELS.contains(&effort)
    {
        return Err(UnknownEffort {
            effort: effort.to_owned(),
        });
    }
    Ok(
        (effort.is_some() || task_budget.is_some()).then(|| OutputConfig {
            effort: effort.map(str::to_owned),
            task_budget: task_budget.map(|total| TaskBudget {
                kind: "tokens".to_owned(),
                total,
            }),
        }),
    )
}

/// What the flags ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// `{"type":"enabled","budget_tokens":N}`.
    Budget(u32),
    /// `{"type":"adaptive"}`: the model decides.
    Adaptive,
}

impl Thinking {
    /// From `--max-thinking-tokens N` and `--thinking adaptive|enabled|disabled`.
    /// `None`: no thinking (`0`, `disabled`, or neither flag).
    ///
    /// # Errors
    /// [`UnknownThinkingMode`] for an unknown `--thinking` value.
    pub fn from_flags(
        max_tokens: Option<u32>,
        mode: Option<&str>,
    ) -> Result<Option<Self>, UnknownThinkingMode> {
        match (mode, max_tokens) {
            (Some("disabled"), _) | (None, None | Some(0)) => Ok(None),
            (Some("adaptive"), _) => Ok(Some(Self::Adaptive)),
            (Some("enabled"), None | Some(0)) => Ok(Some(Self::Budget(DEFAULT_BUDGET))),
            (Some("enabled") | None, Some(n)) => Ok(Some(Self::Budget(n))),
            (Some(other), _) => Err(UnknownThinkingMode {
                mode: other.to_owned(),
            }),
        }
    }

    /// The parameter for a request with `max_tokens`; `None` when no budget fits.
    #[must_use]
    pub fn config(self, max_tokens: u32) -> Option<ThinkingConfig> {
        match self {
            Self::Adaptive => Some(ThinkingConfig {
                kind: "adaptive".to_owned(),
                budget_tokens: None,
                display: None,
            }),
            Self::Budget(n) => {
                let budget = n.min(max_tokens.saturating_sub(1));
                (budget >= MIN_BUDGET).then(|| ThinkingConfig {
                    kind: "enabled".to_owned(),
                    budget_tokens: Some(budget),
                    display: None,
                })
            }
        }
    }
}

/// The model seam with thinking and the output config added to each request.
pub struct ThinkingDeps {
    inner: Arc<dyn QueryDeps>,
    thinking: Option<Thinking>,
    display: Option<ThinkingDisplay>,
    output: Option<OutputConfig>,
}

impl std::fmt::Debug for ThinkingDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThinkingDeps")
            .field("thinking", &self.thinking)
            .field("display", &self.display)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

impl ThinkingDeps {
    #[must_use]
    pub fn new(inner: Arc<dyn QueryDeps>, thinking: Thinking) -> Self {
        Self {
            inner,
            thinking: Some(thinking),
            display: None,
            output: None,
        }
    }

    /// `inner` unchanged when there is nothing to add. `display` goes with the
    /// thinking (none without it).
    #[must_use]
    pub fn wrap(
        inner: Arc<dyn QueryDeps>,
        thinking: Option<Thinking>,
        display: Option<ThinkingDisplay>,
        output: Option<OutputConfig>,
    ) -> Arc<dyn QueryDeps> {
        if thinking.is_none() && output.is_none() {
            return inner;
        }
        Arc::new(Self {
            inner,
            thinking,
            display,
            output,
        })
    }
}

impl QueryDeps for ThinkingDeps {
    fn call_model(
        &self,
        request: &mut Arc<MessagesRequest>,
        fallback_model: Option<String>,
        cancel: CancellationToken,
    ) -> ModelStream {
        if request.thinking.is_none()
            && let Some(config) = self
                .thinking
                .and_then(|thinking| thinking.config(request.max_tokens))
        {
            let config = ThinkingConfig {
                display: self.display.map(|d| d.wire().to_owned()),
                ..config
            };
            // Copies the request only if someone else holds it too (the loop does not).
            let with = Arc::make_mut(request);
            with.thinking = Some(config);
            // Thinking does not combine with a custom temperature.
            with.temperature = None;
        }
        if request.output_config.is_none() && self.output.is_some() {
            Arc::make_mut(request)
                .output_config
                .clone_from(&self.output);
        }
        self.inner.call_model(request, fallback_model, cancel)
    }

    fn fork(&self) -> Option<Arc<dyn QueryDeps>> {
        let inner = self.inner.fork()?;
        Some(Self::wrap(
            inner,
            self.thinking,
            self.display,
            self.output.clone(),
        ))
    }

    fn uuid(&self) -> String {
        self.inner.uuid()
    }

    fn now(&self) -> std::time::SystemTime {
        self.inner.now()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use gyre_protocol::Message;

    use super::*;

    /// Keeps the request it was asked to send.
    #[derive(Default)]
    struct Sent(Mutex<Option<Arc<MessagesRequest>>>);

    impl QueryDeps for Sent {
        fn call_model(
            &self,
            request: &mut Arc<MessagesRequest>,
            _fallback_model: Option<String>,
            _cancel: CancellationToken,
        ) -> ModelStream {
            *self.0.lock().unwrap() = Some(Arc::clone(request));
            Box::pin(futures::stream::empty())
        }
    }

    #[test]
    fn thinking_is_added_to_the_request_in_place_without_a_copy() {
        let sent = Arc::new(Sent::default());
        let deps = ThinkingDeps::new(
            Arc::clone(&sent) as Arc<dyn QueryDeps>,
            Thinking::Budget(4_000),
        );
        let mut body = MessagesRequest::new("m", 32_000, vec![Message::user_text("hi")]);
        body.temperature = Some(0.5);
        let mut request = Arc::new(body);
        let at = Arc::as_ptr(&request);
        drop(deps.call_model(&mut request, None, CancellationToken::new()));
        assert_eq!(
            Arc::as_ptr(&request),
            at,
            "the caller's request, not a copy"
        );
        assert_eq!(request.thinking, Thinking::Budget(4_000).config(32_000));
        assert_eq!(request.temperature, None);
        let inner = sent.0.lock().unwrap().take().unwrap();
        assert!(Arc::ptr_eq(&inner, &request));
        // Sent again (a fallback), it is left as it is.
        drop(deps.call_model(&mut request, None, CancellationToken::new()));
        assert_eq!(Arc::as_ptr(&request), at);
    }

    #[test]
    fn effort_and_task_budget_go_in_output_config() {
        let sent = Arc::new(Sent::default());
        let output = output_config(Some("high"), Some(400_000)).unwrap();
        let deps = ThinkingDeps::wrap(Arc::clone(&sent) as Arc<dyn QueryDeps>, None, None, output);
        let mut request = Arc::new(MessagesRequest::new("m", 32_000, vec![]));
        drop(deps.call_model(&mut request, None, CancellationToken::new()));
        let body = serde_json::to_value(&*request).unwrap();
        assert_eq!(
            body["output_config"],
            serde_json::json!({"effort": "high", "task_budget": {"type": "tokens", "total": 400_000}})
        );
        assert_eq!(body.get("thinking"), None);
        assert_eq!(output_config(None, None), Ok(None));
        let wrong = output_config(Some("loud"), None).unwrap_err().to_string();
        assert!(wrong.contains("xhigh"), "{wrong}");
    }

    #[test]
    fn the_display_goes_with_the_thinking_parameter() {
        let sent = Arc::new(Sent::default());
        let display = ThinkingDisplay::from_flag(Some("omitted")).unwrap();
        let deps = ThinkingDeps::wrap(
            Arc::clone(&sent) as Arc<dyn QueryDeps>,
            Some(Thinking::Adaptive),
            display,
            None,
        );
        let mut request = Arc::new(MessagesRequest::new("m", 32_000, vec![]));
        drop(deps.call_model(&mut request, None, CancellationToken::new()));
        let body = serde_json::to_value(&*request).unwrap();
        assert_eq!(
            body["thinking"],
            serde_json::json!({"type": "adaptive", "display": "omitted"})
        );
        let wrong = ThinkingDisplay::from_flag(Some("loud"))
            .unwrap_err()
            .to_string();
        assert!(wrong.contains("summarized or omitted"), "{wrong}");
    }

    #[test]
    fn flags_choose_the_mode() {
        assert_eq!(Thinking::from_flags(None, None), Ok(None));
        assert_eq!(Thinking::from_flags(Some(0), None), Ok(None));
        assert_eq!(
            Thinking::from_flags(Some(8000), None),
            Ok(Some(Thinking::Budget(8000)))
        );
        assert_eq!(
            Thinking::from_flags(None, Some("adaptive")),
            Ok(Some(Thinking::Adaptive))
        );
        assert_eq!(Thinking::from_flags(Some(8000), Some("disabled")), Ok(None));
        assert!(
            Thinking::from_flags(None, Some("loud"))
                .unwrap_err()
                .to_string()
                .contains("adaptive")
        );
    }

    #[test]
    fn the_budget_stays_below_max_tokens_or_thinking_is_left_out() {
        let c = Thinking::Budget(50_000).config(32_000).unwrap();
        assert_eq!(c.budget_tokens, Some(31_999));
        assert_eq!(
            Thinking::Budget(4_000)
                .config(32_000)
                .unwrap()
                .budget_tokens,
            Some(4_000)
        );
        assert_eq!(Thinking::Budget(4_000).config(1_000), None);
    }
}
