//! The `google.rpc` error messages A2A errors travel in on gRPC
//! (`grpc-status-details-bin`): `Status`, `ErrorInfo` and `BadRequest`,
//! written with the same field numbers as Google's `status.proto` and
//! `error_details.proto`. Their JSON forms (REST bodies, JSON-RPC `error.data`)
//! are built in `heddle-core`'s error module.

use std::collections::HashMap;

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// A `google.rpc.Code` value.
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// A developer-facing message.
    #[prost(string, tag = "2")]
    pub message: String,
    /// Typed details, such as [`ErrorInfo`].
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// `type.googleapis.com/<full message name>`.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The encoded message.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.ErrorInfo`: the machine-readable cause of an error.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorInfo {
    /// UPPER_SNAKE_CASE cause, e.g. `TASK_NOT_FOUND`.
    #[prost(string, tag = "1")]
    pub reason: String,
    /// `a2a-protocol.org` for A2A errors.
    #[prost(string, tag = "2")]
    pub domain: String,
    /// Extra context; values are strings.
    #[prost(map = "string, string", tag = "3")]
    pub metadata: HashMap<String, String>,
}

/// `google.rpc.BadRequest`: which request fields were wrong.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BadRequest {
    /// One entry per bad field.
    #[prost(message, repeated, tag = "1")]
    pub field_violations: Vec<FieldViolation>,
}

/// One bad field of a [`BadRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldViolation {
    /// Path of the field, e.g. `message.parts[0]`.
    #[prost(string, tag = "1")]
    pub field: String,
    /// Why it is wrong.
    #[prost(string, tag = "2")]
    pub description: String,
}

/// Type URL of [`ErrorInfo`] inside an `Any`.
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// Type URL of [`BadRequest`] inside an `Any`.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";

impl Any {
    /// Packs a message with its type URL.
    pub fn pack<M: prost::Message>(type_url: &str, msg: &M) -> Self {
        Self {
            type_url: type_url.to_owned(),
            value: msg.encode_to_vec(),
        }
    }
}
