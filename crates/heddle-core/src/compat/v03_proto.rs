//! The v0.3 gRPC model (protobuf package `a2a.v1`, [`heddle_proto::v03`]) and
//! its conversion to and from v1.0, for the v0.3 gRPC binding and its clients.
//!
//! Protobuf types belong to `heddle-proto`, so the conversions are free
//! functions named `*_to_v1` (upgrade) and `*_from_v1` (downgrade). Upgrades
//! never fail: a value v1.0 cannot accept (a part with no content, an
//! unspecified role) is carried over as is and refused by the handler's
//! validation, so every binding reports it the same way. Only resource names
//! (`tasks/{id}`, `tasks/{id}/pushNotificationConfigs/{configId}`) are parsed
//! here, as InvalidParams naming the field.
//!
//! # Lossy points
//!
//! Upgrading then downgrading is exact for everything both models can say,
//! except:
//!
//! * **Part metadata**: the v0.3 proto `Part` has no `metadata`; downgrading
//!   drops it.
//! * **File names and media types**: the v0.3 proto `FilePart` has a
//!   `mime_type` but no name, and text and data parts have neither.
//!   Downgrading drops `filename` everywhere and `mediaType` from text and
//!   data parts.
//! * **Non-object data parts**: v0.3 `DataPart.data` is a `Struct`; a
//!   non-object v1.0 value is wrapped as `{"value": …}` (as in [`super::v03`]).
//! * **`referenceTaskIds`**: the v0.3 proto `Message` has no such field;
//!   downgrading drops it.
//! * **`history_length`**: `0` means "all" in v0.3 and "none" in v1.0.
//!   Upgrading maps `0` to unset (the server default, all history);
//!   downgrading an explicit v1.0 `0` sends `0`, which a v0.3 server reads as
//!   "all".
//! * **`blocking`**: a proto3 `bool` cannot be absent. A request without
//!   `configuration` is blocking (the v0.3 default); with one, `blocking:
//!   false` means return immediately, as the official v0.3 SDKs read it.
//!   Downgrading always writes `blocking = !returnImmediately`.
//! * **`final`**: v1.0 has no `final` flag; downgrading sets it on a status
//!   update whose state is terminal or interrupted (the stream ends there),
//!   upgrading drops it.
//! * **Push authentication**: v0.3 lists several `schemes`, v1.0 holds one
//!   `scheme`; upgrading keeps the first, and an `authentication` with no
//!   schemes (`{}`) is none. A create request's `config_id`
//!   wins over the id inside its config.
//! * **Agent Card**: converted through [`super::v03::AgentCard`], so its
//!   lossy points apply; in addition the v0.3 proto has no `iconUrl` and no
//!   `stateTransitionHistory`, `supportsAuthenticatedExtendedCard: false`
//!   cannot be told from absent, and an OAuth2 scheme holds one flow (the
//!   first of authorizationCode, clientCredentials, implicit, password).
//! * **Field paths** in validation errors follow the v1.0 names
//!   (`message.parts[0]`), not the v0.3 proto's (`request.content[0]`).

use heddle_proto::{
    v1, v03 as pb,
    wkt::{Struct, Value as PbValue},
};
use serde_json::{Map, Value};

use super::v03;
use crate::error::A2aError;

// ---- states and roles -------------------------------------------------------------

/// The v1.0 state of a v0.3 proto state (same meanings, `CANCELLED` spelled
/// `CANCELED`).
pub fn state_to_v1(s: pb::TaskState) -> v1::TaskState {
    use pb::TaskState as P;
    use v1::TaskState as S;
    match s {
        P::Unspecified => S::Unspecified,
        P::Submitted => S::Submitted,
        P::Working => S::Working,
        P::Completed => S::Completed,
        P::Failed => S::Failed,
        P::Cancelled => S::Canceled,
        P::InputRequired => S::InputRequired,
        P::Rejected => S::Rejected,
        P::AuthRequired => S::AuthRequired,
    }
}

/// The v0.3 proto state of a v1.0 state.
pub fn state_from_v1(s: v1::TaskState) -> pb::TaskState {
    use pb::TaskState as P;
    use v1::TaskState as S;
    match s {
        S::Unspecified => P::Unspecified,
        S::Submitted => P::Submitted,
        S::Working => P::Working,
        S::Completed => P::Completed,
        S::Failed => P::Failed,
        S::Canceled => P::Cancelled,
        S::InputRequired => P::InputRequired,
        S::Rejected => P::Rejected,
        S::AuthRequired => P::AuthRequired,
    }
}

fn role_to_v1(r: pb::Role) -> v1::Role {
    match r {
        pb::Role::Unspecified => v1::Role::Unspecified,
        pb::Role::User => v1::Role::User,
        pb::Role::Agent => v1::Role::Agent,
    }
}

fn role_from_v1(r: v1::Role) -> pb::Role {
    match r {
        v1::Role::Unspecified => pb::Role::Unspecified,
        v1::Role::User => pb::Role::User,
        v1::Role::Agent => pb::Role::Agent,
    }
}

// ---- content ------------------------------------------------------------------------

/// Upgrade a part. A part with no content stays empty (validation names it).
pub fn part_to_v1(p: &pb::Part) -> v1::Part {
    use pb::{file_part::File, part::Part as P};
    use v1::part::Content;
    let (content, media_type) = match &p.part {
        Some(P::Text(t)) => (Some(Content::Text(t.clone())), String::new()),
        Some(P::File(f)) => (
            match &f.file {
                Some(File::FileWithUri(u)) => Some(Content::Url(u.clone())),
                Some(File::FileWithBytes(b)) => Some(Content::Raw(b.clone())),
                None => None,
            },
            f.mime_type.clone(),
        ),
        Some(P::Data(d)) => (
            Some(Content::Data(PbValue(Value::Object(
                d.data.as_ref().map(|s| s.0.clone()).unwrap_or_default(),
            )))),
            String::new(),
        ),
        None => (None, String::new()),
    };
    v1::Part {
        content,
        metadata: None,
        filename: String::new(),
        media_type,
    }
}

/// Downgrade a part (see the lossy points). A part with no content becomes
/// an empty one.
pub fn part_from_v1(p: &v1::Part) -> pb::Part {
    use pb::{file_part::File, part::Part as P};
    use v1::part::Content;
    let file = |file| {
        P::File(pb::FilePart {
            file: Some(file),
            mime_type: p.media_type.clone(),
        })
    };
    let part = p.content.as_ref().map(|c| match c {
        Content::Text(t) => P::Text(t.clone()),
        Content::Raw(b) => file(File::FileWithBytes(b.clone())),
        Content::Url(u) => file(File::FileWithUri(u.clone())),
        Content::Data(PbValue(Value::Object(o))) => P::Data(pb::DataPart {
            data: Some(Struct(o.clone())),
        }),
        Content::Data(PbValue(other)) => {
            let mut data = Map::new();
            data.insert("value".into(), other.clone());
            P::Data(pb::DataPart {
                data: Some(Struct(data)),
            })
        }
    });
    pb::Part { part }
}

/// Upgrade a message (`content` becomes `parts`).
pub fn message_to_v1(m: &pb::Message) -> v1::Message {
    v1::Message {
        message_id: m.message_id.clone(),
        context_id: m.context_id.clone(),
        task_id: m.task_id.clone(),
        role: role_to_v1(m.role()) as i32,
        parts: m.content.iter().map(part_to_v1).collect(),
        metadata: m.metadata.clone(),
        extensions: m.extensions.clone(),
        reference_task_ids: Vec::new(),
    }
}

/// Downgrade a message (`referenceTaskIds` is dropped).
pub fn message_from_v1(m: &v1::Message) -> pb::Message {
    pb::Message {
        message_id: m.message_id.clone(),
        context_id: m.context_id.clone(),
        task_id: m.task_id.clone(),
        role: role_from_v1(m.role()) as i32,
        content: m.parts.iter().map(part_from_v1).collect(),
        metadata: m.metadata.clone(),
        extensions: m.extensions.clone(),
    }
}

/// Upgrade a status (`update` becomes `message`).
pub fn status_to_v1(s: &pb::TaskStatus) -> v1::TaskStatus {
    v1::TaskStatus {
        state: state_to_v1(s.state()) as i32,
        message: s.update.as_ref().map(message_to_v1),
        timestamp: s.timestamp,
    }
}

/// Downgrade a status.
pub fn status_from_v1(s: &v1::TaskStatus) -> pb::TaskStatus {
    pb::TaskStatus {
        state: state_from_v1(s.state()) as i32,
        update: s.message.as_ref().map(message_from_v1),
        timestamp: s.timestamp,
    }
}

/// Upgrade an artifact.
pub fn artifact_to_v1(a: &pb::Artifact) -> v1::Artifact {
    v1::Artifact {
        artifact_id: a.artifact_id.clone(),
        name: a.name.clone(),
        description: a.description.clone(),
        parts: a.parts.iter().map(part_to_v1).collect(),
        metadata: a.metadata.clone(),
        extensions: a.extensions.clone(),
    }
}

/// Downgrade an artifact.
pub fn artifact_from_v1(a: &v1::Artifact) -> pb::Artifact {
    pb::Artifact {
        artifact_id: a.artifact_id.clone(),
        name: a.name.clone(),
        description: a.description.clone(),
        parts: a.parts.iter().map(part_from_v1).collect(),
        metadata: a.metadata.clone(),
        extensions: a.extensions.clone(),
    }
}

/// Upgrade a task.
pub fn task_to_v1(t: &pb::Task) -> v1::Task {
    v1::Task {
        id: t.id.clone(),
        context_id: t.context_id.clone(),
        status: t.status.as_ref().map(status_to_v1),
        artifacts: t.artifacts.iter().map(artifact_to_v1).collect(),
        history: t.history.iter().map(message_to_v1).collect(),
        metadata: t.metadata.clone(),
    }
}

/// Downgrade a task.
pub fn task_from_v1(t: &v1::Task) -> pb::Task {
    pb::Task {
        id: t.id.clone(),
        context_id: t.context_id.clone(),
        status: t.status.as_ref().map(status_from_v1),
        artifacts: t.artifacts.iter().map(artifact_from_v1).collect(),
        history: t.history.iter().map(message_from_v1).collect(),
        metadata: t.metadata.clone(),
    }
}

// ---- replies and events -------------------------------------------------------------

/// Upgrade a SendMessage reply.
pub fn send_response_to_v1(r: &pb::SendMessageResponse) -> v1::SendMessageResponse {
    use pb::send_message_response::Payload as P;
    use v1::send_message_response::Payload as V;
    v1::SendMessageResponse {
        payload: r.payload.as_ref().map(|p| match p {
            P::Task(t) => V::Task(task_to_v1(t)),
            P::Msg(m) => V::Message(message_to_v1(m)),
        }),
    }
}

/// Downgrade a SendMessage reply.
pub fn send_response_from_v1(r: &v1::SendMessageResponse) -> pb::SendMessageResponse {
    use pb::send_message_response::Payload as P;
    use v1::send_message_response::Payload as V;
    pb::SendMessageResponse {
        payload: r.payload.as_ref().map(|p| match p {
            V::Task(t) => P::Task(task_from_v1(t)),
            V::Message(m) => P::Msg(message_from_v1(m)),
        }),
    }
}

/// Upgrade a stream event (`final` is dropped: v1.0 ends a stream by closing it).
pub fn stream_response_to_v1(e: &pb::StreamResponse) -> v1::StreamResponse {
    use pb::stream_response::Payload as P;
    use v1::stream_response::Payload as V;
    v1::StreamResponse {
        payload: e.payload.as_ref().map(|p| match p {
            P::Task(t) => V::Task(task_to_v1(t)),
            P::Msg(m) => V::Message(message_to_v1(m)),
            P::StatusUpdate(u) => V::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                status: u.status.as_ref().map(status_to_v1),
                metadata: u.metadata.clone(),
            }),
            P::ArtifactUpdate(u) => V::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                artifact: u.artifact.as_ref().map(artifact_to_v1),
                append: u.append,
                last_chunk: u.last_chunk,
                metadata: u.metadata.clone(),
            }),
        }),
    }
}

/// Downgrade a stream event; `final` is set on status updates that reach a
/// terminal or interrupted state. `None` for an event with no payload.
pub fn stream_response_from_v1(e: &v1::StreamResponse) -> Option<pb::StreamResponse> {
    use pb::stream_response::Payload as P;
    use v1::stream_response::Payload as V;
    let payload = match e.payload.as_ref()? {
        V::Task(t) => P::Task(task_from_v1(t)),
        V::Message(m) => P::Msg(message_from_v1(m)),
        V::StatusUpdate(u) => {
            let state = u
                .status
                .as_ref()
                .map_or(v1::TaskState::Unspecified, |s| s.state());
            P::StatusUpdate(pb::TaskStatusUpdateEvent {
                task_id: u.task_id.clone(),
                context_id: u.context_id.clone(),
                status: u.status.as_ref().map(status_from_v1),
                r#final: state.is_terminal() || state.is_interrupted(),
                metadata: u.metadata.clone(),
            })
        }
        V::ArtifactUpdate(u) => P::ArtifactUpdate(pb::TaskArtifactUpdateEvent {
            task_id: u.task_id.clone(),
            context_id: u.context_id.clone(),
            artifact: u.artifact.as_ref().map(artifact_from_v1),
            append: u.append,
            last_chunk: u.last_chunk,
            metadata: u.metadata.clone(),
        }),
    };
    Some(pb::StreamResponse {
        payload: Some(payload),
    })
}

// ---- requests -----------------------------------------------------------------------

/// Upgrade a SendMessage / SendStreamingMessage request (see the lossy
/// points for `blocking` and `history_length`).
pub fn send_request_to_v1(r: &pb::SendMessageRequest) -> v1::SendMessageRequest {
    let configuration = r
        .configuration
        .as_ref()
        .map(|c| v1::SendMessageConfiguration {
            accepted_output_modes: c.accepted_output_modes.clone(),
            task_push_notification_config: c
                .push_notification
                .as_ref()
                .map(|p| push_config_to_v1(p, "")),
            history_length: (c.history_length != 0).then_some(c.history_length),
            return_immediately: !c.blocking,
        });
    v1::SendMessageRequest {
        tenant: String::new(),
        message: r.request.as_ref().map(message_to_v1),
        configuration,
        metadata: r.metadata.clone(),
    }
}

/// Downgrade a send request (the client side of a v0.3 gRPC peer).
pub fn send_request_from_v1(r: &v1::SendMessageRequest) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        request: r.message.as_ref().map(message_from_v1),
        configuration: r
            .configuration
            .as_ref()
            .map(|c| pb::SendMessageConfiguration {
                accepted_output_modes: c.accepted_output_modes.clone(),
                push_notification: c
                    .task_push_notification_config
                    .as_ref()
                    .and_then(|p| push_config_from_v1(p).push_notification_config),
                history_length: c.history_length.unwrap_or(0),
                blocking: !c.return_immediately,
            }),
        metadata: r.metadata.clone(),
    }
}

/// The resource name of a task: `tasks/{id}`.
pub fn task_name(id: &str) -> String {
    format!("tasks/{id}")
}

/// The resource name of a push config: `tasks/{id}/pushNotificationConfigs/{configId}`.
pub fn config_name(task_id: &str, config_id: &str) -> String {
    format!("tasks/{task_id}/pushNotificationConfigs/{config_id}")
}

/// The task id in `tasks/{id}`; InvalidParams naming `field` otherwise.
pub fn parse_task_name<'a>(name: &'a str, field: &str) -> Result<&'a str, A2aError> {
    match name.strip_prefix("tasks/") {
        Some(id) if !id.is_empty() && !id.contains('/') => Ok(id),
        _ => Err(A2aError::invalid_field(
            field,
            format!("{name:?} is not a task name (tasks/{{id}})"),
        )),
    }
}

/// The task and config ids in `tasks/{id}/pushNotificationConfigs/{configId}`.
pub fn parse_config_name<'a>(name: &'a str, field: &str) -> Result<(&'a str, &'a str), A2aError> {
    let parsed = name
        .strip_prefix("tasks/")
        .and_then(|rest| rest.split_once("/pushNotificationConfigs/"))
        .filter(|(t, c)| !t.is_empty() && !c.is_empty() && !t.contains('/') && !c.contains('/'));
    parsed.ok_or_else(|| {
        A2aError::invalid_field(
            field,
            format!("{name:?} is not a push config name (tasks/{{id}}/pushNotificationConfigs/{{configId}})"),
        )
    })
}

/// Upgrade a GetTask request (`history_length` 0 means all; a negative one
/// is kept, for v1.0 validation to refuse).
pub fn get_task_to_v1(r: &pb::GetTaskRequest) -> Result<v1::GetTaskRequest, A2aError> {
    Ok(v1::GetTaskRequest {
        tenant: String::new(),
        id: parse_task_name(&r.name, "name")?.to_owned(),
        history_length: (r.history_length != 0).then_some(r.history_length),
    })
}

/// Upgrade a push config bound to `task_id` (first scheme only).
pub fn push_config_to_v1(
    c: &pb::PushNotificationConfig,
    task_id: &str,
) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: c.id.clone(),
        task_id: task_id.to_owned(),
        url: c.url.clone(),
        token: c.token.clone(),
        // `authentication: {}` (no schemes) is none: v1.0 requires a scheme.
        authentication: c
            .authentication
            .as_ref()
            .filter(|a| !a.schemes.is_empty())
            .map(|a| v1::AuthenticationInfo {
                scheme: a.schemes.first().cloned().unwrap_or_default(),
                credentials: a.credentials.clone(),
            }),
    }
}

/// Downgrade a push config to its named v0.3 form.
pub fn push_config_from_v1(c: &v1::TaskPushNotificationConfig) -> pb::TaskPushNotificationConfig {
    pb::TaskPushNotificationConfig {
        name: config_name(&c.task_id, &c.id),
        push_notification_config: Some(pb::PushNotificationConfig {
            id: c.id.clone(),
            url: c.url.clone(),
            token: c.token.clone(),
            authentication: c.authentication.as_ref().map(|a| pb::AuthenticationInfo {
                schemes: if a.scheme.is_empty() {
                    Vec::new()
                } else {
                    vec![a.scheme.clone()]
                },
                credentials: a.credentials.clone(),
            }),
        }),
    }
}

/// Upgrade a CreateTaskPushNotificationConfig request.
pub fn create_push_config_to_v1(
    r: &pb::CreateTaskPushNotificationConfigRequest,
) -> Result<v1::TaskPushNotificationConfig, A2aError> {
    let task_id = parse_task_name(&r.parent, "parent")?;
    let config = r
        .config
        .as_ref()
        .and_then(|c| c.push_notification_config.as_ref())
        .ok_or_else(|| A2aError::invalid_field("config.pushNotificationConfig", "is required"))?;
    let mut out = push_config_to_v1(config, task_id);
    if !r.config_id.is_empty() {
        out.id.clone_from(&r.config_id);
    }
    Ok(out)
}

// ---- Agent Card ---------------------------------------------------------------------

/// The v0.3 proto card of a v1.0 card, through [`v03::AgentCard::from_v1`]:
/// `url` is the first 0.3 interface. A card with no 0.3 interface is read as
/// if every interface spoke 0.3, so v0.3 callers still learn the endpoints.
pub fn card_from_v1(card: &v1::AgentCard) -> pb::AgentCard {
    let json = v03::AgentCard::from_v1(card).or_else(|| {
        let mut all = card.clone();
        if all.supported_interfaces.is_empty() {
            all.supported_interfaces.push(v1::AgentInterface::default());
        }
        for i in &mut all.supported_interfaces {
            i.protocol_version = "0.3".into();
        }
        v03::AgentCard::from_v1(&all)
    });
    json.as_ref().map(card_from_json).unwrap_or_default()
}

/// The v1.0 card of a v0.3 proto card, through [`v03::AgentCard::to_v1`].
pub fn card_to_v1(card: &pb::AgentCard) -> v1::AgentCard {
    card_to_json(card).to_v1()
}

fn opt(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn non_empty_vec(v: &[String]) -> Option<Vec<String>> {
    (!v.is_empty()).then(|| v.to_vec())
}

fn security_from_json(reqs: &v03::SecurityRequirements) -> Vec<pb::Security> {
    reqs.iter()
        .map(|r| pb::Security {
            schemes: r
                .iter()
                .map(|(k, v)| (k.clone(), pb::StringList { list: v.clone() }))
                .collect(),
        })
        .collect()
}

fn security_to_json(reqs: &[pb::Security]) -> v03::SecurityRequirements {
    reqs.iter()
        .map(|r| {
            r.schemes
                .iter()
                .map(|(k, v)| (k.clone(), v.list.clone()))
                .collect()
        })
        .collect()
}

/// The v0.3 and v1.0 protos declare security schemes with the same field
/// numbers (v1.0 only adds fields), so a scheme of one is read as the other
/// through its wire form, and the JSON conversion is written once, in
/// [`v03::SecurityScheme`]. A v1.0-only flow (device code) is dropped, as
/// the JSON downgrade drops it.
fn transcode<A: prost::Message, B: prost::Message + Default>(a: &A) -> B {
    B::decode(a.encode_to_vec().as_slice()).unwrap_or_default()
}

fn scheme_from_json(s: &v03::SecurityScheme) -> pb::SecurityScheme {
    transcode(&s.to_v1())
}

fn scheme_to_json(s: &pb::SecurityScheme) -> Option<v03::SecurityScheme> {
    v03::SecurityScheme::from_v1(&transcode::<_, v1::SecurityScheme>(s))
}

fn card_from_json(c: &v03::AgentCard) -> pb::AgentCard {
    let caps = &c.capabilities;
    pb::AgentCard {
        protocol_version: c.protocol_version.clone(),
        name: c.name.clone(),
        description: c.description.clone(),
        url: c.url.clone(),
        preferred_transport: opt(&c.preferred_transport),
        additional_interfaces: c
            .additional_interfaces
            .iter()
            .flatten()
            .map(|i| pb::AgentInterface {
                url: i.url.clone(),
                transport: i.transport.clone(),
            })
            .collect(),
        provider: c.provider.as_ref().map(|p| pb::AgentProvider {
            url: p.url.clone(),
            organization: p.organization.clone(),
        }),
        version: c.version.clone(),
        documentation_url: opt(&c.documentation_url),
        capabilities: Some(pb::AgentCapabilities {
            streaming: caps.streaming.unwrap_or(false),
            push_notifications: caps.push_notifications.unwrap_or(false),
            extensions: caps
                .extensions
                .iter()
                .flatten()
                .map(|e| pb::AgentExtension {
                    uri: e.uri.clone(),
                    description: opt(&e.description),
                    required: e.required.unwrap_or(false),
                    params: e.params.clone().map(Struct),
                })
                .collect(),
        }),
        security_schemes: c
            .security_schemes
            .iter()
            .flatten()
            .map(|(k, s)| (k.clone(), scheme_from_json(s)))
            .collect(),
        security: c
            .security
            .as_ref()
            .map(security_from_json)
            .unwrap_or_default(),
        default_input_modes: c.default_input_modes.clone(),
        default_output_modes: c.default_output_modes.clone(),
        skills: c
            .skills
            .iter()
            .map(|s| pb::AgentSkill {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
                examples: s.examples.clone().unwrap_or_default(),
                input_modes: s.input_modes.clone().unwrap_or_default(),
                output_modes: s.output_modes.clone().unwrap_or_default(),
                security: s
                    .security
                    .as_ref()
                    .map(security_from_json)
                    .unwrap_or_default(),
            })
            .collect(),
        supports_authenticated_extended_card: c
            .supports_authenticated_extended_card
            .unwrap_or(false),
        signatures: c
            .signatures
            .iter()
            .flatten()
            .map(|s| pb::AgentCardSignature {
                protected: s.protected.clone(),
                signature: s.signature.clone(),
                header: s.header.clone().map(Struct),
            })
            .collect(),
    }
}

fn card_to_json(c: &pb::AgentCard) -> v03::AgentCard {
    let caps = c.capabilities.clone().unwrap_or_default();
    let schemes: std::collections::BTreeMap<String, v03::SecurityScheme> = c
        .security_schemes
        .iter()
        .filter_map(|(k, s)| scheme_to_json(s).map(|s| (k.clone(), s)))
        .collect();
    v03::AgentCard {
        protocol_version: c.protocol_version.clone(),
        name: c.name.clone(),
        description: c.description.clone(),
        url: c.url.clone(),
        preferred_transport: non_empty(&c.preferred_transport),
        additional_interfaces: (!c.additional_interfaces.is_empty()).then(|| {
            c.additional_interfaces
                .iter()
                .map(|i| v03::AgentInterface {
                    url: i.url.clone(),
                    transport: i.transport.clone(),
                })
                .collect()
        }),
        icon_url: None,
        provider: c.provider.as_ref().map(|p| v03::AgentProvider {
            organization: p.organization.clone(),
            url: p.url.clone(),
        }),
        version: c.version.clone(),
        documentation_url: non_empty(&c.documentation_url),
        capabilities: v03::AgentCapabilities {
            streaming: Some(caps.streaming),
            push_notifications: Some(caps.push_notifications),
            state_transition_history: None,
            extensions: (!caps.extensions.is_empty()).then(|| {
                caps.extensions
                    .iter()
                    .map(|e| v03::AgentExtension {
                        uri: e.uri.clone(),
                        description: non_empty(&e.description),
                        required: e.required.then_some(true),
                        params: e.params.as_ref().map(|p| p.0.clone()),
                    })
                    .collect()
            }),
        },
        security_schemes: (!schemes.is_empty()).then_some(schemes),
        security: (!c.security.is_empty()).then(|| security_to_json(&c.security)),
        default_input_modes: c.default_input_modes.clone(),
        default_output_modes: c.default_output_modes.clone(),
        skills: c
            .skills
            .iter()
            .map(|s| v03::AgentSkill {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
                examples: non_empty_vec(&s.examples),
                input_modes: non_empty_vec(&s.input_modes),
                output_modes: non_empty_vec(&s.output_modes),
                security: (!s.security.is_empty()).then(|| security_to_json(&s.security)),
            })
            .collect(),
        supports_authenticated_extended_card: c
            .supports_authenticated_extended_card
            .then_some(true),
        signatures: (!c.signatures.is_empty()).then(|| {
            c.signatures
                .iter()
                .map(|s| v03::AgentCardSignature {
                    protected: s.protected.clone(),
                    signature: s.signature.clone(),
                    header: s.header.as_ref().map(|h| h.0.clone()),
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use heddle_proto::wkt::Timestamp;
    use prost::Message as _;
    use serde_json::json;

    fn meta(v: Value) -> Option<Struct> {
        Struct::try_from(v).ok()
    }

    /// A v1.0 message using only what v0.3 proto can say.
    fn message(role: v1::Role) -> v1::Message {
        v1::Message {
            message_id: "m-1".into(),
            context_id: "c-1".into(),
            task_id: "t-1".into(),
            role: role as i32,
            parts: vec![
                v1::Part::text("hi"),
                v1::Part {
                    media_type: "application/pdf".into(),
                    ..v1::Part::raw(vec![0, 1, 2, 255], "", "")
                },
                v1::Part::url("https://example.com/a.txt", "text/plain"),
                v1::Part::data(json!({"key": "value", "count": 42})),
            ],
            metadata: meta(json!({"trace": "x"})),
            extensions: vec!["https://ext.example/a".into()],
            reference_task_ids: Vec::new(),
        }
    }

    fn task() -> v1::Task {
        v1::Task {
            id: "t-1".into(),
            context_id: "c-1".into(),
            status: Some(v1::TaskStatus {
                state: v1::TaskState::Canceled as i32,
                message: Some(message(v1::Role::Agent)),
                timestamp: "2025-01-02T03:04:05.678Z".parse::<Timestamp>().ok(),
            }),
            artifacts: vec![v1::Artifact {
                artifact_id: "a-1".into(),
                name: "report".into(),
                description: "d".into(),
                parts: vec![v1::Part::text("body")],
                metadata: meta(json!({"n": 1})),
                extensions: vec!["https://ext.example/b".into()],
            }],
            history: vec![message(v1::Role::User)],
            metadata: meta(json!({"k": [1, 2]})),
        }
    }

    #[test]
    fn a_task_round_trips_through_the_v03_proto_and_its_bytes() {
        let t = task();
        let wire = task_from_v1(&t).encode_to_vec();
        let back = task_to_v1(&pb::Task::decode(wire.as_slice()).expect("decode"));
        assert_eq!(back, t);
        assert_eq!(
            task_from_v1(&t).status.expect("status").state(),
            pb::TaskState::Cancelled
        );
    }

    #[test]
    fn every_state_maps_both_ways() {
        for n in 0..=8 {
            let s = v1::TaskState::try_from(n).expect("state");
            assert_eq!(state_to_v1(state_from_v1(s)), s);
            assert_eq!(state_from_v1(s) as i32, n, "same numbers in both protos");
        }
    }

    #[test]
    fn stream_events_round_trip_and_final_marks_the_end() {
        use v1::stream_response::Payload as V;
        let status = |state: v1::TaskState| v1::StreamResponse {
            payload: Some(V::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: Some(v1::TaskStatus {
                    state: state as i32,
                    message: None,
                    timestamp: None,
                }),
                metadata: None,
            })),
        };
        let events = [
            v1::StreamResponse {
                payload: Some(V::Task(task())),
            },
            v1::StreamResponse {
                payload: Some(V::Message(message(v1::Role::Agent))),
            },
            v1::StreamResponse {
                payload: Some(V::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                    task_id: "t".into(),
                    context_id: "c".into(),
                    artifact: task().artifacts.pop(),
                    append: true,
                    last_chunk: true,
                    metadata: meta(json!({"x": true})),
                })),
            },
            status(v1::TaskState::Working),
            status(v1::TaskState::InputRequired),
            status(v1::TaskState::Completed),
        ];
        let finals: Vec<bool> = events
            .iter()
            .map(|e| {
                let old = stream_response_from_v1(e).expect("payload");
                assert_eq!(&stream_response_to_v1(&old), e);
                matches!(
                    old.payload,
                    Some(pb::stream_response::Payload::StatusUpdate(ref u)) if u.r#final
                )
            })
            .collect();
        assert_eq!(finals, [false, false, false, false, true, true]);
        assert!(stream_response_from_v1(&v1::StreamResponse::default()).is_none());
    }

    #[test]
    fn send_requests_keep_blocking_and_history_rules() {
        let req = v1::SendMessageRequest {
            tenant: String::new(),
            message: Some(message(v1::Role::User)),
            configuration: Some(v1::SendMessageConfiguration {
                accepted_output_modes: vec!["text/plain".into()],
                task_push_notification_config: Some(v1::TaskPushNotificationConfig {
                    id: "p".into(),
                    url: "https://hook".into(),
                    token: "tok".into(),
                    authentication: Some(v1::AuthenticationInfo {
                        scheme: "Bearer".into(),
                        credentials: "secret".into(),
                    }),
                    ..Default::default()
                }),
                history_length: Some(3),
                return_immediately: true,
            }),
            metadata: meta(json!({"r": 1})),
        };
        let old = send_request_from_v1(&req);
        assert!(!old.configuration.as_ref().expect("config").blocking);
        assert_eq!(send_request_to_v1(&old), req);
        // No configuration: blocking, all history.
        let bare = send_request_to_v1(&pb::SendMessageRequest {
            request: Some(message_from_v1(&message(v1::Role::User))),
            configuration: None,
            metadata: None,
        });
        assert_eq!(bare.configuration, None);
        // history_length 0 is "all" in v0.3.
        let zero = send_request_to_v1(&pb::SendMessageRequest {
            configuration: Some(pb::SendMessageConfiguration {
                blocking: true,
                ..Default::default()
            }),
            ..Default::default()
        });
        let cfg = zero.configuration.expect("config");
        assert_eq!((cfg.history_length, cfg.return_immediately), (None, false));
    }

    #[test]
    fn lossy_points_are_the_documented_ones() {
        let mut p = v1::Part::raw(vec![1], "image/png", "pic.png");
        p.metadata = meta(json!({"m": 1}));
        let back = part_to_v1(&part_from_v1(&p));
        assert_eq!((back.filename.as_str(), back.metadata), ("", None));
        assert_eq!(back.media_type, "image/png");
        let wrapped = part_to_v1(&part_from_v1(&v1::Part::data(json!([1, 2]))));
        assert_eq!(wrapped, v1::Part::data(json!({"value": [1, 2]})));
        let mut m = message(v1::Role::User);
        m.reference_task_ids = vec!["t-0".into()];
        assert!(
            message_to_v1(&message_from_v1(&m))
                .reference_task_ids
                .is_empty()
        );
    }

    #[test]
    fn resource_names_parse_or_name_the_field() {
        assert_eq!(parse_task_name(&task_name("abc"), "name"), Ok("abc"));
        assert_eq!(
            parse_config_name(&config_name("t", "c"), "name"),
            Ok(("t", "c"))
        );
        for bad in ["", "abc", "tasks/", "tasks/a/b", "task/a"] {
            let e = parse_task_name(bad, "name").expect_err(bad);
            assert_eq!(
                (e.code, e.violations[0].field.as_str()),
                (ErrorCode::InvalidParams, "name")
            );
        }
        assert!(parse_config_name("tasks/t/pushNotificationConfigs/", "name").is_err());
        let get = get_task_to_v1(&pb::GetTaskRequest {
            name: "tasks/t-9".into(),
            history_length: 0,
        })
        .expect("get");
        assert_eq!((get.id.as_str(), get.history_length), ("t-9", None));
        let negative = get_task_to_v1(&pb::GetTaskRequest {
            name: "tasks/t-9".into(),
            history_length: -1,
        })
        .expect("get");
        assert_eq!(
            negative.history_length,
            Some(-1),
            "kept for validation to refuse"
        );
        let no_schemes = push_config_to_v1(
            &pb::PushNotificationConfig {
                url: "https://hook".into(),
                authentication: Some(pb::AuthenticationInfo::default()),
                ..Default::default()
            },
            "t-9",
        );
        assert_eq!(
            no_schemes.authentication, None,
            "no schemes is no authentication"
        );
        let create = create_push_config_to_v1(&pb::CreateTaskPushNotificationConfigRequest {
            parent: "tasks/t-9".into(),
            config_id: "cfg".into(),
            config: Some(push_config_from_v1(&v1::TaskPushNotificationConfig {
                url: "https://hook".into(),
                ..Default::default()
            })),
        })
        .expect("create");
        assert_eq!(
            (
                create.task_id.as_str(),
                create.id.as_str(),
                create.url.as_str()
            ),
            ("t-9", "cfg", "https://hook")
        );
    }

    #[test]
    fn a_card_round_trips_through_the_v03_proto() {
        let iface = |url: &str, binding: &str, version: &str| v1::AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            tenant: String::new(),
            protocol_version: version.into(),
        };
        let mut scopes = std::collections::HashMap::new();
        scopes.insert("read".to_owned(), "Read".to_owned());
        let card = v1::AgentCard {
            name: "Echo".into(),
            description: "echoes".into(),
            supported_interfaces: vec![
                iface("http://h/a2a", "JSONRPC", "0.3"),
                iface("http://h:50051", "GRPC", "0.3"),
            ],
            provider: Some(v1::AgentProvider {
                url: "https://p".into(),
                organization: "P".into(),
            }),
            version: "1.2.3".into(),
            documentation_url: Some("https://docs".into()),
            capabilities: Some(v1::AgentCapabilities {
                streaming: Some(true),
                push_notifications: Some(false),
                extensions: vec![v1::AgentExtension {
                    uri: "https://ext".into(),
                    description: "e".into(),
                    required: true,
                    params: meta(json!({"a": 1})),
                }],
                extended_agent_card: Some(true),
            }),
            security_schemes: [(
                "oauth".to_owned(),
                v1::SecurityScheme {
                    scheme: Some(v1::security_scheme::Scheme::Oauth2SecurityScheme(
                        v1::OAuth2SecurityScheme {
                            description: "o".into(),
                            flows: Some(v1::OAuthFlows {
                                flow: Some(v1::o_auth_flows::Flow::ClientCredentials(
                                    v1::ClientCredentialsOAuthFlow {
                                        token_url: "https://token".into(),
                                        refresh_url: String::new(),
                                        scopes,
                                    },
                                )),
                            }),
                            oauth2_metadata_url: String::new(),
                        },
                    )),
                },
            )]
            .into_iter()
            .collect(),
            security_requirements: vec![v1::SecurityRequirement {
                schemes: [(
                    "oauth".to_owned(),
                    v1::StringList {
                        list: vec!["read".into()],
                    },
                )]
                .into_iter()
                .collect(),
            }],
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            skills: vec![v1::AgentSkill {
                id: "s".into(),
                name: "S".into(),
                description: "d".into(),
                tags: vec!["t".into()],
                examples: vec!["ex".into()],
                ..Default::default()
            }],
            signatures: Vec::new(),
            icon_url: None,
        };
        let old = card_from_v1(&card);
        assert_eq!(old.url, "http://h/a2a");
        assert_eq!(old.protocol_version, "0.3.0");
        assert_eq!(old.additional_interfaces.len(), 2);
        assert!(old.supports_authenticated_extended_card);
        let bytes = old.encode_to_vec();
        let back = card_to_v1(&pb::AgentCard::decode(bytes.as_slice()).expect("decode"));
        assert_eq!(back, card);
    }

    #[test]
    fn a_card_without_v03_interfaces_still_names_an_endpoint() {
        let card = v1::AgentCard {
            name: "x".into(),
            supported_interfaces: vec![v1::AgentInterface {
                url: "http://h/rest".into(),
                protocol_binding: "HTTP+JSON".into(),
                tenant: String::new(),
                protocol_version: "1.0".into(),
            }],
            ..Default::default()
        };
        let old = card_from_v1(&card);
        assert_eq!(
            (old.url.as_str(), old.preferred_transport.as_str()),
            ("http://h/rest", "HTTP+JSON")
        );
        assert_eq!(card_from_v1(&v1::AgentCard::default()).url, "");
    }
}
