//! The ledger's part of the store contract: [`ledger_store`] for the rules
//! one call at a time, [`ledger_concurrency`] for many spends at once, and
//! [`assert_balanced`] for the invariants any test may check afterwards.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{Account, LedgerStore, NewReservation, Reserved, Settlement, StoreError};

#[track_caller]
fn must<T>(result: Result<T, StoreError>, doing: &str) -> T {
    match result {
        Ok(v) => v,
        Err(e) => panic!("ledger contract: {doing} failed: {e}"),
    }
}

fn reservation(id: &str, owner: &str, amount: i64) -> NewReservation {
    NewReservation {
        id: id.to_owned(),
        owner: owner.to_owned(),
        agent: "agent-a".to_owned(),
        task: format!("task-of-{id}"),
        currency: "USD".to_owned(),
        amount,
    }
}

/// Every entry of `account`, oldest first, read page by page.
pub async fn all_entries(store: &dyn LedgerStore, account: &Account) -> Vec<crate::Entry> {
    let mut out = Vec::new();
    let mut before = None;
    loop {
        let page = must(store.entries(account, before, 100).await, "entries");
        let Some(last) = page.last() else { break };
        before = Some(last.seq);
        out.extend(page);
    }
    out.reverse();
    out
}

/// The ledger's invariants over `accounts` (which must be every account the
/// test touched): each transaction sums to zero, each balance is the sum of
/// the account's entries and, for wallets and holds, never below zero, now
/// or after any of its entries (an account's entries are in the order its
/// balance changed, so a spend that overdrew shows even if money came back).
pub async fn assert_balanced(store: &dyn LedgerStore, accounts: &[Account]) {
    let mut txns: HashMap<i64, ()> = HashMap::new();
    for account in accounts {
        let entries = all_entries(store, account).await;
        let mut sums: HashMap<String, i64> = HashMap::new();
        let never_negative = matches!(account, Account::Wallet(_) | Account::Held(_));
        for e in &entries {
            let sum = sums.entry(e.currency.clone()).or_default();
            *sum += e.amount;
            assert!(
                !never_negative || *sum >= 0,
                "ledger contract: {account:?} went below zero ({sum} {} after entry {})",
                e.currency,
                e.seq
            );
            txns.insert(e.txn, ());
        }
        for (currency, sum) in &sums {
            let balance = must(store.balance(account, currency).await, "balance");
            assert_eq!(
                balance, *sum,
                "ledger contract: {account:?}'s balance is the sum of its entries"
            );
            if matches!(account, Account::Wallet(_) | Account::Held(_)) {
                assert!(
                    balance >= 0,
                    "ledger contract: {account:?} never goes below zero ({balance})"
                );
            }
        }
    }
    for txn in txns.keys() {
        let entries = must(store.transaction(*txn).await, "transaction");
        let mut sums: HashMap<&str, i64> = HashMap::new();
        for e in &entries {
            *sums.entry(&e.currency).or_default() += e.amount;
        }
        assert!(
            sums.values().all(|s| *s == 0),
            "ledger contract: transaction {txn} sums to zero in each currency: {entries:?}"
        );
    }
}

/// The ledger's rules, one call at a time, on an empty ledger.
pub async fn ledger_store(store: &dyn LedgerStore) {
    let wallet = Account::Wallet("alice".into());
    let held = Account::Held("alice".into());
    let earned = Account::Earnings("agent-a".into());
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 0);
    must(store.top_up("alice", "USD", 500, "first").await, "top_up");
    must(store.top_up("alice", "EUR", 70, "").await, "top_up");
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 500);
    assert_eq!(
        must(store.balances(&wallet).await, "balances"),
        [("EUR".to_owned(), 70), ("USD".to_owned(), 500)],
        "ledger contract: balances lists each currency once, by code"
    );
    assert!(
        store.top_up("alice", "usd", 1, "").await.is_err(),
        "ledger contract: a currency that is not ISO 4217 is refused"
    );
    assert!(
        store.top_up("alice", "USD", 0, "").await.is_err(),
        "ledger contract: an empty top-up is refused"
    );

    // Reserve, then settle below the hold: the rest comes back.
    assert_eq!(
        must(
            store.reserve(&reservation("r1", "alice", 200)).await,
            "reserve"
        ),
        Reserved::Held
    );
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 300);
    assert_eq!(must(store.balance(&held, "USD").await, "balance"), 200);
    assert!(
        store.reserve(&reservation("r1", "alice", 1)).await.is_err(),
        "ledger contract: a reservation id is used once"
    );
    assert_eq!(
        must(
            store.reserve(&reservation("r2", "alice", 301)).await,
            "reserve"
        ),
        Reserved::Insufficient { available: 300 },
        "ledger contract: a reservation over the balance is refused with the balance"
    );
    assert!(
        must(store.reservation("r2").await, "reservation").is_none(),
        "ledger contract: a refused reservation leaves nothing"
    );
    let open = must(store.open_reservations(10).await, "open_reservations");
    assert_eq!(open.len(), 1);
    assert_eq!(
        (open[0].id.as_str(), open[0].task.as_str(), open[0].amount),
        ("r1", "task-of-r1", 200)
    );

    assert_eq!(
        must(store.extend("r1", 50).await, "extend"),
        Some(Reserved::Held)
    );
    assert_eq!(
        must(store.extend("r1", 10_000).await, "extend"),
        Some(Reserved::Insufficient { available: 250 })
    );
    assert_eq!(must(store.extend("nope", 5).await, "extend"), None);

    let first = Settlement {
        charged: 120,
        released: 130,
    };
    assert_eq!(
        must(store.settle("r1", 120).await, "settle"),
        Some(first),
        "ledger contract: settle charges what it is told and releases the rest"
    );
    assert_eq!(
        must(store.settle("r1", 250).await, "settle again"),
        Some(first),
        "ledger contract: settling twice answers the first settlement and changes nothing"
    );
    assert_eq!(must(store.settle("nope", 1).await, "settle"), None);
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 380);
    assert_eq!(must(store.balance(&held, "USD").await, "balance"), 0);
    assert_eq!(must(store.balance(&earned, "USD").await, "balance"), 120);
    assert_eq!(
        must(store.extend("r1", 5).await, "extend"),
        None,
        "ledger contract: a settled reservation is not extended"
    );
    let r1 = must(store.reservation("r1").await, "reservation");
    assert_eq!(r1.and_then(|r| r.charged), Some(120));
    assert!(must(store.open_reservations(10).await, "open").is_empty());

    // A charge above the hold is clamped; a negative one charges nothing.
    must(
        store.reserve(&reservation("r3", "alice", 30)).await,
        "reserve",
    );
    must(
        store.reserve(&reservation("r4", "alice", 30)).await,
        "reserve",
    );
    assert_eq!(
        must(store.settle("r3", 99).await, "settle"),
        Some(Settlement {
            charged: 30,
            released: 0
        })
    );
    assert_eq!(
        must(store.settle("r4", -5).await, "settle"),
        Some(Settlement {
            charged: 0,
            released: 30
        })
    );
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 350);

    // Subscriptions pay once and keep the later end.
    assert_eq!(
        must(store.subscription("alice", "agent-a").await, "sub"),
        None
    );
    assert_eq!(
        must(
            store.subscribe("alice", "agent-a", "USD", 50, 2_000).await,
            "subscribe"
        ),
        Reserved::Held
    );
    must(
        store.subscribe("alice", "agent-a", "USD", 0, 1_000).await,
        "subscribe",
    );
    assert_eq!(
        must(store.subscription("alice", "agent-a").await, "sub"),
        Some(2_000)
    );
    assert_eq!(
        must(
            store
                .subscribe("alice", "agent-a", "USD", 10_000, 9_000)
                .await,
            "subscribe"
        ),
        Reserved::Insufficient { available: 300 }
    );
    assert_eq!(
        must(store.subscription("alice", "agent-a").await, "sub"),
        Some(2_000)
    );

    // History: newest first, paged by seq.
    let page = must(store.entries(&wallet, None, 2).await, "entries");
    assert_eq!(page.len(), 2);
    assert!(page[0].seq > page[1].seq, "ledger contract: newest first");
    assert_eq!(page[0].kind, "subscribe");
    let next = must(
        store.entries(&wallet, Some(page[1].seq), 100).await,
        "entries",
    );
    assert!(next.iter().all(|e| e.seq < page[1].seq));
    let all = all_entries(store, &wallet).await;
    assert_eq!(all.first().map(|e| e.memo.as_str()), Some("first"));
    assert_eq!(all.first().map(|e| e.kind.as_str()), Some("topup"));

    assert_balanced(
        store,
        &[
            wallet,
            held,
            earned,
            Account::Funding,
            Account::Earnings("nobody".into()),
        ],
    )
    .await;

    reserve_within_a_parent(store).await;

    // A balance past i64 is an error that changes nothing, never a panic
    // or a wrapped balance (XTS, the ISO code for tests, so the USD sums
    // above stay apart).
    let whale = Account::Wallet("whale".into());
    must(store.top_up("whale", "XTS", i64::MAX, "").await, "top_up");
    assert!(
        store.top_up("whale", "XTS", 1, "").await.is_err(),
        "ledger contract: a top-up past the largest balance is refused"
    );
    assert_eq!(
        must(store.balance(&whale, "XTS").await, "balance"),
        i64::MAX
    );
    assert_eq!(
        must(store.balance(&Account::Funding, "XTS").await, "balance"),
        -i64::MAX,
        "ledger contract: a refused top-up leaves the funding account as it was"
    );
}

/// A delegated task's hold carved out of its parent's: the parent keeps
/// what it must, the chain never spends more than the root held, and each
/// settles on its own.
async fn reserve_within_a_parent(store: &dyn LedgerStore) {
    let wallet = Account::Wallet("carol".into());
    let held = Account::Held("carol".into());
    must(store.top_up("carol", "USD", 100, "").await, "top_up");
    let root = reservation("root", "carol", 100);
    assert_eq!(must(store.reserve(&root).await, "reserve"), Reserved::Held);
    let child = |id: &str, amount| NewReservation {
        agent: "agent-b".into(),
        ..reservation(id, "carol", amount)
    };
    assert_eq!(
        must(
            store.reserve_within("root", 30, &child("c1", 50)).await,
            "reserve_within"
        ),
        Some(Reserved::Held)
    );
    let amount = |r: Option<crate::Reservation>| r.map(|r| (r.amount, r.owner, r.agent));
    assert_eq!(
        amount(must(store.reservation("root").await, "reservation")),
        Some((50, "carol".into(), "agent-a".into())),
        "ledger contract: the parent holds what it did not hand down"
    );
    assert_eq!(
        amount(must(store.reservation("c1").await, "reservation")),
        Some((50, "carol".into(), "agent-b".into()))
    );
    assert_eq!(
        must(
            store.reserve_within("root", 30, &child("c2", 30)).await,
            "reserve_within"
        ),
        Some(Reserved::Insufficient { available: 20 }),
        "ledger contract: a parent spares only what is over what it keeps"
    );
    assert!(
        must(store.reservation("c2").await, "reservation").is_none(),
        "ledger contract: a refused child leaves no reservation"
    );
    assert!(
        store
            .reserve_within("root", 0, &child("c1", 1))
            .await
            .is_err(),
        "ledger contract: a child id already used is refused"
    );
    let elsewhere = NewReservation {
        owner: "mallory".into(),
        ..child("c3", 1)
    };
    assert!(
        store.reserve_within("root", 0, &elsewhere).await.is_err(),
        "ledger contract: a child paid by another wallet is refused"
    );
    assert_eq!(
        must(
            store.reserve_within("nobody", 0, &child("c4", 1)).await,
            "reserve_within"
        ),
        None
    );
    // No money moved: the hold is still the root's 100.
    assert_eq!(must(store.balance(&held, "USD").await, "balance"), 100);
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 0);

    let s = must(store.settle("c1", 40).await, "settle");
    assert_eq!(s.map(|s| (s.charged, s.released)), Some((40, 10)));
    let s = must(store.settle("root", 30).await, "settle");
    assert_eq!(s.map(|s| (s.charged, s.released)), Some((30, 20)));
    assert_eq!(must(store.balance(&wallet, "USD").await, "balance"), 30);
    assert_eq!(must(store.balance(&held, "USD").await, "balance"), 0);
    assert_eq!(
        must(
            store
                .balance(&Account::Earnings("agent-b".into()), "USD")
                .await,
            "balance"
        ),
        40
    );
    assert_eq!(
        must(
            store.reserve_within("root", 0, &child("c5", 0)).await,
            "reserve_within"
        ),
        None,
        "ledger contract: a settled parent holds nothing more"
    );
    assert_balanced(store, &[wallet, held]).await;
}

/// Many spends at once against one wallet: `tasks` tasks each reserve and
/// settle `spends / tasks` times concurrently. The wallet never goes below
/// zero, exactly the spends it could pay for are held, and the ledger
/// balances at the end.
pub async fn ledger_concurrency(store: Arc<dyn LedgerStore>, tasks: usize, spends: usize) {
    ledger_concurrency_across(&[store], tasks, spends).await;
}

/// [`ledger_concurrency`] with the spenders shared out over `stores`, each
/// a replica's store over one shared database (task `t` spends through
/// `stores[t % stores.len()]`): the same guarantees must hold across them.
pub async fn ledger_concurrency_across(
    stores: &[Arc<dyn LedgerStore>],
    tasks: usize,
    spends: usize,
) {
    const PRICE: i64 = 3;
    assert!(!stores.is_empty(), "ledger contract: at least one store");
    let store = stores[0].clone();
    // Money for two thirds of the spends: the rest must be refused.
    let affordable = (spends * 2 / 3) as i64;
    must(
        store.top_up("crowd", "USD", affordable * PRICE, "").await,
        "top_up",
    );
    let per_task = spends / tasks;
    let mut handles = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let store = stores[t % stores.len()].clone();
        handles.push(tokio::spawn(async move {
            let mut won = 0i64;
            for s in 0..per_task {
                let id = format!("t{t}-s{s}");
                let r = NewReservation {
                    id: id.clone(),
                    owner: "crowd".into(),
                    agent: format!("agent-{}", t % 3),
                    task: format!("t{t}"),
                    currency: "USD".into(),
                    amount: PRICE,
                };
                match must(store.reserve(&r).await, "reserve") {
                    Reserved::Held => {
                        won += 1;
                        // Every other spend is charged in full, the rest
                        // released: both paths race with the reserves.
                        let charge = if s % 2 == 0 { PRICE } else { 0 };
                        must(store.settle(&id, charge).await, "settle");
                    }
                    Reserved::Insufficient { available } => {
                        // The check and the debit are one step: a refusal
                        // saw less than the price, and never below zero.
                        assert!(
                            (0..PRICE).contains(&available),
                            "ledger contract: a refusal reports the short balance, got {available}"
                        );
                    }
                }
            }
            won
        }));
    }
    let mut won = 0;
    for h in handles {
        won += h.await.expect("a spender panicked");
    }
    let wallet = Account::Wallet("crowd".into());
    let balance = must(store.balance(&wallet, "USD").await, "balance");
    let earned: i64 = {
        let mut sum = 0;
        for a in 0..3 {
            sum += must(
                store
                    .balance(&Account::Earnings(format!("agent-{a}")), "USD")
                    .await,
                "balance",
            );
        }
        sum
    };
    assert!(balance >= 0, "ledger contract: the wallet never overdraws");
    assert_eq!(
        balance + earned,
        affordable * PRICE,
        "ledger contract: what is left plus what was earned is what was put in"
    );
    assert!(
        won >= affordable,
        "ledger contract: released money is spent again ({won} of {spends} spends held)"
    );
    assert!(
        must(store.open_reservations(10).await, "open").is_empty(),
        "ledger contract: every reservation was settled"
    );
    let mut accounts = vec![wallet, Account::Held("crowd".into()), Account::Funding];
    accounts.extend((0..3).map(|a| Account::Earnings(format!("agent-{a}"))));
    assert_balanced(store.as_ref(), &accounts).await;
}
