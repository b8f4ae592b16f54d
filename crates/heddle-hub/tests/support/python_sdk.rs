//! The official Python SDK's interop server (`tests/interop/servers/
//! python_server.py`, on the pinned `a2a-sdk`), started for a test when the
//! interop venv is installed.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// The interop venv's Python, or `None` (after saying why) when the test
/// should be skipped. `HEDDLE_REQUIRE_INTEROP=1` (as `.ci/run` sets) makes
/// a missing venv a failure instead.
pub fn interop_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/.venv/bin/python");
    if python.exists() {
        return Some(python);
    }
    let required = std::env::var("HEDDLE_REQUIRE_INTEROP").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "HEDDLE_REQUIRE_INTEROP=1 but {} is missing: run tests/interop/setup.sh",
        python.display()
    );
    println!(
        "skipped: the Python a2a-sdk server needs tests/interop/setup.sh (no {})",
        python.display()
    );
    None
}

/// A free loopback port.
pub async fn free_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    l.local_addr().expect("addr").port()
}

/// The Python server, running until dropped.
pub struct PythonServer {
    _child: tokio::process::Child,
    /// Its HTTP base (the card is at `/.well-known/agent-card.json`).
    pub url: String,
}

/// Starts the Python server on fresh ports and waits for its card; `None`
/// when the venv is missing (see [`interop_python`]).
pub async fn start() -> Option<PythonServer> {
    let python = interop_python()?;
    let (http_port, grpc_port) = (free_port().await, free_port().await);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/servers/python_server.py");
    let child = tokio::process::Command::new(python)
        .arg(script)
        .arg(http_port.to_string())
        .arg(grpc_port.to_string())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python server");
    let url = format!("http://127.0.0.1:{http_port}");
    let card = format!("{url}/.well-known/agent-card.json");
    let deadline = Instant::now() + Duration::from_secs(30);
    let http = heddle_client::reqwest::Client::new();
    loop {
        if let Ok(r) = http.get(&card).send().await
            && r.status().is_success()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Python server never served its card"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Some(PythonServer { _child: child, url })
}
