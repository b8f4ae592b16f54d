//! The official Rust A2A SDK (`a2a-lf` types, `a2a-server-lf` server: its
//! `DefaultRequestHandler`, in-memory task store and axum routers) serving the
//! benchmark's two agents with the same semantics as Heddle's demo agents:
//!
//! * `/echo` (JSON-RPC) and `/echo/rest` (HTTP+JSON): a COMPLETED task whose
//!   one artifact repeats the user's text, the user message in its history.
//! * `/stream` (JSON-RPC): WORKING, one artifact in three chunks (append,
//!   lastChunk), then COMPLETED, as Heddle's `writer-stream` (without its pause):
//!   six events, the task (SUBMITTED) first.
//!
//! `heddle-bench-other-rust [ADDR]` (default 127.0.0.1:9093).

use std::sync::Arc;

use a2a::{
    Artifact, Message, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use a2a_server::{
    AgentExecutor, DefaultRequestHandler, ExecutorContext, InMemoryTaskStore, jsonrpc, rest,
};
use axum::serve::ListenerExt as _;
use futures::stream::{self, BoxStream};

type Events = BoxStream<'static, Result<StreamResponse, a2a::A2AError>>;

const CHUNKS: [&str; 3] = [
    "Report, part one: the findings. ",
    "Part two: what they mean. ",
    "Part three: what to do next.",
];

fn status(state: TaskState) -> TaskStatus {
    TaskStatus {
        state,
        message: None,
        timestamp: Some(chrono::Utc::now()),
    }
}

fn canceled(ctx: &ExecutorContext) -> Events {
    let task = Task {
        id: ctx.task_id.clone(),
        context_id: ctx.context_id.clone(),
        status: status(TaskState::Canceled),
        artifacts: None,
        history: None,
        metadata: None,
    };
    Box::pin(stream::once(async move { Ok(StreamResponse::Task(task)) }))
}

struct Echo;

impl AgentExecutor for Echo {
    fn execute(&self, ctx: ExecutorContext) -> Events {
        let text = ctx
            .message
            .as_ref()
            .and_then(Message::text)
            .unwrap_or_default()
            .to_owned();
        let task = Task {
            id: ctx.task_id.clone(),
            context_id: ctx.context_id.clone(),
            status: status(TaskState::Completed),
            artifacts: Some(vec![Artifact {
                artifact_id: a2a::new_artifact_id(),
                name: Some("echo".into()),
                description: None,
                parts: vec![Part::text(text)],
                metadata: None,
                extensions: None,
            }]),
            history: ctx.message.map(|m| vec![m]),
            metadata: None,
        };
        Box::pin(stream::once(async move { Ok(StreamResponse::Task(task)) }))
    }

    fn cancel(&self, ctx: ExecutorContext) -> Events {
        canceled(&ctx)
    }
}

struct WriterStream;

impl AgentExecutor for WriterStream {
    fn execute(&self, ctx: ExecutorContext) -> Events {
        let (task_id, context_id) = ctx.task_info();
        // The six events Heddle's writer-stream sends: the task, WORKING,
        // three chunks, COMPLETED.
        let mut events = vec![
            StreamResponse::Task(Task {
                id: task_id.clone(),
                context_id: context_id.clone(),
                status: status(TaskState::Submitted),
                artifacts: None,
                history: ctx.message.map(|m| vec![m]),
                metadata: None,
            }),
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                status: status(TaskState::Working),
                metadata: None,
            }),
        ];
        let artifact_id = format!("{task_id}-report");
        for (i, chunk) in CHUNKS.iter().enumerate() {
            events.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                artifact: Artifact {
                    artifact_id: artifact_id.clone(),
                    name: Some("report".into()),
                    description: None,
                    parts: vec![Part::text(*chunk)],
                    metadata: None,
                    extensions: None,
                },
                append: Some(i > 0),
                last_chunk: Some(i == CHUNKS.len() - 1),
                metadata: None,
            }));
        }
        events.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id,
            context_id,
            status: status(TaskState::Completed),
            metadata: None,
        }));
        Box::pin(stream::iter(events.into_iter().map(Ok)))
    }

    fn cancel(&self, ctx: ExecutorContext) -> Events {
        canceled(&ctx)
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9093".into());
    let echo = Arc::new(DefaultRequestHandler::new(Echo, InMemoryTaskStore::new()));
    let writer = Arc::new(DefaultRequestHandler::new(
        WriterStream,
        InMemoryTaskStore::new(),
    ));
    let app = axum::Router::new()
        .nest("/echo/rest", rest::rest_router(echo.clone()))
        .nest("/echo", jsonrpc::jsonrpc_router(echo))
        .nest("/stream", jsonrpc::jsonrpc_router(writer));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("a2a-server-lf listening on http://{addr}");
    // The SDK leaves the listener to the application; like `heddle serve`,
    // send small writes (SSE events) without waiting out Nagle's algorithm.
    let nodelay = |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    };
    axum::serve(listener.tap_io(nodelay), app).await
}
