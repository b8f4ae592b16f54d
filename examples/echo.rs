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

use std::sync::Arc;

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
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = "http://127.0.0.1:8081/";
    let handler = RequestHandler::new(
        "echo",
        card(url),
        Arc::new(Echo),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    let app = AgentRoutes::new(handler).router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8081").await?;
    println!("echo agent at {url} (card: {url}.well-known/agent-card.json)");
    heddle_server::listen::serve(listener, app, std::future::pending()).await?;
    Ok(())
}
