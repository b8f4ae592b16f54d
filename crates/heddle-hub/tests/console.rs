//! The web console's sessions and pages, in process: sign-in checks the
//! credential as the APIs would, the cookie stands for it only with its
//! CSRF token and from the hub's own origin, it never widens a caller's
//! rights, and no page or answer carries a secret. (The pages themselves
//! are driven in Chromium by `tests/console/run.sh`.)

use std::sync::Arc;

use axum::{Router, body::Body};
use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
};
use heddle_hub::{
    AdminAccess, Hub,
    agents::{DemoOptions, demo_builtins},
    registry::AgentEntry,
};
use serde_json::{Value, json};

mod live;

use live::{Answer, bearer, memory, oneshot};

const TOKEN: &str = "console-admin-token-0123456789";
const URL: &str = "http://hub.test";

/// A hub behind API keys serving `echo`, with one plain key; the router
/// and that key.
async fn hub(console: bool) -> (Router, String) {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, key) = keys.create("alice").await.expect("a key");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .build()
        .expect("auth");
    let hub = demo_builtins(Hub::builder(URL, memory()), DemoOptions::default())
        .entry(AgentEntry::builtin("echo", "echo"))
        .authenticator(auth)
        .admin(AdminAccess::default().token(TOKEN))
        .console(console)
        .build()
        .await;
    (hub.router(), key.expose().to_owned())
}

/// Signs in; the `Cookie` header value and the CSRF token.
async fn sign_in(router: &Router, kind: &str, credential: &str) -> (String, String) {
    let a = post_json(
        router,
        "/console/session",
        &[("origin", URL)],
        &json!({"kind": kind, "credential": credential}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let set = a.headers["set-cookie"].to_str().expect("ascii").to_owned();
    let cookie = set.split(';').next().expect("name=value").to_owned();
    (cookie, a.json["csrf"].as_str().expect("csrf").to_owned())
}

async fn post_json(router: &Router, uri: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
    let mut hs = vec![("content-type", "application/json")];
    hs.extend_from_slice(headers);
    oneshot(router, "POST", uri, &hs, Some(Body::from(body.to_string()))).await
}

fn send(text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": format!("m-{text}"), "role": "ROLE_USER", "parts": [{"text": text}]}}})
}

const ECHO: &str = "/api/v1/agents/echo/a2a";

/// A GET riding on a console cookie.
async fn get(router: &Router, uri: &str, cookie: &str) -> Answer {
    oneshot(router, "GET", uri, &[("cookie", cookie)], None).await
}

#[tokio::test]
async fn a_signed_in_session_calls_an_agent_with_its_csrf_token() {
    let (router, key) = hub(true).await;
    let (cookie, csrf) = sign_in(&router, "apiKey", &key).await;
    let a = post_json(
        &router,
        ECHO,
        &[
            ("cookie", &cookie),
            ("x-heddle-csrf", &csrf),
            ("a2a-version", "1.0"),
        ],
        &send("hello"),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(
        a.json["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // The session reads like the key: the task is the key's.
    let id = a.json["result"]["task"]["id"].as_str().expect("id");
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}});
    let by_key = post_json(
        &router,
        ECHO,
        &[("api-key", &key), ("a2a-version", "1.0")],
        &get,
    )
    .await;
    assert_eq!(by_key.json["result"]["id"], id, "{}", by_key.text);
}

#[tokio::test]
async fn a_cross_site_post_or_one_without_the_csrf_token_is_refused() {
    let (router, key) = hub(true).await;
    let (cookie, csrf) = sign_in(&router, "apiKey", &key).await;
    for headers in [
        vec![("cookie", cookie.as_str())],
        vec![
            ("cookie", cookie.as_str()),
            ("x-heddle-csrf", "not-the-token"),
        ],
        vec![
            ("cookie", cookie.as_str()),
            ("x-heddle-csrf", csrf.as_str()),
            ("origin", "https://elsewhere.example"),
        ],
        vec![
            ("cookie", cookie.as_str()),
            ("x-heddle-csrf", csrf.as_str()),
            ("sec-fetch-site", "cross-site"),
        ],
    ] {
        let a = post_json(&router, ECHO, &headers, &send("x")).await;
        assert_eq!(a.status, 403, "{headers:?}: {}", a.text);
        assert_eq!(a.json["title"], "Cross-site request refused");
    }
    // A form post cannot sign in: it is not JSON, and another site is refused.
    let form = oneshot(
        &router,
        "POST",
        "/console/session",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("origin", URL),
        ],
        Some(Body::from(format!("kind=apiKey&credential={key}"))),
    )
    .await;
    assert_eq!(form.status, 415);
    let other = post_json(
        &router,
        "/console/session",
        &[("origin", "https://elsewhere.example")],
        &json!({"kind": "apiKey", "credential": key}),
    )
    .await;
    assert_eq!(other.status, 403);
    assert!(!other.headers.contains_key("set-cookie"));
}

#[tokio::test]
async fn a_plain_keys_session_gets_no_admin_call() {
    let (router, key) = hub(true).await;
    let (cookie, csrf) = sign_in(&router, "apiKey", &key).await;
    let who = get(&router, "/console/session", &cookie).await;
    assert_eq!(who.json["admin"], false);
    let list = get(&router, "/api/v1/admin/agents", &cookie).await;
    assert_eq!(list.status, 403, "{}", list.text);
    let add = post_json(
        &router,
        "/api/v1/admin/agents",
        &[
            ("cookie", &cookie),
            ("x-heddle-csrf", &csrf),
            ("origin", URL),
        ],
        &json!({"id": "mine", "kind": "builtin", "builtin": "echo"}),
    )
    .await;
    assert_eq!(add.status, 403, "{}", add.text);
    let keys = get(&router, "/api/v1/admin/keys", &cookie).await;
    assert_eq!(keys.status, 403);
}

#[tokio::test]
async fn the_admin_tokens_session_is_an_admin_and_makes_a_key_shown_once() {
    let (router, _) = hub(true).await;
    let (cookie, csrf) = sign_in(&router, "bearer", TOKEN).await;
    let made = post_json(
        &router,
        "/api/v1/admin/keys",
        &[("cookie", &cookie), ("x-heddle-csrf", &csrf)],
        &json!({"name": "bob"}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let key = made.json["key"].as_str().expect("the key, once").to_owned();
    assert_eq!(made.headers["cache-control"], "no-store");
    let list = oneshot(
        &router,
        "GET",
        "/api/v1/admin/keys",
        &[("authorization", &bearer(TOKEN))],
        None,
    )
    .await;
    assert_eq!(list.status, 200);
    assert!(
        list.text.contains("bob") && !list.text.contains(&key),
        "{}",
        list.text
    );
    // The new key works, and its revocation through the session ends it.
    let by_bob = post_json(
        &router,
        ECHO,
        &[("api-key", &key), ("a2a-version", "1.0")],
        &send("b"),
    )
    .await;
    assert_eq!(by_bob.status, 200, "{}", by_bob.text);
    let gone = oneshot(
        &router,
        "DELETE",
        "/api/v1/admin/keys/bob",
        &[("cookie", &cookie), ("x-heddle-csrf", &csrf)],
        None,
    )
    .await;
    assert_eq!(gone.status, 200, "{}", gone.text);
    let refused = post_json(
        &router,
        ECHO,
        &[("api-key", &key), ("a2a-version", "1.0")],
        &send("c"),
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text);
}

#[tokio::test]
async fn no_page_or_answer_carries_a_secret() {
    let (router, key) = hub(true).await;
    let refused = post_json(
        &router,
        "/console/session",
        &[],
        &json!({"kind": "apiKey", "credential": "hdk_0000000000000000_wrongwrongwrong"}),
    )
    .await;
    assert_eq!(refused.status, 401);
    assert!(!refused.text.contains("wrongwrong"), "{}", refused.text);
    let (cookie, _) = sign_in(&router, "apiKey", &key).await;
    let (admin_cookie, _) = sign_in(&router, "bearer", TOKEN).await;
    for c in [&cookie, &admin_cookie] {
        for path in [
            "/console",
            "/console/app.js",
            "/console/app.css",
            "/console/session",
            "/api/v1/agents",
        ] {
            let a = get(&router, path, c).await;
            assert_eq!(a.status, 200, "{path}");
            assert!(
                !a.text.contains(&key) && !a.text.contains(TOKEN),
                "{path} holds a secret"
            );
        }
    }
    let page = oneshot(&router, "GET", "/console", &[], None).await;
    let policy = page.headers["content-security-policy"]
        .to_str()
        .expect("ascii");
    assert!(policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"));
    assert!(page.text.len() < 100 * 1024);
}

#[tokio::test]
async fn the_session_cookie_is_http_only_strict_and_ends_at_sign_out() {
    let (router, key) = hub(true).await;
    let a = post_json(
        &router,
        "/console/session",
        &[],
        &json!({"kind": "apiKey", "credential": key}),
    )
    .await;
    let set = a.headers["set-cookie"].to_str().expect("ascii");
    assert!(set.starts_with("heddle_console="), "{set}");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"),
        "{set}"
    );
    assert!(!set.contains("Secure"), "plain http: {set}");
    let cookie = set.split(';').next().expect("cookie").to_owned();
    let csrf = a.json["csrf"].as_str().expect("csrf").to_owned();
    // Sign-out is a change: without the token it is refused.
    let refused = oneshot(
        &router,
        "DELETE",
        "/console/session",
        &[("cookie", &cookie)],
        None,
    )
    .await;
    assert_eq!(refused.status, 403);
    let out = oneshot(
        &router,
        "DELETE",
        "/console/session",
        &[("cookie", &cookie), ("x-heddle-csrf", &csrf)],
        None,
    )
    .await;
    assert_eq!(out.status, 204);
    let after = get(&router, "/console/session", &cookie).await;
    assert_eq!(after.json["signedIn"], false);
    let call = post_json(
        &router,
        ECHO,
        &[("cookie", &cookie), ("a2a-version", "1.0")],
        &send("x"),
    )
    .await;
    assert_eq!(
        call.status, 401,
        "an ended session is no credential: {}",
        call.text
    );
}

#[tokio::test]
async fn without_the_console_there_is_no_page_and_the_cookie_means_nothing() {
    let (router, key) = hub(false).await;
    let page = oneshot(&router, "GET", "/console", &[], None).await;
    assert_eq!(page.status, 404);
    let sign = post_json(
        &router,
        "/console/session",
        &[],
        &json!({"kind": "apiKey", "credential": key}),
    )
    .await;
    assert_eq!(sign.status, 404);
}

#[tokio::test]
async fn discovery_shows_each_agents_card_signature() {
    let (router, _) = hub(true).await;
    let list = oneshot(&router, "GET", "/api/v1/agents", &[], None).await;
    let echo = list.json["agents"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["id"] == "echo"))
        .expect("echo listed");
    assert_eq!(echo["signature"], "absent");
    assert!(echo.get("health").is_none(), "health is for remote agents");
}

#[tokio::test]
async fn sign_in_checks_the_credential_it_keeps_not_one_in_its_url() {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, key) = keys.create("alice").await.expect("a key");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .key_location(heddle_auth::KeyLocation::Query("key".into()))
        .build()
        .expect("auth");
    let router = Hub::builder(URL, memory())
        .authenticator(auth)
        .build()
        .await
        .router();
    let uri = format!("/console/session?key={}", key.expose());
    let a = post_json(
        &router,
        &uri,
        &[],
        &json!({"kind": "apiKey", "credential": "junk"}),
    )
    .await;
    assert_eq!(a.status, 401, "{}", a.text);
    let ok = post_json(
        &router,
        "/console/session",
        &[],
        &json!({"kind": "apiKey", "credential": key.expose()}),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
}

#[tokio::test]
async fn an_upstream_signature_the_hub_did_not_check_is_not_listed() {
    let (router, _) = hub(true).await;
    let card = json!({
        "name": "Up", "description": "d", "version": "1",
        "supportedInterfaces": [{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "s", "description": "d", "tags": ["t"]}],
    });
    let made = post_json(
        &router,
        "/api/v1/admin/agents",
        &[("authorization", &bearer(TOKEN))],
        &json!({"id": "up", "kind": "remote", "card_url": "http://127.0.0.1:9/card.json", "allow_http": true,
                "upstream_card": card, "upstream_signature": "verified"}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text);
    let list = oneshot(&router, "GET", "/api/v1/agents?kind=remote", &[], None).await;
    assert_eq!(list.json["agents"][0]["id"], "up", "{}", list.text);
    assert_eq!(
        list.json["agents"][0]["upstreamSignature"],
        Value::Null,
        "{}",
        list.text
    );
}
