//! Routing: an agent's endpoints as an axum [`Router`], ready to serve alone,
//! under a path prefix, or merged with other agents' routers (the hub mounts
//! one per agent under `/api/v1/agents/{agentId}`). Routes are registered
//! with their full paths rather than nested, so a request is matched once,
//! with no path rewriting.

use std::sync::Arc;

use axum::{
    Router,
    routing::{get, post},
};

use crate::{card::CardDocument, handler::RequestHandler, jsonrpc, limit::Binding};

/// Well-known card paths: the current name and the pre-0.3 one.
pub const CARD_PATHS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// What wraps each binding's routes (see [`AgentRoutes::around_bindings`]).
type BindingLayer = Arc<dyn Fn(Binding, Router) -> Router + Send + Sync>;

/// Builds the routes of one agent.
#[derive(Clone)]
pub struct AgentRoutes {
    handler: RequestHandler,
    prefix: String,
    jsonrpc_path: Option<String>,
    rest_path: Option<String>,
    around: Option<BindingLayer>,
}

impl std::fmt::Debug for AgentRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRoutes")
            .field("prefix", &self.prefix)
            .field("jsonrpc_path", &self.jsonrpc_path)
            .field("rest_path", &self.rest_path)
            .field("around", &self.around.is_some())
            .finish_non_exhaustive()
    }
}

impl AgentRoutes {
    /// Routes for `handler`, with JSON-RPC at `/` until told otherwise.
    pub fn new(handler: RequestHandler) -> Self {
        Self {
            handler,
            prefix: String::new(),
            jsonrpc_path: Some("/".into()),
            rest_path: None,
            around: None,
        }
    }

    /// Wraps each binding's routes (not the cards) with what `layer`
    /// returns for that binding: an authentication layer, for example, which
    /// then answers in the binding's own error form. It goes outside the
    /// per-caller rate limit, so the rate is counted per authenticated caller.
    #[must_use]
    pub fn around_bindings(
        mut self,
        layer: impl Fn(Binding, Router) -> Router + Send + Sync + 'static,
    ) -> Self {
        self.around = Some(Arc::new(layer));
        self
    }

    /// Mounts every route under `prefix` (e.g. `/api/v1/agents/echo`).
    #[must_use]
    pub fn under(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into().trim_end_matches('/').to_owned();
        self
    }

    /// Serves JSON-RPC at `path` (e.g. `/a2a`).
    #[must_use]
    pub fn jsonrpc_at(mut self, path: impl Into<String>) -> Self {
        self.jsonrpc_path = Some(path.into());
        self
    }

    /// Turns the JSON-RPC binding off.
    #[must_use]
    pub fn without_jsonrpc(mut self) -> Self {
        self.jsonrpc_path = None;
        self
    }

    /// Serves the HTTP+JSON (REST) binding under `path` (e.g. `/rest`, so
    /// `POST …/rest/message:send`).
    #[must_use]
    pub fn rest_at(mut self, path: impl Into<String>) -> Self {
        self.rest_path = Some(path.into().trim_end_matches('/').to_owned());
        self
    }

    /// The router: both card paths and the JSON-RPC endpoint, with the body
    /// limit of the handler's [`crate::Limits`].
    pub fn router(self) -> Router {
        // The request rate per caller, checked on the binding routes (not the
        // cards), inside any authentication layer put around this router.
        let limits = self.handler.caller_limits().clone();
        let mut router = cards_at(&self.prefix, self.handler.card());
        if let Some(path) = &self.jsonrpc_path {
            let rpc_path = match (self.prefix.as_str(), path.as_str()) {
                ("", p) => p.to_owned(),
                (prefix, "/") => prefix.to_owned(),
                (prefix, p) => format!("{prefix}{p}"),
            };
            // The endpoint reads its body against the handler's limit itself.
            let rpc = Router::new()
                .route(&rpc_path, post(jsonrpc::endpoint))
                .with_state(self.handler.clone());
            router = router.merge(self.wrap(limits.layer(rpc, Binding::JsonRpc), Binding::JsonRpc));
        }
        if let Some(path) = &self.rest_path {
            // The endpoint reads its body against the handler's limit itself.
            let rest = crate::rest::routes(&format!("{}{path}", self.prefix))
                .with_state(self.handler.clone());
            router = router.merge(self.wrap(limits.layer(rest, Binding::Rest), Binding::Rest));
        }
        router
    }

    /// The binding's routes inside the layers put around them, all inside
    /// the request's trace span ([`crate::trace`]), so a refusal by any
    /// layer is part of the caller's trace too.
    fn wrap(&self, routes: Router, binding: Binding) -> Router {
        let routes = match &self.around {
            Some(layer) => layer(binding, routes),
            None => routes,
        };
        routes.layer(crate::trace::TraceContextLayer)
    }
}

/// `router` reachable however a client joins its paths: a trailing slash
/// (`…/a2a/`, `…/rest/`, `…/.well-known/agent-card.json/`) and doubled
/// slashes (`…/rest//message:send`) reach the route without them, as
/// official client libraries and suites build URLs that way. Only the path
/// is rewritten, and only for a request no route took: such a request is
/// routed once more with its path cleaned, reaching the router's own
/// fallback if it still matches nothing. A request to a route as written
/// costs nothing more.
pub fn lenient_paths(router: Router) -> Router {
    use tower::ServiceExt as _;
    let exact = router.clone();
    router.fallback_service(tower::service_fn(move |req: axum::extract::Request| {
        exact.clone().oneshot(normalize_path(req))
    }))
}

/// The request with its path's trailing and doubled slashes removed (the
/// rewrite [`lenient_paths`] retries with), for a server that dispatches
/// requests itself.
pub fn normalize_path<B>(mut req: axum::http::Request<B>) -> axum::http::Request<B> {
    let path = req.uri().path();
    if path.len() <= 1 || !(path.ends_with('/') || path.contains("//")) {
        return req;
    }
    let mut clean = String::with_capacity(path.len());
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        clean.push('/');
        clean.push_str(segment);
    }
    if clean.is_empty() {
        clean.push('/');
    }
    if let Some(q) = req.uri().query() {
        clean.push('?');
        clean.push_str(q);
    }
    let Ok(pq) = axum::http::uri::PathAndQuery::try_from(clean) else {
        return req;
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = Some(pq);
    if let Ok(uri) = axum::http::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
    req
}

/// Just the two well-known card routes for `card`.
pub fn card_router(card: &heddle_core::v1::AgentCard) -> Router {
    cards_at("", card)
}

fn cards_at(prefix: &str, card: &heddle_core::v1::AgentCard) -> Router {
    let doc = Arc::new(CardDocument::new(card));
    CARD_PATHS
        .iter()
        .fold(Router::new(), |r, p| {
            r.route(&format!("{prefix}{p}"), get(crate::card::serve))
        })
        .with_state(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normalized(uri: &str) -> String {
        let req = axum::http::Request::get(uri).body(()).expect("request");
        normalize_path(req).uri().to_string()
    }

    #[test]
    fn trailing_and_doubled_slashes_are_dropped() {
        assert_eq!(normalized("/a2a/"), "/a2a");
        assert_eq!(
            normalized("/x/rest//message:send?a=1"),
            "/x/rest/message:send?a=1"
        );
        assert_eq!(
            normalized("http://h/.well-known/agent-card.json/"),
            "http://h/.well-known/agent-card.json"
        );
        assert_eq!(normalized("/"), "/");
        assert_eq!(normalized("//"), "/");
        assert_eq!(normalized("/a2a"), "/a2a");
    }
}
