//! Each question of `heddle new agent`, answered by its flag when given,
//! else by the person at the form, else by its default. A flag is checked
//! like an answer; without a form, a missing answer with no default is an
//! error naming the flag.

use std::io::{BufRead, Write};

use anyhow::{Context, bail};

use super::{
    AgentArgs, Target,
    blueprint::Notes,
    form::Form,
    spec::{self, AgentSpec, Security, SkillSpec},
};

/// The questions, asked of `form` (or answered by defaults without one).
struct Asker<'a, R, W> {
    form: Option<&'a mut Form<R, W>>,
}

impl<R: BufRead, W: Write> Asker<'_, R, W> {
    /// The flag's value checked, else the form's answer, else the default.
    fn get<T>(
        &mut self,
        flag: Option<&str>,
        flag_name: &str,
        question: &str,
        default: Option<&str>,
        check: impl Fn(&str) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        if let Some(v) = flag {
            return check(v).with_context(|| format!("--{flag_name}"));
        }
        match (&mut self.form, default) {
            (Some(f), _) => f.ask(question, default, check),
            (None, Some(d)) => check(d).with_context(|| format!("the default of --{flag_name}")),
            (None, None) => bail!("--{flag_name} is required when nothing can be asked"),
        }
    }

    fn confirm(
        &mut self,
        flag: Option<bool>,
        question: &str,
        default: bool,
    ) -> anyhow::Result<bool> {
        match (flag, &mut self.form) {
            (Some(v), _) => Ok(v),
            (None, Some(f)) => f.confirm(question, default),
            (None, None) => Ok(default),
        }
    }

    fn say(&mut self, text: &str) -> anyhow::Result<()> {
        match &mut self.form {
            Some(f) => f.say(text),
            None => Ok(()),
        }
    }
}

/// Reads a `--skill` value: `key=value` fields separated by `|`.
pub fn skill_flag(value: &str) -> anyhow::Result<SkillSpec> {
    let mut s = SkillSpec::default();
    for field in value.split('|').map(str::trim).filter(|f| !f.is_empty()) {
        let (k, v) = field
            .split_once('=')
            .with_context(|| format!("{field:?} is not key=value"))?;
        let v = v.trim();
        match k.trim() {
            "id" => s.id = spec::skill_id(v)?,
            "name" => s.name = spec::text(v, "a skill name")?,
            "description" => s.description = spec::text(v, "a skill description")?,
            "tags" => s.tags = spec::list(v),
            "examples" | "example" => s.examples.push(spec::text(v, "an example")?),
            "input" => s.input_modes = spec::media_types(v)?,
            "output" => s.output_modes = spec::media_types(v)?,
            "input-schema" => s.input_schema = Some(spec::schema_file(v)?),
            "output-schema" => s.output_schema = Some(spec::schema_file(v)?),
            other => bail!(
                "unknown skill field {other:?} (id, name, description, tags, examples, input, \
                 output, input-schema, output-schema)"
            ),
        }
    }
    if s.id.is_empty() {
        bail!("a --skill needs id=…");
    }
    fill_skill_defaults(&mut s);
    Ok(s)
}

/// Name, description and tags from the id; media types from the schemas.
fn fill_skill_defaults(s: &mut SkillSpec) {
    if s.name.is_empty() {
        s.name = s.id.clone();
    }
    if s.description.is_empty() {
        s.description = s.name.clone();
    }
    if s.tags.is_empty() {
        s.tags = vec![s.id.clone()];
    }
    for (modes, schema) in [
        (&mut s.input_modes, s.input_schema.is_some()),
        (&mut s.output_modes, s.output_schema.is_some()),
    ] {
        if modes.is_empty() {
            modes.push("text/plain".into());
        }
        if schema && !modes.iter().any(|m| m == "application/json") {
            modes.push("application/json".into());
        }
    }
}

/// Asks for one skill on the form.
fn ask_skill<R: BufRead, W: Write>(
    f: &mut Form<R, W>,
    n: usize,
    suggested_id: &str,
) -> anyhow::Result<SkillSpec> {
    f.say(&format!("Skill {n}"))?;
    let id = f.ask("  id (no spaces)", Some(suggested_id), spec::skill_id)?;
    let name = f.ask("  name", Some(&id), |a| spec::text(a, "a skill name"))?;
    let description = f.ask("  description", Some(&name), |a| {
        spec::text(a, "a skill description")
    })?;
    let tags = f.ask("  tags, comma-separated", Some(&id), |a| {
        let t = spec::list(a);
        if t.is_empty() {
            bail!("give at least one tag");
        }
        Ok(t)
    })?;
    let examples = f.ask(
        "  example prompts, comma-separated (empty: none)",
        Some(""),
        |a| Ok(spec::list(a)),
    )?;
    let input_modes = f.ask("  input media types", Some("text/plain"), spec::media_types)?;
    let output_modes = f.ask(
        "  output media types",
        Some("text/plain"),
        spec::media_types,
    )?;
    let input_schema = f.ask(
        "  JSON Schema file for a data input (empty: none)",
        Some(""),
        |a| {
            if a.is_empty() {
                Ok(None)
            } else {
                spec::schema_file(a).map(Some)
            }
        },
    )?;
    let mut s = SkillSpec {
        id,
        name,
        description,
        tags,
        examples,
        input_modes,
        output_modes,
        input_schema,
        output_schema: None,
    };
    fill_skill_defaults(&mut s);
    Ok(s)
}

/// The agent's spec and what to write, from the flags and the form.
pub fn ask<R: BufRead, W: Write>(
    args: &AgentArgs,
    form: Option<&mut Form<R, W>>,
) -> anyhow::Result<(AgentSpec, Target)> {
    let mut a = Asker { form };
    a.say("A new A2A agent. Press Enter to take the [default].")?;
    let name = a.get(args.name.as_deref(), "name", "Agent name", None, |v| {
        spec::text(v, "the name")
    })?;
    let description = a.get(
        args.description.as_deref(),
        "description",
        "What does it do?",
        None,
        |v| spec::text(v, "the description"),
    )?;
    let version = a.get(
        args.agent_version.as_deref(),
        "agent-version",
        "Version",
        Some("1.0.0"),
        spec::version,
    )?;
    let provider_org = a.get(
        args.provider.as_deref(),
        "provider",
        "Provider organization (empty: none)",
        Some(""),
        |v| Ok(v.trim().to_owned()),
    )?;
    let provider = if provider_org.is_empty() {
        None
    } else {
        let url = a.get(
            args.provider_url.as_deref(),
            "provider-url",
            "Provider URL",
            None,
            |v| spec::endpoint(v, args.allow_http, "the provider URL"),
        )?;
        Some((provider_org, url))
    };

    let mut skills = Vec::new();
    for s in &args.skills {
        skills.push(skill_flag(s).with_context(|| format!("--skill {s:?}"))?);
    }
    if skills.is_empty() {
        match &mut a.form {
            Some(f) => loop {
                let suggested = if skills.is_empty() {
                    heddle_hub::registry::slug(&name)
                } else {
                    String::new()
                };
                skills.push(ask_skill(f, skills.len() + 1, &suggested)?);
                if !f.confirm("Add another skill?", false)? {
                    break;
                }
            },
            None => {
                // One skill standing for the whole agent.
                let mut s = SkillSpec {
                    id: heddle_hub::registry::slug(&name),
                    name: name.clone(),
                    description: description.clone(),
                    ..Default::default()
                };
                if s.id.is_empty() {
                    s.id = "main".into();
                }
                fill_skill_defaults(&mut s);
                skills.push(s);
            }
        }
    }

    let streaming = a.confirm(args.streaming, "Does it stream its answers?", true)?;
    let push = a.confirm(args.push, "Does it send push notifications?", false)?;
    let bindings = a.get(
        args.bindings.as_deref(),
        "bindings",
        "Bindings (jsonrpc, rest, grpc)",
        Some("jsonrpc,rest"),
        spec::bindings,
    )?;
    let v03 = args.v03 || a.confirm(None, "Also serve A2A v0.3 (older clients)?", false)?;
    let kind = a.get(
        args.security.as_deref(),
        "security",
        "Security: none, api-key, bearer-jwt, oauth2, mtls",
        Some("none"),
        |v| {
            let v = v.trim().to_ascii_lowercase();
            if Security::NAMES.contains(&v.as_str()) {
                Ok(v)
            } else {
                bail!("choose one of {}", Security::NAMES.join(", "))
            }
        },
    )?;
    let https = |what: &'static str| move |v: &str| spec::endpoint(v, args.allow_http, what);
    let security = match kind.as_str() {
        "api-key" => Security::ApiKey {
            header: a.get(
                args.api_key_header.as_deref(),
                "api-key-header",
                "API key header",
                Some("X-API-Key"),
                |v| {
                    let v = v.trim();
                    if v.is_empty()
                        || !v
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    {
                        bail!("a header name holds letters, digits, '-' and '_'");
                    }
                    Ok(v.to_owned())
                },
            )?,
        },
        "bearer-jwt" => Security::BearerJwt {
            issuer: a.get(
                args.jwt_issuer.as_deref(),
                "jwt-issuer",
                "JWT issuer (iss)",
                None,
                https("the issuer"),
            )?,
            audience: a.get(
                args.jwt_audience.as_deref(),
                "jwt-audience",
                "JWT audience (aud; empty: any)",
                Some(""),
                |v| Ok(v.trim().to_owned()),
            )?,
        },
        "oauth2" => {
            let token_url = a.get(
                args.token_url.as_deref(),
                "token-url",
                "OAuth 2.0 token URL",
                None,
                https("the token URL"),
            )?;
            let scopes = if args.scopes.is_empty() {
                a.get(None, "scope", "Scopes, comma-separated", Some("a2a"), |v| {
                    Ok(spec::list(v))
                })?
            } else {
                args.scopes.clone()
            };
            let suggested = url::Url::parse(&token_url)
                .ok()
                .map(|u| format!("{}/.well-known/jwks.json", u.origin().ascii_serialization()));
            let jwks_url = a.get(
                args.jwks_url.as_deref(),
                "jwks-url",
                "The issuer's JWKS URL",
                suggested.as_deref(),
                https("the JWKS URL"),
            )?;
            Security::OAuth2 {
                token_url,
                scopes,
                jwks_url,
            }
        }
        "mtls" => Security::Mtls,
        _ => Security::None,
    };
    let default_url = if security == Security::Mtls {
        "https://localhost:8443"
    } else {
        "http://127.0.0.1:8080"
    };
    let base_url = a.get(
        args.url.as_deref(),
        "url",
        "Where will it run? Its base URL",
        Some(default_url),
        https("the agent's URL"),
    )?;
    let grpc_addr = if bindings.grpc {
        let host = url::Url::parse(&base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_else(|| "127.0.0.1".into());
        let suggested = format!("{host}:50051");
        a.get(
            args.grpc_addr.as_deref(),
            "grpc-addr",
            "gRPC address callers dial (host:port)",
            Some(&suggested),
            spec::grpc_addr,
        )?
    } else {
        String::new()
    };
    let target = match args.target {
        Some(t) => t,
        None => a.get(
            None,
            "target",
            "Write a Rust crate, a hub TOML entry or an a2ahub manifest? (crate, hub-toml, manifest)",
            Some("crate"),
            |v| match v.trim() {
                "crate" => Ok(Target::Crate),
                "hub-toml" | "toml" => Ok(Target::HubToml),
                "manifest" => Ok(Target::Manifest),
                _ => bail!("choose crate, hub-toml or manifest"),
            },
        )?,
    };
    let spec = AgentSpec {
        name,
        description,
        version,
        provider,
        skills,
        streaming,
        push,
        bindings,
        v03,
        security,
        base_url,
        grpc_addr,
    };
    Ok((spec, target))
}

/// What the blueprint adds for an agent laid out here: how to get
/// credentials for its scheme, and the states its skeleton goes through.
pub fn notes(spec: &AgentSpec, target: Target) -> Notes {
    let mut credentials = Vec::new();
    let in_crate = target == Target::Crate;
    match &spec.security {
        Security::None => {}
        Security::ApiKey { .. } if in_crate => credentials.push(
            "Make a key in the crate's folder, where `agent.toml` looks for it (printed once; the \
             agent keeps only its hash):\n\n```sh\nexport A2A_API_KEY=$(heddle keys create --name me \
             --store sqlite:keys.db)\n```"
                .into(),
        ),
        Security::BearerJwt { issuer, .. } if in_crate => credentials.push(format!(
            "Tokens are HS256 JWTs with `iss` = `{issuer}`, signed with the secret the agent reads \
             from `$AGENT_JWT_SECRET`; put the token in `$A2A_TOKEN`."
        )),
        Security::Mtls if in_crate => credentials.push(
            "The agent reads `tls/server.pem`, `tls/server.key` and `tls/ca.pem` (see `agent.toml`); \
             client certificates must come from that CA."
                .into(),
        ),
        _ => credentials.push("Ask the agent's operator for credentials.".into()),
    }
    let mut states = Vec::new();
    if in_crate {
        states.push(format!(
            "The generated skeleton answers a message with {}`COMPLETED` and a `result` artifact, \
             `INPUT_REQUIRED` when the message has no text, and `CANCELED` when canceled.",
            if spec.streaming {
                "`WORKING`, then "
            } else {
                ""
            }
        ));
    }
    Notes {
        credentials,
        states,
    }
}
