//! The A2A v0.3 JSON model and its conversion to and from v1.0.
//!
//! Types mirror the v0.3 JSON Schema (`a2a.json`). Every value that leaves
//! Heddle in v0.3 form carries its `kind`; on input a missing `kind` is
//! tolerated where the position makes the type unambiguous.
//!
//! # Lossy points
//!
//! Upgrading (v0.3 → v1.0) and downgrading (v1.0 → v0.3) are exact for
//! everything both versions can say, except:
//!
//! * **Part media type and filename on text and data parts**: v1.0 allows
//!   `mediaType`/`filename` on any part; v0.3 has them only on file parts.
//!   Downgrading drops them from text and data parts.
//! * **Non-object data parts**: v1.0 `data` is any JSON value; v0.3 `data`
//!   must be an object. Downgrading wraps a non-object as `{"value": …}`;
//!   upgrading cannot tell such a wrapper from a real object and keeps it.
//! * **`historyLength: 0`**: in v0.3 it means "no limit", in v1.0 "no history".
//!   Upgrading maps v0.3 `0` to "unset" (the server default, all history).
//! * **`blocking`**: v0.3 `blocking` absent is read as blocking (as the
//!   official SDKs do); downgrading writes `blocking` only when the v1.0
//!   request asks to return immediately.
//! * **`final`**: v1.0 has no `final` flag; downgrading sets it on a status
//!   update whose state is terminal or interrupted (the stream ends there).
//! * **Push authentication**: v0.3 lists several `schemes`, v1.0 holds one
//!   `scheme`. Upgrading keeps the first; an `authentication` with no
//!   schemes (`{}`) is read as none, since v1.0 requires a scheme.
//! * **Security schemes**: v0.3 OAuth2 may declare several flows at once; v1.0
//!   holds one. Upgrading keeps the first of authorizationCode,
//!   clientCredentials, implicit, password. v1.0 `deviceCode` flows and the
//!   `pkceRequired` flag do not exist in v0.3 and are dropped on downgrade.
//! * **Agent Card**: v0.3 `stateTransitionHistory` has no v1.0 field and is
//!   dropped; v1.0 `tenant` on interfaces and per-interface protocol versions
//!   collapse into v0.3's `url` + `additionalInterfaces` (see
//!   [`AgentCard::from_v1`]).
//! * **Card `protocolVersion`**: downgrading always writes `"0.3.0"`; only
//!   major.minor counts (v1 §3.6), so `"0.3"` and `"0.3.0"` are the same.
//!   `preferredTransport` is written only when it is not the default JSONRPC.
//! * **Timestamps** that are not RFC 3339 are dropped when upgrading.
//! * **Task state `unknown`** ↔ `TASK_STATE_UNSPECIFIED`.

use std::collections::BTreeMap;

use base64::Engine as _;
use heddle_proto::{
    v1,
    wkt::{Struct, Timestamp, Value as PbValue},
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

type JsonObject = Map<String, Value>;

macro_rules! kind_marker {
    ($(#[$m:meta])* $name:ident = $tag:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name;

        impl $name {
            /// The tag this marker stands for.
            pub const TAG: &'static str = $tag;
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($tag)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                if s == $tag {
                    Ok($name)
                } else {
                    Err(serde::de::Error::custom(format!("expected kind {:?}, found {:?}", $tag, s)))
                }
            }
        }
    };
}

kind_marker!(/// `"kind": "task"`.
    TaskKind = "task");
kind_marker!(/// `"kind": "message"`.
    MessageKind = "message");
kind_marker!(/// `"kind": "status-update"`.
    StatusUpdateKind = "status-update");
kind_marker!(/// `"kind": "artifact-update"`.
    ArtifactUpdateKind = "artifact-update");

/// v0.3 task states (lowercase, hyphenated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// Received, not yet started.
    Submitted,
    /// Being worked on.
    Working,
    /// Waiting for the caller's input.
    InputRequired,
    /// Finished successfully.
    Completed,
    /// Canceled by the caller.
    Canceled,
    /// Finished with an error.
    Failed,
    /// Refused by the agent.
    Rejected,
    /// Waiting for credentials.
    AuthRequired,
    /// Unknown state.
    Unknown,
}

impl TaskState {
    /// The v1.0 state.
    pub fn to_v1(self) -> v1::TaskState {
        use v1::TaskState as S;
        match self {
            Self::Submitted => S::Submitted,
            Self::Working => S::Working,
            Self::InputRequired => S::InputRequired,
            Self::Completed => S::Completed,
            Self::Canceled => S::Canceled,
            Self::Failed => S::Failed,
            Self::Rejected => S::Rejected,
            Self::AuthRequired => S::AuthRequired,
            Self::Unknown => S::Unspecified,
        }
    }

    /// The v0.3 state of a v1.0 state.
    pub fn from_v1(s: v1::TaskState) -> Self {
        use v1::TaskState as S;
        match s {
            S::Submitted => Self::Submitted,
            S::Working => Self::Working,
            S::InputRequired => Self::InputRequired,
            S::Completed => Self::Completed,
            S::Canceled => Self::Canceled,
            S::Failed => Self::Failed,
            S::Rejected => Self::Rejected,
            S::AuthRequired => Self::AuthRequired,
            S::Unspecified => Self::Unknown,
        }
    }
}

/// v0.3 roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The caller.
    User,
    /// The agent.
    Agent,
}

/// The content of a v0.3 file part: bytes (base64) or a URI.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileContent {
    /// File name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Media type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Base64 content (FileWithBytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
    /// Location of the content (FileWithUri).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A v0.3 part: TextPart, FilePart or DataPart, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Part {
    /// `{"kind":"text","text":…}`
    Text {
        /// The text.
        text: String,
        /// Part metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<JsonObject>,
    },
    /// `{"kind":"file","file":{…}}`
    File {
        /// Bytes or URI.
        file: FileContent,
        /// Part metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<JsonObject>,
    },
    /// `{"kind":"data","data":{…}}`
    Data {
        /// Structured content.
        data: JsonObject,
        /// Part metadata.
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<JsonObject>,
    },
}

/// The flat shape a part is read through, so `kind` (or the pre-0.2 `type`)
/// may be missing or come in any order and errors name the real problem.
#[derive(Deserialize)]
struct RawPart {
    kind: Option<String>,
    #[serde(rename = "type")]
    legacy_type: Option<String>,
    text: Option<String>,
    file: Option<FileContent>,
    data: Option<JsonObject>,
    metadata: Option<JsonObject>,
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = RawPart::deserialize(d)?;
        let kind = raw.kind.or(raw.legacy_type);
        let kind = match kind.as_deref() {
            Some(k) => k.to_owned(),
            // Infer from the one content member present.
            None => match (&raw.text, &raw.file, &raw.data) {
                (Some(_), None, None) => "text".into(),
                (None, Some(_), None) => "file".into(),
                (None, None, Some(_)) => "data".into(),
                _ => return Err(D::Error::custom("part needs a kind of text, file or data")),
            },
        };
        let metadata = raw.metadata;
        match kind.as_str() {
            "text" => raw
                .text
                .map(|text| Part::Text { text, metadata })
                .ok_or_else(|| D::Error::missing_field("text")),
            "file" => {
                let file = raw.file.ok_or_else(|| D::Error::missing_field("file"))?;
                match (&file.bytes, &file.uri) {
                    (Some(_), None) | (None, Some(_)) => Ok(Part::File { file, metadata }),
                    _ => Err(D::Error::custom("file needs exactly one of bytes or uri")),
                }
            }
            "data" => raw
                .data
                .map(|data| Part::Data { data, metadata })
                .ok_or_else(|| D::Error::missing_field("data")),
            other => Err(D::Error::unknown_variant(other, &["text", "file", "data"])),
        }
    }
}

/// A v0.3 message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Always `"message"`.
    #[serde(default)]
    pub kind: MessageKind,
    /// Client- or agent-assigned id.
    pub message_id: String,
    /// Sender.
    pub role: Role,
    /// Content.
    pub parts: Vec<Part>,
    /// Conversation id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// Task this message belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Earlier tasks referred to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_task_ids: Option<Vec<String>>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// A v0.3 task status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// State.
    pub state: TaskState,
    /// Agent message explaining the state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO 8601 time of the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// A v0.3 artifact.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Id, unique within the task.
    pub artifact_id: String,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// A v0.3 task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Always `"task"`.
    #[serde(default)]
    pub kind: TaskKind,
    /// Server-assigned id.
    pub id: String,
    /// Conversation id.
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<Vec<Artifact>>,
    /// Messages exchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<Vec<Message>>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// A v0.3 `status-update` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// Always `"status-update"`.
    #[serde(default)]
    pub kind: StatusUpdateKind,
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// New status.
    pub status: TaskStatus,
    /// True on the last event of a stream.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// A v0.3 `artifact-update` event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// Always `"artifact-update"`.
    #[serde(default)]
    pub kind: ArtifactUpdateKind,
    /// Task id.
    pub task_id: String,
    /// Context id.
    pub context_id: String,
    /// The artifact (or chunk).
    pub artifact: Artifact,
    /// Append these parts to the artifact with the same id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    /// This chunk ends the artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// A v0.3 send result: a bare Task or Message.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SendResult {
    /// A task.
    Task(Task),
    /// A direct reply.
    Message(Message),
}

/// One v0.3 stream event, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamEvent {
    /// Task snapshot.
    Task(Task),
    /// A message.
    Message(Message),
    /// Status change.
    StatusUpdate(TaskStatusUpdateEvent),
    /// Artifact chunk.
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl<'de> Deserialize<'de> for SendResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match StreamEvent::deserialize(d)? {
            StreamEvent::Task(t) => Ok(Self::Task(t)),
            StreamEvent::Message(m) => Ok(Self::Message(m)),
            _ => Err(serde::de::Error::custom("expected a task or message")),
        }
    }
}

impl<'de> Deserialize<'de> for StreamEvent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = Value::deserialize(d)?;
        let kind = v.get("kind").and_then(Value::as_str).map(str::to_owned);
        let kind = kind.unwrap_or_else(|| {
            if v.get("artifact").is_some() {
                "artifact-update".into()
            } else if v.get("messageId").is_some() {
                "message".into()
            } else if v.get("taskId").is_some() {
                "status-update".into()
            } else {
                "task".into()
            }
        });
        let r = match kind.as_str() {
            "task" => serde_json::from_value(v).map(Self::Task),
            "message" => serde_json::from_value(v).map(Self::Message),
            "status-update" => serde_json::from_value(v).map(Self::StatusUpdate),
            "artifact-update" => serde_json::from_value(v).map(Self::ArtifactUpdate),
            other => {
                return Err(D::Error::unknown_variant(
                    other,
                    &["task", "message", "status-update", "artifact-update"],
                ));
            }
        };
        r.map_err(D::Error::custom)
    }
}

/// v0.3 push authentication: scheme names and credentials.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationAuthenticationInfo {
    /// Scheme names (`Bearer`, …); none (or absent) is no authentication.
    #[serde(default)]
    pub schemes: Vec<String>,
    /// Credentials for the receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A v0.3 push notification config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationConfig {
    /// Config id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Webhook URL.
    pub url: String,
    /// Token echoed to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// How to authenticate to the webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushNotificationAuthenticationInfo>,
}

/// A v0.3 push config bound to a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    /// Task id.
    pub task_id: String,
    /// The config.
    pub push_notification_config: PushNotificationConfig,
}

/// v0.3 `MessageSendConfiguration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration {
    /// Media types the client accepts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_output_modes: Option<Vec<String>>,
    /// How many recent messages to return (0 = all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Webhook for this task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushNotificationConfig>,
    /// Wait for a terminal or interrupted state (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
}

/// v0.3 `MessageSendParams` (`message/send`, `message/stream`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams {
    /// The message.
    pub message: Message,
    /// Options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration>,
    /// Request metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// v0.3 `TaskQueryParams` (`tasks/get`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams {
    /// Task id.
    pub id: String,
    /// How many recent messages (0 = all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_length: Option<i32>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// v0.3 `TaskIdParams` (`tasks/cancel`, `tasks/resubscribe`, push list).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// Task id.
    pub id: String,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

/// v0.3 push get/delete params (`id` is the task id).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushConfigParams {
    /// Task id.
    pub id: String,
    /// Config id (required for delete; optional for get).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config_id: Option<String>,
    /// Metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
}

mod card;
mod convert;
mod security;

pub use card::*;
pub use convert::*;
pub use security::*;
