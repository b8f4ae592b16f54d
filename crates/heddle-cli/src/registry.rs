//! `heddle registry`: work with what the hub's registry takes, offline.

use std::{path::Path, process::ExitCode};

use anyhow::Context;
use clap::Subcommand;
use heddle_hub::manifest;

/// `heddle registry …`
#[derive(Subcommand, Debug)]
pub enum RegistryCommand {
    /// Check an a2ahub agent manifest (JSON) against the hub's manifest
    /// schema: prints `ok: NAME VERSION`, or each violation as
    /// `POINTER: message` and exits 1.
    Validate {
        /// The manifest file.
        file: std::path::PathBuf,
    },
}

/// Runs a registry command; `validate` exits 0 when valid, 1 when not.
pub fn run(cmd: RegistryCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        RegistryCommand::Validate { file } => Ok(if validate_manifest_file(&file)? {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        }),
    }
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
