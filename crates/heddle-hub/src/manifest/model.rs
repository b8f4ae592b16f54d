//! The typed form of a manifest that passed the schema.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// An a2ahub agent manifest that passed [`validate`](super::validate).
///
/// The typed fields are read from the document; the document itself is kept
/// as it came ([`Manifest::json`]), and serializing a `Manifest` writes that
/// document back unchanged, members the typed fields do not model included.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Manifest {
    /// Display name, 3 to 64 characters.
    pub agent_name: String,
    /// The agent's semantic version, when the manifest gives one.
    #[serde(default)]
    pub version: Option<String>,
    /// What the agent does, by language tag. A `BTreeMap`: "first" language
    /// means the first in tag order, since a parsed JSON object keeps no
    /// order of its own here.
    #[serde(default)]
    pub description: BTreeMap<String, String>,
    /// An image for the agent.
    #[serde(default)]
    pub avatar_url: Option<String>,
    /// The agent's own HTTPS endpoint.
    pub endpoint: String,
    /// How the hub authenticates to the agent.
    #[serde(default)]
    pub auth: Option<Auth>,
    /// Skill names, at least one.
    pub skills: Vec<String>,
    /// The JSON Schema of the data the agent takes.
    pub input_schema: Value,
    /// The JSON Schema of the data the agent returns.
    pub output_schema: Value,
    /// What a call costs.
    pub pricing: Pricing,
    /// What the agent accepts, when the manifest says.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// Words to find the agent by.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The document as validated.
    #[serde(skip)]
    pub(super) json: Value,
}

impl Manifest {
    /// The manifest document exactly as it was validated.
    pub fn json(&self) -> &Value {
        &self.json
    }
}

impl Serialize for Manifest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The original document, so that what was registered is what is
        // stored and shown again.
        self.json.serialize(s)
    }
}

/// How the hub authenticates to the agent.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Auth {
    /// The scheme.
    #[serde(rename = "type")]
    pub kind: AuthKind,
    /// The header an API key goes in (required for [`AuthKind::ApiKey`]).
    #[serde(default)]
    pub api_key_header: Option<String>,
    /// Where OAuth2 authorization starts (required for [`AuthKind::OAuth2`]).
    #[serde(default)]
    pub oauth2_authorize_url: Option<String>,
}

/// An authentication scheme of a manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum AuthKind {
    /// `api_key`: a key in a header.
    #[serde(rename = "api_key")]
    ApiKey,
    /// `oauth2`.
    #[serde(rename = "oauth2")]
    OAuth2,
}

/// What a call costs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Pricing {
    /// What the rate is charged per.
    pub model: PricingModel,
    /// The price per unit of `model`, in `currency`, at least 0. A float as
    /// the manifest writes it; the card's extension carries the original
    /// JSON number, not this.
    pub rate: f64,
    /// ISO 4217 code, three capital letters.
    pub currency: String,
}

/// What a manifest's rate is charged per.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PricingModel {
    /// Per task.
    PerTask,
    /// Per model token.
    PerToken,
    /// Per minute of work.
    PerMinute,
    /// A subscription.
    Subscription,
}

/// What the agent accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct RateLimit {
    /// Requests per second, at least 1.
    #[serde(default)]
    pub max_rps: Option<u64>,
    /// Calls at once, at least 1.
    #[serde(default)]
    pub max_concurrent: Option<u64>,
}
