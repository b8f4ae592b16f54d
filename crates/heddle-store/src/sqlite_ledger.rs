//! [`LedgerStore`] for [`SqliteStore`]: five tables beside `tasks`.
//!
//! * `ledger_transactions` and `ledger_entries`: the append-only ledger, an
//!   entry per leg, numbered by `seq` in commit order.
//! * `ledger_balances`: each account's running balance per currency, so a
//!   debit is checked against one row rather than a sum.
//! * `ledger_reservations`: holds, open until `charged` is set.
//! * `ledger_subscriptions`: when each (owner, agent) subscription ends.
//!
//! Every write runs on the store's one writer connection, inside the
//! writer's transaction and a savepoint of its own: the balance check and
//! the debit see no other write in between (there is no other writer), and
//! a call that fails part-way leaves nothing behind in the batch it shared.

use async_trait::async_trait;
use rusqlite::{OptionalExtension as _, Row, Transaction, params};
use tokio::sync::oneshot;

use crate::ledger::{check_amount, check_currency, overflow, same_purse, spare, split};
use crate::registry::now_ms;
use crate::sqlite::db;
use crate::{
    Account, Entry, LedgerStore, NewReservation, Reservation, Reserved, Settlement, SqliteStore,
    StoreError,
};

/// Schema migration 4 (see `sqlite::MIGRATIONS`).
pub(crate) const MIGRATION: &str = "CREATE TABLE ledger_transactions (
        id         INTEGER PRIMARY KEY,
        kind       TEXT    NOT NULL,
        created_ms INTEGER NOT NULL
    );
    CREATE TABLE ledger_entries (
        seq         INTEGER PRIMARY KEY,
        txn         INTEGER NOT NULL REFERENCES ledger_transactions (id),
        account     TEXT    NOT NULL,
        currency    TEXT    NOT NULL,
        amount      INTEGER NOT NULL,
        kind        TEXT    NOT NULL,
        reservation TEXT,
        memo        TEXT    NOT NULL,
        created_ms  INTEGER NOT NULL
    );
    CREATE INDEX ledger_entries_by_account ON ledger_entries (account, seq);
    CREATE INDEX ledger_entries_by_txn ON ledger_entries (txn);
    CREATE TABLE ledger_balances (
        account  TEXT    NOT NULL,
        currency TEXT    NOT NULL,
        balance  INTEGER NOT NULL,
        PRIMARY KEY (account, currency)
    ) WITHOUT ROWID;
    CREATE TABLE ledger_reservations (
        id         TEXT    NOT NULL PRIMARY KEY,
        owner      TEXT    NOT NULL,
        agent      TEXT    NOT NULL,
        task       TEXT    NOT NULL,
        currency   TEXT    NOT NULL,
        amount     INTEGER NOT NULL,
        charged    INTEGER,
        created_ms INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX ledger_reservations_open ON ledger_reservations (created_ms, id)
        WHERE charged IS NULL;
    CREATE TABLE ledger_subscriptions (
        owner    TEXT    NOT NULL,
        agent    TEXT    NOT NULL,
        until_ms INTEGER NOT NULL,
        PRIMARY KEY (owner, agent)
    ) WITHOUT ROWID;";

const ENTRY_COLUMNS: &str =
    "seq, txn, account, currency, amount, kind, reservation, memo, created_ms";

const RESERVATION_COLUMNS: &str = "id, owner, agent, task, currency, amount, charged, created_ms";

/// One leg of a transaction: `amount` to `account`.
type Leg<'a> = (&'a Account, i64);

impl SqliteStore {
    /// Runs `f` on the writer, inside its transaction and a savepoint, and
    /// answers `f`'s value once the transaction is committed.
    async fn ledger_write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let (send, mut value) = oneshot::channel();
        self.exec(move |tx| {
            let v = savepoint(tx, f)?;
            // The caller reads it only after the commit; gone, it stopped waiting.
            let _ = send.send(v);
            Ok(1)
        })
        .await?;
        value.try_recv().map_err(|_| StoreError::Closed)
    }
}

/// Runs `f` inside a savepoint, rolled back if `f` fails, so its writes
/// are all kept or none (the writer's transaction is shared by a batch).
fn savepoint<T>(
    tx: &Transaction<'_>,
    f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    tx.execute_batch("SAVEPOINT ledger").map_err(db)?;
    let result = f(tx);
    let end = if result.is_ok() {
        "RELEASE ledger"
    } else {
        "ROLLBACK TO ledger; RELEASE ledger"
    };
    tx.execute_batch(end).map_err(db)?;
    result
}

fn balance_of(tx: &Transaction<'_>, account: &str, currency: &str) -> Result<i64, StoreError> {
    tx.prepare_cached("SELECT balance FROM ledger_balances WHERE account = ?1 AND currency = ?2")
        .map_err(db)?
        .query_row(params![account, currency], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(db)
        .map(|b| b.unwrap_or(0))
}

/// Appends one transaction; its legs must sum to zero. The new balances are
/// computed here with checked arithmetic: SQLite's own `+` would turn an
/// overflow into a floating-point number instead of failing.
fn post(
    tx: &Transaction<'_>,
    kind: &str,
    currency: &str,
    reservation: Option<&str>,
    memo: &str,
    legs: &[Leg<'_>],
) -> Result<i64, StoreError> {
    let mut sum = 0i64;
    let mut balances = Vec::with_capacity(legs.len());
    for (account, amount) in legs {
        sum = sum.checked_add(*amount).ok_or_else(overflow)?;
        let key = account.key();
        let now = balance_of(tx, &key, currency)?;
        balances.push((key, now.checked_add(*amount).ok_or_else(overflow)?));
    }
    if sum != 0 {
        return Err(StoreError::Database(format!(
            "{kind} transaction does not balance"
        )));
    }
    let created_ms = now_ms();
    tx.prepare_cached("INSERT INTO ledger_transactions (kind, created_ms) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![kind, created_ms]))
        .map_err(db)?;
    let txn = tx.last_insert_rowid();
    let mut entry = tx
        .prepare_cached(
            "INSERT INTO ledger_entries
                (txn, account, currency, amount, kind, reservation, memo, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(db)?;
    let mut set = tx
        .prepare_cached(
            "INSERT INTO ledger_balances (account, currency, balance) VALUES (?1, ?2, ?3)
             ON CONFLICT (account, currency) DO UPDATE SET balance = excluded.balance",
        )
        .map_err(db)?;
    for ((_, amount), (key, balance)) in legs.iter().zip(balances) {
        entry
            .execute(params![
                txn,
                key,
                currency,
                amount,
                kind,
                reservation,
                memo,
                created_ms
            ])
            .map_err(db)?;
        set.execute(params![key, currency, balance]).map_err(db)?;
    }
    Ok(txn)
}

fn entry(row: &Row<'_>) -> Result<Entry, StoreError> {
    let bad = |e: rusqlite::Error| StoreError::Corrupt("ledger entry".into(), e.to_string());
    let key: String = row.get(2).map_err(bad)?;
    Ok(Entry {
        seq: row.get(0).map_err(bad)?,
        txn: row.get(1).map_err(bad)?,
        account: Account::from_key(&key).ok_or_else(|| {
            StoreError::Corrupt("ledger entry".into(), format!("unknown account {key:?}"))
        })?,
        currency: row.get(3).map_err(bad)?,
        amount: row.get(4).map_err(bad)?,
        kind: row.get(5).map_err(bad)?,
        reservation: row.get(6).map_err(bad)?,
        memo: row.get(7).map_err(bad)?,
        created_ms: row.get(8).map_err(bad)?,
    })
}

fn reservation(row: &Row<'_>) -> Result<Reservation, StoreError> {
    let bad = |e: rusqlite::Error| StoreError::Corrupt("ledger reservation".into(), e.to_string());
    Ok(Reservation {
        id: row.get(0).map_err(bad)?,
        owner: row.get(1).map_err(bad)?,
        agent: row.get(2).map_err(bad)?,
        task: row.get(3).map_err(bad)?,
        currency: row.get(4).map_err(bad)?,
        amount: row.get(5).map_err(bad)?,
        charged: row.get(6).map_err(bad)?,
        created_ms: row.get(7).map_err(bad)?,
    })
}

/// The reservation `id`, read through `conn` (the writer's transaction, or
/// a reader).
fn find_reservation(
    conn: &rusqlite::Connection,
    id: &str,
) -> Result<Option<Reservation>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {RESERVATION_COLUMNS} FROM ledger_reservations WHERE id = ?1"
        ))
        .map_err(db)?;
    let mut rows = stmt.query(params![id]).map_err(db)?;
    rows.next().map_err(db)?.map(reservation).transpose()
}

/// Records the open reservation `r` (its money already moved, or carved).
fn insert_reservation(tx: &rusqlite::Connection, r: &NewReservation) -> Result<(), StoreError> {
    tx.prepare_cached(&format!(
        "INSERT INTO ledger_reservations ({RESERVATION_COLUMNS})
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            r.id,
            r.owner,
            r.agent,
            r.task,
            r.currency,
            r.amount,
            now_ms()
        ])
    })
    .map_err(db)?;
    Ok(())
}

/// What a settled reservation's settlement was.
fn settled(r: &Reservation, charged: i64) -> Result<Settlement, StoreError> {
    Ok(Settlement {
        charged,
        released: r.amount.checked_sub(charged).ok_or_else(overflow)?,
    })
}

/// A row count or limit as SQLite's integer.
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl LedgerStore for SqliteStore {
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
        let (currency, memo) = (currency.to_owned(), memo.to_owned());
        self.ledger_write(move |tx| {
            post(
                tx,
                "topup",
                &currency,
                None,
                &memo,
                &[(&Account::Funding, -amount), (&wallet, amount)],
            )
        })
        .await
    }

    async fn reserve(&self, r: &NewReservation) -> Result<Reserved, StoreError> {
        check_currency(&r.currency)?;
        check_amount(r.amount, false)?;
        let r = r.clone();
        self.ledger_write(move |tx| {
            if find_reservation(tx, &r.id)?.is_some() {
                return Err(StoreError::Database(format!(
                    "reservation {} already exists",
                    r.id
                )));
            }
            let wallet = Account::Wallet(r.owner.clone());
            let available = balance_of(tx, &wallet.key(), &r.currency)?;
            if available < r.amount {
                return Ok(Reserved::Insufficient { available });
            }
            let held = Account::Held(r.owner.clone());
            post(
                tx,
                "reserve",
                &r.currency,
                Some(&r.id),
                "",
                &[(&wallet, -r.amount), (&held, r.amount)],
            )?;
            insert_reservation(tx, &r)?;
            Ok(Reserved::Held)
        })
        .await
    }

    async fn extend(&self, id: &str, more: i64) -> Result<Option<Reserved>, StoreError> {
        check_amount(more, true)?;
        let id = id.to_owned();
        self.ledger_write(move |tx| {
            let Some(r) = find_reservation(tx, &id)?.filter(|r| r.charged.is_none()) else {
                return Ok(None);
            };
            let total = r.amount.checked_add(more).ok_or_else(overflow)?;
            let wallet = Account::Wallet(r.owner.clone());
            let available = balance_of(tx, &wallet.key(), &r.currency)?;
            if available < more {
                return Ok(Some(Reserved::Insufficient { available }));
            }
            post(
                tx,
                "extend",
                &r.currency,
                Some(&id),
                "",
                &[(&wallet, -more), (&Account::Held(r.owner.clone()), more)],
            )?;
            tx.prepare_cached("UPDATE ledger_reservations SET amount = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, total]))
                .map_err(db)?;
            Ok(Some(Reserved::Held))
        })
        .await
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
        let (parent, r) = (parent.to_owned(), r.clone());
        self.ledger_write(move |tx| {
            if find_reservation(tx, &r.id)?.is_some() {
                return Err(StoreError::Database(format!(
                    "reservation {} already exists",
                    r.id
                )));
            }
            let Some(p) = find_reservation(tx, &parent)?.filter(|p| p.charged.is_none()) else {
                return Ok(None);
            };
            same_purse(&p, &r)?;
            let available = spare(p.amount, keep);
            if available < r.amount {
                return Ok(Some(Reserved::Insufficient { available }));
            }
            tx.prepare_cached("UPDATE ledger_reservations SET amount = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![parent, p.amount - r.amount]))
                .map_err(db)?;
            insert_reservation(tx, &r)?;
            Ok(Some(Reserved::Held))
        })
        .await
    }

    async fn settle(&self, id: &str, charge: i64) -> Result<Option<Settlement>, StoreError> {
        let id = id.to_owned();
        self.ledger_write(move |tx| {
            let Some(r) = find_reservation(tx, &id)? else {
                return Ok(None);
            };
            if let Some(charged) = r.charged {
                return settled(&r, charged).map(Some);
            }
            let done = split(r.amount, charge);
            let held = Account::Held(r.owner.clone());
            let legs = [
                (&held, -r.amount),
                (&Account::Earnings(r.agent.clone()), done.charged),
                (&Account::Wallet(r.owner.clone()), done.released),
            ];
            post(tx, "settle", &r.currency, Some(&id), "", &legs)?;
            tx.prepare_cached("UPDATE ledger_reservations SET charged = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![id, done.charged]))
                .map_err(db)?;
            Ok(Some(done))
        })
        .await
    }

    async fn reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| find_reservation(conn, &id)).await
    }

    async fn open_reservations(&self, limit: usize) -> Result<Vec<Reservation>, StoreError> {
        let limit = self::limit(limit);
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {RESERVATION_COLUMNS} FROM ledger_reservations
                     WHERE charged IS NULL ORDER BY created_ms, id LIMIT ?1"
                ))
                .map_err(db)?;
            let mut rows = stmt.query(params![limit]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                out.push(reservation(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn balance(&self, account: &Account, currency: &str) -> Result<i64, StoreError> {
        let (key, currency) = (account.key(), currency.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT balance FROM ledger_balances WHERE account = ?1 AND currency = ?2",
            )
            .map_err(db)?
            .query_row(params![key, currency], |r| r.get::<_, i64>(0))
            .optional()
            .map_err(db)
            .map(|b| b.unwrap_or(0))
        })
        .await
    }

    async fn balances(&self, account: &Account) -> Result<Vec<(String, i64)>, StoreError> {
        let key = account.key();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT currency, balance FROM ledger_balances WHERE account = ?1
                     ORDER BY currency",
                )
                .map_err(db)?;
            let rows = stmt
                .query_map(params![key], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(db)
        })
        .await
    }

    async fn entries(
        &self,
        account: &Account,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let (key, before, limit) = (
            account.key(),
            before.unwrap_or(i64::MAX),
            self::limit(limit),
        );
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM ledger_entries
                     WHERE account = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3"
                ))
                .map_err(db)?;
            let mut rows = stmt.query(params![key, before, limit]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                out.push(entry(row)?);
            }
            Ok(out)
        })
        .await
    }

    async fn transaction(&self, txn: i64) -> Result<Vec<Entry>, StoreError> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE txn = ?1 ORDER BY seq"
                ))
                .map_err(db)?;
            let mut rows = stmt.query(params![txn]).map_err(db)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(db)? {
                out.push(entry(row)?);
            }
            Ok(out)
        })
        .await
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
        let (owner, agent, currency) = (owner.to_owned(), agent.to_owned(), currency.to_owned());
        self.ledger_write(move |tx| {
            let wallet = Account::Wallet(owner.clone());
            let available = balance_of(tx, &wallet.key(), &currency)?;
            if available < price {
                return Ok(Reserved::Insufficient { available });
            }
            post(
                tx,
                "subscribe",
                &currency,
                None,
                &agent,
                &[
                    (&wallet, -price),
                    (&Account::Earnings(agent.clone()), price),
                ],
            )?;
            tx.prepare_cached(
                "INSERT INTO ledger_subscriptions (owner, agent, until_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (owner, agent) DO UPDATE
                 SET until_ms = max(until_ms, excluded.until_ms)",
            )
            .and_then(|mut s| s.execute(params![owner, agent, until_ms]))
            .map_err(db)?;
            Ok(Reserved::Held)
        })
        .await
    }

    async fn subscription(&self, owner: &str, agent: &str) -> Result<Option<i64>, StoreError> {
        let (owner, agent) = (owner.to_owned(), agent.to_owned());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT until_ms FROM ledger_subscriptions WHERE owner = ?1 AND agent = ?2",
            )
            .map_err(db)?
            .query_row(params![owner, agent], |r| r.get(0))
            .optional()
            .map_err(db)
        })
        .await
    }
}
