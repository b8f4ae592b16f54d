//! Console sessions: a credential the hub already accepts (an API key, a
//! bearer token, the admin token) exchanged once for a cookie, so the
//! browser never holds the secret in script-readable storage.
//!
//! The rule: a request that carries the session cookie and no credential of
//! its own gets the session's credential put back on it before any route
//! sees it ([`Sessions::apply`]), so the hub's APIs authenticate it exactly
//! as they would the credential itself: an API key gets an API key's rights,
//! never more. A state-changing request riding on the cookie must also carry
//! the session's CSRF token in `x-heddle-csrf` and, when the browser names
//! one, an `Origin` of the hub itself; the cookie is `SameSite=Strict`
//! besides. Secrets live only in this table, in memory: never logged, never
//! written to a page or a response.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use axum::{
    body::Body,
    extract::Request,
    http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header},
    response::Response,
};
use base64::Engine as _;
use ring::rand::SecureRandom as _;
use subtle::ConstantTimeEq as _;

/// The session cookie's name over plain http.
pub const COOKIE: &str = "heddle_console";
/// Its name over https: the `__Host-` prefix makes the browser refuse it
/// from any other host (a sibling subdomain cannot plant one) and keep it
/// `Secure` with `Path=/`.
pub const SECURE_COOKIE: &str = "__Host-heddle_console";
/// The header a state-changing request names its session's CSRF token in.
pub const CSRF_HEADER: &str = "x-heddle-csrf";
/// A session ends this long after sign-in, used or not.
pub const MAX_AGE: Duration = Duration::from_secs(12 * 60 * 60);
/// A session ends after this long without a request.
pub const IDLE: Duration = Duration::from_secs(60 * 60);
/// Most sessions held at once; past it the least recently used give way.
pub const MAX_SESSIONS: usize = 10_000;
/// Most sessions one caller holds; past it that caller's least recently
/// used gives way, so no one credential can push others out.
pub const MAX_PER_CALLER: usize = 8;

/// What a session presents on the caller's behalf.
#[derive(Clone)]
pub(crate) enum Credential {
    /// `Authorization: Bearer …` (a JWT, or the hub's admin token).
    Bearer(String),
    /// An API key, where the hub's authenticator looks for one.
    ApiKey(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credential::Bearer(_) => "Bearer(<redacted>)",
            Credential::ApiKey(_) => "ApiKey(<redacted>)",
        })
    }
}

/// Who a session is, as the console shows it.
#[derive(Clone, Debug)]
pub(crate) struct Who {
    /// The caller id the credential authenticates (`key:…`, `jwt:…`), or
    /// `admin` for the hub's admin token.
    pub(crate) id: String,
    /// Whether the admin API admits it.
    pub(crate) admin: bool,
    /// The token state-changing requests must repeat.
    pub(crate) csrf: String,
}

struct Session {
    credential: Credential,
    who: Who,
    created: Instant,
    seen: Instant,
}

/// Why a request riding on a session was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No or a wrong CSRF token.
    Csrf,
    /// The browser says the request came from another site.
    CrossSite,
}

/// The live sessions, keyed by the SHA-256 of their cookie.
pub(crate) struct Sessions {
    table: Mutex<HashMap<[u8; 32], Session>>,
    rng: ring::rand::SystemRandom,
    /// Whether the cookie gets `Secure` (the hub is reached over https).
    secure: bool,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("secure", &self.secure)
            .finish_non_exhaustive()
    }
}

fn digest(cookie: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, cookie.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Sessions {
    pub(crate) fn new(secure: bool) -> Self {
        Self {
            table: Mutex::new(HashMap::new()),
            rng: ring::rand::SystemRandom::new(),
            secure,
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        // Every change is one insert or remove: a poisoned table is whole.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn random(&self) -> Option<String> {
        let mut bytes = [0u8; 32];
        self.rng.fill(&mut bytes).ok()?;
        Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Starts a session; its cookie value and who it is. `None` only when
    /// the system's random source fails.
    pub(crate) fn start(
        &self,
        credential: Credential,
        id: String,
        admin: bool,
    ) -> Option<(String, Who)> {
        let cookie = self.random()?;
        let who = Who {
            id,
            admin,
            csrf: self.random()?,
        };
        let now = Instant::now();
        let mut table = self.table();
        table.retain(|_, s| live(s, now));
        let least_used = |table: &HashMap<[u8; 32], Session>, caller: Option<&str>| {
            table
                .iter()
                .filter(|(_, s)| caller.is_none_or(|c| s.who.id == c))
                .min_by_key(|(_, s)| s.seen)
                .map(|(k, _)| *k)
        };
        let own = table.values().filter(|s| s.who.id == who.id).count();
        if own >= MAX_PER_CALLER
            && let Some(k) = least_used(&table, Some(&who.id))
        {
            table.remove(&k);
        }
        if table.len() >= MAX_SESSIONS
            && let Some(k) = least_used(&table, None)
        {
            table.remove(&k);
        }
        table.insert(
            digest(&cookie),
            Session {
                credential,
                who: who.clone(),
                created: now,
                seen: now,
            },
        );
        Some((cookie, who))
    }

    /// The session of a request's cookie, marked as used.
    fn find(&self, headers: &HeaderMap) -> Option<(Credential, Who)> {
        let cookie = self.cookie(headers)?;
        let now = Instant::now();
        let mut table = self.table();
        let key = digest(cookie);
        let session = table.get_mut(&key)?;
        if !live(session, now) {
            table.remove(&key);
            return None;
        }
        session.seen = now;
        Some((session.credential.clone(), session.who.clone()))
    }

    /// Who the request's session is, if it has a live one.
    pub(crate) fn who(&self, headers: &HeaderMap) -> Option<Who> {
        self.find(headers).map(|(_, who)| who)
    }

    /// Ends the request's session.
    pub(crate) fn end(&self, headers: &HeaderMap) {
        if let Some(cookie) = self.cookie(headers) {
            self.table().remove(&digest(cookie));
        }
    }

    /// The cookie's name on this hub.
    fn name(&self) -> &'static str {
        if self.secure { SECURE_COOKIE } else { COOKIE }
    }

    /// The console's cookie value, when the request has exactly one (two
    /// mean one was planted: neither is used).
    pub(crate) fn cookie<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        let name = self.name();
        let mut found = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .filter(|(k, _)| *k == name)
            .map(|(_, v)| v.trim());
        let first = found.next()?;
        if found.next().is_some() || first.is_empty() || first.len() > 64 {
            return None;
        }
        Some(first)
    }

    /// The `Set-Cookie` value that starts a session.
    pub(crate) fn set_cookie(&self, value: &str) -> Option<HeaderValue> {
        let secure = if self.secure { "; Secure" } else { "" };
        HeaderValue::from_str(&format!(
            "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            self.name(),
            MAX_AGE.as_secs()
        ))
        .ok()
    }

    /// The `Set-Cookie` value that ends one.
    pub(crate) fn clear_cookie(&self) -> HeaderValue {
        if self.secure {
            HeaderValue::from_static(
                "__Host-heddle_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure",
            )
        } else {
            HeaderValue::from_static(
                "heddle_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
            )
        }
    }

    /// Puts the session's credential on a request that rides on its cookie
    /// and brings none of its own (`has_own` says whether it does). A
    /// state-changing request must name the session's CSRF token and come
    /// from the hub's own pages.
    pub(crate) fn apply(
        &self,
        mut req: Request,
        has_own: impl Fn(&HeaderMap, &Uri) -> bool,
        key_location: Option<&heddle_auth::KeyLocation>,
        public_url: &str,
    ) -> Result<Request, Refusal> {
        if !req.headers().contains_key(header::COOKIE) || has_own(req.headers(), req.uri()) {
            return Ok(req);
        }
        let Some((credential, who)) = self.find(req.headers()) else {
            return Ok(req);
        };
        if !is_safe(req.method()) {
            if !same_origin(req.headers(), req.uri().authority(), public_url) {
                return Err(Refusal::CrossSite);
            }
            let named = req
                .headers()
                .get(CSRF_HEADER)
                .map(HeaderValue::as_bytes)
                .unwrap_or_default();
            if !bool::from(named.ct_eq(who.csrf.as_bytes())) {
                return Err(Refusal::Csrf);
            }
        }
        present(&mut req, &credential, key_location);
        Ok(req)
    }
}

fn live(s: &Session, now: Instant) -> bool {
    now.duration_since(s.created) < MAX_AGE && now.duration_since(s.seen) < IDLE
}

/// GET, HEAD and OPTIONS change nothing, by HTTP's rules and the hub's.
fn is_safe(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether the browser says the request comes from the hub's own pages:
/// `Sec-Fetch-Site` (when sent) is `same-origin` or `none`, and `Origin`
/// (when sent) is the hub's public origin or the origin of the host it
/// was sent to (`Host`, or over HTTP/2 the URI's authority).
pub(crate) fn same_origin(
    headers: &HeaderMap,
    authority: Option<&axum::http::uri::Authority>,
    public_url: &str,
) -> bool {
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.as_bytes(), b"same-origin" | b"none")
    {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let public = url::Url::parse(public_url)
        .ok()
        .map(|u| u.origin().ascii_serialization());
    if public.as_deref() == Some(origin) {
        return true;
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| authority.map(axum::http::uri::Authority::as_str));
    match (url::Url::parse(origin), host) {
        (Ok(o), Some(host)) => {
            let port = o.port().map(|p| format!(":{p}")).unwrap_or_default();
            o.host_str()
                .is_some_and(|h| format!("{h}{port}").eq_ignore_ascii_case(host))
        }
        _ => false,
    }
}

/// Puts a credential on a request where the hub reads it.
pub(crate) fn present(
    req: &mut Request,
    credential: &Credential,
    key_location: Option<&heddle_auth::KeyLocation>,
) {
    match credential {
        Credential::Bearer(token) => {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                req.headers_mut().insert(header::AUTHORIZATION, v);
            }
        }
        Credential::ApiKey(key) => put_key(req, key, key_location),
    }
}

/// Puts an API key where the hub's authenticator reads one.
fn put_key(req: &mut Request, key: &str, location: Option<&heddle_auth::KeyLocation>) {
    use heddle_auth::KeyLocation;
    let default = KeyLocation::default();
    match location.unwrap_or(&default) {
        KeyLocation::Header(name) => {
            if let (Ok(n), Ok(v)) = (
                header::HeaderName::try_from(name.as_str()),
                HeaderValue::from_str(key),
            ) {
                req.headers_mut().insert(n, v);
            }
        }
        KeyLocation::Cookie(name) => {
            if let Ok(v) = HeaderValue::from_str(&format!("{name}={key}")) {
                req.headers_mut().append(header::COOKIE, v);
            }
        }
        KeyLocation::Query(name) => {
            let uri = req.uri();
            let pair: String = url::form_urlencoded::Serializer::new(String::new())
                .append_pair(name, key)
                .finish();
            let pq = match uri.query() {
                Some(q) if !q.is_empty() => format!("{}?{q}&{pair}", uri.path()),
                _ => format!("{}?{pair}", uri.path()),
            };
            let mut parts = uri.clone().into_parts();
            if let Ok(pq) = pq.parse() {
                parts.path_and_query = Some(pq);
                if let Ok(u) = Uri::from_parts(parts) {
                    *req.uri_mut() = u;
                }
            }
        }
    }
}

/// The refusal as the problem document the console shows.
pub(crate) fn refused(r: &Refusal) -> Response<Body> {
    let detail = match r {
        Refusal::Csrf => {
            "a request made with the console's session must carry its CSRF token (x-heddle-csrf)"
        }
        Refusal::CrossSite => {
            "a request made with the console's session must come from the hub's own pages"
        }
    };
    crate::admin::problem(StatusCode::FORBIDDEN, "Cross-site request refused", detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, cookie: &str, csrf: Option<&str>, origin: Option<&str>) -> Request {
        let mut b = axum::http::Request::builder()
            .method(method)
            .uri("/api/v1/admin/agents")
            .header(header::HOST, "hub.test:8080")
            .header(header::COOKIE, format!("other=1; {COOKIE}={cookie}"));
        if let Some(c) = csrf {
            b = b.header(CSRF_HEADER, c);
        }
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::empty()).expect("test value")
    }

    const URL: &str = "http://hub.test:8080";

    /// `apply` for a request with no credential of its own, on the default
    /// key location.
    fn apply(s: &Sessions, req: Request) -> Result<Request, Refusal> {
        s.apply(req, |_, _| false, None, URL)
    }

    #[test]
    fn a_session_puts_its_credential_on_a_read() {
        let s = Sessions::new(false);
        let (cookie, _) = s
            .start(Credential::Bearer("t0ken".into()), "admin".into(), true)
            .expect("test value");
        let req = apply(&s, request(Method::GET, &cookie, None, None)).expect("test value");
        assert_eq!(req.headers()[header::AUTHORIZATION], "Bearer t0ken");
    }

    #[test]
    fn a_write_without_the_csrf_token_or_from_another_site_is_refused() {
        let s = Sessions::new(false);
        let (cookie, who) = s
            .start(Credential::ApiKey("k".into()), "key:1".into(), false)
            .expect("test value");
        let r = apply(&s, request(Method::POST, &cookie, None, None));
        assert_eq!(r.err(), Some(Refusal::Csrf));
        let r = apply(&s, request(Method::POST, &cookie, Some("wrong"), None));
        assert_eq!(r.err(), Some(Refusal::Csrf));
        let r = apply(
            &s,
            request(
                Method::POST,
                &cookie,
                Some(&who.csrf),
                Some("https://evil.example"),
            ),
        );
        assert_eq!(r.err(), Some(Refusal::CrossSite));
        let req = apply(
            &s,
            request(Method::POST, &cookie, Some(&who.csrf), Some(URL)),
        )
        .expect("test value");
        assert_eq!(req.headers()["api-key"], "k");
    }

    #[test]
    fn an_unknown_or_ended_cookie_adds_nothing() {
        let s = Sessions::new(false);
        let req = apply(&s, request(Method::GET, "nope", None, None)).expect("test value");
        assert!(!req.headers().contains_key("api-key"));
        let (cookie, _) = s
            .start(Credential::ApiKey("k".into()), "key:1".into(), false)
            .expect("test value");
        s.end(&request(Method::GET, &cookie, None, None).headers().clone());
        let req = apply(&s, request(Method::GET, &cookie, None, None)).expect("test value");
        assert!(!req.headers().contains_key("api-key"));
    }

    #[test]
    fn a_request_with_its_own_credential_keeps_it() {
        let s = Sessions::new(false);
        let (cookie, _) = s
            .start(Credential::Bearer("admin".into()), "admin".into(), true)
            .expect("test value");
        let req = s
            .apply(
                request(Method::POST, &cookie, None, None),
                |_, _| true,
                None,
                URL,
            )
            .expect("test value");
        assert!(!req.headers().contains_key(header::AUTHORIZATION));
    }

    #[test]
    fn a_key_read_from_the_query_is_appended_to_it() {
        let s = Sessions::new(false);
        let (cookie, _) = s
            .start(Credential::ApiKey("k/1".into()), "key:1".into(), false)
            .expect("test value");
        let loc = heddle_auth::KeyLocation::Query("key".into());
        let req = s
            .apply(
                request(Method::GET, &cookie, None, None),
                |_, _| false,
                Some(&loc),
                URL,
            )
            .expect("test value");
        assert_eq!(req.uri().query(), Some("key=k%2F1"));
    }

    #[test]
    fn one_caller_cannot_push_others_sessions_out() {
        let s = Sessions::new(false);
        let (admin, _) = s
            .start(Credential::Bearer("t".into()), "admin".into(), true)
            .expect("test value");
        let mut mine = Vec::new();
        for _ in 0..(MAX_PER_CALLER * 3) {
            mine.push(
                s.start(Credential::ApiKey("k".into()), "key:1".into(), false)
                    .expect("test value")
                    .0,
            );
        }
        let live = |c: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::COOKIE,
                HeaderValue::from_str(&format!("{COOKIE}={c}")).expect("test value"),
            );
            s.who(&h).is_some()
        };
        assert!(live(&admin), "another caller's session stays");
        assert_eq!(mine.iter().filter(|c| live(c)).count(), MAX_PER_CALLER);
        assert!(live(mine.last().expect("test value")), "the newest stays");
    }

    #[test]
    fn two_console_cookies_mean_no_session() {
        let s = Sessions::new(false);
        let (cookie, _) = s
            .start(Credential::ApiKey("k".into()), "key:1".into(), false)
            .expect("test value");
        let req = request(Method::GET, &cookie, None, None);
        let mut headers = req.headers().clone();
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("heddle_console=planted"),
        );
        assert!(s.who(&headers).is_none());
    }

    #[test]
    fn over_http2_the_uris_authority_stands_for_the_host() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://alias.test"),
        );
        let authority: axum::http::uri::Authority = "alias.test".parse().expect("test value");
        assert!(same_origin(&h, Some(&authority), "https://hub.test"));
        assert!(!same_origin(&h, None, "https://hub.test"));
        let other: axum::http::uri::Authority = "hub.test".parse().expect("test value");
        assert!(!same_origin(&h, Some(&other), "https://hub.test"));
    }

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_over_tls() {
        let v = Sessions::new(true).set_cookie("abc").expect("test value");
        let v = v.to_str().expect("test value");
        assert!(v.contains("HttpOnly") && v.contains("SameSite=Strict") && v.contains("Secure"));
        assert!(v.starts_with("__Host-heddle_console="), "{v}");
        assert!(
            !Sessions::new(false)
                .set_cookie("abc")
                .expect("test value")
                .to_str()
                .expect("test value")
                .contains("Secure")
        );
    }
}
