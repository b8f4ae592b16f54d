//! `heddle new agent`: from a few answers (or flags, for scripts) to a valid
//! Agent Card, a skills schema, an endpoint blueprint, and a hub entry or a
//! Rust crate that serves the card; `--from-card` writes the blueprint and
//! hub entry of an agent that already exists.
//!
//! Each file is made and checked in memory first (cards by Heddle's card
//! validation, hub entries by the registry's validators, schemas by
//! compiling them) and written only when all of them pass.

mod blueprint;
mod card;
mod crate_gen;
mod form;
mod questions;
mod spec;

use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use crate::remote::Connection;

pub use spec::AgentSpec;

/// `heddle new …`
#[derive(Subcommand, Debug)]
pub enum NewCommand {
    /// Lay out a new A2A agent: its card (v1.0, and v0.3 with --v03), skills
    /// schema, endpoint blueprint, and a Rust crate or hub entry. Asks for
    /// what the flags do not say when run in a terminal; with --yes, or
    /// with no terminal, it asks nothing.
    Agent(Box<AgentArgs>),
}

/// What `heddle new agent` writes besides the card, schema and blueprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// A Rust crate serving the card (`cargo run`).
    Crate,
    /// A hub config `[[agents]]` table fronting the agent.
    HubToml,
    /// An a2ahub manifest (needs an https URL).
    Manifest,
}

/// Options of `heddle new agent`.
#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The agent's name.
    #[arg(long)]
    pub name: Option<String>,
    /// What it does.
    #[arg(long)]
    pub description: Option<String>,
    /// The agent's version (semver; default 1.0.0).
    #[arg(long = "agent-version", value_name = "VERSION")]
    pub agent_version: Option<String>,
    /// The provider's organization.
    #[arg(long)]
    pub provider: Option<String>,
    /// The provider's URL (with --provider).
    #[arg(long, requires = "provider")]
    pub provider_url: Option<String>,
    /// A skill, repeatable: `id=ID|name=NAME|description=TEXT|tags=a,b|
    /// examples=ONE|examples=TWO|input=text/plain,application/json|
    /// output=application/json|input-schema=FILE|output-schema=FILE`
    /// (id is required; fields are separated by `|`).
    #[arg(long = "skill", value_name = "FIELDS")]
    pub skills: Vec<String>,
    /// Whether the agent streams (default yes).
    #[arg(long, value_name = "BOOL")]
    pub streaming: Option<bool>,
    /// Whether it sends push notifications (default no).
    #[arg(long, value_name = "BOOL")]
    pub push: Option<bool>,
    /// Bindings, comma-separated: jsonrpc, rest, grpc (default jsonrpc,rest).
    #[arg(long)]
    pub bindings: Option<String>,
    /// Also serve A2A v0.3 and write its card (`agent-card.v0.3.json`).
    #[arg(long)]
    pub v03: bool,
    /// Who may call: none, api-key, bearer-jwt, oauth2 (client credentials), mtls.
    #[arg(long)]
    pub security: Option<String>,
    /// API key header (default X-API-Key).
    #[arg(long)]
    pub api_key_header: Option<String>,
    /// Bearer JWT issuer (`iss`).
    #[arg(long)]
    pub jwt_issuer: Option<String>,
    /// Bearer JWT audience (`aud`).
    #[arg(long)]
    pub jwt_audience: Option<String>,
    /// OAuth 2.0 token URL (client credentials).
    #[arg(long = "token-url", value_name = "URL")]
    pub token_url: Option<String>,
    /// OAuth 2.0 scope a token must grant (repeatable).
    #[arg(long = "scope", value_name = "SCOPE")]
    pub scopes: Vec<String>,
    /// Where the OAuth issuer publishes its keys (JWKS URL).
    #[arg(long = "jwks-url", value_name = "URL")]
    pub jwks_url: Option<String>,
    /// Where callers reach the agent: its base URL (https; http only on
    /// localhost unless --allow-http). Default http://127.0.0.1:8080.
    #[arg(long)]
    pub url: Option<String>,
    /// The gRPC address callers dial, host:port (with the grpc binding).
    #[arg(long)]
    pub grpc_addr: Option<String>,
    /// Accept plain-http URLs on other hosts than this one.
    #[arg(long)]
    pub allow_http: bool,
    /// What to write besides the card, schema and blueprint (default crate).
    #[arg(long, value_enum)]
    pub target: Option<Target>,
    /// The hub's agent id (default: from the name).
    #[arg(long)]
    pub id: Option<String>,
    /// Manifest pricing model: per_task, per_token, per_minute, subscription.
    #[arg(long, default_value = "per_task")]
    pub price_model: String,
    /// Manifest price per unit.
    #[arg(long, default_value_t = 0.0)]
    pub price: f64,
    /// Manifest currency (ISO 4217).
    #[arg(long, default_value = "USD")]
    pub currency: String,
    /// The folder to write (default: ./NAME); it must be empty or new.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Sign the cards with this key (JWK or PEM, as `heddle card sign`).
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<String>,
    /// Key id in the signatures.
    #[arg(long, requires = "sign_key")]
    pub sign_kid: Option<String>,
    /// JWKS URL in the signatures.
    #[arg(long, requires = "sign_key")]
    pub sign_jku: Option<String>,
    /// The crate's heddle dependencies from this Heddle checkout (default:
    /// the one this heddle was built from, else the project's git repository).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["heddle_git", "heddle_version"])]
    pub heddle_path: Option<PathBuf>,
    /// The crate's heddle dependencies from this git repository.
    #[arg(long, value_name = "URL", conflicts_with = "heddle_version")]
    pub heddle_git: Option<String>,
    /// The crate's heddle dependencies from the registry, at this version.
    #[arg(long, value_name = "VERSION")]
    pub heddle_version: Option<String>,
    /// Ask nothing: take the defaults for what the flags do not say.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Write the blueprint and hub entry of an existing agent from its card
    /// (a URL, an agent base URL, or a file).
    #[arg(long, value_name = "URL|FILE")]
    pub from_card: Option<String>,
    #[command(flatten)]
    pub conn: Connection,
}

/// Runs a `heddle new` command.
pub async fn run(cmd: NewCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        NewCommand::Agent(args) => {
            if args.from_card.is_some() {
                return from_card(&args).await;
            }
            let interactive = !args.yes && std::io::stdin().is_terminal();
            let (spec, target) = if interactive {
                let stdin = std::io::stdin().lock();
                let mut f = form::Form::new(stdin, std::io::stdout());
                questions::ask(&args, Some(&mut f))?
            } else {
                questions::ask::<std::io::StdinLock<'_>, std::io::Stdout>(&args, None)?
            };
            new_agent(&args, &spec, target)
        }
    }
}

/// Folder and id for the new agent.
fn out_dir(args: &AgentArgs, slug: &str) -> PathBuf {
    args.out.clone().unwrap_or_else(|| PathBuf::from(slug))
}

/// The hub's id for the agent: `--id` as given, else the hub's slug of its
/// name (cut to the longest id the hub takes); either way checked by the
/// hub's own rule.
fn agent_id(given: Option<&str>, name: &str) -> anyhow::Result<String> {
    use heddle_hub::registry::{MAX_ID_LEN, check_id, slug};
    let id = match given {
        Some(id) => id.trim().to_owned(),
        None => {
            let mut s = slug(name);
            s.truncate(MAX_ID_LEN);
            let s = s.trim_end_matches('-');
            if s.is_empty() {
                "agent".into()
            } else {
                s.to_owned()
            }
        }
    };
    check_id(&id).with_context(|| format!("--id {id:?}"))?;
    Ok(id)
}

/// Makes every file in memory, checks them, then writes them.
fn new_agent(args: &AgentArgs, spec: &AgentSpec, target: Target) -> anyhow::Result<ExitCode> {
    spec.check()?;
    let id = agent_id(args.id.as_deref(), &spec.name)?;
    let signing = signing(args)?;
    let card = card::build(spec);
    let (v1_doc, v03_doc) = card::documents(&card, spec.v03, signing.as_ref())?;
    let card_url = blueprint::card_url(&spec.base_url);

    let skills_schema = schema::skills_schema(spec);
    spec::check_schema(&skills_schema).context("the skills schema")?;
    let mut files: Vec<(String, String)> = vec![
        ("agent-card.json".into(), pretty(&v1_doc)?),
        ("skills.schema.json".into(), pretty(&skills_schema)?),
    ];
    if let Some(doc) = &v03_doc {
        files.push(("agent-card.v0.3.json".into(), pretty(doc)?));
    }
    let notes = questions::notes(spec, target);
    files.push((
        "BLUEPRINT.md".into(),
        blueprint::render(&card, &card_url, &notes),
    ));
    match target {
        Target::Crate => {
            let source = match (&args.heddle_path, &args.heddle_git, &args.heddle_version) {
                (Some(p), _, _) => crate_gen::DepSource::Path(
                    p.canonicalize()
                        .with_context(|| format!("--heddle-path {}", p.display()))?,
                ),
                (_, Some(g), _) => crate_gen::DepSource::Git(g.clone()),
                (_, _, Some(v)) => crate_gen::DepSource::Version(v.clone()),
                _ => crate_gen::DepSource::default_source(),
            };
            files.extend(crate_gen::files(spec, &id, &source)?);
        }
        Target::HubToml => files.push((
            "hub-entry.toml".into(),
            hub::toml_entry(&card, &id, &card_url)?,
        )),
        Target::Manifest => {
            let output = schema::output_schema(spec);
            let (doc, notes) = hub::manifest(
                &card,
                &spec.base_url,
                &skills_schema,
                &output,
                &pricing(args),
            )?;
            for note in notes {
                eprintln!("note: {note}");
            }
            files.push(("manifest.json".into(), pretty(&doc)?));
        }
    }
    let dir = out_dir(args, &spec.slug());
    write_all(&dir, &files)?;
    println!("wrote {} files to {}:", files.len(), dir.display());
    for (name, _) in &files {
        println!("  {name}");
    }
    if target == Target::Crate {
        println!(
            "next: cd {} && cargo run   (then see BLUEPRINT.md)",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `--from-card`: the blueprint and the hub entry (TOML, or a manifest
/// with `--target manifest`) of an existing agent.
async fn from_card(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    let source = args.from_card.as_deref().unwrap_or_default();
    let (text, fetched) = crate::card::fetch_source(source, &args.conn).await?;
    let given = match &args.url {
        Some(u) => Some(spec::endpoint(u, true, "--url")?),
        None => None,
    };
    // Where the card is: the URL it was fetched from, else (a file) under
    // --url; and the agent's base URL: --url, else the fetched URL without
    // its well-known path. An interface URL is never taken for either.
    let (card_url, base) = match (fetched, given) {
        (Some(fetched), given) => {
            let base = match given {
                Some(base) => base,
                None => heddle_server::CARD_PATHS
                    .iter()
                    .find_map(|p| fetched.strip_suffix(p))
                    .map(str::to_owned)
                    .with_context(|| {
                        format!(
                            "{fetched} is not at a well-known card path: pass --url with the \
                             agent's base URL"
                        )
                    })?,
            };
            (fetched, base)
        }
        (None, Some(base)) => (blueprint::card_url(&base), base),
        (None, None) => bail!(
            "--from-card {source} reads a card from a file, which does not say where the \
             agent is: pass --url with its base URL (the card being at \
             URL/.well-known/agent-card.json)"
        ),
    };
    let doc: serde_json::Value = serde_json::from_str(&text).context("the card is not JSON")?;
    let found = card::problems(&doc);
    if !found.is_empty() {
        bail!("the card is not valid:\n  {}", found.join("\n  "));
    }
    let card = card::one_line(&heddle_core::card::parse_card(&doc)?)?;
    let slug = heddle_hub::registry::slug(&card.name);
    let id = agent_id(args.id.as_deref(), &card.name)?;
    let mut files = vec![(
        "BLUEPRINT.md".to_owned(),
        blueprint::render(&card, &card_url, &blueprint::Notes::default()),
    )];
    match args.target.unwrap_or(Target::HubToml) {
        Target::Manifest => {
            let (input, output) = hub::schemas_from_card(&card);
            let (doc, notes) = hub::manifest(&card, &base, &input, &output, &pricing(args))?;
            for note in notes {
                eprintln!("note: {note}");
            }
            files.push(("manifest.json".into(), pretty(&doc)?));
        }
        Target::HubToml => files.push((
            "hub-entry.toml".into(),
            hub::toml_entry(&card, &id, &card_url)?,
        )),
        Target::Crate => bail!("--from-card writes a blueprint and a hub entry, not a crate"),
    }
    let dir = out_dir(args, if slug.is_empty() { "agent" } else { &slug });
    write_all(&dir, &files)?;
    println!("wrote {} files to {}:", files.len(), dir.display());
    for (name, _) in &files {
        println!("  {name}");
    }
    Ok(ExitCode::SUCCESS)
}

mod hub;
mod schema;

fn pricing(args: &AgentArgs) -> hub::Pricing {
    hub::Pricing {
        model: args.price_model.clone(),
        rate: args.price,
        currency: args.currency.clone(),
    }
}

fn signing(args: &AgentArgs) -> anyhow::Result<Option<card::Signing>> {
    let Some(path) = &args.sign_key else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the key {path}"))?;
    let key = heddle_client::heddle_signing::SigningKey::from_file_text(
        &text,
        None,
        args.sign_kid.as_deref(),
    )
    .with_context(|| format!("the key {path}"))?;
    Ok(Some(card::Signing {
        key,
        jku: args.sign_jku.clone(),
    }))
}

/// `s` as a TOML basic string, for every TOML file written here: JSON's
/// escapes are TOML's, and DEL, which JSON leaves as it is and TOML does
/// not allow, is escaped too.
fn quote(s: &str) -> String {
    serde_json::to_string(s)
        .unwrap_or_else(|_| "\"\"".into())
        .replace('\u{7f}', "\\u007F")
}

fn pretty(v: &serde_json::Value) -> anyhow::Result<String> {
    Ok(format!("{}\n", serde_json::to_string_pretty(v)?))
}

/// Writes every file under `dir`, which must be new or empty: nothing of
/// someone's is overwritten.
fn write_all(dir: &Path, files: &[(String, String)]) -> anyhow::Result<()> {
    if dir.exists() {
        let mut entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        if entries.next().is_some() {
            bail!(
                "{} is not empty: choose another folder with --out",
                dir.display()
            );
        }
    }
    for (name, contents) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
