//! The A2A operations and every name each has on the wire, in one table.
//!
//! Bindings look names up here; none keeps its own list.

use crate::version::ProtocolVersion;

mod rest;

pub use rest::{RestMatch, RestParams, RestRoute, Verb};

/// An A2A operation, whatever the binding or version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// Send a message; reply with a Task or Message.
    SendMessage,
    /// Send a message; reply with a stream of events.
    SendStreamingMessage,
    /// Read a task.
    GetTask,
    /// List the caller's tasks.
    ListTasks,
    /// Cancel a task.
    CancelTask,
    /// Attach to a live task's events.
    SubscribeToTask,
    /// Create (v0.3: set) a push notification config.
    CreatePushConfig,
    /// Read a push notification config.
    GetPushConfig,
    /// List a task's push notification configs.
    ListPushConfigs,
    /// Delete a push notification config.
    DeletePushConfig,
    /// Read the extended Agent Card.
    GetExtendedAgentCard,
}

/// Full name of the v1.0 gRPC service.
pub const GRPC_SERVICE_V1: &str = "lf.a2a.v1.A2AService";
/// Full name of the v0.3 gRPC service.
pub const GRPC_SERVICE_V03: &str = "a2a.v1.A2AService";

/// One row of the name table.
#[derive(Clone, Copy, Debug)]
pub struct MethodNames {
    /// The operation.
    pub method: Method,
    /// v1.0 JSON-RPC and gRPC name.
    pub v1: &'static str,
    /// v0.3 JSON-RPC name, if v0.3 has the operation.
    pub v03: Option<&'static str>,
    /// v0.3 gRPC name (`a2a.v1.A2AService`), if any.
    pub v03_grpc: Option<&'static str>,
    /// Pre-0.2 JSON-RPC alias, accepted as a 0.3 call (`tasks/send`).
    pub legacy: Option<&'static str>,
    /// v1.0 REST route (relative to the interface URL, after any tenant).
    pub rest: RestRoute,
    /// v0.3 REST route (under `/v1/`), if v0.3 has one.
    pub rest_v03: Option<RestRoute>,
    /// Whether the reply is a stream.
    pub streaming: bool,
}

/// Every operation with its names (WIRE-NOTES §2).
pub const METHODS: &[MethodNames] = &[
    MethodNames {
        method: Method::SendMessage,
        v1: "SendMessage",
        v03: Some("message/send"),
        v03_grpc: Some("SendMessage"),
        legacy: Some("tasks/send"),
        rest: RestRoute::new(Verb::Post, "/message:send"),
        rest_v03: Some(RestRoute::new(Verb::Post, "/v1/message:send")),
        streaming: false,
    },
    MethodNames {
        method: Method::SendStreamingMessage,
        v1: "SendStreamingMessage",
        v03: Some("message/stream"),
        v03_grpc: Some("SendStreamingMessage"),
        legacy: Some("tasks/sendSubscribe"),
        rest: RestRoute::new(Verb::Post, "/message:stream"),
        rest_v03: Some(RestRoute::new(Verb::Post, "/v1/message:stream")),
        streaming: true,
    },
    MethodNames {
        method: Method::GetTask,
        v1: "GetTask",
        v03: Some("tasks/get"),
        v03_grpc: Some("GetTask"),
        legacy: None,
        rest: RestRoute::new(Verb::Get, "/tasks/{id}"),
        rest_v03: Some(RestRoute::new(Verb::Get, "/v1/tasks/{id}")),
        streaming: false,
    },
    MethodNames {
        method: Method::ListTasks,
        v1: "ListTasks",
        v03: None,
        v03_grpc: None,
        legacy: None,
        rest: RestRoute::new(Verb::Get, "/tasks"),
        rest_v03: None,
        streaming: false,
    },
    MethodNames {
        method: Method::CancelTask,
        v1: "CancelTask",
        v03: Some("tasks/cancel"),
        v03_grpc: Some("CancelTask"),
        legacy: None,
        rest: RestRoute::new(Verb::Post, "/tasks/{id}:cancel"),
        rest_v03: Some(RestRoute::new(Verb::Post, "/v1/tasks/{id}:cancel")),
        streaming: false,
    },
    MethodNames {
        method: Method::SubscribeToTask,
        v1: "SubscribeToTask",
        v03: Some("tasks/resubscribe"),
        v03_grpc: Some("TaskSubscription"),
        legacy: None,
        rest: RestRoute::either(Verb::Post, Verb::Get, "/tasks/{id}:subscribe"),
        rest_v03: Some(RestRoute::either(
            Verb::Post,
            Verb::Get,
            "/v1/tasks/{id}:subscribe",
        )),
        streaming: true,
    },
    MethodNames {
        method: Method::CreatePushConfig,
        v1: "CreateTaskPushNotificationConfig",
        v03: Some("tasks/pushNotificationConfig/set"),
        v03_grpc: Some("CreateTaskPushNotificationConfig"),
        legacy: None,
        rest: RestRoute::new(Verb::Post, "/tasks/{id}/pushNotificationConfigs"),
        rest_v03: Some(RestRoute::new(
            Verb::Post,
            "/v1/tasks/{id}/pushNotificationConfigs",
        )),
        streaming: false,
    },
    MethodNames {
        method: Method::GetPushConfig,
        v1: "GetTaskPushNotificationConfig",
        v03: Some("tasks/pushNotificationConfig/get"),
        v03_grpc: Some("GetTaskPushNotificationConfig"),
        legacy: None,
        rest: RestRoute::new(Verb::Get, "/tasks/{id}/pushNotificationConfigs/{configId}"),
        rest_v03: Some(RestRoute::new(
            Verb::Get,
            "/v1/tasks/{id}/pushNotificationConfigs/{configId}",
        )),
        streaming: false,
    },
    MethodNames {
        method: Method::ListPushConfigs,
        v1: "ListTaskPushNotificationConfigs",
        v03: Some("tasks/pushNotificationConfig/list"),
        v03_grpc: Some("ListTaskPushNotificationConfig"),
        legacy: None,
        rest: RestRoute::new(Verb::Get, "/tasks/{id}/pushNotificationConfigs"),
        rest_v03: Some(RestRoute::new(
            Verb::Get,
            "/v1/tasks/{id}/pushNotificationConfigs",
        )),
        streaming: false,
    },
    MethodNames {
        method: Method::DeletePushConfig,
        v1: "DeleteTaskPushNotificationConfig",
        v03: Some("tasks/pushNotificationConfig/delete"),
        v03_grpc: Some("DeleteTaskPushNotificationConfig"),
        legacy: None,
        rest: RestRoute::new(
            Verb::Delete,
            "/tasks/{id}/pushNotificationConfigs/{configId}",
        ),
        rest_v03: Some(RestRoute::new(
            Verb::Delete,
            "/v1/tasks/{id}/pushNotificationConfigs/{configId}",
        )),
        streaming: false,
    },
    MethodNames {
        method: Method::GetExtendedAgentCard,
        v1: "GetExtendedAgentCard",
        v03: Some("agent/getAuthenticatedExtendedCard"),
        v03_grpc: Some("GetAgentCard"),
        legacy: None,
        rest: RestRoute::new(Verb::Get, "/extendedAgentCard"),
        rest_v03: Some(RestRoute::new(Verb::Get, "/v1/card")),
        streaming: false,
    },
];

/// Which naming family a JSON-RPC method name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// A v1.0 PascalCase name.
    V1,
    /// A v0.3 slash name.
    V03,
    /// A pre-0.2 alias (params may be in the original `TaskSendParams` shape).
    Legacy,
}

impl Method {
    /// This operation's names.
    pub fn names(self) -> &'static MethodNames {
        METHODS
            .iter()
            .find(|n| n.method == self)
            .unwrap_or(&METHODS[0])
    }

    /// Looks up a JSON-RPC method name in every dialect.
    pub fn from_jsonrpc(name: &str) -> Option<(Method, Dialect)> {
        if let Some(n) = METHODS.iter().find(|n| n.v1 == name) {
            return Some((n.method, Dialect::V1));
        }
        if let Some(n) = METHODS.iter().find(|n| n.v03 == Some(name)) {
            return Some((n.method, Dialect::V03));
        }
        METHODS
            .iter()
            .find(|n| n.legacy == Some(name))
            .map(|n| (n.method, Dialect::Legacy))
    }

    /// The JSON-RPC name in `version`.
    pub fn jsonrpc_name(self, version: ProtocolVersion) -> Option<&'static str> {
        match version {
            ProtocolVersion::V1_0 => Some(self.names().v1),
            ProtocolVersion::V0_3 => self.names().v03,
        }
    }

    /// Whether the reply is a stream.
    pub fn is_streaming(self) -> bool {
        self.names().streaming
    }

    /// The gRPC method name in `version`'s service (v1.0 `lf.a2a.v1`,
    /// v0.3 `a2a.v1`), if that service has the operation.
    pub fn grpc_name(self, version: ProtocolVersion) -> Option<&'static str> {
        match version {
            ProtocolVersion::V1_0 => Some(self.names().v1),
            ProtocolVersion::V0_3 => self.names().v03_grpc,
        }
    }

    /// The full name of `version`'s gRPC service.
    pub fn grpc_service(version: ProtocolVersion) -> &'static str {
        match version {
            ProtocolVersion::V1_0 => GRPC_SERVICE_V1,
            ProtocolVersion::V0_3 => GRPC_SERVICE_V03,
        }
    }

    /// The HTTP/2 path of this operation's gRPC method in `version`
    /// (`/a2a.v1.A2AService/GetAgentCard`), if that service has it.
    pub fn grpc_path(self, version: ProtocolVersion) -> Option<String> {
        let name = self.grpc_name(version)?;
        Some(format!("/{}/{name}", Self::grpc_service(version)))
    }

    /// The operation a gRPC method of `version`'s service names.
    pub fn from_grpc(name: &str, version: ProtocolVersion) -> Option<Method> {
        METHODS
            .iter()
            .find(|n| n.method.grpc_name(version) == Some(name))
            .map(|n| n.method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves_to_its_operation() {
        for n in METHODS {
            assert_eq!(Method::from_jsonrpc(n.v1), Some((n.method, Dialect::V1)));
            if let Some(v03) = n.v03 {
                assert_eq!(Method::from_jsonrpc(v03), Some((n.method, Dialect::V03)));
            }
        }
        assert_eq!(
            Method::from_jsonrpc("tasks/sendSubscribe"),
            Some((Method::SendStreamingMessage, Dialect::Legacy))
        );
        assert_eq!(Method::from_jsonrpc("tasks/unknown"), None);
        for n in METHODS {
            for v in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
                if let Some(g) = n.method.grpc_name(v) {
                    assert_eq!(Method::from_grpc(g, v), Some(n.method));
                }
            }
        }
        assert_eq!(
            Method::from_grpc("TaskSubscription", ProtocolVersion::V0_3),
            Some(Method::SubscribeToTask)
        );
        assert_eq!(
            Method::from_grpc("TaskSubscription", ProtocolVersion::V1_0),
            None
        );
    }
}
