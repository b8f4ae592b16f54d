//! `heddle task push-config …`, `send --wait` and the polling fallback, as a
//! user runs them against `heddle serve`.

use super::*;

const WIRES: [(&str, &str); 6] = [
    ("jsonrpc", "1.0"),
    ("jsonrpc", "0.3"),
    ("rest", "1.0"),
    ("rest", "0.3"),
    ("grpc", "1.0"),
    ("grpc", "0.3"),
];

/// `heddle ARGS -o json --binding B --a2a-version V`, which must succeed;
/// its standard output as JSON.
fn json_run(args: &[&str], binding: &str, version: &str) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json", "--binding", binding, "--a2a-version", version]);
    let (code, out, err) = heddle(&all);
    assert_eq!(code, 0, "{all:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{all:?}: {e}: {out}"))
}

#[test]
fn push_configs_from_the_command_line_on_every_wire() {
    let server = serve("memory");
    let writer = format!("{}/api/v1/agents/writer", server.url);
    for (binding, version) in WIRES {
        let label = format!("{binding} {version}");
        let task = json_run(&["send", &writer, "draft it"], binding, version);
        assert_eq!(
            task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{label}"
        );
        let id = task["id"].as_str().expect("task id");

        let hook = "https://hooks.example.com/cli";
        let set = json_run(
            &[
                "task",
                "push-config",
                "set",
                &writer,
                id,
                hook,
                "--id",
                "c1",
                "--token",
                "tok",
                "--auth-scheme",
                "Bearer",
                "--auth-credentials",
                "cred",
            ],
            binding,
            version,
        );
        assert_eq!(set["id"], "c1", "{label}: {set}");
        assert_eq!(set["taskId"], id, "{label}");
        assert_eq!(set["url"], hook, "{label}");
        assert_eq!(set["authentication"]["scheme"], "Bearer", "{label}");
        json_run(
            &[
                "task",
                "push-config",
                "set",
                &writer,
                id,
                hook,
                "--id",
                "c2",
            ],
            binding,
            version,
        );

        let got = json_run(
            &["task", "push-config", "get", &writer, id, "c1"],
            binding,
            version,
        );
        assert_eq!(got["token"], "tok", "{label}: {got}");
        let list = json_run(
            &["task", "push-config", "list", &writer, id],
            binding,
            version,
        );
        assert_eq!(
            list["configs"].as_array().map(Vec::len),
            Some(2),
            "{label}: {list}"
        );

        json_run(
            &["task", "push-config", "delete", &writer, id, "c1"],
            binding,
            version,
        );
        let list = json_run(
            &["task", "push-config", "list", &writer, id],
            binding,
            version,
        );
        assert_eq!(list["configs"][0]["id"], "c2", "{label}: {list}");
        let (code, _, err) = heddle(&[
            "task",
            "push-config",
            "get",
            &writer,
            id,
            "c1",
            "--binding",
            binding,
            "--a2a-version",
            version,
        ]);
        assert_eq!(code, 2, "{label}: a deleted config is an error");
        assert!(err.contains("c1"), "{label}: {err}");
    }

    // For people: the credentials are never printed.
    let task = json_run(&["send", &writer, "draft"], "jsonrpc", "1.0");
    let id = task["id"].as_str().expect("task id");
    let (code, out, err) = heddle(&[
        "task",
        "push-config",
        "set",
        &writer,
        id,
        "https://hooks.example.com/h",
        "--id",
        "h1",
        "--auth-scheme",
        "Bearer",
        "--auth-credentials",
        "s3cret",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("h1") && out.contains("auth Bearer"), "{out}");
    let (code, out, _) = heddle(&["task", "push-config", "list", &writer, id]);
    assert_eq!(code, 0);
    assert!(
        out.contains("(1 configs)") && !out.contains("s3cret"),
        "{out}"
    );
}

#[test]
fn send_wait_follows_a_task_that_was_returned_early() {
    let server = serve("memory");
    let stream = format!("{}/api/v1/agents/writer-stream", server.url);
    let early = json_run(
        &["send", &stream, "go", "--return-immediately"],
        "jsonrpc",
        "1.0",
    );
    assert_ne!(early["status"]["state"], "TASK_STATE_COMPLETED", "{early}");
    for (binding, version) in [("jsonrpc", "1.0"), ("rest", "0.3"), ("grpc", "1.0")] {
        let done = json_run(
            &["send", &stream, "go", "--return-immediately", "--wait"],
            binding,
            version,
        );
        assert_eq!(
            done["status"]["state"], "TASK_STATE_COMPLETED",
            "{binding} {version}"
        );
        assert_eq!(
            done["artifacts"].as_array().map(Vec::len),
            Some(1),
            "{done}"
        );
    }
}

#[test]
fn an_agent_that_does_not_stream_is_polled() {
    let server = serve_with("memory", &["--conformance-no-streaming"]);
    let conformance = format!("{}/api/v1/agents/conformance", server.url);
    for (binding, version) in [("jsonrpc", "1.0"), ("rest", "1.0"), ("grpc", "1.0")] {
        let (code, out, err) = heddle(&[
            "send",
            &conformance,
            "hi",
            "--stream",
            "--debug",
            "--binding",
            binding,
            "--a2a-version",
            version,
        ]);
        assert_eq!(code, 0, "{binding}: {err}");
        assert!(
            out.contains("COMPLETED") && out.contains("Received: hi"),
            "{binding}: {out}"
        );
        assert!(
            !err.contains("message:stream") && !err.contains("SendStreamingMessage"),
            "{binding}: no stream is asked for: {err}"
        );
    }
    // A task that works for a while, followed by polling to its end.
    let (code, out, err) = heddle(&[
        "send",
        &conformance,
        "hi",
        "--message-id",
        "test-resubscribe-message-id-cli",
        "--return-immediately",
        "--wait",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("COMPLETED") && out.contains("Done."), "{out}");
}
