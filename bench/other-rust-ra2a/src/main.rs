//! The `ra2a` crate (crates.io; its `DefaultRequestHandler`, in-memory task
//! store and axum handlers) serving the benchmark's two agents with the same
//! semantics as Heddle's demo agents and bench/other-rust:
//!
//! * `/echo` (JSON-RPC): a COMPLETED task whose one artifact repeats the
//!   user's text, the user message in its history.
//! * `/stream` (JSON-RPC, streaming): WORKING, one artifact in three chunks
//!   (append, lastChunk), then COMPLETED, as Heddle's `writer-stream` (without
//!   its pause): six events, the task (SUBMITTED) first.
//!
//! ra2a's JSON-RPC binding takes v1.0 payloads (`ROLE_USER`, `{"text": ...}`
//! parts, `{"task": ...}` results) under the v0.3 method names (`message/send`,
//! `tasks/get`; `message/stream` only on its separate SSE handler, mounted here
//! as `/stream`). Its HTTP+JSON binding (`rest_router`) is not served: in
//! 0.10.1 it panics while building its routes (`/tasks/{id}:cancel` is not a
//! route axum 0.8's matchit accepts). Its gRPC binding needs protos the
//! published crate does not ship.
//!
//! One change to the SDK's behaviour: its `message/stream` never ends the SSE
//! response (the task's event queue stays in its `QueueManager`, so the
//! broadcast channel never closes). [`EndOnTerminal`] ends the stream after
//! the terminal event and drops the task's queue, as the SDK's own
//! `message/send` does. (Left as the SDK has it: its handler keeps the join
//! handle of every execution it spawns, and its in-memory store every task.)
//!
//! `heddle-bench-ra2a [ADDR]` (default 127.0.0.1:9094).

use std::{future::Future, pin::Pin, sync::Arc};

use axum::{routing::post, serve::ListenerExt as _};
use futures::{StreamExt as _, stream};
use ra2a::{
    Artifact, ArtifactId, Message, Part, SendMessageRequest, SendMessageResponse, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
    error::Result,
    server::{
        AgentExecutor, DefaultRequestHandler, Event, EventQueue, EventStream, QueueManager,
        RequestContext, RequestHandler, ServerState, handle_jsonrpc, handle_sse,
    },
    types::{
        AgentCard, AgentInterface, CancelTaskRequest, GetTaskRequest, ListTasksRequest,
        ListTasksResponse, SubscribeToTaskRequest, TransportProtocol,
    },
};

type Done<'a> = Pin<Box<dyn Future<Output = Result<()>> + Send + 'a>>;
type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

const CHUNKS: [&str; 3] = [
    "Report, part one: the findings. ",
    "Part two: what they mean. ",
    "Part three: what to do next.",
];

fn cancel<'a>(ctx: &'a RequestContext, queue: &'a EventQueue) -> Done<'a> {
    Box::pin(async move {
        let mut task = Task::new(&ctx.task_id, &ctx.context_id);
        task.status = TaskStatus::new(TaskState::Canceled);
        queue.send(Event::Task(task))
    })
}

struct Echo;

impl AgentExecutor for Echo {
    fn execute<'a>(&'a self, ctx: &'a RequestContext, queue: &'a EventQueue) -> Done<'a> {
        Box::pin(async move {
            let text = ctx
                .message
                .as_ref()
                .and_then(Message::text_content)
                .unwrap_or_default();
            let mut task = Task::new(&ctx.task_id, &ctx.context_id);
            task.status = TaskStatus::new(TaskState::Completed);
            task.artifacts = vec![Artifact::create(vec![Part::text(text)]).with_name("echo")];
            task.history = ctx.message.iter().cloned().collect();
            queue.send(Event::Task(task))
        })
    }

    fn cancel<'a>(&'a self, ctx: &'a RequestContext, queue: &'a EventQueue) -> Done<'a> {
        cancel(ctx, queue)
    }
}

struct WriterStream;

impl AgentExecutor for WriterStream {
    fn execute<'a>(&'a self, ctx: &'a RequestContext, queue: &'a EventQueue) -> Done<'a> {
        Box::pin(async move {
            let (task_id, context_id) = (ctx.task_id.as_str(), ctx.context_id.as_str());
            // The six events Heddle's writer-stream sends: the task, WORKING,
            // three chunks, COMPLETED.
            let mut task = Task::new(task_id, context_id);
            task.history = ctx.message.iter().cloned().collect();
            queue.send(Event::Task(task))?;
            queue.send(Event::StatusUpdate(TaskStatusUpdateEvent::new(
                task_id,
                context_id,
                TaskStatus::new(TaskState::Working),
            )))?;
            let artifact_id = ArtifactId::from(format!("{task_id}-report"));
            for (i, chunk) in CHUNKS.iter().enumerate() {
                let mut event = TaskArtifactUpdateEvent::new(
                    task_id,
                    context_id,
                    Artifact::new(artifact_id.clone(), vec![Part::text(*chunk)])
                        .with_name("report"),
                );
                event.append = i > 0;
                event.last_chunk = i == CHUNKS.len() - 1;
                queue.send(Event::ArtifactUpdate(event))?;
            }
            queue.send(Event::StatusUpdate(TaskStatusUpdateEvent::new(
                task_id,
                context_id,
                TaskStatus::new(TaskState::Completed),
            )))
        })
    }

    fn cancel<'a>(&'a self, ctx: &'a RequestContext, queue: &'a EventQueue) -> Done<'a> {
        cancel(ctx, queue)
    }
}

/// The SDK's `DefaultRequestHandler`, except that a `message/stream` ends
/// after its terminal event (and the task's queue is dropped then).
struct EndOnTerminal {
    inner: DefaultRequestHandler,
    queues: Arc<QueueManager>,
}

impl EndOnTerminal {
    fn new(executor: impl AgentExecutor + 'static, card: AgentCard) -> ServerState {
        let queues = Arc::new(QueueManager::new());
        let inner =
            DefaultRequestHandler::new(executor, card.clone()).with_queue_manager(queues.clone());
        ServerState::new(Arc::new(Self { inner, queues }), card)
    }
}

impl RequestHandler for EndOnTerminal {
    fn on_message_send(&self, req: SendMessageRequest) -> Answer<'_, SendMessageResponse> {
        self.inner.on_message_send(req)
    }

    fn on_message_stream(&self, req: SendMessageRequest) -> Answer<'_, EventStream> {
        Box::pin(async move {
            let events = self.inner.on_message_stream(req).await?;
            let state = (events, Some(self.queues.clone()));
            let events = stream::unfold(state, |(mut events, queues)| async move {
                let queues = queues?;
                let event = events.next().await?;
                match &event {
                    Ok(e) if e.is_terminal() => {
                        queues.remove_queue(e.task_id().as_str()).await;
                        Some((event, (events, None)))
                    }
                    _ => Some((event, (events, Some(queues)))),
                }
            });
            Ok(Box::pin(events) as EventStream)
        })
    }

    fn on_get_task(&self, req: GetTaskRequest) -> Answer<'_, Task> {
        self.inner.on_get_task(req)
    }

    fn on_list_tasks(&self, req: ListTasksRequest) -> Answer<'_, ListTasksResponse> {
        self.inner.on_list_tasks(req)
    }

    fn on_cancel_task(&self, req: CancelTaskRequest) -> Answer<'_, Task> {
        self.inner.on_cancel_task(req)
    }

    fn on_subscribe_to_task(&self, req: SubscribeToTaskRequest) -> Answer<'_, EventStream> {
        self.inner.on_subscribe_to_task(req)
    }
}

fn card(name: &str, url: String) -> AgentCard {
    AgentCard::new(
        name,
        "heddle benchmark agent",
        vec![AgentInterface::new(
            url,
            TransportProtocol::new(TransportProtocol::JSONRPC),
        )],
    )
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9094".into());
    let echo = EndOnTerminal::new(Echo, card("echo", format!("http://{addr}/echo")));
    let writer = EndOnTerminal::new(
        WriterStream,
        card("writer-stream", format!("http://{addr}/stream")),
    );
    let app = axum::Router::new()
        .route("/echo", post(handle_jsonrpc).with_state(echo))
        .route("/stream", post(handle_sse).with_state(writer));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("ra2a listening on http://{addr}");
    // The SDK leaves the listener to the application; like `heddle serve`,
    // send small writes (SSE events) without waiting out Nagle's algorithm.
    let nodelay = |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    };
    axum::serve(listener.tap_io(nodelay), app).await
}
