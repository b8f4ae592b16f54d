//! A hub serving an agent of your own beside Heddle's demo agents, each
//! under `/api/v1/agents/{id}` with its own card.
//!
//! ```sh
//! cargo run -p heddle-examples --example hub
//! curl -s http://127.0.0.1:8083/api/v1/agents                        # who is here
//! curl -s http://127.0.0.1:8083/api/v1/agents/shout/.well-known/agent-card.json
//! cargo run -p heddle-examples --example client -- http://127.0.0.1:8083/api/v1/agents/shout
//! ```
//!
//! With `--check` it serves on a free port, fetches the agent's card and
//! sends it one message through `heddle-client`, then exits (what CI runs).

use std::sync::Arc;

use anyhow::{bail, ensure};
use heddle_client::{A2aClient, ClientOptions, SendReply};
use heddle_core::v1;
use heddle_hub::{AgentProfile, Hub};
use heddle_store::MemoryStore;

/// Your agent. It is written against `heddle-api` alone (the agent and
/// store traits), so in a crate of its own it would compile no HTTP or
/// database stack; the hub runs it like any built-in agent.
mod shout {
    use heddle_api::{AgentError, AgentExecutor, RequestContext, TaskEvents, async_trait};

    /// Answers in capitals.
    pub struct Shout;

    #[async_trait]
    impl AgentExecutor for Shout {
        async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
            let text = ctx.text();
            if text.trim().is_empty() {
                // A refusal is a task state too, with the reason for the caller.
                events.reject("nothing to shout").await?;
                return Ok(());
            }
            events.artifact_text("shout", text.to_uppercase()).await?;
            events.complete(None).await?;
            Ok(())
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");
    let addr = if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8083"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    // The hub writes this URL into every card, so it is the bound address.
    let public_url = format!("http://{}", listener.local_addr()?);

    // One store for every agent: each call is scoped to its agent and caller.
    // `heddle_store::SqliteStore` keeps tasks across restarts.
    let store = Arc::new(MemoryStore::default());
    let profile = AgentProfile::new(
        "shout",
        "Shout",
        "Repeats your message in capitals.",
        &["example"],
    );
    let builder = Hub::builder(&public_url, store)
        .agent("shout", profile, Arc::new(shout::Shout))
        // Served at the root well-known path too.
        .default_agent("shout");
    let hub = heddle_hub::agents::with_demo_agents(builder)
        .try_build()
        .await?;
    let app = hub.router();
    if !check {
        println!("hub at {public_url}; agents:");
        for agent in hub.agents() {
            println!("  {}", Hub::agent_url(&public_url, &agent.id));
        }
        heddle_server::listen::serve(listener, app, std::future::pending()).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(heddle_server::listen::serve(listener, app, async {
        let _ = stopped.await;
    }));
    self_check(&Hub::agent_url(&public_url, "shout")).await?;
    let _ = stop.send(());
    server.await??;
    Ok(())
}

/// What any caller does: read the card under the agent's URL, then send.
async fn self_check(agent_url: &str) -> anyhow::Result<()> {
    let client = A2aClient::discover(agent_url, ClientOptions::default()).await?;
    println!(
        "check: card {:?} lists {} interfaces; using {}",
        client.card().name,
        client.card().supported_interfaces.len(),
        client.interface().url
    );
    let SendReply::Task(task) = client.send_text("hello hub").await? else {
        bail!("the agent answers with a task, not a message");
    };
    let texts: Vec<String> = task.artifacts.iter().map(v1::Artifact::text).collect();
    ensure!(
        texts == ["HELLO HUB"],
        "expected [\"HELLO HUB\"], got {texts:?}"
    );
    println!("check: sent \"hello hub\", got {texts:?}");
    Ok(())
}
