//! Signed cards and TLS through the `heddle` binary: `heddle serve` with
//! `--tls-cert/--tls-key` (and `--tls-client-ca`) and `--sign-key`, driven by
//! `heddle card verify`, `heddle send` and `heddle task get` with the global
//! trust flags; and `heddle card sign | verify | jwks` on files.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

fn testdata(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../heddle-signing/testdata")
        .join(name)
        .display()
        .to_string()
}

/// A CA in `dir` (ca.pem) and the certificates it issues.
struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(dir: &Path) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Heddle test CA");
        let ca = params.self_signed(&key).expect("CA");
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
        Self {
            dir: dir.to_owned(),
            issuer: Issuer::new(params, key),
        }
    }

    fn ca(&self) -> String {
        self.dir.join("ca.pem").display().to_string()
    }

    /// Writes NAME.pem and NAME.key; returns their paths.
    fn issue(&self, name: &str, sans: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).expect("issue");
        let (c, k) = (
            self.dir.join(format!("{name}.pem")),
            self.dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).expect("write");
        std::fs::write(&k, key.serialize_pem()).expect("write");
        (c.display().to_string(), k.display().to_string())
    }
}

mod common;

use common::{Server, heddle};

fn serve(extra: &[&str]) -> Server {
    common::serve("memory", extra)
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn tls_with_a_custom_ca_and_cards_signed_at_start() {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = Pki::new(dir.path());
    let (cert, key) = pki.issue("localhost", &["localhost", "127.0.0.1"]);
    let ec = testdata("ec.pem");
    let server = serve(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--sign-key",
        &ec,
        "--sign-kid",
        "hub-1",
    ]);
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let echo = format!("{}/api/v1/agents/echo", server.url);
    let ca = pki.ca();
    let trust = format!("{}/", server.url);

    let o = heddle(&[
        "card",
        "verify",
        &echo,
        "--ca-cert",
        &ca,
        "--trust-jku",
        &trust,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("verified (ES256, kid hub-1)"));

    // Without a key to check it with, the same card is unverifiable (exit 1).
    let o = heddle(&["card", "verify", &echo, "--ca-cert", &ca]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("unverifiable"));

    // A send that requires the signature, over JSON-RPC and over gRPC (TLS too).
    let jwks = format!("{}/.well-known/jwks.json", server.url);
    for binding in ["jsonrpc", "grpc"] {
        let o = heddle(&[
            "send",
            &echo,
            "hello",
            "--ca-cert",
            &ca,
            "--verify-card-jwks",
            &jwks,
            "--binding",
            binding,
            "-o",
            "json",
        ]);
        assert!(o.status.success(), "{binding}: {}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).expect("json");
        assert_eq!(
            v["status"]["state"], "TASK_STATE_COMPLETED",
            "{binding}: {v}"
        );
    }

    // Keys that did not sign it: discovery refuses the card.
    let o = heddle(&[
        "send",
        &echo,
        "hello",
        "--ca-cert",
        &ca,
        "--verify-card-jwks",
        &testdata("hmac.jwk.json"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("agent card signature"),
        "{}",
        text(&o)
    );

    // Without the CA the TLS handshake fails, and says why.
    let o = heddle(&["send", &echo, "hello"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("UnknownIssuer"),
        "{}",
        text(&o)
    );
}

#[test]
fn mtls_client_certificate_is_the_caller() {
    let dir = tempfile::tempdir().expect("tmp");
    let pki = Pki::new(dir.path());
    let (cert, key) = pki.issue("localhost", &["localhost", "127.0.0.1"]);
    let ca = pki.ca();
    let server = serve(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &ca,
    ]);
    let echo = format!("{}/api/v1/agents/echo", server.url);
    let (alice, alice_key) = pki.issue("alice", &[]);
    let (bob, bob_key) = pki.issue("bob", &[]);

    let o = heddle(&[
        "send",
        &echo,
        "mine",
        "--ca-cert",
        &ca,
        "--client-cert",
        &alice,
        "--client-key",
        &alice_key,
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let task: Value = serde_json::from_slice(&o.stdout).expect("json");
    let id = task["id"].as_str().expect("task id").to_owned();

    // Tasks are scoped to the caller: alice sees hers, bob and anonymous do not.
    // Over JSON-RPC and over gRPC, whose listener asks for the same certificates.
    for binding in ["jsonrpc", "grpc"] {
        let get = |who: Option<(&str, &str)>| {
            let mut args = vec![
                "task",
                "get",
                &echo,
                &id,
                "--ca-cert",
                &ca,
                "-o",
                "json",
                "--binding",
                binding,
            ];
            if let Some((c, k)) = who {
                args.extend(["--client-cert", c, "--client-key", k]);
            }
            heddle(&args)
        };
        let o = get(Some((&alice, &alice_key)));
        assert!(o.status.success(), "{binding}: {}", text(&o));
        let o = get(Some((&bob, &bob_key)));
        assert!(
            !o.status.success(),
            "{binding}: bob read alice's task: {}",
            text(&o)
        );
        assert!(
            String::from_utf8_lossy(&o.stderr)
                .to_lowercase()
                .contains("not found"),
            "{}",
            text(&o)
        );
        let o = get(None);
        assert!(
            !o.status.success(),
            "{binding}: an anonymous caller read alice's task: {}",
            text(&o)
        );
    }
}

/// The official Python SDK's client (`A2ACardResolver` with the
/// `a2a.utils.signing` verifier, key from the signature's `jku`) accepts the
/// cards `heddle serve --sign-key` serves. Needs `tests/interop/.venv`; skips
/// without it unless `HEDDLE_REQUIRE_INTEROP=1`.
#[test]
fn the_python_sdk_client_verifies_cards_heddle_serve_signed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join("tests/interop/.venv/bin/python");
    if !python.exists() {
        assert_ne!(
            std::env::var("HEDDLE_REQUIRE_INTEROP").as_deref(),
            Ok("1"),
            "HEDDLE_REQUIRE_INTEROP=1 but {} is missing",
            python.display()
        );
        eprintln!("SKIP python card resolver: {} missing", python.display());
        return;
    }
    for (alg, key) in [
        ("ES256", "ec.pem"),
        ("RS256", "rsa.pem"),
        ("EdDSA", "ed25519.pem"),
    ] {
        let server = serve(&["--sign-key", &testdata(key)]);
        for agent in ["echo", "writer"] {
            let o = Command::new(&python)
                .arg(root.join("tests/interop/python/card_signing.py"))
                .args([
                    "resolve",
                    alg,
                    &format!("{}/api/v1/agents/{agent}", server.url),
                ])
                .output()
                .expect("python runs");
            assert!(o.status.success(), "{alg} {agent}: {}", text(&o));
            assert!(String::from_utf8_lossy(&o.stdout).starts_with("verified"));
        }
    }
}

#[test]
fn card_sign_verify_and_jwks_commands() {
    let dir = tempfile::tempdir().expect("tmp");
    let card = json!({
        "name": "Echo", "description": "repeats", "version": "1.0",
        "supportedInterfaces": [{"url": "https://a.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"], "skills": [{"id": "e", "name": "E", "description": "d", "tags": ["t"]}]
    });
    let unsigned = dir.path().join("card.json");
    std::fs::write(&unsigned, card.to_string()).expect("write");
    let unsigned = unsigned.display().to_string();
    let hmac = testdata("hmac.jwk.json");

    let o = heddle(&["card", "sign", "--key", &hmac, &unsigned]);
    assert!(o.status.success(), "{}", text(&o));
    let signed_path = dir.path().join("signed.json");
    std::fs::write(&signed_path, &o.stdout).expect("write");
    let signed_path = signed_path.display().to_string();
    let verify = |file: &str, keys: &str| heddle(&["card", "verify", file, "--jwks", keys]);

    let o = verify(&signed_path, &hmac);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("verified (HS256, kid hmac-1)"));

    let mut tampered: Value =
        serde_json::from_slice(&std::fs::read(&signed_path).expect("read")).expect("json");
    tampered["name"] = json!("Evil");
    let tampered_path = dir.path().join("tampered.json").display().to_string();
    std::fs::write(&tampered_path, tampered.to_string()).expect("write");
    let o = verify(&tampered_path, &hmac);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("invalid"));

    let o = verify(&unsigned, &hmac);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("absent"));

    // The EC key's public JWKS (kid = thumbprint) does not know kid hmac-1.
    let o = heddle(&["card", "jwks", "--key", &testdata("ec.pem")]);
    assert!(o.status.success(), "{}", text(&o));
    let jwks: Value = serde_json::from_slice(&o.stdout).expect("jwks");
    assert_eq!(jwks["keys"][0]["kty"], "EC");
    assert!(jwks["keys"][0].get("d").is_none());
    let jwks_path = dir.path().join("jwks.json").display().to_string();
    std::fs::write(&jwks_path, &o.stdout).expect("write");
    let o = verify(&signed_path, &jwks_path);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("unverifiable"));

    // An EC-signed card verifies with that JWKS.
    let o = heddle(&["card", "sign", "--key", &testdata("ec.pem"), &unsigned]);
    assert!(o.status.success(), "{}", text(&o));
    let ec_signed = dir.path().join("ec-signed.json").display().to_string();
    std::fs::write(&ec_signed, &o.stdout).expect("write");
    let o = verify(&ec_signed, &jwks_path);
    assert!(o.status.success(), "{}", text(&o));
}

/// One raw HTTP/1.1 exchange with `server` (`Connection: close`): the status
/// line and the body.
fn raw(server: &Server, head_and_body: &str) -> (String, String) {
    use std::io::{Read as _, Write as _};
    let addr = server.url.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    tcp.write_all(head_and_body.replace("{addr}", addr).as_bytes())
        .expect("write");
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer);
    let status = answer.lines().next().unwrap_or_default().to_owned();
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

const SEND: &str = r#"{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}"#;

fn post(host: &str, content_type: Option<&str>, body: &str) -> String {
    let ct = content_type.map_or(String::new(), |c| format!("Content-Type: {c}\r\n"));
    format!(
        "POST /api/v1/agents/echo/a2a HTTP/1.1\r\nHost: {host}\r\nA2A-Version: 1.0\r\n{ct}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A DNS-rebinding page reaches a local hub under its own name: the hub
/// answers only for the names it is served at.
#[test]
fn the_default_hub_refuses_hosts_it_is_not_served_at() {
    let server = serve(&[]);
    let (status, body) = raw(
        &server,
        &post("rebind.attacker.example", Some("application/json"), SEND),
    );
    assert!(status.contains(" 421 "), "{status}");
    assert!(body.contains("Host"), "{body}");
    let (status, _) = raw(
        &server,
        "GET /api/v1/agents/echo/rest/tasks HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    );
    assert!(status.contains(" 421 "), "{status}");
    // Its own address and localhost are served.
    let (status, _) = raw(&server, &post("{addr}", Some("application/json"), SEND));
    assert!(status.contains(" 200 "), "{status}");
    let port = server.url.rsplit(':').next().unwrap_or_default().to_owned();
    let (status, _) = raw(
        &server,
        &post(&format!("localhost:{port}"), Some("application/json"), SEND),
    );
    assert!(status.contains(" 200 "), "{status}");
}

#[test]
fn allow_host_adds_a_name() {
    let server = serve(&["--allow-host", "hub.internal"]);
    let (status, _) = raw(
        &server,
        &post("hub.internal", Some("application/json"), SEND),
    );
    assert!(status.contains(" 200 "), "{status}");
}

/// A `no-cors` fetch can POST a body with no type or `text/plain`; JSON
/// needs a preflight, which the hub does not answer.
#[test]
fn a_body_that_is_not_json_is_415_on_jsonrpc_and_rest() {
    let server = serve(&[]);
    for ct in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let (status, body) = raw(&server, &post("{addr}", ct, SEND));
        assert!(status.contains(" 415 "), "{ct:?}: {status}");
        assert!(body.contains("application/json"), "{body}");
    }
    let rest = format!(
        "POST /api/v1/agents/echo/rest/message:send HTTP/1.1\r\nHost: {{addr}}\r\nA2A-Version: 1.0\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}"#.len(),
        r#"{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}"#
    );
    let (status, _) = raw(&server, &rest);
    assert!(status.contains(" 415 "), "{status}");
    // No CORS policy unless asked for: a preflight gets no permission.
    let (status, _) = raw(
        &server,
        "OPTIONS /api/v1/agents/echo/a2a HTTP/1.1\r\nHost: {addr}\r\nOrigin: https://page.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
    );
    assert!(
        !status.contains(" 200 ") && !status.contains(" 204 "),
        "{status}"
    );
}

#[test]
fn cors_origin_lets_exactly_that_origin_call() {
    let server = serve(&["--cors-origin", "https://console.example"]);
    use std::io::{Read as _, Write as _};
    let addr = server.url.trim_start_matches("http://").to_owned();
    let preflight = |origin: &str| {
        let mut tcp = std::net::TcpStream::connect(&addr).expect("connect");
        let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        tcp.write_all(format!("OPTIONS /api/v1/agents/echo/a2a HTTP/1.1\r\nHost: {addr}\r\nOrigin: {origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\nConnection: close\r\n\r\n").as_bytes()).expect("write");
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer);
        answer.to_ascii_lowercase()
    };
    assert!(
        preflight("https://console.example")
            .contains("access-control-allow-origin: https://console.example")
    );
    assert!(!preflight("https://other.example").contains("access-control-allow-origin"));
}

/// RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request with no
/// Host or with more than one.
#[test]
fn http11_without_exactly_one_host_is_400() {
    let server = serve(&[]);
    let (status, _) = raw(
        &server,
        "GET /api/v1/agents HTTP/1.1\r\nConnection: close\r\n\r\n",
    );
    assert!(status.contains(" 400 "), "{status}");
    let (status, _) = raw(
        &server,
        "GET /api/v1/agents HTTP/1.1\r\nHost: {addr}\r\nHost: {addr}\r\nConnection: close\r\n\r\n",
    );
    assert!(status.contains(" 400 "), "{status}");
}

/// One caller past `--rate-limit` is refused on every binding with the
/// retryable error of its kind, and told when to come back.
#[test]
fn a_caller_over_its_rate_gets_429_or_resource_exhausted_with_retry_after() {
    let server = serve(&["--rate-limit", "1", "--rate-burst", "2"]);
    for _ in 0..2 {
        let (status, _) = raw(&server, &post("{addr}", Some("application/json"), SEND));
        assert!(status.contains(" 200 "), "{status}");
    }
    let addr = server.url.trim_start_matches("http://").to_owned();
    let full = |req: &str| {
        use std::io::{Read as _, Write as _};
        let mut tcp = std::net::TcpStream::connect(&addr).expect("connect");
        let _ = tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        tcp.write_all(req.replace("{addr}", &addr).as_bytes())
            .expect("write");
        let mut answer = String::new();
        let _ = tcp.read_to_string(&mut answer);
        answer
    };
    let answer = full(&post("{addr}", Some("application/json"), SEND));
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: "),
        "{answer}"
    );
    assert!(
        answer.contains("-32029") && answer.contains("RESOURCE_EXHAUSTED"),
        "{answer}"
    );
    let answer = full(
        "GET /api/v1/agents/echo/rest/tasks HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 1.0\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.contains("RESOURCE_EXHAUSTED"), "{answer}");
    // gRPC: a few calls in a row, one token a second, so most are refused.
    let echo = format!("{}/api/v1/agents/echo", server.url);
    let refused = (0..4)
        .map(|_| heddle(&["send", &echo, "hi", "--binding", "grpc"]))
        .filter(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            !o.status.success() && text.to_lowercase().contains("too many requests")
        })
        .count();
    assert!(refused >= 1, "no gRPC call was refused");
}
