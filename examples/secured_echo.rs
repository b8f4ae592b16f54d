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

use std::sync::Arc;

use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
};
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
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = "http://127.0.0.1:8082/";
    // Keys in memory; `heddle_auth::apikey::SqliteKeyStore` keeps them in a file.
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, key) = keys.create("me").await?;
    let auth = Authenticator::builder().api_keys(keys).build()?;

    let mut card = v1::AgentCard {
        name: "Secured echo".into(),
        description: "Echoes your text back, to authenticated callers only.".into(),
        version: "1.0.0".into(),
        supported_interfaces: vec![v1::AgentInterface {
            url: url.into(),
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8082").await?;
    println!(
        "secured echo agent at {url}; send the header api-key: {}",
        key.expose()
    );
    heddle_server::listen::serve(listener, app, std::future::pending()).await?;
    Ok(())
}
