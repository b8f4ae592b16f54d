//! [`LedgerStore`] for [`crate::MemoryStore`]: the ledger in memory, gone
//! with the process like the tasks. Every call holds one lock from its check
//! to its last entry, which is what makes it atomic.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::registry::now_ms;
use crate::{
    Account, Entry, LedgerStore, MemoryStore, NewReservation, Reservation, Reserved, Settlement,
    StoreError,
};

/// Most entries a memory ledger keeps; past it, new transactions are
/// refused ([`StoreError::Full`]) rather than old ones dropped, since a
/// ledger with entries missing no longer adds up.
const MAX_MEMORY_ENTRIES: usize = 1_000_000;

#[derive(Debug, Default)]
pub(crate) struct MemoryLedger {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    entries: Vec<Entry>,
    /// (account key, currency) → balance.
    balances: HashMap<(String, String), i64>,
    reservations: BTreeMap<String, Reservation>,
    /// (owner, agent) → end of subscription.
    subscriptions: HashMap<(String, String), i64>,
    next_txn: i64,
}

impl MemoryLedger {
    fn lock(&self) -> MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One leg of a transaction: `amount` to `account`.
type Leg<'a> = (&'a Account, i64);

impl Book {
    fn balance(&self, account: &Account, currency: &str) -> i64 {
        self.balances
            .get(&(account.key(), currency.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Appends one transaction; its legs must sum to zero.
    fn post(
        &mut self,
        kind: &str,
        currency: &str,
        reservation: Option<&str>,
        memo: &str,
        legs: &[Leg<'_>],
    ) -> Result<i64, StoreError> {
        if self.entries.len().saturating_add(legs.len()) > MAX_MEMORY_ENTRIES {
            return Err(StoreError::Full(format!(
                "the memory ledger holds at most {MAX_MEMORY_ENTRIES} entries"
            )));
        }
        let mut new_balances = Vec::with_capacity(legs.len());
        let mut sum = 0i64;
        for (account, amount) in legs {
            sum = sum.checked_add(*amount).ok_or_else(overflow)?;
            let key = (account.key(), currency.to_owned());
            let now = self.balances.get(&key).copied().unwrap_or(0);
            new_balances.push((key, now.checked_add(*amount).ok_or_else(overflow)?));
        }
        if sum != 0 {
            return Err(StoreError::Database(format!(
                "{kind} transaction does not balance"
            )));
        }
        self.next_txn += 1;
        let txn = self.next_txn;
        let created_ms = now_ms();
        for ((account, amount), (key, balance)) in legs.iter().zip(new_balances) {
            let seq = self.entries.len() as i64 + 1;
            self.entries.push(Entry {
                seq,
                txn,
                account: (*account).clone(),
                currency: currency.to_owned(),
                amount: *amount,
                kind: kind.to_owned(),
                reservation: reservation.map(str::to_owned),
                memo: memo.to_owned(),
                created_ms,
            });
            self.balances.insert(key, balance);
        }
        Ok(txn)
    }
}

pub(crate) fn overflow() -> StoreError {
    StoreError::Database("amount out of range".to_owned())
}

/// Refuses an amount the ledger cannot take: negative, or zero where a
/// movement is required.
pub(crate) fn check_amount(amount: i64, positive: bool) -> Result<(), StoreError> {
    if amount < 0 || (positive && amount == 0) {
        return Err(StoreError::Database(format!(
            "amount {amount} must be {}",
            if positive { "> 0" } else { "≥ 0" }
        )));
    }
    Ok(())
}

/// Refuses a currency that is not three upper-case letters.
pub(crate) fn check_currency(currency: &str) -> Result<(), StoreError> {
    if crate::valid_currency(currency) {
        Ok(())
    } else {
        Err(StoreError::Database(format!(
            "currency {currency:?} is not an ISO 4217 code"
        )))
    }
}

/// Refuses a reservation to be carved out of `parent` that another wallet
/// or currency would pay (see `LedgerStore::reserve_within`).
pub(crate) fn same_purse(parent: &Reservation, r: &NewReservation) -> Result<(), StoreError> {
    if parent.owner != r.owner || parent.currency != r.currency {
        return Err(StoreError::Database(format!(
            "reservation {} cannot be held within {}: another wallet or currency",
            r.id, parent.id
        )));
    }
    Ok(())
}

/// What `parent` (holding `amount`, keeping `keep`) can spare.
pub(crate) fn spare(amount: i64, keep: i64) -> i64 {
    amount.saturating_sub(keep).max(0)
}

/// What settling `held` at `charge` does: the charge clamped to what is held.
pub(crate) fn split(held: i64, charge: i64) -> Settlement {
    let charged = charge.clamp(0, held.max(0));
    Settlement {
        charged,
        released: held - charged,
    }
}

#[async_trait]
impl LedgerStore for MemoryStore {
    async fn top_up(
        &self,
        owner: &str,
        currency: &str,
        amount: i64,
        memo: &str,
    ) -> Result<i64, StoreError> {
        check_currency(currency)?;
        check_amount(amount, true)?;
        let wallet = Account::Wallet(owner.to_owned());
        self.ledger.lock().post(
            "topup",
            currency,
            None,
            memo,
            &[(&Account::Funding, -amount), (&wallet, amount)],
        )
    }

    async fn reserve(&self, r: &NewReservation) -> Result<Reserved, StoreError> {
        check_currency(&r.currency)?;
        check_amount(r.amount, false)?;
        let mut book = self.ledger.lock();
        if book.reservations.contains_key(&r.id) {
            return Err(StoreError::Database(format!(
                "reservation {} already exists",
                r.id
            )));
        }
        let wallet = Account::Wallet(r.owner.clone());
        let available = book.balance(&wallet, &r.currency);
        if available < r.amount {
            return Ok(Reserved::Insufficient { available });
        }
        let held = Account::Held(r.owner.clone());
        book.post(
            "reserve",
            &r.currency,
            Some(&r.id),
            "",
            &[(&wallet, -r.amount), (&held, r.amount)],
        )?;
        book.reservations.insert(
            r.id.clone(),
            Reservation {
                id: r.id.clone(),
                owner: r.owner.clone(),
                agent: r.agent.clone(),
                task: r.task.clone(),
                currency: r.currency.clone(),
                amount: r.amount,
                charged: None,
                created_ms: now_ms(),
            },
        );
        Ok(Reserved::Held)
    }

    async fn extend(&self, id: &str, more: i64) -> Result<Option<Reserved>, StoreError> {
        check_amount(more, true)?;
        let mut book = self.ledger.lock();
        let Some(r) = book.reservations.get(id).filter(|r| r.charged.is_none()) else {
            return Ok(None);
        };
        let (owner, currency) = (r.owner.clone(), r.currency.clone());
        let total = r.amount.checked_add(more).ok_or_else(overflow)?;
        let wallet = Account::Wallet(owner.clone());
        let available = book.balance(&wallet, &currency);
        if available < more {
            return Ok(Some(Reserved::Insufficient { available }));
        }
        book.post(
            "extend",
            &currency,
            Some(id),
            "",
            &[(&wallet, -more), (&Account::Held(owner), more)],
        )?;
        if let Some(r) = book.reservations.get_mut(id) {
            r.amount = total;
        }
        Ok(Some(Reserved::Held))
    }

    async fn reserve_within(
        &self,
        parent: &str,
        keep: i64,
        r: &NewReservation,
    ) -> Result<Option<Reserved>, StoreError> {
        check_currency(&r.currency)?;
        check_amount(r.amount, false)?;
        check_amount(keep, false)?;
        let mut book = self.ledger.lock();
        if book.reservations.contains_key(&r.id) {
            return Err(StoreError::Database(format!(
                "reservation {} already exists",
                r.id
            )));
        }
        let Some(p) = book
            .reservations
            .get_mut(parent)
            .filter(|p| p.charged.is_none())
        else {
            return Ok(None);
        };
        same_purse(p, r)?;
        let available = spare(p.amount, keep);
        if available < r.amount {
            return Ok(Some(Reserved::Insufficient { available }));
        }
        p.amount -= r.amount;
        book.reservations.insert(
            r.id.clone(),
            Reservation {
                id: r.id.clone(),
                owner: r.owner.clone(),
                agent: r.agent.clone(),
                task: r.task.clone(),
                currency: r.currency.clone(),
                amount: r.amount,
                charged: None,
                created_ms: now_ms(),
            },
        );
        Ok(Some(Reserved::Held))
    }

    async fn settle(&self, id: &str, charge: i64) -> Result<Option<Settlement>, StoreError> {
        let mut book = self.ledger.lock();
        let Some(r) = book.reservations.get(id).cloned() else {
            return Ok(None);
        };
        if let Some(charged) = r.charged {
            return Ok(Some(Settlement {
                charged,
                released: r.amount - charged,
            }));
        }
        let done = split(r.amount, charge);
        let held = Account::Held(r.owner.clone());
        let legs = [
            (&held, -r.amount),
            (&Account::Earnings(r.agent.clone()), done.charged),
            (&Account::Wallet(r.owner.clone()), done.released),
        ];
        book.post("settle", &r.currency, Some(id), "", &legs)?;
        if let Some(r) = book.reservations.get_mut(id) {
            r.charged = Some(done.charged);
        }
        Ok(Some(done))
    }

    async fn reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        Ok(self.ledger.lock().reservations.get(id).cloned())
    }

    async fn open_reservations(&self, limit: usize) -> Result<Vec<Reservation>, StoreError> {
        let book = self.ledger.lock();
        let mut open: Vec<Reservation> = book
            .reservations
            .values()
            .filter(|r| r.charged.is_none())
            .cloned()
            .collect();
        open.sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        open.truncate(limit);
        Ok(open)
    }

    async fn balance(&self, account: &Account, currency: &str) -> Result<i64, StoreError> {
        Ok(self.ledger.lock().balance(account, currency))
    }

    async fn balances(&self, account: &Account) -> Result<Vec<(String, i64)>, StoreError> {
        let key = account.key();
        let book = self.ledger.lock();
        let mut all: Vec<(String, i64)> = book
            .balances
            .iter()
            .filter(|((k, _), _)| *k == key)
            .map(|((_, c), b)| (c.clone(), *b))
            .collect();
        all.sort();
        Ok(all)
    }

    async fn entries(
        &self,
        account: &Account,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let book = self.ledger.lock();
        let end = match before {
            // seq n sits at index n - 1, so entries below `before` end there.
            Some(b) => usize::try_from(b.saturating_sub(1).max(0)).unwrap_or(0),
            None => book.entries.len(),
        }
        .min(book.entries.len());
        Ok(book.entries[..end]
            .iter()
            .rev()
            .filter(|e| &e.account == account)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn transaction(&self, txn: i64) -> Result<Vec<Entry>, StoreError> {
        let book = self.ledger.lock();
        Ok(book
            .entries
            .iter()
            .filter(|e| e.txn == txn)
            .cloned()
            .collect())
    }

    async fn subscribe(
        &self,
        owner: &str,
        agent: &str,
        currency: &str,
        price: i64,
        until_ms: i64,
    ) -> Result<Reserved, StoreError> {
        check_currency(currency)?;
        check_amount(price, false)?;
        let mut book = self.ledger.lock();
        let wallet = Account::Wallet(owner.to_owned());
        let available = book.balance(&wallet, currency);
        if available < price {
            return Ok(Reserved::Insufficient { available });
        }
        book.post(
            "subscribe",
            currency,
            None,
            agent,
            &[
                (&wallet, -price),
                (&Account::Earnings(agent.to_owned()), price),
            ],
        )?;
        let end = book
            .subscriptions
            .entry((owner.to_owned(), agent.to_owned()))
            .or_insert(until_ms);
        *end = (*end).max(until_ms);
        Ok(Reserved::Held)
    }

    async fn subscription(&self, owner: &str, agent: &str) -> Result<Option<i64>, StoreError> {
        Ok(self
            .ledger
            .lock()
            .subscriptions
            .get(&(owner.to_owned(), agent.to_owned()))
            .copied())
    }
}
