//! `heddle serve`: the hub with the demo agents on an embedded store.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::{Context, bail};
use axum::serve::ListenerExt as _;
use clap::Args;
use heddle_hub::{
    Bindings, Hub,
    agents::{WriterStream, with_demo_agents_using},
};
use heddle_server::Limits;
use heddle_store::{MemoryStore, SqliteStore, TaskStore};

/// Options of `heddle serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Task store: `memory`, or `sqlite:PATH` (default: heddle.db in the user's data directory).
    #[arg(long)]
    store: Option<String>,
    /// The agent whose card the root `/.well-known/agent-card.json` serves.
    #[arg(long, default_value = "echo")]
    default_agent: String,
    /// The URL clients reach this server at (default: http://LISTEN).
    #[arg(long)]
    public_url: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 8 << 20)]
    max_body_bytes: usize,
    /// Most parts in one message.
    #[arg(long, default_value_t = 256)]
    max_parts: usize,
    /// Most streams open at once.
    #[arg(long, default_value_t = 10_000)]
    max_streams: usize,
    /// Protocol bindings to serve, comma-separated: `jsonrpc`, `rest`, `grpc`.
    #[arg(long, value_delimiter = ',', default_value = "jsonrpc,rest,grpc")]
    bindings: Vec<String>,
    /// Address of the gRPC listener (every agent behind it, told apart by tenant = agent id).
    #[arg(long, default_value = "127.0.0.1:50051")]
    grpc_listen: SocketAddr,
    /// Pause of the `writer-stream` agent before each chunk, in milliseconds
    /// (the benchmarks use 0, and a long pause to hold streams open).
    #[arg(long, default_value_t = 150)]
    writer_stream_pause_ms: u64,
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

fn default_db() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("heddle")
        .join("heddle.db")
}

fn open_store(spec: Option<&str>) -> anyhow::Result<(Arc<dyn TaskStore>, String)> {
    match spec {
        Some("memory") => Ok((Arc::new(MemoryStore::default()), "memory".into())),
        Some(s) if s.starts_with("sqlite:") => open_sqlite(PathBuf::from(&s["sqlite:".len()..])),
        None => open_sqlite(default_db()),
        Some(other) => bail!("unknown store {other:?}: use `memory` or `sqlite:PATH`"),
    }
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("HEDDLE_LOG")
                .unwrap_or_else(|_| "heddle=info,warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let bindings = bindings(&args.bindings)?;
    let (store, store_name) = open_store(args.store.as_deref())?;
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
        .unwrap_or_else(|| format!("http://{local}"));
    let limits = Limits {
        max_body_bytes: args.max_body_bytes,
        max_parts: args.max_parts,
        max_streams: args.max_streams,
        ..Limits::default()
    };
    let mut builder = Hub::builder(&public_url, store)
        .limits(limits)
        .bindings(bindings);
    if let Some(addr) = grpc_addr {
        builder = builder.grpc_url(addr.to_string());
    }
    let writer_stream = WriterStream {
        pause: std::time::Duration::from_millis(args.writer_stream_pause_ms),
    };
    let hub = with_demo_agents_using(builder, writer_stream)
        .default_agent(&args.default_agent)
        .build()
        .await;
    if hub.agent(&args.default_agent).is_none() {
        bail!(
            "no agent named {:?}; the agents are: {}",
            args.default_agent,
            names(&hub)
        );
    }
    let app = hub
        .router()
        .layer(tower_http::trace::TraceLayer::new_for_http());
    println!(
        "Heddle is serving {} agents at {public_url} (store: {store_name})",
        hub.agents().len()
    );
    for a in hub.agents() {
        println!(
            "  {:<14} {}/.well-known/agent-card.json",
            a.id,
            Hub::agent_url(&public_url, &a.id)
        );
    }
    println!(
        "  default card   {public_url}/.well-known/agent-card.json ({})",
        args.default_agent
    );
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    // Small writes (an SSE event, HTTP/2's headers, data and trailers frames)
    // must not wait out Nagle's algorithm against the peer's delayed ACK.
    let nodelay = |tcp: &mut tokio::net::TcpStream| {
        let _ = tcp.set_nodelay(true);
    };
    let http =
        axum::serve(listener.tap_io(nodelay), app).with_graceful_shutdown(stopped(stop_rx.clone()));
    let grpc = async {
        match (grpc_listener, hub.grpc_routes()) {
            (Some(l), Some(routes)) => {
                println!(
                    "  gRPC           {} (tenant = agent id)",
                    grpc_addr.map(|a| a.to_string()).unwrap_or_default()
                );
                axum::serve(l.tap_io(nodelay), routes.into_axum_router())
                    .with_graceful_shutdown(stopped(stop_rx.clone()))
                    .await
            }
            _ => Ok(()),
        }
    };
    let signal = async {
        shutdown().await;
        let _ = stop_tx.send(true);
    };
    let (http, grpc, ()) = tokio::join!(http, grpc, signal);
    http?;
    grpc?;
    Ok(())
}

fn names(hub: &Hub) -> String {
    hub.agents()
        .iter()
        .map(|a| a.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn shutdown() {
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
