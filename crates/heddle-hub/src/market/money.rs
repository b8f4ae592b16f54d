//! Money at the edges: exact decimals (`rust_decimal`) for prices and the
//! amounts callers write, integer minor units for the ledger.
//!
//! A JSON number such as `0.05` is read through its shortest decimal
//! text, so it means 0.05 exactly, never the binary float nearest to it,
//! and it is written back the same way, which is what lets the a2ahub
//! form's amounts round-trip. ISO 4217 says how many minor units a
//! currency has (`iso_currency`): USD 2, JPY 0, BHD 3.

use std::str::FromStr as _;

use iso_currency::Currency;
use rust_decimal::{Decimal, RoundingStrategy, prelude::ToPrimitive as _};
use serde_json::{Number, Value, json};

/// What is wrong with an amount, for the caller.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MoneyError {
    /// Not an ISO 4217 code with minor units.
    #[error("{0:?} is not an ISO 4217 currency code")]
    Currency(String),
    /// Not a decimal number, or out of range.
    #[error("{0} is not an amount this hub can hold")]
    Amount(String),
    /// Below zero.
    #[error("{0} is below zero")]
    Negative(String),
    /// A price's shape is wrong (its skills' prices).
    #[error("{0}")]
    Pricing(String),
    /// Finer than the currency's minor unit.
    #[error("{amount} has more decimals than {currency} has minor units ({exponent})")]
    TooFine {
        /// As written.
        amount: String,
        /// The currency.
        currency: String,
        /// Its minor-unit digits.
        exponent: u32,
    },
}

/// The number of minor-unit digits of `currency` (2 for USD).
pub fn exponent(currency: &str) -> Result<u32, MoneyError> {
    Currency::from_code(currency)
        .and_then(|c| c.exponent())
        .map(u32::from)
        .ok_or_else(|| MoneyError::Currency(currency.to_owned()))
}

/// A JSON number (or a string holding one) as an exact decimal ≥ 0.
pub fn decimal(value: &Value) -> Result<Decimal, MoneyError> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) if s.len() <= 40 => s.clone(),
        other => return Err(MoneyError::Amount(short(other))),
    };
    let d = Decimal::from_str(&text)
        .or_else(|_| Decimal::from_scientific(&text))
        .map_err(|_| MoneyError::Amount(text.clone()))?;
    if d.is_sign_negative() && !d.is_zero() {
        return Err(MoneyError::Negative(text));
    }
    Ok(d.normalize())
}

fn short(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 40 {
        s.truncate(s.floor_char_boundary(40));
        s.push('…');
    }
    s
}

/// An exact amount of a currency, as the ledger counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Money {
    /// Minor units (cents for USD), ≥ 0.
    pub minor: i64,
    /// ISO 4217 code.
    pub currency: String,
}

impl Money {
    /// `amount` of `currency`, which must be a whole number of minor units.
    pub fn exact(amount: Decimal, currency: &str) -> Result<Money, MoneyError> {
        let exp = exponent(currency)?;
        let minor = amount
            .checked_mul(Decimal::from(10i64.pow(exp)))
            .ok_or_else(|| MoneyError::Amount(amount.to_string()))?;
        if !minor.fract().is_zero() {
            return Err(MoneyError::TooFine {
                amount: amount.to_string(),
                currency: currency.to_owned(),
                exponent: exp,
            });
        }
        Self::from_minor_decimal(minor, currency, amount)
    }

    /// `amount` of `currency` rounded up to a whole minor unit: what a cost
    /// computed from a finer rate (per token, per minute) comes to, so that
    /// a hold always covers it.
    pub fn round_up(amount: Decimal, currency: &str) -> Result<Money, MoneyError> {
        let exp = exponent(currency)?;
        let minor = amount
            .checked_mul(Decimal::from(10i64.pow(exp)))
            .ok_or_else(|| MoneyError::Amount(amount.to_string()))?
            .round_dp_with_strategy(0, RoundingStrategy::AwayFromZero);
        Self::from_minor_decimal(minor, currency, amount)
    }

    fn from_minor_decimal(
        minor: Decimal,
        currency: &str,
        amount: Decimal,
    ) -> Result<Money, MoneyError> {
        if minor.is_sign_negative() && !minor.is_zero() {
            return Err(MoneyError::Negative(amount.to_string()));
        }
        let minor = minor
            .to_i64()
            .ok_or_else(|| MoneyError::Amount(amount.to_string()))?;
        Ok(Money {
            minor,
            currency: currency.to_owned(),
        })
    }

    /// The amount as an exact decimal of the currency's major unit.
    pub fn decimal(&self) -> Decimal {
        let exp = exponent(&self.currency).unwrap_or(2);
        Decimal::new(self.minor, exp).normalize()
    }

    /// `{"amount": 0.05, "currency": "USD"}`: the a2ahub form's and AP2's
    /// shape, the amount a JSON number written from its decimal text.
    pub fn to_json(&self) -> Value {
        json!({ "amount": number(self.decimal()), "currency": self.currency })
    }

    /// The seed's wording: `0.05 USD`.
    pub fn display(&self) -> String {
        format!("{} {}", self.decimal(), self.currency)
    }
}

/// A decimal as a JSON number, written from its exact text (`0.05`, not
/// `0.050000000000000003`).
pub fn number(d: Decimal) -> Value {
    let text = d.normalize().to_string();
    serde_json::from_str::<Number>(&text)
        .map(Value::Number)
        .unwrap_or(Value::String(text))
}

/// `{"amount": …, "currency": …}` as written by a caller.
pub fn parse_amount(value: &Value) -> Result<(Decimal, String), MoneyError> {
    let currency = value
        .get("currency")
        .and_then(Value::as_str)
        .ok_or_else(|| MoneyError::Currency(String::new()))?;
    exponent(currency)?;
    let amount = value
        .get("amount")
        .ok_or_else(|| MoneyError::Amount("(none)".to_owned()))?;
    Ok((decimal(amount)?, currency.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[test]
    fn a_json_amount_means_its_decimal_text_and_round_trips() {
        let d = decimal(&json!(0.05)).unwrap();
        assert_eq!(d.to_string(), "0.05");
        let m = Money::exact(d, "USD").unwrap();
        assert_eq!(m.minor, 5);
        assert_eq!(m.to_json(), json!({"amount": 0.05, "currency": "USD"}));
        assert_eq!(
            serde_json::to_string(&m.to_json()).unwrap(),
            r#"{"amount":0.05,"currency":"USD"}"#
        );
        assert_eq!(m.display(), "0.05 USD");
        assert_eq!(decimal(&json!(1e-5)).unwrap().to_string(), "0.00001");
        assert_eq!(decimal(&json!("0.10")).unwrap().to_string(), "0.1");
    }

    #[test]
    fn minor_units_follow_iso_4217() {
        assert_eq!(Money::exact(Decimal::from(7), "JPY").unwrap().minor, 7);
        assert_eq!(
            Money::exact(Decimal::from_str("1.234").unwrap(), "BHD")
                .unwrap()
                .minor,
            1234
        );
        assert!(matches!(
            Money::exact(Decimal::from_str("0.001").unwrap(), "USD"),
            Err(MoneyError::TooFine { .. })
        ));
        assert_eq!(
            Money::round_up(Decimal::from_str("0.001").unwrap(), "USD")
                .unwrap()
                .minor,
            1
        );
        assert!(matches!(exponent("XYZ"), Err(MoneyError::Currency(_))));
        assert!(matches!(exponent("usd"), Err(MoneyError::Currency(_))));
    }

    #[test]
    fn bad_amounts_are_refused_not_wrapped() {
        assert!(matches!(decimal(&json!(-1)), Err(MoneyError::Negative(_))));
        assert!(decimal(&json!("abc")).is_err());
        assert!(decimal(&json!(1e300)).is_err());
        assert!(Money::exact(Decimal::MAX, "USD").is_err());
        assert!(parse_amount(&json!({"amount": 1})).is_err());
        assert!(parse_amount(&json!({"amount": 1, "currency": "ZZZ"})).is_err());
    }
}
