//! a2ahub manifests: every rule of the schema (a manifest that sets every
//! field passes; one variant per rule fails at its pointer), all violations
//! in one answer, the problem body, the card a manifest becomes, and the
//! rate limits it sets.

use std::path::Path;

use heddle_core::compat::v03;
use heddle_hub::{
    Bindings,
    manifest::{self, EXTENSION_URI, Manifest, Violation},
};
use serde_json::{Value, json};

/// Input checks, on their own and on every binding.
#[path = "manifest/input.rs"]
mod input;

/// `rate_limit`: the agent's request rate and concurrency, on real listeners.
#[path = "manifest/rate_limit.rs"]
mod rate_limit;

mod live;

fn fixture(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/manifests")
        .join(name);
    let text = std::fs::read_to_string(&path).expect("fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

fn full() -> Manifest {
    manifest::validate(&fixture("full.json")).expect("the full manifest is valid")
}

/// The full manifest with the member at `pointer` set to `value`, or
/// removed when `value` is `None`.
fn variant(pointer: &str, value: Option<Value>) -> Value {
    let mut doc = fixture("full.json");
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let target = doc.pointer_mut(parent).expect("the parent exists");
    match (target, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(key.to_owned(), v);
        }
        (Value::Object(map), None) => {
            map.remove(key);
        }
        (Value::Array(items), Some(v)) => {
            items[key.parse::<usize>().expect("an index")] = v;
        }
        (other, _) => panic!("cannot change {pointer} in {other}"),
    }
    doc
}

fn pointers(errors: &[Violation]) -> Vec<&str> {
    errors.iter().map(|v| v.pointer.as_str()).collect()
}

#[test]
fn the_embedded_schema_is_a_draft_2020_12_schema() {
    let schema: Value = serde_json::from_str(manifest::SCHEMA).expect("JSON");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(jsonschema::draft202012::meta::is_valid(&schema));
}

#[test]
fn a_manifest_with_every_field_is_accepted_and_read() {
    let m = full();
    assert_eq!(m.agent_name, "Invoice Reader");
    assert_eq!(m.version.as_deref(), Some("2.1.0-beta.1+build.7"));
    assert_eq!(m.description.len(), 3);
    assert_eq!(
        m.avatar_url.as_deref(),
        Some("https://agents.example.com/invoice-reader/avatar.png")
    );
    let auth = m.auth.as_ref().expect("auth");
    assert_eq!(auth.kind, manifest::AuthKind::ApiKey);
    assert_eq!(auth.api_key_header.as_deref(), Some("X-Api-Key"));
    assert_eq!(m.skills, ["Read invoice", "Sum totals"]);
    assert_eq!(m.pricing.model, manifest::PricingModel::PerTask);
    assert_eq!(m.pricing.currency, "USD");
    let limit = m.rate_limit.expect("rate limit");
    assert_eq!((limit.max_rps, limit.max_concurrent), (Some(10), Some(4)));
    assert_eq!(m.tags, ["finance", "ocr"]);
    // What was registered is what is written back.
    assert_eq!(
        serde_json::to_value(&m).expect("serialize"),
        fixture("full.json")
    );
    assert_eq!(m.json(), &fixture("full.json"));
}

#[test]
fn a_manifest_with_only_the_required_fields_is_accepted() {
    let m = manifest::validate(&fixture("minimal.json")).expect("valid");
    assert_eq!(m.version, None);
    assert!(m.description.is_empty() && m.tags.is_empty());
    assert_eq!(m.output_schema, json!(true));
}

#[test]
fn oauth2_auth_with_its_url_is_accepted() {
    let doc = variant(
        "/auth",
        Some(json!({"type": "oauth2", "oauth2_authorize_url": "https://id.example.com/authorize"})),
    );
    let m = manifest::validate(&doc).expect("valid");
    assert_eq!(
        m.auth.expect("auth").kind,
        manifest::AuthKind::OAuth2,
        "oauth2 read"
    );
}

/// Each rule broken alone: (what, pointer changed, new value or removal,
/// the pointer the violation must name).
#[test]
fn each_rule_broken_alone_is_refused_at_its_pointer() {
    let long_name = "x".repeat(65);
    let cases: Vec<(&str, &str, Option<Value>, &str)> = vec![
        // agent_name
        ("agent_name required", "/agent_name", None, ""),
        (
            "agent_name under 3",
            "/agent_name",
            Some(json!("ab")),
            "/agent_name",
        ),
        (
            "agent_name over 64",
            "/agent_name",
            Some(json!(long_name)),
            "/agent_name",
        ),
        (
            "agent_name a string",
            "/agent_name",
            Some(json!(42)),
            "/agent_name",
        ),
        // version
        (
            "version not semver",
            "/version",
            Some(json!("1.0")),
            "/version",
        ),
        (
            "version with a v",
            "/version",
            Some(json!("v1.0.0")),
            "/version",
        ),
        (
            "version leading zero",
            "/version",
            Some(json!("01.0.0")),
            "/version",
        ),
        // description
        (
            "description an object",
            "/description",
            Some(json!("Reads invoices")),
            "/description",
        ),
        (
            "description not empty",
            "/description",
            Some(json!({})),
            "/description",
        ),
        (
            "description text",
            "/description/en",
            Some(json!(5)),
            "/description/en",
        ),
        (
            "description keys are tags",
            "/description",
            Some(json!({"not a tag": "x"})),
            "/description",
        ),
        // avatar_url
        (
            "avatar_url a URI",
            "/avatar_url",
            Some(json!("not a uri")),
            "/avatar_url",
        ),
        // endpoint
        ("endpoint required", "/endpoint", None, ""),
        (
            "endpoint https",
            "/endpoint",
            Some(json!("http://agents.example.com/a")),
            "/endpoint",
        ),
        (
            "endpoint a URI",
            "/endpoint",
            Some(json!("https://bad host/")),
            "/endpoint",
        ),
        // auth
        ("auth an object", "/auth", Some(json!("api_key")), "/auth"),
        ("auth type required", "/auth/type", None, "/auth"),
        (
            "auth type known",
            "/auth/type",
            Some(json!("basic")),
            "/auth/type",
        ),
        (
            "api_key needs its header",
            "/auth/api_key_header",
            None,
            "/auth",
        ),
        (
            "api_key header a string",
            "/auth/api_key_header",
            Some(json!(1)),
            "/auth/api_key_header",
        ),
        (
            "oauth2 needs its URL",
            "/auth/type",
            Some(json!("oauth2")),
            "/auth",
        ),
        (
            "oauth2 URL a URI",
            "/auth",
            Some(json!({"type": "oauth2", "oauth2_authorize_url": "not a uri"})),
            "/auth/oauth2_authorize_url",
        ),
        // skills
        ("skills required", "/skills", None, ""),
        ("skills at least one", "/skills", Some(json!([])), "/skills"),
        (
            "skills a list",
            "/skills",
            Some(json!("Read invoice")),
            "/skills",
        ),
        (
            "skills strings",
            "/skills/1",
            Some(json!({"id": "x"})),
            "/skills/1",
        ),
        (
            "skills not empty strings",
            "/skills/0",
            Some(json!("")),
            "/skills/0",
        ),
        // input_schema and output_schema
        ("input_schema required", "/input_schema", None, ""),
        ("output_schema required", "/output_schema", None, ""),
        (
            "input_schema a schema",
            "/input_schema",
            Some(json!(5)),
            "/input_schema",
        ),
        (
            "input_schema known type",
            "/input_schema/type",
            Some(json!("strng")),
            "/input_schema/type",
        ),
        (
            "input_schema nested keyword",
            "/input_schema/properties/amount/minimum",
            Some(json!("zero")),
            "/input_schema/properties/amount/minimum",
        ),
        (
            "input_schema regex",
            "/input_schema/properties/currency/pattern",
            Some(json!("[A-Z")),
            "/input_schema/properties/currency/pattern",
        ),
        (
            "output_schema a schema",
            "/output_schema/properties",
            Some(json!([])),
            "/output_schema/properties",
        ),
        // pricing
        ("pricing required", "/pricing", None, ""),
        ("pricing model required", "/pricing/model", None, "/pricing"),
        (
            "pricing model known",
            "/pricing/model",
            Some(json!("per_hour")),
            "/pricing/model",
        ),
        ("pricing rate required", "/pricing/rate", None, "/pricing"),
        (
            "pricing rate at least 0",
            "/pricing/rate",
            Some(json!(-0.01)),
            "/pricing/rate",
        ),
        (
            "pricing rate a number",
            "/pricing/rate",
            Some(json!("0.05")),
            "/pricing/rate",
        ),
        (
            "pricing currency required",
            "/pricing/currency",
            None,
            "/pricing",
        ),
        (
            "pricing currency capitals",
            "/pricing/currency",
            Some(json!("usd")),
            "/pricing/currency",
        ),
        (
            "pricing currency 3 letters",
            "/pricing/currency",
            Some(json!("USDT")),
            "/pricing/currency",
        ),
        // rate_limit
        (
            "rate_limit an object",
            "/rate_limit",
            Some(json!(10)),
            "/rate_limit",
        ),
        (
            "max_rps positive",
            "/rate_limit/max_rps",
            Some(json!(0)),
            "/rate_limit/max_rps",
        ),
        (
            "max_rps whole",
            "/rate_limit/max_rps",
            Some(json!(2.5)),
            "/rate_limit/max_rps",
        ),
        (
            "max_concurrent positive",
            "/rate_limit/max_concurrent",
            Some(json!(0)),
            "/rate_limit/max_concurrent",
        ),
        (
            "max_concurrent whole",
            "/rate_limit/max_concurrent",
            Some(json!("4")),
            "/rate_limit/max_concurrent",
        ),
        // tags
        ("tags a list", "/tags", Some(json!("finance")), "/tags"),
        ("tags strings", "/tags/0", Some(json!(7)), "/tags/0"),
        // unknown members
        ("no unknown member", "/agentname", Some(json!("typo")), ""),
    ];
    let mut wrong = Vec::new();
    for (what, pointer, value, expected) in cases {
        match manifest::validate(&variant(pointer, value)) {
            Ok(_) => wrong.push(format!("{what}: accepted")),
            Err(errors) if pointers(&errors) != [expected] => {
                wrong.push(format!(
                    "{what}: expected only {expected:?}, got {errors:?}"
                ));
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_input_schema_with_a_ref_that_resolves_nowhere_is_refused() {
    // The meta-schema accepts it; compiling it does not (and fetches nothing).
    let doc = variant(
        "/input_schema",
        Some(json!({"$ref": "https://schemas.example.com/invoice.json"})),
    );
    let errors = manifest::validate(&doc).expect_err("refused");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].pointer.starts_with("/input_schema"), "{errors:?}");
    assert!(errors[0].message.contains("not a usable JSON Schema"));
}

#[test]
fn every_violation_is_reported_at_once() {
    let errors = manifest::validate(&fixture("many-errors.json")).expect_err("refused");
    let got = pointers(&errors);
    for expected in [
        "",
        "/agent_name",
        "/version",
        "/endpoint",
        "/skills",
        "/input_schema/type",
        "/pricing/model",
        "/pricing/rate",
        "/pricing/currency",
    ] {
        assert!(
            got.contains(&expected),
            "{expected:?} missing from {errors:#?}"
        );
    }
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(got, sorted, "in pointer order");
    assert!(
        errors
            .iter()
            .any(|v| v.pointer.is_empty() && v.message.contains("agentname")),
        "the unknown member is named: {errors:#?}"
    );
}

#[test]
fn a_manifest_that_is_not_an_object_is_refused_at_the_root() {
    let errors = manifest::validate(&json!(["agent"])).expect_err("refused");
    assert_eq!(pointers(&errors), [""]);
}

#[test]
fn the_problem_body_lists_every_violation() {
    let errors = manifest::validate(&fixture("many-errors.json")).expect_err("refused");
    let (status, body) = manifest::problem(&errors);
    assert_eq!(status.as_u16(), 422);
    assert_eq!(body["status"], 422);
    assert_eq!(body["type"], manifest::PROBLEM_TYPE);
    assert!(body["title"].is_string() && body["detail"].is_string());
    let listed = body["errors"].as_array().expect("errors");
    assert_eq!(listed.len(), errors.len());
    for (item, v) in listed.iter().zip(&errors) {
        assert_eq!(item["pointer"], v.pointer.as_str());
        assert_eq!(item["detail"], v.message.as_str());
    }
    assert_eq!(manifest::PROBLEM_CONTENT_TYPE, "application/problem+json");
}

#[test]
fn the_description_is_in_the_asked_language_else_english_else_the_first() {
    let m = full();
    let fr = "Lit les factures et en donne les totaux.";
    let en = "Reads invoices and returns their totals.";
    assert_eq!(m.profile(Some("fr")).description, fr);
    assert_eq!(m.profile(Some("FR-ca")).description, fr, "by its language");
    assert_eq!(m.profile(Some("de")).description, en);
    assert_eq!(m.profile(None).description, en);
    let no_english = variant(
        "/description",
        Some(json!({"ja": "請求書", "de": "Rechnungen"})),
    );
    let m = manifest::validate(&no_english).expect("valid");
    assert_eq!(
        m.profile(Some("it")).description,
        "Rechnungen",
        "first by tag"
    );
    let m = manifest::validate(&fixture("minimal.json")).expect("valid");
    assert_eq!(
        m.profile(None).description,
        "Echo",
        "no description: the name"
    );
}

#[test]
fn the_profile_has_the_skills_version_and_extension() {
    let p = full().profile(Some("en"));
    assert_eq!(p.name, "Invoice Reader");
    assert_eq!(p.version, "2.1.0-beta.1+build.7");
    let skills: Vec<(&str, &str)> = p
        .skills
        .iter()
        .map(|s| (s.id.as_str(), s.name.as_str()))
        .collect();
    assert_eq!(
        skills,
        [
            ("read-invoice", "Read invoice"),
            ("sum-totals", "Sum totals")
        ]
    );
    assert!(p.skills.iter().all(|s| s.tags == ["finance", "ocr"]));
    assert_eq!(p.input_modes, ["application/json"]);
    let [ext] = p.extensions.as_slice() else {
        panic!("one extension: {:?}", p.extensions);
    };
    assert_eq!(ext.uri, EXTENSION_URI);
    assert!(!ext.required, "callers need not activate it");
    let params = serde_json::to_value(ext.params.as_ref().expect("params")).expect("json");
    let doc = fixture("full.json");
    for member in [
        "pricing",
        "rate_limit",
        "input_schema",
        "output_schema",
        "tags",
        "avatar_url",
        "description",
    ] {
        assert_eq!(params[member], doc[member], "{member}");
    }
    assert!(params.get("endpoint").is_none() && params.get("auth").is_none());
    let minimal = manifest::validate(&fixture("minimal.json")).expect("valid");
    assert_eq!(minimal.profile(None).version, "0.0.0");
}

#[test]
fn both_card_versions_carry_the_extension() {
    let p = full().profile(None);
    let card = heddle_hub::card_for(
        "https://hub.example.com",
        "invoices",
        &p,
        Bindings::default(),
    );
    let caps = card.capabilities.as_ref().expect("capabilities");
    assert!(caps.extensions.iter().any(|e| e.uri == EXTENSION_URI));
    let v1_json = serde_json::to_value(&card).expect("json");
    assert_eq!(
        v1_json["capabilities"]["extensions"][0]["params"]["pricing"]["currency"],
        "USD"
    );

    let old = v03::AgentCard::from_v1(&card).expect("the card lists v0.3 interfaces");
    let exts = old
        .capabilities
        .extensions
        .as_ref()
        .expect("v0.3 extensions");
    let ext = exts
        .iter()
        .find(|e| e.uri == EXTENSION_URI)
        .expect("the extension in v0.3");
    // v0.3 leaves `required: false` out, its default.
    assert_ne!(ext.required, Some(true));
    let params = serde_json::to_value(ext.params.as_ref().expect("params")).expect("json");
    assert_eq!(params["rate_limit"]["max_rps"], 10);
    assert_eq!(old.version, "2.1.0-beta.1+build.7");
}
