//! The gRPC binding (v1 §10): the v1.0 service `lf.a2a.v1.A2AService` and the
//! v0.3 service `a2a.v1.A2AService` on one listener (their method paths do not
//! collide), for any number of agents, with gRPC health and reflection.
//!
//! Each RPC only decodes its request into a [`Call`] and a [`CallContext`],
//! calls [`RequestHandler::handle`], and encodes the [`Reply`]; the rules live
//! in the handler. v0.3 messages are converted in
//! [`heddle_core::compat::v03_proto`]. A2A errors travel as
//! `google.rpc.Status` in `grpc-status-details-bin`, with an `ErrorInfo`.
//!
//! # Which agent answers
//!
//! One listener serves every agent of a [`GrpcRouter`], keyed by agent id:
//!
//! * **v1.0**: the request's `tenant` field names the agent (cards list each
//!   gRPC interface with `tenant` = agent id).
//! * **v0.3**: requests have no tenant field, so the `a2a-tenant` metadata
//!   names the agent. v0.3 clients only know the card's URL, which is the
//!   same for every agent, so in practice they reach the default agent; that
//!   is a limitation of serving many agents on one v0.3 gRPC port.
//! * An empty tenant goes to the default agent, or to the only agent when
//!   there is one; otherwise it is InvalidParams naming the tenant.
//! * An unknown tenant is `NOT_FOUND` with an `ErrorInfo` whose reason is
//!   [`TENANT_NOT_FOUND`] (domain [`HEDDLE_DOMAIN`]): it is not an A2A error,
//!   but it is what an unknown agent path is on the HTTP bindings.
//!
//! # Service parameters
//!
//! `a2a-version` is optional: the package already names the version, so an
//! absent value means the service's own version (1.0 on `lf.a2a.v1`, 0.3 on
//! `a2a.v1`). A value naming the other version, or one Heddle does not speak,
//! is VersionNotSupported. `a2a-extensions` (and the v0.3 name
//! `x-a2a-extensions`) is read comma-separated over every entry. The
//! [`Caller`] comes from the request extensions, where an authentication layer
//! puts it; without one the caller is anonymous.
//!
//! # v0.3 `GetAgentCard`
//!
//! v0.3 SDKs call it to read the card, so it answers with the public card in
//! v0.3 form, as the well-known URL does. An authenticated caller of an agent
//! that declares an extended card gets what GetExtendedAgentCard gives.
//!
//! # Serving
//!
//! [`GrpcRouter::routes`] gives a [`Routes`] with both services, health and
//! reflection: serve it with `tonic::transport::Server::builder().add_routes(…)`
//! or as an axum router (`routes.into_axum_router()`) with `axum::serve`, which
//! speaks HTTP/2 without TLS (h2c) when axum's `http2` feature is on. In
//! those routes each A2A service is wrapped in a [`Unary`], which answers the
//! unary RPCs without tonic's per-call codec and passes everything else to
//! the generated server (see [`unary`]); the generated servers alone are
//! [`GrpcRouter::v1_service`] and [`GrpcRouter::v03_service`].

use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::{Arc, RwLock},
};

use futures::{Stream, StreamExt};
use heddle_core::{
    A2aError, ErrorCode, ProtocolVersion, call::Call, compat::v03_proto as conv, rpc, v1,
    v03_proto as pb,
};
use heddle_proto::{v1::a2a_service_server as v1_server, v03::a2a_service_server as v03_server};
use prost::Message as _;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status, metadata::MetadataMap, service::Routes};

mod deadline;
pub mod unary;

pub use unary::Unary;

use crate::{
    agent::Caller,
    handler::{CallContext, EventStream, Reply, RequestHandler},
};

/// Full name of the v1.0 service.
pub const V1_SERVICE: &str = heddle_core::method::GRPC_SERVICE_V1;
/// Full name of the v0.3 service.
pub const V03_SERVICE: &str = heddle_core::method::GRPC_SERVICE_V03;
/// Metadata key of the `A2A-Version` service parameter (gRPC keys are lowercase).
const VERSION_KEY: &str = "a2a-version";
use heddle_core::version::EXTENSIONS_KEYS;
/// Metadata key naming the agent of a v0.3 request (v0.3 has no tenant field).
pub const TENANT_METADATA: &str = "a2a-tenant";
/// `ErrorInfo.reason` of a request for a tenant no agent serves.
pub const TENANT_NOT_FOUND: &str = "TENANT_NOT_FOUND";
/// `ErrorInfo.domain` of Heddle's own (non-A2A) errors.
pub const HEDDLE_DOMAIN: &str = "heddle";

/// A server stream of one message type, as tonic wants it.
pub type GrpcStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// An A2A error as a gRPC status, its `google.rpc.Status` in the details.
pub fn status(err: &A2aError) -> Status {
    let err = &*crate::redact::for_caller(err);
    let st = err.to_grpc_status();
    Status::with_details(
        Code::from_i32(st.code),
        st.message.clone(),
        st.encode_to_vec().into(),
    )
}

fn tenant_not_found(tenant: &str) -> Status {
    let message = format!("no agent serves tenant {tenant:?}");
    let info = rpc::ErrorInfo {
        reason: TENANT_NOT_FOUND.to_owned(),
        domain: HEDDLE_DOMAIN.to_owned(),
        metadata: [("tenant".to_owned(), tenant.to_owned())]
            .into_iter()
            .collect(),
    };
    let st = rpc::Status {
        code: Code::NotFound as i32,
        message: message.clone(),
        details: vec![rpc::Any::pack(rpc::ERROR_INFO_TYPE, &info)],
    };
    Status::with_details(Code::NotFound, message, st.encode_to_vec().into())
}

/// Several agents' handlers behind one gRPC listener, keyed by tenant (agent id).
///
/// The agents are looked up per call, so a server can add and remove them
/// while it runs ([`insert`](Self::insert), [`remove`](Self::remove)): every
/// clone of a router, and the services made from it, share one set of agents.
#[derive(Clone, Debug, Default)]
pub struct GrpcRouter {
    agents: Arc<RwLock<BTreeMap<String, RequestHandler>>>,
    default_agent: Option<String>,
}

impl GrpcRouter {
    /// A router with no agents.
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `handler` as the tenant named by its agent id.
    #[must_use]
    pub fn agent(self, handler: RequestHandler) -> Self {
        self.insert(handler);
        self
    }

    /// Serves `handler` as the tenant named by its agent id from the next
    /// call on, replacing the agent of that id if there was one (its calls
    /// in flight finish on the old handler).
    pub fn insert(&self, handler: RequestHandler) {
        self.write().insert(handler.agent_id().to_owned(), handler);
    }

    /// Stops serving the agent `id`; whether it was served.
    pub fn remove(&self, id: &str) -> bool {
        self.write().remove(id).is_some()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, RequestHandler>> {
        // Every write leaves the map whole, so a poisoned lock is still usable.
        self.agents.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, RequestHandler>> {
        self.agents.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The agent that answers requests with no tenant.
    #[must_use]
    pub fn default_agent(mut self, id: impl Into<String>) -> Self {
        self.default_agent = Some(id.into());
        self
    }

    /// The handler for `tenant` (see the module docs for the rule). `field`
    /// names where the tenant came from, for the error.
    pub fn resolve(&self, tenant: &str, field: &str) -> Result<RequestHandler, Status> {
        let agents = self.read();
        if !tenant.is_empty() {
            return agents
                .get(tenant)
                .cloned()
                .ok_or_else(|| tenant_not_found(tenant));
        }
        let default = self.default_agent.as_deref().and_then(|id| agents.get(id));
        let only = (agents.len() == 1)
            .then(|| agents.values().next())
            .flatten();
        default.or(only).cloned().ok_or_else(|| {
            status(&A2aError::invalid_field(
                field,
                "is required: this server hosts several agents; use the tenant of the agent card's gRPC interface",
            ))
        })
    }

    /// Largest request any agent accepts, the decoding limit of both services.
    fn max_message_bytes(&self) -> usize {
        self.read()
            .values()
            .map(|h| h.limits().max_body_bytes)
            .max()
            .unwrap_or(crate::Limits::default().max_body_bytes)
    }

    /// The v1.0 service.
    pub fn v1_service(&self) -> v1_server::A2aServiceServer<V1Service> {
        v1_server::A2aServiceServer::new(V1Service::new(self))
            .max_decoding_message_size(self.max_message_bytes())
    }

    /// The v0.3 service.
    pub fn v03_service(&self) -> v03_server::A2aServiceServer<V03Service> {
        v03_server::A2aServiceServer::new(V03Service::new(self))
            .max_decoding_message_size(self.max_message_bytes())
    }

    /// Both services, `grpc.health.v1.Health` (SERVING for both) and server
    /// reflection (v1 and v1alpha). Async because tonic-health sets statuses
    /// through an async lock.
    pub async fn routes(&self) -> Routes {
        let (reporter, health) = tonic_health::server::health_reporter();
        for name in [V1_SERVICE, V03_SERVICE] {
            reporter
                .set_service_status(name, tonic_health::ServingStatus::Serving)
                .await;
        }
        let max = self.max_message_bytes();
        let v1 = Unary::new(V1Service::new(self), self.v1_service(), max);
        let v03 = Unary::new(V03Service::new(self), self.v03_service(), max);
        let mut routes = Routes::new(v1.clone())
            .add_service(v03.clone())
            .add_service(health);
        exact_routes(routes.axum_router_mut(), &v1);
        exact_routes(routes.axum_router_mut(), &v03);
        let builder = || {
            tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(heddle_proto::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        };
        // The descriptor sets are compiled in, so these fail only on a build bug;
        // the A2A services still work without reflection.
        match (builder().build_v1(), builder().build_v1alpha()) {
            (Ok(v1), Ok(v1alpha)) => routes = routes.add_service(v1).add_service(v1alpha),
            (Err(e), _) | (_, Err(e)) => {
                tracing::error!(error = %e, "gRPC reflection disabled: bad descriptor set");
            }
        }
        // Every call in the caller's trace (crate::trace).
        let traced =
            std::mem::take(routes.axum_router_mut()).layer(crate::trace::TraceContextLayer);
        *routes.axum_router_mut() = traced;
        routes
    }
}

/// Gives each unary RPC of `service` a route of its own path. The service's
/// `/{name}/{*rest}` route would serve them too, but it captures the method
/// as a URL parameter on every call (about 1.5k instructions of a 76k
/// `SendMessage`); an exact path captures nothing.
fn exact_routes<Svc, S>(router: &mut axum::Router, service: &Unary<Svc, S>)
where
    Svc: unary::UnaryRpcs + Sync,
    Unary<Svc, S>: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
            Future = unary::BoxFuture,
        > + Clone
        + Send
        + Sync
        + 'static,
{
    use tower::ServiceExt as _;
    for method in Svc::methods() {
        let svc = service
            .clone()
            .map_request(|req: http::Request<axum::body::Body>| req.map(tonic::body::Body::new));
        *router = std::mem::take(router).route_service(&format!("/{}/{method}", Svc::NAME), svc);
    }
}

/// The parts of a request every RPC reads besides its message.
struct Incoming {
    meta: MetadataMap,
    caller: Caller,
    peer: Option<std::net::IpAddr>,
}

/// Splits a request into its metadata and caller, and its message.
fn split<T>(req: Request<T>) -> (Incoming, T) {
    let (meta, extensions, message) = req.into_parts();
    let caller = extensions.get::<Caller>().cloned().unwrap_or_default();
    let peer = extensions
        .get::<crate::listen::PeerAddr>()
        .map(|a| a.0.ip());
    (Incoming { meta, caller, peer }, message)
}

/// The version a request on `service`'s package is served in.
fn served_version(
    meta: &MetadataMap,
    service: ProtocolVersion,
) -> Result<ProtocolVersion, A2aError> {
    let value = meta
        .get_all(VERSION_KEY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .find(|v| !v.is_empty());
    let Some(value) = value else {
        return Ok(service);
    };
    match ProtocolVersion::parse(value) {
        Some(v) if v == service => Ok(v),
        Some(v) => {
            let (theirs, ours) = match v {
                ProtocolVersion::V1_0 => (V1_SERVICE, V03_SERVICE),
                ProtocolVersion::V0_3 => (V03_SERVICE, V1_SERVICE),
            };
            Err(A2aError::new(
                ErrorCode::VersionNotSupported,
                format!(
                    "A2A {v} over gRPC is the {theirs} service; this is {ours} (A2A {service})"
                ),
            )
            .with_meta("requestedVersion", value))
        }
        None => ProtocolVersion::from_header(Some(value)),
    }
}

/// Activated extensions: every `a2a-extensions` / `x-a2a-extensions` entry, comma-separated.
fn extensions(meta: &MetadataMap) -> Vec<String> {
    heddle_core::version::extension_uris(
        EXTENSIONS_KEYS
            .iter()
            .flat_map(|key| meta.get_all(*key).iter())
            .filter_map(|v| v.to_str().ok()),
    )
}

fn context(inc: &Incoming, service: ProtocolVersion) -> Result<CallContext, Status> {
    Ok(CallContext {
        caller: inc.caller.clone(),
        version: served_version(&inc.meta, service).map_err(|e| status(&e))?,
        extensions: extensions(&inc.meta),
        legacy_task_id: None,
        peer: inc.peer,
        binding: Some(crate::Binding::Grpc),
        resume_after: crate::jsonrpc::last_event_id(
            inc.meta.get("last-event-id").map(|v| v.as_bytes()),
        ),
    })
}

fn unexpected(reply: &Reply) -> Status {
    // The reply's kind only: its debug form would print a whole task.
    let kind = match reply {
        Reply::Task(_) => "a task",
        Reply::Message(_) => "a message",
        Reply::Tasks(_) => "a task list",
        Reply::Card(_) => "a card",
        Reply::Stream(_) => "a stream",
        Reply::PushConfig(_) => "a push config",
        Reply::PushConfigs(_) => "a push config list",
        _ => "another reply",
    };
    status(&A2aError::internal(format!(
        "the handler gave {kind} where the method has none"
    )))
}

/// A streaming call's opening, within the caller's `grpc-timeout`. (Unary
/// calls are bounded by [`Unary`], which serves them.)
async fn bounded(
    deadline: Option<Instant>,
    opening: impl Future<Output = Result<Reply, Status>>,
) -> Result<Reply, Status> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at, opening)
            .await
            .unwrap_or_else(|_| Err(deadline::exceeded())),
        None => opening.await,
    }
}

/// A server stream ended with `DEADLINE_EXCEEDED` at the caller's deadline.
fn within<T: Send + 'static>(deadline: Option<Instant>, stream: GrpcStream<T>) -> GrpcStream<T> {
    match deadline {
        Some(at) => Box::pin(deadline::Bounded::new(stream, at)),
        None => stream,
    }
}

fn v1_stream(events: EventStream) -> GrpcStream<v1::StreamResponse> {
    Box::pin(events.map(|u| Ok(Arc::unwrap_or_clone(u).response)))
}

fn v03_stream(events: EventStream) -> GrpcStream<pb::StreamResponse> {
    Box::pin(
        crate::downgrade::v03_events(events, conv::stream_response_from_v1)
            .map(|event| event.map(|(_, e)| e).map_err(|e| status(&e))),
    )
}

/// The v1.0 service (`lf.a2a.v1.A2AService`) over a [`GrpcRouter`].
#[derive(Clone, Debug)]
pub struct V1Service {
    router: Arc<GrpcRouter>,
}

impl V1Service {
    fn new(router: &GrpcRouter) -> Self {
        Self {
            router: Arc::new(router.clone()),
        }
    }

    /// Resolves the tenant, builds the context and runs the call.
    async fn run(&self, inc: &Incoming, tenant: &str, call: Call) -> Result<Reply, Status> {
        let cx = context(inc, ProtocolVersion::V1_0)?;
        let handler = self.router.resolve(tenant, "tenant")?;
        handler.handle(cx, call).await.map_err(|e| status(&e))
    }

    async fn task(
        &self,
        inc: &Incoming,
        tenant: &str,
        call: Call,
    ) -> Result<Response<v1::Task>, Status> {
        match self.run(inc, tenant, call).await? {
            Reply::Task(t) => Ok(Response::new(t)),
            other => Err(unexpected(&other)),
        }
    }

    async fn stream(
        &self,
        inc: &Incoming,
        tenant: &str,
        call: Call,
    ) -> Result<Response<GrpcStream<v1::StreamResponse>>, Status> {
        let deadline = deadline::from_metadata(&inc.meta);
        match bounded(deadline, self.run(inc, tenant, call)).await? {
            Reply::Stream(s) => Ok(Response::new(within(deadline, v1_stream(s)))),
            other => Err(unexpected(&other)),
        }
    }
}

#[tonic::async_trait]
impl v1_server::A2aService for V1Service {
    async fn send_message(
        &self,
        request: Request<v1::SendMessageRequest>,
    ) -> Result<Response<v1::SendMessageResponse>, Status> {
        use v1::send_message_response::Payload;
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        let payload = match self.run(&inc, &tenant, Call::SendMessage(r)).await? {
            Reply::Task(t) => Payload::Task(t),
            Reply::Message(m) => Payload::Message(m),
            other => return Err(unexpected(&other)),
        };
        Ok(Response::new(v1::SendMessageResponse {
            payload: Some(payload),
        }))
    }

    type SendStreamingMessageStream = GrpcStream<v1::StreamResponse>;

    async fn send_streaming_message(
        &self,
        request: Request<v1::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        self.stream(&inc, &tenant, Call::SendStreamingMessage(r))
            .await
    }

    async fn get_task(
        &self,
        request: Request<v1::GetTaskRequest>,
    ) -> Result<Response<v1::Task>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        self.task(&inc, &tenant, Call::GetTask(r)).await
    }

    async fn list_tasks(
        &self,
        request: Request<v1::ListTasksRequest>,
    ) -> Result<Response<v1::ListTasksResponse>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self.run(&inc, &tenant, Call::ListTasks(r)).await? {
            Reply::Tasks(t) => Ok(Response::new(t)),
            other => Err(unexpected(&other)),
        }
    }

    async fn cancel_task(
        &self,
        request: Request<v1::CancelTaskRequest>,
    ) -> Result<Response<v1::Task>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        self.task(&inc, &tenant, Call::CancelTask(r)).await
    }

    type SubscribeToTaskStream = GrpcStream<v1::StreamResponse>;

    async fn subscribe_to_task(
        &self,
        request: Request<v1::SubscribeToTaskRequest>,
    ) -> Result<Response<Self::SubscribeToTaskStream>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        self.stream(&inc, &tenant, Call::SubscribeToTask(r)).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<v1::TaskPushNotificationConfig>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self.run(&inc, &tenant, Call::CreatePushConfig(r)).await? {
            Reply::PushConfig(c) => Ok(Response::new(c)),
            other => Err(unexpected(&other)),
        }
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<v1::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<v1::TaskPushNotificationConfig>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self.run(&inc, &tenant, Call::GetPushConfig(r)).await? {
            Reply::PushConfig(c) => Ok(Response::new(c)),
            other => Err(unexpected(&other)),
        }
    }

    async fn list_task_push_notification_configs(
        &self,
        request: Request<v1::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<v1::ListTaskPushNotificationConfigsResponse>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self.run(&inc, &tenant, Call::ListPushConfigs(r)).await? {
            Reply::PushConfigs(c) => Ok(Response::new(c)),
            other => Err(unexpected(&other)),
        }
    }

    async fn get_extended_agent_card(
        &self,
        request: Request<v1::GetExtendedAgentCardRequest>,
    ) -> Result<Response<v1::AgentCard>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self
            .run(&inc, &tenant, Call::GetExtendedAgentCard(r))
            .await?
        {
            Reply::Card(c) => Ok(Response::new(*c)),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<v1::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<heddle_core::wkt::Empty>, Status> {
        let (inc, r) = split(request);
        let tenant = r.tenant.clone();
        match self.run(&inc, &tenant, Call::DeletePushConfig(r)).await? {
            Reply::Empty => Ok(Response::new(heddle_core::wkt::Empty {})),
            other => Err(unexpected(&other)),
        }
    }
}

/// The v0.3 service (`a2a.v1.A2AService`) over a [`GrpcRouter`].
#[derive(Clone, Debug)]
pub struct V03Service {
    router: Arc<GrpcRouter>,
}

impl V03Service {
    fn new(router: &GrpcRouter) -> Self {
        Self {
            router: Arc::new(router.clone()),
        }
    }

    /// The agent named by the `a2a-tenant` metadata, or the default one.
    fn handler(&self, inc: &Incoming) -> Result<RequestHandler, Status> {
        let tenant = inc
            .meta
            .get(TENANT_METADATA)
            .and_then(|v| v.to_str().ok())
            .map_or("", str::trim);
        self.router.resolve(tenant, TENANT_METADATA)
    }

    async fn run(&self, inc: &Incoming, call: Result<Call, A2aError>) -> Result<Reply, Status> {
        let cx = context(inc, ProtocolVersion::V0_3)?;
        let handler = self.handler(inc)?;
        let call = call.map_err(|e| status(&e))?;
        handler.handle(cx, call).await.map_err(|e| status(&e))
    }

    async fn task(
        &self,
        inc: &Incoming,
        call: Result<Call, A2aError>,
    ) -> Result<Response<pb::Task>, Status> {
        match self.run(inc, call).await? {
            Reply::Task(t) => Ok(Response::new(conv::task_from_v1(&t))),
            other => Err(unexpected(&other)),
        }
    }

    async fn stream(
        &self,
        inc: &Incoming,
        call: Result<Call, A2aError>,
    ) -> Result<Response<GrpcStream<pb::StreamResponse>>, Status> {
        let deadline = deadline::from_metadata(&inc.meta);
        match bounded(deadline, self.run(inc, call)).await? {
            Reply::Stream(s) => Ok(Response::new(within(deadline, v03_stream(s)))),
            other => Err(unexpected(&other)),
        }
    }
}

#[tonic::async_trait]
impl v03_server::A2aService for V03Service {
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        use v1::send_message_response::Payload;
        let (inc, r) = split(request);
        let call = Call::SendMessage(conv::send_request_to_v1(&r));
        let payload = match self.run(&inc, Ok(call)).await? {
            Reply::Task(t) => Payload::Task(t),
            Reply::Message(m) => Payload::Message(m),
            other => return Err(unexpected(&other)),
        };
        Ok(Response::new(conv::send_response_from_v1(
            &v1::SendMessageResponse {
                payload: Some(payload),
            },
        )))
    }

    type SendStreamingMessageStream = GrpcStream<pb::StreamResponse>;

    async fn send_streaming_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<Self::SendStreamingMessageStream>, Status> {
        let (inc, r) = split(request);
        let call = Call::SendStreamingMessage(conv::send_request_to_v1(&r));
        self.stream(&inc, Ok(call)).await
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let (inc, r) = split(request);
        self.task(&inc, conv::get_task_to_v1(&r).map(Call::GetTask))
            .await
    }

    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let (inc, r) = split(request);
        let call = conv::parse_task_name(&r.name, "name").map(|id| {
            Call::CancelTask(v1::CancelTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            })
        });
        self.task(&inc, call).await
    }

    type TaskSubscriptionStream = GrpcStream<pb::StreamResponse>;

    async fn task_subscription(
        &self,
        request: Request<pb::TaskSubscriptionRequest>,
    ) -> Result<Response<Self::TaskSubscriptionStream>, Status> {
        let (inc, r) = split(request);
        let call = conv::parse_task_name(&r.name, "name").map(|id| {
            Call::SubscribeToTask(v1::SubscribeToTaskRequest {
                id: id.to_owned(),
                ..Default::default()
            })
        });
        self.stream(&inc, call).await
    }

    async fn create_task_push_notification_config(
        &self,
        request: Request<pb::CreateTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let (inc, r) = split(request);
        let call = conv::create_push_config_to_v1(&r).map(Call::CreatePushConfig);
        match self.run(&inc, call).await? {
            Reply::PushConfig(c) => Ok(Response::new(conv::push_config_from_v1(&c))),
            other => Err(unexpected(&other)),
        }
    }

    async fn get_task_push_notification_config(
        &self,
        request: Request<pb::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let (inc, r) = split(request);
        let call = conv::parse_config_name(&r.name, "name").map(|(task_id, id)| {
            Call::GetPushConfig(v1::GetTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: id.to_owned(),
                ..Default::default()
            })
        });
        match self.run(&inc, call).await? {
            Reply::PushConfig(c) => Ok(Response::new(conv::push_config_from_v1(&c))),
            other => Err(unexpected(&other)),
        }
    }

    async fn list_task_push_notification_config(
        &self,
        request: Request<pb::ListTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::ListTaskPushNotificationConfigResponse>, Status> {
        let (inc, r) = split(request);
        let call = conv::parse_task_name(&r.parent, "parent").map(|task_id| {
            Call::ListPushConfigs(v1::ListTaskPushNotificationConfigsRequest {
                task_id: task_id.to_owned(),
                page_size: r.page_size,
                page_token: r.page_token.clone(),
                ..Default::default()
            })
        });
        match self.run(&inc, call).await? {
            Reply::PushConfigs(l) => {
                Ok(Response::new(pb::ListTaskPushNotificationConfigResponse {
                    configs: l.configs.iter().map(conv::push_config_from_v1).collect(),
                    next_page_token: l.next_page_token,
                }))
            }
            other => Err(unexpected(&other)),
        }
    }

    async fn get_agent_card(
        &self,
        request: Request<pb::GetAgentCardRequest>,
    ) -> Result<Response<pb::AgentCard>, Status> {
        let (inc, _) = split(request);
        let handler = self.handler(&inc)?;
        let versions = handler.versions();
        if !versions.contains(ProtocolVersion::V0_3) {
            return Err(status(&versions.refusal(ProtocolVersion::V0_3)));
        }
        let extended = handler
            .card()
            .capabilities
            .as_ref()
            .and_then(|c| c.extended_agent_card)
            .unwrap_or(false);
        if !(extended && inc.caller.authenticated) {
            served_version(&inc.meta, ProtocolVersion::V0_3).map_err(|e| status(&e))?;
            return Ok(Response::new(conv::card_from_v1(handler.card())));
        }
        let call = Call::GetExtendedAgentCard(v1::GetExtendedAgentCardRequest::default());
        match self.run(&inc, Ok(call)).await? {
            Reply::Card(c) => Ok(Response::new(conv::card_from_v1(&c))),
            other => Err(unexpected(&other)),
        }
    }

    async fn delete_task_push_notification_config(
        &self,
        request: Request<pb::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<heddle_core::wkt::Empty>, Status> {
        let (inc, r) = split(request);
        let call = conv::parse_config_name(&r.name, "name").map(|(task_id, id)| {
            Call::DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest {
                task_id: task_id.to_owned(),
                id: id.to_owned(),
                ..Default::default()
            })
        });
        match self.run(&inc, call).await? {
            Reply::Empty => Ok(Response::new(heddle_core::wkt::Empty {})),
            other => Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn meta(pairs: &[(&'static str, &'static str)]) -> MetadataMap {
        let mut m = MetadataMap::new();
        for (k, v) in pairs {
            m.append(*k, MetadataValue::from_static(v));
        }
        m
    }

    #[test]
    fn the_package_names_the_version_unless_metadata_disagrees() {
        use ProtocolVersion::{V0_3, V1_0};
        assert_eq!(served_version(&meta(&[]), V1_0), Ok(V1_0));
        assert_eq!(served_version(&meta(&[]), V0_3), Ok(V0_3));
        assert_eq!(
            served_version(&meta(&[("a2a-version", "1.0")]), V1_0),
            Ok(V1_0)
        );
        assert_eq!(
            served_version(&meta(&[("a2a-version", "0.3.0")]), V0_3),
            Ok(V0_3)
        );
        for (value, service) in [("0.3", V1_0), ("1.0", V0_3), ("99.0", V1_0), ("x", V0_3)] {
            let e = served_version(&meta(&[("a2a-version", value)]), service).expect_err(value);
            assert_eq!(e.code, ErrorCode::VersionNotSupported, "{value}");
        }
    }

    #[test]
    fn extensions_are_read_from_every_entry() {
        let m = meta(&[
            ("a2a-extensions", "https://a, https://b"),
            ("a2a-extensions", "https://c"),
            ("x-a2a-extensions", "https://d,"),
        ]);
        assert_eq!(
            extensions(&m),
            ["https://a", "https://b", "https://c", "https://d"]
        );
    }

    #[test]
    fn errors_carry_their_google_rpc_status() {
        let s = status(&A2aError::task_not_found("t-1"));
        assert_eq!(s.code(), Code::NotFound);
        let back = rpc::Status::decode(s.details()).expect("details");
        let e = A2aError::from_grpc_status(&back);
        assert_eq!(e.code, ErrorCode::TaskNotFound);
        assert_eq!(e.metadata.get("taskId").map(String::as_str), Some("t-1"));
        let t = tenant_not_found("nobody");
        assert_eq!(t.code(), Code::NotFound);
        let back = rpc::Status::decode(t.details()).expect("details");
        let info = rpc::ErrorInfo::decode(back.details[0].value.as_slice()).expect("info");
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            (TENANT_NOT_FOUND, HEDDLE_DOMAIN)
        );
    }
}
