//! The push outbox's dead letters, for the hub's admins:
//! `GET /api/v1/admin/push/dead-letters` lists the deliveries that gave up,
//! `GET /api/v1/admin/push/deliveries?agent=ID&task=ID` lists one task's
//! deliveries, waiting and given up;
//! `POST /api/v1/admin/push/dead-letters/replay` puts some (or all) back in
//! the outbox once the receiver is fixed. `heddle push dead-letters` calls
//! them.
//!
//! A listing names the receiver by scheme, host and path only: its query,
//! its token and its credentials are the caller's secrets.

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use heddle_store::Delivery;
use serde_json::{Value, json};

use crate::{
    Hub,
    admin::{admit, problem},
};

/// Most dead letters one listing or one `all` replay takes.
const MAX_PAGE: usize = 1000;

pub(crate) fn routes() -> Router<Hub> {
    Router::new()
        .route("/api/v1/admin/push/dead-letters", get(list))
        .route("/api/v1/admin/push/dead-letters/replay", post(replay))
        .route("/api/v1/admin/push/deliveries", get(of_task))
}

/// The receiver's URL without its query, fragment or user info.
fn receiver(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            format!(
                "{}://{}{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ) + u.path()
        }
        Err(_) => String::new(),
    }
}

fn shown(d: &Delivery) -> Value {
    json!({
        "seq": d.seq,
        "deliveryId": d.item.id,
        "agentId": d.item.scope.agent,
        "taskId": d.item.task_id,
        "configId": d.item.target.config.id,
        "receiver": receiver(&d.item.target.config.url),
        "attempts": d.attempts,
        "lastError": d.last_error,
    })
}

fn no_push() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "Not Found",
        "this hub does not deliver push notifications",
    )
}

fn store_failed(e: &heddle_store::StoreError) -> Response {
    tracing::error!(error = %e, "push: cannot read the dead letters");
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable",
        "the push outbox cannot be read",
    )
}

async fn list(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let Some(push) = &hub.shared.notifier else {
        return no_push();
    };
    let limit = uri
        .query()
        .and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("limit="))
                .and_then(|v| v.parse::<usize>().ok())
        })
        .unwrap_or(100)
        .clamp(1, MAX_PAGE);
    match push.dead_letters(limit).await {
        Ok(dead) => {
            let shown: Vec<Value> = dead.iter().map(shown).collect();
            Json(json!({ "deadLetters": shown })).into_response()
        }
        Err(e) => store_failed(&e),
    }
}

/// `GET /api/v1/admin/push/deliveries?agent=ID&task=ID`: one task's
/// deliveries still in the outbox (`pending`, with their attempts, last
/// error and next attempt, whichever replica holds them) and those that
/// gave up (`dead`), at most [`MAX_PAGE`] of each, oldest first. A delivery
/// that succeeded leaves the outbox and is not listed.
async fn of_task(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let Some(push) = &hub.shared.notifier else {
        return no_push();
    };
    let mut agent = None;
    let mut task = None;
    for (k, v) in url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()) {
        match k.as_ref() {
            "agent" => agent = Some(v.into_owned()),
            "task" => task = Some(v.into_owned()),
            _ => {}
        }
    }
    let (Some(agent), Some(task)) = (agent, task) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            "name the task: ?agent=ID&task=ID",
        );
    };
    let found = match push.task_deliveries(&agent, &task, MAX_PAGE).await {
        Ok(f) => f,
        Err(e) => return store_failed(&e),
    };
    let listed = |list: &[Delivery]| -> Vec<Value> {
        list.iter()
            .map(|d| {
                let mut v = shown(d);
                v["nextAttemptMs"] = json!(d.next_attempt_ms);
                v
            })
            .collect()
    };
    Json(json!({ "pending": listed(&found.pending), "dead": listed(&found.dead) })).into_response()
}

/// `{"seqs": [..]}` or `{"all": true}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayRequest {
    #[serde(default)]
    seqs: Vec<i64>,
    #[serde(default)]
    all: bool,
}

async fn replay(
    State(hub): State<Hub>,
    headers: HeaderMap,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let Some(push) = &hub.shared.notifier else {
        return no_push();
    };
    let request: ReplayRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                &format!("expected {{\"seqs\": [..]}} or {{\"all\": true}}: {e}"),
            );
        }
    };
    // Neither, or both: refused.
    if request.all != request.seqs.is_empty() {
        return problem(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            "name the dead letters to replay (\"seqs\") or ask for \"all\", not both",
        );
    }
    if request.seqs.len() > MAX_PAGE {
        return problem(
            StatusCode::BAD_REQUEST,
            "Bad Request",
            &format!("at most {MAX_PAGE} dead letters at a time"),
        );
    }
    let seqs = if request.all {
        match push.dead_letters(MAX_PAGE).await {
            Ok(dead) => dead.iter().map(|d| d.seq).collect(),
            Err(e) => return store_failed(&e),
        }
    } else {
        request.seqs
    };
    match push.replay_dead(&seqs).await {
        Ok(n) => Json(json!({ "replayed": n })).into_response(),
        Err(e) => store_failed(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_is_shown_without_its_query_or_credentials() {
        assert_eq!(
            receiver("https://user:pw@hooks.example:8443/a2a/hook?token=s3cret#x"),
            "https://hooks.example:8443/a2a/hook"
        );
        assert_eq!(receiver("not a url"), "");
    }
}
