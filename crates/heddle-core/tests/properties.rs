//! Property tests of the wire model:
//! * v1.0 value → ProtoJSON → value is the identity;
//! * v1.0 → v0.3 → v1.0 is the identity for everything v0.3 can express;
//! * protobuf binary and ProtoJSON agree (binary round trip, same JSON).

use heddle_core::{
    compat::v03,
    v1::{self, part::Content, stream_response::Payload},
    wkt::{Struct, Timestamp, Value as PbValue},
};
use proptest::prelude::*;
use serde_json::{Map, Value};

/// JSON values that survive protobuf's double: integers within ±2^53 and
/// non-integral floats.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(Value::from),
        (-1.0e6f64..1.0e6)
            .prop_filter("non-integral", |f| f.fract() != 0.0)
            .prop_map(Value::from),
        "[a-zA-Z0-9 ñ漢🙂\"\\\\]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-zA-Z]{1,6}", json_value(), 0..3)
        .prop_map(|m| m.into_iter().collect())
}

fn metadata() -> impl Strategy<Value = Option<Struct>> {
    prop::option::of(json_object().prop_map(Struct))
}

fn id() -> impl Strategy<Value = String> {
    "[a-z0-9-]{1,12}"
}

fn opt_text() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-zA-Z /.+-]{1,12}"]
}

/// Any part. `v03_safe` restricts to what v0.3 can express: no media type or
/// filename on text and data parts, and object-valued data.
fn part(v03_safe: bool) -> BoxedStrategy<v1::Part> {
    let text = ("\\PC{0,20}", metadata(), opt_text(), opt_text()).prop_map(move |(t, m, f, mt)| {
        v1::Part {
            content: Some(Content::Text(t)),
            metadata: m,
            filename: if v03_safe { String::new() } else { f },
            media_type: if v03_safe { String::new() } else { mt },
        }
    });
    let raw = (
        prop::collection::vec(any::<u8>(), 0..24),
        metadata(),
        opt_text(),
        opt_text(),
    )
        .prop_map(|(b, m, f, mt)| v1::Part {
            content: Some(Content::Raw(b)),
            metadata: m,
            filename: f,
            media_type: mt,
        });
    let url = (
        "https://[a-z]{1,8}\\.example/[a-z]{0,8}",
        metadata(),
        opt_text(),
        opt_text(),
    )
        .prop_map(|(u, m, f, mt)| v1::Part {
            content: Some(Content::Url(u)),
            metadata: m,
            filename: f,
            media_type: mt,
        });
    let data_value = if v03_safe {
        json_object().prop_map(Value::Object).boxed()
    } else {
        json_value().boxed()
    };
    let data = (data_value, metadata(), opt_text()).prop_map(move |(d, m, mt)| v1::Part {
        content: Some(Content::Data(PbValue(d))),
        metadata: m,
        filename: String::new(),
        media_type: if v03_safe { String::new() } else { mt },
    });
    prop_oneof![text, raw, url, data].boxed()
}

fn message(v03_safe: bool) -> impl Strategy<Value = v1::Message> {
    (
        id(),
        prop::option::of(id()),
        prop::option::of(id()),
        prop_oneof![Just(v1::Role::User), Just(v1::Role::Agent)],
        prop::collection::vec(part(v03_safe), 1..4),
        metadata(),
        prop::collection::vec("https://ext\\.example/[a-z]{1,5}", 0..2),
        prop::collection::vec(id(), 0..2),
    )
        .prop_map(
            |(mid, ctx, task, role, parts, metadata, extensions, refs)| v1::Message {
                message_id: mid,
                context_id: ctx.unwrap_or_default(),
                task_id: task.unwrap_or_default(),
                role: role as i32,
                parts,
                metadata,
                extensions,
                reference_task_ids: refs,
            },
        )
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    (0i64..4_102_444_800_000).prop_map(Timestamp::from_millis)
}

fn state() -> impl Strategy<Value = v1::TaskState> {
    prop::sample::select(vec![
        v1::TaskState::Submitted,
        v1::TaskState::Working,
        v1::TaskState::Completed,
        v1::TaskState::Failed,
        v1::TaskState::Canceled,
        v1::TaskState::InputRequired,
        v1::TaskState::Rejected,
        v1::TaskState::AuthRequired,
    ])
}

fn status(v03_safe: bool) -> impl Strategy<Value = v1::TaskStatus> {
    (
        state(),
        prop::option::of(message(v03_safe)),
        prop::option::of(timestamp()),
    )
        .prop_map(|(s, m, t)| v1::TaskStatus {
            state: s as i32,
            message: m,
            timestamp: t,
        })
}

fn artifact(v03_safe: bool) -> impl Strategy<Value = v1::Artifact> {
    (
        id(),
        opt_text(),
        opt_text(),
        prop::collection::vec(part(v03_safe), 1..3),
        metadata(),
    )
        .prop_map(|(aid, name, description, parts, metadata)| v1::Artifact {
            artifact_id: aid,
            name,
            description,
            parts,
            metadata,
            extensions: Vec::new(),
        })
}

fn task(v03_safe: bool) -> impl Strategy<Value = v1::Task> {
    (
        id(),
        id(),
        status(v03_safe),
        prop::collection::vec(artifact(v03_safe), 0..3),
        prop::collection::vec(message(v03_safe), 0..3),
        metadata(),
    )
        .prop_map(|(id, ctx, status, artifacts, history, metadata)| v1::Task {
            id,
            context_id: ctx,
            status: Some(status),
            artifacts,
            history,
            metadata,
        })
}

fn stream_response(v03_safe: bool) -> impl Strategy<Value = v1::StreamResponse> {
    let payload = prop_oneof![
        task(v03_safe).prop_map(Payload::Task),
        message(v03_safe).prop_map(Payload::Message),
        (id(), id(), status(v03_safe), metadata()).prop_map(|(t, c, s, m)| {
            Payload::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: t,
                context_id: c,
                status: Some(s),
                metadata: m,
            })
        }),
        (
            id(),
            id(),
            artifact(v03_safe),
            any::<bool>(),
            any::<bool>(),
            metadata()
        )
            .prop_map(|(t, c, a, ap, lc, m)| {
                Payload::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                    task_id: t,
                    context_id: c,
                    artifact: Some(a),
                    append: ap,
                    last_chunk: lc,
                    metadata: m,
                })
            }),
    ];
    payload.prop_map(|p| v1::StreamResponse { payload: Some(p) })
}

fn send_request() -> impl Strategy<Value = v1::SendMessageRequest> {
    (
        message(false),
        prop::option::of((prop::option::of(0i32..50), any::<bool>())),
        metadata(),
    )
        .prop_map(|(m, cfg, metadata)| v1::SendMessageRequest {
            tenant: String::new(),
            message: Some(m),
            configuration: cfg.map(|(h, r)| v1::SendMessageConfiguration {
                accepted_output_modes: vec!["text/plain".into()],
                task_push_notification_config: None,
                history_length: h,
                return_immediately: r,
            }),
            metadata,
        })
}

fn json_identity<T>(v: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_string(v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: T =
        serde_json::from_str(&json).map_err(|e| TestCaseError::fail(format!("{e}: {json}")))?;
    prop_assert_eq!(&back, v);
    Ok(())
}

fn binary_agrees<T>(v: &T) -> Result<(), TestCaseError>
where
    T: prost::Message + Default + serde::Serialize + PartialEq + std::fmt::Debug,
{
    let bytes = v.encode_to_vec();
    prop_assert_eq!(bytes.len(), v.encoded_len());
    let back = T::decode(bytes.as_slice()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, v);
    let a = serde_json::to_value(v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let b = serde_json::to_value(&back).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(a, b);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn v1_task_json_round_trip_is_identity(t in task(false)) {
        json_identity(&t)?;
    }

    #[test]
    fn v1_stream_response_json_round_trip_is_identity(e in stream_response(false)) {
        json_identity(&e)?;
    }

    #[test]
    fn v1_send_request_json_round_trip_is_identity(r in send_request()) {
        json_identity(&r)?;
    }

    #[test]
    fn v1_to_v03_and_back_is_identity_for_what_v03_expresses(t in task(true), e in stream_response(true)) {
        let down = v03::Task::from_v1(&t);
        let json = serde_json::to_string(&down).map_err(|x| TestCaseError::fail(x.to_string()))?;
        let parsed: v03::Task = serde_json::from_str(&json).map_err(|x| TestCaseError::fail(format!("{x}: {json}")))?;
        prop_assert_eq!(parsed.to_v1().map_err(TestCaseError::fail)?, t);

        let down = v03::StreamEvent::from_v1(&e).ok_or_else(|| TestCaseError::fail("no payload"))?;
        let json = serde_json::to_string(&down).map_err(|x| TestCaseError::fail(x.to_string()))?;
        let parsed: v03::StreamEvent = serde_json::from_str(&json).map_err(|x| TestCaseError::fail(format!("{x}: {json}")))?;
        prop_assert_eq!(parsed.to_v1().map_err(TestCaseError::fail)?, e);
    }

    #[test]
    fn protobuf_binary_and_json_agree(t in task(false), e in stream_response(false), r in send_request()) {
        binary_agrees(&t)?;
        binary_agrees(&e)?;
        binary_agrees(&r)?;
    }
}
