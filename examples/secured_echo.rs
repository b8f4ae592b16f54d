//! An agent only authenticated callers reach: an API key (made at start and
//! printed once), and the card says so.
//!
//! `cargo run -p heddle-examples --example secured_echo`, then:
//!
//! ```sh
//! curl -s http://127.0.0.1:8082/.well-known/agent-card.json        # public: securitySchemes
//! curl -si -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \
//!   -d '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}' \
//!   http://127.0.0.1:8082/                                          # 401
//! # the same with -H "api-key: $KEY" answers
//! ```
//!
//! With `--check` it serves on a free port, checks through `heddle-client`
//! that a call without the key is refused and one with it answered, and
//! exits (what CI runs).

use std::sync::Arc;

use anyhow::{bail, ensure};
use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
};
use heddle_client::{A2aClient, ClientOptions, Credentials, Secret, SendReply};
use heddle_core::v1;
use heddle_server::{
    AgentError, AgentExecutor, AgentRoutes, Limits, RequestContext, RequestHandler, TaskEvents,
};
use heddle_store::MemoryStore;

struct Echo;

#[async_trait::async_trait]
impl AgentExecutor for Echo {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        // The verified caller: `key:{id}` here, the key's id (its name is for people).
        let who = ctx.caller.id.clone();
        events
            .artifact_text("echo", format!("{who} said: {}", ctx.text()))
            .await?;
        events.complete(None).await?;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let check = std::env::args().any(|a| a == "--check");
    // A known port to try by hand; any free one for the self-check.
    let addr = if check {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:8082"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}/", listener.local_addr()?);
    // Keys in memory; `heddle_auth::apikey::SqliteKeyStore` keeps them in a file.
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, key) = keys.create("me").await?;
    let auth = Authenticator::builder().api_keys(keys).build()?;

    let mut card = v1::AgentCard {
        name: "Secured echo".into(),
        description: "Echoes your text back, to authenticated callers only.".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![v1::AgentInterface {
            url: url.clone(),
            protocol_binding: "JSONRPC".into(),
            protocol_version: "1.0".into(),
            ..Default::default()
        }],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        ..Default::default()
    };
    // The card declares what the layer enforces.
    heddle_auth::card::declare(&auth, &mut card);
    let handler = RequestHandler::new(
        "echo",
        card,
        Arc::new(Echo),
        Arc::new(MemoryStore::default()),
        Limits::default(),
    );
    // Each binding behind the layer, which answers in that binding's error
    // form; the card stays public.
    let app = AgentRoutes::new(handler)
        .around_bindings(move |binding, routes| routes.layer(auth.layer(binding)))
        .router();
    if !check {
        println!(
            "secured echo agent at {url}; send the header api-key: {}",
            key.expose()
        );
        heddle_server::listen::serve(listener, app, std::future::pending()).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(heddle_server::listen::serve(listener, app, async {
        let _ = stopped.await;
    }));
    self_check(&url, Secret::new(key.expose())).await?;
    let _ = stop.send(());
    server.await??;
    Ok(())
}

/// The card is public; a send needs the key.
async fn self_check(url: &str, key: Secret) -> anyhow::Result<()> {
    let anonymous = A2aClient::discover(url, ClientOptions::default()).await?;
    let Err(refusal) = anonymous.send_text("hi").await else {
        bail!("a call without the key was answered");
    };
    println!("check: without the key: {refusal}");

    let opts = ClientOptions {
        credentials: Credentials {
            api_key: Some(key),
            ..Default::default()
        },
        ..Default::default()
    };
    let client = A2aClient::discover(url, opts).await?;
    let SendReply::Task(task) = client.send_text("hi").await? else {
        bail!("the echo agent answers with a task, not a message");
    };
    let echoed: Vec<String> = task.artifacts.iter().map(v1::Artifact::text).collect();
    ensure!(
        matches!(echoed.as_slice(), [one] if one.starts_with("key:") && one.ends_with(" said: hi")),
        "expected \"key:… said: hi\", got {echoed:?}"
    );
    println!("check: with the key: {echoed:?}");
    Ok(())
}
