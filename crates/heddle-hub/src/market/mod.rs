//! The marketplace: prices, budgets, wallets, priorities.
//!
//! An agent with a price ([`price::PriceSpec`], from its registration or
//! its a2ahub manifest's `pricing`) is served behind a [`gate::MarketGate`]:
//! each new task reserves its estimate in the caller's wallet before the
//! agent runs, or is refused with BudgetExceeded; its end settles what it
//! cost to the agent's earnings and gives the rest back. The money lives in
//! the store's ledger ([`heddle_store::LedgerStore`]), beside the tasks, so
//! a restarted hub settles what a stopped one left open ([`recover`]).
//!
//! What a caller asks of the hub beyond the A2A request itself (a budget,
//! a priority, a deadline) travels in the request's or the message's
//! metadata under one extension key, [`MARKET_EXT`]; the agents' prices
//! and limits come from their registrations and manifests.

pub mod a2ahub;
pub mod budget;
pub mod deadline;
pub mod gate;
pub(crate) mod hold;
pub mod meter;
pub mod money;
pub mod options;
pub mod price;
pub mod recover;
pub(crate) mod wallets;

/// The marketplace extension: the card's price, and the key of a caller's
/// budget and priority in request or message metadata.
pub const MARKET_EXT: &str = "https://heddle.dev/extensions/market/v1";

/// Now, in milliseconds since the Unix epoch, as the ledger counts time.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
