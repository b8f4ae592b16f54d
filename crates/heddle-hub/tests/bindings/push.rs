//! Push config CRUD, phrased per wire and read back into the v1.0 model.

use super::*;

fn push_options() -> heddle_server::PushOptions {
    heddle_server::PushOptions::default()
}

/// A v0.3 named config (REST v0.3, gRPC v0.3) in v1.0 form.
fn from_named(c: &pb::TaskPushNotificationConfig) -> v1::TaskPushNotificationConfig {
    let (task_id, _) = conv::parse_config_name(&c.name, "name").expect("config name");
    conv::push_config_to_v1(
        c.push_notification_config.as_ref().expect("inner config"),
        task_id,
    )
}

impl Wire {
    pub(super) async fn create_push(
        self,
        app: &App,
        agent: &str,
        task_id: &str,
        id: &str,
        url: &str,
    ) -> Result<v1::TaskPushNotificationConfig, Failure> {
        let cfg = v1::TaskPushNotificationConfig {
            tenant: String::new(),
            id: id.into(),
            task_id: task_id.into(),
            url: url.into(),
            token: format!("token-{id}"),
            authentication: Some(v1::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "cred".into(),
            }),
        };
        let named = conv::push_config_from_v1(&cfg);
        match self {
            Wire::JsonRpcV1 => {
                let v = self
                    .rpc(
                        app,
                        agent,
                        "CreateTaskPushNotificationConfig",
                        "",
                        json!(cfg),
                    )
                    .await?;
                Ok(serde_json::from_value(v).expect("v1 config"))
            }
            Wire::JsonRpcV03 => {
                let params = json!(v03::TaskPushNotificationConfig::from_v1(&cfg));
                let v = self
                    .rpc(app, agent, "", "tasks/pushNotificationConfig/set", params)
                    .await?;
                Ok(serde_json::from_value::<v03::TaskPushNotificationConfig>(v)
                    .expect("v0.3 config")
                    .to_v1())
            }
            Wire::RestV1 => {
                let path = format!("/tasks/{task_id}/pushNotificationConfigs");
                let v = self
                    .rest(app, Method::POST, agent, &path, Some(json!(cfg)))
                    .await?;
                Ok(serde_json::from_value(v).expect("v1 config"))
            }
            Wire::RestV03 => {
                // The SDK's body form.
                let body = json!({
                    "parent": conv::task_name(task_id),
                    "configId": id,
                    "config": named,
                });
                let path = format!("/v1/tasks/{task_id}/pushNotificationConfigs");
                let v = self
                    .rest(app, Method::POST, agent, &path, Some(body))
                    .await?;
                Ok(from_named(&serde_json::from_value(v).expect("v0.3 config")))
            }
            Wire::GrpcV1 => {
                let mut cfg = cfg;
                cfg.tenant = agent.into();
                Self::v1_client(app)
                    .create_task_push_notification_config(self.grpc_request(agent, cfg))
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|s| reason_of_grpc(&s))
            }
            Wire::GrpcV03 => {
                let req = pb::CreateTaskPushNotificationConfigRequest {
                    parent: conv::task_name(task_id),
                    config_id: id.into(),
                    config: Some(named),
                };
                Self::v03_client(app)
                    .create_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map(|r| from_named(&r.into_inner()))
                    .map_err(|s| reason_of_grpc(&s))
            }
        }
    }

    pub(super) async fn get_push(
        self,
        app: &App,
        agent: &str,
        task_id: &str,
        id: &str,
    ) -> Result<v1::TaskPushNotificationConfig, Failure> {
        match self {
            Wire::JsonRpcV1 => {
                let p = json!({"taskId": task_id, "id": id});
                let v = self
                    .rpc(app, agent, "GetTaskPushNotificationConfig", "", p)
                    .await?;
                Ok(serde_json::from_value(v).expect("v1 config"))
            }
            Wire::JsonRpcV03 => {
                let p = json!({"id": task_id, "pushNotificationConfigId": id});
                let v = self
                    .rpc(app, agent, "", "tasks/pushNotificationConfig/get", p)
                    .await?;
                Ok(serde_json::from_value::<v03::TaskPushNotificationConfig>(v)
                    .expect("v0.3 config")
                    .to_v1())
            }
            Wire::RestV1 => {
                let path = format!("/tasks/{task_id}/pushNotificationConfigs/{id}");
                let v = self.rest(app, Method::GET, agent, &path, None).await?;
                Ok(serde_json::from_value(v).expect("v1 config"))
            }
            Wire::RestV03 => {
                let path = format!("/v1/tasks/{task_id}/pushNotificationConfigs/{id}");
                let v = self.rest(app, Method::GET, agent, &path, None).await?;
                Ok(from_named(&serde_json::from_value(v).expect("v0.3 config")))
            }
            Wire::GrpcV1 => {
                let req = v1::GetTaskPushNotificationConfigRequest {
                    tenant: agent.into(),
                    task_id: task_id.into(),
                    id: id.into(),
                };
                Self::v1_client(app)
                    .get_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|s| reason_of_grpc(&s))
            }
            Wire::GrpcV03 => {
                let req = pb::GetTaskPushNotificationConfigRequest {
                    name: conv::config_name(task_id, id),
                };
                Self::v03_client(app)
                    .get_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map(|r| from_named(&r.into_inner()))
                    .map_err(|s| reason_of_grpc(&s))
            }
        }
    }

    /// The ids of the task's configs, in order.
    async fn list_push(
        self,
        app: &App,
        agent: &str,
        task_id: &str,
    ) -> Result<Vec<String>, Failure> {
        let ids = |l: Vec<v1::TaskPushNotificationConfig>| l.into_iter().map(|c| c.id).collect();
        match self {
            Wire::JsonRpcV1 => {
                let v = self
                    .rpc(
                        app,
                        agent,
                        "ListTaskPushNotificationConfigs",
                        "",
                        json!({"taskId": task_id}),
                    )
                    .await?;
                let l: v1::ListTaskPushNotificationConfigsResponse =
                    serde_json::from_value(v).expect("v1 list");
                Ok(ids(l.configs))
            }
            Wire::JsonRpcV03 => {
                let v = self
                    .rpc(
                        app,
                        agent,
                        "",
                        "tasks/pushNotificationConfig/list",
                        json!({"id": task_id}),
                    )
                    .await?;
                let l: Vec<v03::TaskPushNotificationConfig> =
                    serde_json::from_value(v).expect("v0.3 bare array");
                Ok(ids(l
                    .iter()
                    .map(v03::TaskPushNotificationConfig::to_v1)
                    .collect()))
            }
            Wire::RestV1 => {
                let path = format!("/tasks/{task_id}/pushNotificationConfigs");
                let v = self.rest(app, Method::GET, agent, &path, None).await?;
                let l: v1::ListTaskPushNotificationConfigsResponse =
                    serde_json::from_value(v).expect("v1 list");
                Ok(ids(l.configs))
            }
            Wire::RestV03 => {
                let path = format!("/v1/tasks/{task_id}/pushNotificationConfigs");
                let v = self.rest(app, Method::GET, agent, &path, None).await?;
                let l: pb::ListTaskPushNotificationConfigResponse =
                    serde_json::from_value(v).expect("v0.3 list");
                Ok(ids(l.configs.iter().map(from_named).collect()))
            }
            Wire::GrpcV1 => {
                let req = v1::ListTaskPushNotificationConfigsRequest {
                    tenant: agent.into(),
                    task_id: task_id.into(),
                    ..Default::default()
                };
                Self::v1_client(app)
                    .list_task_push_notification_configs(self.grpc_request(agent, req))
                    .await
                    .map(|r| ids(r.into_inner().configs))
                    .map_err(|s| reason_of_grpc(&s))
            }
            Wire::GrpcV03 => {
                let req = pb::ListTaskPushNotificationConfigRequest {
                    parent: conv::task_name(task_id),
                    ..Default::default()
                };
                Self::v03_client(app)
                    .list_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map(|r| ids(r.into_inner().configs.iter().map(from_named).collect()))
                    .map_err(|s| reason_of_grpc(&s))
            }
        }
    }

    async fn delete_push(
        self,
        app: &App,
        agent: &str,
        task_id: &str,
        id: &str,
    ) -> Result<(), Failure> {
        match self {
            Wire::JsonRpcV1 => {
                let v = self
                    .rpc(
                        app,
                        agent,
                        "DeleteTaskPushNotificationConfig",
                        "",
                        json!({"taskId": task_id, "id": id}),
                    )
                    .await?;
                assert_eq!(v, json!({}), "v1.0 delete answers Empty");
            }
            Wire::JsonRpcV03 => {
                let p = json!({"id": task_id, "pushNotificationConfigId": id});
                let v = self
                    .rpc(app, agent, "", "tasks/pushNotificationConfig/delete", p)
                    .await?;
                assert_eq!(v, Value::Null, "v0.3 delete answers null");
            }
            Wire::RestV1 | Wire::RestV03 => {
                let prefix = if self == Wire::RestV03 { "/v1" } else { "" };
                let path = format!("{prefix}/tasks/{task_id}/pushNotificationConfigs/{id}");
                self.rest(app, Method::DELETE, agent, &path, None).await?;
            }
            Wire::GrpcV1 => {
                let req = v1::DeleteTaskPushNotificationConfigRequest {
                    tenant: agent.into(),
                    task_id: task_id.into(),
                    id: id.into(),
                };
                Self::v1_client(app)
                    .delete_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map_err(|s| reason_of_grpc(&s))?;
            }
            Wire::GrpcV03 => {
                let req = pb::DeleteTaskPushNotificationConfigRequest {
                    name: conv::config_name(task_id, id),
                };
                Self::v03_client(app)
                    .delete_task_push_notification_config(self.grpc_request(agent, req))
                    .await
                    .map_err(|s| reason_of_grpc(&s))?;
            }
        }
        Ok(())
    }
}

#[tokio::test]
async fn push_config_crud_is_the_same_on_every_wire() {
    let app = app_with(Some(push_options())).await;
    for w in WIRES {
        let t = w
            .send(&app, "echo", w.message("p1", "hi", None), false)
            .await
            .expect("send");
        let a = w
            .create_push(&app, "echo", &t.id, "cfg-a", "https://hooks.example.com/a")
            .await
            .expect("create a");
        assert_eq!(
            (
                a.id.as_str(),
                a.task_id.as_str(),
                a.url.as_str(),
                a.token.as_str()
            ),
            (
                "cfg-a",
                t.id.as_str(),
                "https://hooks.example.com/a",
                "token-cfg-a"
            ),
            "{w:?}"
        );
        // Without an id the config is named after its task, as the
        // official SDKs name it.
        let b = w
            .create_push(&app, "echo", &t.id, "", "https://hooks.example.com/b")
            .await
            .expect("create b");
        assert_eq!(b.id, t.id, "{w:?}");
        assert_eq!(
            w.list_push(&app, "echo", &t.id).await.expect("list"),
            vec!["cfg-a".to_owned(), b.id.clone()],
            "{w:?}"
        );
        let got = w.get_push(&app, "echo", &t.id, "cfg-a").await.expect("get");
        assert_eq!(got.url, "https://hooks.example.com/a", "{w:?}");
        assert_eq!(
            got.authentication.map(|a| a.scheme),
            Some("Bearer".to_owned()),
            "{w:?}"
        );
        w.delete_push(&app, "echo", &t.id, "cfg-a")
            .await
            .expect("delete");
        // Delete is idempotent.
        w.delete_push(&app, "echo", &t.id, "cfg-a")
            .await
            .expect("delete again");
        assert_eq!(
            w.list_push(&app, "echo", &t.id).await.expect("list"),
            vec![b.id.clone()],
            "{w:?}"
        );
        assert_eq!(
            w.get_push(&app, "echo", &t.id, "cfg-a")
                .await
                .expect_err("gone"),
            Failure("TASK_NOT_FOUND".into()),
            "{w:?}"
        );
        // Another task's id, or none: not found.
        assert_eq!(
            w.create_push(&app, "echo", "missing", "x", "https://hooks.example.com/x")
                .await
                .expect_err("missing task"),
            Failure("TASK_NOT_FOUND".into()),
            "{w:?}"
        );
        // The SSRF policy at creation: a clear InvalidParams.
        for url in [
            "https://127.0.0.1/hook",
            "https://[::1]/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://10.0.0.7/hook",
            "https://localhost/hook",
            "http://hooks.example.com/plain",
        ] {
            assert_eq!(
                w.create_push(&app, "echo", &t.id, "bad", url)
                    .await
                    .expect_err(url),
                Failure("INVALID_PARAMS".into()),
                "{w:?} {url}"
            );
        }
    }
}

#[tokio::test]
async fn push_configs_are_scoped_to_the_agent() {
    let app = app_with(Some(push_options())).await;
    let w = Wire::JsonRpcV1;
    let t = w
        .send(&app, "echo", w.message("p2", "hi", None), false)
        .await
        .expect("send");
    w.create_push(&app, "echo", &t.id, "c", "https://hooks.example.com/a")
        .await
        .expect("create");
    // The same task id under another agent is not this task.
    assert_eq!(
        w.list_push(&app, "writer", &t.id)
            .await
            .expect_err("other agent"),
        Failure("TASK_NOT_FOUND".into())
    );
}

#[tokio::test]
async fn cards_declare_push_only_when_it_is_delivered() {
    for (push, expected) in [(None, false), (Some(push_options()), true)] {
        let app = app_with(push).await;
        let (_, body) = http(
            &app.router,
            Method::GET,
            "/api/v1/agents/echo/.well-known/agent-card.json",
            None,
            None,
        )
        .await;
        let card: Value = serde_json::from_slice(&body).expect("card");
        assert_eq!(
            card["capabilities"]["pushNotifications"],
            json!(expected),
            "{card}"
        );
    }
}

/// SendMessage with a push config, as JSON-RPC v1.0 params.
fn send_with_push(message: Value, url: &str) -> Value {
    json!({"message": message, "configuration": {"taskPushNotificationConfig": {"url": url}}})
}

#[tokio::test]
async fn a_refused_push_config_in_send_changes_nothing() {
    let w = Wire::JsonRpcV1;
    // Without push, a config in SendMessage is PushNotificationNotSupported.
    let plain = app().await;
    assert_eq!(
        w.rpc(
            &plain,
            "echo",
            "SendMessage",
            "",
            send_with_push(w.message("n1", "hi", None), "https://hooks.example.com/a"),
        )
        .await
        .expect_err("no push"),
        Failure("PUSH_NOTIFICATION_NOT_SUPPORTED".into())
    );
    // With push, a refused URL on a follow-up leaves the task waiting for input.
    let app = app_with(Some(push_options())).await;
    let t = w
        .send(&app, "writer", w.message("n2", "Summarize", None), false)
        .await
        .expect("first");
    assert_eq!(
        w.rpc(
            &app,
            "writer",
            "SendMessage",
            "",
            send_with_push(
                w.message("n3", "the board", Some(&t.id)),
                "https://10.0.0.1/x"
            ),
        )
        .await
        .expect_err("refused url"),
        Failure("INVALID_PARAMS".into())
    );
    let still = w.get(&app, "writer", &t.id, None).await.expect("get");
    assert_eq!(state(&still), v1::TaskState::InputRequired);
    assert_eq!(
        still.history.len(),
        t.history.len(),
        "the refused message was not added"
    );
    let done = w
        .send(
            &app,
            "writer",
            w.message("n4", "the board", Some(&t.id)),
            false,
        )
        .await
        .expect("answer");
    assert_eq!(state(&done), v1::TaskState::Completed);
}
