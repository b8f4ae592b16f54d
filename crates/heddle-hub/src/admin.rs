//! The admin API: register, read, change and remove agents while the hub
//! runs.
//!
//! ```text
//! GET    /api/v1/admin/agents                every registration
//! POST   /api/v1/admin/agents                register (an agent entry, or an a2ahub manifest)
//! GET    /api/v1/admin/agents/{id}           one registration
//! PUT    /api/v1/admin/agents/{id}           replace it
//! DELETE /api/v1/admin/agents/{id}           remove it
//! POST   /api/v1/admin/agents/{id}/refresh   re-fetch a remote agent's card
//! ```
//!
//! Wallets and earnings have admin routes too (`crate::market::wallets`).
//!
//! Only admins get in ([`AdminAccess`]): a caller presenting the hub's admin
//! token, or one the hub's authenticator verifies whose id is listed as an
//! admin or whose token grants the admin scope. Errors are RFC 9457 problem
//! documents (`application/problem+json`); a manifest that breaks its
//! schema is 422 with every violation and its JSON pointer.

use std::sync::Arc;

use axum::{
    Json, Router,
    body::Body,
    extract::{Path, State},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use serde_json::{Value, json};
use subtle::ConstantTimeEq as _;

use crate::{Hub, RegistryError, registry::AgentEntry};

/// The scope a bearer token needs to use the admin API, unless the hub
/// names another ([`AdminAccess::scope`]).
pub const ADMIN_SCOPE: &str = "heddle:admin";

/// Largest admin request body (a registration with its manifest).
pub const MAX_ADMIN_BODY: usize = 1 << 20;

/// Who may use the admin API. The default lets nobody in.
#[derive(Clone)]
pub struct AdminAccess {
    token: Option<Arc<str>>,
    callers: Vec<String>,
    scope: String,
}

impl Default for AdminAccess {
    fn default() -> Self {
        Self {
            token: None,
            callers: Vec::new(),
            scope: ADMIN_SCOPE.to_owned(),
        }
    }
}

impl std::fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminAccess")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("callers", &self.callers)
            .field("scope", &self.scope)
            .finish()
    }
}

impl AdminAccess {
    /// Admits a request bearing `Authorization: Bearer {token}` (compared in
    /// constant time). Meant for the operator's own tools; keep it secret.
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Arc::from(token.into()));
        self
    }

    /// Admits the caller `id` once the hub's authenticator verifies it
    /// (`key:{id}` for an API key, `jwt:{iss}#{sub}` for a token).
    #[must_use]
    pub fn caller(mut self, id: impl Into<String>) -> Self {
        self.callers.push(id.into());
        self
    }

    /// The scope that makes a verified bearer token an admin's (default
    /// [`ADMIN_SCOPE`]).
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = scope.into();
        self
    }

    fn token_matches(&self, headers: &HeaderMap) -> bool {
        let (Some(token), Some(bearer)) = (&self.token, bearer(headers)) else {
            return false;
        };
        bool::from(token.as_bytes().ct_eq(bearer.as_bytes()))
    }

    fn admits(&self, p: &heddle_auth::Principal) -> bool {
        self.callers.contains(&p.id) || p.scopes.contains(&self.scope)
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Who is looking, for what discovery shows.
#[derive(Clone, Debug, Default)]
pub(crate) struct Viewer {
    id: Option<String>,
    admin: bool,
}

impl Viewer {
    /// The caller as far as its credentials verify; bad or absent
    /// credentials make an anonymous viewer (discovery is public).
    pub(crate) async fn of(hub: &Hub, headers: &HeaderMap, uri: &Uri) -> Self {
        if hub.shared.admin.token_matches(headers) {
            return Self {
                id: None,
                admin: true,
            };
        }
        let Some(auth) = &hub.shared.auth else {
            return Self::default();
        };
        match auth.authenticate(headers, uri).await {
            Ok(Some(p)) => Self {
                admin: hub.shared.admin.admits(&p),
                id: Some(p.id),
            },
            _ => Self::default(),
        }
    }

    /// Whether a non-public agent owned by `owner` is shown.
    pub(crate) fn may_see(&self, owner: Option<&str>) -> bool {
        self.admin || (self.id.is_some() && self.id.as_deref() == owner)
    }
}

/// Who a credential is (`admin` for the hub's admin token) and whether
/// the admin API admits it; why not, when the hub does not accept it. The
/// reason never repeats the credential.
pub(crate) async fn identify(
    hub: &Hub,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<(String, bool), String> {
    if hub.shared.admin.token_matches(headers) {
        return Ok(("admin".to_owned(), true));
    }
    let Some(auth) = &hub.shared.auth else {
        return Err(
            "this hub takes no credentials but its admin token; its agents are open to everyone without signing in"
                .to_owned(),
        );
    };
    match auth.authenticate(headers, uri).await {
        Ok(Some(p)) => {
            let admin = hub.shared.admin.admits(&p);
            Ok((p.id, admin))
        }
        Ok(None) => Err("the hub found no credential to check".to_owned()),
        Err(e) => Err(format!(
            "the hub refused the credential: {}",
            e.to_a2a().message
        )),
    }
}

/// The admin, or the refusal to answer.
pub(crate) async fn admit(
    hub: &Hub,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Option<String>, Response> {
    if hub.shared.admin.token_matches(headers) {
        return Ok(None);
    }
    let Some(auth) = &hub.shared.auth else {
        return Err(unauthorized());
    };
    match auth.authenticate(headers, uri).await {
        Ok(Some(p)) if hub.shared.admin.admits(&p) => Ok(Some(p.id)),
        Ok(Some(_)) => Err(problem(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "this caller is not an admin of the hub",
        )),
        Ok(None) => Err(unauthorized()),
        Err(e) => Err(refused(auth, &e)),
    }
}

/// A credential the authenticator refuses, as a problem document with the
/// status and challenges the authenticator gives it.
fn refused(auth: &heddle_auth::Authenticator, e: &heddle_auth::AuthError) -> Response {
    let reply: Response = heddle_auth::reject::response(auth, heddle_server::Binding::Rest, e);
    let status = reply.status();
    let mut r = problem(
        status,
        status.canonical_reason().unwrap_or("Refused"),
        &e.to_a2a().message,
    );
    for challenge in reply.headers().get_all(header::WWW_AUTHENTICATE) {
        r.headers_mut()
            .append(header::WWW_AUTHENTICATE, challenge.clone());
    }
    r
}

fn unauthorized() -> Response {
    let mut r = problem(
        StatusCode::UNAUTHORIZED,
        "Unauthorized",
        "the admin API needs an admin's credentials (the hub's admin token as a bearer token, or a credential the hub lists as an admin)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"heddle-admin\""),
    );
    r
}

/// An RFC 9457 problem document.
pub(crate) fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    problem_with(status, title, detail, None)
}

fn problem_with(status: StatusCode, title: &str, detail: &str, errors: Option<Value>) -> Response {
    let mut body = json!({
        "type": "about:blank",
        "title": title,
        "status": status.as_u16(),
        "detail": detail,
    });
    if let Some(errors) = errors {
        body["errors"] = errors;
    }
    let mut r = (status, Json(body)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    r
}

fn registry_error(e: &RegistryError) -> Response {
    match e {
        RegistryError::Invalid(e) => problem_with(
            StatusCode::BAD_REQUEST,
            "Invalid registration",
            &e.to_string(),
            // `llm.model` is the pointer `/llm/model`.
            Some(
                json!([{ "pointer": format!("/{}", e.field.replace('.', "/")), "detail": e.problem }]),
            ),
        ),
        RegistryError::Manifest(violations) => {
            let violations: Vec<crate::manifest::Violation> = violations
                .iter()
                .map(|(pointer, message)| crate::manifest::Violation {
                    pointer: pointer.clone(),
                    message: message.clone(),
                })
                .collect();
            let (status, body) = crate::manifest::problem(&violations);
            let mut r = (status, Json(body)).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(crate::manifest::PROBLEM_CONTENT_TYPE),
            );
            r
        }
        RegistryError::UnknownBuiltin(..) => {
            problem(StatusCode::BAD_REQUEST, "Unknown builtin", &e.to_string())
        }
        RegistryError::Exists(_) => problem(StatusCode::CONFLICT, "Conflict", &e.to_string()),
        RegistryError::NotFound(_) => problem(StatusCode::NOT_FOUND, "Not found", &e.to_string()),
        RegistryError::Upstream(_) => {
            problem(StatusCode::BAD_GATEWAY, "Upstream agent", &e.to_string())
        }
        RegistryError::Llm(_) => problem(StatusCode::BAD_REQUEST, "LLM agent", &e.to_string()),
        RegistryError::Mcp(_) => problem(StatusCode::BAD_GATEWAY, "MCP server", &e.to_string()),
        RegistryError::Store(err) => {
            tracing::error!(error = %err, "admin API: registry store");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Registry store",
                "the registry could not be read or written; see the hub's log",
            )
        }
    }
}

/// The admin routes, with the hub as state.
pub(crate) fn routes() -> Router<Hub> {
    Router::new()
        .route("/api/v1/admin/agents", get(list).post(create))
        .route(
            "/api/v1/admin/agents/{id}",
            get(read).put(replace).delete(remove),
        )
        .route("/api/v1/admin/agents/{id}/refresh", post(refresh))
}

fn shown(hub: &Hub, entry: &AgentEntry) -> Value {
    let mut v = serde_json::to_value(entry).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        // The normalised form: the defaults the document leaves out, spelled.
        o.insert("enabled".into(), json!(entry.enabled));
        o.insert("public".into(), json!(entry.public));
        o.insert(
            "cardUrl".into(),
            json!(format!(
                "{}/.well-known/agent-card.json",
                Hub::agent_url(&hub.shared.public_url, &entry.id)
            )),
        );
    }
    v
}

async fn list(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let agents: Vec<Value> = hub.entries().iter().map(|e| shown(&hub, e)).collect();
    Json(json!({ "agents": agents, "builtins": hub.builtins() })).into_response()
}

async fn read(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    match hub.entry(&id) {
        Some(e) => Json(shown(&hub, &e)).into_response(),
        None => registry_error(&RegistryError::NotFound(id)),
    }
}

/// The upstream card's signature check is the hub's to say, not the
/// body's: it stands only while the body keeps the card URL and card the
/// hub checked (as a changed entry sent back whole does), and is made again
/// when the card is fetched. (The other fields the hub fills, `warnings`
/// and `mcp_tools`, claim nothing a caller would trust.)
fn keep_hub_facts(hub: &Hub, entry: &mut AgentEntry) {
    entry.upstream_signature = hub
        .entry(&entry.id)
        .filter(|e| e.card_url == entry.card_url && e.upstream_card == entry.upstream_card)
        .and_then(|e| e.upstream_signature);
}

/// The request body as a registration: an agent entry, or a bare a2ahub
/// manifest (an object with `agent_name` and no `kind`), which becomes a
/// remote entry for the manifest's `endpoint`, with the id `id` (from the
/// query) or one made from the agent name.
async fn entry_from(body: Body, id: Option<&str>) -> Result<AgentEntry, Response> {
    let bytes = axum::body::to_bytes(body, MAX_ADMIN_BODY)
        .await
        .map_err(|_| {
            problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                &format!("a registration is at most {MAX_ADMIN_BODY} bytes"),
            )
        })?;
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| {
        problem(
            StatusCode::BAD_REQUEST,
            "Not JSON",
            &format!("the body is not JSON: {e}"),
        )
    })?;
    if doc.get("agent_name").is_some() && doc.get("kind").is_none() {
        return Ok(from_manifest(doc, id));
    }
    serde_json::from_value(doc).map_err(|e| {
        problem(
            StatusCode::BAD_REQUEST,
            "Invalid registration",
            &format!("not an agent entry: {e}"),
        )
    })
}

/// The remote entry a bare manifest registers. The manifest is checked
/// when the entry is built (422 with every violation); until then its
/// fields are only read where present.
fn from_manifest(doc: Value, id: Option<&str>) -> AgentEntry {
    let id = id.map_or_else(
        || {
            let mut id = crate::registry::slug(doc["agent_name"].as_str().unwrap_or_default());
            id.truncate(crate::registry::MAX_ID_LEN);
            id.trim_end_matches('-').to_owned()
        },
        str::to_owned,
    );
    let endpoint = doc["endpoint"].as_str().unwrap_or_default().to_owned();
    let mut entry = AgentEntry::remote(id, endpoint);
    entry.manifest = Some(doc);
    entry
}

/// The `id` query parameter, if any.
fn id_param(uri: &Uri) -> Option<String> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "id")
        .map(|(_, v)| v.into_owned())
}

async fn create(State(hub): State<Hub>, headers: HeaderMap, uri: Uri, body: Body) -> Response {
    let admin = match admit(&hub, &headers, &uri).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let mut entry = match entry_from(body, id_param(&uri).as_deref()).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    if entry.owner.is_none() {
        entry.owner = admin;
    }
    keep_hub_facts(&hub, &mut entry);
    match hub.register(entry).await {
        Ok(e) => {
            let location = format!("/api/v1/admin/agents/{}", e.id);
            let mut r = (StatusCode::CREATED, Json(shown(&hub, &e))).into_response();
            if let Ok(v) = HeaderValue::from_str(&location) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        }
        Err(e) => registry_error(&e),
    }
}

async fn replace(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    let mut entry = match entry_from(body, Some(&id)).await {
        Ok(e) => e,
        Err(r) => return r,
    };
    if entry.id != id {
        return problem(
            StatusCode::BAD_REQUEST,
            "Invalid registration",
            "the body's id is not the one in the path (an agent's id cannot change)",
        );
    }
    if entry.owner.is_none() {
        entry.owner = hub.entry(&id).and_then(|e| e.owner);
    }
    keep_hub_facts(&hub, &mut entry);
    match hub.update(entry).await {
        Ok(e) => Json(shown(&hub, &e)).into_response(),
        Err(e) => registry_error(&e),
    }
}

async fn remove(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    match hub.remove(&id).await {
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => registry_error(&e),
    }
}

async fn refresh(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    match hub.refresh(&id).await {
        Ok(e) => Json(shown(&hub, &e)).into_response(),
        Err(e) => registry_error(&e),
    }
}
