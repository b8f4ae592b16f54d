//! The delegation context: what a task handed on by another agent carries
//! with it, so that a chain of agents stays bounded and stoppable.
//!
//! When an agent's executor calls another agent for the task it runs, the
//! call carries, in the message metadata under [`DELEGATION_EXT`], the chain
//! of agents and tasks that led to it (root first), the hop limit, the
//! root's deadline and the root's remaining budget. The fields follow the
//! upstream proposals, none merged yet: an actor chain (A2A issue #2028), a
//! budget passed down with the cost rolled up (#2121), and trace context
//! carried beside it in W3C `traceparent` (#2103).
//!
//! An agent that does not know the extension sees an ordinary request; one
//! that relays the message's metadata keeps the chain intact.
//!
//! ```json
//! "metadata": { "https://heddle.dev/extensions/delegation/v1": {
//!   "chain": [{ "agent": "https://hub.example/api/v1/agents/research", "taskId": "t-1" }],
//!   "maxHops": 3,
//!   "deadline": "2026-12-03T18:00:00Z",
//!   "budget": { "remaining": { "amount": "0.40", "currency": "USD" }, "hold": "…" }
//! } }
//! ```
//!
//! `budget.hold` is opaque: what a hub that holds the root's budget gives
//! the chain so that the agents it hosts further down are paid from that
//! hold (see `docs/extensions/delegation.md`).

use heddle_core::wkt::{Struct, Timestamp};
use serde_json::{Map, Value, json};

/// The extension's URI: the metadata key and the `A2A-Extensions` value.
pub const DELEGATION_EXT: &str = "https://heddle.dev/extensions/delegation/v1";

/// The hop limit when neither the caller nor the server names one.
pub const DEFAULT_MAX_HOPS: u32 = 8;

/// The most hops any chain may declare: a chain's length is bounded by it,
/// so a caller cannot make every hop carry an unbounded list.
pub const MAX_HOPS_CAP: u32 = 64;

/// Longest agent name or task id in a chain entry, in bytes.
const MAX_ID_LEN: usize = 2048;

/// One agent the request came through, and the task it runs there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The agent, by its card's first interface ([`agent_name`]).
    pub agent: String,
    /// The task it runs, which this request works for.
    pub task_id: String,
}

/// The most children one task records: later calls still run, unrecorded.
pub const MAX_CHILDREN: usize = 256;

/// Adds `child` to the children recorded in `task_metadata` (under
/// [`DELEGATION_EXT`]), unless it is there, the list is full, or its
/// fields are longer than a chain's may be. Whether it was added.
pub fn add_child(task_metadata: &mut Option<Struct>, child: Hop) -> bool {
    if child.agent.is_empty()
        || child.task_id.is_empty()
        || child.agent.len() > MAX_ID_LEN
        || child.task_id.len() > MAX_ID_LEN
    {
        return false;
    }
    let mut children = children_of(task_metadata.as_ref());
    if children.contains(&child) || children.len() >= MAX_CHILDREN {
        return false;
    }
    children.push(child);
    let list: Vec<Value> = children
        .iter()
        .map(|h| json!({ "agent": h.agent, "taskId": h.task_id }))
        .collect();
    let meta = task_metadata.get_or_insert_with(Struct::default);
    match meta.0.get_mut(DELEGATION_EXT) {
        Some(Value::Object(ext)) => {
            ext.insert("children".into(), Value::Array(list));
        }
        _ => {
            meta.0
                .insert(DELEGATION_EXT.to_owned(), json!({ "children": list }));
        }
    }
    true
}

/// The name a delegation chain gives the agent behind `interface`: its URL,
/// with `#tenant` when the interface names a tenant (a hub's agents share
/// one gRPC address, told apart by tenant).
pub fn agent_name(interface: &heddle_core::v1::AgentInterface) -> String {
    if interface.tenant.is_empty() {
        interface.url.clone()
    } else {
        format!("{}#{}", interface.url, interface.tenant)
    }
}

/// The tasks a task's metadata says it made (see [`add_child`]); entries
/// that are not well formed are skipped.
pub fn children_of(task_metadata: Option<&Struct>) -> Vec<Hop> {
    task_metadata
        .and_then(|m| m.0.get(DELEGATION_EXT))
        .and_then(|d| d.get("children"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(|h| hop_from(h).ok()).collect())
        .unwrap_or_default()
}

/// Removes `budget.hold` from the delegation context in `metadata`, if
/// any: what a relay does before the metadata leaves the hub that issued
/// the hold (a hold is a bearer capability for the root's money there).
pub fn strip_hold(metadata: &mut Option<Struct>) {
    if let Some(Value::Object(budget)) = metadata
        .as_mut()
        .and_then(|m| m.0.get_mut(DELEGATION_EXT))
        .and_then(|d| d.get_mut("budget"))
    {
        budget.remove("hold");
    }
}

/// An amount of money, in the AP2 form (a decimal string and an ISO 4217 code).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amount {
    /// A decimal number, e.g. `"0.40"`.
    pub amount: String,
    /// The currency, e.g. `"USD"`.
    pub currency: String,
}

/// A request's delegation context (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delegation {
    /// The agents and tasks before this one, root first; empty at the root.
    pub chain: Vec<Hop>,
    /// How many agents the chain may hold, this one included.
    pub max_hops: u32,
    /// When the root's caller stops waiting: a task still running then is
    /// stopped and fails.
    pub deadline: Option<Timestamp>,
    /// What the root may still spend, for information: the hub's ledger
    /// decides what is charged.
    pub budget: Option<Amount>,
    /// The hold the root's budget is kept in, as the hub that keeps it
    /// wrote it (opaque to everyone else; at most [`MAX_HOLD_LEN`] bytes).
    pub hold: Option<String>,
}

/// The longest `budget.hold` accepted.
pub const MAX_HOLD_LEN: usize = 1024;

impl Default for Delegation {
    fn default() -> Self {
        Self::root(DEFAULT_MAX_HOPS)
    }
}

/// Why a request's delegation context was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DelegationError {
    /// The metadata under [`DELEGATION_EXT`] is not a valid context.
    #[error("the delegation context is malformed: {0}")]
    Malformed(String),
    /// This agent is already in the chain.
    #[error("delegation loop: {0} is already in the chain")]
    Loop(String),
    /// One more hop would pass the limit.
    #[error("the hop limit of {0} is reached")]
    HopLimit(u32),
    /// The root's deadline has passed.
    #[error("the root's deadline ({0}) has passed")]
    DeadlinePassed(Timestamp),
}

/// The card's declaration of the extension (not required: a caller that
/// sends no context starts a chain), with this agent's hop limit.
pub fn card_extension(max_hops: u32) -> heddle_core::v1::AgentExtension {
    let mut params = Map::new();
    params.insert("maxHops".into(), max_hops.into());
    heddle_core::v1::AgentExtension {
        uri: DELEGATION_EXT.to_owned(),
        description: "Delegation chains: the agents and tasks a request came through, the hop \
                      limit, the root's deadline and budget, in message metadata under this URI"
            .to_owned(),
        required: false,
        params: Some(Struct(params)),
    }
}

impl From<DelegationError> for heddle_core::A2aError {
    /// A malformed context is the caller's bad params; the rest are
    /// [`heddle_core::ErrorCode::DelegationRefused`], with the rule broken
    /// in the error's metadata (`rule`: loop, hopLimit, deadline).
    fn from(e: DelegationError) -> Self {
        use heddle_core::{A2aError, ErrorCode};
        let rule = match &e {
            DelegationError::Malformed(_) => {
                return A2aError::new(ErrorCode::InvalidParams, e.to_string());
            }
            DelegationError::Loop(_) => "loop",
            DelegationError::HopLimit(_) => "hopLimit",
            DelegationError::DeadlinePassed(_) => "deadline",
        };
        A2aError::new(ErrorCode::DelegationRefused, e.to_string()).with_meta("rule", rule)
    }
}

impl Delegation {
    /// A context that starts a chain, with room for `max_hops` agents.
    pub fn root(max_hops: u32) -> Self {
        Self {
            chain: Vec::new(),
            max_hops: max_hops.clamp(1, MAX_HOPS_CAP),
            deadline: None,
            budget: None,
            hold: None,
        }
    }

    /// The root's deadline, set before the first call.
    #[must_use]
    pub fn with_deadline(mut self, at: Timestamp) -> Self {
        self.deadline = Some(at);
        self
    }

    /// This agent's place in the chain: 1 at the root.
    pub fn hop(&self) -> usize {
        self.chain.len() + 1
    }

    /// The context of a request that arrives with `metadata`, if it
    /// carries one. Malformed contexts are refused rather than ignored, so
    /// that a broken relay is noticed instead of silently lifting the limits.
    pub fn from_metadata(metadata: Option<&Struct>) -> Result<Option<Self>, DelegationError> {
        let Some(value) = metadata.and_then(|m| m.0.get(DELEGATION_EXT)) else {
            return Ok(None);
        };
        Self::from_value(value).map(Some)
    }

    fn from_value(value: &Value) -> Result<Self, DelegationError> {
        let bad = |why: &str| DelegationError::Malformed(why.to_owned());
        let obj = value.as_object().ok_or_else(|| bad("not an object"))?;
        let max_hops = match obj.get("maxHops") {
            None | Some(Value::Null) => DEFAULT_MAX_HOPS,
            // A relay that holds metadata as a protobuf Struct (the Python
            // SDK) turns 8 into 8.0: a whole float is the same count.
            Some(v) => v
                .as_f64()
                .filter(|n| n.fract() == 0.0 && (1.0..=f64::from(MAX_HOPS_CAP)).contains(n))
                .map(|n| n as u32)
                .ok_or_else(|| bad("maxHops must be an integer from 1 to 64"))?,
        };
        let chain = match obj.get("chain") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(hops)) => {
                if hops.len() > MAX_HOPS_CAP as usize {
                    return Err(bad("the chain is longer than any hop limit"));
                }
                hops.iter().map(hop_from).collect::<Result<_, _>>()?
            }
            Some(_) => return Err(bad("chain must be an array")),
        };
        let deadline = match obj.get("deadline") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                s.parse::<Timestamp>()
                    .map_err(|_| bad("deadline must be an RFC 3339 time"))?,
            ),
            Some(_) => return Err(bad("deadline must be an RFC 3339 time")),
        };
        let budget = match obj.get("budget").and_then(|b| b.get("remaining")) {
            None | Some(Value::Null) => None,
            Some(r) => Some(amount_from(r).ok_or_else(|| {
                bad("budget.remaining must be {amount: decimal string, currency}")
            })?),
        };
        let hold = match obj.get("budget").and_then(|b| b.get("hold")) {
            None | Some(Value::Null) => None,
            Some(Value::String(h)) if h.len() <= MAX_HOLD_LEN => Some(h.clone()),
            Some(_) => return Err(bad("budget.hold must be a string of at most 1024 bytes")),
        };
        Ok(Self {
            chain,
            max_hops,
            deadline,
            budget,
            hold,
        })
    }

    /// Whether this agent, known by any of the names in `me` (the URLs of
    /// its interfaces), may take the request now: not already in the chain,
    /// within the hop limit, before the deadline.
    pub fn admit(&self, me: &[String], now: Timestamp) -> Result<(), DelegationError> {
        if let Some(h) = self.chain.iter().find(|h| me.contains(&h.agent)) {
            return Err(DelegationError::Loop(h.agent.clone()));
        }
        if self.hop() > self.max_hops as usize {
            return Err(DelegationError::HopLimit(self.max_hops));
        }
        match self.deadline {
            Some(d) if d <= now => Err(DelegationError::DeadlinePassed(d)),
            _ => Ok(()),
        }
    }

    /// The context a call made for task `task_id` of `agent` carries: this
    /// chain with that hop added. Refused here when the callee would be past
    /// the limit, so the call is not made at all.
    pub fn next(&self, agent: &str, task_id: &str) -> Result<Self, DelegationError> {
        let mut next = self.clone();
        next.chain.push(Hop {
            agent: agent.to_owned(),
            task_id: task_id.to_owned(),
        });
        if next.hop() > next.max_hops as usize {
            return Err(DelegationError::HopLimit(next.max_hops));
        }
        Ok(next)
    }

    /// The metadata value (put under [`DELEGATION_EXT`]).
    pub fn to_value(&self) -> Value {
        let mut obj = Map::new();
        let chain: Vec<Value> = self
            .chain
            .iter()
            .map(|h| json!({ "agent": h.agent, "taskId": h.task_id }))
            .collect();
        obj.insert("chain".into(), Value::Array(chain));
        obj.insert("maxHops".into(), self.max_hops.into());
        if let Some(d) = self.deadline {
            obj.insert("deadline".into(), d.to_string().into());
        }
        let mut budget = Map::new();
        if let Some(b) = &self.budget {
            budget.insert(
                "remaining".into(),
                json!({ "amount": b.amount, "currency": b.currency }),
            );
        }
        if let Some(h) = &self.hold {
            budget.insert("hold".into(), h.clone().into());
        }
        if !budget.is_empty() {
            obj.insert("budget".into(), Value::Object(budget));
        }
        Value::Object(obj)
    }

    /// Puts this context in `metadata` under [`DELEGATION_EXT`], replacing
    /// any there.
    pub fn put_into(&self, metadata: &mut Option<Struct>) {
        metadata
            .get_or_insert_with(Struct::default)
            .0
            .insert(DELEGATION_EXT.to_owned(), self.to_value());
    }
}

fn hop_from(v: &Value) -> Result<Hop, DelegationError> {
    let field = |name: &str| {
        v.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= MAX_ID_LEN)
            .map(str::to_owned)
    };
    match (field("agent"), field("taskId")) {
        (Some(agent), Some(task_id)) => Ok(Hop { agent, task_id }),
        _ => Err(DelegationError::Malformed(
            "each hop needs an agent and a taskId (non-empty strings)".to_owned(),
        )),
    }
}

fn amount_from(v: &Value) -> Option<Amount> {
    let amount = v.get("amount").and_then(Value::as_str)?;
    let currency = v.get("currency").and_then(Value::as_str)?;
    let decimal = !amount.is_empty()
        && amount.len() <= 40
        && amount.bytes().filter(|b| *b == b'.').count() <= 1
        && amount.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let code = currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase());
    (decimal && code).then(|| Amount {
        amount: amount.to_owned(),
        currency: currency.to_owned(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    fn meta(v: Value) -> Struct {
        let mut m = Map::new();
        m.insert(DELEGATION_EXT.to_owned(), v);
        Struct(m)
    }

    #[test]
    fn absent_context_is_none() {
        assert_eq!(Delegation::from_metadata(None), Ok(None));
        assert_eq!(
            Delegation::from_metadata(Some(&Struct::default())),
            Ok(None)
        );
    }

    #[test]
    fn context_round_trips_through_metadata() {
        let d = Delegation::root(3)
            .with_deadline(Timestamp::from_millis(1_800_000_000_000))
            .next("https://a.example/", "t-1")
            .unwrap();
        let d = Delegation {
            budget: Some(Amount {
                amount: "0.40".into(),
                currency: "USD".into(),
            }),
            hold: Some("opaque.token".into()),
            ..d
        };
        let mut m = None;
        d.put_into(&mut m);
        assert_eq!(Delegation::from_metadata(m.as_ref()), Ok(Some(d)));
    }

    #[test]
    fn a_hold_is_stripped_and_the_rest_kept() {
        let mut d = Delegation::root(3);
        d.budget = Some(Amount {
            amount: "0.40".into(),
            currency: "USD".into(),
        });
        d.hold = Some("secret.token".into());
        let mut m = None;
        d.put_into(&mut m);
        strip_hold(&mut m);
        let back = Delegation::from_metadata(m.as_ref()).unwrap().unwrap();
        assert_eq!(back.hold, None);
        assert_eq!(back.budget, d.budget);
        let mut none = None;
        strip_hold(&mut none);
        assert_eq!(none, None);
    }

    #[test]
    fn children_merge_once_and_stay_bounded() {
        let hop = |t: &str| Hop {
            agent: "https://a.example/".into(),
            task_id: t.into(),
        };
        let mut m = None;
        assert!(add_child(&mut m, hop("1")));
        assert!(!add_child(&mut m, hop("1")), "the same child twice");
        assert!(add_child(&mut m, hop("2")));
        assert_eq!(children_of(m.as_ref()), vec![hop("1"), hop("2")]);
        assert!(!add_child(&mut m, hop(&"x".repeat(MAX_ID_LEN + 1))));
        for i in 3..=MAX_CHILDREN + 5 {
            add_child(&mut m, hop(&i.to_string()));
        }
        assert_eq!(children_of(m.as_ref()).len(), MAX_CHILDREN);
    }

    #[test]
    fn an_agent_behind_a_shared_grpc_address_is_named_by_its_tenant() {
        let iface = |url: &str, tenant: &str| heddle_core::v1::AgentInterface {
            url: url.into(),
            tenant: tenant.into(),
            ..Default::default()
        };
        assert_eq!(agent_name(&iface("https://h/a2a", "")), "https://h/a2a");
        assert_eq!(agent_name(&iface("h:50051", "writer")), "h:50051#writer");
        assert_ne!(
            agent_name(&iface("h:50051", "writer")),
            agent_name(&iface("h:50051", "research"))
        );
    }

    #[test]
    fn a_whole_float_is_a_hop_count() {
        // What a protobuf Struct (the Python SDK) makes of 3.
        let d = Delegation::from_metadata(Some(&meta(json!({"maxHops": 3.0})))).unwrap();
        assert_eq!(d.map(|d| d.max_hops), Some(3));
    }

    #[test]
    fn hop_limit_counts_the_agents_in_the_chain() {
        let root = Delegation::root(2);
        assert_eq!(root.hop(), 1);
        let second = root.next("a", "t1").unwrap();
        assert_eq!(second.admit(&["b".into()], Timestamp::now()), Ok(()));
        assert_eq!(second.next("b", "t2"), Err(DelegationError::HopLimit(2)));
        // A caller that skips the local check is refused by the callee.
        let mut third = second.clone();
        third.chain.push(Hop {
            agent: "b".into(),
            task_id: "t2".into(),
        });
        assert_eq!(
            third.admit(&["c".into()], Timestamp::now()),
            Err(DelegationError::HopLimit(2))
        );
    }

    #[test]
    fn an_agent_already_in_the_chain_is_a_loop() {
        let d = Delegation::root(8).next("a", "t1").unwrap();
        assert_eq!(
            d.admit(&["z".into(), "a".into()], Timestamp::now()),
            Err(DelegationError::Loop("a".into()))
        );
    }

    #[test]
    fn a_passed_deadline_is_refused() {
        let d = Delegation::root(8).with_deadline(Timestamp::from_millis(1_000));
        assert!(matches!(
            d.admit(&[], Timestamp::now()),
            Err(DelegationError::DeadlinePassed(_))
        ));
    }

    #[test]
    fn malformed_contexts_are_refused_with_why() {
        for bad in [
            json!("x"),
            json!({"maxHops": 0}),
            json!({"maxHops": 65}),
            json!({"maxHops": -1}),
            json!({"maxHops": 2.5}),
            json!({"chain": {}}),
            json!({"chain": [{"agent": "a"}]}),
            json!({"chain": [{"agent": "", "taskId": "t"}]}),
            json!({"deadline": "tomorrow"}),
            json!({"budget": {"remaining": {"amount": 5, "currency": "USD"}}}),
            json!({"budget": {"remaining": {"amount": "1e9", "currency": "USD"}}}),
            json!({"budget": {"hold": 7}}),
            json!({"budget": {"hold": "x".repeat(1025)}}),
            json!({"chain": vec![json!({"agent": "a", "taskId": "t"}); 65]}),
        ] {
            let got = Delegation::from_metadata(Some(&meta(bad.clone())));
            assert!(
                matches!(got, Err(DelegationError::Malformed(_))),
                "{bad}: {got:?}"
            );
        }
    }
}
