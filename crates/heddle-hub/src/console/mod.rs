//! The hub's web console at `/console`: a catalog of the agents, a chat to
//! try any of them, a task inspector, and the admin pages.
//!
//! ```text
//! GET    /console                the page (assets embedded in the binary)
//! GET    /console/app.js         its script; /console/app.css its styles
//! GET    /console/session        who is signed in, and the CSRF token
//! POST   /console/session        sign in: {"kind": "apiKey" | "bearer", "credential": "…"}
//! DELETE /console/session        sign out
//! ```
//!
//! The page is a small script with no build step and no third-party code.
//! It talks to the hub only through the APIs any client uses (discovery,
//! each agent's JSON-RPC endpoint and card, the admin and wallet APIs):
//! the console adds no data route of its own. What it adds is the session
//! ([`session`]): a credential exchanged once for an `HttpOnly`,
//! `SameSite=Strict` cookie, which the hub turns back into that credential
//! on each request, with a CSRF token required on every change.

pub(crate) mod session;

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
    routing::get,
};
use serde::Deserialize;
use serde_json::json;

use crate::{Hub, admin::problem};
use session::{Credential, Sessions};

/// The console's state in the hub.
#[derive(Debug)]
pub(crate) struct Console {
    pub(crate) sessions: Sessions,
}

impl Console {
    pub(crate) fn new(public_url: &str) -> Self {
        Self {
            sessions: Sessions::new(public_url.starts_with("https:")),
        }
    }
}

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLES: &str = include_str!("assets/app.css");

/// The pages may load only their own script and styles and talk only to
/// the hub; no frame may hold them.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The console's routes, with the hub as state.
pub(crate) fn routes() -> Router<Hub> {
    Router::new()
        .route(
            "/console",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/console/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/app.css",
            get(|| async { asset(STYLES, "text/css; charset=utf-8") }),
        )
        .route(
            "/console/session",
            get(current).post(sign_in).delete(sign_out),
        )
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// Whether a request brings a credential of its own, where the hub looks
/// for one: then a console cookie beside it is ignored.
pub(crate) fn has_own_credential(hub: &Hub, headers: &HeaderMap, uri: &Uri) -> bool {
    headers.contains_key(header::AUTHORIZATION)
        || hub
            .shared
            .auth
            .as_ref()
            .is_some_and(|auth| auth.key_location().find(headers, uri).is_some())
}

fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// What the sign-in form may offer on this hub.
fn methods(hub: &Hub) -> serde_json::Value {
    let auth = hub.shared.auth.as_ref();
    json!({
        "required": auth.is_some_and(heddle_auth::Authenticator::is_required),
        "apiKeys": auth.is_some_and(|a| a.api_keys().is_some()),
        "bearerTokens": auth.is_some_and(|a| a.jwt().is_some()),
    })
}

/// `GET /console/session`.
async fn current(State(hub): State<Hub>, headers: HeaderMap) -> Response {
    let Some(console) = &hub.shared.console else {
        return crate::routes::not_found("the console is off on this hub");
    };
    let body = match console.sessions.who(&headers) {
        Some(who) => json!({
            "signedIn": true,
            "id": who.id,
            "admin": who.admin,
            "csrf": who.csrf,
            "auth": methods(&hub),
        }),
        None => json!({ "signedIn": false, "auth": methods(&hub) }),
    };
    no_store(Json(body).into_response())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SignIn {
    kind: Kind,
    credential: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Kind {
    ApiKey,
    Bearer,
}

/// Longest credential a sign-in takes.
const MAX_CREDENTIAL: usize = 8 * 1024;

/// `POST /console/session`: checks the credential as the hub's APIs would,
/// then starts a session for it.
async fn sign_in(State(hub): State<Hub>, headers: HeaderMap, uri: Uri, body: Bytes) -> Response {
    let Some(console) = &hub.shared.console else {
        return crate::routes::not_found("the console is off on this hub");
    };
    // A cross-site form cannot send JSON without the browser asking first.
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return problem(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported media type",
            "sign in with a JSON body: {\"kind\": \"apiKey\" | \"bearer\", \"credential\": \"…\"}",
        );
    }
    if !session::same_origin(&headers, uri.authority(), &hub.shared.public_url) {
        return session::refused(&session::Refusal::CrossSite);
    }
    let form: SignIn = match serde_json::from_slice(&body) {
        Ok(f) => f,
        Err(_) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "Bad sign-in",
                "the body must be {\"kind\": \"apiKey\" | \"bearer\", \"credential\": \"…\"}",
            );
        }
    };
    let secret = form.credential.trim().to_owned();
    if secret.is_empty() || secret.len() > MAX_CREDENTIAL || secret.chars().any(char::is_control) {
        return problem(
            StatusCode::BAD_REQUEST,
            "Bad sign-in",
            "the credential must be 1 to 8192 printable characters",
        );
    }
    let credential = match form.kind {
        Kind::ApiKey => Credential::ApiKey(secret),
        Kind::Bearer => Credential::Bearer(secret),
    };
    // The credential is checked exactly as a request bearing it would be.
    // On a request of its own: nothing of the sign-in request (its query,
    // its headers) may stand in for the credential being checked.
    let mut probe = axum::http::Request::builder()
        .uri("/")
        .body(axum::body::Body::empty())
        .unwrap_or_default();
    session::present(
        &mut probe,
        &credential,
        hub.shared
            .auth
            .as_ref()
            .map(heddle_auth::Authenticator::key_location),
    );
    let (id, admin) = match crate::admin::identify(&hub, probe.headers(), probe.uri()).await {
        Ok(found) => found,
        Err(why) => {
            return problem(StatusCode::UNAUTHORIZED, "Not signed in", &why);
        }
    };
    // Signing in again ends the session the browser had.
    console.sessions.end(&headers);
    let Some((cookie, who)) = console.sessions.start(credential, id, admin) else {
        return problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not signed in",
            "the hub could not make a session token; try again",
        );
    };
    let mut r = no_store(
        Json(json!({ "signedIn": true, "id": who.id, "admin": who.admin, "csrf": who.csrf }))
            .into_response(),
    );
    if let Some(v) = console.sessions.set_cookie(&cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `DELETE /console/session` (the CSRF check ran before it: the session's
/// credential is on the request only when it passed).
async fn sign_out(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    let Some(console) = &hub.shared.console else {
        return crate::routes::not_found("the console is off on this hub");
    };
    if console.sessions.cookie(&headers).is_some()
        && !session::same_origin(&headers, uri.authority(), &hub.shared.public_url)
    {
        return session::refused(&session::Refusal::CrossSite);
    }
    console.sessions.end(&headers);
    let mut r = no_store(StatusCode::NO_CONTENT.into_response());
    r.headers_mut()
        .insert(header::SET_COOKIE, console.sessions.clear_cookie());
    r
}
