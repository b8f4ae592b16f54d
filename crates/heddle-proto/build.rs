//! Generates the A2A protocol types from `proto/` at build time.
//!
//! protoc comes from `protoc-bin-vendored`, so a fresh machine needs nothing
//! installed. prost writes the types, pbjson their ProtoJSON serde impls, and
//! (with the `grpc` feature) tonic the service stubs. Everything lands in
//! `OUT_DIR`; nothing generated is checked in.

use std::{env, error::Error, fs, path::PathBuf};

const PROTOS: [&str; 2] = ["proto/lf/a2a/v1/a2a.proto", "proto/a2a/v1/a2a.proto"];

fn main() -> Result<(), Box<dyn Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptors = out.join("a2a_descriptors.bin");
    let includes = [PathBuf::from("proto"), protoc_bin_vendored::include_path()?];
    let protos = PROTOS.map(PathBuf::from);

    let mut config = prost_build::Config::new();
    config
        .protoc_executable(protoc_bin_vendored::protoc_bin_path()?)
        .file_descriptor_set_path(&descriptors);

    let grpc = env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        .build_transport(false)
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "crate::wkt")
        .compile_with_config(config, &protos, &includes)?;

    pbjson_build::Builder::new()
        .register_descriptors(&fs::read(&descriptors)?)?
        .ignore_unknown_fields()
        .extern_path(".google.protobuf", "crate::wkt")
        // Hand-written in src/manual_serde.rs (see there for why).
        .exclude([
            ".lf.a2a.v1.ListTasksResponse",
            ".lf.a2a.v1.Part",
            ".lf.a2a.v1.Message",
        ])
        .build(&[".lf.a2a.v1", ".a2a.v1"])?;
    Ok(())
}
