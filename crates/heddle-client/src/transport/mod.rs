//! One transport per binding and protocol version, behind [`Transport`].
//!
//! Every transport takes and returns the v1.0 model: the v0.3 ones convert
//! at this edge (`compat::v03` for JSON-RPC, `compat::v03_proto` for REST and
//! gRPC), so nothing above them knows which version is on the wire. Method
//! names and REST routes come from [`heddle_core::method`]'s table; an
//! operation the version lacks (ListTasks in v0.3) fails with
//! [`ClientError::NoInterface`] before anything is sent.
//!
//! [`crate::A2aClient`] picks one transport when it binds to an interface and
//! adds what is the same for all of them: tenants, retries, OAuth refresh,
//! card verification and the polling fallback.

use std::{future::Future, pin::Pin, sync::Arc};

use futures::Stream;
use heddle_core::{ProtocolVersion, method::Method, v1};
use serde::Serialize;
use serde_json::Value;

use crate::{Binding, ClientError, ClientOptions, oauth::TokenSource};

mod grpc;
mod grpc_ops;
mod http;
mod jsonrpc;
mod jsonrpc_v03;
mod rest;
mod rest_v03;

/// Events of a stream, in order; it ends when the server closes it.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<v1::StreamResponse, ClientError>> + Send>>;

/// Largest single stream event (or gRPC message) accepted.
pub(crate) const MAX_EVENT: usize = 16 << 20;

/// What a transport call returns: a boxed future, so [`Transport`] can be a
/// trait object (the binding is chosen at run time, from the card).
pub(crate) type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send + 'a>>;

/// The extended card, and its JSON as served when it came as JSON (a
/// signature may have been made over that form rather than the model's).
pub(crate) struct ExtendedCard {
    pub(crate) card: v1::AgentCard,
    pub(crate) served: Option<Value>,
}

/// The eleven A2A operations over one binding in one version. Requests
/// already carry the interface's tenant.
pub(crate) trait Transport: Send + Sync {
    /// SendMessage.
    fn send(&self, req: v1::SendMessageRequest) -> Call<'_, v1::SendMessageResponse>;
    /// SendStreamingMessage.
    fn send_streaming(&self, req: v1::SendMessageRequest) -> Call<'_, EventStream>;
    /// GetTask.
    fn get_task(&self, req: v1::GetTaskRequest) -> Call<'_, v1::Task>;
    /// ListTasks.
    fn list_tasks(&self, req: v1::ListTasksRequest) -> Call<'_, v1::ListTasksResponse>;
    /// CancelTask.
    fn cancel_task(&self, req: v1::CancelTaskRequest) -> Call<'_, v1::Task>;
    /// SubscribeToTask.
    fn subscribe(&self, req: v1::SubscribeToTaskRequest) -> Call<'_, EventStream>;
    /// CreateTaskPushNotificationConfig (v0.3: set).
    fn create_push_config(
        &self,
        req: v1::TaskPushNotificationConfig,
    ) -> Call<'_, v1::TaskPushNotificationConfig>;
    /// GetTaskPushNotificationConfig.
    fn get_push_config(
        &self,
        req: v1::GetTaskPushNotificationConfigRequest,
    ) -> Call<'_, v1::TaskPushNotificationConfig>;
    /// ListTaskPushNotificationConfigs.
    fn list_push_configs(
        &self,
        req: v1::ListTaskPushNotificationConfigsRequest,
    ) -> Call<'_, v1::ListTaskPushNotificationConfigsResponse>;
    /// DeleteTaskPushNotificationConfig.
    fn delete_push_config(&self, req: v1::DeleteTaskPushNotificationConfigRequest) -> Call<'_, ()>;
    /// GetExtendedAgentCard.
    fn extended_card(&self, req: v1::GetExtendedAgentCardRequest) -> Call<'_, ExtendedCard>;
}

/// Everything a transport needs to reach one interface.
pub(crate) struct Target<'a> {
    pub(crate) card: &'a v1::AgentCard,
    pub(crate) interface: &'a v1::AgentInterface,
    pub(crate) version: ProtocolVersion,
    pub(crate) opts: &'a ClientOptions,
    pub(crate) http: reqwest::Client,
    pub(crate) oauth: Option<TokenSource>,
}

/// The transport for `binding` in `target`'s version.
pub(crate) fn connect(
    binding: Binding,
    target: Target<'_>,
) -> Result<Arc<dyn Transport>, ClientError> {
    let version = target.version;
    Ok(match (binding, version) {
        (Binding::Grpc, _) => grpc_ops::connect(&target)?,
        (Binding::JsonRpc, ProtocolVersion::V1_0) => {
            Arc::new(jsonrpc::JsonRpcV1(jsonrpc::JsonRpc::new(target)))
        }
        (Binding::JsonRpc, ProtocolVersion::V0_3) => {
            Arc::new(jsonrpc_v03::JsonRpcV03(jsonrpc::JsonRpc::new(target)))
        }
        (Binding::Rest, ProtocolVersion::V1_0) => Arc::new(rest::RestV1(rest::Rest::new(target))),
        (Binding::Rest, ProtocolVersion::V0_3) => {
            Arc::new(rest_v03::RestV03(rest::Rest::new(target)))
        }
    })
}

/// The error for an operation `version` does not have.
pub(crate) fn missing(method: Method, version: ProtocolVersion) -> ClientError {
    ClientError::NoInterface(format!("A2A {version} has no {method:?}"))
}

/// A request as JSON.
pub(crate) fn to_value<T: Serialize>(v: &T) -> Result<Value, ClientError> {
    serde_json::to_value(v)
        .map_err(|e| ClientError::InvalidResponse(format!("cannot encode the request: {e}")))
}

/// v0.3 reads a history length of 0 as "all": v1.0's "none" is sent as 1
/// and the one message left is dropped from the answer.
pub(crate) fn v03_history_length(n: Option<i32>) -> Option<i32> {
    n.map(|n| n.max(1))
}

/// Trims a v0.3 answer's history to what a v1.0 `history_length` asked for.
pub(crate) fn v03_trim_history(mut t: v1::Task, asked: Option<i32>) -> v1::Task {
    if asked == Some(0) {
        t.history.clear();
    }
    t
}

/// A v0.3 named push config (REST and gRPC) in v1.0 form. The task and
/// config ids come from its `name` when that parses, else from the inner
/// config and `task_id`, the task the call was about.
pub(crate) fn v03_named_config(
    c: &heddle_core::v03_proto::TaskPushNotificationConfig,
    task_id: &str,
) -> Result<v1::TaskPushNotificationConfig, ClientError> {
    use heddle_core::compat::v03_proto as conv;
    let inner = c.push_notification_config.as_ref().ok_or_else(|| {
        ClientError::InvalidResponse("push config without pushNotificationConfig".into())
    })?;
    let (task_id, config_id) = conv::parse_config_name(&c.name, "name")
        .map_or((task_id, inner.id.as_str()), |(t, id)| (t, id));
    let mut out = conv::push_config_to_v1(inner, task_id);
    if out.id.is_empty() {
        config_id.clone_into(&mut out.id);
    }
    Ok(out)
}

/// A v1.0 push config in v0.3's named form; a config without an id (the
/// server picks one) has no name.
pub(crate) fn v03_named_from_v1(
    c: &v1::TaskPushNotificationConfig,
) -> heddle_core::v03_proto::TaskPushNotificationConfig {
    let mut named = heddle_core::compat::v03_proto::push_config_from_v1(c);
    if c.id.is_empty() {
        named.name.clear();
    }
    named
}
