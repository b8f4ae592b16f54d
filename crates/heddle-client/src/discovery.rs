//! Finding an agent: its card, and the interface to talk to it through.

use std::{collections::HashMap, sync::Mutex};

use heddle_core::{ProtocolVersion, card::parse_card, v1};

use heddle_signing::Verdict;

use crate::{Binding, CardVerification, ClientError};

/// Card paths, current name first (v1 §8.2), then the pre-0.3 one.
const CARD_PATHS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// Cached cards with their `ETag`s, revalidated with `If-None-Match`.
#[derive(Debug, Default)]
pub struct CardCache {
    entries: Mutex<HashMap<String, (String, v1::AgentCard)>>,
}

/// The card URLs to try for `url`: the URL itself when it names a card
/// (ends in `.json`), else the well-known paths under it.
fn card_urls(url: &str) -> Vec<String> {
    if url.ends_with(".json") {
        return vec![url.to_owned()];
    }
    let base = url.trim_end_matches('/');
    CARD_PATHS.iter().map(|p| format!("{base}{p}")).collect()
}

/// Fetches and reads the card of the agent at `url` (an agent base URL or a
/// card URL). Any card form (v1.0, v0.3, dual) reads into the v1.0 model.
pub async fn fetch_card(
    http: &reqwest::Client,
    url: &str,
    cache: Option<&CardCache>,
    auth: &[(String, String)],
) -> Result<(v1::AgentCard, String), ClientError> {
    fetch_card_verified(http, url, cache, auth, None).await
}

/// [`fetch_card`], then, with `verification`, a check of the card's
/// signatures on the JSON as served: anything but verified is a
/// [`ClientError::CardSignature`]. A card larger than
/// [`crate::DEFAULT_MAX_BODY_BYTES`] is a [`ClientError::BodyTooLarge`].
pub async fn fetch_card_verified(
    http: &reqwest::Client,
    url: &str,
    cache: Option<&CardCache>,
    auth: &[(String, String)],
    verification: Option<&CardVerification>,
) -> Result<(v1::AgentCard, String), ClientError> {
    fetch_card_limited(
        http,
        url,
        cache,
        auth,
        verification,
        crate::DEFAULT_MAX_BODY_BYTES,
    )
    .await
}

/// [`fetch_card_verified`] refusing cards over `max_bytes`.
pub(crate) async fn fetch_card_limited(
    http: &reqwest::Client,
    url: &str,
    cache: Option<&CardCache>,
    auth: &[(String, String)],
    verification: Option<&CardVerification>,
    max_bytes: usize,
) -> Result<(v1::AgentCard, String), ClientError> {
    let mut last = String::new();
    for card_url in card_urls(url) {
        let mut req = http.get(&card_url).header("accept", "application/json");
        for (k, v) in auth {
            req = req.header(k, v);
        }
        let cached = cache.and_then(|c| {
            c.entries
                .lock()
                .ok()
                .and_then(|m| m.get(&card_url).cloned())
        });
        if let Some((etag, _)) = &cached {
            req = req.header("if-none-match", etag);
        }
        let resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                last = ClientError::from(e).to_string();
                continue;
            }
        };
        let status = resp.status().as_u16();
        if status == 304
            && let Some((_, card)) = cached
        {
            return Ok((card, card_url));
        }
        if status != 200 {
            last = format!("GET {card_url}: HTTP {status}");
            continue;
        }
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = crate::body::read_limited(resp, max_bytes, "agent card").await?;
        let doc: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ClientError::Card(format!("{card_url}: not JSON: {e}")))?;
        let card = parse_card(&doc).map_err(|e| ClientError::Card(format!("{card_url}: {e}")))?;
        if let Some(v) = verification {
            match v.verify(http, &doc).await? {
                Verdict::Verified { .. } => {}
                other => return Err(ClientError::CardSignature(format!("{card_url}: {other}"))),
            }
        }
        if let (Some(cache), Some(etag)) = (cache, etag)
            && let Ok(mut m) = cache.entries.lock()
        {
            m.insert(card_url.clone(), (etag, card.clone()));
        }
        return Ok((card, card_url));
    }
    Err(ClientError::Card(if last.is_empty() {
        format!("no card at {url}")
    } else {
        last
    }))
}

/// A usable interface with its sort key (binding rank, version rank, card order).
type Candidate = (
    (usize, u8, usize),
    v1::AgentInterface,
    Binding,
    ProtocolVersion,
);

/// The interface to use: the caller's binding preference first, then the
/// card's order; v1.0 preferred over v0.3 for the same binding unless
/// `version` forces one.
pub fn choose_interface(
    card: &v1::AgentCard,
    bindings: &[Binding],
    version: Option<ProtocolVersion>,
) -> Result<(v1::AgentInterface, Binding, ProtocolVersion), ClientError> {
    let mut best: Option<Candidate> = None;
    for (i, iface) in card.supported_interfaces.iter().enumerate() {
        let Some(binding) = Binding::from_card_name(&iface.protocol_binding) else {
            continue;
        };
        let Some(rank) = bindings.iter().position(|b| *b == binding) else {
            continue;
        };
        let Some(v) = ProtocolVersion::parse(&iface.protocol_version) else {
            continue;
        };
        if version.is_some_and(|want| want != v) {
            continue;
        }
        let key = (rank, u8::from(v != ProtocolVersion::V1_0), i);
        if best.as_ref().is_none_or(|(k, ..)| key < *k) {
            best = Some((key, iface.clone(), binding, v));
        }
    }
    best.map(|(_, i, b, v)| (i, b, v)).ok_or_else(|| {
        let offered: Vec<String> = card
            .supported_interfaces
            .iter()
            .map(|i| format!("{} {}", i.protocol_binding, i.protocol_version))
            .collect();
        ClientError::NoInterface(format!("the card offers [{}]", offered.join(", ")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn card(ifaces: serde_json::Value) -> v1::AgentCard {
        serde_json::from_value(json!({"supportedInterfaces": ifaces})).expect("card")
    }

    #[test]
    fn preference_then_card_order_then_newest_version() {
        let c = card(json!([
            {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]));
        let (i, b, v) =
            choose_interface(&c, &[Binding::JsonRpc, Binding::Rest], None).expect("one");
        assert_eq!(
            (i.url.as_str(), b, v),
            ("http://h/a2a", Binding::JsonRpc, ProtocolVersion::V1_0)
        );
        let (i, ..) = choose_interface(&c, &[Binding::Rest, Binding::JsonRpc], None).expect("one");
        assert_eq!(i.url, "http://h/rest");
        let (_, _, v) =
            choose_interface(&c, &[Binding::JsonRpc], Some(ProtocolVersion::V0_3)).expect("forced");
        assert_eq!(v, ProtocolVersion::V0_3);
        assert!(choose_interface(&c, &[Binding::Grpc], None).is_err());
    }

    #[test]
    fn a_v03_only_card_is_usable() {
        // The AgentWeave card of seed 000, in brief.
        let doc = json!({"name": "Mimi", "description": "d", "url": "https://rest.example/api/v1/agents/x/a2a",
            "version": "1.0", "protocolVersion": "0.3", "capabilities": {"streaming": true},
            "defaultInputModes": ["text"], "defaultOutputModes": ["text"], "skills": [],
            "securitySchemes": {"apiKeyAuth": {"type": "apiKey", "in": "header", "name": "api-key"}},
            "security": [{"apiKeyAuth": []}]});
        let c = parse_card(&doc).expect("v0.3 card");
        let (i, b, v) =
            choose_interface(&c, &[Binding::JsonRpc, Binding::Rest], None).expect("usable");
        assert_eq!(
            (i.url.as_str(), b, v),
            (
                "https://rest.example/api/v1/agents/x/a2a",
                Binding::JsonRpc,
                ProtocolVersion::V0_3
            )
        );
        assert_eq!(
            crate::credentials::api_key_place(&c),
            crate::credentials::KeyPlace::Header("api-key".into())
        );
    }
}
