//! # heddle-hub
//!
//! One server, many agents, laid out as hosted A2A platforms do:
//!
//! ```text
//! GET  /api/v1/agents                                   the agents and their card URLs
//! GET  /api/v1/agents/{agentId}/.well-known/agent-card.json   (and agent.json)
//! POST /api/v1/agents/{agentId}/a2a                     JSON-RPC 2.0 (+ SSE)
//! GET  /.well-known/agent-card.json                     the default agent's card
//! ```
//!
//! With the `grpc` feature (default), [`Hub::grpc_routes`] gives every agent
//! over gRPC (v1.0 `lf.a2a.v1` and v0.3 `a2a.v1`) for a listener of its own,
//! the tenant being the agent id; [`HubBuilder::grpc_url`] puts that listener
//! in the cards. v0.3 gRPC requests carry no tenant: they reach the agent named
//! by the `a2a-tenant` metadata, else the default agent (see
//! `heddle_server::grpc`).
//!
//! The hub is built only on the public API of `heddle-server`: each agent is
//! a [`heddle_server::RequestHandler`] with its own card, mounted with
//! [`heddle_server::AgentRoutes`]. The demo agents live in [`agents`].

pub mod agents;
mod auth;
pub mod remote;

use std::sync::Arc;

use axum::{Json, Router, routing::get};
use heddle_core::{VersionSet, v1};
use heddle_server::{
    AgentExecutor, AgentRoutes, Limits, RequestHandler, card_router, lenient_paths,
    limit::CallerLimits,
    profile::{Endpoints, GrpcEndpoint},
    push::PushError,
};
use heddle_store::TaskStore;
use serde_json::json;

pub use heddle_server::profile::AgentProfile;

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
    /// gRPC, v1.0 and v0.3, on its own listener ([`Hub::grpc_routes`]); the
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

/// A server of many agents.
#[derive(Clone, Debug)]
pub struct Hub {
    public_url: String,
    agents: Vec<HostedAgent>,
    default_agent: Option<String>,
    bindings: Bindings,
    push_signer: Option<Arc<heddle_server::push::PushSigner>>,
    /// Extra public keys for `/.well-known/jwks.json` (see [`HubBuilder::publish_keys`]).
    published_keys: Vec<serde_json::Value>,
    #[cfg(feature = "grpc")]
    grpc: Option<tonic::service::Routes>,
    auth: Option<heddle_auth::Authenticator>,
    caller_limits: CallerLimits,
}

/// An agent added to a [`HubBuilder`], made into a handler at build time so
/// its card lists whatever bindings and URLs the builder ends up with.
struct PendingAgent {
    id: String,
    profile: AgentProfile,
    executor: Arc<dyn AgentExecutor>,
}

/// Builds a [`Hub`].
pub struct HubBuilder {
    public_url: String,
    grpc_url: Option<String>,
    store: Arc<dyn TaskStore>,
    limits: Limits,
    agents: Vec<PendingAgent>,
    default_agent: Option<String>,
    bindings: Bindings,
    versions: VersionSet,
    auth: Option<heddle_auth::Authenticator>,
    card_hook: Option<CardHook>,
    push: Option<heddle_server::PushOptions>,
    published_keys: Vec<serde_json::Value>,
    caller_limits: CallerLimits,
}

/// Runs on each agent's finished card before it is served (see [`HubBuilder::card_hook`]).
pub type CardHook = Arc<dyn Fn(&str, &mut v1::AgentCard) + Send + Sync>;

impl Hub {
    /// A builder for a hub reachable at `public_url` (e.g. `http://127.0.0.1:8080`).
    pub fn builder(public_url: impl Into<String>, store: Arc<dyn TaskStore>) -> HubBuilder {
        HubBuilder {
            public_url: public_url.into().trim_end_matches('/').to_owned(),
            grpc_url: None,
            store,
            limits: Limits::default(),
            agents: Vec::new(),
            default_agent: None,
            bindings: Bindings::default(),
            versions: VersionSet::ALL,
            auth: None,
            card_hook: None,
            push: None,
            published_keys: Vec::new(),
            caller_limits: CallerLimits::unlimited(),
        }
    }

    /// The hosted agents.
    pub fn agents(&self) -> &[HostedAgent] {
        &self.agents
    }

    /// The agent with `id`.
    pub fn agent(&self, id: &str) -> Option<&HostedAgent> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// Base URL of an agent.
    pub fn agent_url(public_url: &str, id: &str) -> String {
        format!("{public_url}/api/v1/agents/{id}")
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
        if self.auth.is_some() {
            return None;
        }
        self.grpc.clone()
    }

    /// The gRPC services as an axum router, behind the hub's authenticator
    /// when it has one (health stays public). `None` when gRPC is off.
    #[cfg(feature = "grpc")]
    pub fn grpc_app(&self) -> Option<Router> {
        let app = self.grpc.clone()?.into_axum_router();
        // Inside the authenticator, so the rate is counted per caller.
        let app = self
            .caller_limits
            .layer(app, heddle_server::limit::Binding::Grpc);
        Some(match &self.auth {
            Some(auth) => app.layer(auth.layer(heddle_server::Binding::Grpc)),
            None => app,
        })
    }

    /// Every agent behind one [`heddle_server::grpc::GrpcRouter`], for callers
    /// who compose their own gRPC server.
    #[cfg(feature = "grpc")]
    pub fn grpc_router(&self) -> heddle_server::grpc::GrpcRouter {
        let mut router = heddle_server::grpc::GrpcRouter::new();
        for a in &self.agents {
            router = router.agent(a.handler.clone());
        }
        match &self.default_agent {
            Some(id) => router.default_agent(id.clone()),
            None => router,
        }
    }

    /// The hub's routes. A path with a trailing or doubled slash reaches
    /// the same route ([`heddle_server::lenient_paths`]).
    pub fn router(&self) -> Router {
        let listing: Vec<serde_json::Value> = self
            .agents
            .iter()
            .map(|a| {
                let base = Self::agent_url(&self.public_url, &a.id);
                json!({
                    "id": a.id,
                    "name": a.handler.card().name,
                    "description": a.handler.card().description,
                    "cardUrl": format!("{base}/.well-known/agent-card.json"),
                    "url": format!("{base}/a2a"),
                })
            })
            .collect();
        let listing = Arc::new(json!({ "agents": listing }));
        let mut router = Router::new();
        for a in &self.agents {
            let mut routes =
                AgentRoutes::new(a.handler.clone()).under(format!("/api/v1/agents/{}", a.id));
            routes = if self.bindings.jsonrpc {
                routes.jsonrpc_at("/a2a")
            } else {
                routes.without_jsonrpc()
            };
            if self.bindings.rest {
                routes = routes.rest_at("/rest");
            }
            if let Some(auth) = &self.auth {
                // Each binding behind the authenticator, which answers in
                // that binding's error form; the cards stay public.
                let auth = auth.clone();
                routes = routes.around_bindings(move |binding, r| r.layer(auth.layer(binding)));
            }
            router = router.merge(routes.router());
        }
        if let Some(default) = self.default_agent.as_deref().and_then(|id| self.agent(id)) {
            // The root serves the default agent's card; its interfaces stay absolute.
            router = router.merge(card_router(default.handler.card()));
        }
        let router = router.route(
            "/api/v1/agents",
            get(move || async move { Json((*listing).clone()) }),
        );
        // One public JWKS for every key this server signs with: push
        // deliveries' and any published (card-signing) keys.
        let mut keys = self.published_keys.clone();
        if let Some(signer) = &self.push_signer
            && let Some(push_keys) = signer.jwks().get("keys").and_then(|k| k.as_array())
        {
            keys.extend(push_keys.iter().cloned());
        }
        let ids: Arc<Vec<String>> = Arc::new(self.agents.iter().map(|a| a.id.clone()).collect());
        let router = router.fallback(move |uri: axum::http::Uri| {
            let ids = ids.clone();
            async move { not_found(&ids, uri.path()) }
        });
        if keys.is_empty() {
            return lenient_paths(router);
        }
        let jwks = Arc::new(json!({ "keys": keys }));
        lenient_paths(router.route(
            "/.well-known/jwks.json",
            get(move || async move { Json((*jwks).clone()) }),
        ))
    }
}

/// The JSON answer to a path no route takes: which agent is unknown, or
/// that the agent has no such endpoint.
fn not_found(ids: &[String], path: &str) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let message = match path
        .strip_prefix("/api/v1/agents/")
        .and_then(|rest| rest.split('/').next())
    {
        Some(id) if !ids.iter().any(|known| known == id) => {
            format!(
                "no agent {:?} on this hub (GET /api/v1/agents lists them)",
                shorten(id)
            )
        }
        Some(id) => format!(
            "agent {id:?} has no endpoint at {:?}: JSON-RPC is POST …/a2a, REST under …/rest, the card at …/.well-known/agent-card.json",
            shorten(path)
        ),
        None => format!(
            "nothing at {:?} (the agents are under /api/v1/agents)",
            shorten(path)
        ),
    };
    (
        axum::http::StatusCode::NOT_FOUND,
        Json(json!({ "error": { "code": 404, "status": "NOT_FOUND", "message": message } })),
    )
        .into_response()
}

/// At most 120 characters of a caller's path, for an error message.
fn shorten(s: &str) -> &str {
    match s.char_indices().nth(120) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl HubBuilder {
    /// Per-caller request rate and running-task limits, for the hub as a
    /// whole (default: none).
    #[must_use]
    pub fn caller_limits(mut self, limits: CallerLimits) -> Self {
        self.caller_limits = limits;
        self
    }

    /// Limits applied to every agent.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The bindings to serve; the cards list them.
    #[must_use]
    pub fn bindings(mut self, bindings: Bindings) -> Self {
        self.bindings = bindings;
        self
    }

    /// The protocol versions to serve (default: 1.0 and 0.3). The cards list
    /// interfaces of these versions only, so with 1.0 alone they are strict
    /// v1.0 cards (no v0.3 members), and a call in another version is
    /// VersionNotSupported on every binding.
    #[must_use]
    pub fn card_versions(mut self, versions: VersionSet) -> Self {
        self.versions = versions;
        self
    }

    /// Where callers reach the gRPC listener, `host:port` (or
    /// `http://host:port`). The gRPC address is not the HTTP public URL, so
    /// without this the cards list no gRPC interface.
    #[must_use]
    pub fn grpc_url(mut self, url: impl Into<String>) -> Self {
        self.grpc_url = Some(url.into());
        self
    }

    /// The agent whose card the root well-known path serves.
    #[must_use]
    pub fn default_agent(mut self, id: impl Into<String>) -> Self {
        self.default_agent = Some(id.into());
        self
    }

    /// Guards every agent (HTTP and gRPC) with `auth`: calls without a valid
    /// credential are refused, each card declares the accepted schemes, and
    /// authenticated callers get an extended card.
    #[must_use]
    pub fn authenticator(mut self, auth: heddle_auth::Authenticator) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Runs `hook(agent_id, card)` on each agent's card once its interfaces
    /// are set, before anything serves it: to sign it, for example
    /// (`heddle_signing::CardSigner::sign`). With an authenticator it runs on
    /// the extended card too.
    #[must_use]
    pub fn card_hook(mut self, hook: CardHook) -> Self {
        self.card_hook = Some(hook);
        self
    }

    /// Public keys (JWKs) to publish at `/.well-known/jwks.json` beside the
    /// push-delivery key: a card-signing key, for example, so one JWKS
    /// serves every key this server signs with.
    #[must_use]
    pub fn publish_keys(mut self, keys: impl IntoIterator<Item = serde_json::Value>) -> Self {
        self.published_keys.extend(keys);
        self
    }

    /// Delivers push notifications with these options: every agent's card
    /// declares `capabilities.pushNotifications`, and the delivery worker
    /// starts with the hub (picking up deliveries a previous process left).
    /// Configs and deliveries are kept in the hub's store, which must keep
    /// them (`TaskStore::push_store`; memory and SQLite do), or
    /// [`try_build`](Self::try_build) fails.
    #[must_use]
    pub fn push(mut self, opts: heddle_server::PushOptions) -> Self {
        self.push = Some(opts);
        self
    }

    /// Adds an agent; at build time its card gets the hub's interface URLs.
    #[must_use]
    pub fn agent(
        mut self,
        id: &str,
        profile: AgentProfile,
        executor: Arc<dyn AgentExecutor>,
    ) -> Self {
        self.agents.push(PendingAgent {
            id: id.to_owned(),
            profile,
            executor,
        });
        self
    }

    /// Finishes the hub. Fails tasks a previous process left running (once, for the shared store).
    ///
    /// # Panics
    /// Never for the demo setup; see [`try_build`](Self::try_build) for the error.
    pub async fn build(self) -> Hub {
        match self.try_build().await {
            Ok(hub) => hub,
            Err(e) => panic!("cannot build the hub: {e}"),
        }
    }

    /// [`build`](Self::build), reporting a push notifier that cannot start.
    pub async fn try_build(self) -> Result<Hub, PushError> {
        let streams = heddle_server::StreamSlots::new(
            self.limits.max_streams,
            self.limits.max_streams_per_caller,
        );
        let notifier = self
            .push
            .clone()
            .map(|opts| {
                let store = self.store.clone().push_store();
                heddle_server::PushNotifier::new(store.ok_or(PushError::NoStore)?, opts)
            })
            .transpose()?;
        let grpc_url = self.grpc_url.as_deref();
        let agents: Vec<HostedAgent> = self
            .agents
            .into_iter()
            .map(|a| {
                let card = card_for_endpoints(
                    &self.public_url,
                    grpc_url,
                    &a.id,
                    &a.profile,
                    self.bindings,
                    self.versions,
                );
                let (mut card, mut extended) = match &self.auth {
                    Some(auth) => {
                        let (card, extended) = auth::secured_cards(auth, card);
                        (card, Some(extended))
                    }
                    None => (card, None),
                };
                // The extended card is served like the public one: same
                // capabilities, and signed by the same hook.
                for served in std::iter::once(&mut card).chain(extended.as_mut()) {
                    if notifier.is_some()
                        && let Some(caps) = served.capabilities.as_mut()
                    {
                        caps.push_notifications = Some(true);
                    }
                    // Last: a signature covers the card exactly as served.
                    if let Some(hook) = &self.card_hook {
                        hook(&a.id, served);
                    }
                }
                let mut handler =
                    RequestHandler::builder(a.id.clone(), card, a.executor, self.store.clone())
                        .limits(self.limits.clone())
                        // `max_streams` and the caller limits hold for the
                        // hub, not for each agent.
                        .stream_slots(streams.clone())
                        .caller_limits(self.caller_limits.clone())
                        .versions(self.versions);
                if let Some(extended) = extended {
                    handler = handler.extended_card(extended);
                }
                if let Some(n) = &notifier {
                    handler = handler.push(n.clone());
                }
                HostedAgent {
                    id: a.id,
                    handler: handler.build(),
                }
            })
            .collect();
        if let Some(first) = agents.first() {
            match first.handler.recover().await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    tasks = n,
                    "marked tasks interrupted by the last shutdown as FAILED"
                ),
                Err(e) => tracing::error!(error = %e, "could not recover interrupted tasks"),
            }
        }
        // The worker runs as long as the runtime does (the router, not the
        // hub, is what a server keeps).
        if let Some(n) = &notifier {
            drop(n.start().await?);
        }
        #[allow(unused_mut)] // assigned only with the grpc feature
        let mut hub = Hub {
            public_url: self.public_url,
            agents,
            default_agent: self.default_agent,
            bindings: self.bindings,
            push_signer: self.push.as_ref().and_then(|p| p.signer.clone()),
            published_keys: self.published_keys,
            #[cfg(feature = "grpc")]
            grpc: None,
            auth: self.auth,
            caller_limits: self.caller_limits,
        };
        #[cfg(feature = "grpc")]
        if hub.bindings.grpc {
            hub.grpc = Some(hub.grpc_router().routes().await);
        }
        Ok(hub)
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
