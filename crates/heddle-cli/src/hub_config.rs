//! The registry part of `heddle serve --config FILE` (`[[agents]]` and
//! `[admin]`), the default registry of demo agents, and the admin token.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use heddle_hub::config::RegistryConfig;

/// The registry served when the config names no agents.
pub const DEFAULT_REGISTRY: &str = include_str!("default-hub.toml");

/// The `[[agents]]` and `[admin]` of a TOML text (its other tables are
/// other features').
pub fn parse(text: &str, origin: &str) -> anyhow::Result<RegistryConfig> {
    let mut table: toml::Table =
        toml::from_str(text).with_context(|| format!("{origin} is not valid TOML"))?;
    let mut registry = toml::Table::new();
    for key in ["agents", "admin"] {
        if let Some(v) = table.remove(key) {
            registry.insert(key.to_owned(), v);
        }
    }
    let cfg: RegistryConfig = registry
        .try_into()
        .with_context(|| format!("the [[agents]] or [admin] tables of {origin}"))?;
    Ok(cfg)
}

/// Every rule the config's entries break, one line each; `Ok` if none.
pub fn check(cfg: &RegistryConfig, origin: &str) -> anyhow::Result<()> {
    let errors = cfg.check();
    if errors.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
    bail!("{origin} has invalid agents:\n{}", lines.join("\n"))
}

/// The registry config `heddle serve` runs with: the file's, with the demo
/// agents when it names none.
pub fn read(path: Option<&Path>) -> anyhow::Result<RegistryConfig> {
    let mut cfg = match path {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading the config file {}", p.display()))?;
            parse(&text, &p.display().to_string())?
        }
        None => RegistryConfig::default(),
    };
    if cfg.agents.is_empty() {
        cfg.agents = parse(DEFAULT_REGISTRY, "the default registry")?.agents;
    }
    check(
        &cfg,
        &path.map_or("the default registry".into(), |p| p.display().to_string()),
    )?;
    Ok(cfg)
}

/// Where `heddle serve` keeps the admin token unless told otherwise.
pub fn default_token_file() -> PathBuf {
    crate::serve::default_db().with_file_name("admin-token")
}

/// The admin token: `HEDDLE_ADMIN_TOKEN` when set, else the file's, made
/// (readable by the owner only) when it does not exist yet.
pub fn admin_token(file: &Path) -> anyhow::Result<String> {
    if let Ok(t) = std::env::var("HEDDLE_ADMIN_TOKEN")
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    if let Ok(t) = std::fs::read_to_string(file) {
        let t = t.trim();
        if t.len() < 16 {
            bail!(
                "the admin token in {} is shorter than 16 characters; delete the file to get a new one",
                file.display()
            );
        }
        return Ok(t.to_owned());
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let bytes: [u8; 32] = rand::random();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    write_private(file, &token)
        .with_context(|| format!("writing the admin token to {}", file.display()))?;
    Ok(token)
}

#[cfg(unix)]
fn write_private(file: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)?;
    f.write_all(token.as_bytes())
}

#[cfg(not(unix))]
fn write_private(file: &Path, token: &str) -> std::io::Result<()> {
    std::fs::write(file, token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_registry_serves_the_demo_agents() {
        let cfg = read(None).expect("default");
        let ids: Vec<&str> = cfg.agents.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, heddle_hub::agents::DEMO_AGENTS);
    }

    #[test]
    fn a_config_with_other_tables_yields_its_agents() {
        let cfg = parse(
            "[auth]\nrequired = true\n\n[[agents]]\nid = \"e2\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n\n[admin]\ncallers = [\"key:abc\"]\n",
            "test",
        )
        .expect("parse");
        assert_eq!(cfg.agents.len(), 1);
        assert_eq!(cfg.admin.callers, ["key:abc"]);
    }

    #[test]
    fn a_misspelt_field_is_refused() {
        let err = parse(
            "[[agents]]\nid = \"e\"\nkind = \"builtin\"\nenabeld = false\n",
            "test",
        )
        .expect_err("typo");
        assert!(format!("{err:#}").contains("enabeld"), "{err:#}");
    }
}
