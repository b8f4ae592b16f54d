//! Upgrades to v1.0 and downgrades from it, for the message and task types.

use super::*;

pub(super) fn obj_to_struct(o: Option<JsonObject>) -> Option<Struct> {
    o.map(Struct)
}

pub(super) fn struct_to_obj(s: &Option<Struct>) -> Option<JsonObject> {
    s.as_ref().map(|s| s.0.clone())
}

pub(super) fn opt_string(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

pub(super) fn opt_vec(v: &[String]) -> Option<Vec<String>> {
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

pub(super) fn parts_to_v1(parts: &[Part], path: &str) -> Result<Vec<v1::Part>, String> {
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
