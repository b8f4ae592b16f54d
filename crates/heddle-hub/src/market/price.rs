//! An agent's price: what it is charged per, the estimate made before a
//! task starts, and the charge when it ends.
//!
//! | How the task ended            | per_task | per_token        | per_minute        |
//! |-------------------------------|----------|------------------|-------------------|
//! | COMPLETED                     | the rate | tokens × rate    | minutes × rate    |
//! | CANCELED                      | nothing  | tokens used      | minutes worked    |
//! | FAILED, REJECTED              | nothing  | nothing          | nothing           |
//! | INPUT_REQUIRED, AUTH_REQUIRED | held until the task ends                        |
//!
//! A task pays for what it delivered or, canceled, for what it used; an
//! agent that fails or rejects a task is not paid for it. Minutes are the
//! agent's own working time, summed over the task's turns (the time a task
//! waits for its caller is not counted). Tokens are what the agent reports
//! on the task (`https://heddle.dev/extensions/usage/v1`, as LLM agents
//! write it). Metered charges are rounded up to a whole minor unit, and no
//! charge is ever more than what was reserved for the task.
//! `subscription` agents charge nothing per task to a subscriber and refuse
//! everyone else; the rate is the price of 30 days.
//!
//! A price may name prices of its own for some of the agent's skills
//! (`skills`, in the same currency, not by subscription): a request that
//! names a skill (`skill` under the market extension's metadata key, or
//! the a2ahub form's `task_type`) is priced by it; any other by the
//! agent's price.

use std::{
    collections::{BTreeMap, VecDeque},
    sync::Mutex,
    time::Duration,
};

use heddle_core::v1;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::money::{self, Money, MoneyError};
pub use crate::manifest::PricingModel;

/// How long one subscription payment lasts.
pub const SUBSCRIPTION_DAYS: i64 = 30;

/// The key under which agents report token usage on a task's metadata.
pub const USAGE_KEY: &str = "https://heddle.dev/extensions/usage/v1";

/// A price as registered: the manifest's `pricing` shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSpec {
    /// What the rate is charged per.
    pub model: PricingModel,
    /// A JSON number ≥ 0, in `currency` (per task, token, minute or 30 days).
    pub rate: Value,
    /// ISO 4217 code.
    pub currency: String,
    /// Prices of some skills, by skill id (module docs).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub skills: BTreeMap<String, PriceSpec>,
}

/// A price that passed its checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Price {
    /// What the rate is charged per.
    pub model: PricingModel,
    /// The exact rate.
    pub rate: Decimal,
    /// ISO 4217 code.
    pub currency: String,
    /// Prices of some skills, by skill id (none of their own).
    pub skills: BTreeMap<String, Price>,
}

/// Most skills one price names.
const MAX_SKILL_PRICES: usize = 256;

impl PriceSpec {
    /// The checked price: a known currency, a rate ≥ 0, and for per_task and
    /// subscription prices a whole number of minor units.
    pub fn check(&self) -> Result<Price, MoneyError> {
        money::exponent(&self.currency)?;
        let rate = money::decimal(&self.rate)?;
        if matches!(
            self.model,
            PricingModel::PerTask | PricingModel::Subscription
        ) {
            Money::exact(rate, &self.currency)?;
        }
        if self.skills.len() > MAX_SKILL_PRICES {
            return Err(MoneyError::Pricing(format!(
                "at most {MAX_SKILL_PRICES} skills have prices of their own"
            )));
        }
        let mut skills = BTreeMap::new();
        for (id, spec) in &self.skills {
            let fault = |problem: &str| MoneyError::Pricing(format!("skills.{id}: {problem}"));
            if !spec.skills.is_empty() {
                return Err(fault("a skill's price names no skills"));
            }
            if spec.currency != self.currency {
                return Err(fault("is in another currency than the agent's price"));
            }
            if spec.model == PricingModel::Subscription {
                return Err(fault("a subscription is to the agent, not to one skill"));
            }
            skills.insert(id.clone(), spec.check()?);
        }
        Ok(Price {
            model: self.model,
            rate,
            currency: self.currency.clone(),
            skills,
        })
    }
}

/// How a run of a task ended, as its charge needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// The task's state.
    pub state: v1::TaskState,
    /// Tokens the agent reported on the task, over every turn.
    pub tokens: u64,
    /// The agent's working time, over every turn.
    pub worked: Duration,
}

/// The tokens an agent reported on `task` (0 when it reported none).
pub fn reported_tokens(task: &v1::Task) -> u64 {
    task.metadata
        .as_ref()
        .and_then(|m| m.0.get(USAGE_KEY))
        .and_then(|u| u.get("totalTokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

impl Price {
    /// The price of `skill`: its own, else the agent's.
    pub fn for_skill(&self, skill: Option<&str>) -> &Price {
        skill.and_then(|s| self.skills.get(s)).unwrap_or(self)
    }

    /// Whether some skill has a price of its own.
    pub fn by_skill(&self) -> bool {
        !self.skills.is_empty()
    }

    /// The price per its unit as `{amount, currency}` (the rate exactly).
    pub fn rate_json(&self) -> Value {
        json!({ "amount": money::number(self.rate), "currency": self.currency })
    }

    /// Whether a task pays as it goes (per token or minute).
    pub fn metered(&self) -> bool {
        matches!(self.model, PricingModel::PerToken | PricingModel::PerMinute)
    }

    /// What a task is expected to cost: the per_task rate; for metered
    /// prices the rate times the median of the agent's recent tasks (none
    /// yet: one unit, a token or a minute).
    pub fn estimate(&self, recent: &Recent) -> Money {
        let units = match self.model {
            PricingModel::PerTask => Decimal::ONE,
            PricingModel::PerToken => Decimal::from(recent.median_tokens().unwrap_or(1)),
            PricingModel::PerMinute => recent.median_worked().map_or(Decimal::ONE, minutes),
            PricingModel::Subscription => Decimal::ZERO,
        };
        self.cost(units)
    }

    /// What a run that ended as `usage` costs (module docs), before the
    /// reservation's cap.
    pub fn charge(&self, usage: Usage) -> Money {
        use v1::TaskState as S;
        let units = match (self.model, usage.state) {
            (_, S::Failed | S::Rejected) | (PricingModel::Subscription, _) => Decimal::ZERO,
            (PricingModel::PerTask, S::Completed) => Decimal::ONE,
            (PricingModel::PerTask, _) => Decimal::ZERO,
            (PricingModel::PerToken, _) => Decimal::from(usage.tokens),
            (PricingModel::PerMinute, _) => minutes(usage.worked),
        };
        self.cost(units)
    }

    /// `units` × the rate, rounded up to a minor unit; a cost too large to
    /// hold is the largest amount, which no reservation covers anyway.
    fn cost(&self, units: Decimal) -> Money {
        let amount = self.rate.checked_mul(units).unwrap_or(Decimal::MAX);
        Money::round_up(amount, &self.currency).unwrap_or(Money {
            minor: i64::MAX,
            currency: self.currency.clone(),
        })
    }
}

/// A duration in minutes, to the millisecond.
fn minutes(d: Duration) -> Decimal {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Decimal::from(ms) / Decimal::from(60_000)
}

/// The usage of an agent's last tasks, for metered estimates.
#[derive(Debug, Default)]
pub struct Recent {
    inner: Mutex<VecDeque<(u64, Duration)>>,
}

/// How many recent tasks an estimate looks at.
const RECENT: usize = 32;

impl Recent {
    /// Notes one finished task's usage.
    pub fn record(&self, tokens: u64, worked: Duration) {
        let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == RECENT {
            q.pop_front();
        }
        q.push_back((tokens, worked));
    }

    fn median_tokens(&self) -> Option<u64> {
        let q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        median(q.iter().map(|u| u.0).collect())
    }

    /// The median working time of the recent tasks.
    pub fn median_worked(&self) -> Option<Duration> {
        let q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        median(q.iter().map(|u| u.1).collect())
    }
}

/// The upper median (no averaging, so no overflow), `None` when empty.
fn median<T: Ord + Copy>(mut v: Vec<T>) -> Option<T> {
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    fn price(model: PricingModel, rate: Value) -> Price {
        PriceSpec {
            model,
            rate,
            currency: "USD".into(),
            skills: BTreeMap::new(),
        }
        .check()
        .unwrap()
    }

    fn usage(state: v1::TaskState, tokens: u64, secs: u64) -> Usage {
        Usage {
            state,
            tokens,
            worked: Duration::from_secs(secs),
        }
    }

    #[test]
    fn per_task_pays_for_a_completed_task_only() {
        let p = price(PricingModel::PerTask, json!(0.03));
        assert_eq!(p.estimate(&Recent::default()).minor, 3);
        assert_eq!(p.charge(usage(v1::TaskState::Completed, 0, 9)).minor, 3);
        for s in [
            v1::TaskState::Canceled,
            v1::TaskState::Failed,
            v1::TaskState::Rejected,
        ] {
            assert_eq!(p.charge(usage(s, 0, 9)).minor, 0, "{s:?}");
        }
    }

    #[test]
    fn metered_prices_charge_what_was_used_rounded_up() {
        let p = price(PricingModel::PerToken, json!(0.0001));
        assert_eq!(p.charge(usage(v1::TaskState::Completed, 150, 0)).minor, 2);
        assert_eq!(p.charge(usage(v1::TaskState::Canceled, 100, 0)).minor, 1);
        assert_eq!(p.charge(usage(v1::TaskState::Failed, 100, 0)).minor, 0);
        let m = price(PricingModel::PerMinute, json!(0.6));
        assert_eq!(m.charge(usage(v1::TaskState::Completed, 0, 90)).minor, 90);
        assert_eq!(m.charge(usage(v1::TaskState::Canceled, 0, 30)).minor, 30);
        assert_eq!(m.charge(usage(v1::TaskState::Rejected, 0, 30)).minor, 0);
    }

    #[test]
    fn metered_estimates_follow_the_recent_median() {
        let p = price(PricingModel::PerToken, json!(0.01));
        let recent = Recent::default();
        assert_eq!(p.estimate(&recent).minor, 1, "one token before any task");
        for t in [10, 300, 20] {
            recent.record(t, Duration::ZERO);
        }
        assert_eq!(p.estimate(&recent).minor, 20);
    }

    #[test]
    fn prices_are_checked() {
        let bad = |model, rate: Value, currency: &str| {
            PriceSpec {
                model,
                rate,
                currency: currency.into(),
                skills: BTreeMap::new(),
            }
            .check()
            .is_err()
        };
        assert!(bad(PricingModel::PerTask, json!(0.001), "USD"));
        assert!(bad(PricingModel::PerTask, json!(-1), "USD"));
        assert!(bad(PricingModel::PerTask, json!(1), "US"));
        assert!(!bad(PricingModel::PerToken, json!(0.00002), "USD"));
        let huge = price(PricingModel::PerToken, json!(1e20));
        assert_eq!(
            huge.charge(usage(v1::TaskState::Completed, u64::MAX, 0))
                .minor,
            i64::MAX,
            "an overflowing cost saturates"
        );
    }
}
