//! The Agent Card of a new agent, built with the SDK's card builder
//! (`AgentProfile::card`) so it has the interfaces a Heddle server lists,
//! then checked with the same validation `heddle card validate` runs: a
//! card that would not pass is never written.

use anyhow::{Context, bail};
use heddle_core::{
    VersionSet,
    card::parse_card,
    compat::v03,
    v1::{self, security_scheme::Scheme},
    validate::Validate,
};
use heddle_server::profile::{AgentProfile, Endpoints, GrpcEndpoint};
use serde_json::Value;

use super::spec::{AgentSpec, Security};

/// `card` with every string in it (map keys too) made one line
/// ([`super::spec::one_line`]): a card from elsewhere is untrusted, and its
/// text goes into TOML comments and Markdown, where a line break would start
/// new syntax.
pub fn one_line(card: &v1::AgentCard) -> anyhow::Result<v1::AgentCard> {
    fn clean(v: Value) -> Value {
        match v {
            Value::String(s) => Value::String(super::spec::one_line(&s)),
            Value::Array(a) => Value::Array(a.into_iter().map(clean).collect()),
            Value::Object(m) => Value::Object(
                m.into_iter()
                    .map(|(k, v)| (super::spec::one_line(&k), clean(v)))
                    .collect(),
            ),
            other => other,
        }
    }
    let doc = clean(serde_json::to_value(card).context("serializing the card")?);
    serde_json::from_value(doc).context("the card, made one line per field")
}

/// Path of the JSON-RPC endpoint under the agent's base URL.
pub const JSONRPC_PATH: &str = "/a2a";
/// Path of the HTTP+JSON endpoint under the agent's base URL.
pub const REST_PATH: &str = "/rest";

/// The name the card gives the agent's one security scheme.
pub fn scheme_name(security: &Security) -> &'static str {
    match security {
        Security::None => "",
        Security::ApiKey { .. } => "apiKey",
        Security::BearerJwt { .. } => "bearer",
        Security::OAuth2 { .. } => "oauth2",
        Security::Mtls => "mtls",
    }
}

/// Where the agent is served, as the card's builder wants it.
fn endpoints(spec: &AgentSpec) -> Endpoints {
    let b = &spec.bindings;
    // gRPC is reached the way the base URL is: over TLS for an https agent
    // (which terminates TLS itself with mutual TLS, else behind a proxy, as
    // agent.toml says), in plaintext (a bare host:port) for an http one.
    let grpc_url = if spec.base_url.starts_with("https://") {
        format!("https://{}", spec.grpc_addr)
    } else {
        spec.grpc_addr.clone()
    };
    Endpoints {
        jsonrpc: b
            .jsonrpc
            .then(|| format!("{}{JSONRPC_PATH}", spec.base_url)),
        rest: b.rest.then(|| format!("{}{REST_PATH}", spec.base_url)),
        grpc: b.grpc.then(|| GrpcEndpoint {
            url: grpc_url,
            tenant: String::new(),
        }),
        versions: if spec.v03 {
            VersionSet::ALL
        } else {
            VersionSet::only(heddle_core::ProtocolVersion::V1_0)
        },
    }
}

/// The v1.0 card of `spec`.
pub fn build(spec: &AgentSpec) -> v1::AgentCard {
    let skills = spec
        .skills
        .iter()
        .map(|s| v1::AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: s.tags.clone(),
            examples: s.examples.clone(),
            input_modes: s.input_modes.clone(),
            output_modes: s.output_modes.clone(),
            security_requirements: Vec::new(),
        })
        .collect();
    let profile = AgentProfile {
        name: spec.name.clone(),
        description: spec.description.clone(),
        skills,
        streaming: spec.streaming,
        input_modes: spec.default_input_modes(),
        output_modes: spec.default_output_modes(),
        extensions: Vec::new(),
        provider: spec
            .provider
            .as_ref()
            .map(|(organization, url)| v1::AgentProvider {
                organization: organization.clone(),
                url: url.clone(),
            }),
        version: spec.version.clone(),
    };
    let mut card = profile.card(&endpoints(spec));
    if let Some(caps) = &mut card.capabilities {
        caps.push_notifications = Some(spec.push);
    }
    if let Some(scheme) = scheme(&spec.security) {
        let name = scheme_name(&spec.security).to_owned();
        let scopes = match &spec.security {
            Security::OAuth2 { scopes, .. } => scopes.clone(),
            _ => Vec::new(),
        };
        card.security_schemes.insert(
            name.clone(),
            v1::SecurityScheme {
                scheme: Some(scheme),
            },
        );
        card.security_requirements.push(v1::SecurityRequirement {
            schemes: [(name, v1::StringList { list: scopes })]
                .into_iter()
                .collect(),
        });
    }
    card
}

/// The scheme a caller presents: the first scheme of the card's first
/// security requirement, with the scopes that requirement asks for. The
/// blueprint, the hub entry and the manifest all describe this one.
pub struct Primary<'a> {
    /// Its name in `securitySchemes`.
    pub name: &'a str,
    /// Its declaration.
    pub scheme: &'a Scheme,
    /// The scopes the requirement lists (OAuth 2.0).
    pub scopes: &'a [String],
}

/// The card's [`Primary`] scheme; `None` when it requires none.
pub fn primary_scheme(card: &v1::AgentCard) -> Option<Primary<'_>> {
    let (name, scopes) = card.security_requirements.first()?.schemes.iter().next()?;
    let scheme = card.security_schemes.get(name)?.scheme.as_ref()?;
    Some(Primary {
        name,
        scheme,
        scopes: &scopes.list,
    })
}

/// The token endpoint of an OAuth 2.0 client-credentials flow (`None` for
/// another flow, or an empty URL).
pub fn token_url(o: &v1::OAuth2SecurityScheme) -> Option<&str> {
    match o.flows.as_ref()?.flow.as_ref()? {
        v1::o_auth_flows::Flow::ClientCredentials(c) if !c.token_url.is_empty() => {
            Some(&c.token_url)
        }
        _ => None,
    }
}

/// The card's declaration of `security`.
fn scheme(security: &Security) -> Option<Scheme> {
    Some(match security {
        Security::None => return None,
        Security::ApiKey { header } => Scheme::ApiKeySecurityScheme(v1::ApiKeySecurityScheme {
            description: "An API key issued by the agent's operator".into(),
            location: "header".into(),
            name: header.clone(),
        }),
        Security::BearerJwt { .. } => Scheme::HttpAuthSecurityScheme(v1::HttpAuthSecurityScheme {
            description: "A signed JWT from the agent's issuer".into(),
            scheme: "Bearer".into(),
            bearer_format: "JWT".into(),
        }),
        Security::OAuth2 {
            token_url, scopes, ..
        } => Scheme::Oauth2SecurityScheme(v1::OAuth2SecurityScheme {
            description: "OAuth 2.0 client credentials".into(),
            flows: Some(v1::OAuthFlows {
                flow: Some(v1::o_auth_flows::Flow::ClientCredentials(
                    v1::ClientCredentialsOAuthFlow {
                        token_url: token_url.clone(),
                        refresh_url: String::new(),
                        scopes: scopes
                            .iter()
                            .map(|s| (s.clone(), format!("the {s} scope")))
                            .collect(),
                    },
                )),
            }),
            oauth2_metadata_url: String::new(),
        }),
        Security::Mtls => Scheme::MtlsSecurityScheme(v1::MutualTlsSecurityScheme {
            description: "A client certificate issued by the agent's CA".into(),
        }),
    })
}

/// Every problem Heddle's card validation finds in `doc`, read as any
/// card form (what `heddle card validate` reports).
pub fn problems(doc: &Value) -> Vec<String> {
    let describe = |e: heddle_core::A2aError| -> Vec<String> {
        e.violations
            .iter()
            .map(|v| format!("{}: {}", v.field, v.description))
            .collect()
    };
    match parse_card(doc) {
        Err(e) => describe(e),
        Ok(card) => card.validate().err().map(describe).unwrap_or_default(),
    }
}

/// The card JSON in v1.0 form, and in v0.3 form when `spec.v03`; each
/// validated, and signed when `key` is given.
pub fn documents(
    card: &v1::AgentCard,
    with_v03: bool,
    key: Option<&Signing>,
) -> anyhow::Result<(Value, Option<Value>)> {
    let mut v1_doc = serde_json::to_value(card).context("serializing the card")?;
    let mut v03_doc = if with_v03 {
        let old = v03::AgentCard::from_v1(card)
            .context("the card lists no v0.3 interface to write a v0.3 card from")?;
        Some(serde_json::to_value(old).context("serializing the v0.3 card")?)
    } else {
        None
    };
    for (doc, form) in
        std::iter::once((&mut v1_doc, "v1.0")).chain(v03_doc.as_mut().map(|d| (d, "v0.3")))
    {
        let found = problems(doc);
        if !found.is_empty() {
            bail!(
                "the {form} card would not be valid:\n  {}",
                found.join("\n  ")
            );
        }
        if let Some(s) = key {
            heddle_client::heddle_signing::sign_card(doc, &s.key, s.jku.as_deref())
                .with_context(|| format!("signing the {form} card"))?;
        }
    }
    Ok((v1_doc, v03_doc))
}

/// A card-signing key and the `jku` to name.
pub struct Signing {
    /// The key.
    pub key: heddle_client::heddle_signing::SigningKey,
    /// The JWKS URL written in the protected header.
    pub jku: Option<String>,
}
