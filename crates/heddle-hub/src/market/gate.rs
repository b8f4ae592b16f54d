//! The gate in front of a priced agent: a send is refused before any work
//! when its estimate is over the caller's budget or balance; an admitted
//! task's money is reserved, and settled when the task ends. A task a
//! priced root delegated to, on this hub, is paid from the root's hold
//! instead ([`super::hold`]).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use async_trait::async_trait;
use heddle_core::{A2aError, ErrorCode, v1};
use heddle_server::{Pass, SendAtGate, SendGate};
use heddle_store::{LedgerStore, NewReservation, Reserved};
use serde_json::json;

use super::{
    budget::Budget,
    hold::{HoldClaims, HoldKey},
    money::Money,
    now_ms,
    price::{Price, PricingModel, Recent, SUBSCRIPTION_DAYS, Usage, reported_tokens},
};

/// The wallet of a caller: its id, or `anonymous` on an open hub.
pub fn wallet_of(caller_id: &str) -> &str {
    if caller_id.is_empty() {
        "anonymous"
    } else {
        caller_id
    }
}

/// The ledger's reservation id for a task of an agent.
pub fn reservation_id(agent: &str, task_id: &str) -> String {
    format!("{agent}:{task_id}")
}

/// What a reservation is for, as the ledger keeps it (JSON), so that a
/// restarted hub finds the task again: `owner` is the task's scope owner
/// (the caller's id, `""` when anonymous), not the wallet; `skill` the
/// skill whose price applies, when one has its own.
pub fn task_ref(agent: &str, owner: &str, task_id: &str, skill: Option<&str>) -> String {
    let mut r = json!({ "agent": agent, "owner": owner, "task": task_id });
    if let Some(s) = skill {
        r["skill"] = json!(s);
    }
    r.to_string()
}

/// The skill a request names, when the agent prices it on its own: `skill`
/// under the market extension's key (request metadata, then message
/// metadata), else the a2ahub form's `taskType`.
fn priced_skill<'a>(price: &Price, send: &SendAtGate<'a>) -> Option<&'a str> {
    if !price.by_skill() {
        return None;
    }
    let named = |key: &str| {
        [send.metadata, send.message.metadata.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|m| m.0.get(super::MARKET_EXT)?.get(key)?.as_str())
    };
    named("skill")
        .or_else(|| named("taskType"))
        .filter(|s| price.skills.contains_key(*s))
}

/// The refusal the a2ahub form and every A2A binding share: the seed's
/// wording, the amounts in `ErrorInfo.metadata`.
pub fn budget_exceeded(required: &Money, available: &Money, of: &str) -> A2aError {
    A2aError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "Budget exceeded. Task requires {}, {of} is {}.",
            required.display(),
            available.display()
        ),
    )
    .with_meta("required", required.decimal().to_string())
    .with_meta("available", available.decimal().to_string())
    .with_meta("currency", required.currency.clone())
}

/// One priced agent's gate (see the module docs).
pub struct MarketGate {
    shared: Arc<Shared>,
}

struct Shared {
    agent: String,
    price: Price,
    ledger: Arc<dyn LedgerStore>,
    recent: Recent,
    /// Working time of tasks waiting for their caller, by reservation.
    worked: Mutex<HashMap<String, Duration>>,
    /// Tasks the hub stopped because their hold ran out (not the agent's
    /// failure: they pay for the time they used), by reservation.
    exhausted: Mutex<std::collections::HashSet<String>>,
    /// The hub's key for hold tokens.
    hold_key: Arc<HoldKey>,
    /// What open root tasks hand down their chains (the budget left and
    /// the hold token), by reservation: every turn of the task hands it.
    handed: Mutex<HashMap<String, Handed>>,
}

/// What a root task hands down: the budget left for the chain, and the
/// token of its hold.
type Handed = (heddle_server::delegation::Amount, String);

impl std::fmt::Debug for MarketGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarketGate")
            .field("agent", &self.shared.agent)
            .field("price", &self.shared.price)
            .finish_non_exhaustive()
    }
}

impl MarketGate {
    /// The gate of `agent`, priced `price`, keeping its money in `ledger`;
    /// hold tokens are the hub's, signed with `hold_key`.
    pub(crate) fn new(
        agent: &str,
        price: Price,
        ledger: Arc<dyn LedgerStore>,
        hold_key: Arc<HoldKey>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                agent: agent.to_owned(),
                price,
                ledger,
                recent: Recent::default(),
                worked: Mutex::new(HashMap::new()),
                exhausted: Mutex::new(std::collections::HashSet::new()),
                hold_key,
                handed: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// What a task of this agent is expected to cost now.
    pub fn estimate(&self) -> Money {
        self.estimate_for(None)
    }

    /// What a task of `skill` (its own price, else the agent's) is
    /// expected to cost now.
    pub fn estimate_for(&self, skill: Option<&str>) -> Money {
        self.shared
            .price
            .for_skill(skill)
            .estimate(&self.shared.recent)
    }

    /// When a task sent now is expected to end: the median working time of
    /// the agent's recent completed tasks (zero before any).
    pub fn eta(&self) -> Duration {
        self.shared.recent.median_worked().unwrap_or_default()
    }

    /// How much more working time the task's hold pays for, for a
    /// per_minute price: the hold in minutes at the rate, less the time its
    /// earlier turns worked. `None` for other prices, or a task with no
    /// hold (a free one).
    pub async fn allowance(&self, task_id: &str) -> Option<(Duration, Money)> {
        let s = &self.shared;
        if !s.price.by_skill() && s.price.model != PricingModel::PerMinute {
            return None;
        }
        let id = reservation_id(&s.agent, task_id);
        let held = s.ledger.reservation(&id).await.ok()??;
        let price = s
            .price
            .for_skill(super::recover::skill_of(&held.task).as_deref());
        if price.model != PricingModel::PerMinute || price.rate.is_zero() {
            return None;
        }
        let hold = money(held.amount, &held.currency);
        let minutes = hold.decimal().checked_div(price.rate)?;
        let ms = minutes
            .checked_mul(rust_decimal::Decimal::from(60_000))?
            .floor();
        let total = Duration::from_millis(rust_decimal::prelude::ToPrimitive::to_u64(&ms)?);
        let before = s
            .worked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .copied()
            .unwrap_or_default();
        Some((total.saturating_sub(before), hold))
    }

    /// Notes that the hub stopped `task_id` because its hold ran out, so
    /// that it ends paying for its time even if it ends FAILED.
    pub fn ran_out(&self, task_id: &str) {
        let id = reservation_id(&self.shared.agent, task_id);
        self.shared
            .exhausted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
    }

    /// The gate's price.
    pub fn price(&self) -> &Price {
        &self.shared.price
    }

    /// The card's declaration of the price (AP2's `{amount, currency}`
    /// shape for the rate and the estimate made when the card was built).
    pub fn extension(&self) -> v1::AgentExtension {
        let p = &self.shared.price;
        let mut params = json!({
            "pricing": { "model": p.model, "rate": p.rate_json() },
            "estimate": self.estimate().to_json(),
            "budgetKey": super::MARKET_EXT,
        });
        if p.model == PricingModel::Subscription {
            params["pricing"]["periodDays"] = json!(SUBSCRIPTION_DAYS);
        }
        for (id, sp) in &p.skills {
            params["pricing"]["skills"][id] = json!({ "model": sp.model, "rate": sp.rate_json() });
        }
        v1::AgentExtension {
            uri: super::MARKET_EXT.to_owned(),
            description: "Tasks are priced: the rate and an estimate; a budget goes in request or message metadata under this URI".to_owned(),
            required: false,
            params: heddle_core::wkt::Struct::try_from(params).ok(),
        }
    }
}

fn money(minor: i64, currency: &str) -> Money {
    Money {
        minor,
        currency: currency.to_owned(),
    }
}

fn store_err(e: heddle_store::StoreError) -> A2aError {
    A2aError::internal(format!("ledger: {e}"))
}

impl Shared {
    async fn balance(&self, owner: &str) -> Result<i64, A2aError> {
        self.ledger
            .balance(
                &heddle_store::Account::Wallet(owner.to_owned()),
                &self.price.currency,
            )
            .await
            .map_err(store_err)
    }

    /// A subscription agent admits subscribers and no one else.
    async fn subscriber(&self, owner: &str) -> Result<(), A2aError> {
        let until = self
            .ledger
            .subscription(owner, &self.agent)
            .await
            .map_err(store_err)?;
        if until.is_some_and(|t| t > now_ms()) {
            return Ok(());
        }
        let price = Money::exact(self.price.rate, &self.price.currency)
            .map_err(|e| A2aError::internal(e.to_string()))?;
        let balance = money(self.balance(owner).await?, &self.price.currency);
        Err(A2aError::new(
            ErrorCode::BudgetExceeded,
            format!(
                "This agent is by subscription: {} for {SUBSCRIPTION_DAYS} days \
                 (heddle wallet subscribe), wallet balance is {}.",
                price.display(),
                balance.display()
            ),
        )
        .with_meta("required", price.decimal().to_string())
        .with_meta("available", balance.decimal().to_string())
        .with_meta("currency", price.currency))
    }

    /// Reserves for a new task: the estimate for a per_task price; for a
    /// metered one the budget, or without one the whole balance (the most
    /// the task may spend); at least `chain`, the budget its caller hands
    /// down its delegation chain, when there is one. Refused, with nothing
    /// reserved, when the estimate is over the budget or the balance, or the
    /// balance cannot hold `chain`. The amount held.
    async fn reserve(
        self: &Arc<Self>,
        owner: &str,
        scope_owner: &str,
        task_id: &str,
        budget: Option<&Money>,
        skill: Option<&str>,
        chain: Option<&Money>,
    ) -> Result<i64, A2aError> {
        let price = self.price.for_skill(skill);
        let currency = &price.currency;
        let estimate = price.estimate(&self.recent);
        if let Some(b) = budget
            && estimate.minor > b.minor
        {
            return Err(budget_exceeded(&estimate, b, "budget"));
        }
        let id = reservation_id(&self.agent, task_id);
        let mut balance = None;
        // A metered hold follows the balance, which other tasks change
        // meanwhile: asked again a few times before giving up.
        for _ in 0..3 {
            let amount = if price.rate.is_zero() {
                0
            } else if price.metered() {
                let available = match balance {
                    Some(b) => b,
                    None => self.balance(owner).await?,
                };
                let most = budget.map_or(available, |b| b.minor.min(available));
                most.max(estimate.minor)
            } else {
                estimate.minor
            };
            let amount = chain.map_or(amount, |c| amount.max(c.minor));
            let r = NewReservation {
                id: id.clone(),
                owner: owner.to_owned(),
                agent: self.agent.clone(),
                task: task_ref(&self.agent, scope_owner, task_id, skill),
                currency: currency.clone(),
                amount,
            };
            match self.reserve_once(r).await? {
                Reserved::Held => return Ok(amount),
                Reserved::Insufficient { available }
                    if let Some(c) = chain
                        && available < c.minor =>
                {
                    return Err(budget_exceeded(
                        c,
                        &money(available, currency),
                        "wallet balance",
                    ));
                }
                Reserved::Insufficient { available } if available < estimate.minor => {
                    return Err(budget_exceeded(
                        &estimate,
                        &money(available, currency),
                        "wallet balance",
                    ));
                }
                Reserved::Insufficient { available } => balance = Some(available),
            }
        }
        Err(A2aError::exhausted(
            "the wallet is changing too fast to hold this task's budget; retry",
            Duration::from_secs(1),
        ))
    }

    /// Reserves for a new task a delegating root's chain reached, out of
    /// the root's hold (the claims of its token): the estimate, as for
    /// [`Self::reserve`], refused when the root's budget has less left.
    async fn reserve_within(
        self: &Arc<Self>,
        root: &HoldClaims,
        scope_owner: &str,
        task_id: &str,
        budget: Option<&Money>,
        skill: Option<&str>,
    ) -> Result<(), A2aError> {
        let price = self.price.for_skill(skill);
        let estimate = price.estimate(&self.recent);
        if let Some(b) = budget
            && estimate.minor > b.minor
        {
            return Err(budget_exceeded(&estimate, b, "budget"));
        }
        if root.currency != price.currency {
            return Err(A2aError::new(
                ErrorCode::BudgetExceeded,
                format!(
                    "The delegating task's budget is in {}; this agent charges {}.",
                    root.currency, price.currency
                ),
            ));
        }
        let r = NewReservation {
            id: reservation_id(&self.agent, task_id),
            owner: root.owner.clone(),
            agent: self.agent.clone(),
            task: task_ref(&self.agent, scope_owner, task_id, skill),
            currency: price.currency.clone(),
            amount: estimate.minor,
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (shared, root) = (self.clone(), root.clone());
        // To its end even when the send is dropped, as `reserve_once`.
        tokio::spawn(async move {
            let made = shared
                .ledger
                .reserve_within(&root.reservation, root.keep, &r)
                .await;
            let held = matches!(made, Ok(Some(Reserved::Held)));
            if tx.send(made).is_err()
                && held
                && let Err(e) = shared.ledger.settle(&r.id, 0).await
            {
                tracing::error!(reservation = %r.id, error = %e, "could not release an orphan hold");
            }
        });
        let made = rx
            .await
            .map_err(|_| A2aError::internal("ledger: the reservation task ended"))?
            .map_err(store_err)?;
        match made {
            Some(Reserved::Held) => Ok(()),
            Some(Reserved::Insufficient { available }) => Err(budget_exceeded(
                &estimate,
                &money(available, &price.currency),
                "what the delegating task's budget has left",
            )),
            None => Err(A2aError::new(
                ErrorCode::BudgetExceeded,
                "The delegating task's budget is spent: its hold was settled.",
            )),
        }
    }

    /// What a root task that reserved `held` as `id` hands down its chain,
    /// when its caller handed it `chain`: what is over the root's own
    /// estimate, and the token of the hold. The root keeps the rest of
    /// `held` (all of it but that, for a metered root holding its budget or
    /// the whole balance), so the chain can never spend more than `chain`.
    fn hand_down(
        &self,
        id: &str,
        owner: &str,
        held: i64,
        estimate: &Money,
        chain: &Money,
    ) -> Handed {
        let left = money(
            chain.minor.saturating_sub(estimate.minor).max(0),
            &chain.currency,
        );
        let token = self.hold_key.issue(&HoldClaims {
            reservation: id.to_owned(),
            owner: owner.to_owned(),
            currency: chain.currency.clone(),
            keep: held.saturating_sub(left.minor).max(0),
        });
        let handed = (
            heddle_server::delegation::Amount {
                amount: left.decimal().to_string(),
                currency: left.currency,
            },
            token,
        );
        self.handed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), handed.clone());
        handed
    }

    /// Makes one reservation, to its end even when the send is dropped
    /// meanwhile (its client went away): a hold made for a send that is no
    /// longer there to run is given back at once, not left until a restart.
    async fn reserve_once(self: &Arc<Self>, r: NewReservation) -> Result<Reserved, A2aError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let shared = self.clone();
        tokio::spawn(async move {
            let made = shared.ledger.reserve(&r).await;
            let held = matches!(made, Ok(Reserved::Held));
            if tx.send(made).is_err()
                && held
                && let Err(e) = shared.ledger.settle(&r.id, 0).await
            {
                tracing::error!(reservation = %r.id, error = %e, "could not release an orphan hold");
            }
        });
        rx.await
            .map_err(|_| A2aError::internal("ledger: the reservation task ended"))?
            .map_err(store_err)
    }

    /// Settles the task's reservation with what its run cost at `price`.
    fn settle(self: &Arc<Self>, id: String, usage: Usage, price: &Price) {
        self.handed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        let charge = price.charge(usage);
        if usage.state == v1::TaskState::Completed {
            self.recent.record(usage.tokens, usage.worked);
        }
        let shared = self.clone();
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            // No runtime (the process is ending): the next start settles it.
            return;
        };
        rt.spawn(async move {
            if let Err(e) = shared.ledger.settle(&id, charge.minor).await {
                tracing::error!(reservation = %id, error = %e, "could not settle a task; the next start will");
            }
        });
    }
}

impl Shared {
    /// Settles a task that ended with no run going on (canceled while it
    /// waited): it pays, as canceled, for what its earlier turns used.
    fn ended_waiting(self: &Arc<Self>, task: &v1::Task) {
        let id = reservation_id(&self.agent, &task.id);
        let worked = self
            .worked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .unwrap_or_default();
        let tokens = reported_tokens(task);
        let shared = self.clone();
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            let Ok(Some(r)) = shared.ledger.reservation(&id).await else {
                return;
            };
            let price = shared
                .price
                .for_skill(super::recover::skill_of(&r.task).as_deref())
                .clone();
            let usage = Usage {
                state: v1::TaskState::Canceled,
                tokens,
                worked,
            };
            shared.settle(id, usage, &price);
        });
    }
}

#[async_trait]
impl SendGate for MarketGate {
    fn ended_outside_run(&self, task: &v1::Task) {
        self.shared.ended_waiting(task);
    }

    async fn admit(&self, send: SendAtGate<'_>) -> Result<Option<Box<dyn Pass>>, A2aError> {
        let s = &self.shared;
        let owner = wallet_of(&send.caller.id);
        let budget = Budget::of(send.metadata, send.message.metadata.as_ref())?;
        let budget = match budget {
            Some(b) => Some(b.money(&s.price.currency)?),
            None => None,
        };
        if s.price.model == PricingModel::Subscription {
            s.subscriber(owner).await?;
            return Ok(None);
        }
        let id = reservation_id(&s.agent, send.task_id);
        let mut handed = None;
        let price = if send.new_task {
            let skill = priced_skill(&s.price, &send);
            let price = s.price.for_skill(skill);
            // Reached by a chain whose root this hub holds: paid from there.
            let root = send
                .delegation
                .and_then(|d| d.hold.as_deref())
                .and_then(|token| s.hold_key.verify(token));
            if let Some(root) = root {
                s.reserve_within(&root, &send.caller.id, send.task_id, budget.as_ref(), skill)
                    .await?;
            } else {
                let chain = chain_budget(send.delegation, &price.currency)?;
                let held = s
                    .reserve(
                        owner,
                        &send.caller.id,
                        send.task_id,
                        budget.as_ref(),
                        skill,
                        chain.as_ref(),
                    )
                    .await?;
                if let Some(chain) = &chain {
                    let estimate = price.estimate(&s.recent);
                    handed = Some(s.hand_down(&id, owner, held, &estimate, chain));
                }
            }
            price
        } else {
            handed = s
                .handed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&id)
                .cloned();
            let Some(held) = s.ledger.reservation(&id).await.map_err(store_err)? else {
                // A task from before the agent had its price: free.
                return Ok(None);
            };
            let price = s
                .price
                .for_skill(super::recover::skill_of(&held.task).as_deref());
            // A larger budget on a reply raises a metered task's hold, from
            // the wallet that holds it, at its owner's word only: a task paid
            // from a delegation chain's budget is not raised by the agent that
            // delegated it.
            if let Some(b) = &budget
                && price.metered()
                && held.owner == owner
                && b.minor > held.amount
                && let Some(Reserved::Insufficient { available }) = s
                    .ledger
                    .extend(&id, b.minor - held.amount)
                    .await
                    .map_err(store_err)?
            {
                return Err(budget_exceeded(
                    &money(b.minor - held.amount, &price.currency),
                    &money(available, &price.currency),
                    "wallet balance",
                ));
            }
            price
        };
        Ok(Some(Box::new(MeterPass {
            shared: s.clone(),
            price: price.clone(),
            reservation: id,
            new_task: send.new_task,
            started: None,
            told: false,
            handed,
        })))
    }
}

/// The budget a caller hands down the delegation chain of a task it starts
/// (`budget.remaining` of a delegation context with an empty chain and no
/// hold yet: further down, the figure is information only), in the agent's
/// currency.
fn chain_budget(
    delegation: Option<&heddle_server::Delegation>,
    currency: &str,
) -> Result<Option<Money>, A2aError> {
    let Some(d) = delegation.filter(|d| d.hold.is_none() && d.chain.is_empty()) else {
        return Ok(None);
    };
    let Some(b) = &d.budget else {
        return Ok(None);
    };
    let field = "metadata.delegation.budget.remaining";
    if b.currency != currency {
        return Err(A2aError::invalid_field(
            field,
            format!("is in {}; this agent charges {currency}", b.currency),
        ));
    }
    let amount: rust_decimal::Decimal = b
        .amount
        .parse()
        .map_err(|_| A2aError::invalid_field(field, "amount is not a decimal number"))?;
    Money::exact(amount, currency)
        .map(Some)
        .map_err(|e| A2aError::invalid_field(field, e.to_string()))
}

/// One admitted run of a priced task.
struct MeterPass {
    shared: Arc<Shared>,
    /// The price this task pays (its skill's, or the agent's).
    price: Price,
    reservation: String,
    new_task: bool,
    started: Option<tokio::time::Instant>,
    told: bool,
    /// What this run hands down its delegation chain, for a root.
    handed: Option<Handed>,
}

impl MeterPass {
    /// The task's working time so far: earlier turns' and this run's.
    fn worked(&self) -> Duration {
        let before = self
            .shared
            .worked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.reservation)
            .unwrap_or_default();
        before.saturating_add(self.started.map_or(Duration::ZERO, |t| t.elapsed()))
    }
}

impl Pass for MeterPass {
    fn delegation_budget(&self) -> Option<Handed> {
        self.handed.clone()
    }

    fn started(&mut self) {
        self.started = Some(tokio::time::Instant::now());
    }

    fn ended(mut self: Box<Self>, task: Option<&v1::Task>) {
        self.told = true;
        let worked = self.worked();
        // An answer with no task kept is a delivered result.
        let (state, tokens) = task.map_or((v1::TaskState::Completed, 0), |t| {
            let state = t
                .status
                .as_ref()
                .map_or(v1::TaskState::Failed, |s| s.state());
            (state, reported_tokens(t))
        });
        if state.is_interrupted() {
            self.shared
                .worked
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(self.reservation.clone(), worked);
            return;
        }
        let stopped = self
            .shared
            .exhausted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.reservation);
        let usage = Usage {
            // Stopped by the hub, not failed by the agent: it pays for its time.
            state: if stopped && state == v1::TaskState::Failed {
                v1::TaskState::Canceled
            } else {
                state
            },
            tokens,
            worked,
        };
        self.shared
            .settle(self.reservation.clone(), usage, &self.price);
    }
}

impl Drop for MeterPass {
    fn drop(&mut self) {
        if self.told {
            return;
        }
        let state = if self.started.is_some() {
            // Aborted after a cancel's grace: it pays for the time it used.
            v1::TaskState::Canceled
        } else if self.new_task {
            // The send failed after the gate: nothing was done.
            v1::TaskState::Rejected
        } else {
            // A reply that never reached the agent: the task still waits.
            return;
        };
        let usage = Usage {
            state,
            tokens: 0,
            worked: self.worked(),
        };
        self.shared
            .settle(self.reservation.clone(), usage, &self.price);
    }
}
