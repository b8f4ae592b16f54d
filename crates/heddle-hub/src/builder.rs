//! [`HubBuilder`]: the settings every agent of a hub shares, the builtin
//! executors, and the registrations to serve from the start.

use std::{collections::BTreeMap, sync::Arc};

use heddle_core::VersionSet;
use heddle_server::{AgentExecutor, Limits, limit::CallerLimits, push::PushError};
use heddle_store::TaskStore;

use crate::{
    AdminAccess, AgentProfile, Bindings, Builtin, CardHook, Hub, Origin, RegistryError,
    RemoteSettings, Shared, live::LiveTable, registry::AgentEntry,
};

/// Builds a [`Hub`].
pub struct HubBuilder {
    public_url: String,
    grpc_url: Option<String>,
    store: Arc<dyn TaskStore>,
    limits: Limits,
    builtins: BTreeMap<String, Builtin>,
    entries: Vec<AgentEntry>,
    default_agent: Option<String>,
    bindings: Bindings,
    versions: VersionSet,
    auth: Option<heddle_auth::Authenticator>,
    card_hook: Option<CardHook>,
    push: Option<heddle_server::PushOptions>,
    published_keys: Vec<serde_json::Value>,
    caller_limits: CallerLimits,
    admin: AdminAccess,
    keep_registrations: bool,
    message_checks: BTreeMap<String, heddle_server::MessageCheck>,
    remote: RemoteSettings,
    metrics_access: crate::MetricsAccess,
    observer: Option<Arc<dyn heddle_server::Observer>>,
    cluster: Option<Arc<heddle_server::cluster::Cluster>>,
    retention: crate::retention::Retention,
    console: bool,
}

/// Why a hub could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The push notifier could not start.
    #[error(transparent)]
    Push(#[from] PushError),
    /// A registration of the builder or config was refused.
    #[error("agent {id:?}: {error}")]
    Agent {
        /// The agent id.
        id: String,
        /// Why.
        error: RegistryError,
    },
    /// The system gave no randomness for the key of hold tokens.
    #[error("cannot make the hub's hold key: the system gave no randomness")]
    HoldKey,
}

impl HubBuilder {
    pub(crate) fn new(public_url: String, store: Arc<dyn TaskStore>) -> Self {
        Self {
            public_url: public_url.trim_end_matches('/').to_owned(),
            grpc_url: None,
            store,
            limits: Limits::default(),
            builtins: BTreeMap::new(),
            entries: Vec::new(),
            default_agent: None,
            bindings: Bindings::default(),
            versions: VersionSet::ALL,
            auth: None,
            card_hook: None,
            push: None,
            published_keys: Vec::new(),
            caller_limits: CallerLimits::unlimited(),
            admin: AdminAccess::default(),
            keep_registrations: true,
            message_checks: BTreeMap::new(),
            remote: RemoteSettings {
                secrets: crate::remote::SecretSource::environment(),
                ..RemoteSettings::default()
            },
            metrics_access: crate::MetricsAccess::default(),
            observer: None,
            cluster: None,
            retention: crate::retention::Retention::default(),
            console: true,
        }
    }

    /// Whether the hub serves its web console at `/console` (default: yes).
    /// The console holds no data of its own; off, the hub also ignores its
    /// session cookies.
    #[must_use]
    pub fn console(mut self, on: bool) -> Self {
        self.console = on;
        self
    }

    /// Per-caller request rate and running-task limits, for the hub as a
    /// whole (default: none).
    #[must_use]
    pub fn caller_limits(mut self, limits: CallerLimits) -> Self {
        self.caller_limits = limits;
        self
    }

    /// Limits applied to every agent (an entry may only tighten them).
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

    /// Who may use the admin API (default: nobody).
    #[must_use]
    pub fn admin(mut self, admin: AdminAccess) -> Self {
        self.admin = admin;
        self
    }

    /// Who may read `/metrics` (default [`crate::MetricsAccess::Auto`]:
    /// anyone without an authenticator, admins only with one).
    #[must_use]
    pub fn metrics_access(mut self, access: crate::MetricsAccess) -> Self {
        self.metrics_access = access;
        self
    }

    /// Tells `observer` too what every agent and the push worker do, beside
    /// the hub's own `/metrics` (an exporter of OpenTelemetry metrics, such
    /// as [`heddle_server::observe::OtelMetrics`]).
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn heddle_server::Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Makes the hub one replica of several sharing its store (PostgreSQL):
    /// every agent's task events go to the other replicas over the
    /// cluster's bus, streams resume on any replica, cancels reach the
    /// replica running the task, and with leases a dead replica's tasks end
    /// FAILED (see [`heddle_server::cluster`]). The caller starts the
    /// cluster's loops ([`Cluster::start`](heddle_server::cluster::Cluster::start)).
    #[must_use]
    pub fn cluster(mut self, cluster: Arc<heddle_server::cluster::Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Whether registrations made through the admin API are kept in the
    /// store and served again at the next start (default: yes, when the
    /// store keeps a registry).
    #[must_use]
    pub fn keep_registrations(mut self, keep: bool) -> Self {
        self.keep_registrations = keep;
        self
    }

    /// Runs `hook(agent_id, card)` on each agent's card once its interfaces
    /// are set, before anything serves it: to sign it, for example
    /// (`heddle_signing::CardSigner::sign`). With an authenticator it runs on
    /// the extended card too. Agents registered later go through it too.
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

    /// How long ended tasks and their push configs are kept (default:
    /// tasks for good, push configs a week after their task ended; see
    /// [`Retention`](crate::retention::Retention)). Every replica of a
    /// cluster may run it: a deletion is idempotent.
    #[must_use]
    pub fn retention(mut self, retention: crate::retention::Retention) -> Self {
        self.retention = retention;
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

    /// Makes the executor `name` available to `builtin` registrations,
    /// without serving it: a registration (config or admin API) names it.
    #[must_use]
    pub fn builtin(
        mut self,
        name: &str,
        profile: AgentProfile,
        executor: Arc<dyn AgentExecutor>,
    ) -> Self {
        self.builtins
            .insert(name.to_owned(), Builtin { profile, executor });
        self
    }

    /// Runs `check` on every message sent to the agent `id`, on every
    /// binding and version, before a task is made for it. An agent
    /// registered from a manifest with an `input_schema` gets that schema's
    /// check ([`crate::manifest::InputCheck`]) without this.
    #[must_use]
    pub fn message_check(mut self, id: &str, check: heddle_server::MessageCheck) -> Self {
        self.message_checks.insert(id.to_owned(), check);
        self
    }

    /// How remote agents are fetched and called, and where their
    /// credentials come from.
    #[must_use]
    pub fn remote(mut self, settings: RemoteSettings) -> Self {
        self.remote = settings;
        self
    }

    /// Serves `entry` from the start (a `[[agents]]` table of the config,
    /// for example). Re-read at every start, not kept in the store.
    #[must_use]
    pub fn entry(mut self, entry: AgentEntry) -> Self {
        self.entries.retain(|e| e.id != entry.id);
        self.entries.push(entry);
        self
    }

    /// Adds the executor as a builtin named `id` and serves it as `id`; at
    /// build time its card gets the hub's interface URLs.
    #[must_use]
    pub fn agent(self, id: &str, profile: AgentProfile, executor: Arc<dyn AgentExecutor>) -> Self {
        self.builtin(id, profile, executor)
            .entry(AgentEntry::builtin(id, id))
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

    /// [`build`](Self::build), reporting a push notifier that cannot start
    /// or a registration of the builder that is refused. A registration the
    /// store kept that can no longer be served (its builtin is gone, say) is
    /// logged and skipped, not fatal: the hub still starts.
    pub async fn try_build(self) -> Result<Hub, BuildError> {
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
        let hold_key =
            Arc::new(crate::market::hold::HoldKey::random().map_err(|_| BuildError::HoldKey)?);
        let metrics = Arc::new(crate::metrics::HubMetrics::new());
        if let Some(n) = &notifier {
            let hub = crate::metrics::observer(&metrics);
            n.observe(match &self.observer {
                Some(extra) => Arc::new(heddle_server::observe::Both(hub, extra.clone())),
                None => hub,
            });
        }
        let registry = if self.keep_registrations {
            self.store.clone().registry_store()
        } else {
            None
        };
        // With leases, the store's running tasks may be other replicas':
        // the lease reaper ends a dead one's instead.
        let leased = self.cluster.as_ref().is_some_and(|c| c.leases_tasks());
        let recovered = if leased {
            Ok(0)
        } else {
            self.store
                .fail_interrupted(
                    "the server restarted while this task was running; send the request again",
                )
                .await
        };
        match recovered {
            Ok(0) => {}
            Ok(n) => tracing::warn!(
                tasks = n,
                "marked tasks interrupted by the last shutdown as FAILED"
            ),
            Err(e) => tracing::error!(error = %e, "could not recover interrupted tasks"),
        }
        let console = self
            .console
            .then(|| crate::console::Console::new(&self.public_url));
        let shared = Shared {
            public_url: self.public_url,
            grpc_url: self.grpc_url,
            store: self.store,
            registry,
            limits: self.limits,
            bindings: self.bindings,
            versions: self.versions,
            auth: self.auth,
            card_hook: self.card_hook,
            notifier,
            streams,
            caller_limits: self.caller_limits,
            builtins: self.builtins,
            default_agent: self.default_agent,
            admin: self.admin,
            message_checks: self.message_checks,
            remote: self.remote,
            live: LiveTable::default(),
            metrics,
            hold_key,
            metrics_access: self.metrics_access,
            observer: self.observer,
            cluster: self.cluster,
            drain: heddle_server::StreamDrain::new(),
            mcp: crate::mcp::server::Pool::default(),
            console,
            changes: tokio::sync::Mutex::new(()),
            #[cfg(feature = "grpc")]
            grpc: heddle_server::grpc::GrpcRouter::new(),
        };
        #[cfg(feature = "grpc")]
        let shared = match &shared.default_agent {
            Some(id) => Shared {
                grpc: shared.grpc.clone().default_agent(id.clone()),
                ..shared
            },
            None => shared,
        };
        #[allow(unused_mut)] // assigned only with the grpc feature
        let mut hub = Hub {
            shared: Arc::new(shared),
            push_signer: self.push.as_ref().and_then(|p| p.signer.clone()),
            published_keys: self.published_keys,
            #[cfg(feature = "grpc")]
            grpc_routes: None,
        };
        for entry in self.entries {
            let id = entry.id.clone();
            hub.put(entry, Origin::Config)
                .await
                .map_err(|error| BuildError::Agent { id, error })?;
        }
        hub.load_kept().await;
        if let Some(ledger) = hub.shared.store.clone().ledger_store() {
            crate::market::recover::at_start(ledger, hub.shared.store.clone(), hub.prices()).await;
        }
        // The worker runs as long as the runtime does (the router, not the
        // hub, is what a server keeps).
        if let Some(n) = &hub.shared.notifier {
            drop(n.start().await?);
        }
        #[cfg(feature = "grpc")]
        if hub.shared.bindings.grpc {
            hub.grpc_routes = Some(hub.shared.grpc.routes().await);
        }
        hub.follow_tool_changes();
        if self.retention.is_on() {
            self.retention.spawn(Arc::downgrade(&hub.shared));
        }
        Ok(hub)
    }
}

impl Hub {
    /// Rebuilds the card of an mcp agent whose server says its tools
    /// changed. The task ends with the hub (it holds no strong reference).
    fn follow_tool_changes(&self) {
        let taken = self
            .shared
            .mcp
            .changes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(mut changes) = taken else { return };
        let shared = Arc::downgrade(&self.shared);
        tokio::spawn(async move {
            while let Some(id) = changes.recv().await {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if let Err(e) = shared.rebuild(&id).await {
                    tracing::warn!(agent = %id, error = %e, "the card was not rebuilt after a tool change");
                }
            }
        });
    }

    /// Serves the registrations the store kept from earlier runs (they
    /// replace config entries of the same id: the admin changed those).
    async fn load_kept(&self) {
        let Some(registry) = self.shared.registry.clone() else {
            return;
        };
        let records = match registry.agents().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "could not read the kept registrations");
                return;
            }
        };
        for record in records {
            let entry = match serde_json::from_str::<AgentEntry>(&record.document) {
                Ok(e) if e.id == record.id => e,
                Ok(_) | Err(_) => {
                    tracing::error!(agent = %record.id, "skipping an unreadable kept registration");
                    continue;
                }
            };
            let kind = entry.kind;
            // Built, not re-put: the store has it already.
            match self.shared.build_agent(entry, Origin::Api).await {
                Ok(agent) => {
                    if let Some(server) = &agent.mcp {
                        self.shared.mcp.keep(&agent.entry.id, server);
                    }
                    // It may replace a config entry of the same id that
                    // gRPC serves already: a disabled one must leave it.
                    #[cfg(feature = "grpc")]
                    if agent.entry.enabled {
                        self.shared.grpc.insert(agent.handler.clone());
                    } else {
                        self.shared.grpc.remove(&agent.entry.id);
                    }
                    self.shared.live.insert(agent);
                }
                Err(e) => tracing::error!(
                    agent = %record.id,
                    kind = kind.as_str(),
                    error = %e,
                    "skipping a kept registration that cannot be served"
                ),
            }
        }
    }
}
