//! What the CLI tests share: `heddle serve` as a child process, and one-shot
//! `heddle` runs. Each test file uses part of it.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Output, Stdio},
};

/// A running `heddle serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    /// Its base URL, from the banner.
    pub url: String,
    /// The banner's first line.
    pub banner: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `heddle serve` on ephemeral ports with `store` and `extra`
/// arguments; returns once its banner names the URL.
pub fn serve(store: &str, extra: &[&str]) -> Server {
    serve_logging(store, extra, &[], Stdio::null())
}

/// [`serve`] with `env` set and its log (stderr) going to `log`.
pub fn serve_logging(
    store: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    log: impl Into<Stdio>,
) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--grpc-listen",
            "127.0.0.1:0",
            "--store",
            store,
        ])
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("heddle serve starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout"));
    let mut banner = String::new();
    lines.read_line(&mut banner).expect("banner");
    // Keep draining stdout so the server never writes to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    let url = banner
        .split(" at ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("url in banner {banner:?}"))
        .to_owned();
    Server { child, url, banner }
}

/// Runs `heddle ARGS` to its end, with no input.
pub fn heddle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("heddle runs")
}

/// The URL of a service a test needs, from the environment variable `var`,
/// or `None` (after saying what was skipped) to skip: with
/// `HEDDLE_REQUIRE_SERVICES=1` (as `.ci/run` sets) a missing one fails.
pub fn service_url(test: &str, var: &str, what: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var("HEDDLE_REQUIRE_SERVICES").as_deref() != Ok("1"),
                "{test}: HEDDLE_REQUIRE_SERVICES=1 but {var} is not set"
            );
            println!("skipped: {test} needs {what} (set {var})");
            None
        }
    }
}
