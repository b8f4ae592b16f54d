//! The a2ahub request form on the hub's root JSON-RPC endpoint (`POST /`):
//! a caller names an agent by `agent_id`, gives a prompt, a budget and
//! options, and gets back an accepted task with an ETA and an estimated
//! cost, or the form's "budget exceeded" error.
//!
//! ```text
//! tasks/send {agent_id, task_type?, input {prompt, …}, budget?, options? {priority, timeout_ms}}
//!   → {task_id, status: "accepted", eta_ms, estimated_cost {amount, currency}}
//!   ✗ -32001 "Budget exceeded. Task requires 0.05 USD, wallet balance is 0.02 USD."
//!            data {required, available}
//! tasks/get  {task_id} → {task_id, agent_id, status, output?, error?, cost?}
//! ```
//!
//! The task is an ordinary A2A task of the agent, made through its handler
//! like any other (same checks, limits, price and gate), so it is visible
//! on the agent's A2A endpoints too, to the same caller. The form's fields
//! become the A2A message: `input.prompt` its text part, the rest of
//! `input` a data part; `budget`, `options.priority`, `task_type` and the
//! deadline from `options.timeout_ms` go in the request metadata under
//! [`MARKET_EXT`], where an A2A caller puts them too. -32001 is this form's
//! code for a refused budget only: the A2A endpoints say BudgetExceeded
//! (-32042), since -32001 is TaskNotFound there.

use std::{str::FromStr as _, time::Duration};

use axum::{
    Json,
    body::Body,
    extract::State,
    http::{HeaderMap, Uri},
    response::{IntoResponse as _, Response},
};
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    call::Call,
    method::{Dialect, Method},
    v1,
    wkt::Struct,
};
use heddle_server::{CallContext, Caller, Reply};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{MARKET_EXT, money, now_ms};
use crate::Hub;

/// The form's code for a refused budget.
pub const BUDGET_EXCEEDED_CODE: i64 = -32001;

/// Longest `options.timeout_ms` (a day).
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// Largest request body of the form (the hub's agents have their own).
const MAX_BODY: usize = 1 << 20;

/// The registry link namespace that maps a form's task id to its agent.
const LINKS: &str = "_a2ahub";

/// `tasks/send`'s params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendParams {
    /// The agent, by its hub id (matched without case).
    pub agent_id: String,
    /// What kind of task, as the caller names it (kept in the metadata).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_type: Option<String>,
    /// `prompt` and any other fields the agent takes.
    pub input: Map<String, Value>,
    /// The most the caller will pay, `{amount, currency}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Value>,
    /// Priority and timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<SendOptions>,
}

/// `tasks/send`'s options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendOptions {
    /// `low`, `normal` or `high`: the order among tasks queued for the
    /// agent when it is at its concurrency limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The task ends FAILED when it has not finished this long after it
    /// was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

/// `tasks/send`'s answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accepted {
    /// The A2A task's id.
    pub task_id: String,
    /// Always `accepted`.
    pub status: String,
    /// When the task is expected to end, from now.
    pub eta_ms: u64,
    /// `{amount, currency}`.
    pub estimated_cost: Value,
}

/// The form's JSON-RPC envelope.
#[derive(Debug, Deserialize)]
struct Envelope {
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Value,
    method: Option<String>,
    #[serde(default)]
    params: Value,
}

fn rpc_error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Response {
    let mut error = json!({ "code": code, "message": message });
    if let Some(d) = data {
        error["data"] = d;
    }
    Json(json!({ "jsonrpc": "2.0", "id": id, "error": error })).into_response()
}

fn rpc_result(id: &Value, result: Value) -> Response {
    Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
}

/// An A2A error in the form's terms: a refused budget is -32001 with
/// `data {required, available}` as numbers; an unknown task is -32602
/// (A2A's -32001 means the budget here); the rest keep their codes.
pub fn form_error(e: &A2aError) -> (i64, String, Option<Value>) {
    let spec = e.code.spec();
    match e.code {
        ErrorCode::BudgetExceeded => {}
        ErrorCode::TaskNotFound => {
            let invalid = ErrorCode::InvalidParams.spec().jsonrpc;
            return (i64::from(invalid), e.message.clone(), None);
        }
        _ => return (i64::from(spec.jsonrpc), e.message.clone(), None),
    }
    let amount = |k: &str| {
        e.metadata
            .get(k)
            .and_then(|s| Decimal::from_str(s).ok())
            .map_or(Value::Null, money::number)
    };
    let data = json!({ "required": amount("required"), "available": amount("available") });
    (BUDGET_EXCEEDED_CODE, e.message.clone(), Some(data))
}

/// `POST /`: the form's JSON-RPC endpoint.
pub(crate) async fn endpoint(
    State(hub): State<Hub>,
    headers: HeaderMap,
    uri: Uri,
    connected: Option<axum::extract::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    body: Body,
) -> Response {
    // An anonymous caller's limits are kept per address, as on the A2A routes.
    let peer = connected.map(|c| c.0.0.ip());
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return rpc_error(&Value::Null, -32600, "the request is over 1 MiB", None);
    };
    let envelope: Envelope = match serde_json::from_slice(&bytes) {
        Ok(e) => e,
        Err(e) => return rpc_error(&Value::Null, -32700, &format!("not JSON-RPC: {e}"), None),
    };
    let id = envelope.id;
    if envelope.jsonrpc.as_deref() != Some("2.0") || !(id.is_string() || id.is_number()) {
        return rpc_error(
            &id,
            -32600,
            "a JSON-RPC 2.0 request with a string or number id",
            None,
        );
    }
    let caller = match caller(&hub, &headers, &uri).await {
        Ok(c) => c,
        Err(e) => {
            let (code, message, data) = form_error(&e);
            return rpc_error(&id, code, &message, data);
        }
    };
    // The form's names are the legacy `tasks/send` and v0.3 `tasks/get`,
    // read from the one method table.
    let method = envelope.method.as_deref().and_then(Method::from_jsonrpc);
    let answer = match method {
        Some((Method::SendMessage, Dialect::Legacy)) => {
            send(&hub, caller, peer, envelope.params).await
        }
        Some((Method::GetTask, Dialect::V03)) => get(&hub, caller, envelope.params).await,
        _ => Err(A2aError::new(
            ErrorCode::MethodNotFound,
            "this endpoint takes the a2ahub form (tasks/send, tasks/get); A2A calls go to /api/v1/agents/{id}/a2a",
        )),
    };
    match answer {
        Ok(result) => rpc_result(&id, result),
        Err(e) => {
            let (code, message, data) = form_error(&e);
            rpc_error(&id, code, &message, data)
        }
    }
}

/// The caller, as the hub's authenticator verifies it (anonymous on an
/// open hub).
async fn caller(hub: &Hub, headers: &HeaderMap, uri: &Uri) -> Result<Caller, A2aError> {
    let Some(auth) = &hub.shared.auth else {
        return Ok(Caller::anonymous());
    };
    match auth.authenticate(headers, uri).await {
        Ok(Some(p)) => Ok(Caller::authenticated(p.id)),
        Ok(None) => Err(A2aError::new(
            ErrorCode::Unauthenticated,
            "this hub needs credentials",
        )),
        Err(e) => Err(e.to_a2a()),
    }
}

fn invalid(field: &str, problem: impl Into<String>) -> A2aError {
    A2aError::invalid_field(field, problem)
}

fn agent_of(hub: &Hub, agent_id: &str) -> Result<std::sync::Arc<crate::LiveAgent>, A2aError> {
    hub.shared
        .live
        .get(agent_id)
        .or_else(|| hub.shared.live.get(&agent_id.to_ascii_lowercase()))
        .filter(|a| a.entry.enabled)
        .ok_or_else(|| invalid("agent_id", "no such agent on this hub"))
}

/// The A2A request a form's params stand for.
fn to_a2a(p: &SendParams) -> Result<v1::SendMessageRequest, A2aError> {
    let mut rest = p.input.clone();
    let prompt = match rest.remove("prompt") {
        Some(Value::String(s)) => Some(s),
        None => None,
        Some(_) => return Err(invalid("input.prompt", "must be a string")),
    };
    let mut parts = Vec::new();
    if let Some(text) = prompt {
        parts.push(v1::Part::text(text));
    }
    if !rest.is_empty() {
        parts.push(v1::Part::data(Value::Object(rest)));
    }
    if parts.is_empty() {
        return Err(invalid(
            "input",
            "give a prompt, or the fields the agent takes",
        ));
    }
    let mut ext = Map::new();
    if let Some(b) = &p.budget {
        ext.insert("budget".into(), b.clone());
    }
    if let Some(t) = &p.task_type {
        ext.insert("taskType".into(), json!(t));
    }
    let options = p.options.clone().unwrap_or(SendOptions {
        priority: None,
        timeout_ms: None,
    });
    if let Some(pr) = options.priority {
        if !["low", "normal", "high"].contains(&pr.as_str()) {
            return Err(invalid("options.priority", "must be low, normal or high"));
        }
        ext.insert("priority".into(), json!(pr));
    }
    if let Some(ms) = options.timeout_ms {
        if ms == 0 || ms > MAX_TIMEOUT_MS {
            return Err(invalid(
                "options.timeout_ms",
                format!("must be 1 to {MAX_TIMEOUT_MS}"),
            ));
        }
        let deadline = now_ms().saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
        ext.insert("deadlineMs".into(), json!(deadline));
        ext.insert("timeoutMs".into(), json!(ms));
    }
    let metadata = Struct::try_from(json!({ MARKET_EXT: Value::Object(ext) }))
        .map_err(|e| invalid("params", e.to_string()))?;
    Ok(v1::SendMessageRequest {
        message: Some(v1::Message {
            message_id: heddle_server::new_id(),
            role: v1::Role::User as i32,
            parts,
            ..Default::default()
        }),
        configuration: Some(v1::SendMessageConfiguration {
            return_immediately: true,
            ..Default::default()
        }),
        metadata: Some(metadata),
        ..Default::default()
    })
}

async fn send(
    hub: &Hub,
    caller: Caller,
    peer: Option<std::net::IpAddr>,
    params: Value,
) -> Result<Value, A2aError> {
    let p: SendParams =
        serde_json::from_value(params).map_err(|e| invalid("params", e.to_string()))?;
    let agent = agent_of(hub, &p.agent_id)?;
    let req = to_a2a(&p)?;
    let cx = CallContext {
        caller,
        version: ProtocolVersion::V1_0,
        peer,
        ..CallContext::anonymous()
    };
    let task = match agent.handler.handle(cx, Call::SendMessage(req)).await? {
        Reply::Task(t) => t,
        // An agent that answers at once with a message keeps no task.
        _ => {
            return Err(A2aError::new(
                ErrorCode::UnsupportedOperation,
                "the agent answered with a message, not a task; call it on its A2A endpoint",
            ));
        }
    };
    if let Some(links) = hub.shared.store.clone().registry_store()
        && let Err(e) = links.put_link(LINKS, &task.id, &agent.entry.id).await
    {
        tracing::warn!(error = %e, "a2ahub: could not link a task to its agent");
    }
    let (one, cost) = match &agent.market {
        Some(gate) => (
            gate.eta(),
            gate.estimate_for(p.task_type.as_deref()).to_json(),
        ),
        None => (
            Duration::ZERO,
            json!({ "amount": 0, "currency": free_currency(&p) }),
        ),
    };
    // Tasks queued for the agent go in waves of its concurrency: this one
    // ends after the waves ahead of it and its own.
    let waves = agent
        .handler
        .concurrency()
        .map_or(0, |c| c.queued().div_ceil(c.max_running().max(1)));
    let eta = one.saturating_mul(u32::try_from(waves.saturating_add(1)).unwrap_or(u32::MAX));
    let accepted = Accepted {
        task_id: task.id,
        status: "accepted".into(),
        eta_ms: u64::try_from(eta.as_millis()).unwrap_or(u64::MAX),
        estimated_cost: cost,
    };
    serde_json::to_value(accepted).map_err(|e| A2aError::internal(e.to_string()))
}

/// A free agent's cost is 0 in the budget's currency (USD without one).
fn free_currency(p: &SendParams) -> String {
    p.budget
        .as_ref()
        .and_then(|b| b.get("currency"))
        .and_then(Value::as_str)
        .unwrap_or("USD")
        .to_owned()
}

/// `tasks/get` `{task_id}`: the task's state in the form's words.
async fn get(hub: &Hub, caller: Caller, params: Value) -> Result<Value, A2aError> {
    let Some(task_id) = params.get("task_id").and_then(Value::as_str) else {
        return Err(invalid("task_id", "is required"));
    };
    let not_found = || A2aError::task_not_found(task_id);
    let links = hub
        .shared
        .store
        .clone()
        .registry_store()
        .ok_or_else(not_found)?;
    let agent_id = links
        .link(LINKS, task_id)
        .await
        .map_err(|e| A2aError::internal(format!("registry store: {e}")))?
        .ok_or_else(not_found)?;
    let agent = hub.shared.live.get(&agent_id).ok_or_else(not_found)?;
    let cx = CallContext {
        caller: caller.clone(),
        ..CallContext::anonymous()
    };
    let call = Call::GetTask(v1::GetTaskRequest {
        id: task_id.to_owned(),
        ..Default::default()
    });
    let Reply::Task(task) = agent.handler.handle(cx, call).await? else {
        return Err(not_found());
    };
    let state = task
        .status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state());
    let mut out = json!({
        "task_id": task.id,
        "agent_id": agent_id,
        "status": status_word(state),
    });
    let said = task
        .status
        .as_ref()
        .and_then(|s| s.message.as_ref())
        .map(v1::Message::text)
        .filter(|t| !t.is_empty());
    match state {
        v1::TaskState::Completed => {
            out["output"] = output(&task, said.as_deref());
        }
        v1::TaskState::Failed | v1::TaskState::Rejected | v1::TaskState::Canceled => {
            if let Some(reason) = said {
                out["error"] = json!(reason);
            }
        }
        v1::TaskState::InputRequired | v1::TaskState::AuthRequired => {
            if let Some(question) = said {
                out["question"] = json!(question);
            }
        }
        _ => {}
    }
    if let Some(ledger) = hub.shared.store.clone().ledger_store()
        && let Ok(Some(r)) = ledger
            .reservation(&super::gate::reservation_id(&agent_id, task_id))
            .await
        && let Some(charged) = r.charged
    {
        out["cost"] = money::Money {
            minor: charged,
            currency: r.currency,
        }
        .to_json();
    }
    Ok(out)
}

/// The form's word for a state.
fn status_word(state: v1::TaskState) -> &'static str {
    match state {
        v1::TaskState::Submitted | v1::TaskState::Unspecified => "accepted",
        v1::TaskState::Working => "running",
        v1::TaskState::Completed => "completed",
        v1::TaskState::Failed => "failed",
        v1::TaskState::Canceled => "canceled",
        v1::TaskState::Rejected => "rejected",
        v1::TaskState::InputRequired => "input_required",
        v1::TaskState::AuthRequired => "auth_required",
    }
}

/// A finished task's artifacts: their text joined (the final status
/// message's text when they have none), and their data parts.
fn output(task: &v1::Task, said: Option<&str>) -> Value {
    let text: Vec<String> = task
        .artifacts
        .iter()
        .map(v1::Artifact::text)
        .filter(|t| !t.is_empty())
        .collect();
    let data: Vec<Value> = task
        .artifacts
        .iter()
        .flat_map(|a| &a.parts)
        .filter_map(|p| match &p.content {
            Some(v1::part::Content::Data(v)) => Some(v.0.clone()),
            _ => None,
        })
        .collect();
    let text = if text.is_empty() {
        said.unwrap_or_default().to_owned()
    } else {
        text.join("\n")
    };
    let mut out = json!({ "text": text });
    if !data.is_empty() {
        out["data"] = Value::Array(data);
    }
    out
}
