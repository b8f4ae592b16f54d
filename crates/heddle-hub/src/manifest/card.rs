//! A manifest as an A2A card: the fields a card has, and the rest (pricing,
//! limits, schemas) in a declared Heddle extension.

use heddle_core::{v1, wkt::Struct};
use serde_json::Map;

use super::Manifest;
use crate::AgentProfile;

/// The URI of the extension that carries a manifest's pricing, rate limit,
/// schemas, tags and avatar in `capabilities.extensions` (documented in
/// `docs/extensions/a2ahub-manifest.md`).
pub const EXTENSION_URI: &str = "https://heddle.dev/extensions/a2ahub-manifest/v1";

/// The card version of a manifest that states none. A card must name one;
/// this one says nothing was given rather than claim a release.
const UNVERSIONED: &str = "0.0.0";

/// Data in and out: an agent described by JSON Schemas takes and returns
/// `data` parts.
const JSON: &str = "application/json";

impl Manifest {
    /// The agent's card fields (the hub adds its interfaces): the name, the
    /// description in `lang` (else `en`, else the first language by tag),
    /// one skill per manifest skill, the version, and the manifest's other
    /// facts as the [`EXTENSION_URI`] extension, not required of callers.
    pub fn profile(&self, lang: Option<&str>) -> AgentProfile {
        let description = self.description_in(lang).unwrap_or(&self.agent_name);
        let mut used_ids: Vec<String> = Vec::with_capacity(self.skills.len());
        let skills = self
            .skills
            .iter()
            .map(|skill| {
                let id = unique_id(skill_id(skill), &used_ids);
                used_ids.push(id.clone());
                v1::AgentSkill {
                    id,
                    name: skill.clone(),
                    // A manifest skill is a name only.
                    description: skill.clone(),
                    tags: self.tags.clone(),
                    ..Default::default()
                }
            })
            .collect();
        AgentProfile {
            name: self.agent_name.clone(),
            description: description.to_owned(),
            skills,
            // The hub streams to its callers whatever the agent behind does.
            streaming: true,
            input_modes: vec![JSON.to_owned()],
            output_modes: vec![JSON.to_owned()],
            extensions: vec![self.extension()],
            provider: None,
            version: self
                .version
                .clone()
                .unwrap_or_else(|| UNVERSIONED.to_owned()),
        }
    }

    /// The description for `lang`: an exact tag (any case), else the
    /// requested tag's language alone (`de` for `de-AT`), else `en`, else
    /// the first. `None` when the manifest has no description.
    pub fn description_in(&self, lang: Option<&str>) -> Option<&str> {
        let find = |tag: &str| {
            self.description
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(tag))
                .map(|(_, v)| v.as_str())
        };
        lang.and_then(|l| find(l).or_else(|| l.split('-').next().and_then(&find)))
            .or_else(|| find("en"))
            .or_else(|| self.description.values().next().map(String::as_str))
    }

    /// The extension declaring what a card has no field for. Values are
    /// copied from the manifest document, so numbers stay as written.
    fn extension(&self) -> v1::AgentExtension {
        let mut params = Map::new();
        for member in [
            "pricing",
            "rate_limit",
            "input_schema",
            "output_schema",
            "tags",
            "avatar_url",
            "description",
        ] {
            if let Some(v) = self.json.get(member) {
                params.insert(member.to_owned(), v.clone());
            }
        }
        v1::AgentExtension {
            uri: EXTENSION_URI.to_owned(),
            description: "a2ahub manifest facts: pricing, rate limit, input and output schemas"
                .to_owned(),
            required: false,
            params: Some(Struct(params)),
        }
    }
}

/// A skill id from its name ([`crate::registry::slug`]); `skill` when
/// nothing is left.
fn skill_id(name: &str) -> String {
    let id = crate::registry::slug(name);
    if id.is_empty() {
        "skill".to_owned()
    } else {
        id
    }
}

/// `id`, or `id-2`, `id-3`, … when taken: two names may give one id.
fn unique_id(id: String, taken: &[String]) -> String {
    if !taken.contains(&id) {
        return id;
    }
    let mut n = 2;
    loop {
        let candidate = format!("{id}-{n}");
        if !taken.contains(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_ids_are_slugs_and_unique() {
        assert_eq!(skill_id("Read Invoice (PDF)"), "read-invoice-pdf");
        assert_eq!(skill_id("翻译"), "skill");
        let taken = vec!["a".to_owned(), "a-2".to_owned()];
        assert_eq!(unique_id("a".into(), &taken), "a-3");
        assert_eq!(unique_id("b".into(), &taken), "b");
    }
}
