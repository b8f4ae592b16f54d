//! Parse and serialize costs of the typed model against `serde_json::Value`
//! on the same bytes: the typed path must cost no more than the untyped one.
//!
//! `cargo bench -p heddle-core --bench wire`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use heddle_core::{
    call::{Call, Calls, Decoded, parse_calls},
    v1,
};
use serde_json::Value;

/// A typical SendMessage call: one text part, a data part, configuration.
const SEND: &str = r#"{"jsonrpc":"2.0","id":"req-7f3a","method":"SendMessage","params":{"message":{"messageId":"9b7c2f1e-3a4d-4c8e-9f2a-1b2c3d4e5f60","role":"ROLE_USER","contextId":"ctx-4c1b","parts":[{"text":"Summarize the attached quarterly report in three short paragraphs, highlighting revenue changes."},{"data":{"targetLength":"3 paragraphs","tone":"neutral","audience":["executives","analysts"]},"mediaType":"application/json"}],"metadata":{"client":"heddle-bench","attempt":1}},"configuration":{"acceptedOutputModes":["text/plain","text/markdown"],"historyLength":10,"returnImmediately":false}}}"#;

/// The server's path: envelope and typed, validated params in one pass.
fn typed_parse(bytes: &[u8]) -> v1::SendMessageRequest {
    match parse_calls(bytes, usize::MAX) {
        Ok(Calls::Single(Ok(Decoded {
            call: Call::SendMessage(r),
            ..
        }))) => r,
        other => panic!("valid request expected, got {other:?}"),
    }
}

fn task_with_history(n: usize) -> v1::Task {
    let msg = |i: usize| {
        let role = if i.is_multiple_of(2) {
            v1::Role::User
        } else {
            v1::Role::Agent
        };
        let mut m = v1::Message::new(
            format!("msg-{i:04}"),
            role,
            vec![v1::Part::text(format!(
                "Turn {i}: a sentence or two of ordinary conversational text, about as long as a real reply."
            ))],
        );
        m.context_id = "ctx-4c1b".into();
        m.task_id = "task-91d2".into();
        m
    };
    v1::Task {
        id: "task-91d2".into(),
        context_id: "ctx-4c1b".into(),
        status: Some(v1::TaskStatus {
            state: v1::TaskState::Completed as i32,
            message: None,
            timestamp: Some(heddle_core::wkt::Timestamp::from_millis(1_764_000_000_123)),
        }),
        artifacts: vec![v1::Artifact {
            artifact_id: "art-1".into(),
            name: "summary".into(),
            parts: vec![v1::Part::text("The summary text.")],
            ..Default::default()
        }],
        history: (0..n).map(msg).collect(),
        metadata: None,
    }
}

fn bench(c: &mut Criterion) {
    let bytes = SEND.as_bytes();
    assert_eq!(typed_parse(bytes).message.expect("message").parts.len(), 2);
    let mut g = c.benchmark_group("parse_send_message");
    g.bench_function("typed", |b| b.iter(|| typed_parse(black_box(bytes))));
    g.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(bytes)).expect("json"))
    });
    g.finish();

    let task = task_with_history(10);
    let value = serde_json::to_value(&task).expect("value");
    let mut g = c.benchmark_group("serialize_task_10_history");
    g.bench_function("typed", |b| {
        b.iter(|| serde_json::to_vec(black_box(&task)).expect("json"))
    });
    g.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::to_vec(black_box(&value)).expect("json"))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
