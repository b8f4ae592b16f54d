//! `heddle agents` against a running `heddle serve`: add, list, update,
//! show and remove an agent through the admin API, and a wrong admin token
//! refused without being printed.

use std::process::Output;

mod common;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `heddle agents ARGS --hub URL` plus `auth`.
fn agents(url: &str, args: &[&str], auth: &[&str]) -> Output {
    let mut all = vec!["agents"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--hub", url]);
    all.extend_from_slice(auth);
    common::heddle(&all)
}

#[test]
fn an_agent_is_added_listed_disabled_and_removed_from_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("admin-token");
    let token_path = token_file.to_str().expect("a UTF-8 path");
    let server = common::serve("memory", &["--admin-token-file", token_path]);
    let auth = ["--admin-token-file", token_path];
    let url = server.url.as_str();

    let added = agents(
        url,
        &["add", "--id", "e2", "--builtin", "echo", "--tag", "t"],
        &auth,
    );
    assert!(added.status.success(), "{}", stderr(&added));
    assert!(
        stdout(&added).starts_with(&format!(
            "registered e2 (builtin): card at {url}/api/v1/agents/e2/.well-known/agent-card.json"
        )),
        "{}",
        stdout(&added)
    );

    let listed = agents(url, &["list"], &auth);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let line = stdout(&listed)
        .lines()
        .find(|l| l.starts_with("e2 "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("e2 not listed:\n{}", stdout(&listed)));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[..4], ["e2", "builtin", "yes", "public"], "{line}");

    let updated = agents(url, &["update", "e2", "--disable"], &auth);
    assert!(updated.status.success(), "{}", stderr(&updated));
    assert_eq!(stdout(&updated), "updated e2: registered, not served\n");
    let shown = agents(url, &["show", "e2"], &auth);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let entry: serde_json::Value = serde_json::from_str(&stdout(&shown)).expect("JSON");
    assert_eq!(entry["enabled"], false, "{entry}");
    assert_eq!(entry["tags"], serde_json::json!(["t"]), "{entry}");

    let removed = agents(url, &["remove", "e2"], &auth);
    assert!(removed.status.success(), "{}", stderr(&removed));
    assert_eq!(stdout(&removed), "removed e2\n");
    let gone = agents(url, &["show", "e2"], &auth);
    assert!(!gone.status.success());
    assert!(stderr(&gone).contains("Not found"), "{}", stderr(&gone));
}

#[test]
fn a_wrong_admin_token_fails_with_401_and_is_not_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("admin-token");
    let server = common::serve(
        "memory",
        &["--admin-token-file", token_file.to_str().expect("UTF-8")],
    );
    let wrong = "not-the-admin-token-5f3a9c";
    let out = agents(&server.url, &["list"], &["--admin-token", wrong]);
    assert!(!out.status.success());
    let (out_text, err_text) = (stdout(&out), stderr(&out));
    assert!(err_text.contains("401"), "{err_text}");
    assert!(
        !out_text.contains(wrong) && !err_text.contains(wrong),
        "the token was printed: {out_text}{err_text}"
    );
}

#[test]
fn an_mcp_server_is_added_by_its_command_and_its_tools_are_its_skills() {
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../tests/interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    if !server.exists() {
        assert!(
            std::env::var("HEDDLE_REQUIRE_INTEROP").as_deref() != Ok("1"),
            "HEDDLE_REQUIRE_INTEROP=1 but {} is missing: run tests/interop/setup.sh",
            server.display()
        );
        println!("skipped: the MCP everything server is not installed (tests/interop/setup.sh)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let token_file = dir.path().join("admin-token");
    let token_path = token_file.to_str().expect("a UTF-8 path");
    let hub = common::serve("memory", &["--admin-token-file", token_path]);
    let auth = ["--admin-token-file", token_path];
    let url = hub.url.as_str();
    let script = server.to_str().expect("a UTF-8 path");
    let added = agents(
        url,
        &[
            "add",
            "--id",
            "tools",
            "--mcp-command",
            "node",
            "--mcp-arg",
            script,
            "--mcp-arg",
            "stdio",
        ],
        &auth,
    );
    assert!(added.status.success(), "{}", stderr(&added));
    assert!(
        stdout(&added).starts_with("registered tools (mcp)"),
        "{}",
        stdout(&added)
    );
    let card = common::heddle(&[
        "card",
        "get",
        &format!("{url}/api/v1/agents/tools"),
        "--output",
        "json",
    ]);
    assert!(card.status.success(), "{}", stderr(&card));
    let card: serde_json::Value = serde_json::from_slice(&card.stdout).expect("a JSON card");
    let skills: Vec<&str> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(
        skills.contains(&"echo") && skills.contains(&"get-sum"),
        "{skills:?}"
    );
}
