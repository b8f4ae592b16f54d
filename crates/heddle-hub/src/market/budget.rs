//! The caller's budget for one task, from the request's metadata or the
//! message's, under the marketplace extension's key:
//!
//! ```json
//! {"https://heddle.dev/extensions/market/v1": {"budget": {"amount": 0.05, "currency": "USD"}}}
//! ```

use heddle_core::{A2aError, wkt::Struct};
use rust_decimal::Decimal;
use serde_json::Value;

use super::{MARKET_EXT, money};

/// A budget as the caller wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The exact amount.
    pub amount: Decimal,
    /// Its currency.
    pub currency: String,
}

impl Budget {
    /// The budget in the request's metadata, else the message's; `None`
    /// when neither has one. A budget that is there but malformed is the
    /// caller's error, named by its field.
    pub fn of(
        request: Option<&Struct>,
        message: Option<&Struct>,
    ) -> Result<Option<Budget>, A2aError> {
        for (meta, field) in [(request, "metadata"), (message, "message.metadata")] {
            let Some(ext) = meta.and_then(|m| m.0.get(MARKET_EXT)) else {
                continue;
            };
            let Some(budget) = ext.get("budget") else {
                continue;
            };
            let at = format!("{field}[\"{MARKET_EXT}\"].budget");
            if !budget.is_object() {
                return Err(A2aError::invalid_field(&at, "must be {amount, currency}"));
            }
            let (amount, currency) = money::parse_amount(budget)
                .map_err(|e| A2aError::invalid_field(&at, e.to_string()))?;
            return Ok(Some(Budget { amount, currency }));
        }
        Ok(None)
    }

    /// The budget as ledger money in the agent's `currency`: another
    /// currency, or an amount finer than its minor unit, is refused.
    pub fn money(&self, currency: &str) -> Result<money::Money, A2aError> {
        if self.currency != currency {
            return Err(A2aError::invalid_field(
                "budget.currency",
                format!("this agent is priced in {currency}, not {}", self.currency),
            ));
        }
        money::Money::exact(self.amount, currency)
            .map_err(|e| A2aError::invalid_field("budget.amount", e.to_string()))
    }

    /// The budget as JSON, `{amount, currency}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "amount": money::number(self.amount), "currency": self.currency })
    }
}
