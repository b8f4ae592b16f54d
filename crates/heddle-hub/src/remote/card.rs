//! Fetching and checking a remote agent's card once, at registration
//! ([`fetch_card`]), and the profile the hub serves for it ([`hub_profile`]).

use std::time::Duration;

use heddle_client::{
    CardVerification,
    heddle_signing::{Verdict, signature_headers},
    reqwest,
};
use heddle_core::{card::parse_card, v1};
use serde_json::Value;

use super::{RemoteError, screen::screen, shown_url};
use crate::AgentProfile;

/// Card paths tried under an agent's base URL: the current name, then the
/// pre-0.3 one.
const CARD_PATHS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// How [`fetch_card`] fetches and checks a card.
#[derive(Clone, Debug)]
pub struct FetchOptions {
    /// Accept `http` (plaintext) for the card URL and the card's interfaces.
    /// Off by default: plaintext interfaces are dropped from the card, and a
    /// card left with none is refused.
    pub allow_http: bool,
    /// Largest card accepted, in bytes (default 512 KiB).
    pub max_bytes: usize,
    /// The whole fetch, key look-ups included (default 10 s).
    pub timeout: Duration,
    /// Keys trusted for card signatures: pinned keys, JWKS URLs, trusted
    /// `jku` prefixes.
    pub verification: CardVerification,
    /// Also trust a signature's `jku` on the card's own origin (scheme, host
    /// and port of the card URL). Default on: the agent's site vouching for
    /// its own card.
    pub trust_origin_jku: bool,
    /// Accept a card whose signature is invalid (default: refused).
    pub allow_invalid_signature: bool,
    /// Refuse a card without a signature that verifies (absent or
    /// unverifiable). Default off.
    pub require_signature: bool,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            allow_http: false,
            max_bytes: 512 << 10,
            timeout: Duration::from_secs(10),
            verification: CardVerification::default(),
            trust_origin_jku: true,
            allow_invalid_signature: false,
            require_signature: false,
        }
    }
}

/// What checking a card's signatures found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SignatureStatus {
    /// A signature verified with a trusted key.
    Verified {
        /// The key's id, when the signature named one.
        kid: Option<String>,
    },
    /// The card is not signed.
    Absent,
    /// Signed, but no trusted key could check it (unknown key, `jku` not
    /// trusted or unreachable). Accepted with a warning unless
    /// [`FetchOptions::require_signature`].
    Unverifiable(String),
    /// A signature is malformed or does not match the card. Refused unless
    /// [`FetchOptions::allow_invalid_signature`].
    Invalid(String),
}

impl SignatureStatus {
    /// The one-word name: `verified`, `unverifiable`, `absent`, `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            SignatureStatus::Verified { .. } => "verified",
            SignatureStatus::Absent => "absent",
            SignatureStatus::Unverifiable(_) => "unverifiable",
            SignatureStatus::Invalid(_) => "invalid",
        }
    }
}

/// A fetched and checked card.
#[derive(Clone, Debug)]
pub struct FetchedCard {
    /// The card in the v1.0 model (a v0.3 card is converted), without the
    /// interfaces that were refused.
    pub card: v1::AgentCard,
    /// The card as served.
    pub raw: Value,
    /// The URL it was read from.
    pub url: String,
    /// Things a person should look at before trusting the agent: suspicious
    /// text (see [`super::screen`]), dropped interfaces, an unverifiable signature.
    pub warnings: Vec<String>,
    /// The signature check.
    pub signature: SignatureStatus,
}

/// Fetches the card at `url` (a card URL ending in `.json`, or an agent's
/// base URL, under which the well-known paths are tried), once, and checks
/// it: the size and time bounds of `opts`, a card of either version,
/// plaintext interfaces refused unless allowed, signatures verified when
/// present, and the text screened for instructions aimed at a model.
pub async fn fetch_card(url: &str, opts: &FetchOptions) -> Result<FetchedCard, RemoteError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| RemoteError::InvalidUrl(format!("{}: {e}", shown_url(url))))?;
    match parsed.scheme() {
        "https" => {}
        "http" if opts.allow_http => {}
        "http" => {
            return Err(RemoteError::PlainHttp(format!(
                "the card URL {} is plain http",
                shown_url(url)
            )));
        }
        other => {
            return Err(RemoteError::InvalidUrl(format!(
                "{}: scheme {other:?} is not http or https",
                shown_url(url)
            )));
        }
    }
    let http = reqwest::Client::builder()
        .timeout(opts.timeout)
        .connect_timeout(opts.timeout)
        .redirect(reqwest::redirect::Policy::limited(3))
        .user_agent(concat!("heddle-hub/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RemoteError::Fetch(format!("cannot build an HTTP client: {e}")))?;
    let fetched = tokio::time::timeout(opts.timeout, fetch_and_check(&http, &parsed, opts)).await;
    fetched.unwrap_or_else(|_| {
        Err(RemoteError::Fetch(format!(
            "{}: no card within {:?}",
            shown_url(url),
            opts.timeout
        )))
    })
}

async fn fetch_and_check(
    http: &reqwest::Client,
    url: &reqwest::Url,
    opts: &FetchOptions,
) -> Result<FetchedCard, RemoteError> {
    let (raw, card_url) = fetch_json(http, url, opts.max_bytes).await?;
    let shown = shown_url(card_url.as_str());
    if !raw.is_object() {
        return Err(RemoteError::InvalidCard(format!(
            "{shown}: not a JSON object"
        )));
    }
    let mut card =
        parse_card(&raw).map_err(|e| RemoteError::InvalidCard(format!("{shown}: {e}")))?;
    let mut warnings = Vec::new();
    check_interfaces(&mut card, opts.allow_http, &mut warnings)?;

    let mut verification = opts.verification.clone();
    if opts.trust_origin_jku {
        verification
            .trusted_jku
            .push(card_url.origin().ascii_serialization());
    }
    let verdict = verification
        .verify(http, &raw)
        .await
        .map_err(|e| RemoteError::Signature(e.to_string()))?;
    let signature = match verdict {
        Verdict::Verified { kid, .. } => SignatureStatus::Verified { kid },
        Verdict::Absent => SignatureStatus::Absent,
        Verdict::Unverifiable(why) => SignatureStatus::Unverifiable(why),
        Verdict::Invalid(why) => SignatureStatus::Invalid(why),
    };
    match &signature {
        SignatureStatus::Invalid(why) if !opts.allow_invalid_signature => {
            return Err(RemoteError::Signature(format!("{shown}: invalid: {why}")));
        }
        SignatureStatus::Invalid(why) => {
            warnings.push(format!("the card's signature is invalid: {why}"));
        }
        SignatureStatus::Absent | SignatureStatus::Unverifiable(_) if opts.require_signature => {
            return Err(RemoteError::Signature(format!(
                "{shown}: a verified signature is required, and {}",
                match &signature {
                    SignatureStatus::Unverifiable(why) => format!("none could be checked: {why}"),
                    _ => "the card is not signed".to_owned(),
                }
            )));
        }
        SignatureStatus::Unverifiable(why) => {
            let jkus: Vec<String> = signature_headers(&raw)
                .into_iter()
                .filter_map(|h| h.jku)
                .collect();
            warnings.push(format!(
                "the card is signed, but the signature could not be checked: {why}{}",
                if jkus.is_empty() {
                    String::new()
                } else {
                    format!(" (keys named at {})", jkus.join(", "))
                }
            ));
        }
        _ => {}
    }
    warnings.extend(screen(&card));
    Ok(FetchedCard {
        card,
        raw,
        url: card_url.to_string(),
        warnings,
        signature,
    })
}

/// The card JSON, from the URL itself when it names a `.json` file, else
/// from the first well-known path that answers 200.
async fn fetch_json(
    http: &reqwest::Client,
    url: &reqwest::Url,
    max_bytes: usize,
) -> Result<(Value, reqwest::Url), RemoteError> {
    let candidates: Vec<reqwest::Url> = if url.path().ends_with(".json") {
        vec![url.clone()]
    } else {
        let base = url.as_str().trim_end_matches('/');
        CARD_PATHS
            .iter()
            .filter_map(|p| reqwest::Url::parse(&format!("{base}{p}")).ok())
            .collect()
    };
    let mut last = String::new();
    for candidate in candidates {
        let shown = shown_url(candidate.as_str());
        let resp = match http
            .get(candidate.clone())
            .header("accept", "application/json")
            .send()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                last = format!("{shown}: {}", heddle_client::ClientError::from(e));
                continue;
            }
        };
        if resp.status() != reqwest::StatusCode::OK {
            last = format!("{shown}: HTTP {}", resp.status().as_u16());
            continue;
        }
        let body = read_capped(resp, max_bytes).await.map_err(|e| match e {
            RemoteError::Fetch(why) => RemoteError::Fetch(format!("{shown}: {why}")),
            other => other,
        })?;
        let doc = serde_json::from_slice(&body)
            .map_err(|e| RemoteError::InvalidCard(format!("{shown}: not JSON: {e}")))?;
        return Ok((doc, candidate));
    }
    Err(RemoteError::Fetch(last))
}

/// The body, refused past `max` bytes (by its `Content-Length` first, then
/// as it arrives).
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, RemoteError> {
    let too_large = || RemoteError::TooLarge { limit: max };
    if resp
        .content_length()
        .is_some_and(|n| usize::try_from(n).map_or(true, |n| n > max))
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| RemoteError::Fetch(heddle_client::ClientError::from(e).to_string()))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Drops the interfaces the hub will not call (plaintext unless allowed,
/// an unreadable URL), each with a warning; a card left with none is refused.
/// A card [`fetch_card`] fetched earlier, as its `raw` JSON was kept: the
/// same parse and interface rules, without the network (signatures were
/// checked when it was fetched).
pub fn kept_card(raw: &serde_json::Value, allow_http: bool) -> Result<v1::AgentCard, RemoteError> {
    let mut card = parse_card(raw).map_err(|e| RemoteError::InvalidCard(e.to_string()))?;
    check_interfaces(&mut card, allow_http, &mut Vec::new())?;
    Ok(card)
}

fn check_interfaces(
    card: &mut v1::AgentCard,
    allow_http: bool,
    warnings: &mut Vec<String>,
) -> Result<(), RemoteError> {
    if card.supported_interfaces.is_empty() {
        return Err(RemoteError::InvalidCard(
            "the card lists no interface".into(),
        ));
    }
    let mut refused = Vec::new();
    card.supported_interfaces.retain(|i| {
        let what = format!(
            "{} {} at {}",
            i.protocol_binding,
            i.protocol_version,
            shown_url(&i.url)
        );
        let plain = match i.url.split_once("://") {
            Some((scheme, _)) => match scheme.to_ascii_lowercase().as_str() {
                "https" | "grpcs" => false,
                "http" | "grpc" => true,
                _ => {
                    warnings.push(format!("interface {what} dropped: unknown URL scheme"));
                    return false;
                }
            },
            // A bare gRPC `host:port` is plaintext.
            None if i.protocol_binding == "GRPC" => true,
            None => {
                warnings.push(format!("interface {what} dropped: not an absolute URL"));
                return false;
            }
        };
        if plain && !allow_http {
            refused.push(what);
            return false;
        }
        true
    });
    if card.supported_interfaces.is_empty() {
        return Err(RemoteError::PlainHttp(if refused.is_empty() {
            "no interface of the card has a usable URL".to_owned()
        } else {
            format!(
                "every interface is plaintext ({}); allow http to use it",
                refused.join(", ")
            )
        }));
    }
    for what in refused {
        warnings.push(format!("interface {what} dropped: plaintext"));
    }
    Ok(())
}

/// What the hub serves for an upstream agent: its name, description,
/// skills, modes, streaming, extensions, provider and version. The hub's
/// card then lists the hub's own interfaces (and is signed by the hub when
/// it signs cards), and declares the hub's security schemes, not the
/// upstream's: skills lose their security requirements, which name the
/// upstream's schemes. The upstream's icon and documentation URLs are not
/// part of a profile.
pub fn hub_profile(upstream: &v1::AgentCard) -> AgentProfile {
    let caps = upstream.capabilities.clone().unwrap_or_default();
    AgentProfile {
        name: upstream.name.clone(),
        description: upstream.description.clone(),
        skills: upstream
            .skills
            .iter()
            .map(|s| v1::AgentSkill {
                security_requirements: Vec::new(),
                ..s.clone()
            })
            .collect(),
        streaming: caps.streaming.unwrap_or(false),
        input_modes: upstream.default_input_modes.clone(),
        output_modes: upstream.default_output_modes.clone(),
        extensions: caps.extensions,
        provider: upstream.provider.clone(),
        version: upstream.version.clone(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn iface(url: &str, binding: &str) -> v1::AgentInterface {
        v1::AgentInterface {
            url: url.into(),
            protocol_binding: binding.into(),
            protocol_version: "1.0".into(),
            tenant: String::new(),
        }
    }

    #[test]
    fn plaintext_interfaces_are_dropped_or_the_card_refused() {
        let mut card = v1::AgentCard {
            supported_interfaces: vec![
                iface("https://a.example/rpc", "JSONRPC"),
                iface("http://a.example/rest", "HTTP+JSON"),
                iface("a.example:50051", "GRPC"),
            ],
            ..Default::default()
        };
        let mut w = Vec::new();
        check_interfaces(&mut card, false, &mut w).unwrap();
        assert_eq!(card.supported_interfaces.len(), 1);
        assert_eq!(w.len(), 2, "{w:?}");
        let mut plain = v1::AgentCard {
            supported_interfaces: vec![iface("http://a.example/rpc", "JSONRPC")],
            ..Default::default()
        };
        let e = check_interfaces(&mut plain.clone(), false, &mut Vec::new()).unwrap_err();
        assert!(matches!(e, RemoteError::PlainHttp(_)), "{e}");
        check_interfaces(&mut plain, true, &mut Vec::new()).unwrap();
    }

    #[test]
    fn the_profile_keeps_what_the_agent_is_not_where_it_is() {
        let up: v1::AgentCard = serde_json::from_value(serde_json::json!({
            "name": "W", "description": "d", "version": "2.1.0",
            "supportedInterfaces": [{"url": "https://up/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": true, "extensions": [{"uri": "urn:x", "required": false}]},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["application/json"],
            "skills": [{"id": "s", "name": "S", "description": "sd", "tags": ["t"],
                        "securityRequirements": [{"schemes": {"up": {"list": []}}}]}],
            "provider": {"url": "https://up", "organization": "Up"}
        }))
        .unwrap();
        let p = hub_profile(&up);
        assert_eq!((p.name.as_str(), p.version.as_str()), ("W", "2.1.0"));
        assert!(p.streaming);
        assert_eq!(p.extensions.len(), 1);
        assert_eq!(p.output_modes, ["application/json"]);
        assert!(p.skills[0].security_requirements.is_empty());
        assert_eq!(p.provider.unwrap().organization, "Up");
    }
}
