//! Heddle's ITK agents on real listeners, driven as the interop kit drives
//! them: a nested instruction into the first agent, over each binding and
//! version, checked for every hop's answer. The official SDKs' agents take
//! part in `tests/interop/itk_run.sh`.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::Engine as _;
use futures::StreamExt as _;
use heddle_client::{A2aClient, Binding, ClientOptions, SendReply};
use heddle_core::{
    ProtocolVersion,
    v1::{self, stream_response::Payload},
};
use heddle_itk::{
    ItkAgent,
    instruction::{
        Behavior, CallAgent, Empty, Instruction, PushNotification, ReturnResponse, SeriesOfSteps,
        Step,
    },
};
use prost::Message as _;
use serde_json::{Value, json};

/// One running agent, stopped when dropped.
struct Agent {
    http: String,
    card: String,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start() -> Agent {
    let http = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind http");
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind grpc");
    let base = format!("http://{}", http.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = ItkAgent {
        call_timeout: Duration::from_secs(30),
    };
    tokio::spawn(heddle_itk::serve(http, grpc, agent, async {
        let _ = stopped.await;
    }));
    Agent {
        card: format!("{base}/.well-known/agent-card.json"),
        http: base,
        _stop: stop,
    }
}

fn answer(text: &str) -> Instruction {
    Instruction {
        step: Some(Step::ReturnResponse(ReturnResponse {
            response: text.into(),
            hold_task: false,
        })),
    }
}

fn held(text: &str) -> Instruction {
    Instruction {
        step: Some(Step::ReturnResponse(ReturnResponse {
            response: text.into(),
            hold_task: true,
        })),
    }
}

fn steps(nodes: Vec<Instruction>) -> Instruction {
    Instruction {
        step: Some(Step::Steps(SeriesOfSteps {
            instructions: nodes,
            response_generator: 1,
        })),
    }
}

fn call(transport: &str, to: &Agent, then: Instruction, behavior: Behavior) -> Instruction {
    let streaming = matches!(behavior, Behavior::Resubscribe(_));
    Instruction {
        step: Some(Step::CallAgent(Box::new(CallAgent {
            transport: transport.into(),
            agent_card_uri: to.card.clone(),
            instruction: Some(Box::new(then)),
            streaming,
            behavior: Some(behavior),
        }))),
    }
}

fn plain() -> Behavior {
    Behavior::SendMessage(Empty {})
}

async fn client(to: &Agent, binding: Binding, version: ProtocolVersion) -> A2aClient {
    let opts = ClientOptions {
        bindings: vec![binding],
        version: Some(version),
        ..ClientOptions::default()
    };
    A2aClient::discover(&to.card, opts).await.expect("discover")
}

fn request(instruction: &Instruction) -> v1::SendMessageRequest {
    v1::SendMessageRequest {
        message: Some(A2aClient::user_message(vec![instruction.to_part()])),
        ..Default::default()
    }
}

/// The final state and status text of a blocking send.
async fn send(client: &A2aClient, instruction: &Instruction) -> (v1::TaskState, String) {
    match client.send(request(instruction)).await.expect("send") {
        SendReply::Task(t) => {
            let status = t.status.expect("a status");
            let text = status
                .message
                .as_ref()
                .map(v1::Message::text)
                .unwrap_or_default();
            (status.state(), text)
        }
        SendReply::Message(m) => panic!("a message, not a task: {m:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_back_through_the_first_agent_answers_over_every_binding_and_version() {
    let (a, b) = (start().await, start().await);
    for transport in ["jsonrpc", "http_json", "grpc"] {
        // A → B → A: the kit's circuits come back to an agent.
        let instruction = steps(vec![
            answer("a-start"),
            call(
                transport,
                &b,
                steps(vec![
                    answer("b"),
                    call(transport, &a, answer("a-again"), plain()),
                ]),
                plain(),
            ),
            answer("a-end"),
        ]);
        for binding in [Binding::JsonRpc, Binding::Rest, Binding::Grpc] {
            for version in [ProtocolVersion::V1_0, ProtocolVersion::V0_3] {
                let first = client(&a, binding, version).await;
                let (state, text) = send(&first, &instruction).await;
                let what = format!("{transport} hops, first hop {binding:?} {version:?}");
                assert_eq!(state, v1::TaskState::Completed, "{what}: {text}");
                assert_eq!(text, "a-start\nb\na-again\na-end", "{what}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_first_hop_gets_the_answer_in_a_status_update() {
    let (a, b) = (start().await, start().await);
    let mut streaming_call = call("grpc", &b, answer("from-b"), plain());
    if let Some(Step::CallAgent(c)) = &mut streaming_call.step {
        c.streaming = true;
    }
    let instruction = steps(vec![answer("from-a"), streaming_call]);
    let first = client(&a, Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let mut events = first
        .send_streaming(request(&instruction))
        .await
        .expect("stream");
    let mut last = None;
    while let Some(event) = events.next().await {
        if let Some(Payload::StatusUpdate(u)) = event.expect("event").payload {
            let status = u.status.expect("status");
            if let Some(m) = &status.message {
                last = Some((status.state(), m.text()));
            }
        }
    }
    assert_eq!(
        last,
        Some((v1::TaskState::Completed, "from-a\nfrom-b".to_owned()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubscribing_reads_the_held_answer_then_cancels_the_held_task() {
    let (a, b) = (start().await, start().await);
    for transport in ["jsonrpc", "http_json", "grpc"] {
        let instruction = call(
            transport,
            &b,
            held(&format!("held-{transport}")),
            Behavior::Resubscribe(Empty {}),
        );
        let first = client(&a, Binding::JsonRpc, ProtocolVersion::V1_0).await;
        let started = std::time::Instant::now();
        let (state, text) = send(&first, &instruction).await;
        assert_eq!(state, v1::TaskState::Completed, "{transport}: {text}");
        assert_eq!(text, format!("held-{transport}"), "{transport}");
        // Read as soon as it was there, not after the hold ran out (10 s).
        assert!(started.elapsed() < Duration::from_secs(5), "{transport}");
    }
    // Every held task on B was canceled by its caller.
    let on_b = client(&b, Binding::JsonRpc, ProtocolVersion::V1_0).await;
    let tasks = on_b
        .list_tasks(v1::ListTasksRequest::default())
        .await
        .expect("list");
    assert_eq!(tasks.tasks.len(), 3);
    for t in tasks.tasks {
        let state = t.status.map(|s| s.state());
        assert_eq!(state, Some(v1::TaskState::Canceled), "{}", t.id);
    }
}

/// What a push receiver got: the token header and the body.
type Deliveries = Arc<Mutex<Vec<(String, Value)>>>;

async fn receiver() -> (String, Deliveries) {
    let got: Deliveries = Arc::default();
    let keep = got.clone();
    let app = axum::Router::new().route(
        "/notifications",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, axum::Json(body): axum::Json<Value>| {
                let keep = keep.clone();
                async move {
                    let token = headers
                        .get("x-a2a-notification-token")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    keep.lock().expect("lock").push((token, body));
                    axum::http::StatusCode::OK
                }
            },
        ),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await });
    // Without a scheme, as the kit names it.
    (addr.to_string(), got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_push_behaviour_registers_the_kits_token_and_the_callee_pushes_its_answer() {
    let (a, b) = (start().await, start().await);
    let (url, got) = receiver().await;
    let instruction = call(
        "http_json",
        &b,
        answer("pushed-b"),
        Behavior::PushNotification(PushNotification { url }),
    );
    let first = client(&a, Binding::Grpc, ProtocolVersion::V1_0).await;
    let (state, text) = send(&first, &instruction).await;
    assert_eq!(
        (state, text.as_str()),
        (v1::TaskState::Completed, "pushed-b")
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let seen = got.lock().expect("lock").clone();
        let done = seen.iter().any(|(_, body)| {
            body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                && body["statusUpdate"]["status"]["message"]["parts"][0]["text"] == "pushed-b"
        });
        if done {
            assert!(
                seen.iter().all(|(token, _)| token == "itk-token"),
                "{seen:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no COMPLETED delivery: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_instructions_fail_the_task_with_the_reason() {
    let a = start().await;
    let first = client(&a, Binding::JsonRpc, ProtocolVersion::V1_0).await;
    match first.send_text("no instruction here").await.expect("send") {
        SendReply::Task(t) => {
            let status = t.status.expect("status");
            assert_eq!(status.state(), v1::TaskState::Failed);
            let why = status
                .message
                .as_ref()
                .map(v1::Message::text)
                .unwrap_or_default();
            assert!(why.contains("no instruction"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let to_nowhere = call("carrier-pigeon", &a, answer("x"), plain());
    let (state, why) = send(&first, &to_nowhere).await;
    assert_eq!(state, v1::TaskState::Failed);
    assert!(why.contains("unknown transport"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v03_file_part_and_base64_text_both_carry_the_instruction() {
    let a = start().await;
    let bytes = answer("from-v0.3").encode_to_vec();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let http = reqwest::Client::new();
    for part in [
        json!({"kind": "file", "file": {"bytes": b64, "mimeType": "application/x-protobuf", "name": "instruction.bin"}}),
        json!({"kind": "text", "text": b64}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": {"kind": "message", "messageId": "m1", "role": "user", "parts": [part]}}});
        // The kit posts to the path with its trailing slash.
        let reply: Value = http
            .post(format!("{}/jsonrpc/", a.http))
            .json(&body)
            .send()
            .await
            .expect("post")
            .json()
            .await
            .expect("json");
        let status = &reply["result"]["status"];
        assert_eq!(status["state"], "completed", "{reply}");
        assert_eq!(
            status["message"]["parts"][0]["text"], "from-v0.3",
            "{reply}"
        );
    }
}
