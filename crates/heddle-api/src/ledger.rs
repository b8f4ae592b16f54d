//! The ledger a priced hub keeps: wallets, holds and earnings as accounts of
//! an append-only double-entry ledger ([`LedgerStore`]).
//!
//! Every change of money is one transaction of entries that sum to zero in
//! its currency, and an account's balance is the sum of its entries; a store
//! keeps a running balance beside the entries only so that a debit can be
//! checked and applied in one step. Amounts are integers in the currency's
//! minor units (cents for USD), never floating point.
//!
//! The accounts ([`Account`]):
//! * a caller's wallet, which top-ups credit and reservations debit;
//! * the caller's hold, where a reservation's money waits for its task;
//! * an agent's earnings, which settlements credit;
//! * the funding account, the other side of every top-up (it goes negative
//!   by what was ever put in).
//!
//! A task's money moves in two steps: [`LedgerStore::reserve`] moves the
//! estimate from the wallet to the hold, refused when the wallet has less;
//! [`LedgerStore::settle`] moves what the task cost to the agent's earnings
//! and the rest back to the wallet. A reservation is settled once; settling
//! it again changes nothing and answers what the first settlement did, so a
//! hub that restarts between the two steps settles what it finds open
//! ([`LedgerStore::open_reservations`]) without charging twice.

use async_trait::async_trait;

use crate::StoreError;

/// An account of the ledger.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Account {
    /// A caller's spendable money.
    Wallet(String),
    /// A caller's money reserved for tasks not yet settled.
    Held(String),
    /// What an agent has earned.
    Earnings(String),
    /// Where top-ups come from.
    Funding,
}

impl Account {
    /// The account's stored name: `wallet:ID`, `held:ID`, `earnings:ID` or
    /// `funding`. Names are unambiguous, since the kind comes first.
    pub fn key(&self) -> String {
        match self {
            Account::Wallet(id) => format!("wallet:{id}"),
            Account::Held(id) => format!("held:{id}"),
            Account::Earnings(id) => format!("earnings:{id}"),
            Account::Funding => "funding".to_owned(),
        }
    }

    /// The account a stored name stands for.
    pub fn from_key(key: &str) -> Option<Account> {
        if key == "funding" {
            return Some(Account::Funding);
        }
        let (kind, id) = key.split_once(':')?;
        let id = id.to_owned();
        match kind {
            "wallet" => Some(Account::Wallet(id)),
            "held" => Some(Account::Held(id)),
            "earnings" => Some(Account::Earnings(id)),
            _ => None,
        }
    }
}

/// A currency: three upper-case ASCII letters (ISO 4217).
pub fn valid_currency(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase())
}

/// A reservation to make: `amount` of `currency` moved from `owner`'s wallet
/// to its hold, for the task `task` of `agent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReservation {
    /// Unique id, chosen by the caller (a hub uses the task's scope and id).
    pub id: String,
    /// Whose wallet pays.
    pub owner: String,
    /// Who earns.
    pub agent: String,
    /// What it is for, opaque to the store (the hub's task reference).
    pub task: String,
    /// ISO 4217 code.
    pub currency: String,
    /// Minor units, ≥ 0.
    pub amount: i64,
}

/// A reservation as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// As made.
    pub id: String,
    /// Whose wallet pays.
    pub owner: String,
    /// Who earns.
    pub agent: String,
    /// What it is for.
    pub task: String,
    /// ISO 4217 code.
    pub currency: String,
    /// Minor units held now (grown by [`LedgerStore::extend`]).
    pub amount: i64,
    /// Set once settled: what was charged.
    pub charged: Option<i64>,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// What [`LedgerStore::reserve`] or [`LedgerStore::extend`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// The money is held.
    Held,
    /// The wallet has less than asked; nothing changed.
    Insufficient {
        /// The wallet's balance when it was checked.
        available: i64,
    },
}

/// What a settlement did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settlement {
    /// Minor units moved to the agent's earnings.
    pub charged: i64,
    /// Minor units moved back to the wallet.
    pub released: i64,
}

/// One entry of the ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Position in the ledger: increasing, unique.
    pub seq: i64,
    /// The transaction it belongs to; a transaction's entries sum to zero.
    pub txn: i64,
    /// The account it changes.
    pub account: Account,
    /// ISO 4217 code.
    pub currency: String,
    /// Minor units: positive credits the account, negative debits it.
    pub amount: i64,
    /// What the transaction was: `topup`, `reserve`, `extend`, `settle`,
    /// `subscribe`.
    pub kind: String,
    /// The reservation it moved money for, if any.
    pub reservation: Option<String>,
    /// A note (a top-up's reference).
    pub memo: String,
    /// When, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// Wallets, holds and earnings as a double-entry ledger (module docs).
///
/// Every method is atomic: it applies all of its entries or none, and two
/// calls on the same wallet never both spend the same money, even from
/// several processes sharing one database.
#[async_trait]
pub trait LedgerStore: Send + Sync + 'static {
    /// Credits `owner`'s wallet with `amount` (> 0) from the funding
    /// account; the transaction's id.
    async fn top_up(
        &self,
        owner: &str,
        currency: &str,
        amount: i64,
        memo: &str,
    ) -> Result<i64, StoreError>;

    /// Moves `r.amount` from the wallet to the hold, if the wallet has it.
    /// A reservation id already used is an error
    /// ([`StoreError::Database`]), whatever its state.
    async fn reserve(&self, r: &NewReservation) -> Result<Reserved, StoreError>;

    /// Holds `more` (> 0) more for an open reservation (a caller raising a
    /// metered task's budget), if the wallet has it. `Ok(None)` when the
    /// reservation is unknown or already settled.
    async fn extend(&self, id: &str, more: i64) -> Result<Option<Reserved>, StoreError>;

    /// Holds `r.amount` for a new reservation out of the open reservation
    /// `parent` rather than the wallet: a delegated task paid from the hold
    /// of the task that delegated it, so a chain never spends more than its
    /// root held. The parent's amount shrinks by `r.amount` and must stay at
    /// least `keep` (what the parent's own task may still cost). No money
    /// leaves the owner's hold, so nothing is posted: the ledger shows the
    /// money when either reservation settles. `r.owner` and `r.currency`
    /// must be the parent's (an error otherwise), and a reservation id
    /// already used is an error, as for [`Self::reserve`].
    /// `Insufficient { available }` says what the parent can spare;
    /// `Ok(None)` that the parent is unknown or settled.
    async fn reserve_within(
        &self,
        parent: &str,
        keep: i64,
        r: &NewReservation,
    ) -> Result<Option<Reserved>, StoreError>;

    /// Settles a reservation: `charge` (clamped to `0..=held`) to the
    /// agent's earnings, the rest back to the wallet. Settling a settled
    /// reservation changes nothing and answers the first settlement;
    /// `Ok(None)` when the reservation is unknown.
    async fn settle(&self, id: &str, charge: i64) -> Result<Option<Settlement>, StoreError>;

    /// The reservation `id`, open or settled.
    async fn reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError>;

    /// Reservations not yet settled, oldest first (at most `limit`).
    async fn open_reservations(&self, limit: usize) -> Result<Vec<Reservation>, StoreError>;

    /// An account's balance in `currency` (0 for an account never used).
    async fn balance(&self, account: &Account, currency: &str) -> Result<i64, StoreError>;

    /// Every currency an account has entries in, with its balance.
    async fn balances(&self, account: &Account) -> Result<Vec<(String, i64)>, StoreError>;

    /// An account's entries, newest first: at most `limit`, each with a
    /// `seq` below `before` when given (the previous page's last `seq`).
    async fn entries(
        &self,
        account: &Account,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError>;

    /// The entries of transaction `txn`.
    async fn transaction(&self, txn: i64) -> Result<Vec<Entry>, StoreError>;

    /// Subscribes `owner` to `agent` until `until_ms` (or keeps a later end
    /// it already has), paying `price` (≥ 0) from the wallet to the agent's
    /// earnings, if the wallet has it; nothing changes when it does not.
    async fn subscribe(
        &self,
        owner: &str,
        agent: &str,
        currency: &str,
        price: i64,
        until_ms: i64,
    ) -> Result<Reserved, StoreError>;

    /// When `owner`'s subscription to `agent` ends (milliseconds since the
    /// Unix epoch), if it ever had one.
    async fn subscription(&self, owner: &str, agent: &str) -> Result<Option<i64>, StoreError>;
}
