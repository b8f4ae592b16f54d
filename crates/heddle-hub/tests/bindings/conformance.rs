//! What public A2A conformance suites check beyond the basic table (issue
//! 20): endpoints reached however a client joins paths, selectable card
//! versions, the v0.3 behaviours real clients meet, the error forms, and the
//! conformance agent's switches. Each row runs on every wire it applies to;
//! `docs/conformance.md` lists them by spec section.

use heddle_core::{ProtocolVersion, VersionSet};
use heddle_hub::agents::{ConformanceCard, REQUIRED_EXTENSION};

use super::*;

/// An HTTP call with extra headers; JSON bodies are sent as JSON.
async fn http_with(
    app: &Router,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Option<String>, Vec<u8>) {
    let mut b = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string())),
        None => b.body(Body::empty()),
    }
    .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, ct, body.to_vec())
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// The send each wire makes, as (path under the agent, body), for the HTTP wires.
fn http_send(w: Wire, id: &str) -> (&'static str, Value) {
    let m = w.message(id, "hi", None);
    match w {
        Wire::JsonRpcV1 => (
            "/a2a",
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": m}}),
        ),
        Wire::JsonRpcV03 => (
            "/a2a",
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": m}}),
        ),
        Wire::RestV1 => ("/rest/message:send", json!({"message": m})),
        Wire::RestV03 => (
            "/rest/v1/message:send",
            json!({"message": {"messageId": id, "role": "ROLE_USER", "content": [{"text": "hi"}]}}),
        ),
        Wire::GrpcV1 | Wire::GrpcV03 => unreachable!("gRPC has no paths"),
    }
}

const HTTP_WIRES: [Wire; 4] = [
    Wire::JsonRpcV1,
    Wire::JsonRpcV03,
    Wire::RestV1,
    Wire::RestV03,
];

/// The failure in an HTTP answer: a JSON-RPC error or a REST error body.
fn http_failure(w: Wire, status: u16, body: &[u8]) -> Option<Failure> {
    match w {
        Wire::JsonRpcV1 | Wire::JsonRpcV03 => json_of(body).get("error").map(reason_of_jsonrpc),
        _ => (status != 200).then(|| reason_of_rest(body)),
    }
}

/// v1 §5.3/§9/§11 endpoints; the spec's URLs carry no trailing slash, but
/// clients that join paths add one. gRPC has no paths.
#[tokio::test]
async fn trailing_and_doubled_slashes_reach_the_same_endpoint() {
    let app = app_setup(Setup {
        default_agent: Some("echo"),
        ..Setup::default()
    })
    .await;
    for w in HTTP_WIRES {
        let (path, body) = http_send(w, "slash");
        let base = "/api/v1/agents/echo";
        let joined = match path.strip_prefix("/rest/") {
            Some(rest) => vec![format!("{base}/rest//{rest}"), format!("{base}{path}/")],
            None => vec![format!("{base}{path}/")],
        };
        for uri in joined {
            let (status, _, bytes) = http_with(
                &app.router,
                Method::POST,
                &uri,
                &version_header(w),
                Some(body.clone()),
            )
            .await;
            assert_eq!(status, 200, "{w:?} {uri}");
            assert_eq!(http_failure(w, status, &bytes), None, "{w:?} {uri}");
        }
    }
    for uri in [
        "/api/v1/agents/echo/.well-known/agent-card.json/",
        "/.well-known/agent-card.json/",
        "//.well-known/agent-card.json",
    ] {
        let (status, _, bytes) = http_with(&app.router, Method::GET, uri, &[], None).await;
        assert_eq!(status, 200, "{uri}");
        assert_eq!(json_of(&bytes)["name"], "Echo", "{uri}");
    }
}

fn version_header(w: Wire) -> Vec<(&'static str, &'static str)> {
    w.version()
        .map(|v| vec![("A2A-Version", v)])
        .unwrap_or_default()
}

/// `--card-versions`: the card lists only the versions served; every call
/// in another version is VersionNotSupported on its binding (v1 §3.6.2,
/// §5.4: gRPC FAILED_PRECONDITION per v1.0.1, REST 400, JSON-RPC -32009).
#[tokio::test]
async fn card_versions_choose_the_card_and_the_versions_served() {
    for only in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
        let app = app_setup(Setup {
            versions: Some(VersionSet::only(only)),
            default_agent: Some("echo"),
            ..Setup::default()
        })
        .await;
        let (_, _, card) = http_with(
            &app.router,
            Method::GET,
            "/.well-known/agent-card.json",
            &[],
            None,
        )
        .await;
        let card = json_of(&card);
        let versions: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .expect("interfaces")
            .iter()
            .filter_map(|i| i["protocolVersion"].as_str())
            .collect();
        assert_eq!(versions, [only.as_str(); 3], "{only}");
        if only == ProtocolVersion::V1_0 {
            // A strict v1.0 card: none of the v0.3 members.
            for key in [
                "url",
                "protocolVersion",
                "preferredTransport",
                "additionalInterfaces",
            ] {
                assert!(card.get(key).is_none(), "{key} in {card}");
            }
        }
        for w in WIRES {
            let sent = w
                .send(&app, "echo", w.message("cv", "hi", None), false)
                .await;
            let served = if w.is_v03() {
                ProtocolVersion::V0_3
            } else {
                ProtocolVersion::V1_0
            };
            if served == only {
                assert_eq!(state(&sent.expect("served")), v1::TaskState::Completed);
            } else {
                assert_eq!(
                    sent.expect_err("not served"),
                    Failure("VERSION_NOT_SUPPORTED".into()),
                    "{only} {w:?}"
                );
            }
        }
        if only == ProtocolVersion::V1_0 {
            // The v0.3 card endpoints are refused as well.
            let (status, _, body) = http_with(
                &app.router,
                Method::GET,
                "/api/v1/agents/echo/rest/v1/card",
                &[],
                None,
            )
            .await;
            assert_eq!(
                (status, reason_of_rest(&body)),
                (400, Failure("VERSION_NOT_SUPPORTED".into()))
            );
            let e = Wire::v03_client(&app)
                .get_agent_card(Wire::GrpcV03.grpc_request("echo", pb::GetAgentCardRequest {}))
                .await
                .expect_err("no v0.3 card");
            assert_eq!(e.code(), tonic::Code::FailedPrecondition);
            assert_eq!(reason_of_grpc(&e), Failure("VERSION_NOT_SUPPORTED".into()));
        }
    }
}

/// The v0.3 conformance agent keeps one task open across follow-ups: each is
/// answered and the task returns to INPUT_REQUIRED until the client cancels.
#[tokio::test]
async fn the_v03_conformance_task_takes_three_follow_ups_until_canceled() {
    let app = app().await;
    for w in [Wire::JsonRpcV03, Wire::RestV03, Wire::GrpcV03] {
        let t = w
            .send(&app, "conformance", w.message("mt-0", "start", None), false)
            .await
            .expect("start");
        assert_eq!(state(&t), v1::TaskState::InputRequired, "{w:?}");
        for turn in 1..=3 {
            let text = format!("follow-up {turn}");
            let r = w
                .send(
                    &app,
                    "conformance",
                    w.message(&format!("mt-{turn}"), &text, Some(&t.id)),
                    false,
                )
                .await
                .expect("follow-up");
            assert_eq!(r.id, t.id, "{w:?}: the same task");
            assert_eq!(state(&r), v1::TaskState::InputRequired, "{w:?} {turn}");
            let answer = r
                .status
                .as_ref()
                .and_then(|s| s.message.as_ref())
                .map(v1::Message::text)
                .unwrap_or_default();
            assert!(answer.contains(&text), "{w:?}: {answer:?}");
        }
        let got = w.get(&app, "conformance", &t.id, None).await.expect("get");
        let users = got
            .history
            .iter()
            .filter(|m| m.role() == v1::Role::User)
            .count();
        assert_eq!(users, 4, "{w:?}: every follow-up in the history");
        let c = w.cancel(&app, "conformance", &t.id).await.expect("cancel");
        assert_eq!(state(&c), v1::TaskState::Canceled, "{w:?}");
    }
}

/// A config set without an id is named after its task (as the official SDKs
/// name it), so it reads back by that id on every wire, and by the task id
/// alone where v0.3 allows it (`tasks/pushNotificationConfig/get`, v0.3 §7.6.1).
#[tokio::test]
async fn a_push_config_set_without_an_id_reads_back_by_its_task() {
    let app = app_with(Some(heddle_server::PushOptions::default())).await;
    for w in WIRES {
        let t = w
            .send(&app, "echo", w.message("noid", "hi", None), false)
            .await
            .expect("send");
        let c = w
            .create_push(&app, "echo", &t.id, "", "https://hooks.example.com/n")
            .await
            .expect("create");
        assert_eq!(c.id, t.id, "{w:?}");
        w.create_push(&app, "echo", &t.id, "other", "https://hooks.example.com/o")
            .await
            .expect("another");
        let got = w.get_push(&app, "echo", &t.id, &t.id).await.expect("get");
        assert_eq!(got.url, "https://hooks.example.com/n", "{w:?}");
        if w == Wire::RestV03 {
            // The v0.3 List pages by query, in either ProtoJSON spelling.
            for q in ["page_size=1", "pageSize=1"] {
                let path = format!("/v1/tasks/{}/pushNotificationConfigs?{q}", t.id);
                let page = w
                    .rest(&app, Method::GET, "echo", &path, None)
                    .await
                    .expect("list");
                assert_eq!(
                    page["configs"].as_array().map(Vec::len),
                    Some(1),
                    "{q}: {page}"
                );
                assert!(
                    page["nextPageToken"]
                        .as_str()
                        .is_some_and(|t| !t.is_empty()),
                    "{page}"
                );
            }
        }
        if w == Wire::JsonRpcV03 {
            let v = w
                .rpc(
                    &app,
                    "echo",
                    "",
                    "tasks/pushNotificationConfig/get",
                    json!({"id": t.id}),
                )
                .await
                .expect("get by task id");
            assert_eq!(
                v["pushNotificationConfig"]["url"],
                "https://hooks.example.com/n"
            );
            // A task whose configs all have ids of their own: its first.
            let t2 = w
                .send(&app, "echo", w.message("noid-2", "hi", None), false)
                .await
                .expect("send");
            w.create_push(&app, "echo", &t2.id, "named", "https://hooks.example.com/2")
                .await
                .expect("create");
            let v = w
                .rpc(
                    &app,
                    "echo",
                    "",
                    "tasks/pushNotificationConfig/get",
                    json!({"id": t2.id}),
                )
                .await
                .expect("first config");
            assert_eq!(v["pushNotificationConfig"]["id"], "named");
        }
    }
}

/// An unknown task is TaskNotFound on every wire; v0.3 `tasks/resubscribe`
/// says so inside an SSE stream (v0.3 §7.9, §7.2.1), the others in their
/// usual error form (v1 §9.5, §10.6, §11.6).
#[tokio::test]
async fn resubscribing_to_an_unknown_task_is_task_not_found_on_every_wire() {
    let app = app().await;
    let not_found = Some(Failure("TASK_NOT_FOUND".into()));
    for w in WIRES {
        let failure = match w {
            Wire::GrpcV1 => {
                let req = v1::SubscribeToTaskRequest {
                    tenant: "echo".into(),
                    id: "nope".into(),
                };
                let e = Wire::v1_client(&app)
                    .subscribe_to_task(w.grpc_request("echo", req))
                    .await
                    .expect_err("unknown");
                assert_eq!(e.code(), tonic::Code::NotFound);
                Some(reason_of_grpc(&e))
            }
            Wire::GrpcV03 => {
                let req = pb::TaskSubscriptionRequest {
                    name: conv::task_name("nope"),
                };
                let e = Wire::v03_client(&app)
                    .task_subscription(w.grpc_request("echo", req))
                    .await
                    .expect_err("unknown");
                assert_eq!(e.code(), tonic::Code::NotFound);
                Some(reason_of_grpc(&e))
            }
            Wire::JsonRpcV03 => {
                let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tasks/resubscribe", "params": {"id": "nope"}});
                let (status, ct, bytes) = http_with(
                    &app.router,
                    Method::POST,
                    "/api/v1/agents/echo/a2a",
                    &[],
                    Some(body),
                )
                .await;
                assert_eq!(status, 200);
                assert_eq!(ct.as_deref(), Some("text/event-stream"));
                let events = sse_data(&bytes);
                assert_eq!(events.len(), 1, "one event");
                assert_eq!(events[0]["id"], 7);
                events[0].get("error").map(reason_of_jsonrpc)
            }
            _ => {
                let (path, body) = match w {
                    Wire::JsonRpcV1 => (
                        "/a2a",
                        Some(
                            json!({"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": "nope"}}),
                        ),
                    ),
                    Wire::RestV1 => ("/rest/tasks/nope:subscribe", None),
                    _ => ("/rest/v1/tasks/nope:subscribe", None),
                };
                let uri = format!("/api/v1/agents/echo{path}");
                let (status, ct, bytes) =
                    http_with(&app.router, Method::POST, &uri, &version_header(w), body).await;
                assert_eq!(ct.as_deref(), Some("application/json"), "{w:?}");
                http_failure(w, status, &bytes)
            }
        };
        assert_eq!(failure, not_found, "{w:?}");
    }
}

/// v0.3 push `authentication` with no schemes (`{}`) means none, on each
/// v0.3 wire and in either ProtoJSON spelling on REST (v0.3 §6.9; the proto's
/// `AuthenticationInfo.schemes` is a plain repeated field).
#[tokio::test]
async fn an_empty_v03_push_authentication_means_none() {
    let app = app_with(Some(heddle_server::PushOptions::default())).await;
    for w in [Wire::JsonRpcV03, Wire::RestV03, Wire::GrpcV03] {
        let t = w
            .send(&app, "echo", w.message("ea", "hi", None), false)
            .await
            .expect("send");
        let url = "https://hooks.example.com/e";
        let created = match w {
            Wire::JsonRpcV03 => {
                let p = json!({"taskId": t.id, "pushNotificationConfig": {"id": "e1", "url": url, "authentication": {}}});
                w.rpc(&app, "echo", "", "tasks/pushNotificationConfig/set", p)
                    .await
                    .map(|_| ())
            }
            Wire::RestV03 => {
                let path = format!("/v1/tasks/{}/pushNotificationConfigs", t.id);
                for body in [
                    json!({"configId": "e1", "config": {"pushNotificationConfig": {"url": url, "authentication": {}}}}),
                    json!({"config_id": "e1", "config": {"push_notification_config": {"url": url, "authentication": {}}}}),
                ] {
                    w.rest(&app, Method::POST, "echo", &path, Some(body))
                        .await
                        .expect("created");
                }
                Ok(())
            }
            _ => {
                let req = pb::CreateTaskPushNotificationConfigRequest {
                    parent: conv::task_name(&t.id),
                    config_id: "e1".into(),
                    config: Some(pb::TaskPushNotificationConfig {
                        name: String::new(),
                        push_notification_config: Some(pb::PushNotificationConfig {
                            id: String::new(),
                            url: url.into(),
                            token: String::new(),
                            authentication: Some(pb::AuthenticationInfo::default()),
                        }),
                    }),
                };
                Wire::v03_client(&app)
                    .create_task_push_notification_config(w.grpc_request("echo", req))
                    .await
                    .map(|_| ())
                    .map_err(|s| reason_of_grpc(&s))
            }
        };
        assert_eq!(created, Ok(()), "{w:?}");
        let got = w.get_push(&app, "echo", &t.id, "e1").await.expect("get");
        assert_eq!((got.url.as_str(), got.authentication), (url, None), "{w:?}");
    }
}

/// ProtoJSON readers accept the proto field names as well as the JSON names
/// (ADR-001; the v0.3 REST binding is ProtoJSON of the v0.3 proto).
#[tokio::test]
async fn v03_rest_bodies_accept_proto_field_names() {
    let app = app().await;
    let body = json!({
        "request": {"message_id": "snake-1", "context_id": "ctx-snake", "role": "ROLE_USER", "content": [{"text": "snake"}]},
        "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 1, "blocking": true}
    });
    let v = Wire::RestV03
        .rest(&app, Method::POST, "echo", "/v1/message:send", Some(body))
        .await
        .expect("send");
    let task = &v["task"];
    assert_eq!(task["contextId"], "ctx-snake");
    assert_eq!(task["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "snake");
}

/// A negative `historyLength` is InvalidParams in both versions (v1 §3.2.4
/// defines only unset, 0 and positive values; v0.3 likewise).
#[tokio::test]
async fn a_negative_history_length_is_invalid_params_on_every_wire() {
    let app = app().await;
    for w in WIRES {
        let t = w
            .send(&app, "echo", w.message("nh", "hi", None), false)
            .await
            .expect("send");
        assert_eq!(
            w.get(&app, "echo", &t.id, Some(-1))
                .await
                .expect_err("negative"),
            Failure("INVALID_PARAMS".into()),
            "{w:?}"
        );
    }
}

/// REST errors carry the HTTP status in `error.code` (v1 §11.6), also when
/// the status is not the catalogue's: 415 for a body that is not JSON, 413
/// for one over the limit. JSON-RPC answers 415 with its own -32005.
#[tokio::test]
async fn rest_error_bodies_say_the_http_status_they_are_sent_with() {
    let app = app().await;
    let big = "x".repeat((8 << 20) + 1);
    for (w, path) in [
        (Wire::RestV1, "/api/v1/agents/echo/rest/message:send"),
        (Wire::RestV03, "/api/v1/agents/echo/rest/v1/message:send"),
        (Wire::JsonRpcV1, "/api/v1/agents/echo/a2a"),
    ] {
        for (ct, body, want) in [
            ("text/plain", "hi".to_owned(), 415),
            ("application/json", big.clone(), 413),
        ] {
            let mut req = Request::post(path).header(header::CONTENT_TYPE, ct);
            if let Some(v) = w.version() {
                req = req.header("A2A-Version", v);
            }
            let resp = app
                .router
                .clone()
                .oneshot(req.body(Body::from(body)).expect("request"))
                .await
                .expect("response");
            assert_eq!(resp.status().as_u16(), want, "{w:?} {ct}");
            let bytes = resp.into_body().collect().await.expect("body").to_bytes();
            let v = json_of(&bytes);
            if w == Wire::JsonRpcV1 {
                if want == 415 {
                    assert_eq!(v["error"]["code"], -32005, "{v}");
                }
            } else {
                assert_eq!(v["error"]["code"], want, "{w:?}: {v}");
            }
        }
        // And the catalogue's statuses: 404 for an unknown task.
        if w != Wire::JsonRpcV1 {
            let tasks = if w == Wire::RestV1 {
                "tasks"
            } else {
                "v1/tasks"
            };
            let uri = format!("/api/v1/agents/echo/rest/{tasks}/nope");
            let (status, _, bytes) =
                http_with(&app.router, Method::GET, &uri, &version_header(w), None).await;
            assert_eq!(
                (status, json_of(&bytes)["error"]["code"].clone()),
                (404, json!(404))
            );
        }
    }
}

/// `--conformance-required-extension`: the card declares the extension as
/// required and every call without it is ExtensionSupportRequired (v1
/// §3.3.4); with it (`A2A-Extensions`, gRPC `a2a-extensions`) the call runs.
#[tokio::test]
async fn the_conformance_agent_can_require_an_extension() {
    let app = app_setup(Setup {
        conformance: ConformanceCard {
            required_extension: true,
            ..ConformanceCard::default()
        },
        ..Setup::default()
    })
    .await;
    let (_, _, card) = http_with(
        &app.router,
        Method::GET,
        "/api/v1/agents/conformance/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    let ext = &json_of(&card)["capabilities"]["extensions"][0];
    assert_eq!(
        (ext["uri"].as_str(), ext["required"].as_bool()),
        (Some(REQUIRED_EXTENSION), Some(true))
    );
    for w in WIRES {
        let msg = w.message("tck-complete-task-x", "hi", None);
        assert_eq!(
            w.send(&app, "conformance", msg, false)
                .await
                .expect_err("no extension"),
            Failure("EXTENSION_SUPPORT_REQUIRED".into()),
            "{w:?}"
        );
    }
    // With the extension activated: each binding's way of saying so.
    for w in HTTP_WIRES {
        let (path, body) = http_send(w, "tck-complete-task-y");
        let mut headers = version_header(w);
        headers.push(("A2A-Extensions", REQUIRED_EXTENSION));
        let uri = format!("/api/v1/agents/conformance{path}");
        let (status, _, bytes) =
            http_with(&app.router, Method::POST, &uri, &headers, Some(body)).await;
        assert_eq!(http_failure(w, status, &bytes), None, "{w:?}");
    }
    let send = v1::SendMessageRequest {
        tenant: "conformance".into(),
        message: Some(v1::Message::new(
            "tck-complete-task-z",
            v1::Role::User,
            vec![v1::Part::text("hi")],
        )),
        ..Default::default()
    };
    let mut req = Wire::GrpcV1.grpc_request("conformance", send.clone());
    req.metadata_mut()
        .insert("a2a-extensions", REQUIRED_EXTENSION.parse().expect("value"));
    Wire::v1_client(&app)
        .send_message(req)
        .await
        .expect("v1.0 with the extension");
    let mut req = Wire::GrpcV03.grpc_request("conformance", conv::send_request_from_v1(&send));
    req.metadata_mut().insert(
        "x-a2a-extensions",
        REQUIRED_EXTENSION.parse().expect("value"),
    );
    Wire::v03_client(&app)
        .send_message(req)
        .await
        .expect("v0.3 with the extension");
}

/// `--conformance-no-streaming`: the card says `streaming: false` and the
/// streaming calls are UnsupportedOperation on every wire (v1 §3.3.4).
#[tokio::test]
async fn the_conformance_agent_can_run_without_streaming() {
    let app = app_setup(Setup {
        conformance: ConformanceCard {
            streaming: false,
            ..ConformanceCard::default()
        },
        ..Setup::default()
    })
    .await;
    let (_, _, card) = http_with(
        &app.router,
        Method::GET,
        "/api/v1/agents/conformance/.well-known/agent-card.json",
        &[],
        None,
    )
    .await;
    assert_eq!(json_of(&card)["capabilities"]["streaming"], false);
    let unsupported = Some(Failure("UNSUPPORTED_OPERATION".into()));
    for w in WIRES {
        let message = w.message("tck-stream-001-x", "hi", None);
        let failure = match w {
            Wire::GrpcV1 | Wire::GrpcV03 => {
                let req = v1::SendMessageRequest {
                    tenant: "conformance".into(),
                    message: Some(serde_json::from_value(message).expect("v1 message")),
                    ..Default::default()
                };
                let r = if w == Wire::GrpcV1 {
                    Wire::v1_client(&app)
                        .send_streaming_message(w.grpc_request("conformance", req))
                        .await
                        .map(|_| ())
                } else {
                    Wire::v03_client(&app)
                        .send_streaming_message(
                            w.grpc_request("conformance", conv::send_request_from_v1(&req)),
                        )
                        .await
                        .map(|_| ())
                };
                r.err().map(|s| reason_of_grpc(&s))
            }
            _ => {
                let (path, body) = match w {
                    Wire::JsonRpcV1 => (
                        "/a2a",
                        json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": message}}),
                    ),
                    Wire::JsonRpcV03 => (
                        "/a2a",
                        json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}),
                    ),
                    Wire::RestV1 => ("/rest/message:stream", json!({"message": message})),
                    _ => (
                        "/rest/v1/message:stream",
                        json!({"message": {"messageId": "tck-stream-001-y", "role": "ROLE_USER", "content": [{"text": "hi"}]}}),
                    ),
                };
                let uri = format!("/api/v1/agents/conformance{path}");
                let (status, _, bytes) = http_with(
                    &app.router,
                    Method::POST,
                    &uri,
                    &version_header(w),
                    Some(body),
                )
                .await;
                http_failure(w, status, &bytes)
            }
        };
        assert_eq!(failure, unsupported, "{w:?}");
    }
}
