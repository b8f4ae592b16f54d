//! `/healthz` and `/readyz`, for load balancers and orchestrators. Both are
//! public: they say whether the hub works, nothing about its agents or
//! callers.
//!
//! * `/healthz`: the process serves requests. Always 200 while it does.
//! * `/readyz`: the hub can do its work: the store answers a cheap read
//!   within [`STORE_TIMEOUT`], and the registry is loaded. 200 when every
//!   check passes, else 503; the JSON body names each check.

use std::time::Duration;

use axum::{Json, extract::State, http::StatusCode};
use heddle_store::Scope;
use serde_json::{Value, json};

use crate::Hub;

/// The longest the store may take to answer the readiness read.
pub const STORE_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`.
pub(crate) async fn alive() -> Json<Value> {
    Json(json!({ "status": "alive" }))
}

/// `GET /readyz`.
pub(crate) async fn ready(State(hub): State<Hub>) -> (StatusCode, Json<Value>) {
    let store = store_check(&hub).await;
    // The registry is read while the hub is built, before it serves: a hub
    // that answers has it (the config's, the builder's and the kept ones).
    let registry = json!({
        "ok": true,
        "agents": hub.shared.live.len(),
        "kept": hub.shared.registry.is_some(),
    });
    // No event bus yet: one process, its events in memory.
    let event_bus = json!({
        "ok": true,
        "detail": "none: this hub runs as one process and keeps its events in memory",
    });
    let ok = store["ok"] == true;
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "status": if ok { "ready" } else { "unavailable" },
            "checks": { "store": store, "registry": registry, "event_bus": event_bus },
        })),
    )
}

/// One read of a task no one has, which every store answers with nothing.
async fn store_check(hub: &Hub) -> Value {
    let scope = Scope::new("heddle.readyz", "heddle.readyz");
    match tokio::time::timeout(STORE_TIMEOUT, hub.shared.store.load(&scope, "readyz")).await {
        Ok(Ok(_)) => json!({ "ok": true }),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "readyz: the store failed");
            json!({ "ok": false, "detail": "the store failed; the log has the error" })
        }
        Err(_) => json!({
            "ok": false,
            "detail": format!("the store did not answer within {STORE_TIMEOUT:?}"),
        }),
    }
}
