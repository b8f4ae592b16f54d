//! A JSON-RPC request decoded for its method: the transport-neutral call the
//! server's handler takes, with v0.3 and legacy params already upgraded.
//!
//! [`parse_calls`] reads a whole POST body in one pass: once `method` is
//! known, `params` is deserialized straight into the method's typed request,
//! with no intermediate `serde_json::Value` and no second scan of the params.
//! When that fast pass fails (bad JSON, a wrong type, an unknown method), the
//! body is read again the careful way to give the precise error (ParseError,
//! InvalidRequest, MethodNotFound, or InvalidParams naming the field).

use std::fmt;

use heddle_proto::v1;
use serde::{
    Deserialize, Deserializer,
    de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor},
};
use serde_json::value::RawValue;

use crate::{
    compat::{legacy::LegacySend, v03},
    error::{A2aError, ErrorCode},
    jsonrpc::{self, Id},
    method::{Dialect, Method},
    validate::{Validate, from_json},
};

/// A decoded, validated A2A call in the v1.0 model.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// SendMessage / message/send / tasks/send.
    SendMessage(v1::SendMessageRequest),
    /// SendStreamingMessage / message/stream / tasks/sendSubscribe.
    SendStreamingMessage(v1::SendMessageRequest),
    /// GetTask / tasks/get.
    GetTask(v1::GetTaskRequest),
    /// ListTasks.
    ListTasks(v1::ListTasksRequest),
    /// CancelTask / tasks/cancel.
    CancelTask(v1::CancelTaskRequest),
    /// SubscribeToTask / tasks/resubscribe.
    SubscribeToTask(v1::SubscribeToTaskRequest),
    /// CreateTaskPushNotificationConfig / tasks/pushNotificationConfig/set.
    CreatePushConfig(v1::TaskPushNotificationConfig),
    /// GetTaskPushNotificationConfig / tasks/pushNotificationConfig/get.
    GetPushConfig(v1::GetTaskPushNotificationConfigRequest),
    /// ListTaskPushNotificationConfigs / tasks/pushNotificationConfig/list.
    ListPushConfigs(v1::ListTaskPushNotificationConfigsRequest),
    /// DeleteTaskPushNotificationConfig / tasks/pushNotificationConfig/delete.
    DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest),
    /// GetExtendedAgentCard / agent/getAuthenticatedExtendedCard.
    GetExtendedAgentCard(v1::GetExtendedAgentCardRequest),
}

impl Call {
    /// The operation.
    pub fn method(&self) -> Method {
        match self {
            Call::SendMessage(_) => Method::SendMessage,
            Call::SendStreamingMessage(_) => Method::SendStreamingMessage,
            Call::GetTask(_) => Method::GetTask,
            Call::ListTasks(_) => Method::ListTasks,
            Call::CancelTask(_) => Method::CancelTask,
            Call::SubscribeToTask(_) => Method::SubscribeToTask,
            Call::CreatePushConfig(_) => Method::CreatePushConfig,
            Call::GetPushConfig(_) => Method::GetPushConfig,
            Call::ListPushConfigs(_) => Method::ListPushConfigs,
            Call::DeletePushConfig(_) => Method::DeletePushConfig,
            Call::GetExtendedAgentCard(_) => Method::GetExtendedAgentCard,
        }
    }

    /// Checks the spec's REQUIRED rules.
    pub fn validate(&self) -> Result<(), A2aError> {
        match self {
            Call::SendMessage(r) | Call::SendStreamingMessage(r) => r.validate(),
            Call::GetTask(r) => r.validate(),
            Call::ListTasks(r) => r.validate(),
            Call::CancelTask(r) => r.validate(),
            Call::SubscribeToTask(r) => r.validate(),
            Call::CreatePushConfig(r) => r.validate(),
            Call::GetPushConfig(r) => r.validate(),
            Call::ListPushConfigs(r) => r.validate(),
            Call::DeletePushConfig(r) => r.validate(),
            Call::GetExtendedAgentCard(r) => r.validate(),
        }
    }
}

/// One decoded request of a body.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// `None` for a notification.
    pub id: Option<Id>,
    /// The naming family of the method (v1.0, v0.3 or legacy).
    pub dialect: Dialect,
    /// The call.
    pub call: Call,
    /// For a legacy `tasks/send` in the original shape: the client's task id.
    pub legacy_task_id: Option<String>,
}

/// One element of a body: a call, or the error to answer it with.
pub type Item = Result<Decoded, (Option<Id>, A2aError)>;

/// What a POST body held, decoded.
// Lives for one request; boxing the single call would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Calls {
    /// One request.
    Single(Item),
    /// A batch (never empty).
    Batch(Vec<Item>),
}

/// Decodes a JSON-RPC POST body into calls. `Err` only for a body that is not
/// JSON at all (ParseError, answered with id null). The calls are not yet
/// checked against the REQUIRED rules: the handler does that with
/// [`Call::validate`], after its capability checks. A batch of more than
/// `max_batch` requests is refused whole, as InvalidRequest.
pub fn parse_calls(bytes: &[u8], max_batch: usize) -> Result<Calls, A2aError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'[')
        && let Ok(text) = std::str::from_utf8(bytes)
        && let Ok(Fast(Some(item))) = serde_json::from_str::<Fast>(text)
    {
        return Ok(Calls::Single(item));
    }
    parse_calls_carefully(bytes, max_batch)
}

/// [`parse_calls`] without its fast single pass: the careful path alone,
/// which the fast pass must agree with on every input (the `jsonrpc_calls`
/// fuzz target checks that). Not for serving: it is slower.
#[doc(hidden)]
pub fn parse_calls_carefully(bytes: &[u8], max_batch: usize) -> Result<Calls, A2aError> {
    Ok(match jsonrpc::parse_body(bytes, max_batch)? {
        jsonrpc::Body::Single(r) => Calls::Single(careful(r)),
        jsonrpc::Body::Batch(items) => Calls::Batch(items.into_iter().map(careful).collect()),
    })
}

/// The careful path: an envelope already checked, params parsed with paths.
fn careful(r: jsonrpc::Incoming<'_>) -> Item {
    let req = r.map_err(|(id, e)| (Some(id), e))?;
    let Some((method, dialect)) = Method::from_jsonrpc(&req.method) else {
        return Err((req.id, method_not_found(&req.method)));
    };
    let params = req.params.map_or("{}", RawValue::get);
    match decode_params(method, dialect, params.as_bytes()) {
        Ok((call, legacy_task_id)) => Ok(Decoded {
            id: req.id,
            dialect,
            call,
            legacy_task_id,
        }),
        Err(e) => Err((req.id, e)),
    }
}

/// MethodNotFound naming the method.
pub fn method_not_found(name: &str) -> A2aError {
    A2aError::new(
        ErrorCode::MethodNotFound,
        format!("method {name:?} not found"),
    )
    .with_meta("method", name)
}

fn upgrade<T>(r: Result<T, String>) -> Result<T, A2aError> {
    r.map_err(|e| {
        let (field, desc) = e.split_once(": ").unwrap_or(("", &e));
        A2aError::invalid_field(field, desc)
    })
}

/// Parses `params` as the request of `method` in `dialect`, upgrading v0.3
/// and legacy shapes to v1.0. Errors name the bad field.
pub fn decode_params(
    method: Method,
    dialect: Dialect,
    params: &[u8],
) -> Result<(Call, Option<String>), A2aError> {
    use Method as M;
    let call = match (dialect, method) {
        (Dialect::V1, M::SendMessage) => Call::SendMessage(from_json(params)?),
        (Dialect::V1, M::SendStreamingMessage) => Call::SendStreamingMessage(from_json(params)?),
        (Dialect::V1, M::GetTask) => Call::GetTask(from_json(params)?),
        (Dialect::V1, M::ListTasks) => Call::ListTasks(from_json(params)?),
        (Dialect::V1, M::CancelTask) => Call::CancelTask(from_json(params)?),
        (Dialect::V1, M::SubscribeToTask) => Call::SubscribeToTask(from_json(params)?),
        (Dialect::V1, M::CreatePushConfig) => Call::CreatePushConfig(from_json(params)?),
        (Dialect::V1, M::GetPushConfig) => Call::GetPushConfig(from_json(params)?),
        (Dialect::V1, M::ListPushConfigs) => Call::ListPushConfigs(from_json(params)?),
        (Dialect::V1, M::DeletePushConfig) => Call::DeletePushConfig(from_json(params)?),
        (Dialect::V1, M::GetExtendedAgentCard) => Call::GetExtendedAgentCard(from_json(params)?),
        (Dialect::Legacy, m) => {
            let value: serde_json::Value = from_json(params)?;
            let legacy = LegacySend::from_value(value)
                .map_err(|e| A2aError::invalid_field("", e.to_string()))?;
            let req = upgrade(legacy.params.to_v1())?;
            let call = if m == M::SendStreamingMessage {
                Call::SendStreamingMessage(req)
            } else {
                Call::SendMessage(req)
            };
            return Ok((call, legacy.task_id));
        }
        (Dialect::V03, m) => from_v03(m, params)?,
    };
    Ok((call, None))
}

fn from_v03(method: Method, params: &[u8]) -> Result<Call, A2aError> {
    use Method as M;
    Ok(match method {
        M::SendMessage => Call::SendMessage(upgrade(
            from_json::<v03::MessageSendParams>(params)?.to_v1(),
        )?),
        M::SendStreamingMessage => Call::SendStreamingMessage(upgrade(
            from_json::<v03::MessageSendParams>(params)?.to_v1(),
        )?),
        M::GetTask => Call::GetTask(from_json::<v03::TaskQueryParams>(params)?.to_v1()),
        M::CancelTask => {
            let p: v03::TaskIdParams = from_json(params)?;
            Call::CancelTask(v1::CancelTaskRequest {
                id: p.id,
                metadata: p.metadata.map(crate::wkt::Struct),
                ..Default::default()
            })
        }
        M::SubscribeToTask => {
            let p: v03::TaskIdParams = from_json(params)?;
            Call::SubscribeToTask(v1::SubscribeToTaskRequest {
                id: p.id,
                ..Default::default()
            })
        }
        M::CreatePushConfig => {
            Call::CreatePushConfig(from_json::<v03::TaskPushNotificationConfig>(params)?.to_v1())
        }
        M::GetPushConfig => {
            // Without a config id (v0.3 allows it): the config named after
            // the task, which is what one set without an id is called.
            let p: v03::PushConfigParams = from_json(params)?;
            let id = p
                .push_notification_config_id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| p.id.clone());
            Call::GetPushConfig(v1::GetTaskPushNotificationConfigRequest {
                task_id: p.id,
                id,
                ..Default::default()
            })
        }
        M::ListPushConfigs => {
            let p: v03::TaskIdParams = from_json(params)?;
            Call::ListPushConfigs(v1::ListTaskPushNotificationConfigsRequest {
                task_id: p.id,
                ..Default::default()
            })
        }
        M::DeletePushConfig => {
            let p: v03::PushConfigParams = from_json(params)?;
            Call::DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest {
                task_id: p.id,
                id: p.push_notification_config_id.unwrap_or_default(),
                ..Default::default()
            })
        }
        M::GetExtendedAgentCard => {
            Call::GetExtendedAgentCard(v1::GetExtendedAgentCardRequest::default())
        }
        M::ListTasks => return Err(method_not_found(M::ListTasks.names().v1)),
    })
}

// ---- the fast single pass ---------------------------------------------------------

/// The fast pass's result: `None` means "take the careful path".
struct Fast(Option<Item>);

/// Params captured before `method` was seen, or decoded after.
#[allow(clippy::large_enum_variant)] // transient, on the stack of one parse
enum Params<'de> {
    Raw(&'de RawValue),
    Typed(Result<(Call, Option<String>), A2aError>),
}

struct ParamsSeed(Method, Dialect);

impl<'de> DeserializeSeed<'de> for ParamsSeed {
    type Value = Result<(Call, Option<String>), A2aError>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        use Method as M;
        let call = match (self.1, self.0) {
            (Dialect::V1, M::SendMessage) => Call::SendMessage(Deserialize::deserialize(d)?),
            (Dialect::V1, M::SendStreamingMessage) => {
                Call::SendStreamingMessage(Deserialize::deserialize(d)?)
            }
            (Dialect::V1, M::GetTask) => Call::GetTask(Deserialize::deserialize(d)?),
            (Dialect::V1, M::CancelTask) => Call::CancelTask(Deserialize::deserialize(d)?),
            (Dialect::V03, M::SendMessage | M::SendStreamingMessage) => {
                let p = v03::MessageSendParams::deserialize(d)?;
                return Ok(upgrade(p.to_v1()).map(|r| {
                    let call = if self.0 == M::SendMessage {
                        Call::SendMessage(r)
                    } else {
                        Call::SendStreamingMessage(r)
                    };
                    (call, None)
                }));
            }
            (Dialect::V03, M::GetTask) => {
                Call::GetTask(v03::TaskQueryParams::deserialize(d)?.to_v1())
            }
            // Less frequent calls: capture and take the careful route.
            (dialect, method) => {
                let raw = <&RawValue>::deserialize(d)?;
                return Ok(decode_params(method, dialect, raw.get().as_bytes()));
            }
        };
        Ok(Ok((call, None)))
    }
}

impl<'de> Deserialize<'de> for Fast {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FastVisitor)
    }
}

struct FastVisitor;

impl<'de> Visitor<'de> for FastVisitor {
    type Value = Fast;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC request object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fast, A::Error> {
        let (mut version_ok, mut id, mut method, mut params) = (false, None, None, None);
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "jsonrpc" => version_ok = map.next_value::<&'de str>()? == "2.0",
                "id" => id = Some(map.next_value::<Id>()?),
                "method" => {
                    let name = map.next_value::<&'de str>()?;
                    match Method::from_jsonrpc(name) {
                        Some(m) => method = Some(m),
                        None => return Ok(Fast(None)),
                    }
                }
                "params" => {
                    params = Some(match method {
                        Some((m, dialect)) => {
                            Params::Typed(map.next_value_seed(ParamsSeed(m, dialect))?)
                        }
                        None => Params::Raw(map.next_value::<&'de RawValue>()?),
                    })
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let Some((m, dialect)) = method else {
            return Ok(Fast(None));
        };
        if !version_ok {
            return Ok(Fast(None));
        }
        let decoded = match params {
            Some(Params::Typed(r)) => r,
            Some(Params::Raw(raw)) => {
                let first = raw.get().as_bytes().first();
                if !matches!(first, Some(b'{') | Some(b'[')) {
                    return Ok(Fast(None));
                }
                decode_params(m, dialect, raw.get().as_bytes())
            }
            None => decode_params(m, dialect, b"{}"),
        };
        Ok(Fast(Some(match decoded {
            Ok((call, legacy_task_id)) => Ok(Decoded {
                id,
                dialect,
                call,
                legacy_task_id,
            }),
            Err(e) => Err((id, e)),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(body: &str) -> Item {
        match parse_calls(body.as_bytes(), usize::MAX).expect("json") {
            Calls::Single(i) => i,
            Calls::Batch(_) => panic!("single"),
        }
    }

    #[test]
    fn v1_and_v03_sends_decode_to_the_same_call() {
        let v1 = single(r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#)
            .expect("v1");
        let v03 = single(r#"{"params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}},"method":"message/send","id":1,"jsonrpc":"2.0"}"#)
            .expect("v0.3, params before method");
        assert_eq!(v1.call, v03.call);
        assert_eq!((v1.dialect, v03.dialect), (Dialect::V1, Dialect::V03));
    }

    #[test]
    fn errors_fall_back_to_the_precise_kind() {
        let (id, e) = single(r#"{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":5}]}}}"#)
            .expect_err("wrong type");
        assert_eq!(
            (id, e.code),
            (Some(Id::from("a")), ErrorCode::InvalidParams)
        );
        assert_eq!(e.violations[0].field, "message.parts[0].text");
        let (_, e) =
            single(r#"{"jsonrpc":"2.0","id":2,"method":"nope/nope"}"#).expect_err("unknown");
        assert_eq!(e.code, ErrorCode::MethodNotFound);
        let d = single(r#"{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{}}"#)
            .expect("decodes; the handler validates");
        let e = d.call.validate().expect_err("missing id");
        assert_eq!(
            (e.code, e.violations[0].field.as_str()),
            (ErrorCode::InvalidParams, "id")
        );
        let (_, e) =
            single(r#"{"id":2,"method":"GetTask","params":{"id":"t"}}"#).expect_err("no jsonrpc");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert_eq!(
            parse_calls(b"{", usize::MAX).expect_err("not json").code,
            ErrorCode::ParseError
        );
    }

    #[test]
    fn v03_negative_history_and_bare_config_gets_decode_for_the_handler() {
        let d = single(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t","historyLength":-2}}"#)
            .expect("decodes");
        let e = d.call.validate().expect_err("negative");
        assert_eq!(e.violations[0].field, "historyLength");
        let d = single(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"t","historyLength":0}}"#)
            .expect("decodes");
        assert!(
            matches!(d.call, Call::GetTask(ref r) if r.history_length.is_none()),
            "0 is no limit"
        );
        let d = single(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"t"}}"#)
            .expect("decodes");
        assert!(
            matches!(d.call, Call::GetPushConfig(ref r) if r.id == "t" && r.task_id == "t"),
            "no config id: the config named after the task"
        );
        d.call.validate().expect("valid");
    }

    #[test]
    fn legacy_send_keeps_the_client_task_id() {
        let d = single(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{"id":"t-9","message":{"role":"user","parts":[{"type":"text","text":"x"}],"messageId":"m"}}}"#)
            .expect("legacy");
        assert_eq!(d.legacy_task_id.as_deref(), Some("t-9"));
        assert!(matches!(d.call, Call::SendMessage(_)));
    }
}
