//! The HTTP+JSON (REST) binding, v1.0 (v1 §11 and the proto's HTTP
//! annotations): resource URLs, ProtoJSON bodies, `google.rpc.Status` errors,
//! SSE streams of bare `StreamResponse`s. Each route only decodes into a
//! [`Call`] and encodes the [`Reply`]; the rules live in the handler.
//!
//! Paths are relative to the interface URL and may carry a `/{tenant}`
//! prefix. `{id}:cancel` puts a parameter and a verb in one segment, so task
//! routes are matched as `/tasks/{*rest}`, percent-decoded (clients may send
//! `%3A`), and split on the last `:`.

use axum::{
    Router,
    body::Bytes,
    extract::{FromRequest, Path, RawQuery, Request, State},
    http::{HeaderMap, HeaderValue, Method as HttpMethod, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{any, get, post},
};
use futures::StreamExt;
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    call::Call,
    v1::{self, send_message_response::Payload as SendPayload},
    validate::from_json,
    wkt::{Struct, Timestamp},
};
use serde::Serialize;

use crate::{
    handler::{CallContext, EventStream, Reply, RequestHandler},
    jsonrpc::{Envelope, Who},
};

/// The REST routes, each registered at `prefix` and at `prefix/{tenant}`.
pub(crate) fn routes(prefix: &str) -> Router<RequestHandler> {
    let mut r = Router::new();
    for base in [prefix.to_owned(), format!("{prefix}/{{tenant}}")] {
        r = r
            .route(&format!("{base}/message:send"), post(send))
            .route(&format!("{base}/message:stream"), post(stream))
            .route(&format!("{base}/tasks"), get(list))
            .route(&format!("{base}/tasks/{{*rest}}"), any(task_route))
            .route(&format!("{base}/extendedAgentCard"), get(extended_card));
    }
    // v0.3 under `/v1/`; static segments win over `{tenant}` in matching.
    r.merge(crate::rest_v03::routes(prefix))
}

/// Path parameters: the optional tenant, and for task routes the rest.
#[derive(serde::Deserialize, Default)]
pub(crate) struct Params {
    pub(crate) tenant: Option<String>,
    pub(crate) rest: Option<String>,
}

/// The request facts every route needs.
struct Incoming {
    handler: RequestHandler,
    cx: Result<CallContext, A2aError>,
    tenant: String,
}

fn incoming(
    handler: RequestHandler,
    headers: &HeaderMap,
    query: Option<&str>,
    caller: Who,
    tenant: Option<String>,
) -> Incoming {
    let env = Envelope::from_parts(headers, query, caller);
    // The path names the version (no `/v1` prefix: 1.0); a header-less
    // request is served as 1.0, as on JSON-RPC, but a header must agree.
    let cx = match env.version {
        Err(e) => Err(e),
        Ok(Some(ProtocolVersion::V0_3)) => Err(A2aError::new(
            ErrorCode::VersionNotSupported,
            "this path serves A2A 1.0; send A2A-Version: 1.0",
        )),
        Ok(_) => Ok(CallContext {
            caller: env.caller,
            version: ProtocolVersion::V1_0,
            extensions: env.extensions,
            legacy_task_id: None,
            peer: env.peer,
        }),
    };
    Incoming {
        handler,
        cx,
        tenant: tenant.unwrap_or_default(),
    }
}

/// Requests with a body must be JSON (`application/json` or `application/a2a+json`).
/// `Some(rejection)` when the body is not JSON.
pub(crate) fn check_content_type(headers: &HeaderMap, body: &Bytes) -> Option<Response> {
    if body.is_empty() {
        return None;
    }
    let mime = crate::jsonrpc::non_json_media_type(headers)?;
    let err = A2aError::new(
        ErrorCode::ContentTypeNotSupported,
        format!("request bodies must be application/json or application/a2a+json, not {mime}"),
    );
    Some(error_as(&err, StatusCode::UNSUPPORTED_MEDIA_TYPE))
}

pub(crate) fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match crate::json::to_vec(body) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => error(&A2aError::internal(format!("serialization: {e}"))),
    }
}

/// An A2A error as `{"error": google.rpc.Status}` with its HTTP status (v1 §11.6).
pub(crate) fn error(err: &A2aError) -> Response {
    let status =
        StatusCode::from_u16(err.code.spec().http).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error_as(err, status)
}

/// [`error`] answered with `status` rather than the catalogue's; the body's
/// `error.code` says the same status (v1 §11.6).
pub(crate) fn error_as(err: &A2aError, status: StatusCode) -> Response {
    let err = &*crate::redact::for_caller(err);
    let body = err.http_body_with_status(status.as_u16());
    let mut resp = match crate::json::to_vec(&body) {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(_) => status.into_response(),
    };
    add_retry_after(err, &mut resp);
    resp
}

/// A REST request body. One that cannot be read (larger than the limit, cut
/// off, too slow) is refused in the binding's error form, its `error.code`
/// the HTTP status (413, 400), not axum's plain-text answer.
pub(crate) struct RestBody(pub(crate) Bytes);

impl<S: Send + Sync> FromRequest<S> for RestBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Bytes::from_request(req, state).await {
            Ok(b) => Ok(RestBody(b)),
            Err(r) => Err(error_as(
                &A2aError::new(ErrorCode::InvalidRequest, r.body_text()),
                r.status(),
            )),
        }
    }
}

/// `Retry-After` on the answer to a retryable error (RFC 9110 §10.2.3).
fn add_retry_after(err: &A2aError, resp: &mut Response) {
    if let Some(secs) = err.retry_after_secs() {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
}

pub(crate) fn sse(stream: EventStream) -> Response {
    crate::sse::response(stream.map(|update| crate::sse::event(&*update)))
}

/// Runs a decoded call and encodes its reply the REST way.
async fn run(inc: Incoming, call: Result<Call, A2aError>) -> Response {
    let cx = match inc.cx {
        Ok(cx) => cx,
        Err(e) => return error(&e),
    };
    let call = match call {
        Ok(c) => c,
        Err(e) => return error(&e),
    };
    let method = call.method();
    match inc.handler.handle(cx, call).await {
        Err(e) => error(&e),
        Ok(Reply::Stream(s)) => sse(s),
        Ok(Reply::Task(t)) if method == heddle_core::method::Method::SendMessage => json(
            StatusCode::OK,
            &v1::SendMessageResponse {
                payload: Some(SendPayload::Task(t)),
            },
        ),
        Ok(Reply::Task(t)) => json(StatusCode::OK, &t),
        Ok(Reply::Message(m)) => json(
            StatusCode::OK,
            &v1::SendMessageResponse {
                payload: Some(SendPayload::Message(m)),
            },
        ),
        Ok(Reply::Tasks(t)) => json(StatusCode::OK, &t),
        Ok(Reply::Card(c)) => json(StatusCode::OK, &c),
        Ok(Reply::PushConfig(c)) => json(StatusCode::OK, &c),
        Ok(Reply::PushConfigs(l)) => json(StatusCode::OK, &l),
        Ok(Reply::Empty) => json(StatusCode::OK, &serde_json::json!({})),
    }
}

fn send_request(body: &Bytes, tenant: &str) -> Result<v1::SendMessageRequest, A2aError> {
    let mut req: v1::SendMessageRequest = from_json(body)?;
    if req.tenant.is_empty() {
        req.tenant = tenant.to_owned();
    }
    Ok(req)
}

async fn send(
    State(h): State<RequestHandler>,
    params: Option<Path<Params>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
    RestBody(body): RestBody,
) -> Response {
    send_as(Call::SendMessage, h, params, q, headers, caller, body).await
}

async fn stream(
    State(h): State<RequestHandler>,
    params: Option<Path<Params>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
    RestBody(body): RestBody,
) -> Response {
    send_as(
        Call::SendStreamingMessage,
        h,
        params,
        q,
        headers,
        caller,
        body,
    )
    .await
}

/// `message:send` and `message:stream` differ only in the call they make.
async fn send_as(
    wrap: fn(v1::SendMessageRequest) -> Call,
    h: RequestHandler,
    params: Option<Path<Params>>,
    q: Option<String>,
    headers: HeaderMap,
    caller: Who,
    body: Bytes,
) -> Response {
    if let Some(r) = check_content_type(&headers, &body) {
        return r;
    }
    let inc = incoming(
        h,
        &headers,
        q.as_deref(),
        caller,
        params.and_then(|p| p.0.tenant),
    );
    let call = send_request(&body, &inc.tenant).map(wrap);
    run(inc, call).await
}

/// Query parameters as (name, value) pairs, percent-decoded.
pub(crate) fn query_pairs(q: Option<&str>) -> Vec<(String, String)> {
    q.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

pub(crate) fn int_param(name: &str, value: &str) -> Result<i32, A2aError> {
    value
        .parse()
        .map_err(|_| A2aError::invalid_field(name, format!("{value:?} is not an integer")))
}

fn bool_param(name: &str, value: &str) -> Result<bool, A2aError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(A2aError::invalid_field(
            name,
            format!("{other:?} is not true or false"),
        )),
    }
}

fn list_request(q: Option<&str>, tenant: &str) -> Result<v1::ListTasksRequest, A2aError> {
    let mut r = v1::ListTasksRequest {
        tenant: tenant.to_owned(),
        ..Default::default()
    };
    for (k, v) in query_pairs(q) {
        match k.as_str() {
            "contextId" | "context_id" => r.context_id = v,
            "status" => {
                let state = v1::TaskState::from_str_name(&v)
                    .or_else(|| {
                        v.parse::<i32>()
                            .ok()
                            .and_then(|n| v1::TaskState::try_from(n).ok())
                    })
                    .ok_or_else(|| {
                        A2aError::invalid_field("status", format!("{v:?} is not a task state"))
                    })?;
                r.status = state as i32;
            }
            "pageSize" | "page_size" => r.page_size = Some(int_param("pageSize", &v)?),
            "pageToken" | "page_token" => r.page_token = v,
            "historyLength" | "history_length" => {
                r.history_length = Some(int_param("historyLength", &v)?)
            }
            "statusTimestampAfter" | "status_timestamp_after" => {
                r.status_timestamp_after = Some(v.parse::<Timestamp>().map_err(|_| {
                    A2aError::invalid_field(
                        "statusTimestampAfter",
                        format!("{v:?} is not an RFC 3339 timestamp"),
                    )
                })?);
            }
            "includeArtifacts" | "include_artifacts" => {
                r.include_artifacts = Some(bool_param("includeArtifacts", &v)?)
            }
            _ => {}
        }
    }
    Ok(r)
}

async fn list(
    State(h): State<RequestHandler>,
    params: Option<Path<Params>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
) -> Response {
    let inc = incoming(
        h,
        &headers,
        q.as_deref(),
        caller,
        params.and_then(|p| p.0.tenant),
    );
    let call = list_request(q.as_deref(), &inc.tenant).map(Call::ListTasks);
    run(inc, call).await
}

async fn extended_card(
    State(h): State<RequestHandler>,
    params: Option<Path<Params>>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    caller: Who,
) -> Response {
    let inc = incoming(
        h,
        &headers,
        q.as_deref(),
        caller,
        params.and_then(|p| p.0.tenant),
    );
    let call = Ok(Call::GetExtendedAgentCard(
        v1::GetExtendedAgentCardRequest {
            tenant: inc.tenant.clone(),
        },
    ));
    run(inc, call).await
}

/// A task route after `/tasks/`: `{id}`, `{id}:cancel`, `{id}:subscribe`,
/// `{id}/pushNotificationConfigs[/{configId}]`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TaskRoute<'a> {
    Task(&'a str),
    Verb(&'a str, &'a str),
    Configs(&'a str),
    Config(&'a str, &'a str),
}

pub(crate) fn parse_task_route(rest: &str) -> Option<TaskRoute<'_>> {
    let rest = rest.trim_start_matches('/');
    let mut segs = rest.split('/');
    let first = segs.next().filter(|s| !s.is_empty())?;
    match (segs.next(), segs.next(), segs.next()) {
        (None, _, _) => Some(match first.rsplit_once(':') {
            Some((id, verb)) if !id.is_empty() => TaskRoute::Verb(id, verb),
            _ => TaskRoute::Task(first),
        }),
        (Some("pushNotificationConfigs"), None, _) => Some(TaskRoute::Configs(first)),
        (Some("pushNotificationConfigs"), Some(cid), None) if !cid.is_empty() => {
            Some(TaskRoute::Config(first, cid))
        }
        _ => None,
    }
}

/// A push config List from its query (`pageSize`, `pageToken`, either
/// spelling), shared by both versions' routes.
pub(crate) fn list_configs_request(
    tenant: String,
    task_id: &str,
    query: Option<&str>,
) -> Result<v1::ListTaskPushNotificationConfigsRequest, A2aError> {
    let mut r = v1::ListTaskPushNotificationConfigsRequest {
        tenant,
        task_id: task_id.to_owned(),
        ..Default::default()
    };
    for (k, v) in query_pairs(query) {
        match k.as_str() {
            "pageSize" | "page_size" => r.page_size = int_param("pageSize", &v)?,
            "pageToken" | "page_token" => r.page_token = v,
            _ => {}
        }
    }
    Ok(r)
}

pub(crate) fn not_found() -> Response {
    error(&A2aError::new(ErrorCode::MethodNotFound, "no such route"))
}

pub(crate) fn metadata_body(body: &Bytes) -> Result<Option<Struct>, A2aError> {
    if body.is_empty() {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        metadata: Option<Struct>,
    }
    Ok(from_json::<Meta>(body)?.metadata)
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
    let inc = incoming(h, &headers, q.as_deref(), caller, params.tenant);
    let tenant = inc.tenant.clone();
    let call = match (&method, route) {
        (&HttpMethod::GET, TaskRoute::Task(id)) => {
            let mut history = None;
            for (k, v) in query_pairs(q.as_deref()) {
                if k == "historyLength" || k == "history_length" {
                    history = match int_param("historyLength", &v) {
                        Ok(n) => Some(n),
                        Err(e) => return error(&e),
                    };
                }
            }
            Ok(Call::GetTask(v1::GetTaskRequest {
                tenant,
                id: id.to_owned(),
                history_length: history,
            }))
        }
        (&HttpMethod::POST, TaskRoute::Verb(id, "cancel")) => {
            metadata_body(&body).map(|metadata| {
                Call::CancelTask(v1::CancelTaskRequest {
                    tenant,
                    id: id.to_owned(),
                    metadata,
                })
            })
        }
        // The proto says GET, the spec text POST: both are served.
        (&HttpMethod::GET | &HttpMethod::POST, TaskRoute::Verb(id, "subscribe")) => {
            Ok(Call::SubscribeToTask(v1::SubscribeToTaskRequest {
                tenant,
                id: id.to_owned(),
            }))
        }
        (&HttpMethod::POST, TaskRoute::Configs(task_id)) => {
            from_json::<v1::TaskPushNotificationConfig>(&body).map(|mut c| {
                c.task_id = task_id.to_owned();
                if c.tenant.is_empty() {
                    c.tenant = tenant;
                }
                Call::CreatePushConfig(c)
            })
        }
        (&HttpMethod::GET, TaskRoute::Configs(task_id)) => {
            list_configs_request(tenant, task_id, q.as_deref()).map(Call::ListPushConfigs)
        }
        (&HttpMethod::GET, TaskRoute::Config(task_id, id)) => Ok(Call::GetPushConfig(
            v1::GetTaskPushNotificationConfigRequest {
                tenant,
                task_id: task_id.to_owned(),
                id: id.to_owned(),
            },
        )),
        (&HttpMethod::DELETE, TaskRoute::Config(task_id, id)) => {
            let call = Call::DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest {
                tenant,
                task_id: task_id.to_owned(),
                id: id.to_owned(),
            });
            return run_delete(inc, call).await;
        }
        _ => return not_found(),
    };
    run(inc, call).await
}

/// DELETE answers `{}` (google.protobuf.Empty) on success.
async fn run_delete(inc: Incoming, call: Call) -> Response {
    let cx = match inc.cx {
        Ok(cx) => cx,
        Err(e) => return error(&e),
    };
    match inc.handler.handle(cx, call).await {
        Ok(_) => json(StatusCode::OK, &serde_json::json!({})),
        Err(e) => error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_routes_split_on_the_last_colon() {
        assert_eq!(parse_task_route("abc"), Some(TaskRoute::Task("abc")));
        assert_eq!(
            parse_task_route("abc:cancel"),
            Some(TaskRoute::Verb("abc", "cancel"))
        );
        assert_eq!(
            parse_task_route("a:b:subscribe"),
            Some(TaskRoute::Verb("a:b", "subscribe"))
        );
        assert_eq!(
            parse_task_route("t/pushNotificationConfigs"),
            Some(TaskRoute::Configs("t"))
        );
        assert_eq!(
            parse_task_route("t/pushNotificationConfigs/c1"),
            Some(TaskRoute::Config("t", "c1"))
        );
        assert_eq!(parse_task_route("t/other"), None);
        assert_eq!(parse_task_route(""), None);
    }

    #[test]
    fn list_query_is_validated_by_name() {
        let r = list_request(
            Some("contextId=c%201&status=TASK_STATE_WORKING&pageSize=5&includeArtifacts=true"),
            "",
        )
        .expect("valid");
        assert_eq!(
            (
                r.context_id.as_str(),
                r.status(),
                r.page_size,
                r.include_artifacts
            ),
            ("c 1", v1::TaskState::Working, Some(5), Some(true))
        );
        assert_eq!(
            list_request(Some("status=BOGUS"), "")
                .expect_err("bad")
                .violations[0]
                .field,
            "status"
        );
        assert_eq!(
            list_request(Some("pageSize=x"), "")
                .expect_err("bad")
                .violations[0]
                .field,
            "pageSize"
        );
        assert_eq!(
            list_request(Some("statusTimestampAfter=yesterday"), "")
                .expect_err("bad")
                .violations[0]
                .field,
            "statusTimestampAfter"
        );
    }
}
