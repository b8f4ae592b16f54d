//! The lean floor: the same unary exchange as the floor, with the JSON-RPC
//! request decoded into typed structs (strings borrowed from the body) and
//! the answer serialized from typed structs of exactly the shapes Heddle
//! sends: a completed task with its echo artifact and its history. No
//! `serde_json::Value` and no `json!`, which cost the floor about twice the
//! CPU of this. It is the reference for Heddle's CPU per request.

use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct RpcRequest<'a> {
    #[serde(borrow)]
    id: Id<'a>,
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

/// A JSON-RPC id as sent: a number or a string (borrowed).
#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum Id<'a> {
    Num(i64),
    Str(&'a str),
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    message: Option<InMessage<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InMessage<'a> {
    #[serde(borrow)]
    message_id: &'a str,
    #[serde(borrow)]
    role: &'a str,
    #[serde(borrow)]
    parts: Vec<Part<'a>>,
}

#[derive(Deserialize, Serialize, Clone)]
struct Part<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

#[derive(Serialize)]
struct RpcResponse<'a, R> {
    jsonrpc: &'static str,
    id: &'a Id<'a>,
    result: R,
}

#[derive(Serialize)]
struct SendResult<'a> {
    task: Task<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Task<'a> {
    id: &'a str,
    context_id: &'a str,
    status: Status,
    artifacts: [Artifact<'a>; 1],
    history: [OutMessage<'a>; 1],
}

#[derive(Serialize)]
struct Status {
    state: &'static str,
    timestamp: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Artifact<'a> {
    artifact_id: &'a str,
    name: &'static str,
    parts: &'a [Part<'a>],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutMessage<'a> {
    message_id: &'a str,
    role: &'a str,
    parts: &'a [Part<'a>],
    task_id: &'a str,
    context_id: &'a str,
}

const STORED_TEXT: &str = "Summarize the quarterly report in three short paragraphs.";

/// The answer to one unary request body, or `None` when it is not one.
pub fn answer(body: &[u8]) -> Option<Vec<u8>> {
    let req: RpcRequest<'_> = serde_json::from_slice(body).ok()?;
    let stored;
    let (message_id, role, parts) = match req.params.and_then(|p| p.message) {
        Some(m) if req.method != "GetTask" => (m.message_id, m.role, m.parts),
        _ => {
            stored = [Part {
                text: STORED_TEXT.into(),
            }];
            ("bench-0001", "ROLE_USER", stored.to_vec())
        }
    };
    let echo = parts.get(..1).unwrap_or(&[]);
    let (task_id, context_id, artifact_id) = (
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
        uuid::Uuid::now_v7().to_string(),
    );
    let task = Task {
        id: &task_id,
        context_id: &context_id,
        status: Status {
            state: "TASK_STATE_COMPLETED",
            timestamp: super::now(),
        },
        artifacts: [Artifact {
            artifact_id: &artifact_id,
            name: "echo",
            parts: echo,
        }],
        history: [OutMessage {
            message_id,
            role,
            parts: &parts,
            task_id: &task_id,
            context_id: &context_id,
        }],
    };
    let mut out = Vec::with_capacity(1024);
    let written = if req.method == "GetTask" {
        serde_json::to_writer(
            &mut out,
            &RpcResponse {
                jsonrpc: "2.0",
                id: &req.id,
                result: task,
            },
        )
    } else {
        serde_json::to_writer(
            &mut out,
            &RpcResponse {
                jsonrpc: "2.0",
                id: &req.id,
                result: SendResult { task },
            },
        )
    };
    written.ok().map(|()| out)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    #[test]
    fn the_lean_answer_has_the_floors_shape() {
        let req = br#"{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi \"there\""}]}}}"#;
        let lean: Value =
            serde_json::from_slice(&super::answer(req).unwrap_or_default()).unwrap_or(Value::Null);
        let task = &lean["result"]["task"];
        assert_eq!(lean["id"], 7);
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hi \"there\"");
        assert_eq!(task["history"][0]["messageId"], "m1");
        assert_eq!(task["history"][0]["taskId"], task["id"]);
        let keys = |v: &Value| {
            let mut k: Vec<String> = v
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            k.sort();
            k
        };
        assert_eq!(
            keys(task),
            ["artifacts", "contextId", "history", "id", "status"]
        );
    }
}
