//! Any bytes as a JSON-RPC body: the envelope parser, then each request's
//! params as the typed request of its method and dialect, validation, and the
//! v0.3/legacy upgrades. Nothing may panic; every failure must be an A2A error.
#![no_main]

use heddle_core::{
    compat::{legacy::LegacySend, v03},
    jsonrpc::{Body, Incoming, parse_body},
    method::{Dialect, Method},
    v1,
    validate::{Validate, from_json},
};
use libfuzzer_sys::fuzz_target;

fn typed<T: serde::de::DeserializeOwned + Validate>(p: &[u8]) {
    if let Ok(v) = from_json::<T>(p) {
        let _ = v.validate();
    }
}

fn one(item: Incoming<'_>) {
    let Ok(req) = item else { return };
    let Some((method, dialect)) = Method::from_jsonrpc(&req.method) else { return };
    let params = req.params.map_or("{}", |p| p.get()).as_bytes();
    match (dialect, method) {
        (Dialect::V1, Method::SendMessage | Method::SendStreamingMessage) => typed::<v1::SendMessageRequest>(params),
        (Dialect::V1, Method::GetTask) => typed::<v1::GetTaskRequest>(params),
        (Dialect::V1, Method::ListTasks) => typed::<v1::ListTasksRequest>(params),
        (Dialect::V1, Method::CancelTask) => typed::<v1::CancelTaskRequest>(params),
        (Dialect::V1, _) => typed::<v1::TaskPushNotificationConfig>(params),
        (Dialect::V03, _) => {
            if let Ok(p) = from_json::<v03::MessageSendParams>(params) {
                if let Ok(r) = p.to_v1() {
                    let _ = r.validate();
                    let _ = v03::MessageSendParams::from_v1(&r);
                }
            }
        }
        (Dialect::Legacy, _) => {
            if let Ok(v) = serde_json::from_slice(params) {
                if let Ok(l) = LegacySend::from_value(v) {
                    let _ = l.params.to_v1();
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match parse_body(data, 64) {
        Ok(Body::Single(item)) => one(item),
        Ok(Body::Batch(items)) => items.into_iter().for_each(one),
        Err(_) => {}
    }
});
