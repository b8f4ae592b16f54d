//! `heddle itk-agent`: the agent for the A2A interop kit (`heddle_itk`),
//! started as the kit starts every SDK's agent.

use std::{net::SocketAddr, time::Duration};

use anyhow::Context as _;
use clap::Args;

/// `heddle itk-agent` options, spelled as the kit passes them.
#[derive(Args, Debug)]
pub struct ItkArgs {
    /// Port of the HTTP listener (JSON-RPC and HTTP+JSON), on 127.0.0.1.
    #[arg(long = "httpPort")]
    http_port: u16,
    /// Port of the gRPC listener, on 127.0.0.1.
    #[arg(long = "grpcPort")]
    grpc_port: u16,
    /// Bound on each call to another agent, in seconds.
    #[arg(long, default_value_t = 60)]
    call_timeout_secs: u64,
}

pub async fn run(args: ItkArgs) -> anyhow::Result<()> {
    init_logs();
    let http_addr = SocketAddr::from(([127, 0, 0, 1], args.http_port));
    let grpc_addr = SocketAddr::from(([127, 0, 0, 1], args.grpc_port));
    let http = tokio::net::TcpListener::bind(http_addr)
        .await
        .with_context(|| format!("binding {http_addr} (--httpPort)"))?;
    let grpc = tokio::net::TcpListener::bind(grpc_addr)
        .await
        .with_context(|| format!("binding {grpc_addr} (--grpcPort)"))?;
    println!(
        "heddle itk-agent: card http://{}/.well-known/agent-card.json, gRPC {}",
        http.local_addr()?,
        grpc.local_addr()?
    );
    let agent = heddle_itk::ItkAgent {
        call_timeout: Duration::from_secs(args.call_timeout_secs.max(1)),
    };
    heddle_itk::serve(http, grpc, agent, crate::serve::shutdown()).await?;
    Ok(())
}

/// Logs on stderr at `ITK_LOG_LEVEL` (INFO unless DEBUG is asked for).
fn init_logs() {
    let level = match std::env::var("ITK_LOG_LEVEL") {
        Ok(l) if l.eq_ignore_ascii_case("debug") => "debug",
        _ => "info",
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(level))
        .try_init();
}
