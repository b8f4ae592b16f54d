//! API keys: created once and shown once, stored only as argon2 hashes.
//!
//! A key reads `hdk_{id}_{secret}`: the `id` (16 hex digits) finds its row
//! without scanning, the secret (32 random bytes, base64url) is what argon2
//! protects. A key that verified is remembered under its SHA-256 for
//! [`ApiKeys::cache_ttl`], so the hot path costs a hash and a map lookup; a
//! revocation through the same [`ApiKeys`] takes effect at once, one made by
//! another process (the `heddle keys revoke` command) within the TTL.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use argon2::{
    Argon2, PasswordHash, PasswordHasher, PasswordVerifier,
    password_hash::{SaltString, rand_core::OsRng},
};
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::AuthError;

/// The prefix of every key this module issues.
pub const KEY_PREFIX: &str = "hdk_";

/// One stored key (no secret: only its hash).
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// Public id, part of the key.
    pub id: String,
    /// Human name, unique among active keys; the caller id is `key:{name}`.
    pub name: String,
    /// argon2id PHC string of the whole key.
    pub hash: String,
    /// Seconds since the epoch.
    pub created_at: i64,
    /// Seconds since the epoch, when revoked.
    pub revoked_at: Option<i64>,
}

impl std::fmt::Debug for KeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRecord")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("hash", &"<redacted>")
            .field("created_at", &self.created_at)
            .field("revoked_at", &self.revoked_at)
            .finish()
    }
}

/// A key as handed to its owner, once. Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct NewKey(String);

impl NewKey {
    /// The key, to print once.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NewKey(<redacted>)")
    }
}

/// Where key records live. Calls block (SQLite); [`ApiKeys`] runs them off
/// the async executor.
pub trait KeyStore: Send + Sync + 'static {
    /// Adds a record; fails if an active key has the same name.
    fn insert(&self, record: &KeyRecord) -> Result<(), AuthError>;
    /// The record with `id`, revoked or not.
    fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError>;
    /// Every record, oldest first.
    fn list(&self) -> Result<Vec<KeyRecord>, AuthError>;
    /// Revokes the active key named `name_or_id` (a name or an id); the revoked records.
    fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError>;
}

/// Keys in memory (tests, embedded servers).
#[derive(Debug, Default)]
pub struct MemoryKeyStore {
    rows: Mutex<Vec<KeyRecord>>,
}

impl MemoryKeyStore {
    fn rows(&self) -> std::sync::MutexGuard<'_, Vec<KeyRecord>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl KeyStore for MemoryKeyStore {
    fn insert(&self, record: &KeyRecord) -> Result<(), AuthError> {
        let mut rows = self.rows();
        if rows
            .iter()
            .any(|r| r.name == record.name && r.revoked_at.is_none())
        {
            return Err(AuthError::Config(format!(
                "an active key is already named {:?}",
                record.name
            )));
        }
        rows.push(record.clone());
        Ok(())
    }

    fn get(&self, id: &str) -> Result<Option<KeyRecord>, AuthError> {
        Ok(self.rows().iter().find(|r| r.id == id).cloned())
    }

    fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        Ok(self.rows().clone())
    }

    fn revoke(&self, name_or_id: &str, at: i64) -> Result<Vec<KeyRecord>, AuthError> {
        let mut out = Vec::new();
        for r in self.rows().iter_mut() {
            if r.revoked_at.is_none() && (r.name == name_or_id || r.id == name_or_id) {
                r.revoked_at = Some(at);
                out.push(r.clone());
            }
        }
        Ok(out)
    }
}

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteKeyStore;

struct Cached {
    id: String,
    name: String,
    at: Instant,
}

/// Most verified keys remembered at once (the cache is cleared when full).
const CACHE_MAX: usize = 10_000;

/// Issues, verifies and revokes API keys over a [`KeyStore`].
#[derive(Clone)]
pub struct ApiKeys {
    store: Arc<dyn KeyStore>,
    cache: Arc<Mutex<HashMap<[u8; 32], Cached>>>,
    ttl: Duration,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeys")
            .field("cache_ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AuthError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AuthError::Unavailable(format!("key check did not finish: {e}")))?
}

impl ApiKeys {
    /// Keys in `store`, verified results cached for 60 s.
    pub fn new(store: Arc<dyn KeyStore>) -> Self {
        Self {
            store,
            cache: Arc::default(),
            ttl: Duration::from_secs(60),
        }
    }

    /// How long a verified key is trusted without reading its row again
    /// (bounds how late another process's revocation is seen).
    #[must_use]
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Cached>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new key named `name`: the record as stored, and the key, to show once.
    pub async fn create(&self, name: &str) -> Result<(KeyRecord, NewKey), AuthError> {
        let name = name.trim();
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return Err(AuthError::Config(
                "a key name is 1 to 64 printable characters".into(),
            ));
        }
        let id = format!("{:016x}", rand::random::<u64>());
        let secret: [u8; 32] = rand::random();
        let key = format!(
            "{KEY_PREFIX}{id}_{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        let record = {
            let key = key.clone();
            let (id, name) = (id.clone(), name.to_owned());
            blocking(move || {
                let salt = SaltString::generate(&mut OsRng);
                let hash = Argon2::default()
                    .hash_password(key.as_bytes(), &salt)
                    .map_err(|e| AuthError::Config(format!("hashing the key: {e}")))?
                    .to_string();
                Ok(KeyRecord {
                    id,
                    name,
                    hash,
                    created_at: now_secs(),
                    revoked_at: None,
                })
            })
            .await?
        };
        let store = self.store.clone();
        let r = record.clone();
        blocking(move || store.insert(&r)).await?;
        Ok((record, NewKey(key)))
    }

    /// Every key record, oldest first.
    pub async fn list(&self) -> Result<Vec<KeyRecord>, AuthError> {
        let store = self.store.clone();
        blocking(move || store.list()).await
    }

    /// Revokes the key named (or with id) `name_or_id`; the revoked records
    /// (empty when none matched).
    pub async fn revoke(&self, name_or_id: &str) -> Result<Vec<KeyRecord>, AuthError> {
        let store = self.store.clone();
        let target = name_or_id.to_owned();
        let revoked = blocking(move || store.revoke(&target, now_secs())).await?;
        self.cache()
            .retain(|_, c| !revoked.iter().any(|r| r.id == c.id));
        Ok(revoked)
    }

    /// The principal name (`key:{name}`) of a valid, unrevoked key.
    pub async fn verify(&self, key: &str) -> Result<String, AuthError> {
        let bad = || AuthError::Invalid("unknown or revoked API key".into());
        let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        if let Some(c) = self.cache().get(&digest)
            && c.at.elapsed() < self.ttl
        {
            return Ok(format!("key:{}", c.name));
        }
        let Some((id, _)) = key
            .strip_prefix(KEY_PREFIX)
            .and_then(|rest| rest.split_once('_'))
        else {
            return Err(bad());
        };
        if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let store = self.store.clone();
        let id_owned = id.to_owned();
        let record = blocking(move || store.get(&id_owned)).await?;
        let Some(record) = record.filter(|r| r.revoked_at.is_none()) else {
            self.cache().remove(&digest);
            return Err(bad());
        };
        let key = key.to_owned();
        let hash = record.hash.clone();
        let ok = blocking(move || {
            let parsed = PasswordHash::new(&hash)
                .map_err(|e| AuthError::Unavailable(format!("stored key hash unreadable: {e}")))?;
            Ok(Argon2::default()
                .verify_password(key.as_bytes(), &parsed)
                .is_ok())
        })
        .await?;
        if !ok {
            return Err(bad());
        }
        let mut cache = self.cache();
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        cache.insert(
            digest,
            Cached {
                id: record.id.clone(),
                name: record.name.clone(),
                at: Instant::now(),
            },
        );
        Ok(format!("key:{}", record.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ApiKeys {
        ApiKeys::new(Arc::new(MemoryKeyStore::default()))
    }

    #[tokio::test]
    async fn a_created_key_verifies_and_is_stored_only_as_a_hash() {
        let k = keys();
        let (record, key) = k.create("ci").await.expect("create");
        assert!(key.expose().starts_with(KEY_PREFIX));
        assert!(record.hash.starts_with("$argon2id$"));
        assert!(!record.hash.contains(key.expose()));
        assert!(!format!("{record:?}{key:?}").contains(key.expose()));
        assert_eq!(k.verify(key.expose()).await.as_deref(), Ok("key:ci"));
        // Second time from the cache.
        assert_eq!(k.verify(key.expose()).await.as_deref(), Ok("key:ci"));
    }

    #[tokio::test]
    async fn a_revoked_key_is_refused_at_once() {
        let k = keys();
        let (_, key) = k.create("ci").await.expect("create");
        k.verify(key.expose()).await.expect("valid first");
        assert_eq!(k.revoke("ci").await.expect("revoke").len(), 1);
        assert!(matches!(
            k.verify(key.expose()).await,
            Err(AuthError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn a_key_revoked_elsewhere_is_refused_once_the_cache_expires() {
        let store = Arc::new(MemoryKeyStore::default());
        let k = ApiKeys::new(store.clone()).cache_ttl(Duration::from_millis(50));
        let (record, key) = k.create("ci").await.expect("create");
        k.verify(key.expose()).await.expect("valid first");
        store.revoke(&record.id, 1).expect("revoke behind its back");
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert!(k.verify(key.expose()).await.is_err());
    }

    #[tokio::test]
    async fn wrong_secrets_and_malformed_keys_are_refused() {
        let k = keys();
        let (record, key) = k.create("ci").await.expect("create");
        let forged = format!("{KEY_PREFIX}{}_AAAA", record.id);
        for bad in [
            forged.as_str(),
            "",
            "hdk_",
            "hdk_zz_zz",
            "not-a-key",
            &key.expose()[..key.expose().len() - 1],
        ] {
            assert!(k.verify(bad).await.is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn names_are_unique_among_active_keys() {
        let k = keys();
        k.create("ci").await.expect("create");
        assert!(k.create("ci").await.is_err());
        k.revoke("ci").await.expect("revoke");
        k.create("ci").await.expect("the name is free again");
    }
}
