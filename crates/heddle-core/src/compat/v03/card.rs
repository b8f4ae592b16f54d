//! The v0.3 Agent Card and its conversion.

use super::*;

/// A v0.3 `additionalInterfaces` entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentInterface {
    /// Endpoint URL.
    pub url: String,
    /// `JSONRPC`, `GRPC` or `HTTP+JSON`.
    pub transport: String,
}

/// A v0.3 skill.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Example prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub examples: Option<Vec<String>>,
    /// Accepted media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_modes: Option<Vec<String>>,
    /// Produced media types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_modes: Option<Vec<String>>,
    /// Security requirements for this skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityRequirements>,
}

/// A v0.3 extension declaration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    /// Extension URI.
    pub uri: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether clients must activate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Extension parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<JsonObject>,
}

/// v0.3 capabilities.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    /// SSE streaming.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// Push notifications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    /// Status history kept (no v1.0 counterpart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_transition_history: Option<bool>,
    /// Extensions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<AgentExtension>>,
}

/// v0.3 provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentProvider {
    /// Organization name.
    pub organization: String,
    /// Organization URL.
    pub url: String,
}

/// A v0.3 card signature (same shape as v1.0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentCardSignature {
    /// Base64url protected header.
    pub protected: String,
    /// Base64url signature.
    pub signature: String,
    /// Unprotected header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<JsonObject>,
}

/// A v0.3 Agent Card (`a2a.json` `AgentCard`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    /// Protocol version, e.g. `"0.3.0"`.
    pub protocol_version: String,
    /// Agent name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Preferred endpoint.
    pub url: String,
    /// Transport of `url` (default `JSONRPC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_transport: Option<String>,
    /// Other endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_interfaces: Option<Vec<AgentInterface>>,
    /// Icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
    /// Provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    /// Agent version.
    pub version: String,
    /// Documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    /// Capabilities.
    pub capabilities: AgentCapabilities,
    /// Security schemes by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_schemes: Option<BTreeMap<String, SecurityScheme>>,
    /// Security requirements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecurityRequirements>,
    /// Input media types.
    pub default_input_modes: Vec<String>,
    /// Output media types.
    pub default_output_modes: Vec<String>,
    /// Skills.
    pub skills: Vec<AgentSkill>,
    /// Extended card available to authenticated callers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_authenticated_extended_card: Option<bool>,
    /// Signatures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signatures: Option<Vec<AgentCardSignature>>,
}

/// The v0.3 protocol version string Heddle publishes.
pub const PROTOCOL_VERSION: &str = "0.3.0";

impl AgentCard {
    /// Upgrade to a v1.0 card: `url` + `preferredTransport` become the first
    /// `supportedInterfaces` entry (protocol version 0.3), then each
    /// `additionalInterfaces` entry not equal to it.
    pub fn to_v1(&self) -> v1::AgentCard {
        let version = crate::version::ProtocolVersion::parse(&self.protocol_version)
            .map_or_else(|| self.protocol_version.clone(), |v| v.as_str().to_owned());
        let main = v1::AgentInterface {
            url: self.url.clone(),
            protocol_binding: self
                .preferred_transport
                .clone()
                .unwrap_or_else(|| "JSONRPC".into()),
            tenant: String::new(),
            protocol_version: version.clone(),
        };
        let mut interfaces = vec![main];
        for i in self.additional_interfaces.iter().flatten() {
            if !interfaces
                .iter()
                .any(|x| x.url == i.url && x.protocol_binding == i.transport)
            {
                interfaces.push(v1::AgentInterface {
                    url: i.url.clone(),
                    protocol_binding: i.transport.clone(),
                    tenant: String::new(),
                    protocol_version: version.clone(),
                });
            }
        }
        let caps = &self.capabilities;
        v1::AgentCard {
            name: self.name.clone(),
            description: self.description.clone(),
            supported_interfaces: interfaces,
            provider: self.provider.as_ref().map(|p| v1::AgentProvider {
                url: p.url.clone(),
                organization: p.organization.clone(),
            }),
            version: self.version.clone(),
            documentation_url: self.documentation_url.clone(),
            capabilities: Some(v1::AgentCapabilities {
                streaming: caps.streaming,
                push_notifications: caps.push_notifications,
                extensions: caps
                    .extensions
                    .iter()
                    .flatten()
                    .map(|e| v1::AgentExtension {
                        uri: e.uri.clone(),
                        description: e.description.clone().unwrap_or_default(),
                        required: e.required.unwrap_or(false),
                        params: e.params.clone().map(Struct),
                    })
                    .collect(),
                extended_agent_card: self.supports_authenticated_extended_card,
            }),
            security_schemes: self
                .security_schemes
                .iter()
                .flatten()
                .map(|(k, s)| (k.clone(), s.to_v1()))
                .collect(),
            security_requirements: self
                .security
                .as_ref()
                .map(requirements_to_v1)
                .unwrap_or_default(),
            default_input_modes: self.default_input_modes.clone(),
            default_output_modes: self.default_output_modes.clone(),
            skills: self
                .skills
                .iter()
                .map(|s| v1::AgentSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: s.examples.clone().unwrap_or_default(),
                    input_modes: s.input_modes.clone().unwrap_or_default(),
                    output_modes: s.output_modes.clone().unwrap_or_default(),
                    security_requirements: s
                        .security
                        .as_ref()
                        .map(requirements_to_v1)
                        .unwrap_or_default(),
                })
                .collect(),
            signatures: self
                .signatures
                .iter()
                .flatten()
                .map(|s| v1::AgentCardSignature {
                    protected: s.protected.clone(),
                    signature: s.signature.clone(),
                    header: s.header.clone().map(Struct),
                })
                .collect(),
            icon_url: self.icon_url.clone(),
        }
    }

    /// Downgrade a v1.0 card for v0.3 clients: `url`/`preferredTransport` come
    /// from the first interface with protocol version 0.3, `additionalInterfaces`
    /// lists every 0.3 interface (the first included, as v0.3 recommends).
    /// `None` when the card offers no 0.3 interface.
    pub fn from_v1(card: &v1::AgentCard) -> Option<Self> {
        let v03: Vec<&v1::AgentInterface> = card
            .supported_interfaces
            .iter()
            .filter(|i| {
                crate::version::ProtocolVersion::parse(&i.protocol_version)
                    == Some(crate::version::ProtocolVersion::V0_3)
            })
            .collect();
        let main = v03.first()?;
        let caps = card.capabilities.clone().unwrap_or_default();
        let schemes: BTreeMap<String, SecurityScheme> = card
            .security_schemes
            .iter()
            .filter_map(|(k, s)| SecurityScheme::from_v1(s).map(|s| (k.clone(), s)))
            .collect();
        Some(Self {
            protocol_version: PROTOCOL_VERSION.into(),
            name: card.name.clone(),
            description: card.description.clone(),
            url: main.url.clone(),
            // JSONRPC is v0.3's default transport and is left implicit.
            preferred_transport: (main.protocol_binding != "JSONRPC")
                .then(|| main.protocol_binding.clone()),
            additional_interfaces: (v03.len() > 1).then(|| {
                v03.iter()
                    .map(|i| AgentInterface {
                        url: i.url.clone(),
                        transport: i.protocol_binding.clone(),
                    })
                    .collect()
            }),
            icon_url: card.icon_url.clone(),
            provider: card.provider.as_ref().map(|p| AgentProvider {
                organization: p.organization.clone(),
                url: p.url.clone(),
            }),
            version: card.version.clone(),
            documentation_url: card.documentation_url.clone(),
            capabilities: AgentCapabilities {
                streaming: caps.streaming,
                push_notifications: caps.push_notifications,
                state_transition_history: None,
                extensions: (!caps.extensions.is_empty()).then(|| {
                    caps.extensions
                        .iter()
                        .map(|e| AgentExtension {
                            uri: e.uri.clone(),
                            description: opt_string(&e.description),
                            required: e.required.then_some(true),
                            params: e.params.as_ref().map(|p| p.0.clone()),
                        })
                        .collect()
                }),
            },
            security_schemes: (!schemes.is_empty()).then_some(schemes),
            security: (!card.security_requirements.is_empty())
                .then(|| requirements_from_v1(&card.security_requirements)),
            default_input_modes: card.default_input_modes.clone(),
            default_output_modes: card.default_output_modes.clone(),
            skills: card
                .skills
                .iter()
                .map(|s| AgentSkill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                    examples: opt_vec(&s.examples),
                    input_modes: opt_vec(&s.input_modes),
                    output_modes: opt_vec(&s.output_modes),
                    security: (!s.security_requirements.is_empty())
                        .then(|| requirements_from_v1(&s.security_requirements)),
                })
                .collect(),
            supports_authenticated_extended_card: caps.extended_agent_card,
            signatures: (!card.signatures.is_empty()).then(|| {
                card.signatures
                    .iter()
                    .map(|s| AgentCardSignature {
                        protected: s.protected.clone(),
                        signature: s.signature.clone(),
                        header: s.header.as_ref().map(|h| h.0.clone()),
                    })
                    .collect()
            }),
        })
    }
}
