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

// ---- conversion helpers ---------------------------------------------------------

fn obj_to_struct(o: Option<JsonObject>) -> Option<Struct> {
    o.map(Struct)
}

fn struct_to_obj(s: &Option<Struct>) -> Option<JsonObject> {
    s.as_ref().map(|s| s.0.clone())
}

fn opt_string(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn opt_vec(v: &[String]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| v.to_vec())
}

impl Part {
    /// Upgrade to v1.0. Undecodable base64 is an error naming the field.
    pub fn to_v1(&self) -> Result<v1::Part, String> {
        use v1::part::Content;
        Ok(match self {
            Part::Text { text, metadata } => v1::Part {
                content: Some(Content::Text(text.clone())),
                metadata: obj_to_struct(metadata.clone()),
                ..Default::default()
            },
            Part::File { file, metadata } => {
                let content = match (&file.bytes, &file.uri) {
                    (Some(b), _) => {
                        Content::Raw(decode_base64(b).ok_or("file.bytes: not valid base64")?)
                    }
                    (None, Some(u)) => Content::Url(u.clone()),
                    (None, None) => return Err("file: needs bytes or uri".into()),
                };
                v1::Part {
                    content: Some(content),
                    metadata: obj_to_struct(metadata.clone()),
                    filename: file.name.clone().unwrap_or_default(),
                    media_type: file.mime_type.clone().unwrap_or_default(),
                }
            }
            Part::Data { data, metadata } => v1::Part {
                content: Some(Content::Data(PbValue(Value::Object(data.clone())))),
                metadata: obj_to_struct(metadata.clone()),
                ..Default::default()
            },
        })
    }

    /// Downgrade from v1.0 (see the module's lossy points). A part with no
    /// content becomes an empty text part.
    pub fn from_v1(p: &v1::Part) -> Self {
        use v1::part::Content;
        let metadata = struct_to_obj(&p.metadata);
        let file = |bytes, uri| FileContent {
            name: opt_string(&p.filename),
            mime_type: opt_string(&p.media_type),
            bytes,
            uri,
        };
        match &p.content {
            Some(Content::Text(t)) => Part::Text {
                text: t.clone(),
                metadata,
            },
            Some(Content::Raw(b)) => Part::File {
                file: file(
                    Some(base64::engine::general_purpose::STANDARD.encode(b)),
                    None,
                ),
                metadata,
            },
            Some(Content::Url(u)) => Part::File {
                file: file(None, Some(u.clone())),
                metadata,
            },
            Some(Content::Data(PbValue(Value::Object(o)))) => Part::Data {
                data: o.clone(),
                metadata,
            },
            Some(Content::Data(PbValue(other))) => {
                let mut data = JsonObject::new();
                data.insert("value".into(), other.clone());
                Part::Data { data, metadata }
            }
            None => Part::Text {
                text: String::new(),
                metadata,
            },
        }
    }
}

pub use heddle_proto::decode_base64;

fn parts_to_v1(parts: &[Part], path: &str) -> Result<Vec<v1::Part>, String> {
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| p.to_v1().map_err(|e| format!("{path}[{i}].{e}")))
        .collect()
}

impl Message {
    /// Upgrade to v1.0.
    pub fn to_v1(&self) -> Result<v1::Message, String> {
        Ok(v1::Message {
            message_id: self.message_id.clone(),
            context_id: self.context_id.clone().unwrap_or_default(),
            task_id: self.task_id.clone().unwrap_or_default(),
            role: match self.role {
                Role::User => v1::Role::User,
                Role::Agent => v1::Role::Agent,
            } as i32,
            parts: parts_to_v1(&self.parts, "parts")?,
            metadata: obj_to_struct(self.metadata.clone()),
            extensions: self.extensions.clone().unwrap_or_default(),
            reference_task_ids: self.reference_task_ids.clone().unwrap_or_default(),
        })
    }

    /// Downgrade from v1.0. An unspecified role becomes `user`.
    pub fn from_v1(m: &v1::Message) -> Self {
        Self {
            kind: MessageKind,
            message_id: m.message_id.clone(),
            role: if m.role() == v1::Role::Agent {
                Role::Agent
            } else {
                Role::User
            },
            parts: m.parts.iter().map(Part::from_v1).collect(),
            context_id: opt_string(&m.context_id),
            task_id: opt_string(&m.task_id),
            reference_task_ids: opt_vec(&m.reference_task_ids),
            extensions: opt_vec(&m.extensions),
            metadata: struct_to_obj(&m.metadata),
        }
    }
}

impl TaskStatus {
    /// Upgrade to v1.0.
    pub fn to_v1(&self) -> Result<v1::TaskStatus, String> {
        Ok(v1::TaskStatus {
            state: self.state.to_v1() as i32,
            message: self
                .message
                .as_ref()
                .map(Message::to_v1)
                .transpose()
                .map_err(|e| format!("message.{e}"))?,
            timestamp: self
                .timestamp
                .as_deref()
                .and_then(|t| t.parse::<Timestamp>().ok()),
        })
    }

    /// Downgrade from v1.0.
    pub fn from_v1(s: &v1::TaskStatus) -> Self {
        Self {
            state: TaskState::from_v1(s.state()),
            message: s.message.as_ref().map(Message::from_v1),
            timestamp: s.timestamp.map(|t| t.to_string()),
        }
    }
}

impl Artifact {
    /// Upgrade to v1.0.
    pub fn to_v1(&self) -> Result<v1::Artifact, String> {
        Ok(v1::Artifact {
            artifact_id: self.artifact_id.clone(),
            name: self.name.clone().unwrap_or_default(),
            description: self.description.clone().unwrap_or_default(),
            parts: parts_to_v1(&self.parts, "parts")?,
            metadata: obj_to_struct(self.metadata.clone()),
            extensions: self.extensions.clone().unwrap_or_default(),
        })
    }

    /// Downgrade from v1.0.
    pub fn from_v1(a: &v1::Artifact) -> Self {
        Self {
            artifact_id: a.artifact_id.clone(),
            name: opt_string(&a.name),
            description: opt_string(&a.description),
            parts: a.parts.iter().map(Part::from_v1).collect(),
            metadata: struct_to_obj(&a.metadata),
            extensions: opt_vec(&a.extensions),
        }
    }
}

impl Task {
    /// Upgrade to v1.0.
    pub fn to_v1(&self) -> Result<v1::Task, String> {
        Ok(v1::Task {
            id: self.id.clone(),
            context_id: self.context_id.clone(),
            status: Some(self.status.to_v1().map_err(|e| format!("status.{e}"))?),
            artifacts: self
                .artifacts
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, a)| a.to_v1().map_err(|e| format!("artifacts[{i}].{e}")))
                .collect::<Result<_, _>>()?,
            history: self
                .history
                .iter()
                .flatten()
                .enumerate()
                .map(|(i, m)| m.to_v1().map_err(|e| format!("history[{i}].{e}")))
                .collect::<Result<_, _>>()?,
            metadata: obj_to_struct(self.metadata.clone()),
        })
    }

    /// Downgrade from v1.0. Empty `artifacts`/`history` stay absent.
    pub fn from_v1(t: &v1::Task) -> Self {
        Self {
            kind: TaskKind,
            id: t.id.clone(),
            context_id: t.context_id.clone(),
            status: t
                .status
                .as_ref()
                .map(TaskStatus::from_v1)
                .unwrap_or(TaskStatus {
                    state: TaskState::Unknown,
                    message: None,
                    timestamp: None,
                }),
            artifacts: (!t.artifacts.is_empty())
                .then(|| t.artifacts.iter().map(Artifact::from_v1).collect()),
            history: (!t.history.is_empty())
                .then(|| t.history.iter().map(Message::from_v1).collect()),
            metadata: struct_to_obj(&t.metadata),
        }
    }
}

impl StreamEvent {
    /// Downgrade a v1.0 stream event. `final` is set on status updates that
    /// reach a terminal or interrupted state.
    pub fn from_v1(e: &v1::StreamResponse) -> Option<Self> {
        use v1::stream_response::Payload;
        Some(match e.payload.as_ref()? {
            Payload::Task(t) => Self::Task(Task::from_v1(t)),
            Payload::Message(m) => Self::Message(Message::from_v1(m)),
            Payload::StatusUpdate(u) => {
                let status = u
                    .status
                    .as_ref()
                    .map(TaskStatus::from_v1)
                    .unwrap_or(TaskStatus {
                        state: TaskState::Unknown,
                        message: None,
                        timestamp: None,
                    });
                let state = status.state.to_v1();
                Self::StatusUpdate(TaskStatusUpdateEvent {
                    kind: StatusUpdateKind,
                    task_id: u.task_id.clone(),
                    context_id: u.context_id.clone(),
                    is_final: state.is_terminal() || state.is_interrupted(),
                    status,
                    metadata: struct_to_obj(&u.metadata),
                })
            }
            Payload::ArtifactUpdate(u) => Self::ArtifactUpdate(TaskArtifactUpdateEvent {
                kind: ArtifactUpdateKind,
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                artifact: u
                    .artifact
                    .as_ref()
                    .map(Artifact::from_v1)
                    .unwrap_or(Artifact {
                        artifact_id: String::new(),
                        name: None,
                        description: None,
                        parts: Vec::new(),
                        metadata: None,
                        extensions: None,
                    }),
                append: u.append.then_some(true),
                last_chunk: u.last_chunk.then_some(true),
                metadata: struct_to_obj(&u.metadata),
            }),
        })
    }

    /// Upgrade to a v1.0 stream event (`final` is dropped: v1.0 ends streams by closing them).
    pub fn to_v1(&self) -> Result<v1::StreamResponse, String> {
        use v1::stream_response::Payload;
        let payload = match self {
            Self::Task(t) => Payload::Task(t.to_v1()?),
            Self::Message(m) => Payload::Message(m.to_v1()?),
            Self::StatusUpdate(u) => Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                status: Some(u.status.to_v1()?),
                metadata: obj_to_struct(u.metadata.clone()),
            }),
            Self::ArtifactUpdate(u) => Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                artifact: Some(u.artifact.to_v1()?),
                append: u.append.unwrap_or(false),
                last_chunk: u.last_chunk.unwrap_or(false),
                metadata: obj_to_struct(u.metadata.clone()),
            }),
        };
        Ok(v1::StreamResponse {
            payload: Some(payload),
        })
    }

    /// True when this event ends a v0.3 stream.
    pub fn is_final(&self) -> bool {
        match self {
            Self::StatusUpdate(u) => u.is_final,
            Self::Message(_) => true,
            Self::Task(t) => {
                let s = t.status.state.to_v1();
                s.is_terminal() || s.is_interrupted()
            }
            Self::ArtifactUpdate(_) => false,
        }
    }
}

impl SendResult {
    /// Downgrade a v1.0 SendMessage result.
    pub fn from_v1(r: &v1::SendMessageResponse) -> Option<Self> {
        use v1::send_message_response::Payload;
        Some(match r.payload.as_ref()? {
            Payload::Task(t) => Self::Task(Task::from_v1(t)),
            Payload::Message(m) => Self::Message(Message::from_v1(m)),
        })
    }

    /// Upgrade to the v1.0 SendMessage result.
    pub fn to_v1(&self) -> Result<v1::SendMessageResponse, String> {
        use v1::send_message_response::Payload;
        Ok(v1::SendMessageResponse {
            payload: Some(match self {
                Self::Task(t) => Payload::Task(t.to_v1()?),
                Self::Message(m) => Payload::Message(m.to_v1()?),
            }),
        })
    }
}

impl PushNotificationConfig {
    /// Upgrade to v1.0, bound to `task_id`.
    pub fn to_v1(&self, task_id: &str) -> v1::TaskPushNotificationConfig {
        v1::TaskPushNotificationConfig {
            tenant: String::new(),
            id: self.id.clone().unwrap_or_default(),
            task_id: task_id.to_owned(),
            url: self.url.clone(),
            token: self.token.clone().unwrap_or_default(),
            // No schemes is no authentication (v1.0 requires a scheme).
            authentication: self
                .authentication
                .as_ref()
                .filter(|a| !a.schemes.is_empty())
                .map(|a| v1::AuthenticationInfo {
                    scheme: a.schemes.first().cloned().unwrap_or_default(),
                    credentials: a.credentials.clone().unwrap_or_default(),
                }),
        }
    }

    /// Downgrade from v1.0.
    pub fn from_v1(c: &v1::TaskPushNotificationConfig) -> Self {
        Self {
            id: opt_string(&c.id),
            url: c.url.clone(),
            token: opt_string(&c.token),
            authentication: c
                .authentication
                .as_ref()
                .map(|a| PushNotificationAuthenticationInfo {
                    schemes: if a.scheme.is_empty() {
                        Vec::new()
                    } else {
                        vec![a.scheme.clone()]
                    },
                    credentials: opt_string(&a.credentials),
                }),
        }
    }
}

impl TaskPushNotificationConfig {
    /// Upgrade to v1.0.
    pub fn to_v1(&self) -> v1::TaskPushNotificationConfig {
        self.push_notification_config.to_v1(&self.task_id)
    }

    /// Downgrade from v1.0.
    pub fn from_v1(c: &v1::TaskPushNotificationConfig) -> Self {
        Self {
            task_id: c.task_id.clone(),
            push_notification_config: PushNotificationConfig::from_v1(c),
        }
    }
}

impl MessageSendParams {
    /// Upgrade to a v1.0 `SendMessageRequest`.
    pub fn to_v1(&self) -> Result<v1::SendMessageRequest, String> {
        let configuration = self
            .configuration
            .as_ref()
            .map(|c| v1::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes.clone().unwrap_or_default(),
                task_push_notification_config: c
                    .push_notification_config
                    .as_ref()
                    .map(|p| p.to_v1("")),
                history_length: c.history_length.filter(|&n| n != 0),
                return_immediately: c.blocking == Some(false),
            });
        Ok(v1::SendMessageRequest {
            tenant: String::new(),
            message: Some(self.message.to_v1().map_err(|e| format!("message.{e}"))?),
            configuration,
            metadata: obj_to_struct(self.metadata.clone()),
        })
    }

    /// Downgrade a v1.0 `SendMessageRequest` (the client side of a v0.3 peer).
    pub fn from_v1(r: &v1::SendMessageRequest) -> Self {
        let configuration = r.configuration.as_ref().map(|c| MessageSendConfiguration {
            accepted_output_modes: opt_vec(&c.accepted_output_modes),
            history_length: c.history_length,
            push_notification_config: c
                .task_push_notification_config
                .as_ref()
                .map(PushNotificationConfig::from_v1),
            blocking: Some(!c.return_immediately),
        });
        Self {
            message: r
                .message
                .as_ref()
                .map(Message::from_v1)
                .unwrap_or_else(|| Message::from_v1(&Default::default())),
            configuration,
            metadata: struct_to_obj(&r.metadata),
        }
    }
}

impl TaskQueryParams {
    /// Upgrade to a v1.0 `GetTaskRequest` (v0.3 `historyLength: 0` means all;
    /// a negative one is kept, for v1.0 validation to refuse as InvalidParams).
    pub fn to_v1(&self) -> v1::GetTaskRequest {
        v1::GetTaskRequest {
            tenant: String::new(),
            id: self.id.clone(),
            history_length: self.history_length.filter(|&n| n != 0),
        }
    }
}

// ---- security schemes -------------------------------------------------------------

/// A v0.3 OAuth flow (all four kinds share this shape).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlow {
    /// Authorization endpoint (authorizationCode, implicit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_url: Option<String>,
    /// Token endpoint (authorizationCode, clientCredentials, password).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// Refresh endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
    /// Scope name to description.
    #[serde(default)]
    pub scopes: BTreeMap<String, String>,
}

/// v0.3 `OAuthFlows`: any number of flows at once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OAuthFlows {
    /// Authorization code flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_code: Option<OAuthFlow>,
    /// Client credentials flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<OAuthFlow>,
    /// Implicit flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implicit: Option<OAuthFlow>,
    /// Password flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<OAuthFlow>,
}

/// A v0.3 security scheme (OpenAPI-like, tagged by `type`).
#[allow(clippy::large_enum_variant)] // cards are read rarely; plain variants read best
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum SecurityScheme {
    /// API key in a header, query parameter or cookie.
    #[serde(rename = "apiKey")]
    ApiKey {
        /// `header`, `query` or `cookie`.
        #[serde(rename = "in")]
        location: String,
        /// Header, parameter or cookie name.
        name: String,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// HTTP authentication (`bearer`, `basic`, …).
    #[serde(rename = "http", rename_all = "camelCase")]
    Http {
        /// Scheme name.
        scheme: String,
        /// Bearer token format hint.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bearer_format: Option<String>,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OAuth 2.0.
    #[serde(rename = "oauth2", rename_all = "camelCase")]
    OAuth2 {
        /// Flows.
        flows: OAuthFlows,
        /// RFC 8414 metadata URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        oauth2_metadata_url: Option<String>,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// OpenID Connect.
    #[serde(rename = "openIdConnect", rename_all = "camelCase")]
    OpenIdConnect {
        /// Discovery URL.
        open_id_connect_url: String,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
    /// Mutual TLS.
    #[serde(rename = "mutualTLS")]
    MutualTls {
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
    },
}

impl SecurityScheme {
    /// Upgrade to v1.0 (first OAuth flow only; see the module docs).
    pub fn to_v1(&self) -> v1::SecurityScheme {
        use v1::{o_auth_flows::Flow, security_scheme::Scheme};
        let d = |o: &Option<String>| o.clone().unwrap_or_default();
        let scheme = match self {
            Self::ApiKey {
                location,
                name,
                description,
            } => Scheme::ApiKeySecurityScheme(v1::ApiKeySecurityScheme {
                description: d(description),
                location: location.clone(),
                name: name.clone(),
            }),
            Self::Http {
                scheme,
                bearer_format,
                description,
            } => Scheme::HttpAuthSecurityScheme(v1::HttpAuthSecurityScheme {
                description: d(description),
                scheme: scheme.clone(),
                bearer_format: d(bearer_format),
            }),
            Self::OAuth2 {
                flows,
                oauth2_metadata_url,
                description,
            } => {
                let flow = if let Some(f) = &flows.authorization_code {
                    Some(Flow::AuthorizationCode(v1::AuthorizationCodeOAuthFlow {
                        authorization_url: d(&f.authorization_url),
                        token_url: d(&f.token_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                        pkce_required: false,
                    }))
                } else if let Some(f) = &flows.client_credentials {
                    Some(Flow::ClientCredentials(v1::ClientCredentialsOAuthFlow {
                        token_url: d(&f.token_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                    }))
                } else if let Some(f) = &flows.implicit {
                    #[allow(deprecated)]
                    Some(Flow::Implicit(v1::ImplicitOAuthFlow {
                        authorization_url: d(&f.authorization_url),
                        refresh_url: d(&f.refresh_url),
                        scopes: f.scopes.clone().into_iter().collect(),
                    }))
                } else {
                    #[allow(deprecated)]
                    flows.password.as_ref().map(|f| {
                        Flow::Password(v1::PasswordOAuthFlow {
                            token_url: d(&f.token_url),
                            refresh_url: d(&f.refresh_url),
                            scopes: f.scopes.clone().into_iter().collect(),
                        })
                    })
                };
                Scheme::Oauth2SecurityScheme(v1::OAuth2SecurityScheme {
                    description: d(description),
                    flows: Some(v1::OAuthFlows { flow }),
                    oauth2_metadata_url: d(oauth2_metadata_url),
                })
            }
            Self::OpenIdConnect {
                open_id_connect_url,
                description,
            } => Scheme::OpenIdConnectSecurityScheme(v1::OpenIdConnectSecurityScheme {
                description: d(description),
                open_id_connect_url: open_id_connect_url.clone(),
            }),
            Self::MutualTls { description } => {
                Scheme::MtlsSecurityScheme(v1::MutualTlsSecurityScheme {
                    description: d(description),
                })
            }
        };
        v1::SecurityScheme {
            scheme: Some(scheme),
        }
    }

    /// Downgrade from v1.0. `None` for a scheme with no member set.
    pub fn from_v1(s: &v1::SecurityScheme) -> Option<Self> {
        use v1::{o_auth_flows::Flow, security_scheme::Scheme};
        let flow =
            |auth: &str,
             token: &str,
             refresh: &str,
             scopes: &std::collections::HashMap<String, String>| OAuthFlow {
                authorization_url: opt_string(auth),
                token_url: opt_string(token),
                refresh_url: opt_string(refresh),
                scopes: scopes.clone().into_iter().collect(),
            };
        Some(match s.scheme.as_ref()? {
            Scheme::ApiKeySecurityScheme(k) => Self::ApiKey {
                location: k.location.clone(),
                name: k.name.clone(),
                description: opt_string(&k.description),
            },
            Scheme::HttpAuthSecurityScheme(h) => Self::Http {
                scheme: h.scheme.clone(),
                bearer_format: opt_string(&h.bearer_format),
                description: opt_string(&h.description),
            },
            Scheme::Oauth2SecurityScheme(o) => {
                let mut flows = OAuthFlows::default();
                #[allow(deprecated)]
                match o.flows.as_ref().and_then(|f| f.flow.as_ref()) {
                    Some(Flow::AuthorizationCode(f)) => {
                        flows.authorization_code = Some(flow(
                            &f.authorization_url,
                            &f.token_url,
                            &f.refresh_url,
                            &f.scopes,
                        ))
                    }
                    Some(Flow::ClientCredentials(f)) => {
                        flows.client_credentials =
                            Some(flow("", &f.token_url, &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::Implicit(f)) => {
                        flows.implicit =
                            Some(flow(&f.authorization_url, "", &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::Password(f)) => {
                        flows.password = Some(flow("", &f.token_url, &f.refresh_url, &f.scopes))
                    }
                    Some(Flow::DeviceCode(_)) | None => {}
                }
                Self::OAuth2 {
                    flows,
                    oauth2_metadata_url: opt_string(&o.oauth2_metadata_url),
                    description: opt_string(&o.description),
                }
            }
            Scheme::OpenIdConnectSecurityScheme(o) => Self::OpenIdConnect {
                open_id_connect_url: o.open_id_connect_url.clone(),
                description: opt_string(&o.description),
            },
            Scheme::MtlsSecurityScheme(m) => Self::MutualTls {
                description: opt_string(&m.description),
            },
        })
    }
}

/// v0.3 security requirements: `[{"schemeName": ["scope", …]}, …]`.
pub type SecurityRequirements = Vec<BTreeMap<String, Vec<String>>>;

/// Upgrade v0.3 `security` to v1.0 `securityRequirements`.
pub fn requirements_to_v1(reqs: &SecurityRequirements) -> Vec<v1::SecurityRequirement> {
    reqs.iter()
        .map(|r| v1::SecurityRequirement {
            schemes: r
                .iter()
                .map(|(k, v)| (k.clone(), v1::StringList { list: v.clone() }))
                .collect(),
        })
        .collect()
}

/// Downgrade v1.0 `securityRequirements` to v0.3 `security`.
pub fn requirements_from_v1(reqs: &[v1::SecurityRequirement]) -> SecurityRequirements {
    reqs.iter()
        .map(|r| {
            r.schemes
                .iter()
                .map(|(k, v)| (k.clone(), v.list.clone()))
                .collect()
        })
        .collect()
}

// ---- Agent Card -------------------------------------------------------------------

/// A v0.3 `additionalInterfaces` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentInterface {
    /// Endpoint URL.
    pub url: String,
    /// `JSONRPC`, `GRPC` or `HTTP+JSON`.
    pub transport: String,
}

/// A v0.3 skill.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<String>>,
    /// Accepted media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modes: Option<Vec<String>>,
    /// Produced media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_modes: Option<Vec<String>>,
    /// Security requirements for this skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityRequirements>,
}

/// A v0.3 extension declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    /// Extension URI.
    pub uri: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether clients must activate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Extension parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<JsonObject>,
}

/// v0.3 capabilities.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// SSE streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Push notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// Status history kept (no v1.0 counterpart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_history: Option<bool>,
    /// Extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<AgentExtension>>,
}

/// v0.3 provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    /// Organization name.
    pub organization: String,
    /// Organization URL.
    pub url: String,
}

/// A v0.3 card signature (same shape as v1.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentCardSignature {
    /// Base64url protected header.
    pub protected: String,
    /// Base64url signature.
    pub signature: String,
    /// Unprotected header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<JsonObject>,
}

/// A v0.3 Agent Card (`a2a.json` `AgentCard`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// Protocol version, e.g. `"0.3.0"`.
    pub protocol_version: String,
    /// Agent name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Preferred endpoint.
    pub url: String,
    /// Transport of `url` (default `JSONRPC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// Other endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_interfaces: Option<Vec<AgentInterface>>,
    /// Icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// Agent version.
    pub version: String,
    /// Documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    /// Capabilities.
    pub capabilities: AgentCapabilities,
    /// Security schemes by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<BTreeMap<String, SecurityScheme>>,
    /// Security requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityRequirements>,
    /// Input media types.
    pub default_input_modes: Vec<String>,
    /// Output media types.
    pub default_output_modes: Vec<String>,
    /// Skills.
    pub skills: Vec<AgentSkill>,
    /// Extended card available to authenticated callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_authenticated_extended_card: Option<bool>,
    /// Signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signatures: Option<Vec<AgentCardSignature>>,
}

/// The v0.3 protocol version string Heddle publishes.
pub const PROTOCOL_VERSION: &str = "0.3.0";

impl AgentCard {
    /// Upgrade to a v1.0 card: `url` + `preferredTransport` become the first
    /// `supportedInterfaces` entry (protocol version 0.3), then each
    /// `additionalInterfaces` entry not equal to it.
    pub fn to_v1(&self) -> v1::AgentCard {
        let version = crate::version::ProtocolVersion::parse(&self.protocol_version)
            .map_or_else(|| self.protocol_version.clone(), |v| v.as_str().to_owned());
        let main = v1::AgentInterface {
            url: self.url.clone(),
            protocol_binding: self
                .preferred_transport
                .clone()
                .unwrap_or_else(|| "JSONRPC".into()),
            tenant: String::new(),
            protocol_version: version.clone(),
        };
        let mut interfaces = vec![main];
        for i in self.additional_interfaces.iter().flatten() {
            if !interfaces
                .iter()
                .any(|x| x.url == i.url && x.protocol_binding == i.transport)
            {
                interfaces.push(v1::AgentInterface {
                    url: i.url.clone(),
                    protocol_binding: i.transport.clone(),
                    tenant: String::new(),
                    protocol_version: version.clone(),
                });
            }
        }
        let caps = &self.capabilities;
        v1::AgentCard {
            name: self.name.clone(),
            description: self.description.clone(),
            supported_interfaces: interfaces,
            provider: self.provider.as_ref().map(|p| v1::AgentProvider {
                url: p.url.clone(),
                organization: p.organization.clone(),
            }),
            version: self.version.clone(),
            documentation_url: self.documentation_url.clone(),
            capabilities: Some(v1::AgentCapabilities {
                streaming: caps.streaming,
                push_notifications: caps.push_notifications,
                extensions: caps
                    .extensions
                    .iter()
                    .flatten()
                    .map(|e| v1::AgentExtension {
                        uri: e.uri.clone(),
                        description: e.description.clone().unwrap_or_default(),
                        required: e.required.unwrap_or(false),
                        params: e.params.clone().map(Struct),
                    })
                    .collect(),
                extended_agent_card: self.supports_authenticated_extended_card,
            }),
            security_schemes: self
                .security_schemes
                .iter()
                .flatten()
                .map(|(k, s)| (k.clone(), s.to_v1()))
                .collect(),
            security_requirements: self
                .security
                .as_ref()
                .map(requirements_to_v1)
                .unwrap_or_default(),
            default_input_modes: self.default_input_modes.clone(),
            default_output_modes: self.default_output_modes.clone(),
            skills: self
                .skills
                .iter()
                .map(|s| v1::AgentSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: s.examples.clone().unwrap_or_default(),
                    input_modes: s.input_modes.clone().unwrap_or_default(),
                    output_modes: s.output_modes.clone().unwrap_or_default(),
                    security_requirements: s
                        .security
                        .as_ref()
                        .map(requirements_to_v1)
                        .unwrap_or_default(),
                })
                .collect(),
            signatures: self
                .signatures
                .iter()
                .flatten()
                .map(|s| v1::AgentCardSignature {
                    protected: s.protected.clone(),
                    signature: s.signature.clone(),
                    header: s.header.clone().map(Struct),
                })
                .collect(),
            icon_url: self.icon_url.clone(),
        }
    }

    /// Downgrade a v1.0 card for v0.3 clients: `url`/`preferredTransport` come
    /// from the first interface with protocol version 0.3, `additionalInterfaces`
    /// lists every 0.3 interface (the first included, as v0.3 recommends).
    /// `None` when the card offers no 0.3 interface.
    pub fn from_v1(card: &v1::AgentCard) -> Option<Self> {
        let v03: Vec<&v1::AgentInterface> = card
            .supported_interfaces
            .iter()
            .filter(|i| {
                crate::version::ProtocolVersion::parse(&i.protocol_version)
                    == Some(crate::version::ProtocolVersion::V0_3)
            })
            .collect();
        let main = v03.first()?;
        let caps = card.capabilities.clone().unwrap_or_default();
        let schemes: BTreeMap<String, SecurityScheme> = card
            .security_schemes
            .iter()
            .filter_map(|(k, s)| SecurityScheme::from_v1(s).map(|s| (k.clone(), s)))
            .collect();
        Some(Self {
            protocol_version: PROTOCOL_VERSION.into(),
            name: card.name.clone(),
            description: card.description.clone(),
            url: main.url.clone(),
            // JSONRPC is v0.3's default transport and is left implicit.
            preferred_transport: (main.protocol_binding != "JSONRPC")
                .then(|| main.protocol_binding.clone()),
            additional_interfaces: (v03.len() > 1).then(|| {
                v03.iter()
                    .map(|i| AgentInterface {
                        url: i.url.clone(),
                        transport: i.protocol_binding.clone(),
                    })
                    .collect()
            }),
            icon_url: card.icon_url.clone(),
            provider: card.provider.as_ref().map(|p| AgentProvider {
                organization: p.organization.clone(),
                url: p.url.clone(),
            }),
            version: card.version.clone(),
            documentation_url: card.documentation_url.clone(),
            capabilities: AgentCapabilities {
                streaming: caps.streaming,
                push_notifications: caps.push_notifications,
                state_transition_history: None,
                extensions: (!caps.extensions.is_empty()).then(|| {
                    caps.extensions
                        .iter()
                        .map(|e| AgentExtension {
                            uri: e.uri.clone(),
                            description: opt_string(&e.description),
                            required: e.required.then_some(true),
                            params: e.params.as_ref().map(|p| p.0.clone()),
                        })
                        .collect()
                }),
            },
            security_schemes: (!schemes.is_empty()).then_some(schemes),
            security: (!card.security_requirements.is_empty())
                .then(|| requirements_from_v1(&card.security_requirements)),
            default_input_modes: card.default_input_modes.clone(),
            default_output_modes: card.default_output_modes.clone(),
            skills: card
                .skills
                .iter()
                .map(|s| AgentSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: opt_vec(&s.examples),
                    input_modes: opt_vec(&s.input_modes),
                    output_modes: opt_vec(&s.output_modes),
                    security: (!s.security_requirements.is_empty())
                        .then(|| requirements_from_v1(&s.security_requirements)),
                })
                .collect(),
            supports_authenticated_extended_card: caps.extended_agent_card,
            signatures: (!card.signatures.is_empty()).then(|| {
                card.signatures
                    .iter()
                    .map(|s| AgentCardSignature {
                        protected: s.protected.clone(),
                        signature: s.signature.clone(),
                        header: s.header.as_ref().map(|h| h.0.clone()),
                    })
                    .collect()
            }),
        })
    }
}
