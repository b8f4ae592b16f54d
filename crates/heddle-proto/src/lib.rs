//! The A2A wire model, generated from the project's own `.proto` files.
//!
//! * [`v1`] is A2A v1.0 (`lf.a2a.v1`), the model the rest of Heddle speaks.
//! * [`v03`] is the v0.3 gRPC model (`a2a.v1`), used only at the gRPC and
//!   v0.3-REST edges; the v0.3 JSON-RPC shapes live in `heddle-core::compat`.
//!
//! Every message implements `prost::Message` (binary) and serde's
//! `Serialize`/`Deserialize` in the exact ProtoJSON form: camelCase out,
//! camelCase or snake_case in, enums by name (integers accepted), oneof members
//! named for their type, unknown fields ignored. The types are generated into
//! `OUT_DIR` at build time; see `build.rs`.
//!
//! The well-known types the A2A protos use (`Struct`, `Value`, `Timestamp`,
//! `Empty`) are Heddle's own, in [`wkt`]: `Struct` and `Value` wrap
//! `serde_json` values so users handle `data` and `metadata` as ordinary JSON,
//! and `Timestamp` prints the RFC 3339 `Z` form ProtoJSON requires.
#![allow(missing_docs)] // generated code carries the proto comments instead

/// A2A v1.0, protobuf package `lf.a2a.v1`.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, clippy::unwrap_used)]
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// A2A v0.3 gRPC binding, protobuf package `a2a.v1`.
pub mod v03 {
    #![allow(clippy::all, clippy::pedantic, clippy::unwrap_used)]
    include!(concat!(env!("OUT_DIR"), "/a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/a2a.v1.serde.rs"));
}

pub use manual_serde::{PART_CONTENT_MEMBERS, decode_base64};
mod manual_serde;
pub mod rpc;
mod v1_ext;
pub mod wkt;

/// The encoded `FileDescriptorSet` of both A2A packages, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/a2a_descriptors.bin"));
