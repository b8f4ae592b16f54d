//! Any bytes as a gRPC message body, both directions: a server's unary
//! requests (v1.0 and v0.3) through the frame decoder, protobuf, validation
//! and the v0.3 upgrades; a remote agent's answers and stream events as the
//! client reads them, with their v0.3 conversions. The first byte picks the
//! message type. Nothing may panic; a bad body is a `FrameError`.
#![no_main]

use heddle_core::{
    compat::v03_proto as conv,
    grpc_frame::decode_one,
    v1, v03_proto as pb,
    validate::Validate,
};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// The decoding limit of the fuzzed server.
const MAX: usize = 1 << 16;

fn checked<M: Message + Default + Validate>(body: &[u8]) {
    if let Ok(m) = decode_one::<M>(body, MAX) {
        let _ = m.validate();
    }
}

fn decoded<M: Message + Default>(body: &[u8]) -> Option<M> {
    decode_one::<M>(body, MAX).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 18 {
        0 => checked::<v1::SendMessageRequest>(body),
        1 => checked::<v1::GetTaskRequest>(body),
        2 => checked::<v1::ListTasksRequest>(body),
        3 => checked::<v1::CancelTaskRequest>(body),
        4 => checked::<v1::SubscribeToTaskRequest>(body),
        5 => checked::<v1::TaskPushNotificationConfig>(body),
        6 => checked::<v1::GetTaskPushNotificationConfigRequest>(body),
        7 => checked::<v1::ListTaskPushNotificationConfigsRequest>(body),
        8 => checked::<v1::DeleteTaskPushNotificationConfigRequest>(body),
        9 => {
            if let Some(r) = decoded::<pb::SendMessageRequest>(body) {
                let _ = conv::send_request_to_v1(&r).validate();
            }
        }
        10 => {
            if let Some(r) = decoded::<pb::GetTaskRequest>(body) {
                let _ = conv::get_task_to_v1(&r).map(|r| r.validate());
            }
        }
        11 => {
            if let Some(r) = decoded::<pb::CreateTaskPushNotificationConfigRequest>(body) {
                let _ = conv::create_push_config_to_v1(&r).map(|c| c.validate());
            }
        }
        12 => {
            if let Some(r) = decoded::<pb::GetTaskPushNotificationConfigRequest>(body) {
                let _ = conv::parse_config_name(&r.name, "name");
            }
        }
        13 => {
            if let Some(r) = decoded::<pb::CancelTaskRequest>(body) {
                let _ = conv::parse_task_name(&r.name, "name");
            }
        }
        // What a client reads from a remote agent.
        14 => {
            if let Some(r) = decoded::<v1::StreamResponse>(body) {
                let _ = conv::stream_response_from_v1(&r);
            }
        }
        15 => {
            if let Some(r) = decoded::<pb::StreamResponse>(body) {
                let _ = conv::stream_response_to_v1(&r);
            }
        }
        16 => {
            if let Some(r) = decoded::<pb::SendMessageResponse>(body) {
                let _ = conv::send_response_to_v1(&r);
            }
        }
        _ => {
            if let Some(c) = decoded::<pb::AgentCard>(body) {
                let _ = conv::card_to_v1(&c).validate();
            }
        }
    }
});
