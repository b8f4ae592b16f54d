//! The hub's HTTP routes. The hub's own paths (listing, catalog, JWKS,
//! admin) are fixed routes; everything under `/api/v1/agents/{id}/` is
//! dispatched when the request arrives, to the routes of the agent the
//! registry holds then.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::Request,
    response::{IntoResponse as _, Response},
    routing::get,
};
use serde_json::json;

use crate::Hub;

/// Where each agent's routes start.
const AGENTS_PREFIX: &str = "/api/v1/agents/";

impl Hub {
    /// The hub's routes. A path with a trailing or doubled slash reaches
    /// the same route ([`heddle_server::lenient_paths`]).
    pub fn router(&self) -> Router {
        Router::new().fallback_service(self.service())
    }

    /// The hub as one tower service, for a server that has no other routes
    /// to put beside it (`heddle serve`): [`Hub::router`] without the
    /// router level around it, which every request would pass through.
    pub fn service(&self) -> HubService {
        let mut fixed = Router::new()
            .route("/api/v1/agents", get(crate::discovery::list))
            .route("/", axum::routing::post(crate::market::a2ahub::endpoint))
            .route(
                "/.well-known/ai-catalog.json",
                get(crate::discovery::ai_catalog),
            )
            .route("/metrics", get(crate::metrics::scrape))
            .route("/healthz", get(crate::health::alive))
            .route("/readyz", get(crate::health::ready))
            .merge(crate::admin::routes())
            .merge(crate::dead_letters::routes())
            .merge(crate::market::wallets::routes())
            .merge(crate::keys::routes());
        if self.shared.console.is_some() {
            fixed = fixed.merge(crate::console::routes());
        }
        let keys = self.jwks();
        if !keys.is_empty() {
            // One public JWKS for every key this server signs with.
            let jwks = Arc::new(json!({ "keys": keys }));
            fixed = fixed.route(
                "/.well-known/jwks.json",
                get(move || async move { Json((*jwks).clone()) }),
            );
        }
        let fixed = fixed
            .with_state(self.clone())
            .fallback(|uri: axum::http::Uri| async move { nothing_at(uri.path()) });
        HubService {
            hub: self.clone(),
            fixed,
        }
    }

    /// Routes one request: to an agent, to the default agent's card, or to
    /// the hub's own routes; a path with extra slashes is cleaned first.
    async fn dispatch(&self, req: Request, fixed: Router) -> Response {
        let req = match &self.shared.console {
            Some(console) => {
                let auth = self.shared.auth.as_ref();
                match console.sessions.apply(
                    req,
                    |h, u| crate::console::has_own_credential(self, h, u),
                    auth.map(heddle_auth::Authenticator::key_location),
                    &self.shared.public_url,
                ) {
                    Ok(req) => req,
                    Err(refusal) => return crate::console::session::refused(&refusal),
                }
            }
            None => req,
        };
        let req = match self.to_agent(req) {
            Ok(answer) => return answer.await,
            Err(req) => req,
        };
        let path = req.uri().path();
        let req = if path.len() > 1 && (path.ends_with('/') || path.contains("//")) {
            let clean = heddle_server::normalize_path(req);
            match self.to_agent(clean) {
                Ok(answer) => return answer.await,
                Err(req) => req,
            }
        } else {
            req
        };
        if heddle_server::CARD_PATHS.contains(&req.uri().path()) {
            let default = self.shared.default_agent.as_deref();
            return match default
                .and_then(|id| self.shared.live.get(id))
                .filter(|a| a.entry.enabled)
            {
                Some(agent) => call(agent.root_card.clone(), req).await,
                None => {
                    not_found("this hub has no default agent; the agents are under /api/v1/agents")
                }
            };
        }
        call(fixed, req).await
    }

    /// The answer of the agent the path names, or the request back when
    /// the path is not under `/api/v1/agents/`.
    #[allow(clippy::result_large_err)] // handing the request back is the point
    fn to_agent(
        &self,
        req: Request,
    ) -> Result<impl std::future::Future<Output = Response> + use<>, Request> {
        // Looked up while the path is borrowed: no copy of it on the way.
        let found = match req.uri().path().strip_prefix(AGENTS_PREFIX) {
            None => return Err(req),
            Some(rest) => {
                let id = rest.split('/').next().unwrap_or_default();
                self.shared
                    .live
                    .get(id)
                    .filter(|a| a.entry.enabled)
                    .ok_or_else(|| {
                        format!(
                            "no agent {:?} on this hub (GET /api/v1/agents lists them)",
                            shorten(id)
                        )
                    })
            }
        };
        Ok(async move {
            match found {
                Ok(agent) => call(agent.routes.clone(), req).await,
                Err(missing) => not_found(&missing),
            }
        })
    }
}

/// The hub as a tower service ([`Hub::service`]). It looks at the path
/// itself before any route table: an agent's request, the hot path, goes
/// straight to that agent's routes.
#[derive(Clone)]
pub struct HubService {
    hub: Hub,
    /// The hub's own routes: listing, catalog, admin, JWKS.
    fixed: Router,
}

impl std::fmt::Debug for HubService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubService").finish_non_exhaustive()
    }
}

impl tower::Service<Request> for HubService {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Response, Self::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let hub = self.hub.clone();
        let fixed = self.fixed.clone();
        Box::pin(async move { Ok(hub.dispatch(req, fixed).await) })
    }
}

async fn call(mut router: Router, req: Request) -> Response {
    // A router is always ready: called straight, without `oneshot`'s states.
    match tower::Service::call(&mut router, req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

fn nothing_at(path: &str) -> Response {
    not_found(&format!(
        "nothing at {:?} (the agents are under /api/v1/agents)",
        shorten(path)
    ))
}

/// The answer to a path under an agent that none of its routes takes.
pub(crate) fn agent_path_not_found(id: &str, path: &str) -> Response {
    not_found(&format!(
        "agent {id:?} has no endpoint at {:?}: JSON-RPC is POST …/a2a, REST under …/rest, the card at …/.well-known/agent-card.json",
        shorten(path)
    ))
}

/// A JSON 404 saying what is missing.
pub(crate) fn not_found(message: &str) -> Response {
    (
        axum::http::StatusCode::NOT_FOUND,
        Json(json!({ "error": { "code": 404, "status": "NOT_FOUND", "message": message } })),
    )
        .into_response()
}

/// At most 120 characters of a caller's path, for an error message.
pub(crate) fn shorten(s: &str) -> &str {
    match s.char_indices().nth(120) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
