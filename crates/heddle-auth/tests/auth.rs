//! The authenticator against the attacks it must refuse, JWKS rotation and
//! OIDC discovery against a local key server, and the layer's answers in
//! each binding's form.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use axum::{Router, body::Body, routing::get};
use base64::Engine as _;
use heddle_auth::{
    AuthError, Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
    jwt::{Jwks, JwtVerifier, KeySource, Oidc, StaticKey},
    reject::{JSONRPC_PERMISSION_DENIED, JSONRPC_UNAUTHENTICATED},
};
use heddle_server::Caller;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tower::ServiceExt;

const HMAC_SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-test-only";
const ISS: &str = "https://issuer.test";
const AUD: &str = "https://agents.test";

fn key_file(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/keys/{name}", env!("CARGO_MANIFEST_DIR"))).expect("test key")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn claims() -> Value {
    json!({"sub": "alice", "iss": ISS, "aud": AUD, "exp": now() + 300, "nbf": now() - 10})
}

fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value) -> String {
    let key = match alg {
        Algorithm::HS256 => EncodingKey::from_secret(HMAC_SECRET),
        // rsa2 signs as rsa2; any other kid gets rsa1's signature.
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&key_file(if kid == Some("rsa2") {
            "rsa2.pem"
        } else {
            "rsa1.pem"
        }))
        .expect("rsa"),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&key_file("ec.pem")).expect("ec"),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&key_file("ed.pem")).expect("ed"),
        other => panic!("{other:?}"),
    };
    let mut h = Header::new(alg);
    h.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&h, claims, &key).expect("sign")
}

/// A verifier holding one key of each algorithm.
fn verifier() -> JwtVerifier {
    let keys = vec![
        StaticKey::hmac(Some("hs".into()), HMAC_SECRET).expect("hmac"),
        StaticKey::public_pem(
            Some("rsa1".into()),
            Algorithm::RS256,
            &key_file("rsa1.pub.pem"),
        )
        .expect("rsa"),
        StaticKey::public_pem(Some("ec".into()), Algorithm::ES256, &key_file("ec.pub.pem"))
            .expect("ec"),
        StaticKey::public_pem(Some("ed".into()), Algorithm::EdDSA, &key_file("ed.pub.pem"))
            .expect("ed"),
    ];
    JwtVerifier::new()
        .source(KeySource::Static(keys))
        .issuer(ISS)
        .audience(AUD)
        .leeway(Duration::from_secs(30))
}

fn b64(v: &Value) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

#[tokio::test]
async fn tokens_of_each_algorithm_verify() {
    let v = verifier();
    for (alg, kid) in [
        (Algorithm::HS256, "hs"),
        (Algorithm::RS256, "rsa1"),
        (Algorithm::ES256, "ec"),
        (Algorithm::EdDSA, "ed"),
    ] {
        let t = v
            .verify(&sign(alg, Some(kid), &claims()))
            .await
            .unwrap_or_else(|e| panic!("{alg:?}: {e}"));
        assert_eq!(t.principal(), format!("jwt:{ISS}#alice"));
    }
}

#[tokio::test]
async fn alg_none_is_refused() {
    let v = verifier();
    for alg in ["none", "None", "NONE"] {
        let token = format!(
            "{}.{}.",
            b64(&json!({"alg": alg, "typ": "JWT"})),
            b64(&claims())
        );
        assert!(
            matches!(v.verify(&token).await, Err(AuthError::Invalid(_))),
            "{alg}"
        );
    }
}

#[tokio::test]
async fn an_hs256_token_signed_with_the_rsa_public_key_is_refused() {
    // The classic confusion: the attacker uses the public PEM as an HMAC secret.
    let v = JwtVerifier::new().source(KeySource::Static(vec![
        StaticKey::public_pem(
            Some("rsa1".into()),
            Algorithm::RS256,
            &key_file("rsa1.pub.pem"),
        )
        .expect("rsa"),
    ]));
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("rsa1".into());
    let forged = jsonwebtoken::encode(
        &h,
        &claims(),
        &EncodingKey::from_secret(&key_file("rsa1.pub.pem")),
    )
    .expect("sign");
    assert!(matches!(
        v.verify(&forged).await,
        Err(AuthError::Invalid(_))
    ));
    // And the other way: an RS256 header against an HMAC-only verifier.
    let v = JwtVerifier::new().source(KeySource::Static(vec![
        StaticKey::hmac(None, HMAC_SECRET).expect("hmac"),
    ]));
    let rs = sign(Algorithm::RS256, Some("rsa1"), &claims());
    assert!(matches!(v.verify(&rs).await, Err(AuthError::Invalid(_))));
}

#[tokio::test]
async fn expired_and_not_yet_valid_tokens_are_refused_outside_the_leeway() {
    let v = verifier();
    let with = |k: &str, at: i64| {
        let mut c = claims();
        c[k] = json!(at);
        sign(Algorithm::HS256, Some("hs"), &c)
    };
    let cases = [
        (with("exp", now() - 120), Some("token expired")),
        (with("nbf", now() + 120), Some("token not yet valid")),
        // Within the 30 s leeway.
        (with("exp", now() - 5), None),
        (with("nbf", now() + 5), None),
    ];
    for (token, want) in cases {
        match (v.verify(&token).await, want) {
            (Err(AuthError::Invalid(m)), Some(w)) => assert_eq!(m, w),
            (Ok(_), None) => {}
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }
    let mut no_exp = claims();
    no_exp.as_object_mut().expect("object").remove("exp");
    assert!(
        v.verify(&sign(Algorithm::HS256, Some("hs"), &no_exp))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn wrong_audience_or_issuer_is_refused() {
    let v = verifier();
    for (k, val, want) in [
        ("aud", "https://elsewhere.test", "wrong audience"),
        ("iss", "https://evil.test", "wrong issuer"),
    ] {
        let mut c = claims();
        c[k] = json!(val);
        let r = v.verify(&sign(Algorithm::RS256, Some("rsa1"), &c)).await;
        assert_eq!(r, Err(AuthError::Invalid(want.into())), "{k}");
    }
    let mut c = claims();
    c.as_object_mut().expect("object").remove("aud");
    assert!(
        v.verify(&sign(Algorithm::RS256, Some("rsa1"), &c))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_unknown_kid_or_a_tampered_token_is_refused() {
    let v = verifier();
    let t = sign(Algorithm::RS256, Some("rsa2"), &claims());
    assert!(matches!(v.verify(&t).await, Err(AuthError::Invalid(_))));
    // Signed by rsa2 but claiming rsa1.
    let mut h = Header::new(Algorithm::RS256);
    h.kid = Some("rsa1".into());
    let t = jsonwebtoken::encode(
        &h,
        &claims(),
        &EncodingKey::from_rsa_pem(&key_file("rsa2.pem")).expect("rsa"),
    )
    .expect("sign");
    assert_eq!(
        v.verify(&t).await,
        Err(AuthError::Invalid("bad signature".into()))
    );
}

#[tokio::test]
async fn oversized_tokens_are_refused_before_parsing() {
    let v = verifier().max_token_bytes(1024);
    let mut c = claims();
    c["pad"] = json!("x".repeat(2000));
    let t = sign(Algorithm::HS256, Some("hs"), &c);
    assert!(matches!(v.verify(&t).await, Err(AuthError::TooLarge(_))));
}

#[tokio::test]
async fn a_missing_scope_is_forbidden_not_unauthenticated() {
    let v = verifier().require_scope("a2a");
    let t = sign(Algorithm::HS256, Some("hs"), &claims());
    assert!(matches!(v.verify(&t).await, Err(AuthError::Forbidden(_))));
    let mut c = claims();
    c["scope"] = json!("openid a2a");
    v.verify(&sign(Algorithm::HS256, Some("hs"), &c))
        .await
        .expect("scoped");
}

// ---- a local JWKS / OIDC server ------------------------------------------------

struct KeyServer {
    base: String,
    jwks: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

fn jwk(name: &str) -> Value {
    serde_json::from_slice(&key_file(&format!("{name}.jwk.json"))).expect("jwk")
}

async fn key_server(keys: &[&str]) -> KeyServer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let jwks = Arc::new(Mutex::new(
        json!({"keys": keys.iter().map(|k| jwk(k)).collect::<Vec<_>>()}),
    ));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (j, f, b) = (jwks.clone(), fetches.clone(), base.clone());
    let app = Router::new()
        .route(
            "/jwks.json",
            get(move || {
                let (j, f) = (j.clone(), f.clone());
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    axum::Json(j.lock().expect("lock").clone())
                }
            }),
        )
        .route(
            "/.well-known/openid-configuration",
            get(move || {
                let b = b.clone();
                async move { axum::Json(json!({"issuer": b, "jwks_uri": format!("{b}/jwks.json")})) }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    KeyServer {
        base,
        jwks,
        fetches,
    }
}

#[tokio::test]
async fn jwks_keys_rotate_and_unknown_kids_refetch_at_a_limited_rate() {
    let server = key_server(&["rsa1"]).await;
    let v = JwtVerifier::new().source(KeySource::Jwks(
        Jwks::new(format!("{}/jwks.json", server.base)).min_refetch(Duration::from_millis(300)),
    ));
    let mut c = claims();
    c.as_object_mut().expect("object").remove("iss");
    v.verify(&sign(Algorithm::RS256, Some("rsa1"), &c))
        .await
        .expect("first key");
    v.verify(&sign(Algorithm::RS256, Some("rsa1"), &c))
        .await
        .expect("cached");
    assert_eq!(server.fetches.load(Ordering::SeqCst), 1);

    // The issuer rotates to rsa2 (and EC); wait out the refetch interval.
    *server.jwks.lock().expect("lock") = json!({"keys": [jwk("rsa2"), jwk("ec")]});
    tokio::time::sleep(Duration::from_millis(350)).await;
    v.verify(&sign(Algorithm::RS256, Some("rsa2"), &c))
        .await
        .expect("the new key is fetched on its unknown kid");
    assert_eq!(server.fetches.load(Ordering::SeqCst), 2);
    v.verify(&sign(Algorithm::ES256, Some("ec"), &c))
        .await
        .expect("ec from the same fetch");

    // A flood of unknown kids: refused, and at most one fetch per interval.
    for _ in 0..20 {
        let t = sign(Algorithm::RS256, Some("nope"), &c);
        assert!(v.verify(&t).await.is_err());
    }
    assert_eq!(server.fetches.load(Ordering::SeqCst), 2);
    // The retired key no longer verifies once the set was refetched.
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(
        v.verify(&sign(Algorithm::RS256, Some("rsa1"), &c))
            .await
            .is_err()
    );
    assert_eq!(server.fetches.load(Ordering::SeqCst), 3);
    // An RS256 key offered for an HS256 header: refused.
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("rsa2".into());
    let forged = jsonwebtoken::encode(
        &h,
        &c,
        &EncodingKey::from_secret(b"anything-at-all-32-bytes-long!!"),
    )
    .expect("sign");
    assert!(v.verify(&forged).await.is_err());
}

#[tokio::test]
async fn oidc_discovery_finds_the_jwks_and_fixes_the_issuer() {
    let server = key_server(&["ed"]).await;
    let v = JwtVerifier::new().source(KeySource::Oidc(Oidc::new(server.base.clone())));
    let mut c = claims();
    c["iss"] = json!(server.base);
    c.as_object_mut().expect("object").remove("aud");
    let t = v
        .verify(&sign(Algorithm::EdDSA, Some("ed"), &c))
        .await
        .expect("verified through discovery");
    assert_eq!(t.subject, "alice");
    // Same key, another issuer: refused.
    c["iss"] = json!("https://evil.test");
    assert!(
        v.verify(&sign(Algorithm::EdDSA, Some("ed"), &c))
            .await
            .is_err()
    );
}

// ---- the layer --------------------------------------------------------------------

/// An app that answers with the caller it saw.
fn app(auth: &Authenticator) -> Router {
    async fn whoami(caller: Option<axum::Extension<Caller>>) -> String {
        caller.map(|c| c.0.id).unwrap_or_default()
    }
    // One layer per binding, as a server attaches them.
    let rpc = Router::new()
        .route("/a2a", axum::routing::post(whoami))
        .layer(auth.layer(heddle_server::Binding::JsonRpc));
    let rest = Router::new()
        .route("/rest/tasks/{id}", get(whoami))
        .layer(auth.layer(heddle_server::Binding::Rest));
    let grpc = Router::new()
        .route("/lf.a2a.v1.A2AService/GetTask", axum::routing::post(whoami))
        .layer(auth.layer(heddle_server::Binding::Grpc));
    Router::new()
        .route("/.well-known/agent-card.json", get(|| async { "card" }))
        .merge(rpc)
        .merge(rest)
        .merge(grpc)
}

async fn call(app: &Router, req: Request<Body>) -> (StatusCode, http::HeaderMap, Vec<u8>) {
    let resp = app.clone().oneshot(req).await.expect("response");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.expect("body").to_bytes().to_vec();
    (parts.status, parts.headers, bytes)
}

async fn keyed() -> (Authenticator, String) {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, key) = keys.create("alice").await.expect("create");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .jwt(verifier().require_scope("a2a"))
        .build()
        .expect("auth");
    (auth, key.expose().to_owned())
}

#[tokio::test]
async fn the_layer_inserts_the_caller_and_keeps_cards_public() {
    let (auth, key) = keyed().await;
    let app = app(&auth);
    let req = Request::post("/a2a")
        .header("api-key", &key)
        .body(Body::empty())
        .expect("req");
    let (status, _, body) = call(&app, req).await;
    // The key's id (`hdk_{id}_…`) names the caller, not its name.
    assert_eq!(
        (status, String::from_utf8_lossy(&body).into_owned()),
        (
            StatusCode::OK,
            format!("key:{}", &key["hdk_".len()..][..16])
        )
    );
    let mut c = claims();
    c["scope"] = json!("a2a");
    let req = Request::get("/rest/tasks/t1")
        .header(
            "authorization",
            format!("Bearer {}", sign(Algorithm::ES256, Some("ec"), &c)),
        )
        .body(Body::empty())
        .expect("req");
    let (status, _, body) = call(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(String::from_utf8_lossy(&body), format!("jwt:{ISS}#alice"));
    let req = Request::get("/.well-known/agent-card.json")
        .body(Body::empty())
        .expect("req");
    assert_eq!(call(&app, req).await.0, StatusCode::OK);
    // The card route only reads: a POST is not served (and is no binding's
    // call, so no credentials are asked for).
    let req = Request::post("/.well-known/agent-card.json")
        .body(Body::empty())
        .expect("req");
    assert_eq!(call(&app, req).await.0, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn a_caller_authenticated_by_an_earlier_layer_is_kept() {
    let (auth, _) = keyed().await;
    let app = app(&auth);
    let mut req = Request::post("/a2a").body(Body::empty()).expect("req");
    req.extensions_mut()
        .insert(Caller::authenticated("mtls:CN=bob"));
    let (status, _, body) = call(&app, req).await;
    assert_eq!(
        (status, body.as_slice()),
        (StatusCode::OK, b"mtls:CN=bob".as_slice())
    );
}

#[tokio::test]
async fn refusals_take_each_bindings_form() {
    let (auth, key) = keyed().await;
    let app = app(&auth);

    // JSON-RPC v1.0, no credential: 401, challenges, a JSON-RPC error body.
    let req = Request::post("/a2a")
        .header("a2a-version", "1.0")
        .body(Body::empty())
        .expect("req");
    let (status, headers, body) = call(&app, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let challenges: Vec<_> = headers
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().expect("ascii").to_owned())
        .collect();
    assert!(
        challenges.iter().any(|c| c.starts_with("Bearer ")),
        "{challenges:?}"
    );
    assert!(
        challenges.iter().any(|c| c.contains("name=\"api-key\"")),
        "{challenges:?}"
    );
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["code"], JSONRPC_UNAUTHENTICATED);
    assert_eq!(v["id"], Value::Null);
    assert_eq!(v["error"]["data"][0]["reason"], "UNAUTHENTICATED");

    // REST, a revoked key: 401 with google.rpc.Status.
    auth.api_keys()
        .expect("keys")
        .revoke("alice")
        .await
        .expect("revoke");
    let req = Request::get("/rest/tasks/t1")
        .header("api-key", &key)
        .body(Body::empty())
        .expect("req");
    let (status, headers, body) = call(&app, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key("www-authenticate"));
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(v["error"]["code"], 401);
    assert!(
        !String::from_utf8_lossy(&body).contains(&key),
        "the key is not echoed"
    );

    // JSON-RPC, a token without the required scope: 403.
    let t = sign(Algorithm::HS256, Some("hs"), &claims());
    let req = Request::post("/a2a")
        .header("authorization", format!("Bearer {t}"))
        .body(Body::empty())
        .expect("req");
    let (status, headers, body) = call(&app, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        headers["www-authenticate"]
            .to_str()
            .expect("ascii")
            .contains("insufficient_scope")
    );
    let v: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(v["error"]["code"], JSONRPC_PERMISSION_DENIED);
    assert_eq!(v["error"]["data"][0]["reason"], "PERMISSION_DENIED");

    // gRPC: trailers-only UNAUTHENTICATED.
    let req = Request::post("/lf.a2a.v1.A2AService/GetTask")
        .header("content-type", "application/grpc")
        .body(Body::empty())
        .expect("req");
    let (status, headers, _) = call(&app, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["grpc-status"], "16");

    // An oversized Authorization header: 401 before any parsing.
    let req = Request::post("/a2a")
        .header("authorization", format!("Bearer {}", "a".repeat(20_000)))
        .body(Body::empty())
        .expect("req");
    assert_eq!(call(&app, req).await.0, StatusCode::UNAUTHORIZED);
    // Another scheme than Bearer: 401.
    let req = Request::post("/a2a")
        .header("authorization", "Basic YWxpY2U6cHc=")
        .body(Body::empty())
        .expect("req");
    assert_eq!(call(&app, req).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn optional_auth_serves_anonymous_callers_but_refuses_bad_credentials() {
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let auth = Authenticator::builder()
        .api_keys(keys)
        .required(false)
        .build()
        .expect("auth");
    let app = app(&auth);
    let req = Request::post("/a2a").body(Body::empty()).expect("req");
    let (status, _, body) = call(&app, req).await;
    assert_eq!((status, body.len()), (StatusCode::OK, 0));
    let req = Request::post("/a2a")
        .header("api-key", "hdk_0000000000000000_nope")
        .body(Body::empty())
        .expect("req");
    assert_eq!(call(&app, req).await.0, StatusCode::UNAUTHORIZED);
}

// ---- on a tonic server ------------------------------------------------------------

struct Idle;

#[async_trait::async_trait]
impl heddle_server::AgentExecutor for Idle {
    async fn execute(
        &self,
        _ctx: heddle_server::RequestContext,
        events: heddle_server::TaskEvents,
    ) -> Result<(), heddle_server::AgentError> {
        events.complete(None).await?;
        Ok(())
    }
}

#[tokio::test]
async fn the_layer_guards_a_tonic_server() {
    use heddle_proto::v1::a2a_service_client::A2aServiceClient;
    let (auth, key) = keyed().await;
    let handler = heddle_server::RequestHandler::new(
        "idle",
        heddle_core::v1::AgentCard::default(),
        Arc::new(Idle),
        Arc::new(heddle_store::MemoryStore::default()),
        heddle_server::Limits::default(),
    );
    let routes = heddle_server::grpc::GrpcRouter::new()
        .agent(handler)
        .routes()
        .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tonic::transport::Server::builder()
        .layer(auth.layer(heddle_server::Binding::Grpc))
        .add_routes(routes)
        .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener));
    tokio::spawn(server);
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect_lazy();
    let get = |key: Option<&str>| {
        let mut r = tonic::Request::new(heddle_core::v1::GetTaskRequest {
            id: "nope".into(),
            ..Default::default()
        });
        if let Some(k) = key {
            r.metadata_mut()
                .insert("api-key", k.parse().expect("ascii"));
        }
        r
    };
    let mut client = A2aServiceClient::new(channel);
    let refused = client.get_task(get(None)).await.expect_err("no key");
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    // With the key the call reaches the agent, which has no such task.
    let answered = client.get_task(get(Some(&key))).await.expect_err("no task");
    assert_eq!(answered.code(), tonic::Code::NotFound);
}
