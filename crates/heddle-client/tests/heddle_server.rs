//! The client against Heddle's own server (a hub in this process, on real
//! listeners), over every binding in both versions: push configs, the other
//! operations, and polling where a card says the agent does not stream.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use heddle_client::{
    A2aClient, Binding, ClientError, ClientOptions, Polling, SendReply, TaskAccumulator, WireLog,
};
use heddle_core::{ErrorCode, ProtocolVersion, v1};
use heddle_hub::{
    AgentProfile, Hub,
    agents::{Echo, Writer, WriterStream},
};
use heddle_store::MemoryStore;

const WIRES: [(Binding, ProtocolVersion); 6] = [
    (Binding::JsonRpc, ProtocolVersion::V1_0),
    (Binding::JsonRpc, ProtocolVersion::V0_3),
    (Binding::Rest, ProtocolVersion::V1_0),
    (Binding::Rest, ProtocolVersion::V0_3),
    (Binding::Grpc, ProtocolVersion::V1_0),
    (Binding::Grpc, ProtocolVersion::V0_3),
];

/// A hub with the echo, writer and writer-stream agents, delivering push
/// notifications (so its cards declare them); returns its agents' base URL.
async fn hub() -> String {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let public_url = format!("http://{}", http.local_addr().expect("addr"));
    let grpc_addr = grpc.local_addr().expect("addr");
    let hub = Hub::builder(&public_url, Arc::new(MemoryStore::default()))
        .grpc_url(grpc_addr.to_string())
        .push(heddle_server::PushOptions::default())
        .agent(
            "echo",
            AgentProfile::new("echo", "Echo", "echo", &["t"]),
            Arc::new(Echo),
        )
        .agent(
            "writer",
            AgentProfile::new("writer", "Writer", "writer", &["t"]),
            Arc::new(Writer),
        )
        .agent(
            "writer-stream",
            AgentProfile::new("writer-stream", "Stream", "s", &["t"]),
            Arc::new(WriterStream {
                pause: Duration::from_millis(150),
                ..Default::default()
            }),
        )
        .build()
        .await;
    let grpc_app = hub.grpc_app().expect("gRPC");
    let never = std::future::pending::<()>;
    tokio::spawn(heddle_server::listen::serve(http, hub.router(), never()));
    tokio::spawn(heddle_server::listen::serve(grpc, grpc_app, never()));
    format!("{public_url}/api/v1/agents")
}

/// Everything the client put on the wire, one log line per entry.
#[derive(Clone, Default)]
struct Wire(Arc<Mutex<Vec<String>>>);

impl Wire {
    fn log(&self) -> WireLog {
        let lines = self.0.clone();
        Arc::new(move |line: &str| {
            if let Ok(mut l) = lines.lock() {
                l.push(line.to_owned());
            }
        })
    }

    fn text(&self) -> String {
        self.0.lock().map(|l| l.join("\n")).unwrap_or_default()
    }
}

fn options(binding: Binding, version: ProtocolVersion, wire: &Wire) -> ClientOptions {
    ClientOptions {
        bindings: vec![binding],
        version: Some(version),
        wire_log: Some(wire.log()),
        retries: 0,
        ..ClientOptions::default()
    }
}

async fn client(url: &str, binding: Binding, version: ProtocolVersion, wire: &Wire) -> A2aClient {
    let client = A2aClient::discover(url, options(binding, version, wire))
        .await
        .expect("discover");
    assert_eq!((client.binding(), client.version()), (binding, version));
    client
}

fn state(t: &v1::Task) -> v1::TaskState {
    t.status
        .as_ref()
        .map_or(v1::TaskState::Unspecified, |s| s.state())
}

fn task(reply: SendReply) -> v1::Task {
    match reply {
        SendReply::Task(t) => t,
        SendReply::Message(m) => panic!("a message, not a task: {m:?}"),
    }
}

fn config(task_id: &str, id: &str, url: &str) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: String::new(),
        id: id.into(),
        task_id: task_id.into(),
        url: url.into(),
        token: format!("token-{id}"),
        authentication: Some(v1::AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: "cred".into(),
        }),
    }
}

/// A config without its tenant, which only some wires echo.
fn untenanted(mut c: v1::TaskPushNotificationConfig) -> v1::TaskPushNotificationConfig {
    c.tenant.clear();
    c
}

fn a2a_code(err: &ClientError) -> Option<ErrorCode> {
    match err {
        ClientError::A2a(e) => Some(e.code),
        _ => None,
    }
}

/// The name each wire gives push config creation, as the wire log shows it.
fn create_name(binding: Binding, version: ProtocolVersion) -> &'static str {
    match (binding, version) {
        (Binding::JsonRpc, ProtocolVersion::V1_0) => "\"CreateTaskPushNotificationConfig\"",
        (Binding::JsonRpc, ProtocolVersion::V0_3) => "\"tasks/pushNotificationConfig/set\"",
        (Binding::Rest, ProtocolVersion::V1_0) => "> POST http",
        (Binding::Rest, ProtocolVersion::V0_3) => "/v1/tasks/",
        (Binding::Grpc, _) => "> gRPC CreateTaskPushNotificationConfig",
    }
}

#[tokio::test]
async fn push_configs_round_trip_on_every_wire() {
    let base = hub().await;
    for (binding, version) in WIRES {
        let wire = Wire::default();
        let client = client(&format!("{base}/writer"), binding, version, &wire).await;
        let label = format!("{binding:?} {version}");
        // The writer asks a question: its task stays open.
        let t = task(client.send_text("draft it").await.expect("send"));
        assert_eq!(state(&t), v1::TaskState::InputRequired, "{label}");

        let want = config(&t.id, "cfg-a", "https://hooks.example.com/a");
        let got = client
            .create_push_config(want.clone())
            .await
            .expect("create");
        assert_eq!(untenanted(got), want, "{label}");
        assert!(
            wire.text().contains(create_name(binding, version)),
            "{label}"
        );
        let named = client
            .create_push_config(config(&t.id, "", "https://hooks.example.com/b"))
            .await
            .expect("create without an id");
        assert!(!named.id.is_empty(), "{label}: the agent names it");
        assert_eq!(named.task_id, t.id, "{label}");

        let read = client.get_push_config(&t.id, "cfg-a").await.expect("get");
        assert_eq!(untenanted(read), want, "{label}");

        let all = client
            .list_push_configs(v1::ListTaskPushNotificationConfigsRequest {
                task_id: t.id.clone(),
                ..Default::default()
            })
            .await
            .expect("list");
        let mut ids: Vec<&str> = all.configs.iter().map(|c| c.id.as_str()).collect();
        ids.sort_unstable();
        let mut expected = vec!["cfg-a", named.id.as_str()];
        expected.sort_unstable();
        assert_eq!(ids, expected, "{label}");

        client
            .delete_push_config(&t.id, "cfg-a")
            .await
            .expect("delete");
        let gone = client
            .get_push_config(&t.id, "cfg-a")
            .await
            .expect_err("deleted");
        assert!(a2a_code(&gone).is_some(), "{label}: {gone:?}");
        let left = client
            .list_push_configs(v1::ListTaskPushNotificationConfigsRequest {
                task_id: t.id.clone(),
                ..Default::default()
            })
            .await
            .expect("list");
        assert_eq!(left.configs.len(), 1, "{label}");
        assert_eq!(left.configs[0].id, named.id, "{label}");

        let missing = client
            .create_push_config(config("no-such-task", "x", "https://hooks.example.com/x"))
            .await
            .expect_err("no such task");
        assert_eq!(
            a2a_code(&missing),
            Some(ErrorCode::TaskNotFound),
            "{label}: {missing:?}"
        );
        // The wire carries no v1.0 header in v0.3.
        let v1_header = wire.text().contains("A2A-Version: 1.0");
        if binding != Binding::Grpc {
            assert_eq!(v1_header, version == ProtocolVersion::V1_0, "{label}");
        }
    }
}

#[tokio::test]
async fn push_configs_page_on_the_wires_that_page() {
    let base = hub().await;
    for (binding, version) in WIRES {
        // v0.3 JSON-RPC answers with every config at once.
        if (binding, version) == (Binding::JsonRpc, ProtocolVersion::V0_3) {
            continue;
        }
        let wire = Wire::default();
        let client = client(&format!("{base}/writer"), binding, version, &wire).await;
        let t = task(client.send_text("draft it").await.expect("send"));
        for id in ["p1", "p2", "p3"] {
            client
                .create_push_config(config(&t.id, id, "https://hooks.example.com/p"))
                .await
                .expect("create");
        }
        let mut seen = Vec::new();
        let mut token = String::new();
        for _ in 0..5 {
            let page = client
                .list_push_configs(v1::ListTaskPushNotificationConfigsRequest {
                    task_id: t.id.clone(),
                    page_size: 2,
                    page_token: token.clone(),
                    ..Default::default()
                })
                .await
                .expect("page");
            assert!(page.configs.len() <= 2, "{binding:?} {version}");
            seen.extend(page.configs.into_iter().map(|c| c.id));
            token = page.next_page_token;
            if token.is_empty() {
                break;
            }
        }
        seen.sort();
        assert_eq!(seen, ["p1", "p2", "p3"], "{binding:?} {version}");
    }
}

#[tokio::test]
async fn every_task_operation_answers_on_every_wire() {
    let base = hub().await;
    for (binding, version) in WIRES {
        let label = format!("{binding:?} {version}");
        let wire = Wire::default();
        let echo = client(&format!("{base}/echo"), binding, version, &wire).await;
        let done = task(echo.send_text("hello").await.expect("send"));
        assert_eq!(state(&done), v1::TaskState::Completed, "{label}");
        let got = echo.get_task(&done.id, Some(0)).await.expect("get");
        assert_eq!((got.id.as_str(), got.history.len()), (done.id.as_str(), 0));
        let listed = echo.list_tasks(v1::ListTasksRequest::default()).await;
        match version {
            ProtocolVersion::V1_0 => {
                let ids: Vec<String> = listed
                    .expect("list")
                    .tasks
                    .into_iter()
                    .map(|t| t.id)
                    .collect();
                assert!(ids.contains(&done.id), "{label}");
            }
            ProtocolVersion::V0_3 => {
                assert!(
                    matches!(listed, Err(ClientError::NoInterface(_))),
                    "{label}: {listed:?}"
                );
            }
        }
        let refused = echo.cancel_task(&done.id).await.expect_err("finished");
        assert_eq!(
            a2a_code(&refused),
            Some(ErrorCode::TaskNotCancelable),
            "{label}"
        );

        let writer = client(&format!("{base}/writer"), binding, version, &wire).await;
        let open = task(writer.send_text("draft").await.expect("send"));
        let canceled = writer.cancel_task(&open.id).await.expect("cancel");
        assert_eq!(state(&canceled), v1::TaskState::Canceled, "{label}");

        let stream = client(&format!("{base}/writer-stream"), binding, version, &wire).await;
        let mut acc = TaskAccumulator::default();
        let mut events = stream
            .send_streaming(v1::SendMessageRequest {
                message: Some(A2aClient::user_message(vec![v1::Part::text("go")])),
                ..Default::default()
            })
            .await
            .expect("stream");
        while let Some(ev) = events.next().await {
            acc.apply(&ev.expect("event"));
        }
        assert_eq!(acc.state(), Some(v1::TaskState::Completed), "{label}");
        if binding == Binding::JsonRpc {
            // The wire log reads as the request went: its line, then its body.
            let lines = wire.0.lock().map(|l| l.clone()).unwrap_or_default();
            let body = lines
                .iter()
                .position(|l| {
                    l.contains("\"SendStreamingMessage\"") || l.contains("\"message/stream\"")
                })
                .expect("the stream request is logged");
            assert!(
                body > 0 && lines[body - 1].starts_with("> POST "),
                "{label}: {lines:?}"
            );
        }
    }
}

/// A client for `agent` whose copy of the card says it does not stream.
async fn non_streaming(
    base: &str,
    agent: &str,
    binding: Binding,
    version: ProtocolVersion,
    wire: &Wire,
) -> A2aClient {
    let mut card = client(&format!("{base}/{agent}"), binding, version, wire)
        .await
        .card()
        .clone();
    card.capabilities
        .get_or_insert_with(Default::default)
        .streaming = Some(false);
    let opts = ClientOptions {
        polling: Polling {
            initial_interval: Duration::from_millis(50),
            max_interval: Duration::from_millis(200),
            max_wait: Duration::from_secs(20),
        },
        ..options(binding, version, wire)
    };
    A2aClient::from_card(card, opts).expect("client")
}

#[tokio::test]
async fn an_agent_that_does_not_stream_is_polled_on_every_wire() {
    let base = hub().await;
    for (binding, version) in WIRES {
        let label = format!("{binding:?} {version}");
        let wire = Wire::default();
        let client = non_streaming(&base, "writer-stream", binding, version, &wire).await;
        let events: Vec<v1::StreamResponse> = client
            .send_streaming(v1::SendMessageRequest {
                message: Some(A2aClient::user_message(vec![v1::Part::text("go")])),
                ..Default::default()
            })
            .await
            .expect("polled stream")
            .map(|e| e.expect("event"))
            .collect()
            .await;
        let states: Vec<v1::TaskState> = events
            .iter()
            .map(|e| match &e.payload {
                Some(v1::stream_response::Payload::Task(t)) => state(t),
                other => panic!("{label}: a snapshot, not {other:?}"),
            })
            .collect();
        assert!(states.len() >= 2, "{label}: polled until done: {states:?}");
        assert_eq!(states.last(), Some(&v1::TaskState::Completed), "{label}");
        let mut acc = TaskAccumulator::default();
        events.iter().for_each(|e| acc.apply(e));
        let text: String = acc
            .task
            .as_ref()
            .and_then(|t| t.artifacts.first())
            .map(|a| a.parts.iter().filter_map(|p| p.as_text()).collect())
            .unwrap_or_default();
        assert_eq!(
            text,
            heddle_hub::agents::WRITER_STREAM_CHUNKS.concat(),
            "{label}"
        );
        let log = wire.text();
        for streamed in ["message:stream", "SendStreamingMessage", "message/stream"] {
            assert!(!log.contains(streamed), "{label}: no stream was asked for");
        }

        // Subscribing to a task that waits for input: one snapshot, then the end.
        let writer = non_streaming(&base, "writer", binding, version, &wire).await;
        let open = task(writer.send_text("draft").await.expect("send"));
        let seen: Vec<_> = writer
            .subscribe(&open.id)
            .await
            .expect("polled")
            .collect()
            .await;
        assert_eq!(seen.len(), 1, "{label}: {seen:?}");
    }
}

#[tokio::test]
async fn wait_follows_a_task_to_its_end_streaming_or_not() {
    let base = hub().await;
    for (binding, version) in [
        (Binding::JsonRpc, ProtocolVersion::V1_0),
        (Binding::Rest, ProtocolVersion::V0_3),
        (Binding::Grpc, ProtocolVersion::V1_0),
    ] {
        let wire = Wire::default();
        let streaming = client(&format!("{base}/writer-stream"), binding, version, &wire).await;
        let polled = non_streaming(&base, "writer-stream", binding, version, &wire).await;
        for c in [streaming, polled] {
            let first = task(
                c.send(v1::SendMessageRequest {
                    message: Some(A2aClient::user_message(vec![v1::Part::text("go")])),
                    configuration: Some(v1::SendMessageConfiguration {
                        return_immediately: true,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .expect("send"),
            );
            let done = c.wait(first).await.expect("wait");
            assert_eq!(
                state(&done),
                v1::TaskState::Completed,
                "{binding:?} {version}"
            );
            assert_eq!(done.artifacts.len(), 1);
        }
    }
}
