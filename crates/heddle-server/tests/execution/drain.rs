//! A server that stops ends its open streams with a last event telling the
//! client to subscribe again; the task itself goes on.

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;
use heddle_core::{call::Call, v1, v1::stream_response::Payload};
use heddle_server::{CallContext, RESUBSCRIBE_KEY, Reply, RequestHandler, StreamDrain, Update};
use heddle_store::MemoryStore;

use super::{Scripted, send};

fn drained_handler(drain: &StreamDrain) -> RequestHandler {
    let agent = Scripted {
        wait: Some(Duration::from_millis(300)),
        panic: false,
    };
    let card = v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    RequestHandler::builder(
        "scripted",
        card,
        Arc::new(agent),
        Arc::new(MemoryStore::default()),
    )
    .stream_drain(drain.clone())
    .build()
}

fn streaming() -> Call {
    match send(false) {
        Call::SendMessage(r) => Call::SendStreamingMessage(r),
        other => other,
    }
}

async fn open(h: &RequestHandler, call: Call) -> heddle_server::EventStream {
    match h.handle(CallContext::anonymous(), call).await {
        Ok(Reply::Stream(s)) => s,
        other => panic!("not a stream: {other:?}"),
    }
}

async fn next(events: &mut heddle_server::EventStream) -> Option<Update> {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("an event or the end in time")
}

/// The drained stream's last event: a status update keyed
/// [`RESUBSCRIBE_KEY`], with no generation of its own.
fn resubscribe(update: &Update) -> (v1::TaskState, serde_json::Value) {
    assert_eq!(update.generation, 0, "it changes nothing: {update:?}");
    let Some(Payload::StatusUpdate(u)) = &update.response.payload else {
        panic!("not a status update: {update:?}");
    };
    let why = u
        .metadata
        .as_ref()
        .and_then(|m| m.0.get(RESUBSCRIBE_KEY))
        .cloned()
        .unwrap_or_else(|| panic!("no {RESUBSCRIBE_KEY}: {update:?}"));
    let state = u
        .status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state());
    (state, why)
}

#[tokio::test]
async fn a_drained_stream_ends_with_where_to_resubscribe_and_the_task_goes_on() {
    let drain = StreamDrain::new();
    let h = drained_handler(&drain);
    let mut events = open(&h, streaming()).await;
    let (task_id, last_generation) = loop {
        let update = next(&mut events).await.expect("an event");
        if let Some(Payload::StatusUpdate(u)) = &update.response.payload
            && u.status
                .as_ref()
                .is_some_and(|s| s.state() == v1::TaskState::Working)
        {
            break (u.task_id.clone(), update.generation);
        }
    };
    assert!(!drain.started());
    drain.start();
    let last = next(&mut events).await.expect("the last event");
    let (state, why) = resubscribe(&last);
    assert_eq!(state, v1::TaskState::Working);
    assert_eq!(why["lastEventId"], last_generation.to_string());
    assert!(
        why["reason"]
            .as_str()
            .is_some_and(|r| r.contains("subscribe"))
    );
    assert!(next(&mut events).await.is_none(), "the stream ends there");

    // A stream opened now ends the same way at once.
    let subscribe = Call::SubscribeToTask(v1::SubscribeToTaskRequest {
        id: task_id.clone(),
        ..Default::default()
    });
    let mut again = open(&h, subscribe).await;
    let snapshot = next(&mut again).await.expect("the snapshot");
    assert!(matches!(snapshot.response.payload, Some(Payload::Task(_))));
    let (_, why) = resubscribe(&next(&mut again).await.expect("the last event"));
    assert_eq!(why["lastEventId"], snapshot.generation.to_string());
    assert!(next(&mut again).await.is_none());

    // Nobody listens, yet the task finishes.
    let get = Call::GetTask(v1::GetTaskRequest {
        id: task_id,
        ..Default::default()
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let Ok(Reply::Task(task)) = h.handle(CallContext::anonymous(), get.clone()).await else {
            panic!("GetTask");
        };
        if super::state(&task) == v1::TaskState::Completed {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task did not finish"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
