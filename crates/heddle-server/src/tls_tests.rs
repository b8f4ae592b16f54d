use axum::{Extension, routing::get};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use super::*;

/// A throwaway CA and what it issued (PEM).
struct Pki {
    ca: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&key).expect("CA").pem();
        Self {
            ca,
            issuer: Issuer::new(params, key),
        }
    }

    /// (certificate, key) for `cn` with `sans`.
    fn issue(&self, cn: Option<&str>, sans: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        let cert = params.signed_by(&key, &self.issuer).expect("issue");
        (cert.pem(), key.serialize_pem())
    }
}

async fn whoami(caller: Option<Extension<Caller>>) -> String {
    match caller {
        Some(Extension(c)) => format!("{} {}", c.id, c.authenticated),
        None => "anonymous".into(),
    }
}

/// Starts the TLS server; returns its https URL.
async fn start(settings: TlsSettings) -> String {
    let app = Router::new().route("/whoami", get(whoami));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let config = settings.server_config().expect("config");
    tokio::spawn(serve_tls(listener, config, app, std::future::pending()));
    format!("https://localhost:{port}/whoami")
}

fn client(ca: Option<&str>, identity: Option<(&str, &str)>) -> reqwest::Client {
    let mut b = reqwest::Client::builder().use_rustls_tls();
    if let Some(ca) = ca {
        b = b.add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).expect("CA"));
    }
    if let Some((cert, key)) = identity {
        b = b.identity(
            reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).expect("identity"),
        );
    }
    b.build().expect("client")
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(e) = src {
        s = format!("{s}: {e}");
        src = e.source();
    }
    s
}

#[tokio::test]
async fn tls_serves_clients_trusting_the_ca_and_refuses_others() {
    let pki = Pki::new("Test CA");
    let (cert, key) = pki.issue(Some("server"), &["localhost"]);
    let url =
        start(TlsSettings::from_pem(cert.as_bytes(), key.as_bytes()).expect("settings")).await;

    let body = client(Some(&pki.ca), None)
        .get(&url)
        .send()
        .await
        .expect("TLS with the custom CA")
        .text()
        .await
        .expect("body");
    assert_eq!(body, "anonymous");

    let err = client(None, None)
        .get(&url)
        .send()
        .await
        .expect_err("untrusted");
    let text = chain(&err);
    assert!(text.contains("certificate"), "{text}");
}

#[tokio::test]
async fn mtls_client_certificate_becomes_the_caller() {
    let pki = Pki::new("Test CA");
    let (cert, key) = pki.issue(Some("server"), &["localhost"]);
    let settings = TlsSettings::from_pem(cert.as_bytes(), key.as_bytes())
        .expect("settings")
        .with_client_ca(pki.ca.as_bytes())
        .expect("client CA");
    let url = start(settings).await;

    let (alice, alice_key) = pki.issue(Some("alice"), &[]);
    let who = |c: reqwest::Client| {
        let url = url.clone();
        async move {
            c.get(&url)
                .send()
                .await
                .expect("request")
                .text()
                .await
                .expect("body")
        }
    };
    assert_eq!(
        who(client(Some(&pki.ca), Some((&alice, &alice_key)))).await,
        "mtls:alice true"
    );
    // No CN: the first SAN names the caller.
    let (svc, svc_key) = pki.issue(None, &["billing.internal"]);
    assert_eq!(
        who(client(Some(&pki.ca), Some((&svc, &svc_key)))).await,
        "mtls:billing.internal true"
    );
    // Without a certificate the caller stays anonymous (optional mTLS).
    assert_eq!(who(client(Some(&pki.ca), None)).await, "anonymous");

    // A certificate from another CA is refused at the handshake.
    let other = Pki::new("Other CA");
    let (mallory, mallory_key) = other.issue(Some("alice"), &[]);
    let refused = client(Some(&pki.ca), Some((&mallory, &mallory_key)))
        .get(&url)
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a foreign client certificate was accepted"
    );
}

#[test]
fn a_certificate_named_like_an_api_key_caller_is_not_that_caller() {
    let pki = Pki::new("Test CA");
    for (cn, sans) in [
        (Some("key:ci"), &[][..]),
        (Some("jwt:https://issuer.test#alice"), &[][..]),
        (None, &["key:ci.example"][..]),
    ] {
        let (pem, _) = pki.issue(cn, sans);
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM");
        let caller = caller_from_certificate(&der).expect("a caller");
        let name = cn.or(sans.first().copied()).unwrap_or_default();
        assert_eq!(caller.id, format!("mtls:{name}"));
        assert!(caller.authenticated);
    }
}

#[tokio::test]
async fn required_client_certificates_refuse_anonymous_clients() {
    let pki = Pki::new("Test CA");
    let (cert, key) = pki.issue(Some("server"), &["localhost"]);
    let mut settings = TlsSettings::from_pem(cert.as_bytes(), key.as_bytes())
        .expect("settings")
        .with_client_ca(pki.ca.as_bytes())
        .expect("client CA");
    settings.require_client_cert = true;
    let url = start(settings).await;
    assert!(client(Some(&pki.ca), None).get(&url).send().await.is_err());
    let (bob, bob_key) = pki.issue(Some("bob"), &[]);
    let ok = client(Some(&pki.ca), Some((&bob, &bob_key)))
        .get(&url)
        .send()
        .await
        .expect("with a certificate");
    assert_eq!(ok.text().await.expect("body"), "mtls:bob true");
}

#[test]
fn bad_pem_is_a_clear_error() {
    let err = TlsSettings::from_pem(b"not pem", b"not pem").expect_err("bad");
    assert!(err.to_string().contains("TLS"), "{err}");
    let pki = Pki::new("CA");
    let (cert, key) = pki.issue(Some("s"), &["localhost"]);
    let settings = TlsSettings::from_pem(cert.as_bytes(), key.as_bytes()).expect("ok");
    assert!(settings.clone().with_client_ca(b"").is_err());
    assert!(format!("{settings:?}").contains("redacted"));
}
