//! The HTTP+JSON (REST) binding, v1.0 (v1 §11) and v0.3 (under `/v1/`,
//! v0.3 §3.2.3): resource URLs, ProtoJSON bodies, `google.rpc.Status`
//! errors, SSE streams of bare `StreamResponse`s.
//!
//! One route per agent takes every path under the binding's prefix; the
//! operation, its version and its path parameters come from the method
//! table ([`heddle_core::method::Method::from_rest`]), so no route string is
//! written here. A request is then decoded into a [`Call`]
//! ([`decode`]), run by the handler, and its reply encoded ([`reply`]);
//! the rules live in the handler. v0.3 bodies are converted to v1.0 at this
//! edge, in `heddle_core::compat::v03_proto`.
//!
//! The route is matched before the body is read, so a request for no route
//! costs no body read.

mod decode;
mod push_v03;
mod reply;

use std::sync::Arc;

use axum::{
    Router,
    extract::{Request, State},
    http::{HeaderMap, StatusCode},
    response::Response,
    routing::any,
};
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion,
    call::Call,
    method::{Method, RestMatch, Verb},
};

pub(crate) use reply::{error, json};

use crate::{
    handler::{CallContext, RequestHandler},
    jsonrpc::{Envelope, Who},
};

/// The REST binding's one route, `prefix/{*path}`.
pub(crate) fn routes(prefix: &str) -> Router<RequestHandler> {
    let base: Arc<str> = Arc::from(prefix);
    Router::new().route(
        &format!("{prefix}/{{*path}}"),
        any(move |State(h): State<RequestHandler>, req: Request| {
            let base = base.clone();
            async move { endpoint(h, &base, req).await }
        }),
    )
}

async fn endpoint(h: RequestHandler, base: &str, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().strip_prefix(base).unwrap_or_default();
    let Some(verb) = Verb::parse(parts.method.as_str()) else {
        return reply::no_route(StatusCode::METHOD_NOT_ALLOWED);
    };
    let (method, version, params) = match Method::from_rest(verb, path) {
        RestMatch::Found(m, v, p) => (m, v, p),
        RestMatch::WrongVerb => return reply::no_route(StatusCode::METHOD_NOT_ALLOWED),
        RestMatch::NotFound => return reply::no_route(StatusCode::NOT_FOUND),
    };
    let query = parts.uri.query();
    let cx = match context(&parts.headers, query, Who::of(&parts), version) {
        Ok(cx) => cx,
        Err(e) => return error(&e),
    };
    let body = match axum::body::to_bytes(body, h.limits().max_body_bytes).await {
        Ok(b) => b,
        Err(e) => return reply::unreadable_body(&e),
    };
    if let Some(r) = reply::check_content_type(&parts.headers, &body) {
        return r;
    }
    // v0.3's card route is the public card, unless an authenticated caller
    // asks an agent that has an extended one.
    if method == Method::GetExtendedAgentCard
        && version == ProtocolVersion::V0_3
        && !wants_extended_card(&h, &cx)
    {
        let versions = h.versions();
        if !versions.contains(ProtocolVersion::V0_3) {
            return error(&versions.refusal(ProtocolVersion::V0_3));
        }
        let card = heddle_core::compat::v03_proto::card_from_v1(h.card());
        return json(StatusCode::OK, &card);
    }
    let call: Result<Call, A2aError> = decode::call(method, version, params, query, &body);
    let result = match call {
        Ok(call) => h.handle(cx, call).await,
        Err(e) => Err(e),
    };
    reply::encode(method, version, result)
}

fn wants_extended_card(h: &RequestHandler, cx: &CallContext) -> bool {
    cx.caller.authenticated
        && h.card()
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false)
}

/// The call's context. The path names the version; a version header or
/// query parameter must agree with it. A request without one is served as
/// the path's version.
fn context(
    headers: &HeaderMap,
    query: Option<&str>,
    who: Who,
    version: ProtocolVersion,
) -> Result<CallContext, A2aError> {
    let env = Envelope::from_parts(headers, query, who);
    match env.version? {
        Some(asked) if asked != version => Err(A2aError::new(
            ErrorCode::VersionNotSupported,
            match version {
                ProtocolVersion::V1_0 => {
                    format!("this path serves A2A 1.0; A2A {asked} paths start with /v1/")
                }
                ProtocolVersion::V0_3 => {
                    format!("/v1/ paths serve A2A 0.3; A2A {asked} has no /v1 prefix")
                }
            },
        )),
        _ => Ok(CallContext {
            caller: env.caller,
            version,
            extensions: env.extensions,
            legacy_task_id: None,
            peer: env.peer,
            binding: Some(crate::Binding::Rest),
            resume_after: env.resume_after,
        }),
    }
}
