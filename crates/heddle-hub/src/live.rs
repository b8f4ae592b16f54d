//! The agents the hub serves right now, looked up per request.
//!
//! Each [`LiveAgent`] is built whole (card, handler, routes) before it is put
//! in the table, and a change swaps one entry under a short write lock, so a
//! request sees an agent either as it was or as it is, never half made.
//! Requests in flight keep the `Arc` of the agent they started with: a
//! removed agent's open streams run to their end.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard},
};

use axum::Router;
use heddle_server::RequestHandler;

use crate::registry::AgentEntry;

/// Where a registration came from: the config (and builder) entries are
/// re-read at every start; the admin API's are kept in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The hub's builder or its TOML config.
    Config,
    /// The admin API (persisted in the registry store).
    Api,
}

/// One served agent.
#[derive(Clone, Debug)]
pub struct LiveAgent {
    /// Its registration.
    pub entry: AgentEntry,
    /// Where that came from.
    pub origin: Origin,
    /// Its handler (card, executor, store scope).
    pub handler: RequestHandler,
    /// Its HTTP routes under `/api/v1/agents/{id}`.
    pub(crate) routes: Router,
    /// Its card at the root well-known paths, for the default agent.
    pub(crate) root_card: Router,
    /// An mcp agent's server, kept by the hub's pool once the agent is served.
    pub(crate) mcp: Option<Arc<crate::mcp::server::McpServer>>,
    /// A priced agent's gate: its price, estimates and recent durations.
    pub(crate) market: Option<Arc<crate::market::gate::MarketGate>>,
    /// What checking the served card's signatures against the hub's own
    /// keys finds, worked out the first time discovery shows the agent.
    pub(crate) signature: std::sync::OnceLock<&'static str>,
}

/// The table of live agents, by id.
#[derive(Debug, Default)]
pub(crate) struct LiveTable {
    agents: RwLock<BTreeMap<String, Arc<LiveAgent>>>,
}

impl LiveTable {
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Arc<LiveAgent>>> {
        // Every write replaces one whole entry, so a poisoned lock is still consistent.
        self.agents.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, Arc<LiveAgent>>> {
        self.agents.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The agent `id`, enabled or not.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<LiveAgent>> {
        self.read().get(id).cloned()
    }

    /// Every agent, by id.
    pub(crate) fn all(&self) -> Vec<Arc<LiveAgent>> {
        self.read().values().cloned().collect()
    }

    /// Puts `agent` in (replacing the one of its id); the one it replaced.
    pub(crate) fn insert(&self, agent: LiveAgent) -> Option<Arc<LiveAgent>> {
        let id = agent.entry.id.clone();
        self.write().insert(id, Arc::new(agent))
    }

    /// Takes the agent `id` out; it, if it was there.
    pub(crate) fn remove(&self, id: &str) -> Option<Arc<LiveAgent>> {
        self.write().remove(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }
}
