//! Finding agents: `GET /api/v1/agents` (text, tag, skill and kind
//! filters, paging) and `/.well-known/ai-catalog.json`, each showing the
//! caller what it may see: public enabled agents to anyone, a non-public
//! one to its owner and admins, a disabled one to nobody.

use std::sync::Arc;

use axum::Router;
use heddle_auth::{
    Authenticator,
    apikey::{ApiKeys, MemoryKeyStore},
};
use heddle_hub::{
    AdminAccess, Hub,
    agents::{DemoOptions, demo_builtins},
    registry::AgentEntry,
};
use serde_json::Value;

mod live;

use live::{Answer, bearer, memory, oneshot};

const TOKEN: &str = "discovery-admin-token";
const PUBLIC: &str = "http://test.local";

/// Everyone may see these.
const LISTED: [&str; 6] = ["alpha", "bravo", "charlie", "delta", "echo", "far"];

struct Setup {
    router: Router,
    /// The API key of the hidden agent's owner, and of someone else.
    owner: String,
    other: String,
}

fn builtin(id: &str, builtin: &str) -> AgentEntry {
    AgentEntry::builtin(id, builtin)
}

async fn setup() -> Setup {
    let upstream = live::serve(|public, _| {
        demo_builtins(Hub::builder(public, memory()), DemoOptions::default())
            .entry(builtin("echo", "echo"))
    })
    .await;
    let keys = ApiKeys::new(Arc::new(MemoryKeyStore::default()));
    let (owner_record, owner) = keys.create("owner").await.expect("owner");
    let (_, other) = keys.create("other").await.expect("other");
    let auth = Authenticator::builder()
        .api_keys(keys)
        .build()
        .expect("authenticator");
    let mut alpha = builtin("alpha", "echo");
    alpha.description = Some("Totals invoices.".into());
    alpha.tags = vec!["finance".into()];
    let mut delta = builtin("delta", "echo");
    delta.name = Some("Delta".into());
    let mut hidden = builtin("hidden", "echo");
    hidden.public = false;
    hidden.owner = Some(owner_record.principal());
    let mut off = builtin("off", "echo");
    off.enabled = false;
    let hub = demo_builtins(Hub::builder(PUBLIC, memory()), DemoOptions::default())
        .authenticator(auth)
        .admin(AdminAccess::default().token(TOKEN))
        .entry(alpha)
        .entry(builtin("bravo", "writer"))
        .entry(builtin("charlie", "writer-stream"))
        .entry(delta)
        .entry(builtin("echo", "echo"))
        .entry(hidden)
        .entry(off)
        .build()
        .await;
    let mut far = AgentEntry::remote("far", format!("{}/api/v1/agents/echo", upstream.base));
    far.allow_http = true;
    hub.register(far).await.expect("a remote agent");
    Setup {
        router: hub.router(),
        owner: owner.expose().to_owned(),
        other: other.expose().to_owned(),
    }
}

/// Who asks.
#[derive(Clone, Copy)]
enum As<'a> {
    Anyone,
    Key(&'a str),
    Admin,
}

async fn get(router: &Router, uri: &str, who: As<'_>) -> Answer {
    let auth = bearer(TOKEN);
    let headers: Vec<(&str, &str)> = match who {
        As::Anyone => vec![],
        As::Key(k) => vec![("api-key", k)],
        As::Admin => vec![("authorization", auth.as_str())],
    };
    oneshot(router, "GET", uri, &headers, None).await
}

fn ids(a: &Answer) -> Vec<String> {
    a.json["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents: {} {}", a.status, a.text))
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_owned))
        .collect()
}

async fn found(router: &Router, query: &str) -> Vec<String> {
    let a = get(router, &format!("/api/v1/agents?{query}"), As::Anyone).await;
    assert_eq!(a.status, 200, "{query}: {}", a.text);
    ids(&a)
}

#[tokio::test]
async fn searches_filter_by_text_tag_skill_and_kind() {
    let s = setup().await;
    for (query, expected) in [
        ("", &LISTED[..]),
        ("q=totals", &["alpha"][..]),
        ("q=REPORT", &["bravo", "charlie"][..]),
        ("q=nothing-like-this", &[][..]),
        ("tag=finance", &["alpha"][..]),
        ("tag=Streaming", &["charlie"][..]),
        ("skill=writer", &["bravo"][..]),
        ("skill=streaming%20writer", &["charlie"][..]),
        ("kind=remote", &["far"][..]),
        (
            "kind=builtin",
            &["alpha", "bravo", "charlie", "delta", "echo"][..],
        ),
        ("kind=remote&q=echo", &["far"][..]),
        ("tag=finance&kind=remote", &[][..]),
    ] {
        assert_eq!(found(&s.router, query).await, expected, "{query}");
    }
    let all = get(&s.router, "/api/v1/agents?q=totals", As::Anyone).await;
    let alpha = &all.json["agents"][0];
    assert_eq!(alpha["kind"], "builtin");
    assert_eq!(
        alpha["cardUrl"],
        format!("{PUBLIC}/api/v1/agents/alpha/.well-known/agent-card.json")
    );
    assert_eq!(alpha["url"], format!("{PUBLIC}/api/v1/agents/alpha/a2a"));
}

#[tokio::test]
async fn pages_return_each_agent_once_and_bad_sizes_are_refused() {
    let s = setup().await;
    let mut seen = Vec::new();
    let mut pages = 0;
    let mut token: Option<String> = None;
    loop {
        let uri = match &token {
            Some(t) => format!("/api/v1/agents?pageSize=2&pageToken={t}"),
            None => "/api/v1/agents?pageSize=2".to_owned(),
        };
        let page = get(&s.router, &uri, As::Anyone).await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.json["totalSize"], LISTED.len(), "{}", page.text);
        let got = ids(&page);
        assert!(got.len() <= 2, "{got:?}");
        seen.extend(got);
        pages += 1;
        assert!(pages <= LISTED.len(), "paging never ends: {seen:?}");
        match page.json["nextPageToken"].as_str() {
            Some(t) => token = Some(t.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, LISTED);
    assert_eq!(pages, 3);
    for bad in [
        "pageSize=0",
        "pageSize=1000",
        "pageSize=two",
        "pageToken=Not%20A%20Token",
    ] {
        let a = get(&s.router, &format!("/api/v1/agents?{bad}"), As::Anyone).await;
        assert_eq!(a.status, 400, "{bad}: {}", a.text);
    }
}

#[tokio::test]
async fn a_private_agent_is_listed_to_its_owner_and_admins_and_a_disabled_one_to_nobody() {
    let s = setup().await;
    let with_hidden: Vec<&str> = {
        let mut v = LISTED.to_vec();
        v.push("hidden");
        v
    };
    for (who, name, expected) in [
        (As::Anyone, "anyone", &LISTED[..]),
        (As::Key(&s.other), "another key", &LISTED[..]),
        (As::Key(&s.owner), "the owner", &with_hidden[..]),
        (As::Admin, "an admin", &with_hidden[..]),
    ] {
        let list = get(&s.router, "/api/v1/agents", who).await;
        assert_eq!(ids(&list), expected, "{name}");
        let catalog = get(&s.router, "/.well-known/ai-catalog.json", who).await;
        let urls: Vec<&str> = catalog.json["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["url"].as_str())
            .collect();
        let expected_urls: Vec<String> = expected
            .iter()
            .map(|id| format!("{PUBLIC}/api/v1/agents/{id}/.well-known/agent-card.json"))
            .collect();
        assert_eq!(urls, expected_urls, "{name}: the catalog");
    }
    // A bad key is an anonymous caller here, not an error.
    let bad = get(
        &s.router,
        "/api/v1/agents",
        As::Key("hk_0000000000000000_x"),
    )
    .await;
    assert_eq!(ids(&bad), LISTED);
}

#[tokio::test]
async fn the_ai_catalog_lists_each_visible_card_and_each_url_serves_it() {
    let s = setup().await;
    let catalog = get(&s.router, "/.well-known/ai-catalog.json", As::Anyone).await;
    assert_eq!(catalog.status, 200, "{}", catalog.text);
    let entries = catalog.json["entries"].as_array().expect("entries");
    let listing = get(&s.router, "/api/v1/agents", As::Anyone).await;
    let listed: Vec<&Value> = listing.json["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .collect();
    assert_eq!(entries.len(), listed.len());
    for (entry, agent) in entries.iter().zip(listed) {
        assert_eq!(entry["type"], "application/a2a-agent-card+json", "{entry}");
        assert_eq!(entry["url"], agent["cardUrl"], "{entry}");
        assert_eq!(entry["displayName"], agent["name"], "{entry}");
        let url = entry["url"].as_str().expect("a URL");
        let path = url.strip_prefix(PUBLIC).expect("a URL of the hub");
        let card = get(&s.router, path, As::Anyone).await;
        assert_eq!(card.status, 200, "{url}: {}", card.text);
        assert_eq!(card.json["name"], entry["displayName"], "{url}");
    }
}
