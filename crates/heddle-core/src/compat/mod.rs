//! Older wire shapes, converted to and from v1.0 here and nowhere else.
//!
//! * [`v03`]: the v0.3 JSON-RPC model (`kind` discriminators, lowercase
//!   states, the `final` flag, TextPart/FilePart/DataPart, the OpenAPI-like
//!   security schemes and the v0.3 Agent Card).
//! * [`v03_proto`]: the v0.3 gRPC (protobuf `a2a.v1`) model, converted to
//!   and from v1.0 for the v0.3 gRPC binding.
//! * [`legacy`]: the pre-0.2 `tasks/send` / `tasks/sendSubscribe` params.
//!
//! Past the binding, nothing in Heddle knows these shapes exist.

pub mod legacy;
pub mod v03;
pub mod v03_proto;
