//! `heddle serve`: the hub with the demo agents on an embedded store, or on
//! PostgreSQL.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::{Context, bail};
use clap::Args;
use heddle_client::heddle_signing::CardSigner;
use heddle_core::VersionSet;
use heddle_hub::{
    Bindings, Hub, HubBuilder,
    agents::{ConformanceCard, DemoOptions, WriterStream, demo_builtins},
};
use heddle_store::{MemoryStore, PostgresOptions, PostgresStore, SqliteStore, TaskStore};

/// Options of `heddle serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Task store: `memory`, `sqlite:PATH` (default: heddle.db in the user's
    /// data directory), or `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (also
    /// `postgresql://`; `?schema=NAME` keeps Heddle's tables in that schema).
    #[arg(long)]
    store: Option<String>,
    /// Most bytes of tasks `--store memory` keeps (finished ones are evicted first).
    #[arg(long, default_value_t = heddle_store::DEFAULT_MEMORY_MAX_BYTES)]
    memory_store_max_bytes: usize,
    /// The agent whose card the root `/.well-known/agent-card.json` serves.
    #[arg(long, default_value = "echo")]
    default_agent: String,
    /// The URL clients reach this server at (default: http://LISTEN, or https://LISTEN with --tls-cert).
    #[arg(long)]
    public_url: Option<String>,
    #[command(flatten)]
    limits: crate::serve_limits::LimitArgs,
    /// Also answer requests naming this Host (`host` or `host:port`; `*` for any).
    /// Allowed already: the --public-url host and, on a loopback listener,
    /// localhost and the loopback addresses at its port.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Let pages of this origin (`https://app.example`) call the hub from a
    /// browser (CORS). None by default: browsers let no other origin read an answer.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// Protocol bindings to serve, comma-separated: `jsonrpc`, `rest`, `grpc`.
    #[arg(long, value_delimiter = ',', default_value = "jsonrpc,rest,grpc")]
    bindings: Vec<String>,
    /// Address of the gRPC listener (every agent behind it, told apart by tenant = agent id).
    #[arg(long, default_value = "127.0.0.1:50051")]
    grpc_listen: SocketAddr,
    /// Refuse every call without a valid API key (see `heddle keys create`) or
    /// bearer token; cards and the agent listing stay public.
    #[arg(long)]
    require_auth: bool,
    /// A TOML config file: `[[agents]]` tables are the agents to serve
    /// (default: the demo agents), `[admin]` names the admin API's callers,
    /// and an `[auth]` table sets API key placement and JWT checks (issuer,
    /// audience, keys or JWKS URL, OIDC issuer, leeway), and turns
    /// authentication on.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where the admin token is kept (made at first start, readable by its
    /// owner only; `HEDDLE_ADMIN_TOKEN` overrides it). `heddle agents` reads
    /// it from the same place. Default: admin-token beside the default store.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// A TOML or JSON file of name = value secrets, where the credentials
    /// remote agents' `auth` names are looked up before the environment.
    #[arg(long, value_name = "FILE")]
    secrets_file: Option<PathBuf>,
    #[command(flatten)]
    security: crate::serve_tls::ServeSecurityArgs,
    #[command(flatten)]
    push: crate::webhook::PushArgs,
    /// Pause of the `writer-stream` agent before each chunk, in milliseconds
    /// (the benchmarks use 0, and a long pause to hold streams open).
    #[arg(long, default_value_t = 150)]
    writer_stream_pause_ms: u64,
    /// On SIGTERM or Ctrl-C, how long running tasks get to finish, in
    /// seconds, once streams are drained and connections closed; what still
    /// runs then is handed to another replica (or failed at the next start).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    shutdown_grace_secs: u64,
    /// Let another replica resume a `writer-stream` run whose replica died,
    /// from the chunks it had written, instead of failing it.
    #[arg(long)]
    writer_stream_resumable: bool,
    /// A2A versions to serve, comma-separated: `1.0`, `0.3`. With `1.0`
    /// alone the cards are strict v1.0 cards and v0.3 calls are
    /// VersionNotSupported.
    #[arg(long, default_value = "1.0,0.3", value_parser = VersionSet::parse_list)]
    card_versions: VersionSet,
    /// The conformance agent declares the extension
    /// `urn:a2a:tck:required-extension` as required (calls without it are
    /// ExtensionSupportRequired).
    #[arg(long)]
    conformance_required_extension: bool,
    /// The conformance agent declares no streaming (streaming calls are
    /// UnsupportedOperation).
    #[arg(long)]
    conformance_no_streaming: bool,
    /// Log lines on stderr as `text` (for a person) or `json` (one object a
    /// line, for a log pipeline). Filtered by `HEDDLE_LOG` either way.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Serve `/metrics` to anyone even with authentication on (by default
    /// only admins read it then: the admin token, or an `[admin]` caller).
    #[arg(long)]
    public_metrics: bool,
    /// Do not serve the web console at `/console` (the hub then also
    /// ignores console session cookies).
    #[arg(long)]
    no_console: bool,
    /// Export the spans of every A2A request and agent run, and the hub's
    /// metrics, over OTLP/HTTP to this collector (its base URL, e.g.
    /// `http://127.0.0.1:4318`), and join callers' W3C trace context.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// Run as one replica of several: share task events with the others
    /// over NATS JetStream at this URL (`nats://HOST:4222`), so streams
    /// resume on any replica and cancels reach the one running the task.
    /// With a PostgreSQL `--store`, replicas also lease the tasks they run,
    /// and end a dead replica's tasks FAILED.
    #[arg(long, env = "HEDDLE_EVENTS")]
    events: Option<String>,
    /// How long a replica's lease on a running task lasts unless renewed,
    /// in seconds: a dead replica's tasks end within about this long.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=3600))]
    lease_secs: u64,
    /// With a PostgreSQL store, how long a replica holds the push
    /// deliveries it claimed, in seconds: those a dead replica had claimed
    /// go out from another after this long. Longer than a delivery attempt
    /// takes, or a slow one is sent twice (receivers drop it by its id).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    push_claim_secs: u64,
    /// Delete tasks that ended (completed, failed, canceled, rejected)
    /// this many hours ago, with their push configs; without it, tasks are
    /// kept for good. A task whose push deliveries are still pending waits
    /// for them.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    retain_tasks_hours: Option<u64>,
    /// Delete the push configs of tasks that ended this many hours ago
    /// (0: as soon as their last delivery is out); the task stays.
    #[arg(long, default_value_t = 168, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    retain_push_configs_hours: u64,
}

impl ServeArgs {
    /// What retention deletes, and when.
    fn retention(&self) -> heddle_hub::retention::Retention {
        let hours = |h: u64| std::time::Duration::from_secs(h.saturating_mul(3600));
        heddle_hub::retention::Retention {
            tasks: self.retain_tasks_hours.map(hours),
            push_configs: Some(hours(self.retain_push_configs_hours)),
            ..Default::default()
        }
    }
}

/// How log lines are written ([`ServeArgs::log_format`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per event: timestamp, level, target, fields, spans.
    Json,
}

fn bindings(names: &[String]) -> anyhow::Result<Bindings> {
    let mut b = Bindings {
        jsonrpc: false,
        rest: false,
        grpc: false,
    };
    for n in names {
        match n.trim() {
            "jsonrpc" => b.jsonrpc = true,
            "rest" => b.rest = true,
            "grpc" => b.grpc = true,
            other => bail!("unknown binding {other:?}: use jsonrpc, rest and/or grpc"),
        }
    }
    if !(b.jsonrpc || b.rest || b.grpc) {
        bail!("enable at least one binding");
    }
    Ok(b)
}

pub(crate) fn default_db() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("heddle")
        .join("heddle.db")
}

async fn open_store(
    spec: Option<&str>,
    max_bytes: usize,
    push_claim: std::time::Duration,
) -> anyhow::Result<(Arc<dyn TaskStore>, String)> {
    match spec {
        Some("memory") => {
            let limits = heddle_store::MemoryLimits {
                max_bytes,
                ..Default::default()
            };
            Ok((Arc::new(MemoryStore::new(limits)), "memory".into()))
        }
        Some(s) if s.starts_with("sqlite:") => open_sqlite(PathBuf::from(&s["sqlite:".len()..])),
        Some(url) if is_postgres(url) => {
            let options = PostgresOptions {
                claim_lease: push_claim,
                ..PostgresOptions::default()
            };
            let store = open_postgres(url, options).await?;
            let name = store.url().to_owned();
            Ok((Arc::new(store), name))
        }
        None => open_sqlite(default_db()),
        Some(other) => bail!(
            "unknown store {:?}: use `memory`, `sqlite:PATH` or `postgres://…`",
            heddle_store::redact_url(other)
        ),
    }
}

/// This replica's place among the others: the NATS bus at `url` and, when
/// the store is shared (it keeps leases), the leases of running tasks.
async fn cluster(
    url: &str,
    store: &Arc<dyn TaskStore>,
    lease_secs: u64,
) -> anyhow::Result<Arc<heddle_server::cluster::Cluster>> {
    let bus = heddle_nats::NatsBus::connect(url, heddle_nats::NatsOptions::default())
        .await
        .with_context(|| format!("connecting --events {}", heddle_store::redact_url(url)))?;
    let mut cluster = heddle_server::cluster::Cluster::new(Arc::new(bus));
    match store.clone().lease_store() {
        Some(leases) => {
            let ttl = std::time::Duration::from_secs(lease_secs);
            cluster = cluster.with_leases(
                leases,
                heddle_server::cluster::LeaseTimes {
                    ttl,
                    reap_every: (ttl / 3).max(std::time::Duration::from_millis(200)),
                },
            );
        }
        None => tracing::warn!(
            "--events without a shared store: events are shared, but tasks are not leased \
             (use a PostgreSQL --store for several replicas)"
        ),
    }
    Ok(Arc::new(cluster))
}

/// Whether a `--store` value names a PostgreSQL database.
pub(crate) fn is_postgres(spec: &str) -> bool {
    spec.starts_with("postgres://") || spec.starts_with("postgresql://")
}

/// Connects to the PostgreSQL store at `url` and migrates it; errors name
/// the URL without its password.
async fn open_postgres(url: &str, options: PostgresOptions) -> anyhow::Result<PostgresStore> {
    PostgresStore::connect(url, options).await.with_context(|| {
        format!(
            "opening the PostgreSQL store at {}",
            heddle_store::redact_url(url)
        )
    })
}

fn open_sqlite(path: PathBuf) -> anyhow::Result<(Arc<dyn TaskStore>, String)> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let store = SqliteStore::open_path(&path)
        .with_context(|| format!("opening the SQLite store at {}", path.display()))?;
    Ok((Arc::new(store), format!("sqlite:{}", path.display())))
}

/// Runs the server until Ctrl-C or SIGTERM.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let telemetry = crate::telemetry::init(args.log_format, args.otlp_endpoint.as_deref())?;
    let bindings = bindings(&args.bindings)?;
    let tls = args.security.tls()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (store, store_name) = open_store(
        args.store.as_deref(),
        args.memory_store_max_bytes,
        std::time::Duration::from_secs(args.push_claim_secs),
    )
    .await?;
    let auth = crate::serve_auth::authenticator(
        args.require_auth,
        args.config.as_deref(),
        args.store.as_deref(),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    let grpc_listener = if bindings.grpc {
        Some(
            tokio::net::TcpListener::bind(args.grpc_listen)
                .await
                .with_context(|| {
                    format!(
                        "binding the gRPC listener {} (--grpc-listen)",
                        args.grpc_listen
                    )
                })?,
        )
    } else {
        None
    };
    let grpc_addr = grpc_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("{scheme}://{local}"));
    let signer = args.security.signer(&public_url)?;
    let limits = args.limits.handler_limits();
    let conn_limits = args.limits.conn_limits()?;
    let store_for_leases = store.clone();
    let mut builder = Hub::builder(&public_url, store)
        .limits(limits)
        .caller_limits(args.limits.caller_limits())
        .bindings(bindings);
    if let Some(observer) = telemetry.observer() {
        builder = builder.observer(observer);
    }
    let cluster = match &args.events {
        Some(url) => Some(cluster(url, &store_for_leases, args.lease_secs).await?),
        None => None,
    };
    if let Some(cluster) = &cluster {
        builder = builder.cluster(cluster.clone());
    }
    builder = builder.retention(args.retention());
    builder = builder.console(!args.no_console);
    if let Some(addr) = grpc_addr {
        builder = builder.grpc_url(match tls {
            Some(_) => format!("https://{addr}"),
            None => addr.to_string(),
        });
    }
    // A card that cannot be signed stops the start, rather than be served unsigned.
    let sign_failures = SignFailures::default();
    if let Some(signer) = signer.clone() {
        builder = signing(builder, signer, sign_failures.clone());
    }
    let auth_on = auth.is_some();
    let mut auth_lines = Vec::new();
    if let Some((auth, lines)) = auth {
        builder = builder.authenticator(auth);
        auth_lines = lines;
    }
    if let Some(push) = args.push.options(&public_url)? {
        builder = builder.push(push);
    }
    let demo = DemoOptions {
        writer_stream: WriterStream {
            pause: std::time::Duration::from_millis(args.writer_stream_pause_ms),
            resumable: args.writer_stream_resumable,
        },
        conformance: ConformanceCard {
            required_extension: args.conformance_required_extension,
            streaming: !args.conformance_no_streaming,
        },
    };
    let registry = crate::hub_config::read(args.config.as_deref())?;
    let token_file = args
        .admin_token_file
        .clone()
        .unwrap_or_else(crate::hub_config::default_token_file);
    let token = crate::hub_config::admin_token(&token_file)?;
    builder = builder.admin(registry.admin_access(heddle_hub::AdminAccess::default().token(token)));
    if args.public_metrics {
        builder = builder.metrics_access(heddle_hub::MetricsAccess::Public);
    }
    if let Some(file) = &args.secrets_file {
        let secrets = heddle_hub::remote::SecretSource::from_file(file)?;
        builder = builder.remote(heddle_hub::RemoteSettings {
            secrets,
            ..heddle_hub::RemoteSettings::default()
        });
    }
    let builder = demo_builtins(builder.card_versions(args.card_versions), demo);
    let hub = registry
        .apply(builder)
        .default_agent(&args.default_agent)
        .try_build()
        .await?;
    if let Ok(f) = sign_failures.lock()
        && !f.is_empty()
    {
        bail!("cannot sign the cards of {}", f.join("; "));
    }
    if hub.agent(&args.default_agent).is_none() {
        bail!(
            "no agent named {:?}; the agents are: {}",
            args.default_agent,
            names(&hub)
        );
    }
    let app = crate::serve_limits::guarded(
        hub.service(),
        local,
        &public_url,
        &args.allow_hosts,
        &args.cors_origins,
    )?;

    print_banner(&hub, &public_url, &store_name, auth_on, &args.default_agent);
    for line in &auth_lines {
        println!("{line}");
    }
    if let Some(s) = &signer {
        print_signer(s, &public_url);
    }
    println!(
        "  admin API      {public_url}/api/v1/admin/agents (token in {}; `heddle agents` uses it)",
        token_file.display()
    );
    if !args.no_console {
        println!(
            "  console        {public_url}/console (sign in with an API key, or the admin token)"
        );
    }
    if let Some(cluster) = &cluster {
        // Control requests, lease renewal and the reaper, now that every
        // agent's handler is registered with it.
        cluster.start();
    }
    if let (Some(cluster), Some(url)) = (&cluster, &args.events) {
        println!(
            "  events         {} (replica {}{})",
            heddle_store::redact_url(url),
            cluster.replica(),
            if cluster.leases_tasks() {
                format!("; task leases of {} s", args.lease_secs)
            } else {
                String::new()
            }
        );
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let http = crate::serve_tls::serve(
        listener,
        app,
        tls.clone(),
        conn_limits,
        stopped(stop_rx.clone()),
    );
    // The gRPC listener answers for its own address (and the public and
    // allowed hosts): a rebinding page gets no further there than on HTTP.
    let grpc_app = match (hub.grpc_app(), grpc_addr) {
        (Some(app), Some(addr)) => Some(crate::serve_limits::guarded(
            app,
            addr,
            &public_url,
            &args.allow_hosts,
            &[],
        )?),
        _ => None,
    };

    let grpc = async {
        match (grpc_listener, grpc_app) {
            (Some(l), Some(app)) => {
                println!(
                    "  gRPC           {} (tenant = agent id)",
                    grpc_addr.map(|a| a.to_string()).unwrap_or_default()
                );
                crate::serve_tls::serve(l, app, tls.clone(), conn_limits, stopped(stop_rx.clone()))
                    .await
            }
            _ => Ok(()),
        }
    };
    let signal = async {
        shutdown().await;
        // No dead replica's tasks are taken on from here. Streams end
        // first, each telling its client to subscribe again (here once
        // restarted, or on another replica); then the listeners stop
        // accepting and finish what their connections have begun.
        if let Some(cluster) = &cluster {
            cluster.stop_reaping();
        }
        hub.drain_streams();
        let _ = stop_tx.send(true);
    };
    let (http, grpc, ()) = tokio::join!(http, grpc, signal);
    // Running tasks get the grace time to finish here; what still runs
    // then is handed over (with replicas) or failed at the next start.
    let grace =
        std::time::Instant::now() + std::time::Duration::from_secs(args.shutdown_grace_secs);
    while hub.running_tasks() > 0 && std::time::Instant::now() < grace {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    if hub.running_tasks() > 0 {
        tracing::warn!(
            tasks = hub.running_tasks(),
            "stopping with tasks still running"
        );
    }
    if let Some(cluster) = &cluster {
        cluster.shutdown().await;
    }
    http?;
    grpc?;
    Ok(())
}

fn names(hub: &Hub) -> String {
    hub.agents()
        .iter()
        .map(|a| a.id.clone())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// The agents whose cards could not be signed, with why.
type SignFailures = Arc<std::sync::Mutex<Vec<String>>>;

/// Every card signed by `signer` as it is built (a failure is kept in
/// `failures`), and the signing key published with the hub's JWKS (the
/// `jku`).
fn signing(mut builder: HubBuilder, signer: Arc<CardSigner>, failures: SignFailures) -> HubBuilder {
    if let Some(keys) = signer
        .jwks()
        .and_then(|j| j.get("keys").and_then(|k| k.as_array()).cloned())
    {
        builder = builder.publish_keys(keys);
    }
    builder.card_hook(Arc::new(move |id, card| {
        if let Err(e) = signer.sign(card)
            && let Ok(mut f) = failures.lock()
        {
            f.push(format!("{id}: {e}"));
        }
    }))
}

/// What is served where, for the operator.
fn print_banner(hub: &Hub, public_url: &str, store_name: &str, auth_on: bool, default_agent: &str) {
    println!(
        "Heddle is serving {} agents at {public_url} (store: {store_name}{})",
        hub.agents().len(),
        if auth_on {
            "; authentication required"
        } else {
            ""
        }
    );
    for a in hub.agents() {
        println!(
            "  {:<14} {}/.well-known/agent-card.json",
            a.id,
            Hub::agent_url(public_url, &a.id)
        );
    }
    println!(
        "  default card   {public_url}/.well-known/agent-card.json ({})",
        default_agent
    );
}

fn print_signer(s: &CardSigner, public_url: &str) {
    println!(
        "  cards signed   {} kid {}{}",
        s.key().alg(),
        s.key().kid(),
        if s.jwks().is_some() {
            format!(
                ", public key at {public_url}{}",
                crate::serve_tls::JWKS_PATH
            )
        } else {
            String::new()
        }
    );
}
