//! Finding agents: `GET /api/v1/agents` (search by text, tag, skill and
//! kind, paged by id) and `/.well-known/ai-catalog.json` (every listed
//! agent's card in the AI Catalog form proposed in A2A PR #2240; provisional
//! until the A2A project adopts it).
//!
//! Both show what the caller may see: enabled agents that are public, and,
//! to a caller who sends credentials, the non-public agents it owns (all of
//! them to an admin). Sending no credentials is fine: the public view.

use std::sync::Arc;

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse as _, Response},
};
use serde_json::{Value, json};

use crate::{Hub, LiveAgent, admin::Viewer, registry::check_id};

/// Agents in one page unless the caller asks for fewer.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// Most agents in one page.
pub const MAX_PAGE_SIZE: usize = 200;

/// What a listing asks for.
#[derive(Debug, Default)]
struct Search {
    text: Option<String>,
    tag: Option<String>,
    skill: Option<String>,
    kind: Option<String>,
    page_size: usize,
    after: Option<String>,
}

fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": { "code": 400, "status": "INVALID_ARGUMENT", "message": message } })),
    )
        .into_response()
}

/// The query's search, or what is wrong with it.
fn search(uri: &Uri) -> Result<Search, String> {
    let mut s = Search {
        page_size: DEFAULT_PAGE_SIZE,
        ..Search::default()
    };
    let query = uri.query().unwrap_or_default();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        let v = v.trim().to_owned();
        if v.len() > 256 {
            return Err(format!("{k} is longer than 256 bytes"));
        }
        let value = (!v.is_empty()).then_some(v);
        match k.as_ref() {
            "q" => s.text = value.map(|v| v.to_lowercase()),
            "tag" => s.tag = value.map(|v| v.to_lowercase()),
            "skill" => s.skill = value.map(|v| v.to_lowercase()),
            "kind" => s.kind = value,
            "pageSize" | "page_size" => {
                s.page_size = match value.as_deref().map(str::parse::<usize>) {
                    None => DEFAULT_PAGE_SIZE,
                    Some(Ok(n)) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
                    Some(_) => {
                        return Err(format!(
                            "pageSize must be a number from 1 to {MAX_PAGE_SIZE}"
                        ));
                    }
                };
            }
            "pageToken" | "page_token" => {
                if let Some(t) = &value
                    && check_id(t).is_err()
                {
                    return Err("pageToken is not one this hub gave".into());
                }
                s.after = value;
            }
            // Unknown parameters are ignored, as most listing APIs do.
            _ => {}
        }
    }
    Ok(s)
}

impl Search {
    fn matches(&self, agent: &LiveAgent) -> bool {
        let card = agent.handler.card();
        let entry = &agent.entry;
        let tags = || {
            entry
                .tags
                .iter()
                .chain(card.skills.iter().flat_map(|s| s.tags.iter()))
        };
        if let Some(kind) = &self.kind
            && entry.kind.as_str() != kind
        {
            return false;
        }
        if let Some(tag) = &self.tag
            && !tags().any(|t| t.to_lowercase() == *tag)
        {
            return false;
        }
        if let Some(skill) = &self.skill
            && !card
                .skills
                .iter()
                .any(|s| s.id.to_lowercase() == *skill || s.name.to_lowercase() == *skill)
        {
            return false;
        }
        if let Some(text) = &self.text {
            let found = entry.id.contains(text.as_str())
                || card.name.to_lowercase().contains(text.as_str())
                || card.description.to_lowercase().contains(text.as_str())
                || tags().any(|t| t.to_lowercase().contains(text.as_str()))
                || card.skills.iter().any(|s| {
                    s.name.to_lowercase().contains(text.as_str())
                        || s.description.to_lowercase().contains(text.as_str())
                });
            if !found {
                return false;
            }
        }
        true
    }
}

impl Hub {
    /// The agents `viewer` may see, by id.
    fn visible(&self, viewer: &Viewer) -> Vec<Arc<LiveAgent>> {
        self.shared
            .live
            .all()
            .into_iter()
            .filter(|a| a.entry.enabled)
            .filter(|a| a.entry.public || viewer.may_see(a.entry.owner.as_deref()))
            .collect()
    }

    fn card_url(&self, id: &str) -> String {
        format!(
            "{}/.well-known/agent-card.json",
            Hub::agent_url(&self.shared.public_url, id)
        )
    }

    fn listing(&self, agent: &LiveAgent) -> Value {
        let card = agent.handler.card();
        let id = &agent.entry.id;
        let base = Hub::agent_url(&self.shared.public_url, id);
        let url = if self.shared.bindings.jsonrpc {
            format!("{base}/a2a")
        } else {
            format!("{base}/rest")
        };
        let skills: Vec<Value> = card
            .skills
            .iter()
            .map(|s| json!({ "id": s.id, "name": s.name, "tags": s.tags }))
            .collect();
        let mut listing = json!({
            "id": id,
            "name": card.name,
            "description": card.description,
            "kind": agent.entry.kind.as_str(),
            "tags": agent.entry.tags,
            "skills": skills,
            "public": agent.entry.public,
            "cardUrl": self.card_url(id),
            "url": url,
            "signature": self.card_signature(agent),
        });
        // The price in force: the entry's, or its manifest's.
        if let Some(gate) = &agent.market {
            let p = gate.price();
            let mut price = json!({
                "model": p.model,
                "rate": p.rate_json()["amount"],
                "currency": p.currency,
            });
            for (skill, sp) in &p.skills {
                price["skills"][skill] =
                    json!({ "model": sp.model, "rate": sp.rate_json()["amount"] });
            }
            listing["price"] = price;
        }
        if agent.entry.kind == crate::registry::AgentKind::Remote {
            listing["upstreamSignature"] = json!(agent.entry.upstream_signature);
            listing["health"] = match self.shared.metrics.upstream_health(id) {
                None => json!({ "state": "unknown" }),
                Some(h) => json!({
                    "state": if h.ok { "ok" } else { "failing" },
                    "checkedAt": h.at_ms,
                }),
            };
        }
        listing
    }

    /// The served card's signature checked against the hub's own keys:
    /// `verified`, `absent`, or why not (worked out once per agent build).
    fn card_signature(&self, agent: &LiveAgent) -> &'static str {
        agent.signature.get_or_init(|| {
            let card = heddle_core::card::dual_card_json(agent.handler.card());
            let mut keys = heddle_client::heddle_signing::KeySet::new();
            for jwk in self.jwks() {
                // A key the set cannot take leaves the card unverifiable.
                let _ = keys.add(jwk);
            }
            heddle_client::heddle_signing::verify_card(&card, &keys).name()
        })
    }
}

/// `GET /api/v1/agents`.
pub(crate) async fn list(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    let search = match search(&uri) {
        Ok(s) => s,
        Err(why) => return bad_request(&why),
    };
    let viewer = Viewer::of(&hub, &headers, &uri).await;
    let found: Vec<Arc<LiveAgent>> = hub
        .visible(&viewer)
        .into_iter()
        .filter(|a| search.matches(a))
        .collect();
    let total = found.len();
    let page: Vec<&Arc<LiveAgent>> = found
        .iter()
        .filter(|a| {
            search
                .after
                .as_deref()
                .is_none_or(|after| a.entry.id.as_str() > after)
        })
        .take(search.page_size.saturating_add(1))
        .collect();
    let more = page.len() > search.page_size;
    let page = &page[..page.len().min(search.page_size)];
    let mut body = json!({
        "agents": page.iter().map(|a| hub.listing(a)).collect::<Vec<_>>(),
        "totalSize": total,
    });
    if more && let Some(last) = page.last() {
        body["nextPageToken"] = json!(last.entry.id);
    }
    Json(body).into_response()
}

/// `GET /.well-known/ai-catalog.json`.
pub(crate) async fn ai_catalog(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    let viewer = Viewer::of(&hub, &headers, &uri).await;
    let host = url::Url::parse(&hub.shared.public_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    let entries: Vec<Value> = hub
        .visible(&viewer)
        .iter()
        .map(|a| {
            let card = a.handler.card();
            let mut tags = a.entry.tags.clone();
            for skill in &card.skills {
                for t in &skill.tags {
                    if !tags.contains(t) {
                        tags.push(t.clone());
                    }
                }
            }
            json!({
                "identifier": format!("urn:heddle:{host}:agent:{}", a.entry.id),
                "displayName": card.name,
                "type": "application/a2a-agent-card+json",
                "url": hub.card_url(&a.entry.id),
                "description": card.description,
                "tags": tags,
            })
        })
        .collect();
    Json(json!({
        "specVersion": "1.0",
        "host": { "displayName": "Heddle hub", "identifier": hub.shared.public_url },
        "entries": entries,
    }))
    .into_response()
}
