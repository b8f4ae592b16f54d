//! OAuth 2.0 client-credentials grant (RFC 6749 §4.4).
//!
//! A [`TokenSource`] posts `grant_type=client_credentials` (client id and
//! secret in the form body, RFC 6749 §2.3.1) to the token endpoint, caches
//! the access token until shortly before it expires and fetches a new one
//! afterwards. Clones share one cache. The secret and the token are held as
//! [`Secret`]s and never logged.
//!
//! # Where the secret goes
//!
//! The client secret is sent only to an `https` token URL that
//!
//! * the user configured ([`ClientCredentials::token_url`], the CLI's
//!   `--oauth-token-url`), or
//! * a card whose signature verified names (discovery with
//!   [`crate::ClientOptions::card_verification`] set), or
//! * is on the card's own origin: the scheme, host and port of the URL the
//!   card was fetched from ([`crate::A2aClient::discover`]; a card handed to
//!   [`crate::A2aClient::from_card`] has no known origin).
//!
//! Plain `http` is refused, except for a loopback host (`127.0.0.0/8`, `::1`,
//! `localhost`) that the user configured. A refused URL is never contacted:
//! the call fails with [`ClientError::TokenUrlRefused`], naming the rule
//! ([`TokenUrlRefusal`]). Token requests made by a client this crate builds
//! follow no redirects (a 307 or 308 would resend the secret wherever it
//! points); a caller-supplied [`crate::ClientOptions::http`] is used as it is.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use heddle_core::v1::{self, o_auth_flows::Flow, security_scheme::Scheme};
use serde::Deserialize;

use crate::{ClientError, Secret};

/// A token is refreshed this long before it expires.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// Largest token endpoint answer read.
const MAX_TOKEN_RESPONSE: usize = 64 << 10;
/// How long a token without `expires_in` is used.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// The longest a token is used, whatever its `expires_in` says.
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The client-credentials grant's parameters.
///
/// The secret is sent only to an `https` token URL that the user configured
/// (`token_url`), that a card whose signature verified names, or that is on
/// the card's own origin (the scheme, host and port the card was fetched
/// from, known to [`crate::A2aClient::discover`] but not to
/// [`crate::A2aClient::from_card`]). Plain `http` is allowed only for a
/// configured loopback URL (`127.0.0.0/8`, `::1`, `localhost`). Anything else
/// is a [`ClientError::TokenUrlRefused`], and the URL is not contacted.
#[derive(Clone, Debug)]
pub struct ClientCredentials {
    /// The token endpoint; empty means "the card's `clientCredentials` flow's `tokenUrl`".
    pub token_url: String,
    /// `client_id`.
    pub client_id: String,
    /// `client_secret` (redacted by `Debug`).
    pub client_secret: Secret,
    /// Scopes requested (sent space-separated; omitted when empty).
    pub scopes: Vec<String>,
}

/// The token endpoint of the card's first OAuth 2.0 scheme with a
/// client-credentials flow.
pub fn token_url_from_card(card: &v1::AgentCard) -> Option<String> {
    card.security_schemes
        .values()
        .find_map(|s| match &s.scheme {
            Some(Scheme::Oauth2SecurityScheme(o)) => match o.flows.as_ref()?.flow.as_ref()? {
                Flow::ClientCredentials(cc) if !cc.token_url.is_empty() => {
                    Some(cc.token_url.clone())
                }
                _ => None,
            },
            _ => None,
        })
}

/// Why the client secret is not sent to a token URL (the rules are on
/// [`ClientCredentials`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TokenUrlRefusal {
    /// Not an absolute `https` (or `http`) URL.
    #[error("the token URL must be an absolute https URL")]
    NotHttps,
    /// Plain `http` to a host that is not loopback, or not configured by the user.
    #[error("plain http is allowed only for a loopback token URL the user configured")]
    PlainHttp,
    /// An `https` URL from a card that did not verify, off the card's origin.
    #[error(
        "a token URL from the card is used only when the card's signature verified \
         or the URL is on the card's own origin"
    )]
    UntrustedCard,
}

/// Where a token URL came from, which decides whether the secret may go there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UrlSource {
    /// Configured by the user.
    Configured,
    /// Named by the card.
    Card {
        /// Whether the card's signature verified.
        verified: bool,
        /// The URL the card was fetched from, when known.
        card_url: Option<String>,
    },
}

/// Whether `url` names a loopback host.
fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.trim_start_matches('[').trim_end_matches(']').parse() {
        Ok(std::net::IpAddr::V4(a)) => a.is_loopback(),
        Ok(std::net::IpAddr::V6(a)) => {
            a.is_loopback() || a.to_ipv4_mapped().is_some_and(|a| a.is_loopback())
        }
        Err(_) => false,
    }
}

/// Checks that the client secret may be sent to `url`, from `source`.
pub(crate) fn check_token_url(url: &str, source: &UrlSource) -> Result<(), ClientError> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Err(ClientError::TokenUrlRefused {
            url: "(not a URL)".into(),
            rule: TokenUrlRefusal::NotHttps,
        });
    };
    // Shown without user info, query or fragment.
    let refuse = |rule| ClientError::TokenUrlRefused {
        url: format!("{}{}", parsed.origin().ascii_serialization(), parsed.path()),
        rule,
    };
    let configured = *source == UrlSource::Configured;
    match parsed.scheme() {
        "https" => {}
        "http" if configured && is_loopback(&parsed) => return Ok(()),
        "http" => return Err(refuse(TokenUrlRefusal::PlainHttp)),
        _ => return Err(refuse(TokenUrlRefusal::NotHttps)),
    }
    match source {
        UrlSource::Configured | UrlSource::Card { verified: true, .. } => Ok(()),
        UrlSource::Card {
            card_url: Some(card_url),
            ..
        } if reqwest::Url::parse(card_url).is_ok_and(|c| c.origin() == parsed.origin()) => Ok(()),
        UrlSource::Card { .. } => Err(refuse(TokenUrlRefusal::UntrustedCard)),
    }
}

/// What is known of a card: where it was fetched from, and whether its
/// signature verified.
#[derive(Clone, Debug, Default)]
pub(crate) struct CardOrigin {
    pub(crate) card_url: Option<String>,
    pub(crate) verified: bool,
}

/// The token source `opts` describe, when OAuth 2.0 is configured and no
/// static bearer is; an empty token URL is taken from the card (and trusted
/// as `origin` allows). Token requests go through `opts`' own HTTP client
/// when it has one, else through a new one that follows no redirects.
pub(crate) fn source_for(
    card: &v1::AgentCard,
    opts: &crate::ClientOptions,
    origin: &CardOrigin,
) -> Result<Option<TokenSource>, ClientError> {
    if opts.credentials.bearer.is_some() {
        return Ok(None);
    }
    let Some(mut cc) = opts.credentials.oauth2.clone() else {
        return Ok(None);
    };
    let mut source = UrlSource::Configured;
    if cc.token_url.is_empty() {
        cc.token_url = token_url_from_card(card).unwrap_or_default();
        source = UrlSource::Card {
            verified: origin.verified,
            card_url: origin.card_url.clone(),
        };
    }
    let http = match &opts.http {
        Some(http) => http.clone(),
        None => opts
            .tls
            .apply(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("heddle/", env!("CARGO_PKG_VERSION"))),
            )?
            .build()?,
    };
    Ok(Some(TokenSource::with_source(cc, http, source)))
}

#[derive(Clone)]
struct Cached {
    token: Secret,
    /// When the token stops being used (expiry minus the margin).
    refresh_at: Instant,
}

struct Inner {
    creds: ClientCredentials,
    /// Where the token URL came from.
    url_source: UrlSource,
    http: reqwest::Client,
    margin: Duration,
    cache: Mutex<Option<Cached>>,
    /// Serializes fetches so concurrent callers make one request.
    fetching: tokio::sync::Mutex<()>,
}

/// A cached source of access tokens from the client-credentials grant.
#[derive(Clone)]
pub struct TokenSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("token_url", &self.inner.creds.token_url)
            .field("client_id", &self.inner.creds.client_id)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenError {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

impl TokenSource {
    /// A source for `creds` (whose `token_url` must be set, and is taken as
    /// configured by the user) using `http`, whose redirect policy applies to
    /// token requests.
    pub fn new(creds: ClientCredentials, http: reqwest::Client) -> Self {
        Self::with_source(creds, http, UrlSource::Configured)
    }

    fn with_source(creds: ClientCredentials, http: reqwest::Client, url_source: UrlSource) -> Self {
        Self::with_margin(creds, http, url_source, EXPIRY_MARGIN)
    }

    fn with_margin(
        creds: ClientCredentials,
        http: reqwest::Client,
        url_source: UrlSource,
        margin: Duration,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                creds,
                url_source,
                http,
                margin,
                cache: Mutex::new(None),
                fetching: tokio::sync::Mutex::new(()),
            }),
        }
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        self.inner
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn fresh(&self) -> Option<Secret> {
        self.cache()
            .as_ref()
            .filter(|c| Instant::now() < c.refresh_at)
            .map(|c| c.token.clone())
    }

    /// Forgets the cached token (e.g. after the agent answered 401), so the
    /// next [`TokenSource::token`] fetches a new one.
    pub fn invalidate(&self) {
        *self.cache() = None;
    }

    /// A valid access token: the cached one, or a new one from the token endpoint.
    pub async fn token(&self) -> Result<Secret, ClientError> {
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let _guard = self.inner.fetching.lock().await;
        // Another caller may have fetched while this one waited.
        if let Some(t) = self.fresh() {
            return Ok(t);
        }
        let (token, lifetime) = self.fetch().await?;
        let now = Instant::now();
        // `lifetime` is at most a day, but an `Instant` near its end of range
        // could still overflow: then the token is used for this call only.
        let refresh_at = now
            .checked_add(lifetime.saturating_sub(self.inner.margin))
            .unwrap_or(now);
        *self.cache() = Some(Cached {
            token: token.clone(),
            refresh_at,
        });
        Ok(token)
    }

    async fn fetch(&self) -> Result<(Secret, Duration), ClientError> {
        let c = &self.inner.creds;
        if c.token_url.is_empty() {
            return Err(ClientError::Card(
                "OAuth 2.0: no token URL given and the card has no clientCredentials flow".into(),
            ));
        }
        check_token_url(&c.token_url, &self.inner.url_source)?;
        let mut body = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}",
            form_encode(&c.client_id),
            form_encode(c.client_secret.expose())
        );
        if !c.scopes.is_empty() {
            body.push_str("&scope=");
            body.push_str(&form_encode(&c.scopes.join(" ")));
        }
        tracing::debug!(token_url = %c.token_url, client_id = %c.client_id, "fetching OAuth 2.0 token");
        let resp = self
            .inner
            .http
            .post(&c.token_url)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .timeout(Duration::from_secs(30))
            .body(body)
            .send()
            .await?;
        let status = resp.status();
        let bytes =
            crate::body::read_limited(resp, MAX_TOKEN_RESPONSE, "OAuth 2.0 token response").await?;
        if !status.is_success() {
            let message = match serde_json::from_slice::<TokenError>(&bytes) {
                Ok(e) => match e.error_description {
                    Some(d) => format!("OAuth 2.0 token endpoint: {}: {d}", e.error),
                    None => format!("OAuth 2.0 token endpoint: {}", e.error),
                },
                Err(_) => format!(
                    "OAuth 2.0 token endpoint: {}",
                    String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                ),
            };
            return Err(ClientError::Http {
                status: status.as_u16(),
                message,
                retry_after: None,
            });
        }
        let t: TokenResponse = serde_json::from_slice(&bytes)
            .map_err(|e| ClientError::InvalidResponse(format!("OAuth 2.0 token response: {e}")))?;
        if let Some(tt) = t
            .token_type
            .as_ref()
            .filter(|tt| !tt.eq_ignore_ascii_case("bearer"))
        {
            return Err(ClientError::InvalidResponse(format!(
                "OAuth 2.0 token type {tt:?} is not Bearer"
            )));
        }
        if t.access_token.is_empty() {
            return Err(ClientError::InvalidResponse(
                "OAuth 2.0 token response: empty access_token".into(),
            ));
        }
        // The peer's number: clamped before any arithmetic.
        let lifetime = t.expires_in.map_or(DEFAULT_LIFETIME, |s| {
            Duration::from_secs(s.min(MAX_LIFETIME.as_secs()))
        });
        Ok((Secret::new(t.access_token), lifetime))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    type Handler = dyn Fn(&str, &str) -> (u16, String) + Send + Sync;

    /// A raw HTTP/1.1 server answering each request (head, body) with `handler`'s
    /// status and JSON body; returns its base URL.
    async fn serve(handler: Arc<Handler>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Read the head, then Content-Length bytes of body.
                let (head_end, len) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break (0, 0);
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (i + 4, len);
                    }
                };
                if head_end == 0 {
                    continue;
                }
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
                let (status, body) = handler(&head, &body);
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            }
        });
        format!("http://{addr}")
    }

    /// A token endpoint answering every request with `status` and `body`
    /// (`{n}` replaced by the request count); returns its URL, the request
    /// count and the last request body.
    async fn token_server(
        status: u16,
        body: &'static str,
    ) -> (String, Arc<AtomicUsize>, Arc<Mutex<String>>) {
        let count = Arc::new(AtomicUsize::new(0));
        let last = Arc::new(Mutex::new(String::new()));
        let (c, l) = (count.clone(), last.clone());
        let base = serve(Arc::new(move |_head: &str, req: &str| {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            *l.lock().expect("lock") = req.to_owned();
            (status, body.replace("{n}", &n.to_string()))
        }))
        .await;
        (format!("{base}/token"), count, last)
    }

    fn creds(url: &str) -> ClientCredentials {
        ClientCredentials {
            token_url: url.into(),
            client_id: "my client".into(),
            client_secret: Secret::new("s3cr&t"),
            scopes: vec!["a".into(), "b".into()],
        }
    }

    #[tokio::test]
    async fn token_is_cached_and_request_is_a_form() {
        let (url, count, last) = token_server(
            200,
            r#"{"access_token":"tok{n}","token_type":"Bearer","expires_in":3600}"#,
        )
        .await;
        let ts = TokenSource::new(creds(&url), reqwest::Client::new());
        assert_eq!(ts.token().await.expect("token").expose(), "tok1");
        assert_eq!(ts.clone().token().await.expect("token").expose(), "tok1");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert_eq!(
            *last.lock().expect("lock"),
            "grant_type=client_credentials&client_id=my+client&client_secret=s3cr%26t&scope=a+b"
        );
        // Invalidation forces a new fetch.
        ts.invalidate();
        assert_eq!(ts.token().await.expect("token").expose(), "tok2");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn expired_token_is_refreshed() {
        let (url, count, _) = token_server(
            200,
            r#"{"access_token":"tok{n}","token_type":"bearer","expires_in":1}"#,
        )
        .await;
        let ts = TokenSource::with_margin(
            creds(&url),
            reqwest::Client::new(),
            UrlSource::Configured,
            Duration::from_millis(200),
        );
        assert_eq!(ts.token().await.expect("token").expose(), "tok1");
        assert_eq!(ts.token().await.expect("token").expose(), "tok1");
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(ts.token().await.expect("token").expose(), "tok2");
        assert_eq!(count.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn no_expires_in_caches_for_five_minutes() {
        let (url, count, _) =
            token_server(200, r#"{"access_token":"t","token_type":"Bearer"}"#).await;
        let ts = TokenSource::new(creds(&url), reqwest::Client::new());
        ts.token().await.expect("token");
        ts.token().await.expect("token");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        let left = ts.cache().as_ref().expect("cached").refresh_at - Instant::now();
        assert!(left > Duration::from_secs(260) && left <= Duration::from_secs(270));
    }

    #[tokio::test]
    async fn a_huge_expires_in_is_clamped_to_a_day() {
        let (url, count, _) = token_server(
            200,
            r#"{"access_token":"t","token_type":"Bearer","expires_in":18446744073709551615}"#,
        )
        .await;
        let ts = TokenSource::new(creds(&url), reqwest::Client::new());
        assert_eq!(ts.token().await.expect("token").expose(), "t");
        ts.token().await.expect("cached");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        let left = ts.cache().as_ref().expect("cached").refresh_at - Instant::now();
        assert!(left <= MAX_LIFETIME && left > MAX_LIFETIME - Duration::from_secs(60));
    }

    #[tokio::test]
    async fn token_endpoint_errors_are_clear() {
        for status in [400u16, 401] {
            let (url, _, _) = token_server(
                status,
                r#"{"error":"invalid_client","error_description":"bad secret"}"#,
            )
            .await;
            let ts = TokenSource::new(creds(&url), reqwest::Client::new());
            let err = ts.token().await.expect_err("must fail");
            match &err {
                ClientError::Http {
                    status: s, message, ..
                } => {
                    assert_eq!(*s, status);
                    assert!(message.contains("invalid_client: bad secret"), "{message}");
                }
                other => panic!("unexpected {other:?}"),
            }
            assert!(!err.to_string().contains("s3cr"));
        }
        let (url, _, _) = token_server(200, r#"{"access_token":"t","token_type":"mac"}"#).await;
        let err = TokenSource::new(creds(&url), reqwest::Client::new())
            .token()
            .await
            .expect_err("not bearer");
        assert!(matches!(err, ClientError::InvalidResponse(_)), "{err:?}");
    }

    #[tokio::test]
    async fn a_token_response_over_64_kib_is_refused() {
        let url = crate::body::tests::big(100 << 10, false).await;
        let err = TokenSource::new(creds(&format!("{url}/token")), reqwest::Client::new())
            .token()
            .await
            .expect_err("too large");
        assert!(
            matches!(err, ClientError::BodyTooLarge { limit, .. } if limit == 64 << 10),
            "{err:?}"
        );
    }

    #[test]
    fn debug_hides_the_secret() {
        let c = creds("http://x/token");
        assert!(!format!("{c:?}").contains("s3cr"));
        let ts = TokenSource::new(c, reqwest::Client::new());
        assert!(!format!("{ts:?}").contains("s3cr"));
    }

    #[test]
    fn token_url_comes_from_the_card() {
        let card: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "securitySchemes": {
                "k": {"apiKeySecurityScheme": {"location": "header", "name": "key"}},
                "o": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                    "tokenUrl": "https://auth.example/token", "scopes": {}}}}}
            }
        }))
        .expect("card");
        assert_eq!(
            token_url_from_card(&card).as_deref(),
            Some("https://auth.example/token")
        );
        assert_eq!(token_url_from_card(&v1::AgentCard::default()), None);
    }

    /// End to end over REST: the client fetches a token from the configured
    /// token URL (not the card's), sends it as a bearer, and after a 401
    /// fetches a new one and retries once.
    #[tokio::test]
    async fn client_sends_the_token_and_refreshes_after_401() {
        let tokens = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let (t, sn) = (tokens.clone(), seen.clone());
        let base = serve(Arc::new(move |head: &str, _body: &str| {
            if head.starts_with("POST /token ") {
                let n = t.fetch_add(1, Ordering::SeqCst) + 1;
                return (
                    200,
                    format!(
                        r#"{{"access_token":"tok{n}","token_type":"Bearer","expires_in":3600}}"#
                    ),
                );
            }
            let auth = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("authorization:")
                        .map(|v| v.trim().to_owned())
                })
                .unwrap_or_default();
            sn.lock().expect("lock").push(auth.clone());
            if auth == "bearer tok2" {
                (200, r#"{"id":"t1","contextId":"c1"}"#.into())
            } else {
                (401, r#"{"error":"expired"}"#.into())
            }
        }))
        .await;
        let card: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "supportedInterfaces": [{"url": format!("{base}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
            "securitySchemes": {"o": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                "tokenUrl": "https://auth.invalid/token", "scopes": {}}}}}}
        }))
        .expect("card");
        let opts = crate::ClientOptions {
            credentials: crate::Credentials {
                oauth2: Some(creds(&format!("{base}/token"))),
                ..Default::default()
            },
            ..Default::default()
        };
        let client = crate::A2aClient::from_card(card, opts).expect("client");
        let task = client.get_task("t1", None).await.expect("task");
        assert_eq!(task.id, "t1");
        assert_eq!(tokens.load(Ordering::SeqCst), 2);
        assert_eq!(*seen.lock().expect("lock"), ["bearer tok1", "bearer tok2"]);
        // The refreshed token is reused.
        client.get_task("t1", None).await.expect("task");
        assert_eq!(tokens.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn the_secret_goes_only_to_trusted_https_token_urls() {
        use TokenUrlRefusal::*;
        let card = |verified: bool, card_url: Option<&str>| UrlSource::Card {
            verified,
            card_url: card_url.map(str::to_owned),
        };
        let fetched = Some("https://agent.example/.well-known/agent-card.json");
        let cases: [(&str, UrlSource, Option<TokenUrlRefusal>); 17] = [
            // Configured by the user: any https; http on loopback only.
            ("https://auth.example/token", UrlSource::Configured, None),
            ("http://127.0.0.1:8080/token", UrlSource::Configured, None),
            ("http://127.9.9.9/token", UrlSource::Configured, None),
            ("http://[::1]:9/token", UrlSource::Configured, None),
            ("http://localhost:9/token", UrlSource::Configured, None),
            (
                "http://auth.example/token",
                UrlSource::Configured,
                Some(PlainHttp),
            ),
            (
                "http://10.0.0.1/token",
                UrlSource::Configured,
                Some(PlainHttp),
            ),
            (
                "ftp://auth.example/token",
                UrlSource::Configured,
                Some(NotHttps),
            ),
            ("/token", UrlSource::Configured, Some(NotHttps)),
            // From a verified card: any https, never http.
            ("https://auth.example/token", card(true, None), None),
            (
                "http://127.0.0.1/token",
                card(true, fetched),
                Some(PlainHttp),
            ),
            // From an unverified card: https on the card's own origin only.
            (
                "https://agent.example/oauth/token",
                card(false, fetched),
                None,
            ),
            (
                "https://agent.example:443/token",
                card(false, fetched),
                None,
            ),
            (
                "https://agent.example:8443/token",
                card(false, fetched),
                Some(UntrustedCard),
            ),
            (
                "https://auth.example/token",
                card(false, fetched),
                Some(UntrustedCard),
            ),
            (
                "https://agent.example/token",
                card(false, None),
                Some(UntrustedCard),
            ),
            (
                "http://127.0.0.1:9/token",
                card(
                    false,
                    Some("http://127.0.0.1:9/.well-known/agent-card.json"),
                ),
                Some(PlainHttp),
            ),
        ];
        for (url, source, want) in cases {
            let got = match check_token_url(url, &source) {
                Ok(()) => None,
                Err(ClientError::TokenUrlRefused { rule, .. }) => Some(rule),
                Err(other) => panic!("{url}: {other:?}"),
            };
            assert_eq!(got, want, "{url} from {source:?}");
        }
        // An https card origin does not vouch for http on the same host.
        assert!(check_token_url("http://agent.example/token", &card(false, fetched)).is_err());
    }

    #[test]
    fn a_refusal_names_the_rule_but_no_secret() {
        let err = check_token_url(
            "http://user:pw@auth.example/token?client_secret=s3cr",
            &UrlSource::Configured,
        )
        .expect_err("plain http");
        let text = err.to_string();
        assert!(text.contains("plain http"), "{text}");
        assert!(text.contains("http://auth.example/token"), "{text}");
        assert!(!text.contains("pw") && !text.contains("s3cr"), "{text}");
    }

    /// An agent whose card (at the well-known path) names `{base}/token`,
    /// plain http on the card's own origin, and which counts every request
    /// by path; returns its base URL and the requests seen.
    async fn agent_with_http_token_url() -> (String, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let base = Arc::new(Mutex::new(String::new()));
        let (s, b) = (seen.clone(), base.clone());
        let url = serve(Arc::new(move |head: &str, _body: &str| {
            let line = head.lines().next().unwrap_or_default().to_owned();
            s.lock().expect("lock").push(line.clone());
            let base = b.lock().expect("lock").clone();
            if line.starts_with("GET /.well-known/agent-card.json ") {
                let card = serde_json::json!({
                    "name": "a", "description": "d", "version": "1",
                    "supportedInterfaces": [{"url": format!("{base}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
                    "securitySchemes": {"o": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {
                        "tokenUrl": format!("{base}/token"), "scopes": {}}}}}}
                });
                return (200, card.to_string());
            }
            if line.starts_with("POST /token ") {
                return (200, r#"{"access_token":"t","token_type":"Bearer"}"#.into());
            }
            (200, r#"{"id":"t1","contextId":"c1"}"#.into())
        }))
        .await;
        *base.lock().expect("lock") = url.clone();
        (url, seen)
    }

    fn oauth_options() -> crate::ClientOptions {
        crate::ClientOptions {
            bindings: vec![crate::Binding::Rest],
            credentials: crate::Credentials {
                oauth2: Some(creds("")),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn an_http_token_url_from_an_unsigned_card_is_never_contacted() {
        let (base, seen) = agent_with_http_token_url().await;
        let client = crate::A2aClient::discover(&base, oauth_options())
            .await
            .expect("discovered");
        let err = client.get_task("t1", None).await.expect_err("refused");
        assert!(
            matches!(
                err,
                ClientError::TokenUrlRefused {
                    rule: TokenUrlRefusal::PlainHttp,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(!err.to_string().contains("s3cr"), "{err}");
        // The card was fetched; neither the token URL nor the agent was called.
        assert_eq!(
            *seen.lock().expect("lock"),
            ["GET /.well-known/agent-card.json HTTP/1.1"]
        );

        // A card in hand has no known origin: its token URL is not used either.
        let card = client.card().clone();
        seen.lock().expect("lock").clear();
        let client = crate::A2aClient::from_card(card, oauth_options()).expect("client");
        assert!(matches!(
            client.get_task("t1", None).await,
            Err(ClientError::TokenUrlRefused { .. })
        ));
        assert!(seen.lock().expect("lock").is_empty());
    }

    #[tokio::test]
    async fn token_requests_follow_no_redirects() {
        // The configured token URL redirects (307 keeps the body, and the
        // secret in it) to another token endpoint, which must see nothing.
        let (elsewhere, count, _) =
            token_server(200, r#"{"access_token":"t","token_type":"Bearer"}"#).await;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let redirector = format!("http://{}/token", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let resp = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nlocation: {elsewhere}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            }
        });
        let card: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "supportedInterfaces": [{"url": "http://127.0.0.1:9/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}],
        }))
        .expect("card");
        let opts = crate::ClientOptions {
            credentials: crate::Credentials {
                oauth2: Some(creds(&redirector)),
                ..Default::default()
            },
            ..oauth_options()
        };
        let client = crate::A2aClient::from_card(card, opts).expect("client");
        let err = client.get_task("t1", None).await.expect_err("not followed");
        assert!(
            matches!(err, ClientError::Http { status: 307, .. }),
            "{err:?}"
        );
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }
}
