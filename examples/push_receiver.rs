//! A push-notification receiver: a webhook that believes a delivery only
//! once it verifies (the token it registered, and the server's ES256
//! signature over the body), drops retried duplicates, and prints each event.
//!
//! `cargo run -p heddle-examples --example push_receiver` runs alone: it
//! starts a hub that signs its deliveries, registers the webhook with a
//! task's first message, prints the deliveries and exits once the task is
//! done. Against another server, fetch its JWKS the same way and give it the
//! webhook's URL in `SendMessageConfiguration.task_push_notification_config`.

use std::{collections::HashSet, sync::Arc, time::Duration};

use anyhow::{Context as _, bail, ensure};
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use heddle_api::{AgentError, AgentExecutor, RequestContext, TaskEvents, async_trait};
use heddle_client::{
    A2aClient, ClientOptions,
    webhook::{Delivery, PushEvent, TOKEN_HEADER, verify_jwt, verify_token},
};
use heddle_core::v1::{self, stream_response::Payload};
use heddle_hub::{AgentProfile, Hub};
use heddle_server::{
    PushOptions, PushPolicy,
    push::{Cidr, PushSigner},
};
use heddle_store::MemoryStore;
use jsonwebtoken::jwk::JwkSet;
use tokio::sync::mpsc;

/// What the webhook checks each delivery against.
struct Webhook {
    /// The token sent with the config; anyone who learns the URL can POST,
    /// only the server we registered with knows this.
    token: String,
    /// The sender's public keys and name, to verify its signature.
    jwks: JwkSet,
    issuer: String,
    /// Delivery ids seen: a retry after a lost answer repeats one.
    seen: std::sync::Mutex<HashSet<String>>,
    deliveries: mpsc::UnboundedSender<Delivery>,
}

async fn receive(State(hook): State<Arc<Webhook>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    if verify_token(&headers, &hook.token).is_err() {
        eprintln!("refused a delivery: wrong or missing token");
        return StatusCode::UNAUTHORIZED;
    }
    // The signature covers the body's hash and the delivery id.
    if let Err(e) = verify_jwt(&headers, &body, &hook.jwks, Some(&hook.issuer)) {
        eprintln!("refused a delivery: {e}");
        return StatusCode::UNAUTHORIZED;
    }
    let delivery = match Delivery::parse(&headers, &body) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("refused a delivery: {e}");
            return StatusCode::BAD_REQUEST;
        }
    };
    if let Some(id) = &delivery.id {
        let mut seen = hook.seen.lock().unwrap_or_else(|e| e.into_inner());
        if !seen.insert(id.clone()) {
            // Acknowledged, so the sender stops retrying; not acted on twice.
            return StatusCode::OK;
        }
    }
    let _ = hook.deliveries.send(delivery);
    // Answer fast: the sender waits for this before its next delivery to us.
    StatusCode::OK
}

/// The hub's agent: a few steps, so there is something to hear about.
struct Reporter;

#[async_trait]
impl AgentExecutor for Reporter {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        events.working(Some("reading")).await?;
        events
            .artifact_text("report", format!("report on {:?}", ctx.text()))
            .await?;
        events.complete(Some("done")).await?;
        Ok(())
    }
}

/// Starts a hub with one agent whose deliveries are signed; its URL.
async fn start_server() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let push = PushOptions {
        // The SSRF policy refuses loopback and plain http by default; this
        // webhook is both.
        policy: PushPolicy {
            allow: vec!["127.0.0.1/32".parse::<Cidr>()?],
            allow_http: true,
        },
        // A key made now; the hub publishes it at /.well-known/jwks.json.
        signer: Some(Arc::new(PushSigner::generate(&url)?)),
        initial_backoff: Duration::from_millis(100),
        ..PushOptions::default()
    };
    let profile = AgentProfile::new("reporter", "Reporter", "Writes a short report.", &[]);
    let hub = Hub::builder(&url, Arc::new(MemoryStore::default()))
        .agent("reporter", profile, Arc::new(Reporter))
        .push(push)
        .try_build()
        .await?;
    let app = hub.router();
    tokio::spawn(async move {
        if let Err(e) = heddle_server::listen::serve(listener, app, std::future::pending()).await {
            eprintln!("the server stopped: {e}");
        }
    });
    Ok(url)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = start_server().await?;

    // The sender's keys, from where it publishes them.
    let jwks_url = format!("{server}/.well-known/jwks.json");
    let jwks: JwkSet = heddle_client::reqwest::get(&jwks_url)
        .await
        .and_then(heddle_client::reqwest::Response::error_for_status)
        .with_context(|| format!("fetching {jwks_url}"))?
        .json()
        .await
        .with_context(|| format!("reading {jwks_url}"))?;

    // The webhook, on a port of its own.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let webhook_url = format!("http://{}/webhook", listener.local_addr()?);
    let (tx, mut deliveries) = mpsc::unbounded_channel();
    let hook = Arc::new(Webhook {
        // Use a fresh random secret per config in earnest.
        token: "example-webhook-token".into(),
        jwks,
        issuer: server.clone(),
        seen: std::sync::Mutex::default(),
        deliveries: tx,
    });
    let app = Router::new()
        .route("/webhook", post(receive))
        .with_state(hook.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("the webhook stopped: {e}");
        }
    });

    // The config rides on the task's first message, stored before the agent
    // runs, so its first event is delivered too; `return_immediately`
    // answers without waiting, since the webhook will say how it ends.
    let client = A2aClient::discover(
        &Hub::agent_url(&server, "reporter"),
        ClientOptions::default(),
    )
    .await?;
    let config = v1::TaskPushNotificationConfig {
        url: webhook_url.clone(),
        token: hook.token.clone(),
        ..Default::default()
    };
    let request = v1::SendMessageRequest {
        message: Some(A2aClient::user_message(vec![v1::Part::text("the weather")])),
        configuration: Some(v1::SendMessageConfiguration {
            task_push_notification_config: Some(config),
            return_immediately: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let task_id = match client.send(request).await? {
        heddle_client::SendReply::Task(t) => t.id,
        heddle_client::SendReply::Message(_) => bail!("the agent answered without a task"),
    };
    println!("task {task_id}: deliveries to {webhook_url}");

    loop {
        let delivery = tokio::time::timeout(Duration::from_secs(10), deliveries.recv())
            .await
            .context("no delivery within 10 s")?
            .context("the webhook stopped")?;
        if delivery.task_id() != task_id {
            continue;
        }
        println!(
            "  delivery {}: {}",
            delivery.id.as_deref().unwrap_or("(no id)"),
            describe(&delivery.event)
        );
        if delivery.state().is_some_and(v1::TaskState::is_terminal) {
            break;
        }
    }

    // The checks are not for show: the right token on an unsigned body is refused.
    let forged = heddle_client::reqwest::Client::new()
        .post(&webhook_url)
        .header(TOKEN_HEADER, &hook.token)
        .body(r#"{"statusUpdate":{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}}"#)
        .send()
        .await?
        .status();
    ensure!(forged == 401, "a forged delivery was answered {forged}");
    println!("a forged delivery (right token, no signature): {forged}");
    Ok(())
}

/// One line per delivered event.
fn describe(event: &PushEvent) -> String {
    let state = |s: Option<&v1::TaskStatus>| {
        s.map_or(v1::TaskState::Unspecified, v1::TaskStatus::state)
            .as_str_name()
    };
    match event {
        // A config made in A2A 0.3 gets the whole task each time.
        PushEvent::V03(t) => format!("task {}", state(t.status.as_ref())),
        PushEvent::V1(e) => match &e.payload {
            Some(Payload::Task(t)) => format!("task {}", state(t.status.as_ref())),
            Some(Payload::StatusUpdate(u)) => {
                let said = u
                    .status
                    .as_ref()
                    .and_then(|s| s.message.as_ref())
                    .map(|m| format!(": {}", m.text()))
                    .unwrap_or_default();
                format!("status {}{said}", state(u.status.as_ref()))
            }
            Some(Payload::ArtifactUpdate(u)) => match &u.artifact {
                Some(a) => format!("artifact {:?}: {}", a.name, a.text()),
                None => "artifact (empty)".into(),
            },
            Some(Payload::Message(m)) => format!("message: {}", m.text()),
            None => "(empty event)".into(),
        },
    }
}
