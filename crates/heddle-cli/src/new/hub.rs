//! The hub registration of an agent: an `[[agents]]` table for a hub
//! config (a `remote` agent the hub fronts), or an a2ahub manifest. Both
//! are checked with the validators `heddle registry validate` runs before
//! they are written.

use anyhow::bail;
use heddle_core::v1::{self, security_scheme::Scheme};
use serde_json::{Value, json};

use super::card::{primary_scheme, token_url};
use super::quote;

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

/// The environment variable the hub reads a secret from, for agent `id`.
fn env_name(id: &str, what: &str) -> String {
    let stem: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{stem}_{what}")
}

/// The `auth` line for the upstream's primary security scheme
/// ([`primary_scheme`]), or a comment when the hub cannot present it.
fn auth_line(card: &v1::AgentCard, id: &str) -> String {
    let Some(primary) = primary_scheme(card) else {
        return String::new();
    };
    match primary.scheme {
        Scheme::ApiKeySecurityScheme(k) if k.location == "header" => format!(
            "auth = {{ type = \"api_key\", header = {}, env = {} }}\n",
            quote(&k.name),
            quote(&env_name(id, "API_KEY"))
        ),
        Scheme::HttpAuthSecurityScheme(_) | Scheme::OpenIdConnectSecurityScheme(_) => {
            format!(
                "auth = {{ type = \"bearer\", env = {} }}\n",
                quote(&env_name(id, "TOKEN"))
            )
        }
        Scheme::Oauth2SecurityScheme(o) => {
            let Some(token_url) = token_url(o) else {
                return "# auth: the card's OAuth flow is not client credentials; \
                        the hub cannot fetch tokens for it\n"
                    .into();
            };
            let mut scopes = primary.scopes.to_vec();
            scopes.sort();
            format!(
                "auth = {{ type = \"oauth2_client_credentials\", token_url = {}, \
                 client_id_env = {}, client_secret_env = {}, scopes = {} }}\n",
                quote(token_url),
                quote(&env_name(id, "CLIENT_ID")),
                quote(&env_name(id, "CLIENT_SECRET")),
                toml_list(&scopes)
            )
        }
        _ => "# auth: the hub presents no client certificate or other credential of this \
              kind; front the agent where it trusts the hub's network instead\n"
            .into(),
    }
}

/// A hub config with one `[[agents]]` table: the agent, fronted by the hub
/// as a `remote` agent whose card is at `card_url`.
pub fn toml_entry(card: &v1::AgentCard, id: &str, card_url: &str) -> anyhow::Result<String> {
    let plain_http = card_url.starts_with("http://")
        || card
            .supported_interfaces
            .iter()
            .any(|i| i.url.starts_with("http://"));
    let mut tags: Vec<String> = Vec::new();
    for t in card.skills.iter().flat_map(|s| &s.tags) {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    let mut out = format!(
        "# {}: a hub registration written by `heddle new agent`.\n\
         # Add the table to your hub config (`heddle serve --config hub.toml`), or register it\n\
         # while the hub runs: `heddle agents add --file THIS_FILE`. Secrets are named, never\n\
         # written: the hub reads them from --secrets-file or the environment.\n\n\
         [[agents]]\nid = {}\nkind = \"remote\"\ncard_url = {}\n",
        super::spec::one_line(&card.name),
        quote(id),
        quote(card_url)
    );
    if plain_http {
        out.push_str(
            "# The agent is reached over plain http (a local agent).\nallow_http = true\n",
        );
    }
    out.push_str(&auth_line(card, id));
    if !tags.is_empty() {
        out.push_str(&format!("tags = {}\n", toml_list(&tags)));
    }
    let cfg = crate::hub_config::parse(&out, "the hub entry")?;
    if let Some(e) = cfg.check().into_iter().next() {
        bail!(
            "the hub entry would be refused: {}: {}",
            e.error.field,
            e.error.problem
        );
    }
    Ok(out)
}

/// What a manifest charges, from the flags.
#[derive(Clone, Debug)]
pub struct Pricing {
    /// `per_task`, `per_token`, `per_minute` or `subscription`.
    pub model: String,
    /// Price per unit.
    pub rate: f64,
    /// ISO 4217 code.
    pub currency: String,
}

/// The authorization endpoint of an OAuth 2.0 authorization-code flow.
fn authorize_url(o: &v1::OAuth2SecurityScheme) -> Option<&str> {
    match o.flows.as_ref()?.flow.as_ref()? {
        v1::o_auth_flows::Flow::AuthorizationCode(f) if !f.authorization_url.is_empty() => {
            Some(&f.authorization_url)
        }
        _ => None,
    }
}

/// The a2ahub manifest of the agent, checked against the hub's manifest
/// schema, with notes on what it leaves out.
pub fn manifest(
    card: &v1::AgentCard,
    endpoint: &str,
    input_schema: &Value,
    output_schema: &Value,
    pricing: &Pricing,
) -> anyhow::Result<(Value, Vec<String>)> {
    if !endpoint.starts_with("https://") {
        bail!(
            "an a2ahub manifest's endpoint must be https, and this agent is at {endpoint}: \
             write a hub TOML entry (--target hub-toml) for a local agent"
        );
    }
    let mut tags: Vec<String> = Vec::new();
    for t in card.skills.iter().flat_map(|s| &s.tags) {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    let mut doc = json!({
        "agent_name": card.name,
        "version": card.version,
        "description": {"en": card.description},
        "endpoint": endpoint,
        "skills": card.skills.iter().map(|s| s.name.clone()).collect::<Vec<_>>(),
        "input_schema": input_schema,
        "output_schema": output_schema,
        "pricing": {"model": pricing.model, "rate": pricing.rate, "currency": pricing.currency},
        "tags": tags,
    });
    if let Some(icon) = card.icon_url.as_ref().filter(|u| !u.is_empty()) {
        doc["avatar_url"] = icon.clone().into();
    }
    let mut notes = Vec::new();
    match primary_scheme(card).map(|p| p.scheme) {
        Some(Scheme::ApiKeySecurityScheme(k)) => {
            doc["auth"] = json!({"type": "api_key", "api_key_header": k.name});
        }
        Some(Scheme::Oauth2SecurityScheme(o)) => match authorize_url(o) {
            Some(url) => doc["auth"] = json!({"type": "oauth2", "oauth2_authorize_url": url}),
            None => notes.push(
                "the manifest has no auth: its OAuth 2.0 flow has no authorize URL (a token \
                 URL is not one); callers get tokens as BLUEPRINT.md says"
                    .to_owned(),
            ),
        },
        _ => {}
    }
    if let Err(violations) = heddle_hub::manifest::validate(&doc) {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        bail!(
            "the manifest would not pass the hub's schema:\n  {}",
            lines.join("\n  ")
        );
    }
    Ok((doc, notes))
}

/// The hub's input and output schemas for an existing card: any JSON
/// object when the card takes JSON, else no data at all.
pub fn schemas_from_card(card: &v1::AgentCard) -> (Value, Value) {
    let json_in = card
        .default_input_modes
        .iter()
        .chain(card.skills.iter().flat_map(|s| &s.input_modes))
        .any(|m| m.ends_with("json"));
    let json_out = card
        .default_output_modes
        .iter()
        .chain(card.skills.iter().flat_map(|s| &s.output_modes))
        .any(|m| m.ends_with("json"));
    let pick = |yes: bool| {
        if yes {
            json!({"$schema": super::schema::DIALECT, "type": "object"})
        } else {
            json!({"$schema": super::schema::DIALECT, "not": {}})
        }
    };
    (pick(json_in), pick(json_out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A card with these `securitySchemes`, requiring `required`.
    fn card(schemes: Value, required: &str) -> v1::AgentCard {
        serde_json::from_value(json!({
            "name": "Test agent", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [{"url": "https://a.example/a2a",
                "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {},
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
            "securitySchemes": schemes,
            "securityRequirements": [{"schemes": {required: {"list": []}}}]
        }))
        .expect("card")
    }

    fn manifest_of(card: &v1::AgentCard) -> (Value, Vec<String>) {
        let any = json!({"$schema": super::super::schema::DIALECT, "type": "object"});
        let pricing = Pricing {
            model: "per_task".into(),
            rate: 0.0,
            currency: "USD".into(),
        };
        manifest(card, "https://a.example", &any, &any, &pricing).expect("manifest")
    }

    const CLIENT_CREDENTIALS: &str = "https://idp.example/token";

    fn oauth() -> Value {
        json!({"oauth2SecurityScheme": {"flows": {"clientCredentials": {
            "tokenUrl": CLIENT_CREDENTIALS, "scopes": {}}}}})
    }

    /// A card declaring an OAuth scheme first (by name) but requiring its
    /// API key: every file describes the API key.
    #[test]
    fn the_blueprint_entry_and_manifest_name_the_required_scheme() {
        let card = card(
            json!({"aaa": oauth(),
                   "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}}}),
            "key",
        );
        let card_url = "https://a.example/.well-known/agent-card.json";
        let entry = toml_entry(&card, "two", card_url).expect("entry");
        assert!(entry.contains("header = \"X-Key\""), "{entry}");
        let (doc, notes) = manifest_of(&card);
        assert_eq!(doc["auth"]["api_key_header"], "X-Key", "{doc}");
        assert!(notes.is_empty());
        let page = super::super::blueprint::render(&card, card_url, &Default::default());
        assert!(page.contains("X-Key: $A2A_API_KEY"), "{page}");
    }

    #[test]
    fn a_token_url_is_not_an_authorize_url() {
        let (doc, notes) = manifest_of(&card(json!({"o": oauth()}), "o"));
        assert!(doc.get("auth").is_none(), "{doc}");
        assert_eq!(notes.len(), 1);
    }
}
