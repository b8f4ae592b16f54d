//! A streaming subscriber that falls behind: within the fan-out's buffer it
//! gets every event as published; past it, one snapshot of the task that
//! carries everything it missed, and the stream still ends at the terminal
//! state.

use std::{sync::Arc, time::Duration};

use futures::StreamExt as _;
use heddle_core::{call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Limits, Reply, RequestContext, RequestHandler,
    TaskEvents,
};
use heddle_store::MemoryStore;
use v1::stream_response::Payload;

/// Works, streams `chunks` pieces of one artifact, completes; never waits,
/// so every event is published before the caller reads the first.
struct Chunks {
    chunks: usize,
}

#[async_trait::async_trait]
impl AgentExecutor for Chunks {
    async fn execute(&self, _: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(None).await?;
        for i in 0..self.chunks {
            let artifact = v1::Artifact {
                artifact_id: "a".into(),
                parts: vec![v1::Part::text(format!("{i};"))],
                ..Default::default()
            };
            events
                .artifact(artifact, i > 0, i + 1 == self.chunks)
                .await?;
        }
        events.complete(None).await?;
        Ok(())
    }
}

fn expected_text(chunks: usize) -> String {
    (0..chunks).map(|i| format!("{i};")).collect()
}

/// Every event of one streaming send, read only once the agent is done.
async fn stream_all(chunks: usize) -> Vec<v1::StreamResponse> {
    let card = v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let handler = RequestHandler::new(
        "chunks",
        card,
        Arc::new(Chunks { chunks }),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let call = Call::SendStreamingMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: "m1".into(),
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text("go")],
            ..Default::default()
        }),
        ..Default::default()
    });
    let reply = handler
        .handle(CallContext::anonymous(), call)
        .await
        .expect("stream");
    let Reply::Stream(stream) = reply else {
        panic!("not a stream");
    };
    tokio::time::timeout(Duration::from_secs(5), stream.collect::<Vec<_>>())
        .await
        .expect("the stream ends")
        .into_iter()
        .map(|u| u.response.clone())
        .collect()
}

fn last_task_state(events: &[v1::StreamResponse]) -> Option<v1::TaskState> {
    events.iter().rev().find_map(|e| match &e.payload {
        Some(Payload::Task(t)) => t.status.as_ref().map(|s| s.state()),
        Some(Payload::StatusUpdate(u)) => u.status.as_ref().map(|s| s.state()),
        _ => None,
    })
}

#[tokio::test]
async fn a_subscriber_within_the_buffer_gets_every_chunk_as_published() {
    let events = stream_all(8).await;
    let chunks: String = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::ArtifactUpdate(u)) => u.artifact.as_ref().map(|a| {
                a.parts
                    .iter()
                    .filter_map(v1::Part::as_text)
                    .collect::<String>()
            }),
            _ => None,
        })
        .collect();
    assert_eq!(chunks, expected_text(8), "{events:?}");
    assert_eq!(last_task_state(&events), Some(v1::TaskState::Completed));
}

#[tokio::test]
async fn a_subscriber_past_the_buffer_gets_one_snapshot_with_everything_it_missed() {
    let events = stream_all(100).await;
    assert!(events.len() < 100, "{} events: no resync", events.len());
    let snapshot = events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Task(t)) if !t.artifacts.is_empty() => Some(t),
            _ => None,
        })
        .expect("a snapshot with the artifact");
    let text: String = snapshot.artifacts[0]
        .parts
        .iter()
        .filter_map(v1::Part::as_text)
        .collect();
    assert_eq!(text, expected_text(100));
    assert_eq!(last_task_state(&events), Some(v1::TaskState::Completed));
}
