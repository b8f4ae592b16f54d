//! # heddle-hub
//!
//! One server, many agents, laid out as hosted A2A platforms do:
//!
//! ```text
//! GET  /api/v1/agents                                   search the agents (text, tag, skill, kind; paged)
//! GET  /api/v1/agents/{agentId}/.well-known/agent-card.json   (and agent.json)
//! POST /api/v1/agents/{agentId}/a2a                     JSON-RPC 2.0 (+ SSE)
//! ANY  /api/v1/agents/{agentId}/rest/…                  HTTP+JSON
//! GET  /.well-known/agent-card.json                     the default agent's card
//! GET  /.well-known/ai-catalog.json                     every listed agent's card (AI Catalog, provisional)
//! ANY  /api/v1/admin/agents[/{agentId}]                 register, read, change, remove (admins only)
//! ANY  /api/v1/admin/keys[/{nameOrId}]                  API keys: list, create (shown once), revoke (admins only)
//! GET  /metrics                                         OpenMetrics text (admins only when auth is on: [`MetricsAccess`])
//! GET  /healthz, /readyz                                alive; ready (store, registry), 200 or 503
//! GET  /console                                        the web console (on unless [`HubBuilder::console`] turns it off)
//! ```
//!
//! The registry is live: agents are added, changed and removed while the
//! hub runs ([`Hub::register`], [`Hub::update`], [`Hub::remove`], and the
//! admin API), and every request looks its agent up when it arrives, so no
//! other agent's requests or streams notice. An [`registry::AgentEntry`] is
//! what a registration is: a `builtin` executor compiled into the hub
//! ([`HubBuilder::builtin`]), a `remote` A2A agent the hub fronts, an
//! `llm` agent: a model behind an OpenAI-compatible endpoint ([`llm`]), or
//! an `mcp` agent: an MCP server's tools as skills ([`mcp`]).
//! Registrations made through the admin API are kept in the store's
//! registry ([`heddle_store::RegistryStore`]) and come back at the next
//! start; the builder's and config's are re-read at every start.
//!
//! With the `grpc` feature (default), [`Hub::grpc_app`] serves every agent
//! over gRPC (v1.0 `lf.a2a.v1` and v0.3 `a2a.v1`) on a listener of its own,
//! the tenant being the agent id; [`HubBuilder::grpc_url`] puts that listener
//! in the cards. v0.3 gRPC requests carry no tenant: they reach the agent
//! named by the `a2a-tenant` metadata, else the default agent (see
//! `heddle_server::grpc`).
//!
//! The hub is built only on the public API of `heddle-server`: each agent is
//! a [`heddle_server::RequestHandler`] with its own card, mounted with
//! [`heddle_server::AgentRoutes`]. The demo agents live in [`agents`].

pub mod admin;
mod agent_limits;
pub mod agents;
pub mod answer_metadata;
mod auth;
mod build;
mod builder;
pub mod config;
mod console;
mod dead_letters;
mod discovery;
mod health;
mod keys;
mod live;
pub mod llm;
pub mod manifest;
pub mod market;
pub mod mcp;
pub mod metrics;
mod outbound;
pub mod registry;
pub mod remote;
pub mod retention;
mod routes;
pub use routes::HubService;

use std::{collections::BTreeMap, sync::Arc};

use axum::Router;
use heddle_core::{VersionSet, v1};
use heddle_server::{
    AgentExecutor, Limits, PushNotifier, RequestHandler, StreamSlots,
    limit::CallerLimits,
    profile::{Endpoints, GrpcEndpoint},
};
use heddle_store::{RegistryStore, StoreError, TaskStore};

pub use admin::AdminAccess;
pub use builder::{BuildError, HubBuilder};
pub use heddle_server::profile::AgentProfile;
pub use live::{LiveAgent, Origin};
pub use metrics::MetricsAccess;
use registry::{AgentEntry, EntryError};

/// One hosted agent.
#[derive(Clone, Debug)]
pub struct HostedAgent {
    /// URL-safe id, the path segment and store scope.
    pub id: String,
    /// Its handler.
    pub handler: RequestHandler,
}

/// Which protocol bindings the hub serves (and so which its cards list).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bindings {
    /// JSON-RPC 2.0 at `…/{agentId}/a2a`, v1.0 and v0.3.
    pub jsonrpc: bool,
    /// HTTP+JSON at `…/{agentId}/rest`: v1.0, and v0.3 under `…/rest/v1/`.
    pub rest: bool,
    /// gRPC, v1.0 and v0.3, on its own listener ([`Hub::grpc_app`]); the
    /// cards list it only when [`HubBuilder::grpc_url`] says where that is.
    pub grpc: bool,
}

impl Default for Bindings {
    fn default() -> Self {
        Self {
            jsonrpc: true,
            rest: true,
            grpc: true,
        }
    }
}

/// Runs on each agent's finished card before it is served (see [`HubBuilder::card_hook`]).
pub type CardHook = Arc<dyn Fn(&str, &mut v1::AgentCard) + Send + Sync>;

/// An executor compiled into the hub, which `builtin` entries name.
#[derive(Clone)]
pub struct Builtin {
    /// Its card, before the hub adds interfaces.
    pub profile: AgentProfile,
    /// What runs its tasks.
    pub executor: Arc<dyn AgentExecutor>,
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("name", &self.profile.name)
            .finish_non_exhaustive()
    }
}

/// Why a registration was refused or could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The entry breaks a rule ([`AgentEntry::check`]).
    #[error("invalid registration: {0}")]
    Invalid(#[from] EntryError),
    /// An a2ahub manifest breaks its schema.
    #[error("the manifest breaks its schema in {} place(s)", .0.len())]
    Manifest(Vec<(String, String)>),
    /// No builtin executor has the name the entry gives.
    #[error("no builtin agent {0:?} in this hub (builtins: {1})")]
    UnknownBuiltin(String, String),
    /// An agent with this id exists already.
    #[error("an agent {0:?} is registered already")]
    Exists(String),
    /// No agent has this id.
    #[error("no agent {0:?} is registered")]
    NotFound(String),
    /// The upstream agent could not be reached or answered badly.
    #[error("upstream agent: {0}")]
    Upstream(String),
    /// An LLM agent cannot be built (its API key's secret is not set).
    #[error("llm agent: {0}")]
    Llm(String),
    /// An MCP agent cannot be built (its server does not start, or lists
    /// no tools).
    #[error("mcp agent: {0}")]
    Mcp(String),
    /// The registry could not be read or written.
    #[error("registry store: {0}")]
    Store(#[from] StoreError),
}

/// How the hub reaches remote agents ([`HubBuilder::remote`]).
#[derive(Clone, Debug, Default)]
pub struct RemoteSettings {
    /// How upstream cards are fetched and checked (`allow_http` comes from
    /// each registration).
    pub fetch: remote::FetchOptions,
    /// Bindings, version, timeouts and TLS for the calls upstream.
    pub options: remote::RemoteOptions,
    /// Where the credentials registrations name are read from (default:
    /// the environment).
    pub secrets: remote::SecretSource,
}

/// What every agent of a hub is built with.
pub(crate) struct Shared {
    pub(crate) public_url: String,
    pub(crate) grpc_url: Option<String>,
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) registry: Option<Arc<dyn RegistryStore>>,
    pub(crate) limits: Limits,
    pub(crate) bindings: Bindings,
    pub(crate) versions: VersionSet,
    pub(crate) auth: Option<heddle_auth::Authenticator>,
    pub(crate) card_hook: Option<CardHook>,
    pub(crate) notifier: Option<PushNotifier>,
    pub(crate) streams: StreamSlots,
    pub(crate) caller_limits: CallerLimits,
    pub(crate) builtins: BTreeMap<String, Builtin>,
    pub(crate) default_agent: Option<String>,
    pub(crate) admin: AdminAccess,
    pub(crate) message_checks: BTreeMap<String, heddle_server::MessageCheck>,
    pub(crate) remote: RemoteSettings,
    pub(crate) live: live::LiveTable,
    /// Counted through the SDK's observer hook; read by `/metrics`.
    pub(crate) metrics: Arc<metrics::HubMetrics>,
    /// Signs the hold tokens priced roots hand down their delegation
    /// chains (`market::hold`).
    pub(crate) hold_key: Arc<market::hold::HoldKey>,
    pub(crate) metrics_access: MetricsAccess,
    /// Told what every agent does, beside `metrics` (`HubBuilder::observer`).
    pub(crate) observer: Option<Arc<dyn heddle_server::Observer>>,
    /// The other replicas, when the hub is one of several
    /// (`HubBuilder::cluster`).
    pub(crate) cluster: Option<Arc<heddle_server::cluster::Cluster>>,
    /// Ends every agent's open streams when the hub stops
    /// ([`Hub::drain_streams`]).
    pub(crate) drain: heddle_server::StreamDrain,
    /// The servers of the mcp agents.
    pub(crate) mcp: mcp::server::Pool,
    /// The web console's sessions, when the console is on
    /// ([`HubBuilder::console`]).
    pub(crate) console: Option<console::Console>,
    /// One registry change at a time: the store write and the table swap
    /// of one change are not interleaved with another's.
    pub(crate) changes: tokio::sync::Mutex<()>,
    #[cfg(feature = "grpc")]
    pub(crate) grpc: heddle_server::grpc::GrpcRouter,
}

impl Shared {
    /// Keeps an API registration in the store, then swaps the agent in. The
    /// caller holds `changes` (or nothing serves the hub yet).
    async fn commit(&self, agent: LiveAgent) -> Result<AgentEntry, RegistryError> {
        if agent.origin == Origin::Api
            && let Some(registry) = &self.registry
        {
            let doc = serde_json::to_string(&agent.entry)
                .map_err(|e| RegistryError::Upstream(e.to_string()))?;
            registry.put_agent(&agent.entry.id, &doc).await?;
        }
        let entry = agent.entry.clone();
        #[cfg(feature = "grpc")]
        if entry.enabled {
            self.grpc.insert(agent.handler.clone());
        } else {
            self.grpc.remove(&entry.id);
        }
        match &agent.mcp {
            Some(server) => self.mcp.keep(&entry.id, server),
            None => self.mcp.remove(&entry.id),
        }
        self.live.insert(agent);
        Ok(entry)
    }

    /// Builds the agent `id` again from its registration, as it is now (an
    /// mcp agent's card after its tools changed), unless it was removed.
    pub(crate) async fn rebuild(&self, id: &str) -> Result<(), RegistryError> {
        let Some(live) = self.live.get(id) else {
            return Ok(());
        };
        let agent = self.build_agent(live.entry.clone(), live.origin).await?;
        let _change = self.changes.lock().await;
        match self.live.get(id) {
            // Replaced meanwhile by a change of its own: that one stands.
            Some(now) if Arc::ptr_eq(&now, &live) => self.commit(agent).await.map(drop),
            _ => Ok(()),
        }
    }
}

/// A server of many agents. Cheap to clone: clones share the registry.
#[derive(Clone)]
pub struct Hub {
    pub(crate) shared: Arc<Shared>,
    push_signer: Option<Arc<heddle_server::push::PushSigner>>,
    /// Extra public keys for `/.well-known/jwks.json` (see [`HubBuilder::publish_keys`]).
    published_keys: Vec<serde_json::Value>,
    #[cfg(feature = "grpc")]
    grpc_routes: Option<tonic::service::Routes>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("public_url", &self.shared.public_url)
            .field("agents", &self.shared.live.len())
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// A builder for a hub reachable at `public_url` (e.g. `http://127.0.0.1:8080`).
    pub fn builder(public_url: impl Into<String>, store: Arc<dyn TaskStore>) -> HubBuilder {
        HubBuilder::new(public_url.into(), store)
    }

    /// The agents served now (enabled or not), by id.
    pub fn agents(&self) -> Vec<HostedAgent> {
        self.shared
            .live
            .all()
            .iter()
            .map(|a| HostedAgent {
                id: a.entry.id.clone(),
                handler: a.handler.clone(),
            })
            .collect()
    }

    /// The agent with `id`.
    pub fn agent(&self, id: &str) -> Option<HostedAgent> {
        self.shared.live.get(id).map(|a| HostedAgent {
            id: a.entry.id.clone(),
            handler: a.handler.clone(),
        })
    }

    /// The registration of the agent `id`.
    pub fn entry(&self, id: &str) -> Option<AgentEntry> {
        self.shared.live.get(id).map(|a| a.entry.clone())
    }

    /// Every registration, by id.
    pub fn entries(&self) -> Vec<AgentEntry> {
        self.shared
            .live
            .all()
            .iter()
            .map(|a| a.entry.clone())
            .collect()
    }

    /// The price of every priced agent, by id.
    pub fn prices(&self) -> std::collections::HashMap<String, market::price::Price> {
        self.shared
            .live
            .all()
            .iter()
            .filter_map(|a| Some((a.entry.id.clone(), a.entry.price().ok()??)))
            .collect()
    }

    /// The names of the builtin executors `builtin` entries may name.
    pub fn builtins(&self) -> Vec<String> {
        self.shared.builtins.keys().cloned().collect()
    }

    /// How many tasks run (or wait for a place to run) now, every agent's
    /// together: a hub that is stopping waits for them before it hands
    /// them over.
    pub fn running_tasks(&self) -> usize {
        self.shared.caller_limits.running()
    }

    /// Ends every agent's open task streams, each with a last event telling
    /// its client to subscribe again ([`heddle_server::RESUBSCRIBE_KEY`]);
    /// streams opened later end so at once. For a server that is stopping:
    /// call it before closing the listeners (`heddle serve` does on
    /// SIGTERM), so clients move to another replica cleanly.
    pub fn drain_streams(&self) {
        self.shared.drain.start();
    }

    /// The hub's public URL.
    pub fn public_url(&self) -> &str {
        &self.shared.public_url
    }

    /// Base URL of an agent.
    pub fn agent_url(public_url: &str, id: &str) -> String {
        format!("{public_url}/api/v1/agents/{id}")
    }

    /// Registers a new agent and serves it from the next request on; kept in
    /// the registry store (when the hub's store has one), so it survives a
    /// restart. Refused if the id is taken.
    pub async fn register(&self, mut entry: AgentEntry) -> Result<AgentEntry, RegistryError> {
        // The hub fills it from the server; one sent in could name tools
        // another server has.
        entry.mcp_tools = None;
        if self.shared.live.get(&entry.id).is_some() {
            return Err(RegistryError::Exists(entry.id));
        }
        // Built before taking the change lock: a remote agent's card fetch
        // holds up no other registration.
        let agent = self.shared.build_agent(entry, Origin::Api).await?;
        let _change = self.shared.changes.lock().await;
        if self.shared.live.get(&agent.entry.id).is_some() {
            return Err(RegistryError::Exists(agent.entry.id));
        }
        self.commit(agent).await
    }

    /// Replaces the registration of an existing agent (same id). Requests in
    /// flight finish on the agent as it was; its tasks are kept.
    pub async fn update(&self, mut entry: AgentEntry) -> Result<AgentEntry, RegistryError> {
        // As for `register`: a list sent back (GET, edit, PUT) may be of
        // the server before the edit.
        entry.mcp_tools = None;
        if self.shared.live.get(&entry.id).is_none() {
            return Err(RegistryError::NotFound(entry.id));
        }
        let agent = self.shared.build_agent(entry, Origin::Api).await?;
        let _change = self.shared.changes.lock().await;
        if self.shared.live.get(&agent.entry.id).is_none() {
            // Removed while this one was being built.
            return Err(RegistryError::NotFound(agent.entry.id));
        }
        self.commit(agent).await
    }

    /// Stops serving the agent `id` and forgets its registration. Its open
    /// streams run to their end; its tasks stay in the store.
    pub async fn remove(&self, id: &str) -> Result<AgentEntry, RegistryError> {
        let _change = self.shared.changes.lock().await;
        if let Some(registry) = &self.shared.registry {
            registry.delete_agent(id).await?;
        }
        let gone = self
            .shared
            .live
            .remove(id)
            .ok_or_else(|| RegistryError::NotFound(id.to_owned()))?;
        #[cfg(feature = "grpc")]
        self.shared.grpc.remove(id);
        self.shared.mcp.remove(id);
        Ok(gone.entry.clone())
    }

    /// Builds the agent `id` anew from its registration: a remote agent's
    /// card is fetched again from its upstream; an mcp agent's tools are
    /// listed again.
    pub async fn refresh(&self, id: &str) -> Result<AgentEntry, RegistryError> {
        let live = self
            .shared
            .live
            .get(id)
            .ok_or_else(|| RegistryError::NotFound(id.to_owned()))?;
        let mut entry = live.entry.clone();
        entry.upstream_card = None;
        entry.mcp_tools = None;
        let agent = self.shared.build_agent(entry, live.origin).await?;
        let _change = self.shared.changes.lock().await;
        match self.shared.live.get(id) {
            None => Err(RegistryError::NotFound(id.to_owned())),
            Some(now) if Arc::ptr_eq(&now, &live) => self.commit(agent).await,
            // Changed while this one was built: the newer change stands.
            Some(now) => Ok(now.entry.clone()),
        }
    }

    /// Builds the agent and serves it (for the builder, before any request).
    pub(crate) async fn put(
        &self,
        entry: AgentEntry,
        origin: Origin,
    ) -> Result<AgentEntry, RegistryError> {
        let agent = self.shared.build_agent(entry, origin).await?;
        self.commit(agent).await
    }

    async fn commit(&self, agent: LiveAgent) -> Result<AgentEntry, RegistryError> {
        self.shared.commit(agent).await
    }

    /// The gRPC services of every agent (tenant = agent id; requests with no
    /// tenant go to the default agent, or the only one), with health and
    /// reflection, to serve on a listener of their own (for example
    /// `axum::serve(listener, routes.into_axum_router())`). `None` when the
    /// gRPC binding is off, and also when the hub has an authenticator: these
    /// are the bare services, so a guarded hub hands them out only through
    /// [`Hub::grpc_app`], which applies it (fail closed).
    #[cfg(feature = "grpc")]
    pub fn grpc_routes(&self) -> Option<tonic::service::Routes> {
        if self.shared.auth.is_some() {
            return None;
        }
        self.grpc_routes.clone()
    }

    /// The gRPC services as an axum router, behind the hub's authenticator
    /// when it has one (health stays public). `None` when gRPC is off.
    #[cfg(feature = "grpc")]
    pub fn grpc_app(&self) -> Option<Router> {
        let app = self.grpc_routes.clone()?.into_axum_router();
        // Inside the authenticator, so the rate is counted per caller.
        let app = self
            .shared
            .caller_limits
            .layer(app, heddle_server::limit::Binding::Grpc);
        Some(match &self.shared.auth {
            Some(auth) => app.layer(auth.layer(heddle_server::Binding::Grpc)),
            None => app,
        })
    }

    /// Every agent behind one [`heddle_server::grpc::GrpcRouter`], for callers
    /// who compose their own gRPC server. It follows the registry: agents
    /// registered or removed later are served or gone there too.
    #[cfg(feature = "grpc")]
    pub fn grpc_router(&self) -> heddle_server::grpc::GrpcRouter {
        self.shared.grpc.clone()
    }

    /// The public keys of `/.well-known/jwks.json`: push deliveries' and any
    /// published (card-signing) keys.
    pub(crate) fn jwks(&self) -> Vec<serde_json::Value> {
        let mut keys = self.published_keys.clone();
        if let Some(signer) = &self.push_signer
            && let Some(push_keys) = signer.jwks().get("keys").and_then(|k| k.as_array())
        {
            keys.extend(push_keys.iter().cloned());
        }
        keys
    }
}

/// The card of an agent hosted at `public_url` with no gRPC address (see
/// [`card_for_endpoints`]).
pub fn card_for(public_url: &str, id: &str, p: &AgentProfile, bindings: Bindings) -> v1::AgentCard {
    card_for_endpoints(public_url, None, id, p, bindings, VersionSet::ALL)
}

/// The card of an agent hosted at `public_url` (HTTP bindings) and
/// `grpc_url` (gRPC, when given), listing each enabled binding
/// ([`heddle_server::profile`] orders them). gRPC interfaces carry the
/// agent id as `tenant`, since one listener serves every agent. Only the
/// versions in `versions` are listed. A profile that names no provider gets
/// Heddle as its provider.
pub fn card_for_endpoints(
    public_url: &str,
    grpc_url: Option<&str>,
    id: &str,
    p: &AgentProfile,
    bindings: Bindings,
    versions: VersionSet,
) -> v1::AgentCard {
    let base = Hub::agent_url(public_url, id);
    let at = Endpoints {
        jsonrpc: bindings.jsonrpc.then(|| format!("{base}/a2a")),
        rest: bindings.rest.then(|| format!("{base}/rest")),
        grpc: grpc_url.filter(|_| bindings.grpc).map(|url| GrpcEndpoint {
            url: url.to_owned(),
            tenant: id.to_owned(),
        }),
        versions,
    };
    let mut card = p.card(&at);
    if card.provider.is_none() {
        card.provider = Some(v1::AgentProvider {
            url: "https://github.com/heddle-a2a/heddle".into(),
            organization: "Heddle".into(),
        });
    }
    card
}
