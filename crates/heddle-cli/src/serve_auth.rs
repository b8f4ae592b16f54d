//! Authentication for `heddle serve`: `--require-auth` and the `[auth]`
//! table of `--config FILE` become a `heddle_auth::Authenticator`.

use std::path::Path;

use anyhow::Context;
use heddle_auth::{AuthConfig, Authenticator};

/// The `[auth]` table of a config file (other tables are for other features).
pub fn read_config(path: &Path) -> anyhow::Result<Option<AuthConfig>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the config file {}", path.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    let Some(auth) = table.remove("auth") else {
        return Ok(None);
    };
    let auth: AuthConfig = auth
        .try_into()
        .with_context(|| format!("the [auth] table of {}", path.display()))?;
    Ok(Some(auth))
}

/// The authenticator `heddle serve` runs with and lines describing it for
/// the start-up banner, or `None` for an open server. Auth is on with
/// `--require-auth` or an `[auth]` table; API keys come from the key table in
/// `store`'s SQLite file (see `heddle keys`).
pub async fn authenticator(
    require: bool,
    config: Option<&Path>,
    store: Option<&str>,
) -> anyhow::Result<Option<(Authenticator, Vec<String>)>> {
    let file = match config {
        Some(p) => read_config(p)?,
        None => None,
    };
    if !require && file.is_none() {
        return Ok(None);
    }
    let cfg = file.unwrap_or_default();
    let mut lines = Vec::new();
    let keys = if cfg.api_keys.enabled {
        let path = crate::keys::key_db(store)?;
        let keys = crate::keys::open(&path).await?;
        let all = keys.list().await?;
        let active: Vec<_> = all.iter().filter(|k| k.revoked_at.is_none()).collect();
        lines.push(format!(
            "  auth           API keys in the `{}` {} ({} active in {}; `heddle keys create --name NAME` adds one)",
            cfg.api_keys.name,
            cfg.api_keys.location,
            active.len(),
            path
        ));
        let legacy: Vec<_> = active
            .iter()
            .filter(|k| k.has_legacy_hash())
            .map(|k| format!("{} ({})", k.name, k.id))
            .collect();
        if !legacy.is_empty() {
            lines.push(format!(
                "  auth           refused: {} stored as argon2 by an older heddle; \
                 `heddle keys revoke ID`, then `heddle keys create --name NAME`",
                legacy.join(", ")
            ));
        }
        Some(keys)
    } else {
        None
    };
    if let Some(jwt) = &cfg.jwt {
        lines.push(format!(
            "  auth           bearer JWTs{}{}",
            jwt.issuer
                .as_deref()
                .or(jwt.oidc_issuer.as_deref())
                .map(|i| format!(" from {i}"))
                .unwrap_or_default(),
            if jwt.audience.is_empty() {
                String::new()
            } else {
                format!(" for {}", jwt.audience.join(", "))
            }
        ));
    }
    let auth = cfg
        .build(keys)
        .context("setting up authentication (--require-auth / [auth])")?;
    Ok(Some((auth, lines)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_table_is_read_and_other_tables_are_left_alone() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("heddle.toml");
        std::fs::write(
            &path,
            r#"
[tls]
cert = "elsewhere"

[auth.api_keys]
location = "query"
name = "key"

[auth.jwt]
issuer = "https://issuer.test"
audience = ["https://agents.test"]
leeway_secs = 5

[[auth.jwt.keys]]
alg = "HS256"
secret = "0123456789abcdef0123456789abcdef"
"#,
        )
        .expect("write");
        let cfg = read_config(&path).expect("read").expect("[auth]");
        assert_eq!(cfg.api_keys.location, "query");
        let jwt = cfg.jwt.as_ref().expect("jwt");
        assert_eq!(jwt.leeway_secs, Some(5));
        assert!(
            !format!("{cfg:?}").contains("0123456789abcdef"),
            "secrets redacted"
        );
        jwt.build().expect("a verifier");
    }

    #[test]
    fn unknown_auth_settings_are_an_error_not_ignored() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("heddle.toml");
        std::fs::write(&path, "[auth.jwt]\nissuer = \"x\"\naudiance = [\"typo\"]\n")
            .expect("write");
        assert!(read_config(&path).is_err());
    }

    #[tokio::test]
    async fn the_banner_names_keys_stored_as_argon2_by_an_older_heddle() {
        use heddle_auth::apikey::{KeyRecord, KeyStore, SqliteKeyStore};
        let dir = tempfile::tempdir().expect("tmp");
        let db = dir.path().join("heddle.db");
        SqliteKeyStore::open(&db)
            .expect("open")
            .insert(&KeyRecord {
                id: "00000000000000aa".into(),
                name: "old-ci".into(),
                hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
                created_at: 1,
                revoked_at: None,
            })
            .await
            .expect("insert");
        let store = format!("sqlite:{}", db.display());
        let (_, lines) = authenticator(true, None, Some(&store))
            .await
            .expect("auth")
            .expect("on");
        let banner = lines.join("\n");
        assert!(
            banner.contains("old-ci (00000000000000aa)") && banner.contains("argon2"),
            "{banner}"
        );
    }
}
