//! What the hub's test files share.

/// The ways a caller can reach an agent: each binding in each version.
/// Each test file phrases its operations per wire in its own `impl Wire`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    JsonRpcV1,
    JsonRpcV03,
    RestV1,
    RestV03,
    GrpcV1,
    GrpcV03,
}

/// Every [`Wire`].
pub const WIRES: [Wire; 6] = [
    Wire::JsonRpcV1,
    Wire::JsonRpcV03,
    Wire::RestV1,
    Wire::RestV03,
    Wire::GrpcV1,
    Wire::GrpcV03,
];
