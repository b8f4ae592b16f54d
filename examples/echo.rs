//! The smallest A2A agent: it echoes the caller's text as an artifact.
//!
//! `cargo run -p heddle-examples --example echo`, then:
//!
//! ```sh
//! curl -s http://127.0.0.1:8081/.well-known/agent-card.json
//! curl -s -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
//!   -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
//!   http://127.0.0.1:8081/
//! ```
//!
//! With `--check` it serves on a free port, sends one message through
//! `heddle-client`, checks the echo and exits (what CI runs).

use std::sync::Arc;

use anyhow::{bail, ensure};
use heddle_client::{A2aClient, ClientOptions, SendReply};
use heddle_core::v1;
use heddle_server::{
    AgentError, AgentExecutor, AgentRoutes, Limits, RequestContext, RequestHandler, TaskEvents,
};
use heddle_store::MemoryStore;

struct Echo;

#[async_trait::async_trait]
impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(Some("echoing")).await?;
        events.artifact_text("echo", ctx.text()).await?;
        events.complete(None).await?;
        Ok(())
    }
}

fn card(url: &str) -> v1::AgentCard {
    let iface = |version: &str| v1::AgentInterface {
        url: url.into(),
        protocol_binding: "JSONRPC".into(),
        protocol_version: version.into(),
        ..Default::default()
    };
    v1::AgentCard {
        name: "Echo".into(),
        description: "Echoes your text back.".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![iface("1.0"), iface("0.3")],
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            ..Default::default()
        }),
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![v1::AgentSkill {
            id: "echo".into(),
            name: "Echo".into(),
            description: "Repeats the input.".into(),
            tags: vec!["echo".into()],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");
    // A known port to try by hand; any free one for the self-check, so it
    // never collides with something already running.
    let addr = if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8081"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    // The card must name the address actually bound.
    let url = format!("http://{}/", listener.local_addr()?);
    let handler = RequestHandler::new(
        "echo",
        card(&url),
        Arc::new(Echo),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let app = AgentRoutes::new(handler).router();
    if !check {
        println!("echo agent at {url} (card: {url}.well-known/agent-card.json)");
        heddle_server::listen::serve(listener, app, std::future::pending()).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(heddle_server::listen::serve(listener, app, async {
        let _ = stopped.await;
    }));
    self_check(&url).await?;
    // Stop accepting, let the finished exchange close, then exit.
    let _ = stop.send(());
    server.await??;
    Ok(())
}

/// Discovers the agent from its card, as any caller would, and sends one message.
async fn self_check(url: &str) -> anyhow::Result<()> {
    let client = A2aClient::discover(url, ClientOptions::default()).await?;
    let SendReply::Task(task) = client.send_text("hi").await? else {
        bail!("the echo agent answers with a task, not a message");
    };
    let echoed: Vec<String> = task.artifacts.iter().map(v1::Artifact::text).collect();
    ensure!(
        echoed == ["hi"],
        "expected the echo [\"hi\"], got {echoed:?}"
    );
    println!(
        "check: {} at {url} answered {:?} with {echoed:?}",
        client.card().name,
        task.status.map(|s| s.state()).unwrap_or_default(),
    );
    Ok(())
}
