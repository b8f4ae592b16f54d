//! The send gate: a refusal is the caller's error and no task is made; an
//! admitted run's pass hears when the agent starts and how the run ended,
//! for a new task and for its continuation; a pass whose run is aborted
//! after a cancel is dropped untold.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use heddle_core::{A2aError, ErrorCode, call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Pass, Reply, RequestContext, RequestHandler,
    SendAtGate, SendGate, TaskEvents,
};
use heddle_store::{ListQuery, MemoryStore, Scope, TaskStore};

/// Asks for input on the first message, completes on the second; "hang"
/// ignores the cancel token and sleeps.
struct TwoTurns;

#[async_trait::async_trait]
impl AgentExecutor for TwoTurns {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if ctx.text() == "hang" {
            events.working(None).await?;
            tokio::time::sleep(Duration::from_secs(30)).await;
            return Ok(());
        }
        if ctx.task.is_none() {
            events.input_required("which one?").await?;
        } else {
            events.complete(Some("done")).await?;
        }
        Ok(())
    }
}

/// What the gate saw and its passes heard, in order.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    fn push(&self, line: String) {
        self.0.lock().expect("log").push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.0.lock().expect("log").clone()
    }
}

struct Gate(Log);

struct Told {
    log: Log,
    task: String,
    ended: bool,
}

#[async_trait::async_trait]
impl SendGate for Gate {
    async fn admit(&self, send: SendAtGate<'_>) -> Result<Option<Box<dyn Pass>>, A2aError> {
        if send.message.parts.first().and_then(|p| p.as_text()) == Some("refuse") {
            return Err(A2aError::new(ErrorCode::InvalidParams, "not today"));
        }
        self.0.push(format!(
            "admit {} new={} by={}",
            send.agent_id, send.new_task, send.caller.id
        ));
        Ok(Some(Box::new(Told {
            log: self.0.clone(),
            task: send.task_id.to_owned(),
            ended: false,
        })))
    }
}

impl Pass for Told {
    fn started(&mut self) {
        self.log.push(format!("started {}", self.task));
    }
    fn ended(mut self: Box<Self>, task: Option<&v1::Task>) {
        self.ended = true;
        let state = task.map(|t| t.status.as_ref().map_or(0, |s| s.state));
        self.log.push(format!("ended {} {:?}", self.task, state));
    }
}

impl Drop for Told {
    fn drop(&mut self) {
        if !self.ended {
            self.log.push(format!("dropped {}", self.task));
        }
    }
}

fn handler(log: &Log, store: Arc<MemoryStore>) -> RequestHandler {
    RequestHandler::builder("gated", v1::AgentCard::default(), Arc::new(TwoTurns), store)
        .limits(heddle_server::Limits {
            cancel_grace: Duration::from_millis(50),
            ..Default::default()
        })
        .gate(Arc::new(Gate(log.clone())))
        .build()
}

fn send(text: &str, task_id: &str, return_immediately: bool) -> Call {
    Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: format!("m-{text}"),
            task_id: task_id.to_owned(),
            role: v1::Role::User as i32,
            parts: vec![v1::Part::text(text)],
            ..Default::default()
        }),
        configuration: Some(v1::SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn cx() -> CallContext {
    CallContext {
        caller: heddle_server::Caller::authenticated("alice"),
        ..CallContext::anonymous()
    }
}

async fn task_of(h: &RequestHandler, call: Call) -> v1::Task {
    match h.handle(cx(), call).await {
        Ok(Reply::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_send_is_the_callers_error_and_makes_no_task() {
    let log = Log::default();
    let store = Arc::new(MemoryStore::default());
    let h = handler(&log, store.clone());
    let err = h
        .handle(cx(), send("refuse", "", false))
        .await
        .expect_err("refused");
    assert_eq!(err.code, ErrorCode::InvalidParams);
    assert_eq!(err.message, "not today");
    let scope = Scope::new("gated", "alice");
    let page = store
        .list(&scope, &ListQuery::default())
        .await
        .expect("list");
    assert!(page.tasks.is_empty(), "no task was made: {:?}", page.tasks);
    assert!(log.lines().is_empty());
}

#[tokio::test]
async fn a_pass_hears_the_start_and_the_end_of_each_turn() {
    let log = Log::default();
    let h = handler(&log, Arc::new(MemoryStore::default()));
    let first = task_of(&h, send("go", "", false)).await;
    assert_eq!(
        first.status.as_ref().map(|s| s.state()),
        Some(v1::TaskState::InputRequired)
    );
    let id = first.id.clone();
    let done = task_of(&h, send("that one", &id, false)).await;
    assert_eq!(
        done.status.as_ref().map(|s| s.state()),
        Some(v1::TaskState::Completed)
    );
    let input = v1::TaskState::InputRequired as i32;
    let completed = v1::TaskState::Completed as i32;
    assert_eq!(
        log.lines(),
        [
            "admit gated new=true by=alice".to_owned(),
            format!("started {id}"),
            format!("ended {id} Some({input})"),
            "admit gated new=false by=alice".to_owned(),
            format!("started {id}"),
            format!("ended {id} Some({completed})"),
        ]
    );
}

#[tokio::test]
async fn a_pass_whose_run_is_aborted_after_a_cancel_is_dropped_untold() {
    let log = Log::default();
    let h = handler(&log, Arc::new(MemoryStore::default()));
    let task = task_of(&h, send("hang", "", true)).await;
    let cancel = Call::CancelTask(v1::CancelTaskRequest {
        id: task.id.clone(),
        ..Default::default()
    });
    h.handle(cx(), cancel).await.expect("cancel");
    let dropped = format!("dropped {}", task.id);
    for _ in 0..100 {
        if log.lines().contains(&dropped) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the pass was not dropped: {:?}", log.lines());
}
