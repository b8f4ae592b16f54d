//! The pre-0.2 `tasks/send` / `tasks/sendSubscribe` params.
//!
//! Hosted A2A platforms still advertise these names to old clients. Heddle
//! accepts them as aliases of `message/send` / `message/stream`, with params in
//! either the 0.3 `MessageSendParams` shape or the original
//! `TaskSendParams` shape (`{id, sessionId, message, historyLength,
//! pushNotification, metadata}`, parts tagged `type` instead of `kind`).
//!
//! # Lossy points
//!
//! * The original shape let clients pick the task `id`; v1.0 task ids are
//!   server-assigned. The id is carried as [`LegacySend::task_id`]: the server
//!   continues that task if it exists and the caller may see it, and otherwise
//!   starts a new task with its own id.
//! * `sessionId` becomes the message's `contextId`.
//! * Responses go out in the 0.3 shape (`kind`-tagged); legacy clients of
//!   those platforms read them.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::v03::{Message, MessageSendConfiguration, MessageSendParams, PushNotificationConfig};

/// The original `TaskSendParams`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSendParams {
    /// Client-chosen task id.
    #[serde(default)]
    pub id: Option<String>,
    /// Conversation id (0.3 `contextId`).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The message (parts may use `type` for `kind`; `kind` on the message is optional).
    pub message: Message,
    /// Recent messages to return.
    #[serde(default)]
    pub history_length: Option<i32>,
    /// Webhook.
    #[serde(default)]
    pub push_notification: Option<PushNotificationConfig>,
    /// Metadata.
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
}

/// A legacy send, upgraded to 0.3 params plus the client's task id, if any.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacySend {
    /// The request in 0.3 form.
    pub params: MessageSendParams,
    /// The task id the client named in the original shape.
    pub task_id: Option<String>,
}

impl LegacySend {
    /// Reads either shape. The 0.3 shape is recognised by `configuration` or
    /// by the absence of the original's `id`/`sessionId`.
    pub fn from_value(params: Value) -> Result<Self, serde_json::Error> {
        let original = params.get("id").is_some() || params.get("sessionId").is_some();
        if !original {
            return serde_json::from_value(params).map(|params| Self {
                params,
                task_id: None,
            });
        }
        let p: TaskSendParams = serde_json::from_value(params)?;
        let mut message = p.message;
        if message.context_id.is_none() {
            message.context_id = p.session_id;
        }
        let configuration =
            (p.history_length.is_some() || p.push_notification.is_some()).then(|| {
                MessageSendConfiguration {
                    history_length: p.history_length,
                    push_notification_config: p.push_notification,
                    ..Default::default()
                }
            });
        let task_id = p.id.filter(|id| !id.is_empty());
        if message.task_id.is_none() {
            message.task_id.clone_from(&task_id);
        }
        Ok(Self {
            params: MessageSendParams {
                message,
                configuration,
                metadata: p.metadata,
            },
            task_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn original_shape_with_type_tagged_parts_upgrades() {
        let v = json!({"id": "t-1", "sessionId": "s-1", "message": {"role": "user", "messageId": "m",
            "parts": [{"type": "text", "text": "hi"}]}});
        let l = LegacySend::from_value(v).expect("parses");
        assert_eq!(l.task_id.as_deref(), Some("t-1"));
        assert_eq!(l.params.message.context_id.as_deref(), Some("s-1"));
        let v1 = l.params.to_v1().expect("converts");
        assert_eq!(v1.message.expect("message").parts[0].as_text(), Some("hi"));
    }

    #[test]
    fn v03_shape_is_accepted_as_is() {
        let v = json!({"message": {"kind": "message", "role": "user", "messageId": "m",
            "parts": [{"kind": "text", "text": "Hello!"}]}, "configuration": {"blocking": true}});
        let l = LegacySend::from_value(v).expect("parses");
        assert_eq!(l.task_id, None);
        assert_eq!(l.params.configuration.and_then(|c| c.blocking), Some(true));
    }
}
