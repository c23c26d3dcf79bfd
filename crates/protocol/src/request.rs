//! The request body of `POST /v1/messages`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CacheControl, Message};

/// One block of the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemBlock {
    /// Always `"text"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The system prompt text of this block.
    pub text: String,
    /// A prompt-cache breakpoint set on this block, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
}

impl SystemBlock {
    /// A text block of the system prompt, without cache marker.
    #[must_use]
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            kind: "text".to_owned(),
            text: text.into(),
            cache_control: None,
        }
    }
}

/// A tool offered to the model: a client tool (name, description, input schema) or a
/// server tool the API runs itself (`type` such as `web_search_20250305`, its options in
/// `options`, no description or schema).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// A server tool's type; `None` for client tools.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name the model calls the tool by.
    pub name: String,
    /// What the tool does and when to use it, for the model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The JSON Schema of the tool's input object.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub input_schema: Value,
    /// A prompt-cache breakpoint on the tool list, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControl>,
    /// A server tool's own fields (`max_uses`, `allowed_domains`, …).
    #[serde(flatten, default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub options: serde_json::Map<String, Value>,
}

impl ToolDefinition {
    /// A client tool.
    #[must_use]
    pub fn client(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            kind: None,
            name: name.into(),
            description: description.into(),
            input_schema,
            cache_control: None,
            options: serde_json::Map::new(),
        }
    }

    /// A server tool: `{"type": kind, "name": name, …options}`.
    #[must_use]
    pub fn server(
        kind: impl Into<String>,
        name: impl Into<String>,
        options: serde_json::Map<String, Value>,
    ) -> Self {
        Self {
            kind: Some(kind.into()),
            name: name.into(),
            description: String::new(),
            input_schema: Value::Null,
            cache_control: None,
            options,
        }
    }
}

/// The request's `metadata`: who the request is made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    /// An opaque id of the end user, for the API's abuse detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
}

/// Extended thinking: `{"type":"enabled","budget_tokens":N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingConfig {
    /// `"enabled"` (or `"disabled"`).
    #[serde(rename = "type")]
    pub kind: String,
    /// The most tokens the model may think for; required when enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    /// How the thinking comes back: `"summarized"` or `"omitted"` (`--thinking-display`);
    /// the API's default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
}

/// `output_config`: how much effort the model spends (`--effort`) and the token budget
/// it is told about for an agentic task (`--task-budget`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputConfig {
    /// `low`, `medium`, `high`, `xhigh` or `max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// `{"type":"tokens","total":N}`: advisory, the model sees it count down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_budget: Option<TaskBudget>,
}

/// The `task_budget` of [`OutputConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskBudget {
    /// Always `"tokens"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The budget in tokens.
    pub total: u64,
}

/// The body of a Messages API request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessagesRequest {
    /// The model to ask (`claude-sonnet-4-5`, …).
    pub model: String,
    /// The most tokens the answer may have.
    pub max_tokens: u32,
    /// The conversation so far, alternating user and assistant.
    pub messages: Vec<Message>,
    /// The system prompt, as blocks so that parts can carry cache markers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<SystemBlock>,
    /// The tools offered: client tools gyre runs and server tools the API runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolDefinition>,
    /// Whether to stream the answer as server-sent events (gyre always does).
    #[serde(default)]
    pub stream: bool,
    /// Who the request is made for, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Extended thinking, if enabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingConfig>,
    /// Sampling temperature; the API's default when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Extra sequences that end the answer when the model writes one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Effort and task budget, if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_config: Option<OutputConfig>,
}

impl MessagesRequest {
    /// A streaming request with no system prompt and no tools.
    #[must_use]
    pub fn new(model: impl Into<String>, max_tokens: u32, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            max_tokens,
            messages,
            system: Vec::new(),
            tools: Vec::new(),
            stream: true,
            metadata: None,
            thinking: None,
            temperature: None,
            stop_sequences: Vec::new(),
            output_config: None,
        }
    }
}
