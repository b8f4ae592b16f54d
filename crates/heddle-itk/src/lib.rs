//! An agent for the A2A project's interoperability kit (ITK), built on
//! Heddle's server and client as any user's agent would be.
//!
//! The kit starts one agent per SDK and sends a nested instruction into the
//! first; each agent carries out its node (answer, run steps, or call the
//! next agent over the binding the node names) and the kit checks that
//! every hop's answer reached the end. This agent serves JSON-RPC at
//! `/jsonrpc/`, HTTP+JSON at `/rest/` and gRPC on a listener of its own,
//! each in v1.0 and v0.3, and answers as the kit reads answers: one status
//! message, COMPLETED, with the outputs joined by newlines.
//!
//! `heddle itk-agent --httpPort N --grpcPort M` runs it;
//! [`instruction`] is the kit's message, [`ItkAgent`] what is done with it.

pub mod instruction;

mod agent;

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use heddle_core::v1;
use heddle_server::{
    AgentRoutes, PushNotifier, PushOptions, PushPolicy, RequestHandler, grpc::GrpcRouter,
};
use heddle_store::MemoryStore;
use tokio::net::TcpListener;

pub use agent::{CallError, FINISHED, ItkAgent, PUSH_TOKEN};

/// The agent's id: the gRPC tenant of a call that names none.
pub const AGENT_ID: &str = "itk";

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener's address could not be read.
    #[error("listener address: {0}")]
    Io(#[from] std::io::Error),
    /// The push notifier could not start.
    #[error(transparent)]
    Push(#[from] heddle_server::push::PushError),
}

/// Serves the agent on `http` (JSON-RPC and HTTP+JSON) and `grpc` until
/// `shutdown` resolves, then lets open connections finish.
///
/// Push deliveries may go to loopback over plain HTTP, where the kit's
/// receivers listen, and nowhere else.
pub async fn serve(
    http: TcpListener,
    grpc: TcpListener,
    agent: ItkAgent,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), StartError> {
    let http_addr = http.local_addr()?;
    let grpc_addr = grpc.local_addr()?;
    let store = Arc::new(MemoryStore::default());
    let notifier = PushNotifier::new(
        store.clone(),
        PushOptions {
            policy: PushPolicy {
                allow: ["127.0.0.0/8", "::1/128"]
                    .iter()
                    .filter_map(|c| c.parse().ok())
                    .collect(),
                allow_http: true,
            },
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            ..PushOptions::default()
        },
    )?;
    let _push_worker = notifier.start().await?;
    let handler =
        RequestHandler::builder(AGENT_ID, card(http_addr, grpc_addr), Arc::new(agent), store)
            .push(notifier)
            .build();
    let app = heddle_server::lenient_paths(
        AgentRoutes::new(handler.clone())
            .jsonrpc_at("/jsonrpc")
            .rest_at("/rest")
            .router(),
    );
    let grpc_app = GrpcRouter::new()
        .agent(handler)
        .default_agent(AGENT_ID)
        .routes()
        .await
        .into_axum_router();

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let serve_http = heddle_server::listen::serve(http, app, stopped(stop_rx.clone()));
    let serve_grpc = heddle_server::listen::serve(grpc, grpc_app, stopped(stop_rx));
    let stop = async {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let (h, g, ()) = tokio::join!(serve_http, serve_grpc, stop);
    h?;
    g?;
    Ok(())
}

/// The agent's card: every binding in both versions, at the addresses the
/// kit expects (`/jsonrpc/`, `/rest/`, and the gRPC address with no scheme).
pub fn card(http: SocketAddr, grpc: SocketAddr) -> v1::AgentCard {
    let mut interfaces = Vec::new();
    for version in ["1.0", "0.3"] {
        for (binding, url) in [
            ("JSONRPC", format!("http://{http}/jsonrpc/")),
            ("HTTP+JSON", format!("http://{http}/rest/")),
            ("GRPC", grpc.to_string()),
        ] {
            interfaces.push(v1::AgentInterface {
                url,
                protocol_binding: binding.into(),
                protocol_version: version.into(),
                ..Default::default()
            });
        }
    }
    v1::AgentCard {
        name: "Heddle ITK agent".into(),
        description: "Follows the A2A interop kit's instructions: answers, runs steps, \
                      and calls the next agent over the binding each step names."
            .into(),
        version: env!("CARGO_PKG_VERSION").into(),
        supported_interfaces: interfaces,
        capabilities: Some(v1::AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            ..Default::default()
        }),
        default_input_modes: vec![instruction::MEDIA_TYPE.into(), "text/plain".into()],
        default_output_modes: vec!["text/plain".into()],
        skills: vec![v1::AgentSkill {
            id: "itk".into(),
            name: "Interop kit instructions".into(),
            description: "Reads an itk.Instruction from the first binary part and carries it out."
                .into(),
            tags: vec!["interop".into(), "itk".into()],
            ..Default::default()
        }],
        ..Default::default()
    }
}
