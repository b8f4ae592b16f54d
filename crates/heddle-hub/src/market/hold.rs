//! The hold a priced root task hands down its delegation chain.
//!
//! A caller who wants a task's delegations paid from its own budget sends
//! that budget in the delegation context (`budget.remaining`). The root
//! agent's gate then holds the whole budget, keeping back the root's own
//! estimate, and gives the run a token naming that reservation
//! (`budget.hold`). An agent of this hub that the chain reaches with the
//! token has its hold carved out of the root's reservation
//! ([`heddle_store::LedgerStore::reserve_within`]) instead of its caller's
//! wallet: every hop is paid from what the root held, which never goes
//! below what the root's own task keeps, so the chain never spends more
//! than the root's budget.
//!
//! The token is the claims as JSON and an HMAC-SHA256 tag over them, each
//! base64url, joined by a dot. The key is the hub's, made at start: a token
//! is worth something only to the hub that issued it, and only while the
//! root's reservation is open. It is a bearer capability for that hold, so
//! Heddle's client sends it only to agents on the root agent's host.

use base64::{Engine as _, engine::general_purpose::URL_SAFE_NO_PAD};
use ring::hmac;
use serde::{Deserialize, Serialize};

/// What a token says: whose hold pays, in what, and what the root keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HoldClaims {
    /// The root's reservation.
    #[serde(rename = "r")]
    pub reservation: String,
    /// The wallet the reservation was made from.
    #[serde(rename = "o")]
    pub owner: String,
    /// Its currency.
    #[serde(rename = "c")]
    pub currency: String,
    /// Minor units the root's reservation keeps for the root's own task.
    #[serde(rename = "k")]
    pub keep: i64,
}

/// The hub's key for hold tokens.
pub(crate) struct HoldKey(hmac::Key);

impl std::fmt::Debug for HoldKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HoldKey(…)")
    }
}

impl HoldKey {
    /// A fresh random key. Tokens outlive no process: a root's reservation
    /// is settled by the next start, as its task is failed.
    pub(crate) fn random() -> Result<Self, ring::error::Unspecified> {
        let rng = ring::rand::SystemRandom::new();
        Ok(Self(hmac::Key::generate(hmac::HMAC_SHA256, &rng)?))
    }

    /// The token for `claims`.
    pub(crate) fn issue(&self, claims: &HoldClaims) -> String {
        // Serializing four plain fields cannot fail.
        let body = serde_json::to_vec(claims).unwrap_or_default();
        let tag = hmac::sign(&self.0, &body);
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&body),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// The claims of a token this key issued; `None` for any other string.
    pub(crate) fn verify(&self, token: &str) -> Option<HoldClaims> {
        let (body, tag) = token.split_once('.')?;
        let body = URL_SAFE_NO_PAD.decode(body).ok()?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        hmac::verify(&self.0, &body, &tag).ok()?;
        serde_json::from_slice(&body).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    fn claims() -> HoldClaims {
        HoldClaims {
            reservation: "root:t1".into(),
            owner: "alice".into(),
            currency: "USD".into(),
            keep: 10,
        }
    }

    #[test]
    fn a_token_verifies_with_its_key_only() {
        let key = HoldKey::random().unwrap();
        let token = key.issue(&claims());
        assert_eq!(key.verify(&token), Some(claims()));
        let other = HoldKey::random().unwrap();
        assert_eq!(other.verify(&token), None);
    }

    #[test]
    fn a_changed_claim_or_a_malformed_token_is_refused() {
        let key = HoldKey::random().unwrap();
        let token = key.issue(&claims());
        let (_, tag) = token.split_once('.').unwrap();
        let richer = HoldClaims {
            keep: 0,
            ..claims()
        };
        let forged = format!(
            "{}.{tag}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&richer).unwrap())
        );
        assert_eq!(key.verify(&forged), None);
        for bad in ["", ".", "abc", "a.b.c", "!!.??"] {
            assert_eq!(key.verify(bad), None, "{bad}");
        }
    }
}
