//! `/metrics`: the hub's figures in the OpenMetrics text format (which
//! Prometheus scrapes), made with the Prometheus org's `prometheus-client`.
//!
//! Almost everything is counted as it happens, through the SDK's public
//! [`Observer`] hook that any server can set
//! ([`heddle_server::HandlerBuilder::observer`],
//! [`heddle_server::PushNotifier::observe`]); a scrape reads no task. The
//! ledger totals are the exception: read at scrape time, one balance query
//! for the funding account and one per priced agent, bounded by a timeout.
//! `docs/hub.md` lists every metric with its labels.

use std::{
    sync::{Arc, OnceLock},
    time::{Duration, SystemTime},
};

use axum::{
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
};
use heddle_core::v1::TaskState;
use heddle_server::{
    Observer,
    observe::{CallEvent, PushEvent, StreamEvent, TaskStateEvent},
};
use heddle_store::Account;
use prometheus_client::{
    encoding::{EncodeLabelSet, text},
    metrics::{
        counter::Counter,
        family::Family,
        gauge::Gauge,
        histogram::{Histogram, exponential_buckets},
    },
    registry::{Registry, Unit},
};

use crate::Hub;

/// The content type of the OpenMetrics text format.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The most a scrape waits for the ledger's balances.
const LEDGER_TIMEOUT: Duration = Duration::from_secs(2);

/// Who may read `/metrics` ([`crate::HubBuilder::metrics_access`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Anyone when the hub has no authenticator; only admins (as for the
    /// admin API) when it has one, since the figures name agents and
    /// their traffic.
    #[default]
    Auto,
    /// Anyone, authenticator or not (a scraper inside a private network).
    Public,
    /// Only admins: the hub's admin token, or a verified caller the hub
    /// lists as an admin or whose token has the admin scope.
    Admin,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    agent: String,
    method: &'static str,
    binding: &'static str,
    version: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    agent: String,
    method: &'static str,
    binding: &'static str,
    version: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabels {
    agent: String,
    method: &'static str,
    binding: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    agent: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PushLabels {
    agent: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CurrencyLabels {
    currency: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EarnedLabels {
    agent: String,
    currency: String,
}

type Latency = Family<CallLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The hub's metrics: the SDK's [`Observer`] of every agent and of push
/// delivery, and the registry `/metrics` encodes.
#[derive(Debug)]
pub(crate) struct HubMetrics {
    registry: Registry,
    /// When counting began: a task that entered its state earlier was not
    /// counted in it (see [`TaskStateEvent::from_since`]).
    started: SystemTime,
    requests: Family<OutcomeLabels, Counter>,
    latency: Latency,
    streams: Family<StreamLabels, Gauge>,
    transitions: Family<StateLabels, Counter>,
    tasks: Family<StateLabels, Gauge>,
    push: Family<PushLabels, Counter>,
    outbox: Gauge,
    upstream_errors: Family<AgentLabels, Counter>,
    funded: Family<CurrencyLabels, Gauge>,
    earned: Family<EarnedLabels, Gauge>,
    /// Each remote agent's last upstream outcome, for discovery.
    upstream_health: std::sync::Mutex<std::collections::HashMap<String, UpstreamHealth>>,
}

/// How a remote agent's last execution went upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UpstreamHealth {
    /// Whether it succeeded.
    pub(crate) ok: bool,
    /// When it ended, in milliseconds since the epoch.
    pub(crate) at_ms: u64,
}

impl HubMetrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("heddle");
        let requests = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "requests",
            "Calls answered by an agent's handler, by agent, method, binding, version and outcome (OK or the error's catalogue reason)",
            requests.clone(),
        );
        let latency: Latency = Family::new_with_constructor(latency_histogram);
        registry.register_with_unit(
            "request_duration",
            "Time from a call reaching the handler to its answer (for a stream: to the stream being ready)",
            Unit::Seconds,
            latency.clone(),
        );
        let streams = Family::<StreamLabels, Gauge>::default();
        registry.register(
            "streams_open",
            "Event streams (SSE or gRPC) open now",
            streams.clone(),
        );
        let transitions = Family::<StateLabels, Counter>::default();
        registry.register(
            "task_transitions",
            "Tasks entering each state (creation counts as entering its first state)",
            transitions.clone(),
        );
        let tasks = Family::<StateLabels, Gauge>::default();
        registry.register(
            "tasks_active",
            "Tasks in each non-terminal state now (of those that entered it since the hub started)",
            tasks.clone(),
        );
        let push = Family::<PushLabels, Counter>::default();
        registry.register(
            "push_deliveries",
            "Push delivery attempts by outcome: delivered, retrying, dead_lettered",
            push.clone(),
        );
        let outbox = Gauge::default();
        registry.register(
            "push_outbox_pending",
            "Push deliveries waiting in the outbox after the worker's last pass",
            outbox.clone(),
        );
        let upstream_errors = Family::<AgentLabels, Counter>::default();
        registry.register(
            "upstream_errors",
            "Remote agents' executions that failed upstream (unreachable, refused, timed out, invalid answer)",
            upstream_errors.clone(),
        );
        let funded = Family::<CurrencyLabels, Gauge>::default();
        registry.register(
            "ledger_funded",
            "Money ever put into wallets by top-ups, in minor units (read from the ledger at scrape time)",
            funded.clone(),
        );
        let earned = Family::<EarnedLabels, Gauge>::default();
        registry.register(
            "ledger_earned",
            "A priced agent's earnings balance, in minor units (read from the ledger at scrape time)",
            earned.clone(),
        );
        Self {
            registry,
            started: SystemTime::now(),
            requests,
            latency,
            streams,
            transitions,
            tasks,
            push,
            outbox,
            upstream_errors,
            funded,
            earned,
            upstream_health: std::sync::Mutex::default(),
        }
    }

    fn health_table(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, UpstreamHealth>> {
        // One insert per change: a poisoned table is whole.
        self.upstream_health
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Notes how a remote agent's execution went upstream.
    pub(crate) fn upstream_outcome(&self, agent: &str, ok: bool) {
        let at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.health_table()
            .insert(agent.to_owned(), UpstreamHealth { ok, at_ms });
    }

    /// A remote agent's last upstream outcome, if it has run.
    pub(crate) fn upstream_health(&self, agent: &str) -> Option<UpstreamHealth> {
        self.health_table().get(agent).copied()
    }

    /// A remote agent's execution failed upstream.
    pub(crate) fn upstream_error(&self, agent: &str) {
        self.upstream_outcome(agent, false);
        self.upstream_errors
            .get_or_create(&AgentLabels {
                agent: agent.to_owned(),
            })
            .inc();
    }

    /// The registry as OpenMetrics text.
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// Reads the ledger's totals: the funding account's balances (minus
    /// what was ever topped up) and each priced agent's earnings.
    async fn read_ledger(&self, hub: &Hub) {
        let Some(ledger) = hub.shared.store.clone().ledger_store() else {
            return;
        };
        let read = async {
            for (currency, balance) in ledger.balances(&Account::Funding).await? {
                self.funded
                    .get_or_create(&CurrencyLabels { currency })
                    .set(balance.saturating_neg());
            }
            for agent in hub.prices().into_keys() {
                let account = Account::Earnings(agent.clone());
                for (currency, balance) in ledger.balances(&account).await? {
                    let labels = EarnedLabels {
                        agent: agent.clone(),
                        currency,
                    };
                    self.earned.get_or_create(&labels).set(balance);
                }
            }
            Ok::<(), heddle_store::StoreError>(())
        };
        match tokio::time::timeout(LEDGER_TIMEOUT, read).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "metrics: cannot read the ledger"),
            Err(_) => tracing::warn!("metrics: the ledger did not answer in time"),
        }
    }
}

fn binding_label(b: Option<heddle_server::Binding>) -> &'static str {
    b.map_or("direct", heddle_server::Binding::as_str)
}

impl Observer for HubMetrics {
    fn call(&self, call: &CallEvent<'_>) {
        let method = call.method.names().v1;
        let binding = binding_label(call.binding);
        let version = call.version.as_str();
        let outcome = match call.outcome {
            Ok(()) => "OK",
            Err(code) => code.spec().reason,
        };
        self.requests
            .get_or_create(&OutcomeLabels {
                agent: call.agent_id.to_owned(),
                method,
                binding,
                version,
                outcome,
            })
            .inc();
        self.latency
            .get_or_create(&CallLabels {
                agent: call.agent_id.to_owned(),
                method,
                binding,
                version,
            })
            .observe(call.elapsed.as_secs_f64());
    }

    fn stream_opened(&self, stream: &StreamEvent<'_>) {
        self.streams.get_or_create(&stream_labels(stream)).inc();
    }

    fn stream_closed(&self, stream: &StreamEvent<'_>, _open_for: Duration) {
        self.streams.get_or_create(&stream_labels(stream)).dec();
    }

    fn task_state(&self, change: &TaskStateEvent<'_>) {
        let agent = change.agent_id;
        let labels = |state: TaskState| StateLabels {
            agent: agent.to_owned(),
            state: state.as_str_name(),
        };
        self.transitions.get_or_create(&labels(change.to)).inc();
        // Out of `from` only if it was counted in: entered since counting began.
        if let (Some(from), Some(since)) = (change.from, change.from_since)
            && !from.is_terminal()
            && since >= self.started
        {
            self.tasks.get_or_create(&labels(from)).dec();
        }
        if !change.to.is_terminal() {
            self.tasks.get_or_create(&labels(change.to)).inc();
        }
    }

    fn push_attempt(&self, attempt: &PushEvent<'_>) {
        self.push
            .get_or_create(&PushLabels {
                agent: attempt.agent_id.to_owned(),
                outcome: attempt.outcome.as_str(),
            })
            .inc();
    }

    fn push_outbox(&self, pending: usize) {
        self.outbox.set(i64::try_from(pending).unwrap_or(i64::MAX));
    }
}

fn stream_labels(stream: &StreamEvent<'_>) -> StreamLabels {
    StreamLabels {
        agent: stream.agent_id.to_owned(),
        method: stream.method.names().v1,
        binding: binding_label(stream.binding),
    }
}

/// `GET /metrics`: the registry as OpenMetrics text, to whoever
/// [`MetricsAccess`] lets read it.
pub(crate) async fn scrape(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    let restricted = match hub.shared.metrics_access {
        MetricsAccess::Public => false,
        MetricsAccess::Admin => true,
        MetricsAccess::Auto => hub.shared.auth.is_some(),
    };
    if restricted && let Err(refused) = crate::admin::admit(&hub, &headers, &uri).await {
        return refused;
    }
    let metrics = hub.shared.metrics.clone();
    metrics.read_ledger(&hub).await;
    match metrics.encode() {
        Ok(body) => (
            [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
            body,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The metrics as an observer for push delivery, shared by every agent.
pub(crate) fn observer(metrics: &Arc<HubMetrics>) -> Arc<dyn Observer> {
    metrics.clone()
}

/// The metrics as the observer of the agent `agent`'s handler.
pub(crate) fn agent_observer(metrics: &Arc<HubMetrics>, agent: &str) -> Arc<dyn Observer> {
    Arc::new(AgentMetrics::new(metrics.clone(), agent))
}

/// Binding slots: the three bindings, and calls made on the handler directly.
const BINDING_SLOTS: usize = 4;
/// Version slots: v0.3 and v1.0.
const VERSION_SLOTS: usize = 2;
/// Every `TaskState` value (0 to 8).
const STATE_SLOTS: usize = 9;

/// One agent's metrics, the [`Observer`] its handler is given: the handles
/// of its answered calls and its state changes are looked up once and kept,
/// so counting one costs atomic adds, not a label set allocated and looked
/// up in its family each time (the cost is measured in
/// `bench/results/2026-12-03-metrics-cache-short.md`). Failed calls,
/// streams and push go through the families, as they are rarer.
struct AgentMetrics {
    hub: Arc<HubMetrics>,
    agent: String,
    /// OK calls: the request counter and the latency histogram, per method,
    /// binding slot and version slot.
    ok_calls: Box<[OnceLock<(Counter, Histogram)>]>,
    /// `task_transitions` per state.
    transitions: [OnceLock<Counter>; STATE_SLOTS],
    /// `tasks_active` per state.
    active: [OnceLock<Gauge>; STATE_SLOTS],
}

impl AgentMetrics {
    fn new(hub: Arc<HubMetrics>, agent: &str) -> Self {
        let slots = heddle_core::method::METHODS.len() * BINDING_SLOTS * VERSION_SLOTS;
        Self {
            hub,
            agent: agent.to_owned(),
            ok_calls: (0..slots).map(|_| OnceLock::new()).collect(),
            transitions: std::array::from_fn(|_| OnceLock::new()),
            active: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    fn call_slot(call: &CallEvent<'_>) -> usize {
        let binding = match call.binding {
            None => 0,
            Some(heddle_server::Binding::JsonRpc) => 1,
            Some(heddle_server::Binding::Rest) => 2,
            Some(heddle_server::Binding::Grpc) => 3,
        };
        let version = match call.version {
            heddle_core::ProtocolVersion::V0_3 => 0,
            heddle_core::ProtocolVersion::V1_0 => 1,
        };
        // A fieldless enum's discriminant: one per row of the method table.
        ((call.method as usize) * BINDING_SLOTS + binding) * VERSION_SLOTS + version
    }

    fn state_labels(&self, state: TaskState) -> StateLabels {
        StateLabels {
            agent: self.agent.clone(),
            state: state.as_str_name(),
        }
    }

    fn transitions(&self, state: TaskState) -> Option<&Counter> {
        let slot = self
            .transitions
            .get(usize::try_from(i32::from(state)).ok()?)?;
        Some(slot.get_or_init(|| {
            self.hub
                .transitions
                .get_or_create(&self.state_labels(state))
                .clone()
        }))
    }

    fn active(&self, state: TaskState) -> Option<&Gauge> {
        let slot = self.active.get(usize::try_from(i32::from(state)).ok()?)?;
        Some(slot.get_or_init(|| {
            self.hub
                .tasks
                .get_or_create(&self.state_labels(state))
                .clone()
        }))
    }
}

impl Observer for AgentMetrics {
    fn call(&self, call: &CallEvent<'_>) {
        let slot = match call.outcome {
            Ok(()) => self.ok_calls.get(Self::call_slot(call)),
            Err(_) => None,
        };
        let Some(slot) = slot else {
            return self.hub.call(call);
        };
        let (requests, latency) = slot.get_or_init(|| {
            let (method, binding, version) = (
                call.method.names().v1,
                binding_label(call.binding),
                call.version.as_str(),
            );
            let requests = self.hub.requests.get_or_create(&OutcomeLabels {
                agent: self.agent.clone(),
                method,
                binding,
                version,
                outcome: "OK",
            });
            let latency = self.hub.latency.get_or_create(&CallLabels {
                agent: self.agent.clone(),
                method,
                binding,
                version,
            });
            (requests.clone(), latency.clone())
        });
        requests.inc();
        latency.observe(call.elapsed.as_secs_f64());
    }

    fn stream_opened(&self, stream: &StreamEvent<'_>) {
        self.hub.stream_opened(stream);
    }

    fn stream_closed(&self, stream: &StreamEvent<'_>, open_for: Duration) {
        self.hub.stream_closed(stream, open_for);
    }

    fn task_state(&self, change: &TaskStateEvent<'_>) {
        if let Some(c) = self.transitions(change.to) {
            c.inc();
        }
        // Out of `from` only if it was counted in: entered since counting began.
        if let (Some(from), Some(since)) = (change.from, change.from_since)
            && !from.is_terminal()
            && since >= self.hub.started
            && let Some(g) = self.active(from)
        {
            g.dec();
        }
        if !change.to.is_terminal()
            && let Some(g) = self.active(change.to)
        {
            g.inc();
        }
    }

    fn push_attempt(&self, attempt: &PushEvent<'_>) {
        self.hub.push_attempt(attempt);
    }

    fn push_outbox(&self, pending: usize) {
        self.hub.push_outbox(pending);
    }
}
