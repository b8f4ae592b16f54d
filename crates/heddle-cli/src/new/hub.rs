//! The hub registration of an agent: an `[[agents]]` table for a hub
//! config (a `remote` agent the hub fronts), or an a2ahub manifest. Both
//! are checked with the validators `heddle registry validate` runs before
//! they are written.

use anyhow::bail;
use heddle_core::v1::{self, security_scheme::Scheme};
use serde_json::{Value, json};

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn toml_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| toml_str(s)).collect();
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

/// The `auth` line for the upstream's first security scheme, or a comment
/// when the hub cannot present it.
fn auth_line(card: &v1::AgentCard, id: &str) -> String {
    let scheme = card
        .security_requirements
        .first()
        .and_then(|r| r.schemes.keys().next())
        .and_then(|n| card.security_schemes.get(n))
        .and_then(|s| s.scheme.as_ref());
    match scheme {
        None => String::new(),
        Some(Scheme::ApiKeySecurityScheme(k)) if k.location == "header" => format!(
            "auth = {{ type = \"api_key\", header = {}, env = {} }}\n",
            toml_str(&k.name),
            toml_str(&env_name(id, "API_KEY"))
        ),
        Some(Scheme::HttpAuthSecurityScheme(_) | Scheme::OpenIdConnectSecurityScheme(_)) => {
            format!(
                "auth = {{ type = \"bearer\", env = {} }}\n",
                toml_str(&env_name(id, "TOKEN"))
            )
        }
        Some(Scheme::Oauth2SecurityScheme(o)) => {
            let token_url = match o.flows.as_ref().and_then(|f| f.flow.as_ref()) {
                Some(v1::o_auth_flows::Flow::ClientCredentials(c)) => c.token_url.clone(),
                _ => String::new(),
            };
            if token_url.is_empty() {
                return "# auth: the card's OAuth flow is not client credentials; \
                        the hub cannot fetch tokens for it\n"
                    .into();
            }
            let mut scopes: Vec<String> = card
                .security_requirements
                .first()
                .and_then(|r| r.schemes.values().next())
                .map(|l| l.list.clone())
                .unwrap_or_default();
            scopes.sort();
            format!(
                "auth = {{ type = \"oauth2_client_credentials\", token_url = {}, \
                 client_id_env = {}, client_secret_env = {}, scopes = {} }}\n",
                toml_str(&token_url),
                toml_str(&env_name(id, "CLIENT_ID")),
                toml_str(&env_name(id, "CLIENT_SECRET")),
                toml_list(&scopes)
            )
        }
        Some(_) => "# auth: the hub presents no client certificate or other credential of this \
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
        toml_str(id),
        toml_str(card_url)
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

/// The a2ahub manifest of the agent, checked against the hub's manifest schema.
pub fn manifest(
    card: &v1::AgentCard,
    endpoint: &str,
    input_schema: &Value,
    output_schema: &Value,
    pricing: &Pricing,
) -> anyhow::Result<Value> {
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
    let scheme = card
        .security_schemes
        .values()
        .next()
        .and_then(|s| s.scheme.as_ref());
    match scheme {
        Some(Scheme::ApiKeySecurityScheme(k)) => {
            doc["auth"] = json!({"type": "api_key", "api_key_header": k.name});
        }
        Some(Scheme::Oauth2SecurityScheme(o)) => {
            if let Some(v1::o_auth_flows::Flow::ClientCredentials(c)) =
                o.flows.as_ref().and_then(|f| f.flow.as_ref())
            {
                doc["auth"] = json!({"type": "oauth2", "oauth2_authorize_url": c.token_url});
            }
        }
        _ => {}
    }
    if let Err(violations) = heddle_hub::manifest::validate(&doc) {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        bail!(
            "the manifest would not pass the hub's schema:\n  {}",
            lines.join("\n  ")
        );
    }
    Ok(doc)
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
