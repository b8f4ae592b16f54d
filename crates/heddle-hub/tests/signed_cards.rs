//! Signed cards end to end: a hub behind API keys that signs its cards
//! (the public one and the extended one), and the Heddle client requiring
//! signatures, over every binding and both versions.

use std::sync::Arc;

use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
};
use heddle_client::{
    A2aClient, Binding, CardVerification, ClientError, ClientOptions, Credentials, Secret,
};
use heddle_core::ProtocolVersion;
use heddle_hub::{AgentProfile, Hub, agents::Echo};
use heddle_signing::{CardSigner, SigningKey};
use heddle_store::MemoryStore;

mod live;

fn key(file: &str, kid: &str) -> SigningKey {
    let path = format!(
        "{}/../heddle-signing/testdata/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).expect("test key");
    SigningKey::from_file_text(&text, None, Some(kid)).expect("key")
}

/// Trusts exactly the public key of `key`.
fn trusting(key: &SigningKey) -> CardVerification {
    let jwk = key.public_jwk().expect("an asymmetric key");
    CardVerification::default()
        .with_jwks_text(&jwk.to_string())
        .expect("JWK")
}

/// A hub on real listeners whose cards `signer` signs; returns the echo
/// agent's URL and an API key.
async fn signing_hub(signer: CardSigner) -> (String, String) {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let public_url = format!("http://{}", http.local_addr().expect("addr"));
    let grpc_addr = grpc.local_addr().expect("addr");
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (_, alice) = keys.create("alice").await.expect("alice");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .build()
        .expect("auth");
    let hub = Hub::builder(&public_url, Arc::new(MemoryStore::default()))
        .grpc_url(grpc_addr.to_string())
        .authenticator(auth)
        .card_hook(Arc::new(move |_, card| {
            signer.sign(card).expect("the test key signs");
        }))
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    let grpc_app = hub.grpc_app().expect("gRPC");
    let never = std::future::pending::<()>;
    tokio::spawn(heddle_server::listen::serve(http, hub.router(), never()));
    tokio::spawn(heddle_server::listen::serve(grpc, grpc_app, never()));
    (
        format!("{public_url}/api/v1/agents/echo"),
        alice.expose().to_owned(),
    )
}

const WIRES: [(Binding, ProtocolVersion); 6] = [
    (Binding::JsonRpc, ProtocolVersion::V1_0),
    (Binding::JsonRpc, ProtocolVersion::V0_3),
    (Binding::Rest, ProtocolVersion::V1_0),
    (Binding::Rest, ProtocolVersion::V0_3),
    (Binding::Grpc, ProtocolVersion::V1_0),
    (Binding::Grpc, ProtocolVersion::V0_3),
];

fn options(
    binding: Binding,
    version: ProtocolVersion,
    api_key: &str,
    verification: CardVerification,
) -> ClientOptions {
    ClientOptions {
        bindings: vec![binding],
        version: Some(version),
        credentials: Credentials {
            api_key: Some(Secret::new(api_key)),
            ..Default::default()
        },
        card_verification: Some(verification),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_extended_card_is_signed_and_verified_on_every_wire() {
    let signing = key("ec.pem", "hub-key");
    let (url, api_key) = signing_hub(CardSigner::new(key("ec.pem", "hub-key"), None)).await;
    for (binding, version) in WIRES {
        let wire = format!("{binding:?} {version}");
        let client = A2aClient::discover(
            &url,
            options(binding, version, &api_key, trusting(&signing)),
        )
        .await
        .unwrap_or_else(|e| panic!("{wire}: discovery of the signed card: {e}"));
        let card = client
            .extended_card()
            .await
            .unwrap_or_else(|e| panic!("{wire}: extended card: {e}"));
        assert!(
            card.skills.iter().any(|s| s.id == "private-tasks"),
            "{wire}: not the extended card"
        );
        assert!(!card.signatures.is_empty(), "{wire}: unsigned");
    }
}

#[tokio::test]
async fn an_extended_card_signed_by_another_key_is_refused() {
    let (url, api_key) = signing_hub(CardSigner::new(key("ec.pem", "hub-key"), None)).await;
    let stranger = key("ed25519.pem", "stranger");
    for (binding, version) in WIRES {
        let wire = format!("{binding:?} {version}");
        // Discovery refuses the public card too; bind to it unverified, as
        // a caller holding the card already would, and ask for the extended one.
        let refused = A2aClient::discover(
            &url,
            options(binding, version, &api_key, trusting(&stranger)),
        )
        .await;
        assert!(
            matches!(refused, Err(ClientError::CardSignature(_))),
            "{wire}: {refused:?}"
        );
        let mut opts = options(binding, version, &api_key, trusting(&stranger));
        opts.card_verification = None;
        let card = A2aClient::discover(&url, opts)
            .await
            .expect("unverified discovery")
            .card()
            .clone();
        let client = A2aClient::from_card(
            card,
            options(binding, version, &api_key, trusting(&stranger)),
        )
        .expect("client");
        match client.extended_card().await {
            Err(ClientError::CardSignature(why)) => {
                assert!(why.contains("extended card"), "{wire}: {why}");
            }
            other => panic!("{wire}: {other:?}"),
        }
    }
}

/// A plain (unsigned, open) Heddle hub serving `echo` on a real port: the
/// upstream a signing hub fronts. Returns its echo agent's base URL.
async fn upstream() -> String {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let public_url = format!("http://{}", http.local_addr().expect("addr"));
    let hub = Hub::builder(&public_url, Arc::new(MemoryStore::default()))
        .agent(
            "echo",
            AgentProfile::new("echo", "Upstream echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    let never = std::future::pending::<()>;
    tokio::spawn(heddle_server::listen::serve(http, hub.router(), never()));
    format!("{public_url}/api/v1/agents/echo")
}

#[tokio::test]
async fn a_remote_agent_registered_at_run_time_is_served_with_a_card_the_hub_signs() {
    let up = upstream().await;
    let signing = key("ec.pem", "hub-key");
    let signer = CardSigner::new(key("ec.pem", "hub-key"), None);
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let public_url = format!("http://{}", http.local_addr().expect("addr"));
    let hub = Hub::builder(&public_url, Arc::new(MemoryStore::default()))
        .card_hook(Arc::new(move |_, card| {
            signer.sign(card).expect("the test key signs");
        }))
        .build()
        .await;
    let mut entry = heddle_hub::registry::AgentEntry::remote("fronted", up.clone());
    entry.allow_http = true;
    hub.register(entry).await.expect("registered while serving");
    let never = std::future::pending::<()>;
    tokio::spawn(heddle_server::listen::serve(http, hub.router(), never()));

    let url = format!("{public_url}/api/v1/agents/fronted");
    let opts = ClientOptions {
        bindings: vec![Binding::JsonRpc],
        card_verification: Some(trusting(&signing)),
        ..Default::default()
    };
    let client = A2aClient::discover(&url, opts)
        .await
        .expect("the hub's card for the remote agent verifies with the hub's key");
    let card = client.card();
    assert_eq!(card.name, "Upstream echo", "the upstream's card, rewritten");
    assert!(!card.signatures.is_empty(), "signed");
    assert!(
        card.supported_interfaces
            .iter()
            .all(|i| i.url.starts_with(&public_url)),
        "every interface is the hub's: {:?}",
        card.supported_interfaces
    );
    let reply = client.send_text("through the hub").await.expect("send");
    let heddle_client::SendReply::Task(task) = reply else {
        panic!("a task");
    };
    assert_eq!(
        task.status.as_ref().map(|s| s.state()),
        Some(heddle_core::v1::TaskState::Completed)
    );

    // A key the hub does not sign with is refused: the signature is real.
    let stranger = key("ed25519.pem", "stranger");
    let refused = A2aClient::discover(
        &url,
        ClientOptions {
            bindings: vec![Binding::JsonRpc],
            card_verification: Some(trusting(&stranger)),
            ..Default::default()
        },
    )
    .await;
    assert!(
        matches!(refused, Err(ClientError::CardSignature(_))),
        "{refused:?}"
    );
}

/// What `GET /api/v1/agents` says of the echo agent's card signature when
/// the hub signs with `signer` and publishes `published`.
async fn listed_signature(signer: CardSigner, published: Vec<serde_json::Value>) -> String {
    let hub = Hub::builder("http://hub.test", Arc::new(MemoryStore::default()))
        .card_hook(Arc::new(move |_, card| {
            signer.sign(card).expect("the test key signs");
        }))
        .publish_keys(published)
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .build()
        .await;
    let list = live::oneshot(&hub.router(), "GET", "/api/v1/agents", &[], None).await;
    list.json["agents"][0]["signature"]
        .as_str()
        .expect("a signature status")
        .to_owned()
}

#[tokio::test]
async fn discovery_says_a_card_signed_with_a_published_key_is_verified() {
    let jwk = key("ec.pem", "hub-key")
        .public_jwk()
        .expect("an asymmetric key");
    let signer = CardSigner::new(key("ec.pem", "hub-key"), None);
    assert_eq!(listed_signature(signer, vec![jwk]).await, "verified");
    // Signed with a key the hub does not publish: nobody can check it.
    let stranger = CardSigner::new(key("ed25519.pem", "stranger"), None);
    assert_eq!(listed_signature(stranger, Vec::new()).await, "unverifiable");
}
