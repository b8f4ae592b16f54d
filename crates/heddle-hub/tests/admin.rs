//! The admin API over HTTP: who gets in (the hub's token, listed API key
//! callers, tokens with the admin scope), create / read / replace / delete
//! with their problem documents, and registrations from a2ahub manifests.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{Router, body::Body};
use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
    jwt::{JwtVerifier, KeySource, StaticKey},
};
use heddle_hub::{
    AdminAccess, Hub,
    agents::{DemoOptions, demo_builtins},
    manifest::EXTENSION_URI,
    registry::AgentEntry,
};
use serde_json::{Value, json};

mod live;

use live::{Answer, bearer, memory, oneshot};

const TOKEN: &str = "admin-test-token-0123456789";
const JWT_SECRET: &[u8] = b"admin-test-jwt-secret-0123456789abcdef";
const ADMINS: &str = "/api/v1/admin/agents";

/// A hub with the demo builtins, admins by `admin`, serving only `echo`.
async fn hub_with(admin: AdminAccess, auth: Option<Authenticator>) -> Hub {
    let mut b = demo_builtins(
        Hub::builder("http://test.local", memory()),
        DemoOptions::default(),
    )
    .entry(AgentEntry::builtin("echo", "echo"))
    .admin(admin);
    if let Some(auth) = auth {
        b = b.authenticator(auth);
    }
    b.build().await
}

async fn token_hub() -> Router {
    hub_with(AdminAccess::default().token(TOKEN), None)
        .await
        .router()
}

async fn admin(router: &Router, method: &str, path: &str, body: Option<Body>) -> Answer {
    let auth = bearer(TOKEN);
    let mut headers = vec![("authorization", auth.as_str())];
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    oneshot(router, method, &format!("{ADMINS}{path}"), &headers, body).await
}

fn json_body(v: &Value) -> Option<Body> {
    Some(Body::from(v.to_string()))
}

/// A refusal in the admin API's form: a problem document whose `status`
/// is the HTTP status.
fn assert_problem(a: &Answer, status: u16, what: &str) {
    assert_eq!(a.status, status, "{what}: {}", a.text);
    assert_eq!(a.content_type(), "application/problem+json", "{what}");
    assert_eq!(a.json["status"], status, "{what}: {}", a.text);
    assert!(a.json["title"].is_string(), "{what}: {}", a.text);
}

// ---- who gets in ---------------------------------------------------------------------

#[tokio::test]
async fn only_the_admin_token_opens_the_api_of_a_hub_without_an_authenticator() {
    let router = token_hub().await;
    let none = oneshot(&router, "GET", ADMINS, &[], None).await;
    assert_problem(&none, 401, "no credentials");
    let challenge = none
        .headers
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(challenge.starts_with("Bearer"), "{challenge:?}");

    let wrong = bearer("admin-test-token-0123456788");
    let refused = oneshot(&router, "GET", ADMINS, &[("authorization", &wrong)], None).await;
    assert_problem(&refused, 401, "a wrong token");
    assert!(!refused.text.contains("0123456788"), "{}", refused.text);

    let ok = admin(&router, "GET", "", None).await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.json["agents"][0]["id"], "echo");
    let builtins = ok.json["builtins"].as_array().expect("builtins");
    assert!(builtins.contains(&json!("writer-stream")), "{builtins:?}");
}

fn jwt(scope: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
        + 300;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({"sub": "ops", "exp": exp, "scope": scope}),
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET),
    )
    .expect("sign")
}

#[tokio::test]
async fn verified_callers_get_in_by_listed_id_or_admin_scope_and_others_are_forbidden() {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (boss_record, boss) = keys.create("boss").await.expect("boss");
    let (_, user) = keys.create("user").await.expect("user");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .jwt(JwtVerifier::new().source(KeySource::Static(vec![
            StaticKey::hmac(None, JWT_SECRET).expect("hmac"),
        ])))
        .build()
        .expect("authenticator");
    let hub = hub_with(
        AdminAccess::default()
            .token(TOKEN)
            .caller(boss_record.principal()),
        Some(auth),
    )
    .await;
    let router = hub.router();
    let get = |headers: Vec<(&'static str, String)>| {
        let router = router.clone();
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            oneshot(&router, "GET", ADMINS, &h, None).await
        }
    };

    let none = get(vec![]).await;
    assert_problem(&none, 401, "no credentials");
    assert!(none.headers.contains_key("www-authenticate"));
    let bad_key = get(vec![("api-key", "hk_0000000000000000_nope".into())]).await;
    assert_problem(&bad_key, 401, "an unknown key");
    let not_admin = get(vec![("api-key", user.expose().to_owned())]).await;
    assert_problem(&not_admin, 403, "a verified key of no admin");
    let boss_in = get(vec![("api-key", boss.expose().to_owned())]).await;
    assert_eq!(boss_in.status, 200, "{}", boss_in.text);
    let scoped = get(vec![("authorization", bearer(&jwt("a2a heddle:admin")))]).await;
    assert_eq!(scoped.status, 200, "{}", scoped.text);
    let unscoped = get(vec![("authorization", bearer(&jwt("a2a")))]).await;
    assert_problem(&unscoped, 403, "a token without the admin scope");
    let token = get(vec![("authorization", bearer(TOKEN))]).await;
    assert_eq!(
        token.status, 200,
        "the hub's token still opens: {}",
        token.text
    );

    // The admin who registers an agent owns it.
    let auth = boss.expose().to_owned();
    let made = oneshot(
        &router,
        "POST",
        ADMINS,
        &[("api-key", &auth), ("content-type", "application/json")],
        json_body(&json!({"id": "mine", "kind": "builtin", "builtin": "echo"})),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.json["owner"], boss_record.principal());
}

// ---- create, read, replace, delete ----------------------------------------------------

#[tokio::test]
async fn an_agent_is_created_read_replaced_and_deleted() {
    let router = token_hub().await;
    let made = admin(
        &router,
        "POST",
        "",
        json_body(&json!({"id": "e1", "kind": "builtin", "builtin": "echo", "tags": ["a"]})),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(
        made.headers.get("location").and_then(|v| v.to_str().ok()),
        Some("/api/v1/admin/agents/e1")
    );
    // Normalised: the defaults spelled out, and where the card is.
    assert_eq!(
        made.json,
        json!({"id": "e1", "kind": "builtin", "builtin": "echo", "tags": ["a"],
            "enabled": true, "public": true,
            "cardUrl": "http://test.local/api/v1/agents/e1/.well-known/agent-card.json"})
    );
    let served = oneshot(
        &router,
        "GET",
        "/api/v1/agents/e1/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    assert_eq!(served.status, 200, "{}", served.text);

    let read = admin(&router, "GET", "/e1", None).await;
    assert_eq!((read.status.as_u16(), &read.json), (200, &made.json));
    let all = admin(&router, "GET", "", None).await;
    let listed: Vec<&str> = all.json["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(listed, ["e1", "echo"]);

    let replaced = admin(
        &router,
        "PUT",
        "/e1",
        json_body(
            &json!({"id": "e1", "kind": "builtin", "builtin": "writer", "name": "Now a writer"}),
        ),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.text);
    assert_eq!(replaced.json["builtin"], "writer");
    assert!(
        replaced.json.get("tags").is_none(),
        "replaced whole: {}",
        replaced.text
    );
    let card = oneshot(
        &router,
        "GET",
        "/api/v1/agents/e1/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    assert_eq!(card.json["name"], "Now a writer");

    let deleted = admin(&router, "DELETE", "/e1", None).await;
    assert_eq!(deleted.status, 204);
    assert!(deleted.text.is_empty());
    assert_problem(
        &admin(&router, "DELETE", "/e1", None).await,
        404,
        "deleted twice",
    );
    assert_problem(
        &admin(&router, "GET", "/e1", None).await,
        404,
        "read after delete",
    );
    let gone = oneshot(
        &router,
        "GET",
        "/api/v1/agents/e1/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    assert_eq!(gone.status, 404);
}

#[tokio::test]
async fn each_bad_request_is_refused_with_its_problem() {
    let router = token_hub().await;
    let echo = json!({"id": "echo", "kind": "builtin", "builtin": "echo"});
    assert_problem(
        &admin(&router, "POST", "", json_body(&echo)).await,
        409,
        "an id that is taken",
    );
    assert_problem(
        &admin(&router, "GET", "/nope", None).await,
        404,
        "unknown id",
    );
    assert_problem(
        &admin(
            &router,
            "PUT",
            "/echo",
            json_body(&json!({"id": "other", "kind": "builtin", "builtin": "echo"})),
        )
        .await,
        400,
        "a body naming another id",
    );
    assert_problem(
        &admin(
            &router,
            "PUT",
            "/nope",
            json_body(&json!({"id": "nope", "kind": "builtin", "builtin": "echo"})),
        )
        .await,
        404,
        "replacing nothing",
    );
    assert_problem(
        &admin(&router, "POST", "", Some(Body::from("id = 'x'"))).await,
        400,
        "not JSON",
    );
    let huge = json!({"id": "big", "kind": "builtin", "description": "x".repeat(1 << 20)});
    assert_problem(
        &admin(&router, "POST", "", json_body(&huge)).await,
        413,
        "over 1 MiB",
    );
    let typo = admin(
        &router,
        "POST",
        "",
        json_body(&json!({"id": "t", "kind": "builtin", "builtin": "echo", "enabeld": false})),
    )
    .await;
    assert_problem(&typo, 400, "an unknown field");
    assert!(typo.text.contains("enabeld"), "{}", typo.text);
    assert_problem(
        &admin(
            &router,
            "POST",
            "",
            json_body(&json!({"id": "ghost", "kind": "builtin", "builtin": "nothing"})),
        )
        .await,
        400,
        "an unknown builtin",
    );
    let plain = admin(
        &router,
        "POST",
        "",
        json_body(&json!({"id": "up", "kind": "remote", "card_url": "http://127.0.0.1:9/card"})),
    )
    .await;
    assert_problem(&plain, 400, "plain http");
    assert_eq!(
        plain.json["errors"][0]["pointer"], "/card_url",
        "{}",
        plain.text
    );
    let bad_id = admin(
        &router,
        "POST",
        "",
        json_body(&json!({"id": "Bad Id", "kind": "builtin", "builtin": "echo"})),
    )
    .await;
    assert_problem(&bad_id, 400, "a bad id");
    assert_eq!(bad_id.json["errors"][0]["pointer"], "/id");
    // Nothing of it was registered.
    let all = admin(&router, "GET", "", None).await;
    assert_eq!(
        all.json["agents"].as_array().map(Vec::len),
        Some(1),
        "{}",
        all.text
    );
}

// ---- manifests --------------------------------------------------------------------------

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("JSON")
}

/// A port nothing listens on.
async fn closed_port() -> String {
    let (l, addr) = live::bind().await;
    drop(l);
    addr
}

fn pointers(a: &Answer) -> Vec<String> {
    a.json["errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["pointer"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_bare_manifest_with_violations_is_422_with_each_pointer_before_any_upstream_call() {
    let router = token_hub().await;
    let closed = closed_port().await;
    let mut at_closed = fixture("many-errors.json");
    at_closed["endpoint"] = json!(format!("https://{closed}/agent"));
    for (what, doc) in [
        ("as written", fixture("many-errors.json")),
        ("pointing at a closed port", at_closed),
    ] {
        let started = Instant::now();
        let a = admin(&router, "POST", "", json_body(&doc)).await;
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{what}: {:?}",
            started.elapsed()
        );
        assert_problem(&a, 422, what);
        let found = pointers(&a);
        for pointer in [
            "/manifest/agent_name",
            "/manifest/version",
            "/manifest/skills",
            "/manifest/input_schema/type",
            "/manifest/pricing/model",
            "/manifest/pricing/rate",
            "/manifest/pricing/currency",
            "/manifest",
        ] {
            assert!(
                found.iter().any(|p| p == pointer),
                "{what}: {pointer} missing from {found:?}"
            );
        }
        assert!(
            found.iter().all(|p| p.starts_with("/manifest")),
            "{found:?}"
        );
    }
    let all = admin(&router, "GET", "", None).await;
    assert_eq!(all.json["agents"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn a_valid_manifest_registers_a_remote_agent_whose_card_and_input_follow_it() {
    // The upstream: a Heddle echo agent on a real port.
    let up = live::serve(|public, _| {
        demo_builtins(Hub::builder(public, memory()), DemoOptions::default())
            .entry(AgentEntry::builtin("echo", "echo"))
    })
    .await;
    let router = token_hub().await;
    // The manifest's endpoint must be https (its schema says so); the
    // entry's card_url names the local upstream.
    let entry = json!({
        "id": "invoices",
        "kind": "remote",
        "card_url": format!("{}/api/v1/agents/echo/.well-known/agent-card.json", up.base),
        "allow_http": true,
        "manifest": fixture("full.json"),
    });
    let made = admin(&router, "POST", "", json_body(&entry)).await;
    assert_eq!(made.status, 201, "{}", made.text);
    assert_eq!(made.json["kind"], "remote");
    assert!(made.json["upstream_card"].is_object(), "{}", made.text);

    let card = oneshot(
        &router,
        "GET",
        "/api/v1/agents/invoices/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    assert_eq!(card.status, 200);
    assert_eq!(card.json["name"], "Invoice Reader");
    let skills: Vec<&str> = card.json["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(skills, ["Read invoice", "Sum totals"]);
    let extensions: Vec<&str> = card.json["capabilities"]["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .filter_map(|e| e["uri"].as_str())
        .collect();
    assert!(extensions.contains(&EXTENSION_URI), "{extensions:?}");
    assert!(
        !card.text.contains(&up.base),
        "the upstream's URL on the hub's card: {}",
        card.text
    );

    // The manifest's price holds: 0.05 a task, paid from the caller's wallet.
    let topped = oneshot(
        &router,
        "POST",
        "/api/v1/admin/wallets/anonymous/topup",
        &[
            ("authorization", bearer(TOKEN).as_str()),
            ("content-type", "application/json"),
        ],
        json_body(&json!({"amount": 1, "currency": "USD"})),
    )
    .await;
    assert_eq!(topped.status, 200, "{}", topped.text);
    let send = |data: Value| {
        let router = router.clone();
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER",
                    "parts": [{"text": "total this"}, {"data": data}]}}});
            oneshot(
                &router,
                "POST",
                "/api/v1/agents/invoices/a2a",
                &[("content-type", "application/json"), ("a2a-version", "1.0")],
                json_body(&body),
            )
            .await
        }
    };
    let refused = send(json!({"amount": -1, "currency": "usd"})).await;
    assert_eq!(refused.json["error"]["code"], -32602, "{}", refused.text);
    let message = refused.json["error"]["message"]
        .as_str()
        .unwrap_or_default();
    for pointer in ["/parts/1/data/amount", "/parts/1/data/currency"] {
        assert!(message.contains(pointer), "{pointer} not in {message:?}");
    }
    // Data that keeps the schema goes through to the upstream.
    let done = send(json!({"amount": 12.5, "currency": "EUR"})).await;
    assert_eq!(
        live::sent_state(&done),
        "TASK_STATE_COMPLETED",
        "{}",
        done.text
    );
    assert_eq!(
        done.json["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "total this"
    );
}

#[tokio::test]
async fn metrics_need_an_admin_when_auth_is_on_unless_made_public() {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (boss_record, boss) = keys.create("boss").await.expect("boss");
    let (_, user) = keys.create("user").await.expect("user");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .build()
        .expect("authenticator");
    let admins = AdminAccess::default()
        .token(TOKEN)
        .caller(boss_record.principal());
    let router = hub_with(admins.clone(), Some(auth.clone())).await.router();
    let scrape = |router: Router, header: Option<(&'static str, String)>| async move {
        let h: Vec<(&str, &str)> = header.iter().map(|(k, v)| (*k, v.as_str())).collect();
        oneshot(&router, "GET", "/metrics", &h, None).await
    };
    assert_eq!(scrape(router.clone(), None).await.status, 401);
    let user = ("api-key", user.expose().to_owned());
    assert_eq!(scrape(router.clone(), Some(user.clone())).await.status, 403);
    let boss_in = scrape(router.clone(), Some(("api-key", boss.expose().to_owned()))).await;
    assert_eq!(boss_in.status, 200, "{}", boss_in.text);
    assert!(boss_in.text.ends_with("# EOF\n"), "{}", boss_in.text);
    let token = scrape(router.clone(), Some(("authorization", bearer(TOKEN)))).await;
    assert_eq!(token.status, 200, "{}", token.text);
    // Health stays public.
    assert_eq!(
        oneshot(&router, "GET", "/healthz", &[], None).await.status,
        200
    );

    // Made public, anyone reads them, auth or not.
    let public = demo_builtins(
        Hub::builder("http://test.local", memory()),
        DemoOptions::default(),
    )
    .entry(AgentEntry::builtin("echo", "echo"))
    .admin(admins)
    .authenticator(auth)
    .metrics_access(heddle_hub::MetricsAccess::Public)
    .build()
    .await
    .router();
    assert_eq!(scrape(public, None).await.status, 200);
}
