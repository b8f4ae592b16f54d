//! `heddle registry validate` on the hub's manifest fixtures.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../heddle-hub/tests/fixtures/manifests")
        .join(name)
}

fn validate(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_heddle"))
        .args(["registry", "validate"])
        .arg(file)
        .output()
        .expect("run heddle")
}

#[test]
fn a_valid_manifest_prints_its_name_and_version() {
    let out = validate(&fixture("full.json"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: Invoice Reader 2.1.0-beta.1+build.7\n"
    );
}

#[test]
fn an_invalid_manifest_prints_each_violation_and_exits_1() {
    let out = validate(&fixture("many-errors.json"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    for pointer in [
        "/agent_name: ",
        "/endpoint: ",
        "/input_schema/type: ",
        "/pricing/currency: ",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(pointer)),
            "{pointer} missing from:\n{stdout}"
        );
    }
    assert!(lines.iter().any(|l| l.starts_with("(root): ")), "{stdout}");
}

#[test]
fn a_file_that_is_not_json_is_invalid_and_a_missing_one_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "agent_name = 'x'").expect("write");
    let out = validate(&bad);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("(root): not JSON"));
    let out = validate(&dir.path().join("absent.json"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
