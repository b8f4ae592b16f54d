//! API keys over HTTP, for admins: the same table `heddle keys` manages.
//!
//! ```text
//! GET    /api/v1/admin/keys              every key (no secrets: id, name, caller id, dates)
//! POST   /api/v1/admin/keys              {"name": "…"}: a new key, shown in this answer only
//! DELETE /api/v1/admin/keys/{nameOrId}   revoke
//! ```
//!
//! A hub whose authenticator takes no API keys answers 404 with why.

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse as _, Response},
    routing::{delete, get},
};
use heddle_auth::apikey::{ApiKeys, KeyRecord};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    Hub,
    admin::{admit, problem},
};

/// The key routes, with the hub as state.
pub(crate) fn routes() -> Router<Hub> {
    Router::new()
        .route("/api/v1/admin/keys", get(list).post(create))
        .route("/api/v1/admin/keys/{key}", delete(revoke))
}

fn shown(k: &KeyRecord) -> Value {
    json!({
        "id": k.id,
        "name": k.name,
        "caller": k.principal(),
        "createdAt": k.created_at,
        "revokedAt": k.revoked_at,
    })
}

/// The hub's API keys, or the answer saying it has none.
#[allow(clippy::result_large_err)] // the refusal is the answer, made once
fn keys(hub: &Hub) -> Result<&ApiKeys, Response> {
    hub.shared
        .auth
        .as_ref()
        .and_then(heddle_auth::Authenticator::api_keys)
        .ok_or_else(|| {
            problem(
                StatusCode::NOT_FOUND,
                "No API keys",
                "this hub's authentication takes no API keys (start it with --require-auth)",
            )
        })
}

fn store_error(e: &heddle_auth::AuthError) -> Response {
    match e {
        heddle_auth::AuthError::Config(why) => {
            problem(StatusCode::BAD_REQUEST, "Bad key request", why)
        }
        other => {
            tracing::error!(error = %other, "admin API: key store");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Key store",
                "the key store could not be read or written; see the hub's log",
            )
        }
    }
}

async fn list(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let keys = match keys(&hub) {
        Ok(k) => k,
        Err(r) => return r,
    };
    match keys.list().await {
        Ok(all) => {
            Json(json!({ "keys": all.iter().map(shown).collect::<Vec<_>>() })).into_response()
        }
        Err(e) => store_error(&e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKeyRequest {
    name: String,
}

async fn create(State(hub): State<Hub>, headers: HeaderMap, uri: Uri, body: Bytes) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let keys = match keys(&hub) {
        Ok(k) => k,
        Err(r) => return r,
    };
    let Ok(req) = serde_json::from_slice::<NewKeyRequest>(&body) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "Bad key request",
            "the body must be {\"name\": \"…\"}",
        );
    };
    if keys.list().await.is_ok_and(|all| {
        all.iter()
            .any(|k| k.revoked_at.is_none() && k.name == req.name.trim())
    }) {
        return problem(
            StatusCode::CONFLICT,
            "Conflict",
            "an active key already has this name",
        );
    }
    match keys.create(&req.name).await {
        Ok((record, key)) => {
            let mut body = shown(&record);
            body["key"] = json!(key.expose());
            let mut r = (StatusCode::CREATED, Json(body)).into_response();
            r.headers_mut().insert(
                axum::http::header::CACHE_CONTROL,
                axum::http::HeaderValue::from_static("no-store"),
            );
            r
        }
        Err(e) => store_error(&e),
    }
}

async fn revoke(
    State(hub): State<Hub>,
    Path(key): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let keys = match keys(&hub) {
        Ok(k) => k,
        Err(r) => return r,
    };
    match keys.revoke(&key).await {
        Ok(revoked) if revoked.is_empty() => problem(
            StatusCode::NOT_FOUND,
            "Not found",
            "no active key has this name or id",
        ),
        Ok(revoked) => Json(json!({ "revoked": revoked.iter().map(shown).collect::<Vec<_>>() }))
            .into_response(),
        Err(e) => store_error(&e),
    }
}
