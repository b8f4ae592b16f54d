//! # heddle-core
//!
//! The A2A model as Heddle's users touch it, and the protocol tables every
//! binding reads:
//!
//! * [`v1`]: the A2A v1.0 types (generated from the project's `.proto`, with
//!   ProtoJSON serde), plus [`wkt`] for `Struct`/`Value`/`Timestamp`.
//! * [`jsonrpc`]: JSON-RPC 2.0 envelopes (string/number/null ids, batches).
//! * [`error`]: the error catalogue with its JSON-RPC, HTTP and gRPC forms.
//! * [`method`]: each operation's names in v1.0, v0.3 and legacy form.
//! * [`version`]: `A2A-Version` negotiation.
//! * [`validate`]: parsing with field-naming errors and the REQUIRED rules.
//! * [`compat`]: v0.3 and pre-0.2 shapes, converted to v1.0 in one place.
//! * [`card`]: v1.0, v0.3 and dual-version Agent Cards.
//!
//! ```
//! use heddle_core::{v1, validate::{from_json, Validate}};
//!
//! let req: v1::SendMessageRequest = from_json(br#"{
//!     "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
//! }"#).unwrap();
//! req.validate().unwrap();
//! assert_eq!(req.message.unwrap().parts[0].as_text(), Some("hi"));
//! ```

pub use heddle_proto::{rpc, v1, v03 as v03_proto, wkt};

pub mod call;
pub mod card;
pub mod compat;
pub mod error;
pub mod grpc_frame;
pub mod jsonrpc;
pub mod method;
pub mod sse;
pub mod task;
pub mod validate;
pub mod version;

pub use error::{A2aError, ErrorCode};
pub use version::{ProtocolVersion, VersionSet};
