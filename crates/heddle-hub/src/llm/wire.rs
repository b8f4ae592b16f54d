//! The chat-completions wire, as much of it as the hub uses: the request,
//! the streamed chunks (`data: {…}` server-sent events ending with
//! `data: [DONE]`, usage in the last chunk when asked for), and error
//! bodies (`{"error": {"message", "type", "code"}}`).
//!
//! Everything read from the endpoint is optional here: a field the
//! endpoint leaves out or sends as `null` is `None`, never a panic.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `POST {base_url}/chat/completions`.
#[derive(Debug, Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) model: &'a str,
    pub(crate) messages: &'a [ChatMessage],
    pub(crate) stream: bool,
    pub(crate) stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    pub(crate) tools: Value,
}

#[derive(Debug, Serialize)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: bool,
}

/// One message of the conversation sent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ChatMessage {
    pub(crate) role: Role,
    pub(crate) content: Content,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Role {
    System,
    User,
    Assistant,
}

/// A message's content: a string, or parts when an image is among them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct ImageUrl {
    pub(crate) url: String,
}

impl ChatMessage {
    pub(crate) fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Content::Text(text.into()),
        }
    }

    /// Characters of text, for the history budget (an image counts as its URL).
    pub(crate) fn chars(&self) -> usize {
        match &self.content {
            Content::Text(t) => t.chars().count(),
            Content::Parts(parts) => parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text { text } => text.chars().count(),
                    ContentPart::ImageUrl { image_url } => image_url.url.chars().count(),
                })
                .sum(),
        }
    }
}

/// The tools every request declares: `ask_user`.
pub(crate) fn tools() -> Value {
    json!([{
        "type": "function",
        "function": {
            "name": super::ASK_USER_TOOL,
            "description": "Ask the user a question and wait for the answer. Use it only when you cannot go on without information the user has.",
            "parameters": {
                "type": "object",
                "properties": {
                    "question": {"type": "string", "description": "The question, as the user will read it"}
                },
                "required": ["question"]
            }
        }
    }])
}

/// One streamed chunk (`chat.completion.chunk`), or an error object some
/// endpoints send in the stream.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Chunk {
    #[serde(default)]
    pub(crate) choices: Option<Vec<Choice>>,
    #[serde(default)]
    pub(crate) usage: Option<Usage>,
    #[serde(default)]
    pub(crate) error: Option<ErrorBody>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Choice {
    #[serde(default)]
    pub(crate) index: Option<u64>,
    #[serde(default)]
    pub(crate) delta: Option<Delta>,
    #[serde(default)]
    pub(crate) finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub(crate) content: Option<String>,
    #[serde(default)]
    pub(crate) refusal: Option<String>,
    #[serde(default)]
    pub(crate) tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub(crate) index: Option<u64>,
    #[serde(default)]
    pub(crate) function: Option<FunctionDelta>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) arguments: Option<String>,
}

/// Token counts, as the endpoint reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct Usage {
    #[serde(default)]
    pub(crate) prompt_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u64>,
    #[serde(default)]
    pub(crate) total_tokens: Option<u64>,
}

/// `{"error": {...}}`, the body of a refused call.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorEnvelope {
    pub(crate) error: ErrorBody,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorBody {
    #[serde(default)]
    pub(crate) message: Option<String>,
    #[serde(default, rename = "type")]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) code: Option<Value>,
}

impl ErrorBody {
    /// `message (type, code)`, as much as the endpoint said.
    pub(crate) fn describe(&self) -> String {
        let mut out = self
            .message
            .clone()
            .unwrap_or_else(|| "no message".to_owned());
        let code = match &self.code {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let tags: Vec<String> = self.kind.iter().cloned().chain(code).collect();
        if !tags.is_empty() {
            out.push_str(&format!(" ({})", tags.join(", ")));
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn chunks_accept_nulls_and_missing_fields() {
        let c: Chunk = serde_json::from_str(
            r#"{"id":"x","choices":[{"index":0,"delta":{"content":null,"tool_calls":null},"finish_reason":null}],"usage":null}"#,
        )
        .unwrap();
        assert_eq!(c.choices.unwrap().len(), 1);
        let c: Chunk = serde_json::from_str(
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
        )
        .unwrap();
        assert_eq!(c.usage.unwrap().total_tokens, Some(5));
        let e: ErrorEnvelope = serde_json::from_str(
            r#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded","param":null}}"#,
        )
        .unwrap();
        assert_eq!(
            e.error.describe(),
            "Rate limit (requests, rate_limit_exceeded)"
        );
    }
}
