//! How an agent runs: inline until it first waits, then on a task of its
//! own; either way it finishes its task, and a panic fails the task rather
//! than leaving it WORKING with its caller waiting.

use std::{sync::Arc, time::Duration};

use heddle_core::{call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Limits, Reply, RequestContext, RequestHandler,
    TaskEvents,
};
use heddle_store::MemoryStore;

/// Works, optionally waits, then panics or completes.
struct Scripted {
    wait: Option<Duration>,
    panic: bool,
}

#[async_trait::async_trait]
impl AgentExecutor for Scripted {
    async fn execute(&self, _: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(Some("on it")).await?;
        if let Some(wait) = self.wait {
            tokio::time::sleep(wait).await;
        }
        if self.panic {
            panic!("internal detail that must not reach the caller");
        }
        events.complete(Some("done")).await?;
        Ok(())
    }
}

fn handler(agent: Scripted) -> RequestHandler {
    RequestHandler::new(
        "scripted",
        v1::AgentCard::default(),
        Arc::new(agent),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    )
}

fn send(return_immediately: bool) -> Call {
    Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: "m1".into(),
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text("go")],
            ..Default::default()
        }),
        configuration: Some(v1::SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn state(task: &v1::Task) -> v1::TaskState {
    task.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

fn status_text(task: &v1::Task) -> String {
    task.status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .unwrap_or_default()
}

async fn blocking_send(h: &RequestHandler) -> v1::Task {
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        h.handle(CallContext::anonymous(), send(false)),
    )
    .await
    .expect("the caller gets an answer");
    match reply {
        Ok(Reply::Task(task)) => task,
        other => panic!("a task, not {other:?}"),
    }
}

#[tokio::test]
async fn an_agent_that_never_waits_completes_within_the_call() {
    let h = handler(Scripted {
        wait: None,
        panic: false,
    });
    let task = blocking_send(&h).await;
    assert_eq!(state(&task), v1::TaskState::Completed);
}

#[tokio::test]
async fn an_agent_that_waits_completes_on_its_own_task() {
    let h = handler(Scripted {
        wait: Some(Duration::from_millis(20)),
        panic: false,
    });
    let task = blocking_send(&h).await;
    assert_eq!(state(&task), v1::TaskState::Completed);
}

#[tokio::test]
async fn an_agent_that_waits_goes_on_after_a_non_blocking_caller_has_its_answer() {
    let h = handler(Scripted {
        wait: Some(Duration::from_millis(50)),
        panic: false,
    });
    let Ok(Reply::Task(task)) = h.handle(CallContext::anonymous(), send(true)).await else {
        panic!("a task");
    };
    assert!(
        !state(&task).is_terminal(),
        "answered before the agent finished"
    );
    let mut last = v1::TaskState::Unspecified;
    for _ in 0..200 {
        last = state(
            &h.get_task(&CallContext::anonymous(), &task.id, None)
                .await
                .expect("the task"),
        );
        if last.is_terminal() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(last, v1::TaskState::Completed);
}

#[tokio::test]
async fn an_agent_panicking_before_it_waits_fails_its_task_without_its_message() {
    let h = handler(Scripted {
        wait: None,
        panic: true,
    });
    let task = blocking_send(&h).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    assert_eq!(status_text(&task), "the agent failed unexpectedly");
    let stored = h
        .get_task(&CallContext::anonymous(), &task.id, None)
        .await
        .expect("the task");
    assert_eq!(state(&stored), v1::TaskState::Failed);
}

#[tokio::test]
async fn an_agent_panicking_after_it_waited_fails_its_task() {
    let h = handler(Scripted {
        wait: Some(Duration::from_millis(20)),
        panic: true,
    });
    let task = blocking_send(&h).await;
    assert_eq!(state(&task), v1::TaskState::Failed);
    assert_eq!(status_text(&task), "the agent failed unexpectedly");
}

/// Asks a question, then takes a while to end its run; completes the next turn.
struct AsksThenLingers;

#[async_trait::async_trait]
impl AgentExecutor for AsksThenLingers {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if ctx.text() == "go" {
            events.input_required("which one?").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
        } else {
            events.complete(Some("done")).await?;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_reply_sent_as_soon_as_the_agent_asks_waits_for_its_run_to_end() {
    let h = RequestHandler::new(
        "asks",
        v1::AgentCard::default(),
        Arc::new(AsksThenLingers),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let asked = blocking_send(&h).await;
    assert_eq!(state(&asked), v1::TaskState::InputRequired);
    // At once, while the run that asked is still going.
    let reply = Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: "m2".into(),
            task_id: asked.id.clone(),
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text("the first")],
            ..Default::default()
        }),
        ..Default::default()
    });
    let answer = tokio::time::timeout(
        Duration::from_secs(5),
        h.handle(CallContext::anonymous(), reply),
    )
    .await
    .expect("an answer");
    match answer {
        Ok(Reply::Task(task)) => assert_eq!(state(&task), v1::TaskState::Completed),
        other => panic!("the completed task, not {other:?}"),
    }
}

/// A concurrency limit and its queue; an agent's own request rate.
#[path = "execution/queue.rs"]
mod queue;

#[path = "execution/observe.rs"]
mod observe;

/// Streams ended by a server that stops.
#[path = "execution/drain.rs"]
mod drain;
