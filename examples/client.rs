//! A client of any A2A agent: discover it by URL, send a message, and answer
//! the question it asks on the same task, watching the answer stream back.
//!
//! ```sh
//! # Alone: starts a small greeter agent in this process, talks to it, checks what it hears.
//! cargo run -p heddle-examples --example client
//! # Any agent by URL, e.g. the echo example or a `heddle serve` agent:
//! cargo run -p heddle-examples --example client -- http://127.0.0.1:8080/api/v1/agents/writer
//! ```
//!
//! The client reads the agent's card, picks the interface and protocol
//! version it prefers from it (JSON-RPC or REST, A2A 1.0 or 0.3), and from
//! then on every call takes and returns the v1.0 model whatever the wire.

use std::sync::Arc;

use anyhow::ensure;
use futures::StreamExt as _;
use heddle_api::{AgentError, AgentExecutor, RequestContext, TaskEvents, async_trait};
use heddle_client::{A2aClient, ClientOptions, SendReply, TaskAccumulator};
use heddle_core::v1::{self, TaskState, stream_response::Payload};
use heddle_server::{AgentRoutes, Limits, RequestHandler};
use heddle_store::MemoryStore;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A URL argument names the agent; without one (or with `--check`, as CI
    // runs every example) this example brings its own.
    let url = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let own = url.is_none();
    let url = match url {
        Some(url) => url,
        None => start_greeter().await?,
    };

    // Discovery: the card from the well-known path under `url`.
    let client = A2aClient::discover(&url, ClientOptions::default()).await?;
    println!(
        "{}: {} ({:?}, A2A {})",
        client.card().name,
        client.interface().url,
        client.binding(),
        client.version()
    );

    // A send waits for the agent to finish or to ask something; the reply is
    // a task (or, from some agents, a direct message).
    let reply = client.send_text("hello").await?;
    print_reply(&reply);

    // Multi-turn: a task waiting for input takes the answer as a message on
    // the same task and context. An agent that asked nothing gets a new
    // message instead, so the stream below is shown either way.
    let waiting = match &reply {
        SendReply::Task(t) if state(t) == TaskState::InputRequired => Some(t),
        _ => None,
    };
    ensure!(
        !own || waiting.is_some(),
        "the greeter should have asked for a name"
    );
    let mut message = A2aClient::user_message(vec![v1::Part::text(match waiting {
        Some(_) => "Ada",
        None => "hello again",
    })]);
    if let Some(task) = waiting {
        message.task_id.clone_from(&task.id);
        message.context_id.clone_from(&task.context_id);
    }
    println!("you: {}", message.text());

    // Streaming: events as the agent publishes them. The accumulator folds
    // them into the task, artifact chunks included.
    let request = v1::SendMessageRequest {
        message: Some(message),
        ..Default::default()
    };
    let mut events = client.send_streaming(request).await?;
    let mut so_far = TaskAccumulator::default();
    while let Some(event) = events.next().await {
        let event = event?;
        println!("  event: {}", describe(&event));
        so_far.apply(&event);
    }
    let Some(task) = so_far.task else {
        // A direct message answers without a task.
        if let Some(m) = so_far.message {
            println!("agent: {}", m.text());
        }
        return Ok(());
    };
    print_reply(&SendReply::Task(task.clone()));
    if own {
        let texts: Vec<String> = task.artifacts.iter().map(v1::Artifact::text).collect();
        ensure!(
            state(&task) == TaskState::Completed && texts == ["Hello, Ada!"],
            "expected a COMPLETED task greeting Ada, got {:?} with {texts:?}",
            state(&task)
        );
    }
    Ok(())
}

fn state(task: &v1::Task) -> TaskState {
    task.status
        .as_ref()
        .map_or(TaskState::Unspecified, |s| s.state())
}

fn print_reply(reply: &SendReply) {
    match reply {
        SendReply::Message(m) => println!("agent: {}", m.text()),
        SendReply::Task(t) => {
            println!("task {} is {}", t.id, state(t).as_str_name());
            for a in &t.artifacts {
                println!("  artifact {:?}: {}", a.name, a.text());
            }
            if let Some(m) = t.status.as_ref().and_then(|s| s.message.as_ref()) {
                println!("agent: {}", m.text());
            }
        }
    }
}

/// One line per stream event.
fn describe(event: &v1::StreamResponse) -> String {
    match &event.payload {
        Some(Payload::Task(t)) => format!("task {}, {}", t.id, state(t).as_str_name()),
        Some(Payload::StatusUpdate(u)) => {
            let status = u.status.as_ref();
            let said = status
                .and_then(|s| s.message.as_ref())
                .map(|m| format!(": {}", m.text()))
                .unwrap_or_default();
            let name = status.map_or(TaskState::Unspecified, |s| s.state());
            format!("status {}{said}", name.as_str_name())
        }
        Some(Payload::ArtifactUpdate(u)) => match &u.artifact {
            Some(a) => format!("artifact {:?}: {}", a.name, a.text()),
            None => "artifact (empty)".into(),
        },
        Some(Payload::Message(m)) => format!("message: {}", m.text()),
        None => "(empty event)".into(),
    }
}

/// The in-process agent: it asks for your name, then greets you.
struct Greeter;

#[async_trait]
impl AgentExecutor for Greeter {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if !ctx.is_continuation() {
            // Returning with the task INPUT_REQUIRED keeps it open for the answer.
            events.input_required("What is your name?").await?;
            return Ok(());
        }
        events.working(Some("writing a greeting")).await?;
        let greeting = format!("Hello, {}!", ctx.text().trim());
        events.artifact_text("greeting", greeting).await?;
        events.complete(None).await?;
        Ok(())
    }
}

/// Serves the greeter on a free port for as long as the process runs; its URL.
async fn start_greeter() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let card = v1::AgentCard {
        name: "Greeter".into(),
        description: "Asks your name, then greets you.".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![v1::AgentInterface {
            url: url.clone(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: "1.0".into(),
            ..Default::default()
        }],
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            ..Default::default()
        }),
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        ..Default::default()
    };
    let handler = RequestHandler::new(
        "greeter",
        card,
        Arc::new(Greeter),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let app = AgentRoutes::new(handler).router();
    tokio::spawn(async move {
        if let Err(e) = heddle_server::listen::serve(listener, app, std::future::pending()).await {
            eprintln!("the greeter stopped: {e}");
        }
    });
    Ok(url)
}
