//! Every wire name of an operation (JSON-RPC method names of each version,
//! gRPC method names and service paths, REST routes) is written once in
//! production code: in the method table, `heddle-core/src/method.rs`. The
//! routers, the client, the gRPC paths and the auth layer read it there.
//!
//! The test reads every crate's `src/`, leaves out test code (files named
//! `tests.rs` or `*_tests.rs`, and everything from a file's first
//! `#[cfg(test)]`), and looks at string literals only.

use std::{
    fs,
    path::{Path, PathBuf},
};

use heddle_core::method::{GRPC_SERVICE_V1, GRPC_SERVICE_V03, METHODS};

/// Where the names live.
const TABLE: &str = "heddle-core/src/method.rs";

/// The v0.3 conversion, which also writes and reads v0.3 proto resource
/// names (`tasks/{id}/pushNotificationConfigs/{configId}`): names of a
/// resource, not routes, so route fragments are not looked for there.
const RESOURCE_NAMES: &str = "heddle-core/src/compat/v03_proto.rs";

/// Fragments only a REST route holds.
const ROUTE_FRAGMENTS: &[&str] = &[
    "message:",
    ":cancel",
    ":subscribe",
    "pushNotificationConfigs",
    "extendedAgentCard",
    "/v1/card",
    "/tasks",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The string literals of a file's production code, with their line numbers.
fn literals(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('"') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('"') else {
                break;
            };
            out.push((n + 1, after[..close].to_owned()));
            rest = &after[close + 1..];
        }
    }
    out
}

#[test]
fn every_wire_name_is_written_once_in_production_code() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in fs::read_dir(&crates).expect("crates dir").flatten() {
        rust_files(&entry.path().join("src"), &mut files);
    }
    assert!(files.len() > 20, "found the workspace's sources");

    let mut exact: Vec<&str> = Vec::new();
    for n in METHODS {
        exact.extend(
            [Some(n.v1), n.v03, n.v03_grpc, n.legacy]
                .into_iter()
                .flatten(),
        );
    }
    exact.extend([GRPC_SERVICE_V1, GRPC_SERVICE_V03]);

    let mut found = Vec::new();
    for file in &files {
        let shown = file
            .strip_prefix(&crates)
            .unwrap_or(file)
            .display()
            .to_string();
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if shown.ends_with(TABLE) || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let text = fs::read_to_string(file).expect("read source");
        for (line, lit) in literals(&text) {
            let resource_name = shown.ends_with(RESOURCE_NAMES);
            let is_name = exact.contains(&lit.as_str())
                || lit.contains("A2AService")
                || (!resource_name && ROUTE_FRAGMENTS.iter().any(|f| lit.contains(f)));
            if is_name {
                found.push(format!("{shown}:{line}: \"{lit}\""));
            }
        }
    }
    assert!(
        found.is_empty(),
        "wire names written outside {TABLE}; read them from heddle_core::method:\n{}",
        found.join("\n")
    );
}
