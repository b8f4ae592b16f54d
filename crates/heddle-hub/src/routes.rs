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
use tower::ServiceExt as _;

use crate::Hub;

/// Where each agent's routes start.
const AGENTS_PREFIX: &str = "/api/v1/agents/";

impl Hub {
    /// The hub's routes. A path with a trailing or doubled slash reaches
    /// the same route ([`heddle_server::lenient_paths`]).
    pub fn router(&self) -> Router {
        let mut fixed = Router::new()
            .route("/api/v1/agents", get(crate::discovery::list))
            .route(
                "/.well-known/ai-catalog.json",
                get(crate::discovery::ai_catalog),
            )
            .merge(crate::admin::routes());
        let keys = self.jwks();
        if !keys.is_empty() {
            // One public JWKS for every key this server signs with.
            let jwks = Arc::new(json!({ "keys": keys }));
            fixed = fixed.route(
                "/.well-known/jwks.json",
                get(move || async move { Json((*jwks).clone()) }),
            );
        }
        let fixed = fixed.with_state(self.clone());
        let hub = self.clone();
        let retry = fixed.clone();
        fixed.fallback_service(tower::service_fn(move |req: Request| {
            let hub = hub.clone();
            let retry = retry.clone();
            async move { Ok::<_, std::convert::Infallible>(hub.dispatch(req, retry).await) }
        }))
    }

    /// A request no fixed route took: an agent's, the default agent's card,
    /// a fixed route spelled with extra slashes, or nothing.
    async fn dispatch(&self, req: Request, fixed: Router) -> Response {
        // Looked up while the path is borrowed: no copy of it on the way.
        let agent = req.uri().path().strip_prefix(AGENTS_PREFIX).map(|rest| {
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
        });
        match agent {
            Some(Ok(agent)) => return call(agent.routes.clone(), req).await,
            Some(Err(missing)) => return not_found(&missing),
            None => {}
        }
        let path = req.uri().path();
        if heddle_server::CARD_PATHS.contains(&path) {
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
        if path.len() > 1 && (path.ends_with('/') || path.contains("//")) {
            let path = path.to_owned();
            let clean = heddle_server::normalize_path(req);
            if clean.uri().path() != "/" {
                return call(
                    fixed.fallback(|uri: axum::http::Uri| async move { nothing_at(uri.path()) }),
                    clean,
                )
                .await;
            }
            return nothing_at(&path);
        }
        nothing_at(path)
    }
}

async fn call(router: Router, req: Request) -> Response {
    match router.oneshot(req).await {
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
