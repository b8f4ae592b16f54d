//! [`LedgerStore`] for [`PostgresStore`]: the SQLite store's five tables
//! (`migrations/postgres/4_ledger.sql`), written by several replicas at once.
//!
//! SQLite's single writer makes a read-then-write debit safe; here another
//! replica may spend from the same wallet between the two. So:
//!
//! * a debit is one conditional `UPDATE … WHERE balance >= need`, which
//!   PostgreSQL re-checks against the latest committed row after waiting for
//!   its lock: two spends never both take the same money;
//! * every call is one sqlx transaction (balances, entries, reservation), so
//!   a failure or a refusal leaves nothing;
//! * a call changes its balance rows in account-name order, so two calls
//!   never hold one row each while waiting for the other's (no deadlock);
//! * extend and settle lock the reservation row first (`FOR UPDATE`), so two
//!   replicas settling one reservation settle it once: the second waits,
//!   then finds it settled and answers the first settlement.
//!
//! `seq` comes from a sequence, so between replicas it is unique and
//! increasing in the order entries were written, which may differ slightly
//! from the order their transactions committed. Within one account it is
//! the order its balance changed: a call holds the account's balance row
//! from its change until it commits, and writes its entries meanwhile.

use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row as _};

use crate::ledger::{check_amount, check_currency, overflow, same_purse, spare, split};
use crate::postgres::db;
use crate::registry::now_ms;
use crate::{
    Account, Entry, LedgerStore, NewReservation, PostgresStore, Reservation, Reserved, Settlement,
    StoreError,
};

macro_rules! entry_columns {
    () => {
        "seq, txn, account, currency, amount, kind, reservation, memo, created_ms"
    };
}

macro_rules! reservation_columns {
    () => {
        "id, owner, agent, task, currency, amount, charged, created_ms"
    };
}

/// One leg of a transaction: `amount` to `account`.
type Leg<'a> = (&'a Account, i64);

/// What [`post`] did.
enum Posted {
    /// The transaction's id.
    Done(i64),
    /// The guarded account had less than its debit: its balance.
    Short(i64),
}

/// A database failure; a balance past `BIGINT` (SQLSTATE 22003) is the
/// ledger's own overflow error, as in the other stores.
fn sql(e: sqlx::Error) -> StoreError {
    let out_of_range = e
        .as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "22003");
    if out_of_range { overflow() } else { db(e) }
}

/// Takes `need` (≥ 0) from `account` if its balance has it; `Some(balance)`
/// when it does not.
async fn debit(
    tx: &mut PgConnection,
    account: &str,
    currency: &str,
    need: i64,
) -> Result<Option<i64>, StoreError> {
    // The row must exist for the conditional update to have one to check.
    sqlx::query(
        "INSERT INTO ledger_balances (account, currency, balance) VALUES ($1, $2, 0)
         ON CONFLICT (account, currency) DO NOTHING",
    )
    .bind(account)
    .bind(currency)
    .execute(&mut *tx)
    .await
    .map_err(sql)?;
    let taken = sqlx::query(
        "UPDATE ledger_balances SET balance = balance - $3
         WHERE account = $1 AND currency = $2 AND balance >= $3",
    )
    .bind(account)
    .bind(currency)
    .bind(need)
    .execute(&mut *tx)
    .await
    .map_err(sql)?;
    if taken.rows_affected() == 1 {
        return Ok(None);
    }
    // Refused. Money may have come back since (a settlement released it), so
    // look again under the row's lock: then the answer is the balance as it
    // stands, and a refusal always reports less than was asked.
    let available: i64 = sqlx::query_scalar(
        "SELECT balance FROM ledger_balances WHERE account = $1 AND currency = $2 FOR UPDATE",
    )
    .bind(account)
    .bind(currency)
    .fetch_one(&mut *tx)
    .await
    .map_err(sql)?;
    if available < need {
        return Ok(Some(available));
    }
    sqlx::query(
        "UPDATE ledger_balances SET balance = balance - $3 WHERE account = $1 AND currency = $2",
    )
    .bind(account)
    .bind(currency)
    .bind(need)
    .execute(&mut *tx)
    .await
    .map_err(sql)?;
    Ok(None)
}

/// Appends one transaction inside `tx`; its legs must sum to zero. The leg
/// of `guarded`, if any, is a debit refused when its account has less.
async fn post(
    tx: &mut PgConnection,
    kind: &str,
    currency: &str,
    reservation: Option<&str>,
    memo: &str,
    legs: &[Leg<'_>],
    guarded: Option<&Account>,
) -> Result<Posted, StoreError> {
    let mut sum = 0i64;
    for (_, amount) in legs {
        sum = sum.checked_add(*amount).ok_or_else(overflow)?;
    }
    if sum != 0 {
        return Err(StoreError::Database(format!(
            "{kind} transaction does not balance"
        )));
    }
    let keys: Vec<String> = legs.iter().map(|(a, _)| a.key()).collect();
    let mut order: Vec<usize> = (0..legs.len()).collect();
    order.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
    for i in order {
        let (account, amount) = legs[i];
        if guarded == Some(account) {
            let need = amount.checked_neg().ok_or_else(overflow)?;
            if let Some(available) = debit(tx, &keys[i], currency, need).await? {
                return Ok(Posted::Short(available));
            }
            continue;
        }
        sqlx::query(
            "INSERT INTO ledger_balances (account, currency, balance) VALUES ($1, $2, $3)
             ON CONFLICT (account, currency)
             DO UPDATE SET balance = ledger_balances.balance + EXCLUDED.balance",
        )
        .bind(&keys[i])
        .bind(currency)
        .bind(amount)
        .execute(&mut *tx)
        .await
        .map_err(sql)?;
    }
    let created_ms = now_ms();
    let txn: i64 = sqlx::query_scalar(
        "INSERT INTO ledger_transactions (kind, created_ms) VALUES ($1, $2) RETURNING id",
    )
    .bind(kind)
    .bind(created_ms)
    .fetch_one(&mut *tx)
    .await
    .map_err(sql)?;
    // In the legs' order, so `seq` numbers them as the other stores do.
    for ((_, amount), key) in legs.iter().zip(&keys) {
        sqlx::query(
            "INSERT INTO ledger_entries
                (txn, account, currency, amount, kind, reservation, memo, created_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(txn)
        .bind(key)
        .bind(currency)
        .bind(amount)
        .bind(kind)
        .bind(reservation)
        .bind(memo)
        .bind(created_ms)
        .execute(&mut *tx)
        .await
        .map_err(sql)?;
    }
    Ok(Posted::Done(txn))
}

fn entry(row: &PgRow) -> Result<Entry, StoreError> {
    let bad = |e: sqlx::Error| StoreError::Corrupt("ledger entry".into(), e.to_string());
    let key: String = row.try_get(2).map_err(bad)?;
    Ok(Entry {
        seq: row.try_get(0).map_err(bad)?,
        txn: row.try_get(1).map_err(bad)?,
        account: Account::from_key(&key).ok_or_else(|| {
            StoreError::Corrupt("ledger entry".into(), format!("unknown account {key:?}"))
        })?,
        currency: row.try_get(3).map_err(bad)?,
        amount: row.try_get(4).map_err(bad)?,
        kind: row.try_get(5).map_err(bad)?,
        reservation: row.try_get(6).map_err(bad)?,
        memo: row.try_get(7).map_err(bad)?,
        created_ms: row.try_get(8).map_err(bad)?,
    })
}

fn reservation(row: &PgRow) -> Result<Reservation, StoreError> {
    let bad = |e: sqlx::Error| StoreError::Corrupt("ledger reservation".into(), e.to_string());
    Ok(Reservation {
        id: row.try_get(0).map_err(bad)?,
        owner: row.try_get(1).map_err(bad)?,
        agent: row.try_get(2).map_err(bad)?,
        task: row.try_get(3).map_err(bad)?,
        currency: row.try_get(4).map_err(bad)?,
        amount: row.try_get(5).map_err(bad)?,
        charged: row.try_get(6).map_err(bad)?,
        created_ms: row.try_get(7).map_err(bad)?,
    })
}

/// The reservation `id`, its row locked until `tx` ends.
async fn lock_reservation(
    tx: &mut PgConnection,
    id: &str,
) -> Result<Option<Reservation>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        reservation_columns!(),
        " FROM ledger_reservations WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(sql)?;
    row.as_ref().map(reservation).transpose()
}

/// A row count or limit as a `BIGINT`.
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn entries(rows: &[PgRow]) -> Result<Vec<Entry>, StoreError> {
    rows.iter().map(entry).collect()
}

/// Records the open reservation `r` in `tx`; an id already used is an
/// error. A second insert of the same id waits here for the first.
async fn insert_reservation(
    tx: &mut sqlx::PgTransaction<'_>,
    r: &NewReservation,
) -> Result<(), StoreError> {
    let inserted = sqlx::query(concat!(
        "INSERT INTO ledger_reservations (",
        reservation_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, NULL, $7) ON CONFLICT (id) DO NOTHING"
    ))
    .bind(&r.id)
    .bind(&r.owner)
    .bind(&r.agent)
    .bind(&r.task)
    .bind(&r.currency)
    .bind(r.amount)
    .bind(now_ms())
    .execute(&mut **tx)
    .await
    .map_err(sql)?;
    if inserted.rows_affected() == 0 {
        return Err(StoreError::Database(format!(
            "reservation {} already exists",
            r.id
        )));
    }
    Ok(())
}

#[async_trait]
impl LedgerStore for PostgresStore {
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
        let mut tx = self.pool.begin().await.map_err(db)?;
        let legs = [(&Account::Funding, -amount), (&wallet, amount)];
        let txn = match post(&mut tx, "topup", currency, None, memo, &legs, None).await? {
            Posted::Done(txn) => txn,
            // Nothing is guarded, so nothing is refused.
            Posted::Short(_) => {
                return Err(StoreError::Database("top-up refused".into()));
            }
        };
        tx.commit().await.map_err(db)?;
        Ok(txn)
    }

    async fn reserve(&self, r: &NewReservation) -> Result<Reserved, StoreError> {
        check_currency(&r.currency)?;
        check_amount(r.amount, false)?;
        let mut tx = self.pool.begin().await.map_err(db)?;
        // First, so a second reserve of the same id waits here for this one.
        insert_reservation(&mut tx, r).await?;
        let wallet = Account::Wallet(r.owner.clone());
        let held = Account::Held(r.owner.clone());
        let legs = [(&wallet, -r.amount), (&held, r.amount)];
        let posted = post(
            &mut tx,
            "reserve",
            &r.currency,
            Some(&r.id),
            "",
            &legs,
            Some(&wallet),
        )
        .await?;
        if let Posted::Short(available) = posted {
            tx.rollback().await.map_err(db)?;
            return Ok(Reserved::Insufficient { available });
        }
        tx.commit().await.map_err(db)?;
        Ok(Reserved::Held)
    }

    async fn extend(&self, id: &str, more: i64) -> Result<Option<Reserved>, StoreError> {
        check_amount(more, true)?;
        let mut tx = self.pool.begin().await.map_err(db)?;
        let Some(r) = lock_reservation(&mut tx, id)
            .await?
            .filter(|r| r.charged.is_none())
        else {
            return Ok(None);
        };
        let total = r.amount.checked_add(more).ok_or_else(overflow)?;
        let wallet = Account::Wallet(r.owner.clone());
        let held = Account::Held(r.owner.clone());
        let legs = [(&wallet, -more), (&held, more)];
        let posted = post(
            &mut tx,
            "extend",
            &r.currency,
            Some(id),
            "",
            &legs,
            Some(&wallet),
        )
        .await?;
        if let Posted::Short(available) = posted {
            tx.rollback().await.map_err(db)?;
            return Ok(Some(Reserved::Insufficient { available }));
        }
        sqlx::query("UPDATE ledger_reservations SET amount = $2 WHERE id = $1")
            .bind(id)
            .bind(total)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        tx.commit().await.map_err(db)?;
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
        let mut tx = self.pool.begin().await.map_err(db)?;
        // The parent's row lock orders this against its settlement and
        // against other children carved out of it.
        let Some(p) = lock_reservation(&mut tx, parent)
            .await?
            .filter(|p| p.charged.is_none())
        else {
            return Ok(None);
        };
        same_purse(&p, r)?;
        let available = spare(p.amount, keep);
        if available < r.amount {
            return Ok(Some(Reserved::Insufficient { available }));
        }
        insert_reservation(&mut tx, r).await?;
        sqlx::query("UPDATE ledger_reservations SET amount = $2 WHERE id = $1")
            .bind(parent)
            .bind(p.amount - r.amount)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        tx.commit().await.map_err(db)?;
        Ok(Some(Reserved::Held))
    }

    async fn settle(&self, id: &str, charge: i64) -> Result<Option<Settlement>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        let Some(r) = lock_reservation(&mut tx, id).await? else {
            return Ok(None);
        };
        if let Some(charged) = r.charged {
            return Ok(Some(Settlement {
                charged,
                released: r.amount.checked_sub(charged).ok_or_else(overflow)?,
            }));
        }
        let done = split(r.amount, charge);
        let held = Account::Held(r.owner.clone());
        let earnings = Account::Earnings(r.agent.clone());
        let wallet = Account::Wallet(r.owner.clone());
        let legs = [
            (&held, -r.amount),
            (&earnings, done.charged),
            (&wallet, done.released),
        ];
        post(&mut tx, "settle", &r.currency, Some(id), "", &legs, None).await?;
        sqlx::query("UPDATE ledger_reservations SET charged = $2 WHERE id = $1")
            .bind(id)
            .bind(done.charged)
            .execute(&mut *tx)
            .await
            .map_err(sql)?;
        tx.commit().await.map_err(db)?;
        Ok(Some(done))
    }

    async fn reservation(&self, id: &str) -> Result<Option<Reservation>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM ledger_reservations WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(reservation).transpose()
    }

    async fn open_reservations(&self, limit: usize) -> Result<Vec<Reservation>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            reservation_columns!(),
            " FROM ledger_reservations WHERE charged IS NULL
             ORDER BY created_ms, id LIMIT $1"
        ))
        .bind(self::limit(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(reservation).collect()
    }

    async fn balance(&self, account: &Account, currency: &str) -> Result<i64, StoreError> {
        let balance: Option<i64> = sqlx::query_scalar(
            "SELECT balance FROM ledger_balances WHERE account = $1 AND currency = $2",
        )
        .bind(account.key())
        .bind(currency)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        Ok(balance.unwrap_or(0))
    }

    async fn balances(&self, account: &Account) -> Result<Vec<(String, i64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT currency, balance FROM ledger_balances WHERE account = $1 ORDER BY currency",
        )
        .bind(account.key())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|row| {
                let bad =
                    |e: sqlx::Error| StoreError::Corrupt("ledger balance".into(), e.to_string());
                Ok((row.try_get(0).map_err(bad)?, row.try_get(1).map_err(bad)?))
            })
            .collect()
    }

    async fn entries(
        &self,
        account: &Account,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            entry_columns!(),
            " FROM ledger_entries WHERE account = $1 AND seq < $2
             ORDER BY seq DESC LIMIT $3"
        ))
        .bind(account.key())
        .bind(before.unwrap_or(i64::MAX))
        .bind(self::limit(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        entries(&rows)
    }

    async fn transaction(&self, txn: i64) -> Result<Vec<Entry>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            entry_columns!(),
            " FROM ledger_entries WHERE txn = $1 ORDER BY seq"
        ))
        .bind(txn)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        entries(&rows)
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
        let wallet = Account::Wallet(owner.to_owned());
        let earnings = Account::Earnings(agent.to_owned());
        let legs = [(&wallet, -price), (&earnings, price)];
        let mut tx = self.pool.begin().await.map_err(db)?;
        let posted = post(
            &mut tx,
            "subscribe",
            currency,
            None,
            agent,
            &legs,
            Some(&wallet),
        )
        .await?;
        if let Posted::Short(available) = posted {
            tx.rollback().await.map_err(db)?;
            return Ok(Reserved::Insufficient { available });
        }
        sqlx::query(
            "INSERT INTO ledger_subscriptions (owner, agent, until_ms) VALUES ($1, $2, $3)
             ON CONFLICT (owner, agent) DO UPDATE
             SET until_ms = GREATEST(ledger_subscriptions.until_ms, EXCLUDED.until_ms)",
        )
        .bind(owner)
        .bind(agent)
        .bind(until_ms)
        .execute(&mut *tx)
        .await
        .map_err(sql)?;
        tx.commit().await.map_err(db)?;
        Ok(Reserved::Held)
    }

    async fn subscription(&self, owner: &str, agent: &str) -> Result<Option<i64>, StoreError> {
        sqlx::query_scalar(
            "SELECT until_ms FROM ledger_subscriptions WHERE owner = $1 AND agent = $2",
        )
        .bind(owner)
        .bind(agent)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)
    }
}
