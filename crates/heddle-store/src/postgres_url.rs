//! Connection settings for [`crate::PostgresStore`]: Heddle's own `schema`
//! URL parameter, the schema's creation, and URLs shown without their
//! password.

use crate::StoreError;
use crate::postgres::db;

/// Longest schema name PostgreSQL keeps (NAMEDATALEN - 1).
const MAX_SCHEMA_LEN: usize = 63;

/// `CREATE SCHEMA IF NOT EXISTS`, tolerating a concurrent creator (two
/// replicas starting together can both pass the `IF NOT EXISTS`).
pub(crate) async fn create_schema(
    conn: &mut sqlx::PgConnection,
    schema: &str,
) -> Result<(), StoreError> {
    // The name was checked to be a plain identifier: no quoting to escape.
    let sql = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    match sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut *conn)
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
                    .bind(schema)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db)?;
            if exists { Ok(()) } else { Err(db(e)) }
        }
    }
}

/// A schema name Heddle can put in SQL unquoted-safe: ASCII letters, digits
/// and `_`, not starting with a digit.
pub(crate) fn check_schema(schema: &str) -> Result<(), StoreError> {
    let ok = !schema.is_empty()
        && schema.len() <= MAX_SCHEMA_LEN
        && schema
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(StoreError::Database(format!(
            "invalid schema name {schema:?}: use ASCII letters, digits and _"
        )))
    }
}

/// Takes Heddle's own `schema=NAME` query parameter out of `url` (libpq
/// and sqlx do not know it), so a `--store` URL alone can name the schema.
pub(crate) fn split_schema(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.strip_prefix("schema=") {
            Some(name) => {
                schema = Some(name.to_owned());
                false
            }
            None => !pair.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, schema)
}

/// `url` with the password of its user info and any `password=` query
/// parameter replaced by `***`, for banners and logs.
pub fn redact_url(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
            let authority = match authority.rsplit_once('@') {
                Some((user_info, host)) => match user_info.split_once(':') {
                    Some((user, _)) => format!("{user}:***@{host}"),
                    None => authority.to_owned(),
                },
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => head.to_owned(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_the_display_url() {
        for (url, shown) in [
            (
                "postgres://u:secret@h:5432/db",
                "postgres://u:***@h:5432/db",
            ),
            (
                "postgresql://u:p%40ss@h/db?sslmode=require",
                "postgresql://u:***@h/db?sslmode=require",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
            (
                "postgres://h/db?user=u&password=pw",
                "postgres://h/db?user=u&password=***",
            ),
            ("postgres://u:a@b@h/db", "postgres://u:***@h/db"),
        ] {
            assert_eq!(redact_url(url), shown);
            assert!(!redact_url(url).contains("secret"));
        }
    }

    #[test]
    fn the_schema_parameter_is_heddles_own() {
        assert_eq!(
            split_schema("postgres://h/db?schema=s1&sslmode=disable"),
            ("postgres://h/db?sslmode=disable".into(), Some("s1".into()))
        );
        assert_eq!(
            split_schema("postgres://h/db?schema=s1"),
            ("postgres://h/db".into(), Some("s1".into()))
        );
        assert_eq!(
            split_schema("postgres://h/db"),
            ("postgres://h/db".into(), None)
        );
        assert!(check_schema("heddle_test_1").is_ok());
        for bad in ["", "1abc", "a-b", "a\"b", "a b", &"x".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad:?} accepted");
        }
    }
}
