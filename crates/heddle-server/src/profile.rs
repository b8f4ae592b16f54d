//! An Agent Card from a few facts: what the agent is ([`AgentProfile`]) and
//! where it is served ([`Endpoints`]). The hub builds its agents' cards this
//! way; a server of one agent can too, rather than fill in every field of
//! `AgentCard` by hand.
//!
//! Interfaces are listed in order of preference: JSON-RPC, HTTP+JSON and
//! gRPC in v1.0, then the same in v0.3 (the JSON-RPC URL is shared: the
//! version header tells the two apart).

use heddle_core::{ProtocolVersion, VersionSet, v1};

/// What an agent is: the card fields that do not depend on where it runs.
#[derive(Clone, Debug)]
pub struct AgentProfile {
    /// Card name.
    pub name: String,
    /// Card description.
    pub description: String,
    /// Skills.
    pub skills: Vec<v1::AgentSkill>,
    /// Whether the agent streams.
    pub streaming: bool,
    /// Input media types.
    pub input_modes: Vec<String>,
    /// Output media types.
    pub output_modes: Vec<String>,
    /// Extensions the card declares (`capabilities.extensions`); one with
    /// `required: true` makes every call lacking it ExtensionSupportRequired.
    pub extensions: Vec<v1::AgentExtension>,
    /// Who provides the agent, if the card should say.
    pub provider: Option<v1::AgentProvider>,
    /// The agent's own version (the card's `version`).
    pub version: String,
}

impl AgentProfile {
    /// A profile with one skill named like the agent, text in and out,
    /// streaming, version 1.0.0.
    pub fn new(id: &str, name: &str, description: &str, tags: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            skills: vec![v1::AgentSkill {
                id: id.to_owned(),
                name: name.to_owned(),
                description: description.to_owned(),
                tags: tags.iter().map(|t| (*t).to_owned()).collect(),
                ..Default::default()
            }],
            streaming: true,
            input_modes: vec!["text/plain".into()],
            output_modes: vec!["text/plain".into()],
            extensions: Vec::new(),
            provider: None,
            version: "1.0.0".into(),
        }
    }

    /// The card of this agent served at `at`.
    pub fn card(&self, at: &Endpoints) -> v1::AgentCard {
        v1::AgentCard {
            name: self.name.clone(),
            description: self.description.clone(),
            supported_interfaces: at.interfaces(),
            provider: self.provider.clone(),
            version: self.version.clone(),
            documentation_url: None,
            capabilities: Some(v1::AgentCapabilities {
                streaming: Some(self.streaming),
                push_notifications: Some(false),
                extensions: self.extensions.clone(),
                extended_agent_card: Some(false),
            }),
            security_schemes: Default::default(),
            security_requirements: Vec::new(),
            default_input_modes: self.input_modes.clone(),
            default_output_modes: self.output_modes.clone(),
            skills: self.skills.clone(),
            signatures: Vec::new(),
            icon_url: None,
        }
    }
}

/// Where an agent is served: each binding's URL (none: not served), and the
/// protocol versions to list.
#[derive(Clone, Debug)]
pub struct Endpoints {
    /// The JSON-RPC endpoint's URL.
    pub jsonrpc: Option<String>,
    /// The HTTP+JSON base URL (v0.3 clients add `/v1/…` to it).
    pub rest: Option<String>,
    /// The gRPC listener.
    pub grpc: Option<GrpcEndpoint>,
    /// The versions the card lists.
    pub versions: VersionSet,
}

/// A gRPC listener, and the tenant that names the agent on it (one listener
/// may serve many agents).
#[derive(Clone, Debug)]
pub struct GrpcEndpoint {
    /// `host:port`, or a URL (`http://…`, `https://…`).
    pub url: String,
    /// The agent's tenant; empty when the listener serves it alone.
    pub tenant: String,
}

impl Endpoints {
    fn interfaces(&self) -> Vec<v1::AgentInterface> {
        let mut out = Vec::new();
        for version in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
            if !self.versions.contains(version) {
                continue;
            }
            let v = version.as_str();
            let iface = |url: &str, binding: &str, tenant: &str| v1::AgentInterface {
                url: url.to_owned(),
                protocol_binding: binding.into(),
                tenant: tenant.to_owned(),
                protocol_version: v.into(),
            };
            if let Some(url) = &self.jsonrpc {
                out.push(iface(url, "JSONRPC", ""));
            }
            if let Some(url) = &self.rest {
                out.push(iface(url, "HTTP+JSON", ""));
            }
            if let Some(g) = &self.grpc {
                let (bare, with_scheme) = grpc_addresses(&g.url);
                let url = match version {
                    ProtocolVersion::V1_0 => bare,
                    ProtocolVersion::V0_3 => with_scheme,
                };
                out.push(iface(&url, "GRPC", &g.tenant));
            }
        }
        out
    }
}

/// The gRPC listener's address as v1.0 and v0.3 callers want it: bare
/// `host:port` (v1.0 suites dial it as is) and `http://host:port` (v0.3
/// clients parse a URL). A given scheme is kept for v0.3, and `https` for both.
fn grpc_addresses(url: &str) -> (String, String) {
    let url = url.trim().trim_end_matches('/');
    match url.split_once("://") {
        // Over TLS the scheme must stay: a bare address reads as plaintext.
        Some(("https", _)) => (url.to_owned(), url.to_owned()),
        Some((_, bare)) => (bare.to_owned(), url.to_owned()),
        None => (url.to_owned(), format!("http://{url}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interfaces_are_listed_by_version_then_binding() {
        let at = Endpoints {
            jsonrpc: Some("http://h/a2a".into()),
            rest: None,
            grpc: Some(GrpcEndpoint {
                url: "h:50051".into(),
                tenant: "echo".into(),
            }),
            versions: VersionSet::ALL,
        };
        let card = AgentProfile::new("echo", "Echo", "echoes", &[]).card(&at);
        let listed: Vec<_> = card
            .supported_interfaces
            .iter()
            .map(|i| {
                (
                    i.protocol_binding.as_str(),
                    i.protocol_version.as_str(),
                    i.url.as_str(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [
                ("JSONRPC", "1.0", "http://h/a2a"),
                ("GRPC", "1.0", "h:50051"),
                ("JSONRPC", "0.3", "http://h/a2a"),
                ("GRPC", "0.3", "http://h:50051"),
            ]
        );
        assert_eq!(card.supported_interfaces[1].tenant, "echo");
        assert_eq!(
            card.provider, None,
            "an SDK user's card names no provider unless told"
        );
    }

    #[test]
    fn a_tls_grpc_address_keeps_its_scheme_for_both_versions() {
        assert_eq!(
            grpc_addresses("https://h:443/"),
            ("https://h:443".to_owned(), "https://h:443".to_owned())
        );
    }
}
