//! A REST request (its operation, path parameters, query and body) as a
//! v1.0 [`Call`]. v0.3 bodies are ProtoJSON of the v0.3 proto (message parts
//! under `content`, `ROLE_USER`), as the official Python SDK's v0.3 layer
//! speaks them (WIRE-NOTES §5), and are converted here.

use axum::body::Bytes;
use heddle_core::{
    A2aError, ProtocolVersion,
    call::Call,
    compat::v03_proto,
    method::{Method, RestParams},
    v1, v03_proto as pb,
    validate::from_json,
    wkt::{Struct, Timestamp},
};

/// The call `method` makes in `version`, from the request's parts.
pub(super) fn call(
    method: Method,
    version: ProtocolVersion,
    params: RestParams,
    query: Option<&str>,
    body: &Bytes,
) -> Result<Call, A2aError> {
    let tenant = params.tenant.unwrap_or_default();
    let task_id = params.task_id.unwrap_or_default();
    let config_id = params.config_id.unwrap_or_default();
    let v03 = version == ProtocolVersion::V0_3;
    Ok(match method {
        Method::SendMessage => Call::SendMessage(send_request(body, tenant, v03)?),
        Method::SendStreamingMessage => {
            Call::SendStreamingMessage(send_request(body, tenant, v03)?)
        }
        Method::GetTask => Call::GetTask(v1::GetTaskRequest {
            tenant,
            id: task_id,
            history_length: history_length(query, v03)?,
        }),
        Method::ListTasks => Call::ListTasks(list_request(query, tenant)?),
        Method::CancelTask => Call::CancelTask(v1::CancelTaskRequest {
            tenant,
            id: task_id,
            // v0.3's cancel has no body.
            metadata: if v03 { None } else { metadata_body(body)? },
        }),
        Method::SubscribeToTask => Call::SubscribeToTask(v1::SubscribeToTaskRequest {
            tenant,
            id: task_id,
        }),
        Method::CreatePushConfig if v03 => {
            Call::CreatePushConfig(super::push_v03::create_call(body, &task_id)?)
        }
        Method::CreatePushConfig => {
            let mut c: v1::TaskPushNotificationConfig = from_json(body)?;
            c.task_id = task_id;
            if c.tenant.is_empty() {
                c.tenant = tenant;
            }
            Call::CreatePushConfig(c)
        }
        Method::ListPushConfigs => {
            Call::ListPushConfigs(list_configs_request(tenant, task_id, query)?)
        }
        Method::GetPushConfig => Call::GetPushConfig(v1::GetTaskPushNotificationConfigRequest {
            tenant,
            task_id,
            id: config_id,
        }),
        Method::DeletePushConfig => {
            Call::DeletePushConfig(v1::DeleteTaskPushNotificationConfigRequest {
                tenant,
                task_id,
                id: config_id,
            })
        }
        Method::GetExtendedAgentCard => {
            Call::GetExtendedAgentCard(v1::GetExtendedAgentCardRequest { tenant })
        }
    })
}

fn send_request(
    body: &Bytes,
    tenant: String,
    v03: bool,
) -> Result<v1::SendMessageRequest, A2aError> {
    if v03 {
        let req: pb::SendMessageRequest = from_json(body)?;
        return Ok(v03_proto::send_request_to_v1(&req));
    }
    let mut req: v1::SendMessageRequest = from_json(body)?;
    if req.tenant.is_empty() {
        req.tenant = tenant;
    }
    Ok(req)
}

/// `historyLength` from the query, either spelling. In v0.3, 0 means no
/// limit; a negative length is refused by the handler in both versions.
fn history_length(query: Option<&str>, v03: bool) -> Result<Option<i32>, A2aError> {
    let mut history = None;
    for (k, v) in query_pairs(query) {
        if k == "historyLength" || k == "history_length" {
            let n = int_param("historyLength", &v)?;
            history = (!v03 || n != 0).then_some(n);
        }
    }
    Ok(history)
}

/// Query parameters as (name, value) pairs, percent-decoded.
fn query_pairs(q: Option<&str>) -> Vec<(String, String)> {
    q.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
        .unwrap_or_default()
}

fn int_param(name: &str, value: &str) -> Result<i32, A2aError> {
    value
        .parse()
        .map_err(|_| A2aError::invalid_field(name, format!("{value:?} is not an integer")))
}

fn bool_param(name: &str, value: &str) -> Result<bool, A2aError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(A2aError::invalid_field(
            name,
            format!("{other:?} is not true or false"),
        )),
    }
}

/// A ListTasks request from its query; each parameter is read by its JSON
/// name or its proto field name.
fn list_request(q: Option<&str>, tenant: String) -> Result<v1::ListTasksRequest, A2aError> {
    let mut r = v1::ListTasksRequest {
        tenant,
        ..Default::default()
    };
    for (k, v) in query_pairs(q) {
        match k.as_str() {
            "contextId" | "context_id" => r.context_id = v,
            "status" => r.status = task_state(&v)? as i32,
            "pageSize" | "page_size" => r.page_size = Some(int_param("pageSize", &v)?),
            "pageToken" | "page_token" => r.page_token = v,
            "historyLength" | "history_length" => {
                r.history_length = Some(int_param("historyLength", &v)?)
            }
            "statusTimestampAfter" | "status_timestamp_after" => {
                r.status_timestamp_after = Some(v.parse::<Timestamp>().map_err(|_| {
                    A2aError::invalid_field(
                        "statusTimestampAfter",
                        format!("{v:?} is not an RFC 3339 timestamp"),
                    )
                })?);
            }
            "includeArtifacts" | "include_artifacts" => {
                r.include_artifacts = Some(bool_param("includeArtifacts", &v)?)
            }
            _ => {}
        }
    }
    Ok(r)
}

/// A task state by its enum name or number.
fn task_state(v: &str) -> Result<v1::TaskState, A2aError> {
    v1::TaskState::from_str_name(v)
        .or_else(|| {
            v.parse::<i32>()
                .ok()
                .and_then(|n| v1::TaskState::try_from(n).ok())
        })
        .ok_or_else(|| A2aError::invalid_field("status", format!("{v:?} is not a task state")))
}

/// A push config List from its query (`pageSize`, `pageToken`, either
/// spelling).
fn list_configs_request(
    tenant: String,
    task_id: String,
    query: Option<&str>,
) -> Result<v1::ListTaskPushNotificationConfigsRequest, A2aError> {
    let mut r = v1::ListTaskPushNotificationConfigsRequest {
        tenant,
        task_id,
        ..Default::default()
    };
    for (k, v) in query_pairs(query) {
        match k.as_str() {
            "pageSize" | "page_size" => r.page_size = int_param("pageSize", &v)?,
            "pageToken" | "page_token" => r.page_token = v,
            _ => {}
        }
    }
    Ok(r)
}

/// The optional `{metadata}` body of a v1.0 cancel.
fn metadata_body(body: &Bytes) -> Result<Option<Struct>, A2aError> {
    if body.is_empty() {
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        metadata: Option<Struct>,
    }
    Ok(from_json::<Meta>(body)?.metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_query_is_validated_by_name() {
        let r = list_request(
            Some("contextId=c%201&status=TASK_STATE_WORKING&pageSize=5&includeArtifacts=true"),
            String::new(),
        )
        .expect("valid");
        assert_eq!(
            (
                r.context_id.as_str(),
                r.status(),
                r.page_size,
                r.include_artifacts
            ),
            ("c 1", v1::TaskState::Working, Some(5), Some(true))
        );
        for (query, field) in [
            ("status=BOGUS", "status"),
            ("pageSize=x", "pageSize"),
            ("statusTimestampAfter=yesterday", "statusTimestampAfter"),
            ("includeArtifacts=yes", "includeArtifacts"),
        ] {
            let err = list_request(Some(query), String::new()).expect_err(query);
            assert_eq!(err.violations[0].field, field, "{query}");
        }
    }

    #[test]
    fn a_zero_history_length_is_no_limit_in_v03_only() {
        assert_eq!(
            history_length(Some("historyLength=0"), true).ok(),
            Some(None)
        );
        assert_eq!(
            history_length(Some("history_length=0"), false).ok(),
            Some(Some(0))
        );
        assert_eq!(
            history_length(Some("historyLength=3"), true).ok(),
            Some(Some(3))
        );
        assert!(history_length(Some("historyLength=x"), false).is_err());
    }
}
