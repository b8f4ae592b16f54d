//! The hub with authentication on: every agent's card declares what the
//! [`Authenticator`] enforces and offers an extended card to authenticated
//! callers; the layer guards every agent route, and the listing and cards
//! stay public. The hub goes through `heddle-auth`'s public API only, as a
//! server of your own would.

use heddle_auth::Authenticator;
use heddle_core::v1;

/// The public card with `auth`'s security declared and the extended card
/// announced, and the extended card itself.
pub(crate) fn secured_cards(
    auth: &Authenticator,
    mut card: v1::AgentCard,
) -> (v1::AgentCard, v1::AgentCard) {
    heddle_auth::card::declare(auth, &mut card);
    if let Some(caps) = card.capabilities.as_mut() {
        caps.extended_agent_card = Some(true);
    }
    let mut extended = card.clone();
    extended.description = format!(
        "{} (Extended card, for authenticated callers: tasks are private to the caller that created them.)",
        card.description
    );
    extended.skills.push(v1::AgentSkill {
        id: "private-tasks".into(),
        name: "Private tasks".into(),
        description: "Tasks you create are visible only to your credentials; list, get, cancel and subscribe see nothing of other callers".into(),
        tags: vec!["auth".into()],
        ..Default::default()
    });
    (card, extended)
}
