//! A handler with a concurrency limit: executions past it wait, their
//! tasks visible, and start high before normal before low; a queued task
//! canceled never reaches the agent; a full queue refuses before any task
//! exists; a place is given back however its execution ends. And an
//! agent's own request rate, all callers together.

use std::{
    num::{NonZeroU32, NonZeroUsize},
    sync::Arc,
    time::Duration,
};

use heddle_core::{ErrorCode, call::Call, v1};
use heddle_server::{
    AgentError, AgentExecutor, CallContext, Caller, Concurrency, Priority, Reply, RequestContext,
    RequestHandler, TaskEvents, limit::AgentRate,
};
use heddle_store::MemoryStore;
use tokio::sync::{Semaphore, mpsc};

/// Says when each execution starts (its message's text), then holds it
/// until the test gives it a permit; "panic" panics at once, "panic later"
/// after it first waits.
struct Held {
    started: mpsc::UnboundedSender<String>,
    release: Arc<Semaphore>,
}

#[async_trait::async_trait]
impl AgentExecutor for Held {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        let text = ctx.text();
        let _ = self.started.send(text.clone());
        match text.as_str() {
            "panic" => panic!("the agent broke"),
            "panic later" => {
                tokio::task::yield_now().await;
                panic!("the agent broke later")
            }
            _ => {}
        }
        events.working(None).await?;
        let permit = self
            .release
            .acquire()
            .await
            .map_err(|e| AgentError(e.to_string()))?;
        permit.forget();
        events.complete(Some("done")).await?;
        Ok(())
    }
}

struct Setup {
    handler: RequestHandler,
    started: mpsc::UnboundedReceiver<String>,
    release: Arc<Semaphore>,
    concurrency: Concurrency,
}

/// The priority is the message's first word, when it is one.
fn by_first_word(ctx: &RequestContext) -> Priority {
    match ctx.text().split(' ').next() {
        Some("high") => Priority::High,
        Some("low") => Priority::Low,
        _ => Priority::Normal,
    }
}

fn setup(max_running: usize, max_queued: usize) -> Setup {
    let (tx, started) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let concurrency = Concurrency::new(
        NonZeroUsize::new(max_running).expect("at least one"),
        max_queued,
    )
    .with_priority(Arc::new(by_first_word));
    let agent = Held {
        started: tx,
        release: release.clone(),
    };
    let card = v1::AgentCard {
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let handler = RequestHandler::builder(
        "queued",
        card,
        Arc::new(agent),
        Arc::new(MemoryStore::default()),
    )
    .concurrency(concurrency.clone())
    .build();
    Setup {
        handler,
        started,
        release,
        concurrency,
    }
}

fn send(text: &str, return_immediately: bool) -> Call {
    Call::SendMessage(v1::SendMessageRequest {
        message: Some(v1::Message::new(
            format!("m-{text}"),
            v1::Role::User,
            vec![v1::Part::text(text)],
        )),
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

async fn call(h: &RequestHandler, call: Call) -> Result<v1::Task, heddle_core::A2aError> {
    match tokio::time::timeout(
        Duration::from_secs(5),
        h.handle(CallContext::anonymous(), call),
    )
    .await
    .expect("an answer in time")?
    {
        Reply::Task(t) => Ok(t),
        other => panic!("a task, not {other:?}"),
    }
}

/// Sends `text` without waiting for its end; the task as it stands then.
async fn submit(h: &RequestHandler, text: &str) -> v1::Task {
    call(h, send(text, true)).await.expect("accepted")
}

async fn get(h: &RequestHandler, id: &str) -> v1::Task {
    call(
        h,
        Call::GetTask(v1::GetTaskRequest {
            id: id.into(),
            ..Default::default()
        }),
    )
    .await
    .expect("found")
}

async fn next_start(started: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(Duration::from_secs(5), started.recv())
        .await
        .expect("an execution starts")
        .expect("the agent lives")
}

/// Waits until no execution runs nor waits.
async fn idle(c: &Concurrency) {
    for _ in 0..500 {
        if c.running() == 0 && c.queued() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("still {} running, {} queued", c.running(), c.queued());
}

#[tokio::test]
async fn waiting_executions_start_high_then_normal_then_low_in_arrival_order() {
    let mut s = setup(2, 10);
    for hold in ["hold 1", "hold 2"] {
        submit(&s.handler, hold).await;
        next_start(&mut s.started).await;
    }
    // Both places taken: these wait, visible and SUBMITTED, in this order.
    let mut queued = Vec::new();
    for text in ["low 1", "normal 1", "high 1", "low 2", "high 2", "normal 2"] {
        let task = submit(&s.handler, text).await;
        assert_eq!(state(&task), v1::TaskState::Submitted, "{text}");
        queued.push(task.id);
    }
    assert_eq!((s.concurrency.running(), s.concurrency.queued()), (2, 6));
    for id in &queued {
        assert_eq!(state(&get(&s.handler, id).await), v1::TaskState::Submitted);
    }
    assert!(s.started.try_recv().is_err(), "none of them started yet");
    // One place at a time: each freed place goes to the first waiter.
    let mut order = Vec::new();
    for _ in 0..6 {
        s.release.add_permits(1);
        order.push(next_start(&mut s.started).await);
    }
    assert_eq!(
        order,
        ["high 1", "high 2", "normal 1", "normal 2", "low 1", "low 2"]
    );
    s.release.add_permits(2);
    idle(&s.concurrency).await;
    for id in &queued {
        assert_eq!(state(&get(&s.handler, id).await), v1::TaskState::Completed);
    }
}

#[tokio::test]
async fn a_queued_stream_opens_with_its_submitted_task_and_follows_it_once_it_runs() {
    use futures::StreamExt as _;
    use v1::stream_response::Payload;

    let mut s = setup(1, 10);
    submit(&s.handler, "hold").await;
    next_start(&mut s.started).await;
    let Call::SendMessage(req) = send("streamed", false) else {
        unreachable!("a send")
    };
    let reply = s
        .handler
        .handle(CallContext::anonymous(), Call::SendStreamingMessage(req))
        .await
        .expect("a stream");
    let Reply::Stream(mut events) = reply else {
        panic!("not a stream")
    };
    let first = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the first event while queued")
        .expect("an event");
    let Some(Payload::Task(task)) = &first.response.payload else {
        panic!("the task first, not {first:?}")
    };
    assert_eq!(state(task), v1::TaskState::Submitted);
    assert!(s.started.try_recv().is_err(), "not started while queued");
    s.release.add_permits(2);
    assert_eq!(next_start(&mut s.started).await, "streamed");
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(5), events.collect::<Vec<_>>())
        .await
        .expect("the stream ends");
    let last = rest.last().and_then(|e| match &e.response.payload {
        Some(Payload::StatusUpdate(u)) => u.status.as_ref().map(v1::TaskStatus::state),
        _ => None,
    });
    assert_eq!(last, Some(v1::TaskState::Completed), "{rest:?}");
    idle(&s.concurrency).await;
}

#[tokio::test]
async fn a_queued_task_canceled_ends_canceled_and_never_reaches_the_agent() {
    let mut s = setup(1, 10);
    let running = submit(&s.handler, "hold").await;
    next_start(&mut s.started).await;
    let waiting = submit(&s.handler, "never").await;
    let behind = submit(&s.handler, "after").await;
    assert_eq!(s.concurrency.queued(), 2);
    let canceled = call(
        &s.handler,
        Call::CancelTask(v1::CancelTaskRequest {
            id: waiting.id.clone(),
            ..Default::default()
        }),
    )
    .await
    .expect("a queued task can be canceled");
    assert_eq!(state(&canceled), v1::TaskState::Canceled);
    assert_eq!(
        state(&get(&s.handler, &waiting.id).await),
        v1::TaskState::Canceled
    );
    // Its place in the queue is given back (when its aborted wait is
    // dropped, which the runtime does on its next turn).
    for _ in 0..100 {
        if s.concurrency.queued() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(s.concurrency.queued(), 1);
    // The next one runs when the running one ends; the canceled never does.
    s.release.add_permits(1);
    assert_eq!(next_start(&mut s.started).await, "after");
    s.release.add_permits(1);
    idle(&s.concurrency).await;
    assert!(s.started.try_recv().is_err(), "the canceled task never ran");
    for id in [&running.id, &behind.id] {
        assert_eq!(state(&get(&s.handler, id).await), v1::TaskState::Completed);
    }
    assert_eq!(s.handler.live_tasks(), 0, "nothing left live");
}

#[tokio::test]
async fn a_full_queue_refuses_the_send_before_any_task_is_made() {
    let mut s = setup(1, 1);
    submit(&s.handler, "hold").await;
    next_start(&mut s.started).await;
    submit(&s.handler, "waits").await;
    let refused = call(&s.handler, send("one too many", true))
        .await
        .expect_err("the queue is full");
    assert_eq!(refused.code, ErrorCode::ResourceExhausted);
    // No execution has ended yet: the one-second floor.
    assert_eq!(refused.retry_after_secs(), Some(1));
    let listed = match s
        .handler
        .handle(
            CallContext::anonymous(),
            Call::ListTasks(v1::ListTasksRequest::default()),
        )
        .await
        .expect("listed")
    {
        Reply::Tasks(page) => page.tasks,
        other => panic!("tasks, not {other:?}"),
    };
    assert_eq!(listed.len(), 2, "the refused send made no task");
    s.release.add_permits(2);
    idle(&s.concurrency).await;
}

#[tokio::test]
async fn a_panicking_execution_gives_its_place_back() {
    let mut s = setup(1, 10);
    for text in ["panic", "panic later"] {
        let task = call(&s.handler, send(text, false)).await.expect("answered");
        assert_eq!(state(&task), v1::TaskState::Failed, "{text}");
        assert_eq!(next_start(&mut s.started).await, text);
        idle(&s.concurrency).await;
    }
    // The one place is free again: this runs rather than waits.
    submit(&s.handler, "fine").await;
    assert_eq!(next_start(&mut s.started).await, "fine");
    assert_eq!(s.concurrency.queued(), 0);
    s.release.add_permits(1);
    idle(&s.concurrency).await;
}

#[tokio::test]
async fn a_reply_to_a_task_waiting_for_input_waits_for_a_place_too() {
    /// Asks for input first, then holds like [`Held`].
    struct Asks(Held);
    #[async_trait::async_trait]
    impl AgentExecutor for Asks {
        async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
            if ctx.is_continuation() || ctx.text().starts_with("hold") {
                return self.0.execute(ctx, events).await;
            }
            events.input_required("and?").await?;
            Ok(())
        }
    }
    let (tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    let concurrency = Concurrency::new(NonZeroUsize::MIN, 4);
    let handler = RequestHandler::builder(
        "asks",
        v1::AgentCard::default(),
        Arc::new(Asks(Held {
            started: tx,
            release: release.clone(),
        })),
        Arc::new(MemoryStore::default()),
    )
    .concurrency(concurrency.clone())
    .build();
    let asking = call(&handler, send("question", false)).await.expect("asks");
    assert_eq!(state(&asking), v1::TaskState::InputRequired);
    submit(&handler, "hold").await;
    next_start(&mut started).await;
    let mut reply = v1::Message::new("m-reply", v1::Role::User, vec![v1::Part::text("answer")]);
    reply.task_id.clone_from(&asking.id);
    let continued = call(
        &handler,
        Call::SendMessage(v1::SendMessageRequest {
            message: Some(reply),
            configuration: Some(v1::SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            }),
            ..Default::default()
        }),
    )
    .await
    .expect("accepted");
    assert_eq!(state(&continued), v1::TaskState::InputRequired);
    assert_eq!(concurrency.queued(), 1, "the reply waits");
    release.add_permits(1);
    assert_eq!(next_start(&mut started).await, "answer");
    release.add_permits(1);
    idle(&concurrency).await;
    assert_eq!(
        state(&get(&handler, &asking.id).await),
        v1::TaskState::Completed
    );
}

#[tokio::test]
async fn an_agent_rate_holds_all_callers_together_and_spares_the_card() {
    let mut s = setup(10, 10);
    let handler = RequestHandler::builder(
        "rated",
        v1::AgentCard::default(),
        Arc::new(Held {
            started: mpsc::unbounded_channel().0,
            release: s.release.clone(),
        }),
        Arc::new(MemoryStore::default()),
    )
    .agent_rate(AgentRate::new(NonZeroU32::MIN.saturating_add(1)))
    .build();
    s.started.close();
    let get_from = |who: &str| {
        let cx = CallContext {
            caller: Caller::authenticated(who),
            ..CallContext::anonymous()
        };
        handler.handle(
            cx,
            Call::GetTask(v1::GetTaskRequest {
                id: "nope".into(),
                ..Default::default()
            }),
        )
    };
    // Two a second, whoever asks: the third caller is refused.
    for who in ["key:a", "key:b"] {
        let e = get_from(who).await.expect_err("no such task");
        assert_eq!(e.code, ErrorCode::TaskNotFound, "{who} passed the rate");
    }
    let e = get_from("key:c").await.expect_err("past the rate");
    assert_eq!(e.code, ErrorCode::ResourceExhausted);
    assert_eq!(e.retry_after_secs(), Some(1));
    // The extended card is not counted (this agent has none to give).
    let card = handler
        .handle(
            CallContext::anonymous(),
            Call::GetExtendedAgentCard(v1::GetExtendedAgentCardRequest::default()),
        )
        .await
        .expect_err("no extended card");
    assert_ne!(card.code, ErrorCode::ResourceExhausted);
}
