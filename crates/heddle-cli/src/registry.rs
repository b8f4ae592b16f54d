//! `heddle registry`: work with what the hub's registry takes, offline.

use std::{path::Path, process::ExitCode};

use anyhow::Context;
use clap::Subcommand;
use heddle_hub::manifest;

/// `heddle registry …`
#[derive(Subcommand, Debug)]
pub enum RegistryCommand {
    /// Check an a2ahub agent manifest (JSON) against the hub's manifest
    /// schema, or a hub config (TOML: its `[[agents]]` tables and the
    /// manifests they carry): prints `ok: …`, or each violation as
    /// `POINTER: message` and exits 1.
    Validate {
        /// The manifest (.json) or hub config (.toml) file.
        file: std::path::PathBuf,
    },
}

/// Runs a registry command; `validate` exits 0 when valid, 1 when not.
pub fn run(cmd: RegistryCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        RegistryCommand::Validate { file } => Ok(if validate_file(&file)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }),
    }
}

/// Checks a manifest, or a hub config when the file is TOML (by its
/// `.toml` extension, or because it is not JSON but parses as TOML; a
/// `.json` file is always a manifest).
pub fn validate_file(path: &Path) -> anyhow::Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str());
    let is_toml = ext == Some("toml")
        || (ext != Some("json")
            && serde_json::from_str::<serde_json::Value>(&text).is_err()
            && text.parse::<toml::Table>().is_ok());
    if !is_toml {
        return validate_manifest_file(path);
    }
    let origin = path.display().to_string();
    let cfg = match crate::hub_config::parse(&text, &origin) {
        Ok(c) => c,
        Err(e) => {
            println!("(root): {e:#}");
            return Ok(false);
        }
    };
    let mut ok = true;
    for e in cfg.check() {
        println!(
            "/agents/{}/{}: {}",
            e.index - 1,
            e.error.field,
            e.error.problem
        );
        ok = false;
    }
    for (i, entry) in cfg.agents.iter().enumerate() {
        if let Some(doc) = &entry.manifest
            && let Err(violations) = manifest::validate(doc)
        {
            for v in violations {
                println!("/agents/{i}/manifest{}: {}", v.pointer, v.message);
            }
            ok = false;
        }
    }
    if ok {
        println!("ok: {} agents", cfg.agents.len());
    }
    Ok(ok)
}

/// Checks the manifest in `path` and prints the verdict on stdout: whether
/// it is valid. An unreadable file is an error; a file that is not JSON is
/// an invalid manifest.
pub fn validate_manifest_file(path: &Path) -> anyhow::Result<bool> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let doc: serde_json::Value = match serde_json::from_str(&text) {
        Ok(doc) => doc,
        Err(e) => {
            println!("(root): not JSON: {e}");
            return Ok(false);
        }
    };
    match manifest::validate(&doc) {
        Ok(m) => {
            println!(
                "ok: {} {}",
                m.agent_name,
                m.version.as_deref().unwrap_or("(no version)")
            );
            Ok(true)
        }
        Err(violations) => {
            for v in &violations {
                println!("{v}");
            }
            Ok(false)
        }
    }
}
