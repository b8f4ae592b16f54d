//! Wallets over HTTP: admins top up, read and subscribe any caller's
//! wallet and read an agent's earnings; a caller reads its own wallet.
//!
//! ```text
//! GET  /api/v1/wallet                                  the caller's own balances
//! GET  /api/v1/wallet/history[?before=SEQ&limit=N]     the caller's own entries
//! GET  /api/v1/admin/wallets/{owner}                   a caller's balances (admin)
//! GET  /api/v1/admin/wallets/{owner}/history           its entries (admin)
//! POST /api/v1/admin/wallets/{owner}/topup             {amount, currency, memo?} (admin)
//! POST /api/v1/admin/wallets/{owner}/subscriptions     {agent}: pay for 30 days (admin)
//! GET  /api/v1/admin/agents/{id}/earnings              an agent's earnings (admin, or the agent's owner)
//! ```
//!
//! Amounts are `{amount, currency}` with the amount a JSON number written
//! exactly; `owner` is the caller id as the hub's authenticator names it
//! (`key:…`, `jwt:…#…`, or `anonymous` on an open hub), percent-encoded in
//! the path.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode, Uri},
    response::{IntoResponse as _, Response},
    routing::{get, post},
};
use heddle_store::{Account, Entry, LedgerStore, Reserved};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    gate::wallet_of,
    money::{self, Money},
    now_ms,
    price::{PricingModel, SUBSCRIPTION_DAYS},
};
use crate::{
    Hub,
    admin::{admit, problem},
};

/// Most entries one history page holds.
const MAX_PAGE: usize = 200;

/// The wallet routes, with the hub as state.
pub(crate) fn routes() -> Router<Hub> {
    Router::new()
        .route("/api/v1/wallet", get(own))
        .route("/api/v1/wallet/history", get(own_history))
        .route("/api/v1/admin/wallets/{owner}", get(read))
        .route("/api/v1/admin/wallets/{owner}/history", get(history))
        .route("/api/v1/admin/wallets/{owner}/topup", post(top_up))
        .route(
            "/api/v1/admin/wallets/{owner}/subscriptions",
            post(subscribe),
        )
        .route("/api/v1/admin/agents/{id}/earnings", get(earnings))
}

#[allow(clippy::result_large_err)] // the refusal is the answer, made once
fn ledger(hub: &Hub) -> Result<Arc<dyn LedgerStore>, Response> {
    hub.shared.store.clone().ledger_store().ok_or_else(|| {
        problem(
            StatusCode::NOT_IMPLEMENTED,
            "No ledger",
            "this hub's store keeps no ledger",
        )
    })
}

fn failed(e: &heddle_store::StoreError) -> Response {
    tracing::error!(error = %e, "wallets: ledger store");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Ledger store",
        "the ledger could not be read or written; see the hub's log",
    )
}

fn bad(detail: &str) -> Response {
    problem(StatusCode::BAD_REQUEST, "Bad request", detail)
}

/// Balances as `[{amount, currency}]`, by currency.
async fn balances(ledger: &dyn LedgerStore, account: &Account) -> Result<Vec<Value>, Response> {
    let all = ledger.balances(account).await.map_err(|e| failed(&e))?;
    Ok(all
        .into_iter()
        .map(|(currency, minor)| Money { minor, currency }.to_json())
        .collect())
}

async fn wallet(hub: &Hub, owner: &str) -> Response {
    let ledger = match ledger(hub) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let spendable = balances(ledger.as_ref(), &Account::Wallet(owner.to_owned())).await;
    // A hold is shown while it holds something.
    let held = balances(ledger.as_ref(), &Account::Held(owner.to_owned()))
        .await
        .map(|all| {
            all.into_iter()
                .filter(|m| m["amount"] != json!(0))
                .collect::<Vec<_>>()
        });
    match (spendable, held) {
        (Ok(balances), Ok(held)) => {
            Json(json!({ "owner": owner, "balances": balances, "held": held })).into_response()
        }
        (Err(r), _) | (_, Err(r)) => r,
    }
}

fn entry_json(e: &Entry) -> Value {
    let amount = Money {
        minor: e.amount.saturating_abs(),
        currency: e.currency.clone(),
    };
    let mut v = json!({
        "seq": e.seq,
        "txn": e.txn,
        "kind": e.kind,
        "amount": money::number(if e.amount < 0 { -amount.decimal() } else { amount.decimal() }),
        "currency": e.currency,
        "at": e.created_ms,
    });
    if let Some(r) = &e.reservation {
        v["reservation"] = json!(r);
    }
    if !e.memo.is_empty() {
        v["memo"] = json!(e.memo);
    }
    v
}

/// A history page's query.
#[derive(Debug, Deserialize)]
struct Page {
    before: Option<i64>,
    limit: Option<usize>,
}

async fn entries(hub: &Hub, account: Account, page: &Page) -> Response {
    let ledger = match ledger(hub) {
        Ok(l) => l,
        Err(r) => return r,
    };
    let limit = page.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    match ledger.entries(&account, page.before, limit).await {
        Ok(list) => {
            let next = (list.len() == limit)
                .then(|| list.last().map(|e| e.seq))
                .flatten();
            let entries: Vec<Value> = list.iter().map(entry_json).collect();
            Json(json!({ "entries": entries, "nextBefore": next })).into_response()
        }
        Err(e) => failed(&e),
    }
}

/// The caller, when the hub can tell who it is: an anonymous caller of an
/// open hub reads the `anonymous` wallet.
async fn caller(hub: &Hub, headers: &HeaderMap, uri: &Uri) -> Result<String, Response> {
    let Some(auth) = &hub.shared.auth else {
        return Ok(wallet_of("").to_owned());
    };
    match auth.authenticate(headers, uri).await {
        Ok(Some(p)) => Ok(p.id),
        _ => Err(problem(
            StatusCode::UNAUTHORIZED,
            "Unauthorized",
            "reading a wallet needs the caller's credentials",
        )),
    }
}

async fn own(State(hub): State<Hub>, headers: HeaderMap, uri: Uri) -> Response {
    match caller(&hub, &headers, &uri).await {
        Ok(id) => wallet(&hub, &id).await,
        Err(r) => r,
    }
}

async fn own_history(
    State(hub): State<Hub>,
    Query(page): Query<Page>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match caller(&hub, &headers, &uri).await {
        Ok(id) => entries(&hub, Account::Wallet(id), &page).await,
        Err(r) => r,
    }
}

async fn read(
    State(hub): State<Hub>,
    Path(owner): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    wallet(&hub, &owner).await
}

async fn history(
    State(hub): State<Hub>,
    Path(owner): Path<String>,
    Query(page): Query<Page>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(r) = admit(&hub, &headers, &uri).await {
        return r;
    }
    entries(&hub, Account::Wallet(owner), &page).await
}

async fn earnings(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    if let Err(refused) = admit(&hub, &headers, &uri).await {
        // The agent's owner sees its earnings too.
        let owner = hub.entry(&id).and_then(|e| e.owner);
        let caller = caller(&hub, &headers, &uri).await.ok();
        if owner.is_none() || owner != caller {
            return refused;
        }
    }
    let ledger = match ledger(&hub) {
        Ok(l) => l,
        Err(r) => return r,
    };
    match balances(ledger.as_ref(), &Account::Earnings(id.clone())).await {
        Ok(earned) => Json(json!({ "agent": id, "earnings": earned })).into_response(),
        Err(r) => r,
    }
}

/// An admin's call with a JSON body: the ledger and the body, or the
/// refusal.
async fn admin_call(
    hub: &Hub,
    headers: &HeaderMap,
    uri: &Uri,
    req: axum::body::Body,
) -> Result<(Arc<dyn LedgerStore>, Value), Response> {
    admit(hub, headers, uri).await?;
    let ledger = ledger(hub)?;
    Ok((ledger, body(req).await?))
}

/// The JSON body of a wallet call (at most 4 KiB).
async fn body(req: axum::body::Body) -> Result<Value, Response> {
    let bytes = axum::body::to_bytes(req, 4096)
        .await
        .map_err(|_| bad("the body is over 4 KiB"))?;
    serde_json::from_slice(&bytes).map_err(|e| bad(&format!("the body is not JSON: {e}")))
}

async fn top_up(
    State(hub): State<Hub>,
    Path(owner): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    req: axum::body::Body,
) -> Response {
    let (ledger, doc) = match admin_call(&hub, &headers, &uri, req).await {
        Ok(call) => call,
        Err(r) => return r,
    };
    let amount =
        money::parse_amount(&doc).and_then(|(amount, currency)| Money::exact(amount, &currency));
    let amount = match amount {
        Ok(m) if m.minor > 0 => m,
        Ok(_) => return bad("a top-up is more than zero"),
        Err(e) => return bad(&e.to_string()),
    };
    let memo = doc.get("memo").and_then(Value::as_str).unwrap_or_default();
    if memo.len() > 200 {
        return bad("memo is over 200 bytes");
    }
    match ledger
        .top_up(&owner, &amount.currency, amount.minor, memo)
        .await
    {
        Ok(txn) => {
            let now = ledger
                .balance(&Account::Wallet(owner.clone()), &amount.currency)
                .await
                .unwrap_or(0);
            let balance = Money {
                minor: now,
                currency: amount.currency,
            };
            Json(json!({ "owner": owner, "txn": txn, "balance": balance.to_json() }))
                .into_response()
        }
        Err(e) => failed(&e),
    }
}

async fn subscribe(
    State(hub): State<Hub>,
    Path(owner): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    req: axum::body::Body,
) -> Response {
    let (ledger, doc) = match admin_call(&hub, &headers, &uri, req).await {
        Ok(call) => call,
        Err(r) => return r,
    };
    let Some(agent) = doc.get("agent").and_then(Value::as_str) else {
        return bad("name the agent: {\"agent\": ID}");
    };
    let price = match hub.entry(agent).map(|e| e.price()) {
        Some(Ok(Some(p))) if p.model == PricingModel::Subscription => p,
        Some(Ok(_)) => return bad(&format!("agent {agent:?} is not priced by subscription")),
        Some(Err(e)) => return bad(&e.to_string()),
        None => {
            return problem(
                StatusCode::NOT_FOUND,
                "Not found",
                &format!("no agent {agent:?}"),
            );
        }
    };
    let cost = match Money::exact(price.rate, &price.currency) {
        Ok(m) => m,
        Err(e) => return bad(&e.to_string()),
    };
    let now = ledger
        .subscription(&owner, agent)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
        .max(now_ms());
    let until = now.saturating_add(SUBSCRIPTION_DAYS * 86_400_000);
    match ledger
        .subscribe(&owner, agent, &cost.currency, cost.minor, until)
        .await
    {
        Ok(Reserved::Held) => Json(json!({
            "owner": owner,
            "agent": agent,
            "paid": cost.to_json(),
            "until": until,
        }))
        .into_response(),
        Ok(Reserved::Insufficient { available }) => problem(
            StatusCode::PAYMENT_REQUIRED,
            "Budget exceeded",
            &format!(
                "Budget exceeded. Subscription requires {}, wallet balance is {}.",
                cost.display(),
                Money {
                    minor: available,
                    currency: cost.currency.clone()
                }
                .display()
            ),
        ),
        Err(e) => failed(&e),
    }
}
