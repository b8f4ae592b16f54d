//! Push notifications in the CLI: the `heddle serve` push options and
//! `heddle webhook listen`, a receiver that prints deliveries as they arrive.

use std::{collections::HashSet, net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use clap::{Args, Subcommand};
use heddle_client::webhook::{Delivery, PushEvent, verify_jwt, verify_token};
use heddle_server::{
    PushOptions, PushPolicy,
    push::{Cidr, PushSigner},
};
use tokio::sync::Mutex;

/// Push notification options of `heddle serve`.
#[derive(Args, Debug)]
pub struct PushArgs {
    /// Do not deliver push notifications (cards then say pushNotifications: false).
    #[arg(long)]
    no_push: bool,
    /// Allow push deliveries to this network even though it is internal
    /// (loopback, private, link-local, CGNAT, unique-local, metadata), e.g.
    /// 127.0.0.1/32. Repeatable.
    #[arg(long = "push-allow", value_name = "CIDR")]
    push_allow: Vec<Cidr>,
    /// Allow plain http:// webhook URLs (default: https only).
    #[arg(long)]
    push_allow_http: bool,
    /// Attempts per delivery before it is dead-lettered.
    #[arg(long, default_value_t = 10)]
    push_max_attempts: u32,
    /// Wait after a delivery's first failure, in milliseconds; doubled (with
    /// jitter) after each further one.
    #[arg(long, default_value_t = 1000)]
    push_initial_backoff_ms: u64,
    /// Longest wait between attempts, in milliseconds.
    #[arg(long, default_value_t = 300_000)]
    push_max_backoff_ms: u64,
    /// Sign each delivery with an ES256 JWT (header X-A2A-Notification-JWT)
    /// under a key made at start; the public key is at /.well-known/jwks.json.
    #[arg(long)]
    push_sign: bool,
    /// Sign deliveries with this key instead (PKCS#8 EC P-256, PEM or DER);
    /// implies --push-sign.
    #[arg(long, value_name = "PATH")]
    push_signing_key: Option<std::path::PathBuf>,
    /// A key that signed deliveries before --push-signing-key (its PKCS#8
    /// file, or its public JWK): its public half stays in the JWKS while a
    /// rotation overlaps, so receivers verify deliveries signed with either.
    /// Repeatable.
    #[arg(long, value_name = "PATH", requires = "push_signing_key")]
    push_previous_key: Vec<std::path::PathBuf>,
}

impl PushArgs {
    /// The delivery options, or `None` when push is off; JWTs name `issuer`.
    pub fn options(&self, issuer: &str) -> anyhow::Result<Option<PushOptions>> {
        if self.no_push {
            return Ok(None);
        }
        let signer = match (&self.push_signing_key, self.push_sign) {
            (Some(path), _) => {
                let mut signer = PushSigner::load(path, issuer)?;
                for previous in &self.push_previous_key {
                    signer = signer.keep_previous(previous)?;
                }
                Some(signer)
            }
            (None, true) => Some(PushSigner::generate(issuer)?),
            (None, false) => None,
        };
        Ok(Some(PushOptions {
            policy: PushPolicy {
                allow: self.push_allow.clone(),
                allow_http: self.push_allow_http,
            },
            max_attempts: self.push_max_attempts.max(1),
            initial_backoff: Duration::from_millis(self.push_initial_backoff_ms.max(1)),
            max_backoff: Duration::from_millis(self.push_max_backoff_ms.max(1)),
            signer: signer.map(Arc::new),
            ..PushOptions::default()
        }))
    }
}

/// `heddle webhook …`
#[derive(Subcommand, Debug)]
pub enum WebhookCommand {
    /// Receive push notifications and print each one (one JSON line per delivery).
    Listen(ListenArgs),
}

/// Options of `heddle webhook listen`.
#[derive(Args, Debug)]
pub struct ListenArgs {
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 8090)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: std::net::IpAddr,
    /// Only accept deliveries carrying this token (X-A2A-Notification-Token).
    #[arg(long, env = "HEDDLE_WEBHOOK_TOKEN")]
    token: Option<String>,
    /// Only accept deliveries whose JWT verifies against the JWKS at this URL
    /// (e.g. http://127.0.0.1:8080/.well-known/jwks.json of a `heddle serve --push-sign`).
    #[arg(long, value_name = "URL")]
    jwks: Option<String>,
}

#[derive(Default)]
struct Seen {
    ids: HashSet<String>,
}

struct Listener {
    token: Option<String>,
    jwks: Option<jsonwebtoken::jwk::JwkSet>,
    seen: Mutex<Seen>,
}

async fn receive(
    State(l): State<Arc<Listener>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, &'static str) {
    if let Some(t) = &l.token
        && verify_token(&headers, t).is_err()
    {
        eprintln!("refused a delivery: wrong or missing token");
        return (StatusCode::UNAUTHORIZED, "bad token");
    }
    if let Some(jwks) = &l.jwks
        && let Err(e) = verify_jwt(&headers, &body, jwks, None)
    {
        eprintln!("refused a delivery: {e}");
        return (StatusCode::UNAUTHORIZED, "bad signature");
    }
    let delivery = match Delivery::parse(&headers, &body) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("refused a delivery: {e}");
            return (StatusCode::BAD_REQUEST, "not a push notification");
        }
    };
    if let Some(id) = &delivery.id
        && !l.seen.lock().await.ids.insert(id.clone())
    {
        eprintln!("duplicate delivery {id} dropped");
        return (StatusCode::OK, "duplicate");
    }
    let (version, event) = match &delivery.event {
        PushEvent::V1(e) => ("1.0", serde_json::to_value(e)),
        PushEvent::V03(t) => ("0.3", serde_json::to_value(t)),
    };
    let line = serde_json::json!({
        "deliveryId": delivery.id,
        "version": version,
        "taskId": delivery.task_id(),
        "event": event.unwrap_or_default(),
    });
    println!("{line}");
    (StatusCode::OK, "ok")
}

/// Runs the receiver until Ctrl-C.
pub async fn run(cmd: WebhookCommand) -> anyhow::Result<std::process::ExitCode> {
    let WebhookCommand::Listen(args) = cmd;
    let addr = SocketAddr::new(args.host, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    let local = listener.local_addr()?;
    eprintln!("listening for push notifications at http://{local}/ (Ctrl-C to stop)");
    let jwks = match &args.jwks {
        Some(url) => Some(
            heddle_client::reqwest::get(url)
                .await
                .and_then(heddle_client::reqwest::Response::error_for_status)
                .with_context(|| format!("fetching the JWKS at {url}"))?
                .json::<jsonwebtoken::jwk::JwkSet>()
                .await
                .with_context(|| format!("reading the JWKS at {url}"))?,
        ),
        None => None,
    };
    let state = Arc::new(Listener {
        token: args.token,
        jwks,
        seen: Mutex::default(),
    });
    let app = Router::new()
        .route("/", post(receive))
        .route("/{*path}", post(receive))
        .with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(std::process::ExitCode::SUCCESS)
}
