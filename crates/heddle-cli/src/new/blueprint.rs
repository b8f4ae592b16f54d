//! The endpoint blueprint: a Markdown page that tells a caller everything
//! needed to call an agent from its card alone: every interface URL, each
//! operation on each binding with a `curl` (or, for gRPC, a `heddle`)
//! example, the credentials to send, the errors to expect and the task
//! states to follow.
//!
//! Operation names, REST routes and error codes are read from Heddle's own
//! tables (`heddle_core::method::METHODS`, `heddle_core::error::CATALOGUE`),
//! so the page says what the server and client actually speak.

use std::fmt::Write as _;

use heddle_core::{
    ProtocolVersion,
    compat::v03,
    error::CATALOGUE,
    method::{METHODS, Method, MethodNames},
    v1::{self, security_scheme::Scheme},
};
use serde_json::{Value, json};

/// What the blueprint says beyond the card: how credentials are obtained
/// for an agent `heddle new` laid out.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    /// Lines on getting credentials, as Markdown.
    pub credentials: Vec<String>,
    /// Lines on the task states this agent's skeleton goes through.
    pub states: Vec<String>,
}

/// Where the card of an agent whose base URL is `base` is served.
pub fn card_url(base: &str) -> String {
    format!(
        "{}{}",
        base.trim_end_matches('/'),
        heddle_server::CARD_PATHS[0]
    )
}

/// How a caller authenticates, read from the card's first requirement.
struct Auth {
    /// The scheme's card name and a sentence.
    summary: String,
    /// `curl` options.
    curl: String,
    /// `heddle` options.
    heddle: String,
}

fn auth(card: &v1::AgentCard) -> Auth {
    let primary = super::card::primary_scheme(card);
    let name = primary.as_ref().map_or("", |p| p.name);
    match primary.as_ref().map(|p| p.scheme) {
        None => Auth {
            summary: "None: the card requires no security scheme, so calls need no credentials."
                .into(),
            curl: String::new(),
            heddle: String::new(),
        },
        Some(Scheme::ApiKeySecurityScheme(k)) => {
            let (curl, summary) = match k.location.as_str() {
                "query" => (
                    String::new(),
                    format!(
                        "API key (`{name}`): add the query parameter `{}=<key>` to every URL.",
                        k.name
                    ),
                ),
                "cookie" => (
                    format!(" -b \"{}=$A2A_API_KEY\"", k.name),
                    format!("API key (`{name}`): send the cookie `{}=<key>`.", k.name),
                ),
                _ => (
                    format!(" -H \"{}: $A2A_API_KEY\"", k.name),
                    format!(
                        "API key (`{name}`): send the header `{}: <key>` on every call.",
                        k.name
                    ),
                ),
            };
            Auth {
                summary,
                curl,
                heddle: " --api-key \"$A2A_API_KEY\"".into(),
            }
        }
        Some(Scheme::HttpAuthSecurityScheme(h)) => Auth {
            summary: format!(
                "HTTP `{}` (`{name}`{}): send the header `Authorization: {} <token>`.",
                h.scheme,
                if h.bearer_format.is_empty() {
                    String::new()
                } else {
                    format!(", a {}", h.bearer_format)
                },
                h.scheme
            ),
            curl: format!(" -H \"Authorization: {} $A2A_TOKEN\"", h.scheme),
            heddle: " --bearer \"$A2A_TOKEN\"".into(),
        },
        Some(Scheme::Oauth2SecurityScheme(o)) => {
            let token_url = super::card::token_url(o).unwrap_or("TOKEN_URL");
            let scopes = primary
                .as_ref()
                .map(|p| p.scopes.join(" "))
                .unwrap_or_default();
            Auth {
                summary: format!(
                    "OAuth 2.0 client credentials (`{name}`): get a token from `{token_url}` \
                     (grant `client_credentials`{}), then send `Authorization: Bearer <token>`:\n\n\
                     ```sh\nA2A_TOKEN=$(curl -s -u \"$CLIENT_ID:$CLIENT_SECRET\" \
                     -d grant_type=client_credentials{} {token_url} | jq -r .access_token)\n```",
                    if scopes.is_empty() {
                        String::new()
                    } else {
                        format!(", scope `{scopes}`")
                    },
                    if scopes.is_empty() {
                        String::new()
                    } else {
                        format!(" -d 'scope={scopes}'")
                    },
                ),
                curl: " -H \"Authorization: Bearer $A2A_TOKEN\"".into(),
                heddle:
                    " --oauth-client-id \"$CLIENT_ID\" --oauth-client-secret \"$CLIENT_SECRET\""
                        .into(),
            }
        }
        Some(Scheme::OpenIdConnectSecurityScheme(o)) => Auth {
            summary: format!(
                "OpenID Connect (`{name}`): a token from the issuer at `{}`, sent as \
                 `Authorization: Bearer <token>`.",
                o.open_id_connect_url
            ),
            curl: " -H \"Authorization: Bearer $A2A_TOKEN\"".into(),
            heddle: " --bearer \"$A2A_TOKEN\"".into(),
        },
        Some(Scheme::MtlsSecurityScheme(_)) => Auth {
            summary: format!(
                "Mutual TLS (`{name}`): present a client certificate the agent's CA issued \
                 (`client.pem`, `client.key`), and trust the agent's CA (`ca.pem`)."
            ),
            curl: " --cert client.pem --key client.key --cacert ca.pem".into(),
            heddle: " --client-cert client.pem --client-key client.key --ca-cert ca.pem".into(),
        },
    }
}

/// The binding's name for `heddle --binding`.
fn cli_binding(binding: &str) -> &'static str {
    match binding {
        "HTTP+JSON" => "rest",
        "GRPC" => "grpc",
        _ => "jsonrpc",
    }
}

/// The v1.0 JSON-RPC params (or REST body) of `method`.
fn params_v1(method: Method) -> Value {
    match method {
        Method::SendMessage | Method::SendStreamingMessage => json!({"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}),
        Method::GetTask | Method::CancelTask | Method::SubscribeToTask => json!({"id": "TASK_ID"}),
        Method::ListTasks | Method::GetExtendedAgentCard => json!({}),
        Method::CreatePushConfig => json!({"taskId": "TASK_ID",
            "url": "https://hooks.example/a2a", "token": "secret"}),
        Method::GetPushConfig | Method::DeletePushConfig => {
            json!({"taskId": "TASK_ID", "id": "CONFIG_ID"})
        }
        Method::ListPushConfigs => json!({"taskId": "TASK_ID"}),
    }
}

/// The v0.3 JSON-RPC params of `method`.
fn params_v03(method: Method) -> Value {
    match method {
        Method::SendMessage | Method::SendStreamingMessage => json!({"message": {
            "kind": "message", "messageId": "m1", "role": "user",
            "parts": [{"kind": "text", "text": "hello"}]}}),
        Method::GetTask | Method::CancelTask | Method::SubscribeToTask => json!({"id": "TASK_ID"}),
        Method::CreatePushConfig => json!({"taskId": "TASK_ID", "pushNotificationConfig": {
            "url": "https://hooks.example/a2a", "token": "secret"}}),
        Method::GetPushConfig | Method::DeletePushConfig => {
            json!({"id": "TASK_ID", "pushNotificationConfigId": "CONFIG_ID"})
        }
        Method::ListPushConfigs => json!({"id": "TASK_ID"}),
        Method::ListTasks | Method::GetExtendedAgentCard => json!({}),
    }
}

/// The REST body of `method`, if it has one (v0.3 REST speaks the ProtoJSON
/// of its own proto: `content` for parts, `ROLE_USER`).
fn rest_body(method: Method, version: ProtocolVersion) -> Option<Value> {
    match (method, version) {
        (Method::SendMessage | Method::SendStreamingMessage, ProtocolVersion::V0_3) => {
            Some(json!({"message": {"messageId": "m1", "role": "ROLE_USER",
                "content": [{"text": "hello"}]}}))
        }
        (Method::SendMessage | Method::SendStreamingMessage, _) => Some(params_v1(method)),
        (Method::CancelTask, _) => Some(json!({})),
        (Method::CreatePushConfig, ProtocolVersion::V0_3) => Some(json!({"config": {
            "pushNotificationConfig": {"url": "https://hooks.example/a2a", "token": "secret"}}})),
        (Method::CreatePushConfig, _) => Some(json!({"url": "https://hooks.example/a2a",
            "token": "secret"})),
        _ => None,
    }
}

/// The `heddle` command doing `method` on the agent at `base`.
fn heddle_command(method: Method, base: &str, opts: &str) -> String {
    let cmd = match method {
        Method::SendMessage => format!("send {base} \"hello\""),
        Method::SendStreamingMessage => format!("send {base} \"hello\" --stream"),
        Method::GetTask => format!("task get {base} TASK_ID"),
        Method::ListTasks => format!("task list {base}"),
        Method::CancelTask => format!("task cancel {base} TASK_ID"),
        Method::SubscribeToTask => format!("task subscribe {base} TASK_ID"),
        Method::CreatePushConfig => {
            format!("task push-config set {base} TASK_ID https://hooks.example/a2a --token secret")
        }
        Method::GetPushConfig => format!("task push-config get {base} TASK_ID CONFIG_ID"),
        Method::ListPushConfigs => format!("task push-config list {base} TASK_ID"),
        Method::DeletePushConfig => format!("task push-config delete {base} TASK_ID CONFIG_ID"),
        Method::GetExtendedAgentCard => format!("card get {base}"),
    };
    format!("heddle {cmd}{opts}")
}

/// Whether the card offers `method` at all (push and the extended card
/// depend on its capabilities).
fn offered(card: &v1::AgentCard, m: &MethodNames) -> bool {
    let caps = card.capabilities.clone().unwrap_or_default();
    match m.method {
        Method::CreatePushConfig
        | Method::GetPushConfig
        | Method::ListPushConfigs
        | Method::DeletePushConfig => caps.push_notifications == Some(true),
        Method::GetExtendedAgentCard => caps.extended_agent_card == Some(true),
        Method::SendStreamingMessage | Method::SubscribeToTask => caps.streaming == Some(true),
        _ => true,
    }
}

/// One interface's section: each operation with its example.
fn interface_section(
    out: &mut String,
    card: &v1::AgentCard,
    iface: &v1::AgentInterface,
    base: &str,
    auth: &Auth,
) {
    let Some(version) = ProtocolVersion::parse(&iface.protocol_version) else {
        let _ = writeln!(
            out,
            "Protocol version {:?} is not one Heddle knows; no examples.\n",
            iface.protocol_version
        );
        return;
    };
    let v = version.as_str();
    let flags = format!(
        " --binding {} --a2a-version {v}{}",
        cli_binding(&iface.protocol_binding),
        auth.heddle
    );
    let url = iface.url.trim_end_matches('/');
    for m in METHODS.iter().filter(|m| offered(card, m)) {
        let jsonrpc_name = m.method.jsonrpc_name(version);
        let rest_route = m.method.rest_route(version);
        let available = match iface.protocol_binding.as_str() {
            "JSONRPC" => jsonrpc_name.is_some(),
            "HTTP+JSON" => rest_route.is_some(),
            "GRPC" => m.method.grpc_name(version).is_some(),
            _ => false,
        };
        if !available {
            continue;
        }
        let _ = writeln!(out, "#### {}\n\n```sh", m.v1);
        let accept = if m.streaming { " -N" } else { "" };
        match iface.protocol_binding.as_str() {
            "JSONRPC" => {
                let params = match version {
                    ProtocolVersion::V1_0 => params_v1(m.method),
                    ProtocolVersion::V0_3 => params_v03(m.method),
                };
                let body = json!({"jsonrpc": "2.0", "id": 1,
                    "method": jsonrpc_name.unwrap_or_default(), "params": params});
                let _ = writeln!(
                    out,
                    "curl -s{accept} -H 'Content-Type: application/json' -H 'A2A-Version: {v}'{} \\\n  -d '{body}' \\\n  {url}",
                    auth.curl
                );
            }
            "HTTP+JSON" => {
                if let Some(route) = rest_route {
                    let path = route.fill("TASK_ID", "CONFIG_ID");
                    let tenant = if iface.tenant.is_empty() {
                        String::new()
                    } else {
                        format!("/{}", iface.tenant)
                    };
                    let body = rest_body(m.method, version)
                        .map(|b| format!(" -H 'Content-Type: application/json' \\\n  -d '{b}'"))
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "curl -s{accept} -X {} -H 'A2A-Version: {v}'{}{body} \\\n  {url}{tenant}{path}",
                        route.verb.as_str(),
                        auth.curl
                    );
                }
            }
            _ => {}
        }
        let _ = writeln!(out, "{}\n```\n", heddle_command(m.method, base, &flags));
    }
}

/// The blueprint of `card`, whose card is served at `card_url`.
pub fn render(card: &v1::AgentCard, card_url: &str, notes: &Notes) -> String {
    let base = card_url
        .strip_suffix(heddle_server::CARD_PATHS[0])
        .unwrap_or(card_url)
        .trim_end_matches('/');
    let auth = auth(card);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {}: endpoint blueprint\n\n{}\n\nAgent version {}. Written by `heddle new agent` from the \
         agent's card; every example below uses only what the card says.\n",
        card.name, card.description, card.version
    );
    let _ = writeln!(
        out,
        "## Card\n\n- `{card_url}` (also at `{base}{}`, the pre-0.3 name)\n- `heddle card get {base}` \
         shows it; `heddle card validate {base}` checks it.\n",
        heddle_server::CARD_PATHS[1]
    );
    let caps = card.capabilities.clone().unwrap_or_default();
    let _ = writeln!(
        out,
        "Streaming: {}. Push notifications: {}.\n",
        if caps.streaming == Some(true) {
            "yes"
        } else {
            "no"
        },
        if caps.push_notifications == Some(true) {
            "yes"
        } else {
            "no"
        },
    );

    out.push_str("## Interfaces\n\n| binding | A2A version | URL | tenant |\n|---|---|---|---|\n");
    for i in &card.supported_interfaces {
        let _ = writeln!(
            out,
            "| {} | {} | `{}` | {} |",
            i.protocol_binding,
            i.protocol_version,
            i.url,
            if i.tenant.is_empty() {
                "–"
            } else {
                &i.tenant
            }
        );
    }
    out.push_str(
        "\nThe first interface is the one the agent prefers. Send the `A2A-Version` header \
         (gRPC: `a2a-version` metadata) on every call: without it a call is read as v0.3.\n\n",
    );

    let _ = writeln!(out, "## Authentication\n\n{}\n", auth.summary);
    for line in &notes.credentials {
        let _ = writeln!(out, "{line}");
    }
    if !notes.credentials.is_empty() {
        out.push('\n');
    }

    out.push_str("## Skills\n\n");
    for s in &card.skills {
        let modes = |m: &[String], d: &[String]| {
            if m.is_empty() {
                d.join(", ")
            } else {
                m.join(", ")
            }
        };
        let _ = writeln!(
            out,
            "- `{}`, {}: {} (in: {}; out: {}; tags: {})",
            s.id,
            s.name,
            s.description,
            modes(&s.input_modes, &card.default_input_modes),
            modes(&s.output_modes, &card.default_output_modes),
            s.tags.join(", ")
        );
        for e in &s.examples {
            let _ = writeln!(out, "  - e.g. \"{e}\"");
        }
    }
    out.push('\n');

    out.push_str("## Operations\n\n");
    out.push_str(
        "Replace `TASK_ID` with the `id` of a task an earlier call returned (and `CONFIG_ID` with a \
         push config's). Streaming calls answer with Server-Sent Events (`text/event-stream`), \
         one JSON event per `data:` line.\n\n",
    );
    for i in &card.supported_interfaces {
        let _ = writeln!(
            out,
            "### {} {} at `{}`{}\n",
            i.protocol_binding,
            i.protocol_version,
            i.url,
            if i.protocol_binding == "GRPC" {
                " (gRPC: use `heddle`, or any gRPC client with the A2A proto)"
            } else {
                ""
            }
        );
        interface_section(&mut out, card, i, base, &auth);
    }

    out.push_str("## Errors\n\n");
    out.push_str(
        "Errors have one code per binding: JSON-RPC `error.code` (HTTP 200, except 401/403 for \
         credentials), the HTTP status with a `google.rpc.Status` body on REST, and the gRPC status; \
         each carries an `ErrorInfo` with the reason.\n\n\
         | error | JSON-RPC | HTTP | gRPC | reason |\n|---|---|---|---|---|\n",
    );
    for e in CATALOGUE {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | `{}` |",
            e.default_message,
            e.jsonrpc,
            e.http,
            e.grpc.name(),
            e.reason
        );
    }

    out.push_str("\n## Task states\n\n| v1.0 | v0.3 | meaning |\n|---|---|---|\n");
    use v1::TaskState as S;
    for (s, meaning) in [
        (S::Submitted, "accepted, not started"),
        (S::Working, "being worked on"),
        (
            S::InputRequired,
            "waiting for the caller: answer with a message on the same task id",
        ),
        (S::AuthRequired, "waiting for credentials"),
        (S::Completed, "done; the result is in the artifacts (final)"),
        (S::Failed, "ended with an error (final)"),
        (S::Canceled, "canceled by the caller (final)"),
        (S::Rejected, "refused by the agent (final)"),
    ] {
        let old = serde_json::to_value(v03::TaskState::from_v1(s))
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = writeln!(out, "| `{}` | `{old}` | {meaning} |", s.as_str_name());
    }
    if !notes.states.is_empty() {
        out.push('\n');
        for line in &notes.states {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}
