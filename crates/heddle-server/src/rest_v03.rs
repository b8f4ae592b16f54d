//! The v0.3 HTTP+JSON routes, under `/v1/` (v0.3 §3.2.3 and the `a2a.v1`
//! proto's HTTP annotations). Bodies are ProtoJSON of the v0.3 proto (message
//! parts under `content`, `ROLE_USER`, `TASK_STATE_CANCELLED`), as the
//! official Python SDK's v0.3 layer speaks them (WIRE-NOTES §5). Each route
//! converts to v1.0 in `heddle_core::compat::v03_proto` and calls the handler;
//! errors use the same `google.rpc.Status` body as v1.0.

use axum::{
    Router,
    body::Bytes,
    extract::{Path, RawQuery, State},
    http::{HeaderMap, Method as HttpMethod, StatusCode},
    response::Response,
    routing::{any, get, post},
};
use futures::StreamExt;
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion, call::Call, compat::v03_proto, v1, v03_proto as pb,
    validate::from_json,
};

use crate::{
    handler::{CallContext, EventStream, Reply, RequestHandler},
    jsonrpc::{Envelope, Who},
    rest::{
        Params, RestBody, TaskRoute, check_content_type, error, int_param, json,
        list_configs_request, not_found, parse_task_route, query_pairs,
    },
};

/// The v0.3 routes at `prefix/v1/…`.
pub(crate) fn routes(prefix: &str) -> Router<RequestHandler> {
    Router::new()
        .route(&format!("{prefix}/v1/message:send"), post(send))
        .route(&format!("{prefix}/v1/message:stream"), post(stream))
        .route(&format!("{prefix}/v1/tasks/{{*rest}}"), any(task_route))
        .route(&format!("{prefix}/v1/card"), get(card))
}

/// The request's context: the `/v1/` path is v0.3; a header must agree.
fn context(headers: &HeaderMap, query: Option<&str>, caller: Who) -> Result<CallContext, A2aError> {
    let env = Envelope::from_parts(headers, query, caller);
    match env.version? {
        None | Some(ProtocolVersion::V0_3) => Ok(CallContext {
            caller: env.caller,
            version: ProtocolVersion::V0_3,
            extensions: env.extensions,
            legacy_task_id: None,
            peer: env.peer,
        }),
        Some(v) => Err(A2aError::new(
            ErrorCode::VersionNotSupported,
            format!("/v1/ paths serve A2A 0.3; A2A {v} has no /v1 prefix"),
        )),
    }
}

fn sse(stream: EventStream) -> Response {
    let events = stream.filter_map(|update| async move {
        let ev = v03_proto::stream_response_from_v1(&update)?;
        Some(crate::sse::event(&ev))
    });
    crate::sse::response(events)
}

/// Runs a call and encodes the reply in v0.3 ProtoJSON.
async fn run(
    h: RequestHandler,
    cx: Result<CallContext, A2aError>,
    call: Result<Call, A2aError>,
) -> Response {
    let (cx, call) = match (cx, call) {
        (Ok(cx), Ok(call)) => (cx, call),
        (Err(e), _) | (_, Err(e)) => return error(&e),
    };
    let is_send = matches!(call, Call::SendMessage(_));
    match h.handle(cx, call).await {
        Err(e) => error(&e),
        Ok(Reply::Stream(s)) => sse(s),
        Ok(Reply::Task(t)) if is_send => json(
            StatusCode::OK,
            &v03_proto::send_response_from_v1(&v1::SendMessageResponse {
                payload: Some(v1::send_message_response::Payload::Task(t)),
            }),
        ),
        Ok(Reply::Message(m)) => json(
            StatusCode::OK,
            &v03_proto::send_response_from_v1(&v1::SendMessageResponse {
                payload: Some(v1::send_message_response::Payload::Message(m)),
            }),
        ),
        Ok(Reply::Task(t)) => json(StatusCode::OK, &v03_proto::task_from_v1(&t)),
        Ok(Reply::Card(c)) => json(StatusCode::OK, &v03_proto::card_from_v1(&c)),
        Ok(Reply::Tasks(_)) => not_found(),
        Ok(Reply::PushConfig(c)) => json(StatusCode::OK, &v03_proto::push_config_from_v1(&c)),
        Ok(Reply::PushConfigs(l)) => json(
            StatusCode::OK,
            &pb::ListTaskPushNotificationConfigResponse {
                configs: l
                    .configs
                    .iter()
                    .map(v03_proto::push_config_from_v1)
                    .collect(),
                next_page_token: l.next_page_token,
            },
        ),
        Ok(Reply::Empty) => json(StatusCode::OK, &serde_json::json!({})),
    }
}

fn send_call(body: &Bytes) -> Result<v1::SendMessageRequest, A2aError> {
    let req: pb::SendMessageRequest = from_json(body)?;
    Ok(v03_proto::send_request_to_v1(&req))
}

async fn send(
    State(h): State<RequestHandler>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
    RestBody(body): RestBody,
) -> Response {
    send_as(Call::SendMessage, h, q, headers, caller, body).await
}

async fn stream(
    State(h): State<RequestHandler>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
    RestBody(body): RestBody,
) -> Response {
    send_as(Call::SendStreamingMessage, h, q, headers, caller, body).await
}

/// `message:send` and `message:stream` differ only in the call they make.
async fn send_as(
    wrap: fn(v1::SendMessageRequest) -> Call,
    h: RequestHandler,
    q: Option<String>,
    headers: HeaderMap,
    caller: Who,
    body: Bytes,
) -> Response {
    if let Some(r) = check_content_type(&headers, &body) {
        return r;
    }
    let cx = context(&headers, q.as_deref(), caller);
    run(h, cx, send_call(&body).map(wrap)).await
}

async fn card(
    State(h): State<RequestHandler>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
) -> Response {
    let versions = h.versions();
    if !versions.contains(ProtocolVersion::V0_3) {
        return error(&versions.refusal(ProtocolVersion::V0_3));
    }
    let cx = context(&headers, q.as_deref(), caller);
    // The public card; an authenticated caller of an agent with an extended
    // card gets that one.
    let extended = cx.as_ref().is_ok_and(|c| c.caller.authenticated)
        && h.card()
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false);
    if extended {
        return run(
            h,
            cx,
            Ok(Call::GetExtendedAgentCard(
                v1::GetExtendedAgentCardRequest::default(),
            )),
        )
        .await;
    }
    match cx {
        Ok(_) => json(StatusCode::OK, &v03_proto::card_from_v1(h.card())),
        Err(e) => error(&e),
    }
}

async fn task_route(
    State(h): State<RequestHandler>,
    Path(params): Path<Params>,
    method: HttpMethod,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
    RestBody(body): RestBody,
) -> Response {
    if let Some(r) = check_content_type(&headers, &body) {
        return r;
    }
    let rest = params.rest.unwrap_or_default();
    let Some(route) = parse_task_route(&rest) else {
        return not_found();
    };
    let cx = context(&headers, q.as_deref(), caller);
    let call = match (&method, route) {
        (&HttpMethod::GET, TaskRoute::Task(id)) => {
            let mut history = None;
            for (k, v) in query_pairs(q.as_deref()) {
                if k == "historyLength" || k == "history_length" {
                    match int_param("historyLength", &v) {
                        // v0.3: 0 means no limit; a negative one is
                        // refused by the handler, as in v1.0.
                        Ok(n) => history = (n != 0).then_some(n),
                        Err(e) => return error(&e),
                    }
                }
            }
            Ok(Call::GetTask(v1::GetTaskRequest {
                id: id.to_owned(),
                history_length: history,
                ..Default::default()
            }))
        }
        (&HttpMethod::POST, TaskRoute::Verb(id, "cancel")) => {
            Ok(Call::CancelTask(v1::CancelTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            }))
        }
        (&HttpMethod::GET | &HttpMethod::POST, TaskRoute::Verb(id, "subscribe")) => {
            Ok(Call::SubscribeToTask(v1::SubscribeToTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            }))
        }
        // Push configs: three body forms are in circulation (WIRE-NOTES §5);
        // the handler answers per the agent's capability before reading them.
        (&HttpMethod::POST, TaskRoute::Configs(task_id)) => {
            crate::rest_v03_push::create_call(&body, task_id).map(Call::CreatePushConfig)
        }
        (&HttpMethod::GET, TaskRoute::Configs(task_id)) => {
            list_configs_request(String::new(), task_id, q.as_deref()).map(Call::ListPushConfigs)
        }
        (&HttpMethod::GET, TaskRoute::Config(task_id, id)) => Ok(Call::GetPushConfig(
            v1::GetTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: id.to_owned(),
                ..Default::default()
            },
        )),
        (&HttpMethod::DELETE, TaskRoute::Config(task_id, id)) => Ok(Call::DeletePushConfig(
            v1::DeleteTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: id.to_owned(),
                ..Default::default()
            },
        )),
        _ => return not_found(),
    };
    run(h, cx, call).await
}
