//! The observer hook: what a handler tells it of calls, streams and task
//! states, and that the binding and version reach it.

use std::sync::Mutex;

use futures::StreamExt as _;
use heddle_core::{ErrorCode, ProtocolVersion};
use heddle_server::{
    Binding, Observer,
    observe::{CallEvent, StreamEvent, TaskStateEvent},
};

use super::*;

/// Everything it was told, as text.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn push(&self, line: String) {
        self.0.lock().expect("lock").push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().expect("lock").clone()
    }
}

impl Observer for Recorder {
    fn call(&self, c: &CallEvent<'_>) {
        self.push(format!(
            "call {} {:?} {:?} {} {:?}",
            c.agent_id,
            c.method,
            c.binding,
            c.version.as_str(),
            c.outcome
        ));
    }

    fn stream_opened(&self, s: &StreamEvent<'_>) {
        self.push(format!("open {:?} {:?}", s.method, s.binding));
    }

    fn stream_closed(&self, s: &StreamEvent<'_>, _: Duration) {
        self.push(format!("close {:?} {:?}", s.method, s.binding));
    }

    fn task_state(&self, t: &TaskStateEvent<'_>) {
        assert_eq!(t.from.is_some(), t.from_since.is_some(), "{t:?}");
        self.push(format!(
            "task {:?} -> {}",
            t.from.map(|s| s.as_str_name()),
            t.to.as_str_name()
        ));
    }
}

fn observed(streaming: bool) -> (RequestHandler, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let card = v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(streaming),
            ..Default::default()
        }),
        ..Default::default()
    };
    let handler = RequestHandler::builder(
        "scripted",
        card,
        Arc::new(Scripted {
            wait: None,
            panic: false,
        }),
        Arc::new(MemoryStore::default()),
    )
    .observer(recorder.clone())
    .build();
    (handler, recorder)
}

fn over(binding: Binding, version: ProtocolVersion) -> CallContext {
    CallContext {
        binding: Some(binding),
        resume_after: None,
        version,
        ..CallContext::anonymous()
    }
}

#[tokio::test]
async fn an_observer_is_told_each_call_its_outcome_and_the_task_states() {
    let (h, seen) = observed(false);
    let reply = h
        .handle(over(Binding::Rest, ProtocolVersion::V1_0), send(false))
        .await
        .expect("sent");
    assert!(matches!(reply, Reply::Task(_)));
    let missing = Call::GetTask(v1::GetTaskRequest {
        id: "nope".into(),
        ..Default::default()
    });
    let err = h
        .handle(over(Binding::Grpc, ProtocolVersion::V0_3), missing)
        .await
        .expect_err("no such task");
    assert_eq!(err.code, ErrorCode::TaskNotFound);
    // A refusal before the method runs is a call too.
    let refused = h
        .handle(CallContext::anonymous(), send_streaming())
        .await
        .expect_err("this agent does not stream");
    assert_eq!(refused.code, ErrorCode::UnsupportedOperation);
    assert_eq!(
        seen.lines(),
        [
            "task None -> TASK_STATE_SUBMITTED",
            "task Some(\"TASK_STATE_SUBMITTED\") -> TASK_STATE_WORKING",
            "task Some(\"TASK_STATE_WORKING\") -> TASK_STATE_COMPLETED",
            "call scripted SendMessage Some(Rest) 1.0 Ok(())",
            "call scripted GetTask Some(Grpc) 0.3 Err(TaskNotFound)",
            "call scripted SendStreamingMessage None 1.0 Err(UnsupportedOperation)",
        ]
    );
}

fn send_streaming() -> Call {
    match send(false) {
        Call::SendMessage(r) => Call::SendStreamingMessage(r),
        other => other,
    }
}

#[tokio::test]
async fn a_stream_is_announced_open_and_then_closed() {
    let (h, seen) = observed(true);
    let reply = h
        .handle(
            over(Binding::JsonRpc, ProtocolVersion::V1_0),
            send_streaming(),
        )
        .await
        .expect("stream");
    let Reply::Stream(mut events) = reply else {
        panic!("a stream")
    };
    assert!(
        seen.lines()
            .contains(&"open SendStreamingMessage Some(JsonRpc)".to_owned())
    );
    while events.next().await.is_some() {}
    drop(events);
    let lines = seen.lines();
    assert_eq!(
        lines.last().map(String::as_str),
        Some("close SendStreamingMessage Some(JsonRpc)"),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"call scripted SendStreamingMessage Some(JsonRpc) 1.0 Ok(())".to_owned()),
        "{lines:?}"
    );
}
