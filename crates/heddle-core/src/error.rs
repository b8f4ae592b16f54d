//! The A2A error catalogue and its forms on every binding.
//!
//! [`CATALOGUE`] is the one table of error codes: JSON-RPC code, HTTP status,
//! gRPC status and `ErrorInfo.reason` for each. An [`A2aError`] renders itself
//! as a JSON-RPC error object ([`A2aError::to_jsonrpc`]), a REST
//! `google.rpc.Status` body ([`A2aError::to_http_body`]) or a gRPC
//! `google.rpc.Status` ([`A2aError::to_grpc_status`]); bindings never map codes
//! by hand.

use std::{collections::BTreeMap, fmt};

use heddle_proto::rpc;
use prost::Message as _;
use serde_json::{Value, json};

use crate::jsonrpc::ErrorObject;

/// The `ErrorInfo.metadata` key of a retryable error's wait, in seconds.
pub const RETRY_AFTER_KEY: &str = "retryAfterSeconds";

/// The domain of every A2A `ErrorInfo`.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// Every error an A2A server or client can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The body was not valid JSON.
    ParseError,
    /// Valid JSON, but not a valid JSON-RPC request.
    InvalidRequest,
    /// No such method (or route).
    MethodNotFound,
    /// The params (or REST body/query) are malformed.
    InvalidParams,
    /// The server failed.
    Internal,
    /// The task does not exist or is not visible to the caller.
    TaskNotFound,
    /// The task is in a state that cannot be canceled.
    TaskNotCancelable,
    /// The agent does not support push notifications.
    PushNotificationNotSupported,
    /// The operation is not supported for this task or agent.
    UnsupportedOperation,
    /// The request's content type (or a part's media type) is not supported.
    ContentTypeNotSupported,
    /// The agent produced a response that breaks the protocol.
    InvalidAgentResponse,
    /// The agent declares an extended card but has none configured.
    ExtendedAgentCardNotConfigured,
    /// The agent requires an extension the client did not activate.
    ExtensionSupportRequired,
    /// The requested A2A protocol version is not served here.
    VersionNotSupported,
    /// The caller (or the server) is at a limit: too many requests, running
    /// tasks or open streams. Heddle's own, not the spec's: retry after
    /// the `retryAfterSeconds` in its `ErrorInfo` (and the HTTP
    /// `Retry-After` header).
    ResourceExhausted,
    /// No credentials, or credentials that do not verify (HTTP 401). The
    /// spec leaves authentication errors to the transport; the JSON-RPC
    /// code is Heddle's own.
    Unauthenticated,
    /// The caller is known but may not do this (HTTP 403). Heddle's own
    /// JSON-RPC code, as for [`ErrorCode::Unauthenticated`].
    PermissionDenied,
    /// A service the server depends on cannot be reached (keys could not
    /// be fetched); retry later (HTTP 503). Heddle's own JSON-RPC code.
    Unavailable,
    /// A priced agent's task would cost more than the caller's budget or
    /// wallet balance allows (HTTP 402). Heddle's own JSON-RPC code: the
    /// a2ahub form's -32001 is TaskNotFound on A2A endpoints. Its
    /// `ErrorInfo.metadata` holds `required`, `available` and `currency`.
    BudgetExceeded,
    /// A delegated request the delegation context refuses (HTTP 400): the
    /// agent is already in the chain, the hop limit is reached, or the
    /// root's deadline has passed. Heddle's own JSON-RPC code.
    DelegationRefused,
}

/// gRPC status codes (`google.rpc.Code`) used by the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum GrpcCode {
    /// 3
    InvalidArgument = 3,
    /// 5
    NotFound = 5,
    /// 7
    PermissionDenied = 7,
    /// 8
    ResourceExhausted = 8,
    /// 9
    FailedPrecondition = 9,
    /// 12
    Unimplemented = 12,
    /// 13
    Internal = 13,
    /// 14
    Unavailable = 14,
    /// 16
    Unauthenticated = 16,
}

impl GrpcCode {
    /// The code's canonical name, as used in REST `error.status`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::InvalidArgument => "INVALID_ARGUMENT",
            Self::NotFound => "NOT_FOUND",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Self::FailedPrecondition => "FAILED_PRECONDITION",
            Self::Unimplemented => "UNIMPLEMENTED",
            Self::Internal => "INTERNAL",
            Self::Unavailable => "UNAVAILABLE",
            Self::Unauthenticated => "UNAUTHENTICATED",
        }
    }
}

/// One row of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorSpec {
    /// Which error.
    pub code: ErrorCode,
    /// JSON-RPC `error.code`.
    pub jsonrpc: i32,
    /// HTTP status on the REST binding.
    pub http: u16,
    /// gRPC status.
    pub grpc: GrpcCode,
    /// `ErrorInfo.reason`: the spec's error name in UPPER_SNAKE_CASE.
    pub reason: &'static str,
    /// Message used when none is given.
    pub default_message: &'static str,
}

macro_rules! catalogue {
    ($($code:ident, $rpc:expr, $http:expr, $grpc:ident, $reason:expr, $msg:expr;)*) => {
        /// Every error with its JSON-RPC, HTTP and gRPC forms (v1 §5.4, JSON-RPC 2.0 §5.1).
        pub const CATALOGUE: &[ErrorSpec] = &[
            $(ErrorSpec {
                code: ErrorCode::$code,
                jsonrpc: $rpc,
                http: $http,
                grpc: GrpcCode::$grpc,
                reason: $reason,
                default_message: $msg,
            },)*
        ];

        impl ErrorCode {
            /// This error's catalogue row.
            pub const fn spec(self) -> &'static ErrorSpec {
                let mut i = 0;
                while i < CATALOGUE.len() {
                    if CATALOGUE[i].code as u8 == self as u8 {
                        return &CATALOGUE[i];
                    }
                    i += 1;
                }
                &CATALOGUE[0]
            }
        }
    };
}

catalogue! {
    ParseError, -32700, 400, InvalidArgument, "PARSE_ERROR", "Invalid JSON payload";
    InvalidRequest, -32600, 400, InvalidArgument, "INVALID_REQUEST", "Request payload validation error";
    MethodNotFound, -32601, 404, Unimplemented, "METHOD_NOT_FOUND", "Method not found";
    InvalidParams, -32602, 400, InvalidArgument, "INVALID_PARAMS", "Invalid parameters";
    Internal, -32603, 500, Internal, "INTERNAL", "Internal error";
    TaskNotFound, -32001, 404, NotFound, "TASK_NOT_FOUND", "Task not found";
    TaskNotCancelable, -32002, 400, FailedPrecondition, "TASK_NOT_CANCELABLE", "Task cannot be canceled";
    PushNotificationNotSupported, -32003, 400, FailedPrecondition, "PUSH_NOTIFICATION_NOT_SUPPORTED", "Push notifications are not supported";
    UnsupportedOperation, -32004, 400, FailedPrecondition, "UNSUPPORTED_OPERATION", "This operation is not supported";
    ContentTypeNotSupported, -32005, 400, InvalidArgument, "CONTENT_TYPE_NOT_SUPPORTED", "Incompatible content types";
    InvalidAgentResponse, -32006, 500, Internal, "INVALID_AGENT_RESPONSE", "Invalid agent response";
    ExtendedAgentCardNotConfigured, -32007, 400, FailedPrecondition, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", "Extended agent card is not configured";
    ExtensionSupportRequired, -32008, 400, FailedPrecondition, "EXTENSION_SUPPORT_REQUIRED", "A required extension was not activated";
    VersionNotSupported, -32009, 400, FailedPrecondition, "VERSION_NOT_SUPPORTED", "Protocol version not supported";
    ResourceExhausted, -32029, 429, ResourceExhausted, "RESOURCE_EXHAUSTED", "Too many requests; retry later";
    Unauthenticated, -32040, 401, Unauthenticated, "UNAUTHENTICATED", "Authentication required";
    PermissionDenied, -32043, 403, PermissionDenied, "PERMISSION_DENIED", "Permission denied";
    Unavailable, -32053, 503, Unavailable, "UNAVAILABLE", "A service the server depends on is unavailable; retry later";
    BudgetExceeded, -32042, 402, FailedPrecondition, "BUDGET_EXCEEDED", "Budget exceeded";
    DelegationRefused, -32044, 400, FailedPrecondition, "DELEGATION_REFUSED", "Delegation refused";
}

impl ErrorCode {
    /// The error whose JSON-RPC code is `code`.
    pub fn from_jsonrpc(code: i64) -> Option<Self> {
        CATALOGUE
            .iter()
            .find(|s| i64::from(s.jsonrpc) == code)
            .map(|s| s.code)
    }

    /// The error whose `ErrorInfo.reason` is `reason`.
    pub fn from_reason(reason: &str) -> Option<Self> {
        CATALOGUE
            .iter()
            .find(|s| s.reason == reason)
            .map(|s| s.code)
    }

    /// True for the A2A-specific errors (-32001…-32009), which must carry an `ErrorInfo`.
    pub fn is_a2a(self) -> bool {
        (-32099..=-32001).contains(&self.spec().jsonrpc)
    }
}

/// One bad request field: its path (`message.parts[0].text`) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldViolation {
    /// Path of the field in the request, dotted, with `[i]` for list items.
    pub field: String,
    /// What is wrong with it.
    pub description: String,
}

/// An A2A error: a catalogue code, a message for people, and context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct A2aError {
    /// Which catalogue entry.
    pub code: ErrorCode,
    /// Human-readable explanation.
    pub message: String,
    /// `ErrorInfo.metadata` (for example `taskId`).
    pub metadata: BTreeMap<String, String>,
    /// Bad fields, sent as `google.rpc.BadRequest`.
    pub violations: Vec<FieldViolation>,
}

impl fmt::Display for A2aError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.spec().reason,
            self.code.spec().jsonrpc,
            self.message
        )
    }
}

impl std::error::Error for A2aError {}

impl From<ErrorCode> for A2aError {
    fn from(code: ErrorCode) -> Self {
        Self::new(code, code.spec().default_message)
    }
}

impl A2aError {
    /// An error with a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            metadata: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// Adds an `ErrorInfo.metadata` entry.
    #[must_use]
    pub fn with_meta(mut self, key: &str, value: impl Into<String>) -> Self {
        self.metadata.insert(key.to_owned(), value.into());
        self
    }

    /// ResourceExhausted, to be retried after `retry_after` (rounded up to
    /// whole seconds, at least one).
    pub fn exhausted(message: impl Into<String>, retry_after: std::time::Duration) -> Self {
        let secs = retry_after
            .as_secs()
            .saturating_add(u64::from(retry_after.subsec_nanos() > 0))
            .max(1);
        Self::new(ErrorCode::ResourceExhausted, message)
            .with_meta(RETRY_AFTER_KEY, secs.to_string())
    }

    /// The whole seconds a client should wait before retrying, when the
    /// error says (see [`A2aError::exhausted`]).
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.metadata.get(RETRY_AFTER_KEY)?.parse().ok()
    }

    /// InvalidParams naming the bad field.
    pub fn invalid_field(field: impl Into<String>, description: impl Into<String>) -> Self {
        let (field, description) = (field.into(), description.into());
        let message = if field.is_empty() {
            description.clone()
        } else {
            format!("{field}: {description}")
        };
        Self {
            code: ErrorCode::InvalidParams,
            message,
            metadata: BTreeMap::new(),
            violations: vec![FieldViolation { field, description }],
        }
    }

    /// TaskNotFound for `task_id`.
    pub fn task_not_found(task_id: &str) -> Self {
        Self::new(ErrorCode::TaskNotFound, format!("task {task_id} not found"))
            .with_meta("taskId", task_id)
    }

    /// An internal error; the detail is for logs, the caller sees a generic message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    /// The `@type`-tagged detail objects (ProtoJSON `Any`): an `ErrorInfo`
    /// (mandatory for A2A errors, v1 §11.6; given for every error so clients
    /// can tell them apart by `reason`), and a `BadRequest` when fields are named.
    pub fn details_json(&self) -> Vec<Value> {
        let spec = self.code.spec();
        let mut details = Vec::with_capacity(2);
        {
            let mut info = json!({
                "@type": rpc::ERROR_INFO_TYPE,
                "reason": spec.reason,
                "domain": ERROR_DOMAIN,
            });
            if !self.metadata.is_empty() {
                info["metadata"] = json!(self.metadata);
            }
            details.push(info);
        }
        if !self.violations.is_empty() {
            let fv: Vec<Value> = self
                .violations
                .iter()
                .map(|v| json!({"field": v.field, "description": v.description}))
                .collect();
            details.push(json!({"@type": rpc::BAD_REQUEST_TYPE, "fieldViolations": fv}));
        }
        details
    }

    /// The JSON-RPC error object. `error.data` is the array of detail objects
    /// (v1 §9.5); it is omitted when there are none.
    pub fn to_jsonrpc(&self) -> ErrorObject {
        let details = self.details_json();
        ErrorObject {
            code: i64::from(self.code.spec().jsonrpc),
            message: self.message.clone(),
            data: (!details.is_empty()).then_some(Value::Array(details)),
        }
    }

    /// The REST error: HTTP status and `{"error": google.rpc.Status}` body (v1 §11.6).
    pub fn to_http_body(&self) -> (u16, Value) {
        let status = self.code.spec().http;
        (status, self.http_body_with_status(status))
    }

    /// The REST body of this error answered with HTTP `status` instead of the
    /// catalogue's (a 415 for a body that is not JSON, a 413 for one too
    /// large): `error.code` is always the HTTP status sent (v1 §11.6).
    pub fn http_body_with_status(&self, status: u16) -> Value {
        json!({
            "error": {
                "code": status,
                "status": self.code.spec().grpc.name(),
                "message": self.message,
                "details": self.details_json(),
            }
        })
    }

    /// The gRPC status with `ErrorInfo` (and `BadRequest`) packed in its details (v1 §10.6).
    pub fn to_grpc_status(&self) -> rpc::Status {
        let spec = self.code.spec();
        let mut details = Vec::new();
        {
            let info = rpc::ErrorInfo {
                reason: spec.reason.to_owned(),
                domain: ERROR_DOMAIN.to_owned(),
                metadata: self
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            };
            details.push(rpc::Any::pack(rpc::ERROR_INFO_TYPE, &info));
        }
        if !self.violations.is_empty() {
            let br = rpc::BadRequest {
                field_violations: self
                    .violations
                    .iter()
                    .map(|v| rpc::FieldViolation {
                        field: v.field.clone(),
                        description: v.description.clone(),
                    })
                    .collect(),
            };
            details.push(rpc::Any::pack(rpc::BAD_REQUEST_TYPE, &br));
        }
        rpc::Status {
            code: spec.grpc as i32,
            message: self.message.clone(),
            details,
        }
    }

    /// Reads an error back from a JSON-RPC error object (client side). Codes
    /// outside the catalogue become `Internal`, keeping the peer's message.
    pub fn from_jsonrpc(obj: &ErrorObject) -> Self {
        let code = ErrorCode::from_jsonrpc(obj.code).unwrap_or(ErrorCode::Internal);
        let mut err = Self::new(code, obj.message.clone());
        if let Some(Value::Array(details)) = &obj.data {
            err.absorb_details(details);
        }
        err
    }

    /// Reads an error back from a REST `{"error": Status}` body and its HTTP status.
    pub fn from_http_body(status: u16, body: &Value) -> Self {
        let e = &body["error"];
        let message = e["message"].as_str().unwrap_or("").to_owned();
        let reason = e["details"]
            .as_array()
            .and_then(|d| d.iter().find(|x| x["@type"] == rpc::ERROR_INFO_TYPE))
            .and_then(|x| x["reason"].as_str())
            .and_then(ErrorCode::from_reason);
        let code = reason.unwrap_or(match status {
            404 => ErrorCode::TaskNotFound,
            400 => ErrorCode::InvalidParams,
            _ => ErrorCode::Internal,
        });
        let mut err = Self::new(code, message);
        if let Some(details) = e["details"].as_array() {
            err.absorb_details(details);
        }
        err
    }

    /// Reads an error back from a gRPC status's `google.rpc.Status` details.
    pub fn from_grpc_status(status: &rpc::Status) -> Self {
        let mut code = match status.code {
            5 => ErrorCode::TaskNotFound,
            3 => ErrorCode::InvalidParams,
            12 => ErrorCode::MethodNotFound,
            _ => ErrorCode::Internal,
        };
        let mut err_meta = BTreeMap::new();
        let mut violations = Vec::new();
        for any in &status.details {
            if any.type_url == rpc::ERROR_INFO_TYPE {
                if let Ok(info) = rpc::ErrorInfo::decode(any.value.as_slice()) {
                    if let Some(c) = ErrorCode::from_reason(&info.reason) {
                        code = c;
                    }
                    err_meta.extend(info.metadata);
                }
            } else if any.type_url == rpc::BAD_REQUEST_TYPE
                && let Ok(br) = rpc::BadRequest::decode(any.value.as_slice())
            {
                {
                    violations.extend(br.field_violations.into_iter().map(|v| FieldViolation {
                        field: v.field,
                        description: v.description,
                    }));
                }
            }
        }
        Self {
            code,
            message: status.message.clone(),
            metadata: err_meta,
            violations,
        }
    }

    fn absorb_details(&mut self, details: &[Value]) {
        for d in details {
            if d["@type"] == rpc::ERROR_INFO_TYPE {
                if let Some(c) = d["reason"].as_str().and_then(ErrorCode::from_reason) {
                    self.code = c;
                }
                if let Some(m) = d["metadata"].as_object() {
                    for (k, v) in m {
                        if let Some(s) = v.as_str() {
                            self.metadata.insert(k.clone(), s.to_owned());
                        }
                    }
                }
            } else if d["@type"] == rpc::BAD_REQUEST_TYPE {
                for v in d["fieldViolations"].as_array().into_iter().flatten() {
                    self.violations.push(FieldViolation {
                        field: v["field"].as_str().unwrap_or("").to_owned(),
                        description: v["description"].as_str().unwrap_or("").to_owned(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_rows_are_unique_and_complete() {
        for (i, a) in CATALOGUE.iter().enumerate() {
            assert_eq!(a.code.spec(), a, "spec() finds its own row");
            for b in &CATALOGUE[i + 1..] {
                assert_ne!(a.jsonrpc, b.jsonrpc);
                assert_ne!(a.reason, b.reason);
            }
        }
        assert_eq!(CATALOGUE.len(), 20, "one row per ErrorCode variant");
    }

    #[test]
    fn every_error_round_trips_through_each_binding_form() {
        for spec in CATALOGUE {
            let err = A2aError::new(spec.code, "boom").with_meta("taskId", "t-1");
            assert_eq!(A2aError::from_jsonrpc(&err.to_jsonrpc()).code, spec.code);
            let (status, body) = err.to_http_body();
            assert_eq!(status, spec.http);
            assert_eq!(body["error"]["status"], spec.grpc.name());
            assert_eq!(A2aError::from_http_body(status, &body), err);
            let grpc = err.to_grpc_status();
            assert_eq!(grpc.code, spec.grpc as i32);
            assert_eq!(A2aError::from_grpc_status(&grpc), err);
        }
    }

    #[test]
    fn a2a_errors_carry_error_info_with_domain() {
        let err = A2aError::task_not_found("abc");
        let rpc = err.to_jsonrpc();
        assert_eq!(rpc.code, -32001);
        let data = rpc.data.expect("details");
        assert_eq!(data[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(data[0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(data[0]["domain"], "a2a-protocol.org");
        assert_eq!(data[0]["metadata"]["taskId"], "abc");
    }

    #[test]
    fn invalid_params_names_the_field() {
        let err =
            A2aError::invalid_field("message.parts[1]", "exactly one of text, raw, url, data");
        assert_eq!(err.to_jsonrpc().code, -32602);
        let (_, body) = err.to_http_body();
        assert_eq!(
            body["error"]["details"][1]["fieldViolations"][0]["field"],
            "message.parts[1]"
        );
    }
}
