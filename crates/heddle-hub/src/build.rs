//! How an entry becomes a served agent: the executor and card it names
//! (a builtin, or a remote agent's relay), the manifest's card and input
//! rules, the hub's interfaces, signing, the handler and its routes.

use std::sync::Arc;

use axum::Router;
use heddle_server::{AgentExecutor, AgentRoutes, RequestHandler, card_router};

use crate::{
    AgentProfile, LiveAgent, Origin, RegistryError, Shared, agent_limits, auth, card_for_endpoints,
    llm, manifest, market, mcp,
    registry::{AgentEntry, AgentKind},
    remote, routes,
};

/// What an entry resolves to: its card profile, its executor, and an mcp
/// agent's server.
type Resolved = (
    AgentProfile,
    Arc<dyn AgentExecutor>,
    Option<Arc<mcp::server::McpServer>>,
);

impl Shared {
    /// The executor and card profile an entry names (and an mcp agent's
    /// server, which the hub keeps across rebuilds of its card).
    async fn resolve(&self, entry: &mut AgentEntry) -> Result<Resolved, RegistryError> {
        match entry.kind {
            AgentKind::Builtin => {
                let name = entry.builtin_name();
                let b = self.builtins.get(name).ok_or_else(|| {
                    RegistryError::UnknownBuiltin(
                        name.to_owned(),
                        self.builtins
                            .keys()
                            .map(String::as_str)
                            .collect::<Vec<_>>()
                            .join(", "),
                    )
                })?;
                Ok((b.profile.clone(), b.executor.clone(), None))
            }
            AgentKind::Remote => {
                let (profile, executor) = self.resolve_remote(entry).await?;
                Ok((profile, executor, None))
            }
            AgentKind::Llm => {
                let (profile, executor) = self.resolve_llm(entry)?;
                Ok((profile, executor, None))
            }
            AgentKind::Mcp => self.resolve_mcp(entry).await,
        }
    }

    /// An mcp entry's server (the running one when its settings are the
    /// same), its tools listed (starting the server if need be), the card
    /// made from them, and the executor.
    async fn resolve_mcp(&self, entry: &mut AgentEntry) -> Result<Resolved, RegistryError> {
        let settings = entry.mcp.as_ref().ok_or_else(|| {
            RegistryError::Invalid(crate::registry::EntryError {
                field: "mcp",
                problem: "an mcp agent needs its settings".into(),
            })
        })?;
        let failed = |e: mcp::McpError| RegistryError::Mcp(e.to_string());
        let server = self
            .mcp
            .server(&entry.id, settings, entry.allow_http, &self.remote.secrets)
            .map_err(failed)?;
        match entry.mcp_tools.take() {
            // An admin refresh lists them again.
            None => server.forget_tools(),
            Some(kept) => server.seed_tools(kept),
        }
        let tools = server.ensure_tools().await.map_err(failed)?;
        entry.mcp_tools = Some(server.listed());
        if tools.len() == 0 {
            return Err(RegistryError::Mcp(format!(
                "the MCP server {} lists no tools{}",
                settings.shown(),
                if settings.tools.is_some() {
                    " of those in mcp.tools"
                } else {
                    ""
                }
            )));
        }
        let profile = mcp::profile(&entry.id, &tools, server.about().as_ref());
        let agent = mcp::McpAgent::new(server.clone());
        Ok((profile, Arc::new(agent), Some(server)))
    }

    /// An llm entry's executor; its key is read now, so a missing one is
    /// refused at registration.
    fn resolve_llm(
        &self,
        entry: &AgentEntry,
    ) -> Result<(AgentProfile, Arc<dyn AgentExecutor>), RegistryError> {
        let settings = entry.llm.clone().ok_or_else(|| {
            RegistryError::Invalid(crate::registry::EntryError {
                field: "llm",
                problem: "an llm agent needs its settings".into(),
            })
        })?;
        let profile = settings.profile(&entry.id);
        let agent = llm::LlmAgent::new(
            entry.id.clone(),
            settings,
            entry.allow_http,
            &self.remote.secrets,
            self.store.clone(),
        )
        .map_err(|e| RegistryError::Llm(e.to_string()))?;
        Ok((profile, Arc::new(agent)))
    }

    /// A remote entry's upstream card (the kept one, else fetched now and
    /// kept in the entry, with its warnings) and its proxy executor.
    async fn resolve_remote(
        &self,
        entry: &mut AgentEntry,
    ) -> Result<(AgentProfile, Arc<dyn AgentExecutor>), RegistryError> {
        let upstream = |e: remote::RemoteError| RegistryError::Upstream(e.to_string());
        let card = match &entry.upstream_card {
            Some(raw) => remote::kept_card(raw, entry.allow_http).map_err(upstream)?,
            None => {
                let url = entry.card_url.as_deref().unwrap_or_default();
                let opts = remote::FetchOptions {
                    allow_http: entry.allow_http,
                    ..self.remote.fetch.clone()
                };
                let fetched = remote::fetch_card(url, &opts).await.map_err(upstream)?;
                entry.upstream_card = Some(fetched.raw);
                entry.warnings = fetched.warnings;
                entry.upstream_signature = Some(fetched.signature.name().to_owned());
                fetched.card
            }
        };
        let links = self.store.clone().registry_store().ok_or_else(|| {
            RegistryError::Upstream(
                "the hub's store keeps no task links, which a remote agent needs".into(),
            )
        })?;
        let auth = entry.auth.clone().unwrap_or_default();
        let agent = remote::RemoteAgent::new(
            entry.id.clone(),
            &card,
            &auth,
            &self.remote.secrets,
            self.remote.options.clone(),
            links,
        )
        .map_err(upstream)?
        .counting_errors(self.metrics.clone());
        Ok((remote::hub_profile(&card), Arc::new(agent)))
    }

    /// Builds the whole agent an entry describes: its card with the hub's
    /// interfaces (signed by the card hook), its handler and its routes.
    pub(crate) async fn build_agent(
        &self,
        mut entry: AgentEntry,
        origin: Origin,
    ) -> Result<LiveAgent, RegistryError> {
        // The manifest first: a broken one is refused before any upstream
        // is contacted.
        let manifest = entry
            .manifest
            .as_ref()
            .map(|doc| {
                manifest::validate(doc).map_err(|violations| {
                    RegistryError::Manifest(
                        violations
                            .into_iter()
                            .map(|v| (format!("/manifest{}", v.pointer), v.message))
                            .collect(),
                    )
                })
            })
            .transpose()?;
        // Then the entry: a bare manifest's entry is made from the
        // manifest, so its faults (a plain-http endpoint, say) are the
        // manifest's, reported above with every other violation.
        entry.check()?;
        let (mut profile, mut executor, mcp_server) = self.resolve(&mut entry).await?;
        executor = market::deadline::wrap(executor);
        // Every hub agent takes part in delegation chains (the SDK checks
        // them); the card says so.
        profile
            .extensions
            .push(heddle_server::delegation::card_extension(
                heddle_server::delegation::DEFAULT_MAX_HOPS,
            ));
        if let Some(facts) = &entry.answer_metadata {
            profile.extensions.push(facts.extension());
            executor = facts.wrap(executor);
        }
        // Every check that applies runs, in this order: the builder's, the
        // tools' schemas (as they are when each message arrives), the
        // marketplace priority (where a queue uses it), the manifest's
        // input schema.
        let mut checks: Vec<heddle_server::MessageCheck> = self
            .message_checks
            .get(&entry.id)
            .cloned()
            .into_iter()
            .collect();
        if let Some(server) = &mcp_server {
            checks.push(mcp::tools::ToolSet::message_check(server.tools_cell()));
        }
        let rate_limit = manifest.as_ref().and_then(|m| m.rate_limit);
        if rate_limit.is_some_and(|l| l.max_concurrent.is_some()) {
            // Where the priority orders a queue, a bad one is refused.
            checks.push(agent_limits::priority_check());
        }
        if let Some(m) = manifest {
            // The manifest speaks for the agent: its card and input rules.
            let from_manifest = m.profile(None);
            profile.name = from_manifest.name;
            profile.description = from_manifest.description;
            profile.skills = from_manifest.skills;
            profile.version = from_manifest.version;
            profile.extensions.extend(from_manifest.extensions);
            let input = manifest::InputCheck::new(&m).map_err(|e| {
                RegistryError::Manifest(vec![("/manifest/input_schema".into(), e.to_string())])
            })?;
            checks.push(input.into_message_check());
        }
        let check = all_of(checks);
        let gate = self.market_gate(&entry, &mut profile)?;
        if let Some(g) = &gate
            && std::iter::once(g.price())
                .chain(g.price().skills.values())
                .any(|p| p.model == market::price::PricingModel::PerMinute)
        {
            executor = market::meter::wrap(executor, g.clone());
        }
        if let Some(name) = &entry.name {
            profile.name.clone_from(name);
        }
        if let Some(description) = &entry.description {
            profile.description.clone_from(description);
        }
        let id = entry.id.clone();
        let card = card_for_endpoints(
            &self.public_url,
            self.grpc_url.as_deref(),
            &id,
            &profile,
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
            if self.notifier.is_some()
                && let Some(caps) = served.capabilities.as_mut()
            {
                caps.push_notifications = Some(true);
            }
            // Last: a signature covers the card exactly as served.
            if let Some(hook) = &self.card_hook {
                hook(&id, served);
            }
        }
        let mut limits = self.limits.clone();
        if let Some(n) = entry.limits.max_body_bytes {
            limits.max_body_bytes = limits.max_body_bytes.min(n);
        }
        if let Some(n) = entry.limits.max_parts {
            limits.max_parts = limits.max_parts.min(n);
        }
        let root_card = card_router(&card);
        let mut handler = RequestHandler::builder(id.clone(), card, executor, self.store.clone())
            .limits(limits)
            // `max_streams` and the caller limits hold for the hub, not
            // for each agent.
            .stream_slots(self.streams.clone())
            .caller_limits(self.caller_limits.clone())
            .versions(self.versions)
            .observer(self.agent_observer(&id))
            .stream_drain(self.drain.clone());
        if let Some(extended) = extended {
            handler = handler.extended_card(extended);
        }
        if let Some(n) = &self.notifier {
            handler = handler.push(n.clone());
        }
        if let Some(check) = check {
            handler = handler.message_check(check);
        }
        if let Some(gate) = &gate {
            handler = handler.gate(gate.clone());
        }
        if let Some(cluster) = &self.cluster {
            handler = handler.cluster(cluster.clone());
        }
        if let Some(limit) = &rate_limit {
            // The handler this one replaces, whose counts it may keep.
            let previous = self.live.get(&id);
            let previous = previous.as_ref().map(|a| &a.handler);
            if let Some(rate) = agent_limits::rate(limit, previous) {
                handler = handler.agent_rate(rate);
            }
            if let Some(concurrency) = agent_limits::concurrency(limit, previous) {
                handler = handler.concurrency(concurrency);
            }
        }
        let handler = handler.build();
        let routes = self.agent_routes(&handler);
        Ok(LiveAgent {
            entry,
            origin,
            handler,
            routes,
            root_card,
            mcp: mcp_server,
            market: gate,
            signature: std::sync::OnceLock::new(),
        })
    }

    /// What the agent `id`'s handler tells what it does: the hub's metrics,
    /// and the builder's observer when there is one.
    fn agent_observer(&self, id: &str) -> Arc<dyn heddle_server::Observer> {
        let own = crate::metrics::agent_observer(&self.metrics, id);
        match &self.observer {
            Some(extra) => Arc::new(heddle_server::observe::Both(own, extra.clone())),
            None => own,
        }
    }

    /// A priced agent's gate, its price declared in `profile`'s card.
    fn market_gate(
        &self,
        entry: &AgentEntry,
        profile: &mut AgentProfile,
    ) -> Result<Option<Arc<market::gate::MarketGate>>, RegistryError> {
        let Some(price) = entry.price()? else {
            return Ok(None);
        };
        let ledger = self.store.clone().ledger_store().ok_or_else(|| {
            RegistryError::Invalid(crate::registry::EntryError {
                field: "pricing",
                problem: "the hub's store keeps no ledger, which a priced agent needs".into(),
            })
        })?;
        // The running gate, when the price is the same: its recent usage and
        // the working time of tasks waiting for their callers go on.
        let gate = match self.live.get(&entry.id).and_then(|a| a.market.clone()) {
            Some(g) if *g.price() == price => g,
            _ => Arc::new(market::gate::MarketGate::new(
                &entry.id,
                price,
                ledger,
                self.hold_key.clone(),
            )),
        };
        profile.extensions.push(gate.extension());
        Ok(Some(gate))
    }

    /// The HTTP routes of one agent under `/api/v1/agents/{id}`.
    fn agent_routes(&self, handler: &RequestHandler) -> Router {
        let id = handler.agent_id().to_owned();
        let mut routes = AgentRoutes::new(handler.clone()).under(format!("/api/v1/agents/{id}"));
        routes = if self.bindings.jsonrpc {
            routes.jsonrpc_at("/a2a")
        } else {
            routes.without_jsonrpc()
        };
        if self.bindings.rest {
            routes = routes.rest_at("/rest");
        }
        if let Some(auth) = &self.auth {
            // Each binding behind the authenticator, which answers in that
            // binding's error form; the cards stay public.
            let auth = auth.clone();
            routes = routes.around_bindings(move |binding, r| r.layer(auth.layer(binding)));
        }
        let ids = Arc::new(id);
        heddle_server::lenient_paths(routes.router().fallback(move |uri: axum::http::Uri| {
            let ids = ids.clone();
            async move { routes::agent_path_not_found(&ids, uri.path()) }
        }))
    }
}

/// One check running each of `checks` in turn (the first refusal wins).
fn all_of(mut checks: Vec<heddle_server::MessageCheck>) -> Option<heddle_server::MessageCheck> {
    if checks.len() <= 1 {
        return checks.pop();
    }
    Some(Arc::new(move |msg| checks.iter().try_for_each(|c| c(msg))))
}
