//! `heddle new agent`: every security scheme and binding set written
//! without questions, each file checked by an independent reader (the
//! card by `heddle card validate` in both versions, the skills schema
//! compiled as draft 2020-12, the manifest against the manifest schema
//! file itself); `--from-card`; the interactive form in a pseudo-terminal;
//! and one generated crate built, started, and called by the official
//! Python SDK knowing only what its blueprint says.

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

fn heddle_in(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("heddle runs")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `heddle card validate FILE` passes and names the expected form.
fn card_validates(file: &Path, form: &str) {
    let out = common::heddle(&["card", "validate", file.to_str().expect("utf8")]);
    ok(&out, "card validate");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(&format!("valid ({form} card)")), "{said}");
}

/// A data input schema a skill declares, for the skills schema to carry
/// (with a local `$ref`, which must still resolve inside the skills schema).
const CITY_SCHEMA: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema",
  "$defs":{"name":{"type":"string","minLength":1}},
  "type":"object","required":["city"],"properties":{"city":{"$ref":"#/$defs/name"}}}"##;

struct Case {
    security: &'static [&'static str],
    bindings: &'static str,
    v03: bool,
    url: &'static str,
    target: &'static str,
    /// The card's scheme member, e.g. `apiKeySecurityScheme`.
    scheme: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        security: &["--security", "none"],
        bindings: "jsonrpc",
        v03: false,
        url: "http://127.0.0.1:8080",
        target: "crate",
        scheme: None,
    },
    Case {
        security: &["--security", "api-key", "--api-key-header", "X-Agent-Key"],
        bindings: "jsonrpc,rest",
        v03: true,
        url: "http://localhost:9000/agents/weather",
        target: "hub-toml",
        scheme: Some("apiKeySecurityScheme"),
    },
    Case {
        security: &[
            "--security",
            "bearer-jwt",
            "--jwt-issuer",
            "https://issuer.example",
            "--jwt-audience",
            "https://agents.example",
        ],
        bindings: "rest,grpc",
        v03: false,
        url: "https://agents.example/weather",
        target: "manifest",
        scheme: Some("httpAuthSecurityScheme"),
    },
    Case {
        security: &[
            "--security",
            "oauth2",
            "--token-url",
            "https://idp.example/token",
            "--scope",
            "a2a",
        ],
        bindings: "jsonrpc,rest,grpc",
        v03: true,
        url: "https://agents.example",
        target: "manifest",
        scheme: Some("oauth2SecurityScheme"),
    },
    Case {
        security: &["--security", "mtls"],
        bindings: "grpc,jsonrpc",
        v03: true,
        url: "https://localhost:8443",
        target: "crate",
        scheme: Some("mtlsSecurityScheme"),
    },
];

/// The manifest schema file the hub embeds, compiled here on its own.
fn manifest_schema() -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../heddle-hub/src/manifest/manifest.schema.json");
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&read_json(&path))
        .expect("the manifest schema compiles")
}

#[test]
fn every_security_scheme_and_binding_set_writes_files_that_validate() {
    let tmp = tempfile::tempdir().expect("tmp");
    let schema_file = tmp.path().join("city.schema.json");
    std::fs::write(&schema_file, CITY_SCHEMA).expect("write");
    for (n, case) in CASES.iter().enumerate() {
        let dir = tmp.path().join(format!("case{n}"));
        let skill = format!(
            "id=forecast|name=Forecast|description=Weather for a city|tags=weather|\
             examples=Rain in Paris?|input=text/plain|output=text/plain,application/json|input-schema={}",
            schema_file.display()
        );
        let mut args = vec![
            "new",
            "agent",
            "--yes",
            "--name",
            "Weather Bot",
            "--description",
            "Forecasts the weather",
            "--skill",
            &skill,
            "--skill",
            "id=alerts|tags=weather,alerts",
            "--bindings",
            case.bindings,
            "--url",
            case.url,
            "--target",
            case.target,
            "--out",
            dir.to_str().expect("utf8"),
        ];
        args.extend_from_slice(case.security);
        if case.v03 {
            args.push("--v03");
        }
        if case.bindings.contains("grpc") {
            args.extend(["--grpc-addr", "localhost:50051"]);
        }
        let out = common::heddle(&args);
        ok(&out, &format!("case {n}"));

        // The v1.0 card: valid, with the scheme and exactly the interfaces asked for.
        card_validates(&dir.join("agent-card.json"), "v1.0");
        let card = read_json(&dir.join("agent-card.json"));
        let schemes = card["securitySchemes"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        match case.scheme {
            None => assert!(schemes.is_empty(), "case {n}: {schemes:?}"),
            Some(member) => assert!(
                schemes.values().any(|s| s.get(member).is_some()),
                "case {n}: no {member} in {schemes:?}"
            ),
        }
        let listed: Vec<(String, String)> = card["supportedInterfaces"]
            .as_array()
            .expect("interfaces")
            .iter()
            .map(|i| {
                (
                    i["protocolBinding"].as_str().unwrap_or("").to_owned(),
                    i["protocolVersion"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        for (flag, binding) in [
            ("jsonrpc", "JSONRPC"),
            ("rest", "HTTP+JSON"),
            ("grpc", "GRPC"),
        ] {
            for version in ["1.0", "0.3"] {
                let want = case.bindings.contains(flag) && (version == "1.0" || case.v03);
                let has = listed.contains(&(binding.to_owned(), version.to_owned()));
                assert_eq!(has, want, "case {n}: {binding} {version} in {listed:?}");
            }
        }
        // gRPC is dialed over TLS exactly when the agent's URL is https.
        for i in card["supportedInterfaces"].as_array().expect("interfaces") {
            if i["protocolBinding"] == "GRPC" {
                let url = i["url"].as_str().expect("url");
                if case.url.starts_with("https://") {
                    assert_eq!(url, "https://localhost:50051", "case {n}");
                } else {
                    assert_eq!(url, "localhost:50051", "case {n}");
                }
            }
        }
        // The v0.3 card, when asked for.
        let v03_file = dir.join("agent-card.v0.3.json");
        assert_eq!(v03_file.exists(), case.v03, "case {n}");
        if case.v03 {
            card_validates(&v03_file, "v0.3");
            let old = read_json(&v03_file);
            assert_eq!(old["protocolVersion"], "0.3.0");
            if let Some(member) = case.scheme {
                let tag = match member {
                    "apiKeySecurityScheme" => "apiKey",
                    "oauth2SecurityScheme" => "oauth2",
                    _ => "mutualTLS",
                };
                assert!(
                    old["securitySchemes"]
                        .as_object()
                        .is_some_and(|m| m.values().any(|s| s["type"] == tag)),
                    "case {n}: {}",
                    old["securitySchemes"]
                );
            }
        }

        // The skills schema: a draft 2020-12 schema whose root takes the
        // forecast skill's data and refuses data without a city.
        let skills = read_json(&dir.join("skills.schema.json"));
        assert_eq!(
            skills["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let v = jsonschema::draft202012::new(&skills).expect("the skills schema compiles");
        assert!(v.is_valid(&json!({"city": "Paris"})), "case {n}");
        assert!(!v.is_valid(&json!({"town": "Paris"})), "case {n}");
        assert!(
            !v.is_valid(&json!({"city": 5})),
            "case {n}: the local $ref applies"
        );
        assert!(
            skills["$defs"]["forecast.output"].is_object(),
            "the JSON output is described: {skills}"
        );

        // The blueprint names every interface URL and the auth header.
        let blueprint = std::fs::read_to_string(dir.join("BLUEPRINT.md")).expect("blueprint");
        for i in card["supportedInterfaces"].as_array().expect("interfaces") {
            let url = i["url"].as_str().expect("url");
            assert!(
                blueprint.contains(url),
                "case {n}: {url} not in the blueprint"
            );
        }
        assert!(blueprint.contains("## Errors") && blueprint.contains("TASK_NOT_FOUND"));
        assert!(blueprint.contains("TASK_STATE_COMPLETED") && blueprint.contains("input-required"));
        if case.security.contains(&"api-key") {
            assert!(blueprint.contains("X-Agent-Key: $A2A_API_KEY"), "case {n}");
        }
        if case.bindings.contains("rest") {
            assert!(blueprint.contains("/rest/message:send"), "case {n}");
        }

        // What goes with it.
        match case.target {
            "crate" => {
                let cargo = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
                assert!(cargo.contains("heddle-server = { path = "), "{cargo}");
                assert!(dir.join("src/main.rs").exists() && dir.join("src/agent.rs").exists());
                let settings = std::fs::read_to_string(dir.join("agent.toml")).expect("agent.toml");
                if case.scheme == Some("mtlsSecurityScheme") {
                    assert!(
                        settings.contains("require_client_cert = true"),
                        "{settings}"
                    );
                }
            }
            "hub-toml" => {
                let entry = dir.join("hub-entry.toml");
                ok(
                    &common::heddle(&["registry", "validate", entry.to_str().expect("utf8")]),
                    "registry validate hub-entry.toml",
                );
                let text = std::fs::read_to_string(&entry).expect("entry");
                assert!(
                    text.contains("type = \"api_key\", header = \"X-Agent-Key\""),
                    "{text}"
                );
                assert!(text.contains("allow_http = true"), "{text}");
            }
            _ => {
                let file = dir.join("manifest.json");
                ok(
                    &common::heddle(&["registry", "validate", file.to_str().expect("utf8")]),
                    "registry validate manifest.json",
                );
                let manifest = read_json(&file);
                let errors: Vec<String> = manifest_schema()
                    .iter_errors(&manifest)
                    .map(|e| format!("{}: {e}", e.instance_path()))
                    .collect();
                assert!(errors.is_empty(), "case {n}: {errors:?}");
                assert_eq!(
                    manifest["input_schema"], skills,
                    "the hub enforces the skills schema"
                );
            }
        }
    }
}

#[test]
fn a_bad_flag_is_refused_with_its_reason_and_nothing_is_written() {
    let tmp = tempfile::tempdir().expect("tmp");
    let out_dir = tmp.path().join("x");
    let base = [
        "new",
        "agent",
        "--yes",
        "--name",
        "X agent",
        "--description",
        "d",
        "--out",
        out_dir.to_str().expect("utf8"),
    ];
    let mut spaced = base.to_vec();
    spaced.extend(["--skill", "id=get weather"]);
    let out = common::heddle(&spaced);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot contain spaces"));
    let mut plain = base.to_vec();
    plain.extend(["--url", "http://agents.example.com"]);
    let out = common::heddle(&plain);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be https"));
    let mut bad_id = base.to_vec();
    bad_id.extend(["--id", "Has Space", "--target", "hub-toml"]);
    let out = common::heddle(&bad_id);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--id"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut local_manifest = base.to_vec();
    local_manifest.extend(["--target", "manifest"]);
    let out = common::heddle(&local_manifest);
    assert_eq!(out.status.code(), Some(2), "a manifest needs https");
    assert!(
        !out_dir.exists(),
        "nothing is written when a file would be invalid"
    );
}

#[test]
fn from_card_writes_the_blueprint_and_hub_entry_of_a_running_agent() {
    let server = common::serve("memory", &[]);
    let tmp = tempfile::tempdir().expect("tmp");
    let agent = format!("{}/api/v1/agents/echo", server.url);
    let out = heddle_in(
        tmp.path(),
        &["new", "agent", "--from-card", &agent, "--out", "echo"],
    );
    ok(&out, "--from-card URL");
    let dir = tmp.path().join("echo");
    let blueprint = std::fs::read_to_string(dir.join("BLUEPRINT.md")).expect("blueprint");
    assert!(blueprint.contains(&format!("{agent}/.well-known/agent-card.json")));
    assert!(blueprint.contains(&format!("{agent}/a2a")), "{blueprint}");
    ok(
        &common::heddle(&[
            "registry",
            "validate",
            dir.join("hub-entry.toml").to_str().expect("utf8"),
        ]),
        "the entry validates",
    );
    let entry = std::fs::read_to_string(dir.join("hub-entry.toml")).expect("entry");
    assert!(
        entry.contains(&format!(
            "card_url = \"{agent}/.well-known/agent-card.json\""
        )),
        "{entry}"
    );

    // From a file too, with a manifest for an https agent.
    let card = dir.join("card.json");
    let fetched = common::heddle(&["card", "get", &agent, "-o", "json"]);
    ok(&fetched, "card get");
    std::fs::write(&card, &fetched.stdout).expect("write");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--from-card",
            card.to_str().expect("utf8"),
            "--url",
            "https://agents.example/echo",
            "--target",
            "manifest",
            "--out",
            "from-file",
        ],
    );
    ok(&out, "--from-card FILE");
    // A file says nothing of where the agent is: --url is asked for, not guessed.
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--from-card",
            card.to_str().expect("utf8"),
            "--out",
            "no-url",
        ],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pass --url"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!tmp.path().join("no-url").exists());

    // A card's text cannot break out of a TOML comment or a Markdown line.
    let mut evil: Value = serde_json::from_slice(&fetched.stdout).expect("card json");
    evil["name"] = "Evil\n[[agents]]\nid = \"injected\"\nkind = \"remote\"".into();
    evil["description"] = "line one\n# Injected heading\r\n".into();
    let evil_file = tmp.path().join("evil.json");
    std::fs::write(&evil_file, evil.to_string()).expect("write");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--from-card",
            evil_file.to_str().expect("utf8"),
            "--url",
            "http://127.0.0.1:9/evil",
            "--id",
            "evil",
            "--out",
            "evil",
        ],
    );
    ok(&out, "--from-card with newlines in its text");
    let entry = std::fs::read_to_string(tmp.path().join("evil/hub-entry.toml")).expect("entry");
    let tables = entry
        .lines()
        .filter(|l| l.trim_start().starts_with("[[agents]]"))
        .count();
    assert_eq!(tables, 1, "one agent, not two:\n{entry}");
    assert!(
        !entry.lines().any(|l| l.starts_with("id = \"injected\"")),
        "{entry}"
    );
    let blueprint = std::fs::read_to_string(tmp.path().join("evil/BLUEPRINT.md")).expect("md");
    assert!(
        !blueprint
            .lines()
            .any(|l| l.starts_with("[[agents]]") || l.starts_with("# Injected")),
        "{blueprint}"
    );
    let manifest = read_json(&tmp.path().join("from-file/manifest.json"));
    assert_eq!(manifest["endpoint"], "https://agents.example/echo");
    assert!(manifest_schema().is_valid(&manifest), "{manifest}");
}

/// Whether `python3` runs here; without it a printed skip (a failure when
/// HEDDLE_REQUIRE_INTEROP=1).
fn python3_present() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert_ne!(
            std::env::var("HEDDLE_REQUIRE_INTEROP").as_deref(),
            Ok("1"),
            "HEDDLE_REQUIRE_INTEROP=1 but python3 is missing (the pty driver needs it)"
        );
        println!(
            "skipped: the interactive form is driven through a pty by python3, which is missing"
        );
    }
    found
}

#[test]
fn the_interactive_form_asks_again_on_a_bad_answer_in_a_terminal() {
    if !python3_present() {
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let script = json!([
        ["Agent name", "Trip Planner"],
        ["What does it do?", "Plans trips"],
        ["Version", ""],
        ["Provider organization", "Example Org"],
        ["Provider URL", "https://example.org"],
        ["id (no spaces)", "plan trip"],
        ["cannot contain spaces", "plan-trip"],
        ["name", "Plan a trip"],
        ["description", ""],
        ["tags", "travel, planning"],
        ["example prompts", "A weekend in Rome"],
        ["input media types", ""],
        ["output media types", "text/plain, application/json"],
        ["JSON Schema file", ""],
        ["Add another skill?", "n"],
        ["stream", "y"],
        ["push notifications", "n"],
        ["Bindings", "jsonrpc,rest"],
        ["v0.3", "yes"],
        ["Security", "api-key"],
        ["API key header", ""],
        ["base URL", "http://trips.example.com"],
        ["must be https", "https://trips.example.com"],
        ["crate, hub-toml, manifest", "hub-toml"]
    ]);
    let script_file = tmp.path().join("answers.json");
    std::fs::write(&script_file, script.to_string()).expect("write");
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/new_agent/pty_form.py");
    let out = Command::new("python3")
        .arg(&driver)
        .arg(&script_file)
        .arg(env!("CARGO_BIN_EXE_heddle"))
        .args(["new", "agent", "--out", "trip"])
        .current_dir(tmp.path())
        .output()
        .expect("python3 runs the pty driver");
    let transcript = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{transcript}", out.status);
    // Each bad answer was answered with its reason and the same question.
    assert!(transcript.contains("cannot contain spaces"), "{transcript}");
    assert!(transcript.contains("must be https"), "{transcript}");
    assert_eq!(
        transcript.matches("id (no spaces)").count(),
        2,
        "{transcript}"
    );

    let dir = tmp.path().join("trip");
    card_validates(&dir.join("agent-card.json"), "v1.0");
    card_validates(&dir.join("agent-card.v0.3.json"), "v0.3");
    let card = read_json(&dir.join("agent-card.json"));
    assert_eq!(card["name"], "Trip Planner");
    assert_eq!(card["provider"]["organization"], "Example Org");
    assert_eq!(card["skills"][0]["id"], "plan-trip");
    assert_eq!(card["skills"][0]["description"], "Plan a trip");
    assert_eq!(card["skills"][0]["tags"], json!(["travel", "planning"]));
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://trips.example.com/a2a"
    );
    assert!(card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key");
    ok(
        &common::heddle(&[
            "registry",
            "validate",
            dir.join("hub-entry.toml").to_str().expect("utf8"),
        ]),
        "the entry validates",
    );
}

// ---- one generated crate, built and called ----------------------------------------------

/// The folder cargo builds in: the one this test's `heddle` was built in,
/// so the generated crate reuses the compiled heddle crates.
fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // …/target/debug/heddle → …/target
    Path::new(env!("CARGO_BIN_EXE_heddle"))
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .expect("target dir")
}

/// The Python SDK from tests/interop/setup.sh, or a printed skip of its
/// calls (a failure when HEDDLE_REQUIRE_INTEROP=1).
fn python_sdk() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/.venv/bin/python");
    if venv.exists() {
        return Some(venv);
    }
    let required = std::env::var("HEDDLE_REQUIRE_INTEROP").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "HEDDLE_REQUIRE_INTEROP=1 but {} is missing: run tests/interop/setup.sh",
        venv.display()
    );
    println!(
        "skipped: the Python a2a-sdk calls of the generated crate, which need \
         tests/interop/setup.sh (no {})",
        venv.display()
    );
    None
}

/// How long the generated crate's build may take before it is killed.
const BUILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(600);

/// `cargo build --offline` in `dir` (every dependency is one this test's
/// own build already fetched), killed with a clear failure past BUILD_LIMIT.
fn cargo_build(dir: &Path) {
    let log = dir.join("build.log");
    let file = std::fs::File::create(&log).expect("build log");
    let mut child = Command::new(env!("CARGO"))
        .args(["build", "--offline", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log"))
        .stderr(file)
        .spawn()
        .expect("cargo runs");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("cargo build") {
            break status;
        }
        if start.elapsed() > BUILD_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "cargo build of the generated crate took more than {} s; killed it\n{}",
                BUILD_LIMIT.as_secs(),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    assert!(
        status.success(),
        "cargo build of the generated crate: {status}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// A raw POST to the agent, no A2A client in between: its status and body.
fn post(url: &str, header: Option<(&str, &str)>, body: &Value) -> (u16, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new()
            .post(url)
            .header("A2A-Version", "1.0")
            .json(body);
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        let response = request.send().await.expect("the agent answers");
        let status = response.status().as_u16();
        (status, response.text().await.expect("body"))
    })
}

/// `heddle send` failed with exit code 2, saying `reason` on stderr.
fn refused(out: &std::process::Output, reason: &str, what: &str) {
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {said}");
    assert!(said.contains(reason), "{what}: no {reason:?} in {said}");
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A line of the blueprint's text after `marker`, up to `end`.
fn between<'a>(text: &'a str, marker: &str, end: &str) -> &'a str {
    let start = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker:?} not in the blueprint"))
        + marker.len();
    let rest = &text[start..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_generated_crate_builds_serves_its_card_and_answers_callers() {
    let python = python_sdk();
    let tmp = tempfile::tempdir().expect("tmp");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--yes",
            "--name",
            "Echo Planner",
            "--description",
            "Answers with what it was told",
            "--skill",
            "id=echo|name=Echo|description=Repeats the text|tags=echo",
            "--bindings",
            "jsonrpc,rest",
            "--v03",
            "--security",
            "api-key",
            "--url",
            &url,
            "--out",
            "agent",
        ],
    );
    ok(&out, "new agent");
    let dir = tmp.path().join("agent");

    cargo_build(&dir);
    let exe = target_dir().join("debug/echo-planner");

    // Everything below comes from the blueprint: the key command, the card
    // URL and the header to send.
    let blueprint = std::fs::read_to_string(dir.join("BLUEPRINT.md")).expect("blueprint");
    let keys_cmd = between(&blueprint, "export A2A_API_KEY=$(", ")");
    let args: Vec<&str> = keys_cmd.split_whitespace().collect();
    assert_eq!(args.first(), Some(&"heddle"), "{keys_cmd}");
    let key = heddle_in(&dir, &args[1..]);
    ok(&key, "the blueprint's key command");
    let key = String::from_utf8_lossy(&key.stdout).trim().to_owned();
    let card_url = between(&blueprint, "## Card\n\n- `", "`");
    let base = card_url
        .strip_suffix("/.well-known/agent-card.json")
        .expect("the card's well-known URL");
    let header = between(&blueprint, "send the header `", ":");
    assert_eq!(header, "X-API-Key");

    let mut server = Child(
        Command::new(&exe)
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the agent starts"),
    );
    let mut banner = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.take().expect("stdout")),
        &mut banner,
    )
    .expect("banner");
    assert!(banner.contains(&format!("127.0.0.1:{port}")), "{banner}");

    // The card served is the card written.
    let served = common::heddle(&["card", "get", base, "-o", "json"]);
    ok(&served, "card get");
    let served: Value = serde_json::from_slice(&served.stdout).expect("card json");
    let written = read_json(&dir.join("agent-card.json"));
    assert_eq!(
        served["supportedInterfaces"],
        written["supportedInterfaces"]
    );
    assert_eq!(
        served["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
        "X-API-Key"
    );

    // Without the key: refused, saying why; with it: answered.
    refused(
        &common::heddle(&["send", base, "hi"]),
        "HTTP 401: authentication required",
        "heddle send without the key",
    );
    let with_key = format!("{header}: {key}");
    let sent = common::heddle(&["send", base, "hi", "--header", &with_key]);
    ok(&sent, "heddle send with the key");
    assert!(String::from_utf8_lossy(&sent.stdout).contains("COMPLETED"));
    let message = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    for (path, body) in [
        (
            "/a2a",
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                   "params": {"message": message}}),
        ),
        ("/rest/message:send", json!({"message": message})),
    ] {
        let url = format!("{base}{path}");
        let (status, body_text) = post(&url, None, &body);
        assert_eq!(status, 401, "{path} without the key: {body_text}");
        assert!(
            body_text.contains("UNAUTHENTICATED"),
            "{path} without the key: {body_text}"
        );
        let (status, body_text) = post(&url, Some((header, &key)), &body);
        assert_eq!(status, 200, "{path} with the key: {body_text}");
        assert!(
            body_text.contains("TASK_STATE_COMPLETED"),
            "{path} with the key: {body_text}"
        );
    }

    // The official Python SDK, knowing only what the blueprint says.
    if let Some(python) = &python {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/interop/python/new_agent_client.py");
        for (binding, version) in [
            ("JSONRPC", "1.0"),
            ("HTTP+JSON", "1.0"),
            ("JSONRPC", "0.3"),
            ("HTTP+JSON", "0.3"),
        ] {
            let run = Command::new(python)
                .arg(&script)
                .args([base, header, &key, binding, version])
                .output()
                .expect("python runs");
            let said = String::from_utf8_lossy(&run.stdout);
            assert!(
                run.status.success() && said.matches("PASS").count() == 2,
                "{binding} {version}: {said}\n{}",
                String::from_utf8_lossy(&run.stderr)
            );
        }
    }

    drop(server);

    // The same executable serves the card and settings of agents laid out
    // with the other schemes (main.rs reads both at start): a bearer JWT
    // and mutual TLS, each refused without its credential.
    let jwt_port = free_port();
    let jwt_dir = tmp.path().join("jwt");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--yes",
            "--name",
            "Jwt Agent",
            "--description",
            "d",
            "--security",
            "bearer-jwt",
            "--jwt-issuer",
            "https://issuer.example",
            "--url",
            &format!("http://127.0.0.1:{jwt_port}"),
            "--out",
            "jwt",
        ],
    );
    ok(&out, "new agent (bearer-jwt)");
    let secret = "0123456789abcdef0123456789abcdef-secret";
    let _jwt_agent = start_with(&exe, &jwt_dir, &[("AGENT_JWT_SECRET", secret)]);
    let jwt_base = format!("http://127.0.0.1:{jwt_port}");
    refused(
        &common::heddle(&["send", &jwt_base, "hi"]),
        "HTTP 401: authentication required",
        "heddle send without a JWT",
    );
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        + 300;
    let token = jsonwebtoken::encode(
        &jsonwebtoken::Header::default(),
        &json!({"iss": "https://issuer.example", "sub": "alice", "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
    )
    .expect("token");
    ok(
        &common::heddle(&["send", &jwt_base, "hi", "--bearer", &token]),
        "a call with the issuer's JWT",
    );

    let mtls_port = free_port();
    let mtls_dir = tmp.path().join("mtls");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--yes",
            "--name",
            "Mtls Agent",
            "--description",
            "d",
            "--security",
            "mtls",
            "--url",
            &format!("https://localhost:{mtls_port}"),
            "--out",
            "mtls",
        ],
    );
    ok(&out, "new agent (mtls)");
    let tls = mtls_dir.join("tls");
    std::fs::create_dir_all(&tls).expect("tls dir");
    let ca_key = KeyPair::generate().expect("key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    std::fs::write(tls.join("ca.pem"), ca.pem()).expect("write");
    let issuer = Issuer::new(ca_params, ca_key);
    for (name, sans) in [("server", vec!["localhost".to_owned()]), ("client", vec![])] {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &issuer).expect("issue");
        std::fs::write(tls.join(format!("{name}.pem")), cert.pem()).expect("write");
        std::fs::write(tls.join(format!("{name}.key")), key.serialize_pem()).expect("write");
    }
    let _mtls_agent = start_with(&exe, &mtls_dir, &[]);
    let mtls_base = format!("https://localhost:{mtls_port}");
    let ca_file = tls.join("ca.pem").display().to_string();
    let without = common::heddle(&["send", &mtls_base, "hi", "--ca-cert", &ca_file]);
    // Under TLS 1.3 the server's alert can come after the client has
    // finished its side of the handshake: the client then sees its
    // connection closed (in one of several words) instead of the alert.
    let said = String::from_utf8_lossy(&without.stderr);
    assert_eq!(
        without.status.code(),
        Some(2),
        "without a certificate: {said}"
    );
    assert!(
        said.contains("CertificateRequired") || said.contains("agent card: transport error"),
        "without a certificate: {said}"
    );
    let with = common::heddle(&[
        "send",
        &mtls_base,
        "hi",
        "--ca-cert",
        &ca_file,
        "--client-cert",
        tls.join("client.pem").to_str().expect("utf8"),
        "--client-key",
        tls.join("client.key").to_str().expect("utf8"),
    ]);
    ok(
        &with,
        "a call with a client certificate from the agent's CA",
    );
    assert!(String::from_utf8_lossy(&with.stdout).contains("COMPLETED"));
}

/// Starts the built agent with the card and settings in `dir`; returns once
/// it says where it listens.
fn start_with(exe: &Path, dir: &Path, env: &[(&str, &str)]) -> Child {
    let mut child = Child(
        Command::new(exe)
            .current_dir(dir)
            .env("AGENT_CARD", dir.join("agent-card.json"))
            .env("AGENT_CONFIG", dir.join("agent.toml"))
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the agent starts"),
    );
    let mut lines = std::io::BufReader::new(child.0.stdout.take().expect("stdout"));
    let mut banner = String::new();
    std::io::BufRead::read_line(&mut lines, &mut banner).expect("banner");
    // Keep draining stdout so the agent never writes to a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    assert!(banner.contains("serving at"), "{banner}");
    child
}

#[test]
fn sign_key_signs_both_cards_and_heddle_verifies_them() {
    let tmp = tempfile::tempdir().expect("tmp");
    let key = tmp.path().join("k.jwk");
    std::fs::write(
        &key,
        r#"{"kty":"oct","k":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY","kid":"k1"}"#,
    )
    .expect("write");
    let key = key.to_str().expect("utf8");
    let out = heddle_in(
        tmp.path(),
        &[
            "new",
            "agent",
            "--yes",
            "--name",
            "Signed",
            "--description",
            "d",
            "--v03",
            "--sign-key",
            key,
            "--target",
            "hub-toml",
            "--out",
            "signed",
        ],
    );
    ok(&out, "new agent --sign-key");
    for file in ["agent-card.json", "agent-card.v0.3.json"] {
        let path = tmp.path().join("signed").join(file);
        let path = path.to_str().expect("utf8");
        card_validates(
            Path::new(path),
            if file.contains("0.3") { "v0.3" } else { "v1.0" },
        );
        let verdict = common::heddle(&["card", "verify", path, "--jwks", key]);
        ok(&verdict, file);
        assert!(String::from_utf8_lossy(&verdict.stdout).contains("verified (HS256, kid k1)"));
    }
}
