//! The body of a v0.3 REST push config create. Three forms are in circulation
//! (WIRE-NOTES §5): the SDK's `{parent, configId, config}`, the proto's bare
//! `{name, pushNotificationConfig}`, and the spec tab's
//! `{config: {name, pushNotificationConfig}}`. All are read.

use axum::body::Bytes;
use heddle_core::{A2aError, compat::v03_proto, v1, v03_proto as pb, validate::from_json};

/// The v1.0 config for task `task_id` (from the path) in any of the forms.
pub(crate) fn create_call(
    body: &Bytes,
    task_id: &str,
) -> Result<v1::TaskPushNotificationConfig, A2aError> {
    let value: serde_json::Value = from_json(body)?;
    let (config, config_id, field) = match value.get("config") {
        Some(c) => (
            c.clone(),
            // ProtoJSON: the JSON name or the proto field name.
            value
                .get("configId")
                .or_else(|| value.get("config_id"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
            "config",
        ),
        None => (value, None, "body"),
    };
    let named: pb::TaskPushNotificationConfig = serde_json::from_value(config)
        .map_err(|e| A2aError::invalid_field(field, e.to_string()))?;
    let inner = named.push_notification_config.ok_or_else(|| {
        A2aError::invalid_field(format!("{field}.pushNotificationConfig"), "is required")
    })?;
    let mut out = v03_proto::push_config_to_v1(&inner, task_id);
    if let Some(id) = config_id.filter(|id| !id.is_empty()) {
        out.id = id;
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[test]
    fn reads_all_three_create_body_forms() {
        let inner = r#"{"pushNotificationConfig":{"url":"https://h.example/x","token":"t","authentication":{"schemes":["Bearer"],"credentials":"c"}}}"#;
        let bodies = [
            format!(r#"{{"parent":"tasks/t1","configId":"cfg","config":{inner}}}"#),
            inner.to_owned(),
            format!(r#"{{"config":{inner}}}"#),
        ];
        for b in bodies {
            let c = create_call(&Bytes::from(b.clone()), "t1").unwrap();
            assert_eq!(c.task_id, "t1", "{b}");
            assert_eq!(c.url, "https://h.example/x", "{b}");
            assert_eq!(c.token, "t");
            let auth = c.authentication.unwrap();
            assert_eq!(
                (auth.scheme.as_str(), auth.credentials.as_str()),
                ("Bearer", "c")
            );
        }
        let c = create_call(
            &Bytes::from(format!(r#"{{"configId":"cfg","config":{inner}}}"#)),
            "t1",
        )
        .unwrap();
        assert_eq!(c.id, "cfg");
        // Proto field names too, and an empty authentication is none.
        let snake = r#"{"parent":"tasks/t1","config_id":"c2","config":{"push_notification_config":{"url":"https://h.example/y","authentication":{}}}}"#;
        let c = create_call(&Bytes::from_static(snake.as_bytes()), "t1").unwrap();
        assert_eq!(
            (c.id.as_str(), c.url.as_str()),
            ("c2", "https://h.example/y")
        );
        assert_eq!(c.authentication, None);
        let err = create_call(&Bytes::from_static(b"{}"), "t1").unwrap_err();
        assert!(err.to_string().contains("pushNotificationConfig"), "{err}");
    }
}
