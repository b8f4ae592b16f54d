//! Priced agents: the card declares the price; a task over the budget or
//! the balance is refused before any work, with the seed's message; an
//! admitted task reserves its estimate and its end settles what it cost
//! (per task, per token, per minute, by subscription); a restarted hub
//! settles what a stopped one left open; and the ledger always balances.

use std::{sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use heddle_hub::{
    AdminAccess, AgentProfile, Hub,
    market::{
        MARKET_EXT,
        price::{PriceSpec, PricingModel, USAGE_KEY},
    },
    registry::AgentEntry,
};
use heddle_server::{AgentError, AgentExecutor, RequestContext, TaskEvents};
use heddle_store::{Account, LedgerStore, MemoryStore, Scope, SqliteStore, TaskStore, contract};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

#[path = "market/a2ahub.rs"]
mod a2ahub;

const ADMIN: &str = "admin-token-for-tests";

/// Does what the message's text says: `done`, `fail`, `tokens N` (reports
/// N tokens, then completes), `work S` (works S seconds of tokio's clock,
/// then completes), `ask` (asks for input; a reply completes), `hang`
/// (until canceled).
struct Worker;

#[async_trait::async_trait]
impl AgentExecutor for Worker {
    async fn execute(&self, ctx: RequestContext, events: TaskEvents) -> Result<(), AgentError> {
        if ctx.task.is_some() {
            return Ok(events.complete(Some("thanks")).await?);
        }
        let text = ctx.text();
        let mut words = text.split_whitespace();
        events.working(None).await?;
        match (
            words.next(),
            words.next().and_then(|n| n.parse::<u64>().ok()),
        ) {
            (Some("fail"), _) => return Err(AgentError("broke down".into())),
            (Some("tokens"), Some(n)) => {
                let mut meta = heddle_core::wkt::Struct::default();
                meta.0.insert(USAGE_KEY.into(), json!({ "totalTokens": n }));
                events.task_metadata(meta).await?;
            }
            (Some("work"), Some(s)) => tokio::time::sleep(Duration::from_secs(s)).await,
            (Some("ask"), _) => return Ok(events.input_required("which one?").await?),
            (Some("hang"), _) => {
                // Until canceled: the run then ends CANCELED on its own.
                tokio::select! {
                    () = ctx.cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_secs(3600)) => {}
                }
            }
            _ => {}
        }
        events.complete(Some("done")).await?;
        Ok(())
    }
}

fn priced(id: &str, model: PricingModel, rate: Value) -> AgentEntry {
    let mut e = AgentEntry::builtin(id, "worker");
    e.pricing = Some(PriceSpec {
        model,
        rate,
        currency: "USD".into(),
        skills: Default::default(),
    });
    e
}

struct Fixture {
    app: Router,
    store: Arc<dyn TaskStore>,
}

async fn hub_on(store: Arc<dyn TaskStore>, entries: Vec<AgentEntry>) -> Fixture {
    let mut b = Hub::builder("http://test.local", store.clone())
        .admin(AdminAccess::default().token(ADMIN))
        .builtin(
            "worker",
            AgentProfile::new("worker", "Worker", "does what it is told", &[]),
            Arc::new(Worker),
        );
    for e in entries {
        b = b.entry(e);
    }
    Fixture {
        app: b.build().await.router(),
        store,
    }
}

async fn hub(entries: Vec<AgentEntry>) -> Fixture {
    hub_on(Arc::new(MemoryStore::default()), entries).await
}

impl Fixture {
    async fn request(&self, req: Request<Body>) -> (StatusCode, Value) {
        let resp = self.app.clone().oneshot(req).await.expect("response");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn top_up(&self, owner: &str, amount: Value) -> (StatusCode, Value) {
        self.request(
            Request::post(format!("/api/v1/admin/wallets/{owner}/topup"))
                .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    json!({"amount": amount, "currency": "USD", "memo": "test"}).to_string(),
                ))
                .expect("request"),
        )
        .await
    }

    /// A JSON-RPC SendMessage to `agent`, with `metadata` on the request.
    async fn send(&self, agent: &str, text: &str, metadata: Value) -> Value {
        self.send_to(agent, text, "", metadata).await
    }

    async fn send_to(&self, agent: &str, text: &str, task: &str, metadata: Value) -> Value {
        let mut message = json!({"messageId": format!("m-{text}-{task}"), "role": "ROLE_USER", "parts": [{"text": text}]});
        if !task.is_empty() {
            message["taskId"] = json!(task);
        }
        let mut params = json!({ "message": message });
        if !metadata.is_null() {
            params["metadata"] = metadata;
        }
        let (status, body) = self
            .request(
                Request::post(format!("/api/v1/agents/{agent}/a2a"))
                    .header(header::CONTENT_TYPE, "application/json")
                    .header("A2A-Version", "1.0")
                    .body(Body::from(
                        json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params})
                            .to_string(),
                    ))
                    .expect("request"),
            )
            .await;
        assert!(
            status.is_success() || status.is_client_error(),
            "{status}: {body}"
        );
        body
    }

    /// `/metrics` as text (public: this hub has no authenticator).
    async fn metrics(&self) -> String {
        let req = Request::get("/metrics")
            .body(Body::empty())
            .expect("request");
        let resp = self.app.clone().oneshot(req).await.expect("response");
        assert_eq!(resp.status(), StatusCode::OK);
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    fn ledger(&self) -> Arc<dyn LedgerStore> {
        self.store
            .clone()
            .ledger_store()
            .expect("a store with a ledger")
    }

    async fn wallet(&self) -> i64 {
        self.ledger()
            .balance(&Account::Wallet("anonymous".into()), "USD")
            .await
            .expect("balance")
    }

    async fn earned(&self, agent: &str) -> i64 {
        self.ledger()
            .balance(&Account::Earnings(agent.into()), "USD")
            .await
            .expect("balance")
    }

    /// Waits until no reservation is open (settlement runs after the
    /// answer), then checks the ledger's invariants.
    async fn settled(&self) {
        for _ in 0..200 {
            if self
                .ledger()
                .open_reservations(1)
                .await
                .expect("open")
                .is_empty()
            {
                let accounts = [
                    Account::Wallet("anonymous".into()),
                    Account::Held("anonymous".into()),
                    Account::Funding,
                    Account::Earnings("clerk".into()),
                    Account::Earnings("meter".into()),
                ];
                contract::assert_balanced(self.ledger().as_ref(), &accounts).await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("a reservation stayed open");
    }
}

fn state(reply: &Value) -> &str {
    reply["result"]["task"]["status"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("no task state in {reply}"))
}

fn budget(amount: Value) -> Value {
    json!({ MARKET_EXT: { "budget": { "amount": amount, "currency": "USD" } } })
}

#[tokio::test]
async fn a_priced_agents_card_declares_its_price_and_estimate() {
    let f = hub(vec![priced("clerk", PricingModel::PerTask, json!(0.03))]).await;
    let (status, card) = f
        .request(
            Request::get("/api/v1/agents/clerk/.well-known/agent-card.json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["uri"] == MARKET_EXT))
        .unwrap_or_else(|| panic!("no market extension in {card}"));
    assert_eq!(
        ext["params"]["pricing"],
        json!({"model": "per_task", "rate": {"amount": 0.03, "currency": "USD"}})
    );
    assert_eq!(
        ext["params"]["estimate"],
        json!({"amount": 0.03, "currency": "USD"})
    );
}

#[tokio::test]
async fn a_task_over_the_balance_is_refused_before_any_work_in_the_seeds_words() {
    let f = hub(vec![priced("clerk", PricingModel::PerTask, json!(0.05))]).await;
    f.top_up("anonymous", json!(0.02)).await;
    let reply = f.send("clerk", "done", Value::Null).await;
    let err = &reply["error"];
    assert_eq!(err["code"], -32042, "{reply}");
    assert_eq!(
        err["message"],
        "Budget exceeded. Task requires 0.05 USD, wallet balance is 0.02 USD."
    );
    let info = err["data"]
        .as_array()
        .and_then(|d| d.iter().find(|x| x["reason"] == "BUDGET_EXCEEDED"))
        .unwrap_or_else(|| panic!("no ErrorInfo in {reply}"));
    assert_eq!(info["metadata"]["required"], "0.05");
    assert_eq!(info["metadata"]["available"], "0.02");
    assert_eq!(info["metadata"]["currency"], "USD");
    let tasks = f
        .store
        .list(&Scope::new("clerk", ""), &Default::default())
        .await
        .expect("list");
    assert!(tasks.tasks.is_empty(), "no task was made");
    assert_eq!(f.wallet().await, 2, "nothing was held");

    // The REST binding answers 402 with the same message.
    let (status, body) = f
        .request(
            Request::post("/api/v1/agents/clerk/rest/message:send")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(
                    json!({"message": {"messageId": "r1", "role": "ROLE_USER", "parts": [{"text": "done"}]}})
                        .to_string(),
                ))
                .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::PAYMENT_REQUIRED, "{body}");
    assert_eq!(
        body["error"]["message"],
        "Budget exceeded. Task requires 0.05 USD, wallet balance is 0.02 USD."
    );
}

#[tokio::test]
async fn a_budget_below_the_estimate_is_refused_and_a_bad_one_is_invalid() {
    let f = hub(vec![priced("clerk", PricingModel::PerTask, json!(0.03))]).await;
    f.top_up("anonymous", json!(1)).await;
    let reply = f.send("clerk", "done", budget(json!(0.01))).await;
    assert_eq!(
        reply["error"]["message"], "Budget exceeded. Task requires 0.03 USD, budget is 0.01 USD.",
        "{reply}"
    );
    let reply = f
        .send(
            "clerk",
            "done",
            json!({ MARKET_EXT: { "budget": { "amount": 1, "currency": "EUR" } } }),
        )
        .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let reply = f
        .send("clerk", "done", json!({ MARKET_EXT: { "budget": "lots" } }))
        .await;
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(f.wallet().await, 100);
}

#[tokio::test]
async fn per_task_pays_for_a_completed_task_and_nothing_for_a_failed_one() {
    let f = hub(vec![priced("clerk", PricingModel::PerTask, json!(0.03))]).await;
    let (status, body) = f.top_up("anonymous", json!(1.00)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["balance"], json!({"amount": 1, "currency": "USD"}));

    let done = f.send("clerk", "done", budget(json!(0.05))).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    // Settlement follows the answer; waited for, so the history's order is known.
    f.settled().await;
    let failed = f.send("clerk", "fail", Value::Null).await;
    assert_eq!(state(&failed), "TASK_STATE_FAILED");
    f.settled().await;
    assert_eq!(f.wallet().await, 97);
    assert_eq!(f.earned("clerk").await, 3);
    // `/metrics` reads the same totals from the ledger, in minor units.
    let metrics = f.metrics().await;
    for line in [
        "heddle_ledger_funded{currency=\"USD\"} 100",
        "heddle_ledger_earned{agent=\"clerk\",currency=\"USD\"} 3",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line}:\n{metrics}");
    }

    // The wallet's history: the top-up, and each task's hold and settlement.
    let (status, history) = f
        .request(
            Request::get("/api/v1/admin/wallets/anonymous/history")
                .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let kinds: Vec<&str> = history["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .rev()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["topup", "reserve", "settle", "reserve", "settle"]);
    // The caller reads its own wallet without admin rights.
    let (_, own) = f
        .request(
            Request::get("/api/v1/wallet")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    assert_eq!(
        own["balances"],
        json!([{"amount": 0.97, "currency": "USD"}])
    );
}

#[tokio::test]
async fn a_multi_turn_task_holds_its_price_until_it_ends() {
    let f = hub(vec![priced("clerk", PricingModel::PerTask, json!(0.03))]).await;
    f.top_up("anonymous", json!(0.10)).await;
    let asked = f.send("clerk", "ask", Value::Null).await;
    assert_eq!(state(&asked), "TASK_STATE_INPUT_REQUIRED");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(f.wallet().await, 7, "held while the task waits");
    let id = asked["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let done = f.send_to("clerk", "that one", &id, Value::Null).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    f.settled().await;
    assert_eq!(f.wallet().await, 7);
    assert_eq!(f.earned("clerk").await, 3);
}

#[tokio::test]
async fn per_token_charges_the_reported_usage_and_never_more_than_the_budget() {
    let f = hub(vec![priced("meter", PricingModel::PerToken, json!(0.0001))]).await;
    f.top_up("anonymous", json!(1)).await;
    // 150 tokens × 0.0001 = 0.015, rounded up to 0.02.
    let done = f.send("meter", "tokens 150", budget(json!(0.50))).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    f.settled().await;
    assert_eq!(f.wallet().await, 98);
    // 10,000 tokens would be 1.00: the budget of 0.05 caps it.
    f.send("meter", "tokens 10000", budget(json!(0.05))).await;
    f.settled().await;
    assert_eq!(f.wallet().await, 93);
    assert_eq!(f.earned("meter").await, 7);
}

#[tokio::test(start_paused = true)]
async fn per_minute_charges_the_working_time_on_a_controlled_clock() {
    let f = hub(vec![priced("meter", PricingModel::PerMinute, json!(0.60))]).await;
    f.top_up("anonymous", json!(5)).await;
    let done = f.send("meter", "work 90", budget(json!(2))).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED");
    f.settled().await;
    // 1.5 minutes × 0.60 = 0.90.
    assert_eq!(f.wallet().await, 410);
    assert_eq!(f.earned("meter").await, 90);
}

#[tokio::test]
async fn a_canceled_metered_task_pays_for_what_it_used() {
    let f = hub(vec![priced("meter", PricingModel::PerMinute, json!(0.60))]).await;
    f.top_up("anonymous", json!(5)).await;
    let reply = f
        .request(
            Request::post("/api/v1/agents/meter/a2a")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                        "message": {"messageId": "h", "role": "ROLE_USER", "parts": [{"text": "hang"}]},
                        "configuration": {"returnImmediately": true},
                        "metadata": budget(json!(1)),
                    }})
                    .to_string(),
                ))
                .expect("request"),
        )
        .await
        .1;
    let id = reply["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_, canceled) = f
        .request(
            Request::post("/api/v1/agents/meter/a2a")
                .header(header::CONTENT_TYPE, "application/json")
                .header("A2A-Version", "1.0")
                .body(Body::from(
                    json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": id}})
                        .to_string(),
                ))
                .expect("request"),
        )
        .await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    f.settled().await;
    // A fraction of a minute, rounded up to one cent: used, and no more.
    assert_eq!(f.earned("meter").await, 1);
    assert_eq!(f.wallet().await, 499);
}

#[tokio::test]
async fn a_subscription_agent_serves_subscribers_free_and_refuses_others() {
    let f = hub(vec![priced("club", PricingModel::Subscription, json!(2))]).await;
    f.top_up("anonymous", json!(3)).await;
    let refused = f.send("club", "done", Value::Null).await;
    assert_eq!(refused["error"]["code"], -32042, "{refused}");
    let (status, sub) = f
        .request(
            Request::post("/api/v1/admin/wallets/anonymous/subscriptions")
                .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(json!({"agent": "club"}).to_string()))
                .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{sub}");
    assert_eq!(sub["paid"], json!({"amount": 2, "currency": "USD"}));
    for _ in 0..3 {
        assert_eq!(
            state(&f.send("club", "done", Value::Null).await),
            "TASK_STATE_COMPLETED"
        );
    }
    assert_eq!(f.wallet().await, 100, "the subscription, once");
    assert_eq!(f.earned("club").await, 200);
}

#[tokio::test]
async fn topping_up_needs_an_admin_and_a_positive_exact_amount() {
    let f = hub(vec![]).await;
    let (status, _) = f
        .request(
            Request::post("/api/v1/admin/wallets/anonymous/topup")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(
                    json!({"amount": 5, "currency": "USD"}).to_string(),
                ))
                .expect("request"),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for bad in [json!(0), json!(-1), json!(0.001), json!("x")] {
        let (status, body) = f.top_up("anonymous", bad.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
}

#[tokio::test]
async fn a_restarted_hub_settles_the_reservations_a_stopped_one_left_open() {
    restart_settles_what_was_left_open(Arc::new(MemoryStore::default())).await;
}

#[tokio::test]
async fn a_restarted_hub_on_sqlite_settles_what_the_file_kept_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hub.db");
    let store = SqliteStore::open_path(&path).expect("open");
    restart_settles_what_was_left_open(Arc::new(store)).await;
}

/// Leaves reservations open as a process killed between reserve and
/// settle would, then starts a hub on the same store.
async fn restart_settles_what_was_left_open(store: Arc<dyn TaskStore>) {
    use heddle_hub::market::gate::{reservation_id, task_ref};
    use heddle_store::NewReservation;

    let entries = || vec![priced("clerk", PricingModel::PerTask, json!(0.03))];
    let f = hub_on(store.clone(), entries()).await;
    f.top_up("anonymous", json!(1)).await;
    let ledger = f.ledger();
    // One task done, one still running, one never saved, one waiting for
    // input.
    let cases = [
        ("t-done", Some(heddle_core::v1::TaskState::Completed)),
        ("t-running", Some(heddle_core::v1::TaskState::Working)),
        ("t-unsaved", None),
        ("t-waiting", Some(heddle_core::v1::TaskState::InputRequired)),
    ];
    for (id, state) in cases {
        let r = NewReservation {
            id: reservation_id("clerk", id),
            owner: "anonymous".into(),
            agent: "clerk".into(),
            task: task_ref("clerk", "", id, None),
            currency: "USD".into(),
            amount: 3,
        };
        ledger.reserve(&r).await.expect("reserve");
        if let Some(state) = state {
            let task = heddle_core::v1::Task {
                id: id.into(),
                context_id: "c".into(),
                status: Some(heddle_core::v1::TaskStatus {
                    state: state as i32,
                    ..Default::default()
                }),
                ..Default::default()
            };
            store
                .save(&Scope::new("clerk", ""), &task)
                .await
                .expect("save");
        }
    }
    assert_eq!(f.wallet().await, 88);
    drop(f);

    let f = hub_on(store.clone(), entries()).await;
    let open = ledger.open_reservations(10).await.expect("open");
    assert_eq!(
        open.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        [reservation_id("clerk", "t-waiting")],
        "only the task waiting for input still holds money"
    );
    // The done task paid; the running one (now FAILED) and the unsaved one
    // paid nothing.
    assert_eq!(f.earned("clerk").await, 3);
    assert_eq!(f.wallet().await, 94);
}

#[tokio::test(start_paused = true)]
async fn a_per_minute_task_stops_when_its_budget_runs_out_and_goes_on_with_a_larger_one() {
    let f = hub(vec![priced("meter", PricingModel::PerMinute, json!(0.60))]).await;
    f.top_up("anonymous", json!(5)).await;
    // 0.60 pays for one minute of a 90-second job (and covers the first
    // estimate, one minute).
    let asked = f.send("meter", "work 90", budget(json!(0.60))).await;
    assert_eq!(state(&asked), "TASK_STATE_INPUT_REQUIRED", "{asked}");
    let question = asked["result"]["task"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        question.starts_with("The budget is used up: 0.6 USD"),
        "{question}"
    );
    assert_eq!(f.wallet().await, 440, "the hold stays while the task waits");
    // A reply with a budget of 1.00 raises the hold; the agent finishes.
    let id = asked["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let done = f.send_to("meter", "go on", &id, budget(json!(1))).await;
    assert_eq!(state(&done), "TASK_STATE_COMPLETED", "{done}");
    f.settled().await;
    assert_eq!(f.earned("meter").await, 60, "one minute at 0.60 a minute");
    assert_eq!(f.wallet().await, 440);

    // Asked for no top-up, the task fails, and pays for the time it used.
    let mut no_top_up = budget(json!(0.60));
    no_top_up[MARKET_EXT]["topUp"] = json!(false);
    let failed = f.send("meter", "work 90", no_top_up).await;
    assert_eq!(state(&failed), "TASK_STATE_FAILED", "{failed}");
    f.settled().await;
    assert_eq!(f.earned("meter").await, 120);
    assert_eq!(f.wallet().await, 380);
}

#[tokio::test]
async fn a_skill_with_a_price_of_its_own_is_charged_by_it() {
    let mut entry = priced("clerk", PricingModel::PerTask, json!(0.03));
    if let Some(p) = entry.pricing.as_mut() {
        p.skills.insert(
            "summarize".into(),
            PriceSpec {
                model: PricingModel::PerTask,
                rate: json!(0.10),
                currency: "USD".into(),
                skills: Default::default(),
            },
        );
    }
    // The agent's own rate is zero: only the skill is paid for.
    if let Some(p) = entry.pricing.as_mut() {
        p.rate = json!(0);
    }
    let f = hub(vec![entry]).await;
    f.top_up("anonymous", json!(1)).await;
    let (_, card) = f
        .request(
            Request::get("/api/v1/agents/clerk/.well-known/agent-card.json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    let ext = card["capabilities"]["extensions"]
        .as_array()
        .and_then(|e| e.iter().find(|x| x["uri"] == MARKET_EXT))
        .expect("market extension");
    assert_eq!(
        ext["params"]["pricing"]["skills"]["summarize"],
        json!({"model": "per_task", "rate": {"amount": 0.1, "currency": "USD"}})
    );

    let skill = json!({ MARKET_EXT: { "skill": "summarize" } });
    assert_eq!(
        state(&f.send("clerk", "done", skill).await),
        "TASK_STATE_COMPLETED"
    );
    f.settled().await;
    assert_eq!(f.earned("clerk").await, 10, "the skill's price");
    // A skill without a price of its own pays the agent's: nothing.
    let other = json!({ MARKET_EXT: { "skill": "translate" } });
    f.send("clerk", "done", other).await;
    f.settled().await;
    assert_eq!(f.earned("clerk").await, 10);
    assert_eq!(f.wallet().await, 90);
}

#[tokio::test]
async fn a_price_that_cannot_hold_is_refused_at_registration() {
    let f = hub(vec![]).await;
    let register = |pricing: Value| {
        let body = json!({"id": "p", "kind": "builtin", "builtin": "worker", "pricing": pricing});
        Request::post("/api/v1/admin/agents")
            .header(header::AUTHORIZATION, format!("Bearer {ADMIN}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .expect("request")
    };
    for bad in [
        json!({"model": "per_task", "rate": 0.001, "currency": "USD"}),
        json!({"model": "per_task", "rate": 1, "currency": "XYZ"}),
        json!({"model": "per_task", "rate": 1, "currency": "USD",
               "skills": {"s": {"model": "per_task", "rate": 1, "currency": "EUR"}}}),
        json!({"model": "per_task", "rate": 1, "currency": "USD",
               "skills": {"s": {"model": "subscription", "rate": 1, "currency": "USD"}}}),
    ] {
        let (status, body) = f.request(register(bad.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["errors"][0]["pointer"], "/pricing", "{body}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_canceled_while_it_waits_for_its_caller_is_settled_at_once() {
    let f = hub(vec![
        priced("clerk", PricingModel::PerTask, json!(0.03)),
        priced("meter", PricingModel::PerMinute, json!(0.60)),
    ])
    .await;
    f.top_up("anonymous", json!(5)).await;
    let cancel = |agent: &'static str, id: String| {
        Request::post(format!("/api/v1/agents/{agent}/a2a"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("A2A-Version", "1.0")
            .body(Body::from(
                json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": id}})
                    .to_string(),
            ))
            .expect("request")
    };
    // A per_task task canceled while it asks: nothing delivered, nothing paid.
    let asked = f.send("clerk", "ask", Value::Null).await;
    let id = asked["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (_, canceled) = f.request(cancel("clerk", id)).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED");
    f.settled().await;
    assert_eq!(f.wallet().await, 500);

    // A per_minute task stopped by its budget, then canceled: it pays for
    // the minute it worked, and its hold does not wait for a restart.
    let stopped = f.send("meter", "work 90", budget(json!(0.60))).await;
    assert_eq!(state(&stopped), "TASK_STATE_INPUT_REQUIRED", "{stopped}");
    let id = stopped["result"]["task"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    f.request(cancel("meter", id)).await;
    f.settled().await;
    assert_eq!(f.earned("meter").await, 60);
    assert_eq!(f.wallet().await, 440);
}

#[tokio::test]
async fn restart_recovery_reads_past_many_tasks_still_waiting() {
    use heddle_hub::market::{
        gate::{reservation_id, task_ref},
        recover::settle_open,
    };
    use heddle_store::NewReservation;

    let store = Arc::new(MemoryStore::default());
    store
        .top_up("anonymous", "USD", 10_000, "")
        .await
        .expect("top up");
    let scope = Scope::new("clerk", "");
    // 600 tasks waiting for their callers, made first; then one done.
    for i in 0..601 {
        let id = format!("t{i:04}");
        let state = if i == 600 {
            heddle_core::v1::TaskState::Completed
        } else {
            heddle_core::v1::TaskState::InputRequired
        };
        let r = NewReservation {
            id: reservation_id("clerk", &id),
            owner: "anonymous".into(),
            agent: "clerk".into(),
            task: task_ref("clerk", "", &id, None),
            currency: "USD".into(),
            amount: 3,
        };
        store.reserve(&r).await.expect("reserve");
        let task = heddle_core::v1::Task {
            id: id.clone(),
            context_id: "c".into(),
            status: Some(heddle_core::v1::TaskStatus {
                state: state as i32,
                ..Default::default()
            }),
            ..Default::default()
        };
        store.save(&scope, &task).await.expect("save");
    }
    let prices = [(
        "clerk".to_owned(),
        PriceSpec {
            model: PricingModel::PerTask,
            rate: json!(0.03),
            currency: "USD".into(),
            skills: Default::default(),
        }
        .check()
        .expect("price"),
    )]
    .into();
    let done = settle_open(store.as_ref(), store.as_ref(), &prices)
        .await
        .expect("recovery");
    assert_eq!((done.settled, done.kept), (1, 600));
}
