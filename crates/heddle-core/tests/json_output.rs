//! `heddle_core::json` writes exactly what serde_json writes: compared on
//! generated JSON values, on every escapable byte at every position of the
//! word-at-a-time check, on the serde data model's corners, and on the A2A
//! model itself.

use std::collections::BTreeMap;

use heddle_core::json;
use proptest::prelude::*;
use serde::Serialize;
use serde_json::{Value, json as j};

fn ours<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    json::to_vec_with_capacity(value, 0).expect("serializes")
}

fn theirs<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("serializes")
}

fn same<T: Serialize + ?Sized>(value: &T) {
    assert_eq!(
        String::from_utf8_lossy(&ours(value)),
        String::from_utf8_lossy(&theirs(value))
    );
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        ".*",
        "[a-zA-Z0-9 _-]{0,40}",
        // Heavy on the bytes that need escaping, and on multi-byte chars.
        proptest::collection::vec(
            prop_oneof![
                Just('"'),
                Just('\\'),
                Just('/'),
                (0u8..0x20).prop_map(char::from),
                Just('\u{7f}'),
                Just('é'),
                Just('😀'),
                Just('\u{2028}'),
                any::<char>(),
                Just('a'),
            ],
            0..40
        )
        .prop_map(|cs| cs.into_iter().collect()),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(arb_string(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_json_value_is_written_as_serde_json_writes_it(v in arb_value()) {
        prop_assert_eq!(ours(&v), theirs(&v));
    }

    #[test]
    fn any_string_is_escaped_as_serde_json_escapes_it(s in arb_string()) {
        prop_assert_eq!(ours(&s), theirs(&s));
    }
}

#[test]
fn every_ascii_byte_at_every_position_of_a_word_and_the_tail() {
    for byte in 0u8..0x80 {
        for len in 1..=19 {
            for at in 0..len {
                let mut s = vec![b'x'; len];
                s[at] = byte;
                let s = String::from_utf8(s).expect("ascii");
                assert_eq!(ours(&s), theirs(&s), "byte {byte:#x} at {at} of {len}");
            }
        }
    }
    // Bytes of multi-byte characters (0x80..) never need escaping.
    for c in ['é', 'ß', '€', '𝄞', '\u{85}', '\u{ffff}'] {
        let s: String = std::iter::repeat_n(c, 9).collect();
        same(&s);
        same(&format!("{s}\"{s}\n"));
    }
}

#[derive(Serialize)]
enum Variants {
    Unit,
    Newtype(u8),
    Tuple(i32, String),
    Struct { a: Option<f32>, b: Vec<u8> },
}

#[derive(Serialize)]
struct Unit;

#[derive(Serialize)]
struct Newtype(String);

#[derive(Serialize)]
struct Tuple(u8, char, ());

#[derive(Serialize)]
struct Corners {
    unit: (),
    unit_struct: Unit,
    newtype: Newtype,
    tuple: Tuple,
    variants: Vec<Variants>,
    bytes: serde_bytes_like::Bytes,
    floats: (f32, f64, f64, f64, f64),
    wide: (i128, u128),
    int_keys: BTreeMap<i32, bool>,
    bool_keys: BTreeMap<bool, ()>,
    char_keys: BTreeMap<char, Option<u8>>,
    newtype_keys: BTreeMap<KeyNewtype, u8>,
    some_keys: BTreeMap<Option<u8>, u8>,
    empty: (Vec<u8>, BTreeMap<String, u8>),
    raw: Box<serde_json::value::RawValue>,
}

#[derive(Serialize, PartialEq, Eq, PartialOrd, Ord)]
struct KeyNewtype(u16);

/// Bytes through `serialize_bytes`.
mod serde_bytes_like {
    pub struct Bytes(pub Vec<u8>);
    impl serde::Serialize for Bytes {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(&self.0)
        }
    }
}

#[test]
fn the_serde_data_model_corners_match() {
    let corners = Corners {
        unit: (),
        unit_struct: Unit,
        newtype: Newtype("n\t\"".into()),
        tuple: Tuple(7, '\u{1}', ()),
        variants: vec![
            Variants::Unit,
            Variants::Newtype(3),
            Variants::Tuple(-4, "t".into()),
            Variants::Struct {
                a: Some(1.5),
                b: vec![1, 2],
            },
            Variants::Struct { a: None, b: vec![] },
        ],
        bytes: serde_bytes_like::Bytes(vec![0, 255, 10]),
        floats: (0.1, f64::NAN, f64::INFINITY, -0.0, 1e300),
        wide: (i128::MIN, u128::MAX),
        int_keys: [(-1, true), (2, false)].into(),
        bool_keys: [(true, ()), (false, ())].into(),
        char_keys: [('"', None), ('k', Some(1))].into(),
        newtype_keys: [(KeyNewtype(9), 1)].into(),
        some_keys: [(Some(4), 1)].into(),
        empty: (vec![], BTreeMap::new()),
        raw: serde_json::value::RawValue::from_string(r#"{"as" : [ "is" ]}"#.into())
            .expect("raw json"),
    };
    same(&corners);
}

#[test]
fn keys_json_cannot_have_are_refused_like_serde_json() {
    let map: BTreeMap<Vec<u8>, u8> = [(vec![1], 1)].into();
    assert!(json::to_vec_with_capacity(&map, 0).is_err());
    assert!(serde_json::to_vec(&map).is_err());
    let map: std::collections::HashMap<Option<u8>, u8> = [(None, 1)].into();
    assert!(json::to_vec_with_capacity(&map, 0).is_err());
    assert!(serde_json::to_vec(&map).is_err());
}

#[test]
fn the_a2a_model_matches() {
    let task: heddle_proto::v1::Task = serde_json::from_value(j!({
        "id": "task-1",
        "contextId": "ctx-1",
        "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "which one?\n\"a\" or \\b"}]},
            "timestamp": "2026-11-30T20:47:41.935Z"
        },
        "artifacts": [{
            "artifactId": "a1",
            "name": "report",
            "parts": [
                {"text": "line\u{1}one\r\n", "mediaType": "text/plain"},
                {"data": {"n": 1.25, "big": 12345678901234i64, "list": [true, null, "x"], "nested": {"k": "v"}}},
                {"raw": "aGVsbG8=", "filename": "h.bin"},
                {"url": "https://example.com/a?b=c&d=e"}
            ],
            "metadata": {"tokens": 42, "ratio": 0.5}
        }],
        "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "héllo 😀"}], "extensions": ["https://x.example/ext"]}],
        "metadata": {"caller": "alice", "deep": {"a": [1, 2.5, "three"]}}
    }))
    .expect("a task");
    same(&task);
    same(&heddle_proto::v1::SendMessageResponse {
        payload: Some(heddle_proto::v1::send_message_response::Payload::Task(
            task.clone(),
        )),
    });
    same(&heddle_core::jsonrpc::Response::result(
        heddle_core::jsonrpc::Id::Str("req\"1".into()),
        &task,
    ));
}
